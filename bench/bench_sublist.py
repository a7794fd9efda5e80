"""Sublist match throughput: warm-cache lookups, cold (no-cache) trie walks, insert/remove.

Target (issue 2): warm cached match >= 1M lookups/s. Run:

    .venv/bin/python bench/bench_sublist.py [--subs 10000] [--lookups 1000000]

The subscription set mimics a busy server: many literal subjects, some `*` and `>` wildcards,
and queue groups; lookups cycle over a working set smaller than the cache (1024), as a server
with a stable set of hot subjects sees.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from natsd.subjects.sublist import Sublist  # noqa: E402


class Sub:
    __slots__ = ("sid",)

    def __init__(self, sid: int) -> None:
        self.sid = sid


def build(n: int, cache: bool, rng: random.Random) -> tuple[Sublist, list[str]]:
    sl: Sublist = Sublist(cache=cache)
    literals = []
    for i in range(n):
        subj = f"svc.{rng.randrange(50)}.{rng.randrange(200)}.evt{i % 97}"
        literals.append(subj)
        r = rng.random()
        if r < 0.8:
            sl.insert(subj, Sub(i))
        elif r < 0.9:
            sl.insert(subj.rsplit(".", 1)[0] + ".*", Sub(i))
        elif r < 0.95:
            sl.insert(subj.split(".", 2)[0] + "." + subj.split(".")[1] + ".>", Sub(i))
        else:
            sl.insert(subj, Sub(i), queue=f"q{i % 3}")
    return sl, literals


def timed(fn, count: int) -> float:
    t0 = time.perf_counter()
    fn()
    return count / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subs", type=int, default=10_000)
    ap.add_argument("--lookups", type=int, default=1_000_000)
    ap.add_argument("--hot", type=int, default=500, help="working-set size (subjects looked up)")
    args = ap.parse_args()
    rng = random.Random(1)

    sl, literals = build(args.subs, True, rng)
    hot = rng.sample(literals, min(args.hot, len(literals)))
    for s in hot:
        sl.match(s)  # warm
    reps = max(1, args.lookups // len(hot))
    match = sl.match

    def warm():
        for _ in range(reps):
            for s in hot:
                match(s)

    warm_rate = timed(warm, reps * len(hot))

    nsl, _ = build(args.subs, False, random.Random(1))
    cold_n = min(args.lookups // 10, 200_000)
    cold_subjects = [hot[i % len(hot)] for i in range(cold_n)]
    nmatch = nsl.match

    def cold():
        for s in cold_subjects:
            nmatch(s)

    cold_rate = timed(cold, cold_n)

    churn = Sublist()
    items = [(f"inbox.{i}.x", Sub(i)) for i in range(50_000)]

    def ins_rem():
        for s, it in items:
            churn.insert(s, it)
        for s, it in items:
            churn.remove(s, it)

    churn_rate = timed(ins_rem, 2 * len(items))

    print(f"subs={args.subs} hot={len(hot)}")
    print(f"warm cached match : {warm_rate / 1e6:6.2f} M lookups/s  (target >= 1.0)")
    print(f"no-cache match    : {cold_rate / 1e3:6.1f} K lookups/s")
    print(f"insert+remove     : {churn_rate / 1e3:6.1f} K ops/s")
    print(f"stats             : {sl.stats()}")
    return 0 if warm_rate >= 1e6 else 1


if __name__ == "__main__":
    raise SystemExit(main())
