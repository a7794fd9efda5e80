"""Issue 31's in-process measure of the sequence and subject index: RSS bytes per stored message and
per distinct subject, and CPU µs per ``store_msg``, of a file store (16-byte payloads, which stay in
the page cache, not in the process: the RSS growth is the index).

    .venv/bin/python bench/bench_index_memory.py [--msgs N] [--subjects K] [--tree DIR] [--rounds R]

Each figure comes from a fresh interpreter (``--tree DIR``: the ``src`` of another checkout, for
before/after; both trees alternate when ``--tree`` is given twice). Two shapes: N messages on one
subject (bytes per message) and K messages on K distinct subjects (bytes per subject, the
per-message part included); then the store is closed and reopened from ``index.db`` (CPU s of the
open). Medians of ``--rounds`` (default 3). ``--puts``: CPU µs per ``store_msg`` of the index alone
instead (a memory store; KV history 1 over 1,000 keys, and 100 subjects). Nothing is asserted.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import gc, json, os, shutil, sys, tempfile, time
from natsd.clock import ManualClock
from natsd.store.base import StoreConfig
from natsd.store.file.stream_store import FileStreamStore

def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

n, distinct = int(sys.argv[1]), sys.argv[2] == "1"
d = tempfile.mkdtemp(prefix="bench-index-mem-")
clock = ManualClock()
names = [f"dev.{i}.temp" for i in range(n)] if distinct else None
st = FileStreamStore(StoreConfig(name="S", subjects=[">"]), clock, d)
gc.collect()
r0 = rss()
payload = b"x" * 16
t0 = time.process_time()
store, flush = st.store_msg, st.flush
for i in range(n):
    store(names[i] if distinct else "one.subject", None, payload)
    if i % 1000 == 999:
        flush()
cpu = time.process_time() - t0
flush()
gc.collect()
grown = rss() - r0
st.stop()
del st
gc.collect()
t0 = time.process_time()
st = FileStreamStore(StoreConfig(name="S", subjects=[">"]), clock, d)
reopen = time.process_time() - t0
assert st.state().msgs == n
st.stop()
shutil.rmtree(d, ignore_errors=True)
print(json.dumps({"bytes": grown / n, "us": cpu / n * 1e6, "reopen": reopen}))
"""


PUTS = r"""
import json, time
from natsd.clock import ManualClock
from natsd.store.base import StoreConfig
from natsd.store.memory import MemoryStreamStore

def run(maxp, nsubj, n=100_000):
    cfg = StoreConfig(name="S", subjects=[">"], max_msgs_per_subject=maxp, storage="memory")
    st = MemoryStreamStore(cfg, ManualClock())
    subs = [f"$KV.B.k{i}" for i in range(nsubj)]
    store, p = st.store_msg, b"x" * 16
    t = time.process_time()
    for i in range(n):
        store(subs[i % nsubj], None, p)
    return (time.process_time() - t) / n * 1e6

best = {}
for _ in range(9):
    for k, (m, s) in {"kv1000": (1, 1000), "subjects100": (0, 100)}.items():
        best[k] = min(best.get(k, 1e9), run(m, s))
print(json.dumps(best))
"""


def puts(trees: list[Path], rounds: int) -> None:
    """``--puts``: CPU µs per ``store_msg`` of the index alone (a memory store): KV history 1 over
    1,000 keys (each put removes the key's previous message), and 100 subjects without limits;
    best of 9 passes per interpreter, medians over ``rounds`` interpreters per tree, alternating."""
    res: dict[Path, list[dict]] = {t: [] for t in trees}
    for r in range(rounds):
        for t in trees if r % 2 == 0 else trees[::-1]:
            env = dict(os.environ, PYTHONPATH=str(t / "src"))
            out = subprocess.run([sys.executable, "-c", PUTS], env=env, capture_output=True, text=True, check=True)
            res[t].append(json.loads(out.stdout))
    for t in trees:
        med = {k: statistics.median(x[k] for x in res[t]) for k in res[t][0]}
        print(f"  {str(t):40} " + "   ".join(f"{k} {v:5.2f} µs/put" for k, v in med.items()))


def run(tree: Path, n: int, distinct: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(n), "1" if distinct else "0"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def main() -> None:
    args = sys.argv[1:]
    trees: list[Path] = []
    msgs, subjects, rounds = 2_000_000, 1_000_000, 3
    while args:
        a = args.pop(0)
        if a == "--tree":
            trees.append(Path(args.pop(0)).resolve())
        elif a == "--msgs":
            msgs = int(args.pop(0))
        elif a == "--subjects":
            subjects = int(args.pop(0))
        elif a == "--rounds":
            rounds = int(args.pop(0))
        elif a == "--one":  # the one-subject shape alone (store_msg CPU)
            subjects = 0
        elif a == "--puts":
            msgs = 0
    trees = trees or [ROOT]
    if not msgs:
        puts(trees, rounds)
        return
    shapes = [("per message, one subject", msgs, False), ("per subject, one message each", subjects, True)]
    for label, n, distinct in shapes[: 2 if subjects else 1]:
        res: dict[Path, list[dict]] = {t: [] for t in trees}
        for r in range(rounds):
            for t in trees if r % 2 == 0 else trees[::-1]:
                res[t].append(run(t, n, distinct))
        print(f"{label} ({n:,}), medians of {rounds}:")
        for t in trees:
            med = {k: statistics.median(x[k] for x in res[t]) for k in ("bytes", "us", "reopen")}
            print(
                f"  {str(t):40} RSS {med['bytes']:7.1f} B   store_msg {med['us']:6.2f} µs   "
                f"reopen {med['reopen']:6.2f} s CPU"
            )


if __name__ == "__main__":
    main()
