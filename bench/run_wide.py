"""The wider workload set of issue 15, natsd against nats-server in one run, with server CPU per message.

Each workload is driven by the project's C load generator ``bench/bin/widebench`` (libnats; source in
``bench/c/widebench.c``), against a fresh server per measurement. Between the generator's ``mark start`` and
``mark end`` lines the server process's user+sys CPU time is sampled from ``/proc/PID/stat``, so each figure
comes with the server's CPU µs per message (operation). With ``--runs N`` the workloads are run N times,
alternating which server goes first, and the medians are reported.

    .venv/bin/python bench/run_wide.py                       # everything, one run
    .venv/bin/python bench/run_wide.py --runs 3 queue4 pub8   # a subset, median of 3 alternating runs
    .venv/bin/python bench/run_wide.py --scale 0.25 --json wide.json

Ratios are natsd / nats-server for rates; for latencies they are nats-server / natsd, so that in every row
a ratio below 1 means natsd is behind. The ``latency`` workload paces a background core pub->sub flow at 50% of
natsd's measured one-publisher maximum (``coremax``, measured in the same run; ``--load-rate`` overrides) and
applies that same absolute load to both servers.

Nothing here is asserted: targets live in the issues, results in the closing notes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import ROOT, ServerProc  # noqa: E402  (bench/ is not a package)

WIDEBENCH = ROOT / "bench" / "bin" / "widebench"
KINDS = ("natsd", "nats-server")

# name -> (generator workload, default count, message size, figures to report)
# A figure is (result key, label, higher_is_better).
RATE = (("rate", "msgs/s", True),)
LAT = (("p50_us", "p50 µs", False), ("p99_us", "p99 µs", False), ("p999_us", "p999 µs", False))
WORKLOADS: dict[str, tuple[str, int, int, tuple[tuple[str, str, bool], ...]]] = {
    "replay": ("replay", 200_000, 128, RATE),
    "pub8streams": ("pub8streams", 200_000, 128, RATE),
    "queue4": ("queue4", 400_000, 128, RATE),
    "subjects": ("subjects", 400_000, 128, RATE),
    "subjectsreply": ("subjectsreply", 400_000, 128, RATE),
    "reqrep": ("reqrep", 5_000, 128, LAT + (("rate", "req/s", True),)),
    "pub8": ("pub8", 800_000, 128, RATE),
    "jspub16k": ("jspub", 10_000, 16384, RATE),
    "consumers": ("consumers", 500, 128, (("rate", "creates/s", True),)),
    "latency": (
        "latency",
        2_000,
        128,
        tuple((f"{p}_{q}_us", f"{p} {q} µs", False) for p in ("rr", "js") for q in ("p50", "p99", "p999")),
    ),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS), help=f"any of {', '.join(WORKLOADS)}")
    ap.add_argument("--runs", type=int, default=1, help="alternating runs; medians are reported")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every default message count")
    ap.add_argument("--n", type=int, help="message count for every workload (overrides --scale)")
    ap.add_argument(
        "--load-rate",
        type=float,
        help="background msgs/s of the latency workload (default: 50%% of natsd's coremax in this run)",
    )
    ap.add_argument("--timeout", type=float, default=600, help="seconds per generator run")
    ap.add_argument("--json", type=Path, help="also write every run's results here")
    args = ap.parse_args(argv)
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workload(s): {', '.join(unknown)}")
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    return args


def count_for(args: argparse.Namespace, workload: str) -> int:
    _, n, _, _ = WORKLOADS[workload]
    return args.n or max(1, int(n * args.scale))


def parse_result(lines: list[str]) -> dict[str, float | str]:
    """The generator's key=value result line (the last line starting ``workload=``); numbers as floats."""
    for line in reversed(lines):
        if line.startswith("workload="):
            out: dict[str, float | str] = {}
            for tok in line.split():
                key, _, val = tok.partition("=")
                try:
                    out[key] = float(val)
                except ValueError:
                    out[key] = val
            return out
    raise ValueError("no result line from widebench")


