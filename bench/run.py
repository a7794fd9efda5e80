"""Compare natsd with the reference nats-server in one run.

Both servers are started here as subprocesses on free loopback ports, each with a fresh
JetStream store directory; the same C load generator (jsbench, libnats) drives both, so the
client is never the bottleneck and the two figures are comparable. Output: one line per
workload with both rates and the ratio natsd / nats-server, each server's CPU per message
(user+sys seconds of the server process over the generator's whole run, stream set-up included,
divided by the messages), plus memory figures.

    make bench                                   # everything, default sizes
    .venv/bin/python bench/run.py core jspub     # a subset
    .venv/bin/python bench/run.py --n 50000 jsfetch
    .venv/bin/python bench/run.py --runs 3 core subjects10k subjects10k-reply   # medians, alternating

``subjects10k`` / ``subjects10k-reply`` (issue 31) are driven by the project's ``bench/bin/widebench``
(``bench/c/widebench.c``, built with ``scripts/build-widebench.sh``): one publisher cycling over 10,000
subjects ``bench.w.<i%10>.<i>`` to 10 wildcard subscribers ``bench.w.<k>.*`` (own connections; each
message matches one), without and with a reply subject ``_INBOX.bench.<i>`` per message; msgs/s received.

Nothing here is asserted: targets live in the issues, results in the closing notes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JSBENCH = ROOT / "bench" / "bin" / "jsbench"
WIDEBENCH = ROOT / "bench" / "bin" / "widebench"
# bench/c/jsmany.c: the many-subject JetStream shapes of issue 31 (built with jsbench by build-jsbench.sh).
JSMANY = ROOT / "bench" / "bin" / "jsmany"
VENV_BIN = Path(sys.executable).parent

# workload -> (default message count, message size); jssync/kvput are latency bound, so fewer.
WORKLOADS = {
    "core": (1_000_000, 128),
    "jspub": (200_000, 128),
    "jspubmem": (200_000, 128),
    "jssync": (10_000, 128),
    "jsfetch": (100_000, 128),
    "kvput": (10_000, 128),
    "subjects10k": (400_000, 128),
    "subjects10k-reply": (400_000, 128),
    # issue 31: async publish with acks cycling over 1,000 subjects (jsmany); and the plgd seed's shape,
    # 10,000 devices x 5 event types into one stream with a durable consumer per event type (jsmany)
    "jspub1k": (300_000, 128),
    "plgd": (200_000, 128),
}
MANY = {"jspub1k", "plgd"}
# Workloads run by widebench (bench/c/widebench.c) instead of jsbench: name -> its workload name.
WIDE = {"subjects10k": "subjects", "subjects10k-reply": "subjectsreply"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


class ServerProc:
    """One server under test (kind 'natsd' or 'nats-server')."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.port = free_port()
        self.store = tempfile.mkdtemp(prefix=f"bench-{kind}-")
        args = ["-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", self.store]
        if kind == "natsd":
            cmd = [sys.executable, "-m", "natsd", *args]
        else:
            cmd = [str(VENV_BIN / "nats-server"), *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        """user+sys CPU seconds of the server process so far (/proc/PID/stat fields 14 and 15)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.store, ignore_errors=True)


def run_jsbench(url: str, workload: str, n: int, size: int, timeout: float = 300) -> float | None:
    if workload in WIDE:
        gen, name = WIDEBENCH, WIDE[workload]
    else:
        gen, name = (JSMANY if workload in MANY else JSBENCH), workload
    try:
        out = subprocess.run([str(gen), url, name, str(n), str(size)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    extra = [tok for tok in out.stdout.split() if tok.startswith(("lag_at_last_ack=", "consume_rate="))]
    if extra:
        # plgd: the consumers' side, shown beside the publish rate that is compared
        sys.stderr.write(f"[{workload}] {' '.join(extra)}\n")
    for tok in out.stdout.split():
        if tok.startswith("rate="):
            return float(tok[5:])
    sys.stderr.write(f"[{workload}] {out.stderr.strip()}\n")
    return None


def measure(w: str, n: int, size: int, repeat: int, runs: int) -> tuple[dict, dict]:
    """Each server's rate and CPU µs per message for workload ``w``: the best of ``repeat`` runs,
    or with ``runs`` > 1 the medians of that many rounds, alternating which server goes first."""
    per: dict[str, list[tuple[float, float]]] = {"natsd": [], "nats-server": []}
    for rnd in range(runs):
        order = ("natsd", "nats-server") if rnd % 2 == 0 else ("nats-server", "natsd")
        for kind in order:
            best: tuple[float, float] | None = None
            for _ in range(repeat):
                srv = ServerProc(kind)
                try:
                    # A short unmeasured run first: what a server does once (natsd loads its
                    # JetStream layers at the first request since issue 26's lazy start) is not
                    # charged to every message of the measured one.
                    run_jsbench(srv.url, w, min(n, 2_000), size)
                    c0 = srv.cpu_seconds()
                    r = run_jsbench(srv.url, w, n, size)
                    cpu = (srv.cpu_seconds() - c0) / n * 1e6
                finally:
                    srv.stop()
                if r is not None and (best is None or r > best[0]):
                    best = (r, cpu)
            if best is not None:
                per[kind].append(best)
            if runs > 1:
                print(f"  run {rnd + 1}/{runs} {w} {kind}: {best and f'{best[0]:,.0f}/s {best[1]:.2f} µs/msg'}")
    rates: dict[str, float | None] = {}
    cpus: dict[str, float | None] = {}
    for kind, got in per.items():
        rates[kind] = statistics.median(r for r, _ in got) if got else None
        cpus[kind] = statistics.median(c for _, c in got) if got else None
    return rates, cpus


def idle_connections_rss(server: ServerProc, count: int) -> tuple[float, float]:
    """RSS before and after opening ``count`` idle client connections (CONNECT+PING each)."""
    before = server.rss_mb()
    socks = []
    try:
        for _ in range(count):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.recv(4096)  # INFO
            s.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
            socks.append(s)
        for s in socks:
            s.settimeout(5)
            s.recv(64)  # PONG
        time.sleep(0.5)
        return before, server.rss_mb()
    finally:
        for s in socks:
            s.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    ap.add_argument("--n", type=int, help="message count for every workload")
    ap.add_argument("--size", type=int, help="message size")
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs")
    ap.add_argument("--runs", type=int, default=1, help="N runs alternating which server goes first; medians")
    ap.add_argument("--conns", type=int, default=1000, help="idle connections for the memory check (0: skip)")
    ap.add_argument("--json", type=Path, help="also write results here")
    args = ap.parse_args(argv)
    if not JSBENCH.exists() or not JSMANY.exists():
        subprocess.run(["bash", str(ROOT / "scripts" / "build-jsbench.sh")], check=True, cwd=ROOT)
    if any(w in WIDE for w in args.workloads):
        subprocess.run(["bash", str(ROOT / "scripts" / "build-widebench.sh")], check=True, cwd=ROOT)

    results: dict = {"workloads": {}, "memory": {}}
    print(
        f"{'workload':<17} {'n':>9} {'size':>5} {'natsd/s':>12} {'nats-server/s':>14} {'ratio':>7}"
        f" {'natsd µs/msg':>13} {'nats-server µs/msg':>19}"
    )
    for w in args.workloads:
        n, size = WORKLOADS[w]
        n, size = args.n or n, args.size or size
        rates, cpus = measure(w, n, size, args.repeat, args.runs)
        ours, ref = rates["natsd"], rates["nats-server"]
        ratio = (ours / ref) if ours and ref else None
        results["workloads"][w] = {
            "n": n,
            "size": size,
            "natsd": ours,
            "nats-server": ref,
            "ratio": ratio,
            "natsd_cpu_us_per_msg": cpus["natsd"],
            "nats-server_cpu_us_per_msg": cpus["nats-server"],
        }
        fmt = lambda v: f"{v:,.0f}" if v else "fail"  # noqa: E731
        fcpu = lambda v: f"{v:.2f}" if v is not None else "-"  # noqa: E731
        print(
            f"{w:<17} {n:>9} {size:>5} {fmt(ours):>12} {fmt(ref):>14} {ratio and f'{ratio:.2f}' or '-':>7}"
            f" {fcpu(cpus['natsd']):>13} {fcpu(cpus['nats-server']):>19}",
            flush=True,
        )

    if args.conns:
        for kind in ("natsd", "nats-server"):
            srv = ServerProc(kind)
            try:
                time.sleep(0.5)
                before, after = idle_connections_rss(srv, args.conns)
            finally:
                srv.stop()
            results["memory"][kind] = {
                "idle_rss_mb": round(before, 1),
                f"rss_with_{args.conns}_conns_mb": round(after, 1),
            }
            print(
                f"memory {kind:<12} idle RSS {before:.1f} MB, with {args.conns} idle connections "
                f"{after:.1f} MB (+{after - before:.1f} MB)"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
