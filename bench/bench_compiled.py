"""What the opt-in compiled build (natsd/_compiled.py, ``make compiled``) pays: CPU per message,
pure Python against the compiled modules, in-process, alternating.

Each round runs, once with pure Python and once with ``NATSD_COMPILED=<build>`` (order alternating
round by round), in fresh interpreters:

* ``bench/bench_writer.py``: a real Server over fake transports, parser to ``transport.write``
  (fan-out, runs, replies, queue groups, headers), µs of CPU per delivered message;
* ``bench/bench_parser.py``: the parser alone, per input shape, µs per message;
* ``bench/bench_sublist.py``: Sublist matches (warm cache, no cache) and insert+remove, µs per
  operation (wall clock: the noisiest of the three).

It prints the median of each figure over the rounds, compiled/pure and the CPU saved. A run with
the build not in use (stale, missing) stops with the reason instead of comparing pure with pure.

    .venv/bin/python bench/bench_compiled.py [--build build/compiled] [--rounds 3]
    make bench-compiled                           # builds first

``--core N`` adds the end-to-end core pub->sub workload (``bench/bin/jsbench core``, N messages of
128 B) against a natsd subprocess, reporting the server's CPU µs per message (user+sys from
/proc/<pid>/stat around the run) and msgs/s. For ratios against nats-server run bench/run.py and
bench/run_wide.py with and without NATSD_COMPILED in their environment (the server subprocess
inherits it), alternating.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHES = {
    "writer": [str(ROOT / "bench" / "bench_writer.py")],
    "parser": [str(ROOT / "bench" / "bench_parser.py")],
    "sublist": [str(ROOT / "bench" / "bench_sublist.py"), "--lookups", "500000"],
}
_US = re.compile(r"^(\S+)\s+([0-9.]+) us/msg$")
_SUBLIST = {
    "warm cached match": "sublist_warm_match",
    "no-cache match": "sublist_cold_match",
    "insert+remove": "sublist_insert_remove",
}
_RATE = re.compile(r"^(.+?)\s*:\s*([0-9.]+) (M|K) ")


def run(bench: str, env: dict) -> dict[str, float]:
    out = subprocess.run([sys.executable, *BENCHES[bench]], env=env, capture_output=True, text=True, timeout=900)
    if bench != "sublist" and out.returncode != 0:
        raise SystemExit(f"{bench} failed:\n{out.stderr}")
    res = {}
    for line in out.stdout.splitlines():
        m = _US.match(line.strip())
        if m:
            res[f"{bench}:{m.group(1)}"] = float(m.group(2))
            continue
        m = _RATE.match(line.strip())
        if m and m.group(1) in _SUBLIST:
            rate = float(m.group(2)) * (1e6 if m.group(3) == "M" else 1e3)
            res[f"sublist:{_SUBLIST[m.group(1)]}"] = 1e6 / rate  # µs per operation
    return res


def run_core(env: dict, n: int) -> dict[str, float]:
    """natsd as a subprocess driven by jsbench's core workload; server CPU per message and rate."""
    import socket
    import time

    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "natsd", "-a", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("natsd did not start")
                time.sleep(0.05)

        def cpu() -> float:
            f = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

        c0 = cpu()
        out = subprocess.run(
            [str(ROOT / "bench" / "bin" / "jsbench"), f"nats://127.0.0.1:{port}", "core", str(n), "128"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        c1 = cpu()
    finally:
        proc.terminate()
        proc.wait(10)
    rate = float("nan")
    for tok in out.stdout.split():
        if tok.startswith("rate="):
            rate = float(tok[5:])
    return {"core_e2e:server_cpu_us_per_msg": (c1 - c0) / n * 1e6, "core_e2e:msgs_per_s(higher=better)": rate}


def check_active(env: dict, want: bool) -> None:
    code = "import natsd._compiled as c; print(c.STATUS['active'], c.STATUS['reason'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    active = out.stdout.startswith("True")
    if active != want:
        raise SystemExit(f"compiled build {'not ' if want else ''}in use: {out.stdout.strip()} {out.stderr.strip()}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", type=Path, default=ROOT / "build" / "compiled")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=sorted(BENCHES), action="append", help="run only these benches")
    ap.add_argument("--core", type=int, default=0, metavar="N", help="also the end-to-end core workload, N messages")
    a = ap.parse_args()
    base = {k: v for k, v in os.environ.items() if k != "NATSD_COMPILED"}
    base["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + base["PYTHONPATH"] if base.get("PYTHONPATH") else "")
    envs = {"pure": base, "compiled": {**base, "NATSD_COMPILED": str(a.build.resolve())}}
    check_active(envs["pure"], False)
    check_active(envs["compiled"], True)
    figures: dict[str, dict[str, list[float]]] = {"pure": {}, "compiled": {}}
    for r in range(a.rounds):
        order = ["pure", "compiled"] if r % 2 == 0 else ["compiled", "pure"]
        for bench in a.only or BENCHES:
            for kind in order:
                for k, v in run(bench, envs[kind]).items():
                    figures[kind].setdefault(k, []).append(v)
        if a.core:
            for kind in order:
                for k, v in run_core(envs[kind], a.core).items():
                    figures[kind].setdefault(k, []).append(v)
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    print(
        f"{'figure (µs per message/op, median of ' + str(a.rounds) + ')':<44} {'pure':>8} {'compiled':>9} "
        f"{'comp/pure':>9} {'CPU saved':>9}"
    )
    for k in figures["pure"]:
        p = statistics.median(figures["pure"][k])
        c = statistics.median(figures["compiled"].get(k, [float("nan")]))
        saved = "" if "msgs_per_s" in k else f"{(1 - c / p) * 100:8.0f}%"  # a rate: higher is better
        print(f"{k:<44} {p:8.3f} {c:9.3f} {c / p:9.2f} {saved:>9}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