def proc_cpu_seconds(pid: int) -> float:
    """user+sys CPU seconds of a process, from /proc/PID/stat (fields 14 and 15, in clock ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may contain spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_generator(server: ServerProc, argv: list[str], timeout: float) -> dict[str, float | str] | None:
    """Runs widebench against ``server``; the result plus ``cpu_s`` (server CPU between the marks)."""
    proc = subprocess.Popen(
        [str(WIDEBENCH), server.url, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    lines: list[str] = []
    cpu: dict[str, float] = {}
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.strip()
            if line.startswith("mark "):
                cpu[line[5:]] = proc_cpu_seconds(server.proc.pid)
            else:
                lines.append(line)
        err = proc.stderr.read() if proc.stderr else ""
        proc.wait()
    finally:
        timer.cancel()
    if err.strip():
        sys.stderr.write(f"[{' '.join(argv)}] {err.strip()}\n")
    try:
        res = parse_result(lines)
    except ValueError:
        return None
    if "start" in cpu and "end" in cpu:
        res["cpu_s"] = cpu["end"] - cpu["start"]
    return res


def measure(kind: str, argv: list[str], timeout: float) -> dict[str, float | str] | None:
    srv = ServerProc(kind)
    try:
        return run_generator(srv, argv, timeout)
    finally:
        srv.stop()


def cpu_us_per_msg(res: dict | None) -> float | None:
    """Server CPU µs per message: per operation, or per message handled (``msgs``) where the generator says."""
    if not res or "cpu_s" not in res:
        return None
    msgs = res.get("msgs") or res.get("n")
    return res["cpu_s"] / msgs * 1e6 if msgs else None


def median(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def summarise(runs: dict[str, dict[str, list[dict | None]]]) -> list[dict]:
    """Rows (workload, figure, medians per server, ratio, CPU µs/msg) from every run's results."""
    rows = []
    for w, per_kind in runs.items():
        for key, label, higher in WORKLOADS[w][3]:
            med = {k: median([r.get(key) if r else None for r in per_kind[k]]) for k in KINDS}
            ours, ref = med["natsd"], med["nats-server"]
            ratio = None
            if ours and ref:
                ratio = ours / ref if higher else ref / ours
            cpu = {k: median([cpu_us_per_msg(r) for r in per_kind[k]]) for k in KINDS}
            done = sum(1 for r in per_kind["natsd"] if r and r.get(key) is not None)
            # the ratio of each run where both servers gave a figure: its spread shows the machine's noise
            per_run = [
                (a[key] / b[key] if higher else b[key] / a[key])
                for a, b in zip(per_kind["natsd"], per_kind["nats-server"])
                if a and b and a.get(key) and b.get(key)
            ]
            rows.append(
                {
                    "workload": w,
                    "figure": label,
                    "natsd": ours,
                    "nats-server": ref,
                    "ratio": ratio,
                    "run_ratios": per_run,
                    "natsd_cpu_us_per_msg": cpu["natsd"],
                    "nats-server_cpu_us_per_msg": cpu["nats-server"],
                    "runs": done,
                }
            )
    return rows


def format_rows(rows: list[dict]) -> str:
    def f(v: float | None, spec: str = ",.0f") -> str:
        return "fail" if v is None else format(v, spec)

    out = [
        f"{'workload':<12} {'figure':<14} {'natsd':>11} {'nats-server':>12} {'ratio':>6} "
        f"{'natsd cpu µs/msg':>17} {'nats-server cpu µs/msg':>23} runs  per-run ratios"
    ]
    for r in rows:
        spec = ",.0f" if "/s" in r["figure"] else ",.1f"
        out.append(
            f"{r['workload']:<12} {r['figure']:<14} {f(r['natsd'], spec):>11} {f(r['nats-server'], spec):>12} "
            f"{f(r['ratio'], '.2f'):>6} {f(r['natsd_cpu_us_per_msg'], '.2f'):>17} "
            f"{f(r['nats-server_cpu_us_per_msg'], '.2f'):>23} {r['runs']:>4}  "
            f"{' '.join(format(x, '.2f') for x in r['run_ratios'])}"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not WIDEBENCH.exists() or (ROOT / "bench" / "c" / "widebench.c").stat().st_mtime > WIDEBENCH.stat().st_mtime:
        subprocess.run(["bash", str(ROOT / "scripts" / "build-widebench.sh")], check=True, cwd=ROOT)
    runs: dict[str, dict[str, list[dict | None]]] = {w: {k: [] for k in KINDS} for w in args.workloads}
    load_rates: list[float] = []
    for i in range(args.runs):
        order = KINDS if i % 2 == 0 else KINDS[::-1]
        for w in args.workloads:
            prog, _, size, _ = WORKLOADS[w]
            argv_ = [prog, str(count_for(args, w)), str(size)]
            if w == "latency":
                rate = args.load_rate
                if rate is None:
                    top = measure(
                        "natsd", ["coremax", str(max(50_000, int(400_000 * args.scale))), "128"], args.timeout
                    )
                    rate = 0.5 * float(top["rate"]) if top else 10_000.0
                load_rates.append(rate)
                argv_.append(str(int(rate)))
            for kind in order:
                res = measure(kind, argv_, args.timeout)
                runs[w][kind].append(res)
                print(f"run {i + 1}/{args.runs} {w:<12} {kind:<12} {res}", file=sys.stderr, flush=True)
    rows = summarise(runs)
    print(format_rows(rows))
    if load_rates:
        print(
            f"latency background load: {', '.join(f'{r:,.0f}' for r in load_rates)} msgs/s "
            "(50% of natsd's coremax per run)"
            if args.load_rate is None
            else ""
        )
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "runs": runs, "load_rates": load_rates}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
