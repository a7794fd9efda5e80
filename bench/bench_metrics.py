"""What a Prometheus scrape costs the message path, with 1,000 streams and 10,000 consumers.

For each server (natsd, then the reference nats-server): start it with monitoring, create 1,000 streams
(``m.<i>``, one message each) with 10 durable pull consumers each, then run the jsbench ``core`` (or
``--workload jspub``) publish benchmark several times, alternating a quiet run with a run during which the
monitoring port is scraped every ``--interval`` seconds (default 15 s, Prometheus' default scrape interval; the
first scrape starts with the run). natsd is scraped at ``/metrics``; nats-server has no ``/metrics``, so it is scraped as
prometheus-nats-exporter reads it (``/varz``, ``/connz``, ``/jsz?consumers=true&config=true&accounts=true``).

The 1,000 streams are memory streams by default (``--storage file`` for file streams: what a scrape reads is the
same, but 11,000 directories are slow to create and remove); they are created with pipelined API requests, and
the server is killed and its store removed afterwards.

Reported per server: the median rate quiet and scraped, the cost (1 - scraped / quiet, and the median of the
per-round costs), the CPU cost (median over rounds of 1 - the server's CPU seconds for the quiet run / for the
scraped run of the same messages: what a CPU-bound single-threaded server gives up, and steady on a loaded
machine where the rates are not), the scrapes done and their mean duration; for scrapes of the idle server (``--idle-scrapes``,
medians): their wall time, the server's CPU seconds (divided by the scrape interval, that is the share of one core
scraping takes whatever the load) and the longest PING/PONG round trip while one runs ("stall": how long the
server's loop was held) next to the longest over as long a quiet stretch. The machine is shared and noisy: the cost
of one pair of runs can be several percent in either direction, so look at the medians over ``--rounds``.

    .venv/bin/python bench/bench_metrics.py                      # core pub/sub, 30 s runs, 3 rounds
    .venv/bin/python bench/bench_metrics.py --workload jspub --rounds 5
    .venv/bin/python bench/bench_metrics.py --turns           # natsd in-process: the longest loop turn a scrape takes
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import JSBENCH, ROOT, ServerProc, free_port, wait_port  # noqa: E402

import nats  # noqa: E402

NATSD_SCRAPE = ["/metrics"]
REFERENCE_SCRAPE = ["/varz", "/connz", "/jsz?consumers=true&config=true&accounts=true"]


class MonitoredServer(ServerProc):
    """ServerProc with the monitoring port on (``-m``); stopped with SIGKILL and its store removed afterwards
    (a graceful stop of 11,000 consumers writes every consumer's state first, which measures nothing here)."""

    def __init__(self, kind: str) -> None:  # noqa: D107 - same as ServerProc plus -m
        import tempfile

        self.kind = kind
        self.port = free_port()
        self.http_port = free_port()
        self.store = tempfile.mkdtemp(prefix=f"bench-metrics-{kind}-")
        args = ["-a", "127.0.0.1", "-p", str(self.port), "-m", str(self.http_port), "-js", "-sd", self.store]
        venv_bin = Path(sys.executable).parent
        cmd = [sys.executable, "-m", "natsd", *args] if kind == "natsd" else [str(venv_bin / "nats-server"), *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        wait_port(self.http_port)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.store, ignore_errors=True)


async def _pipelined(nc, requests: list[tuple[str, bytes]], window: int = 256) -> None:
    """Send API requests ``window`` at a time without waiting for each answer (11,000 one by one take minutes
    on a loaded machine); every answer must be a success."""
    for start in range(0, len(requests), window):
        part = requests[start : start + window]
        for resp in await asyncio.gather(*(nc.request(subj, body, timeout=60) for subj, body in part)):
            r = json.loads(resp.data)
            assert "error" not in r, r


async def populate(url: str, streams: int, consumers_per: int, storage: str) -> None:
    """``streams`` streams ``M<i>`` on ``m.<i>`` with one message each and ``consumers_per`` durable pull
    consumers each. Memory storage by default: what a scrape reads (stream state, consumer info) is the same
    for both storages, and 11,000 directories are slow to create and remove on a shared disk."""
    nc = await nats.connect(url)
    try:
        await _pipelined(
            nc,
            [
                (
                    f"$JS.API.STREAM.CREATE.M{i}",
                    json.dumps({"name": f"M{i}", "subjects": [f"m.{i}"], "storage": storage}).encode(),
                )
                for i in range(streams)
            ],
        )
        for i in range(streams):
            await nc.publish(f"m.{i}", b"x" * 64)
        await nc.flush()
        await _pipelined(
            nc,
            [
                (
                    f"$JS.API.CONSUMER.CREATE.M{i}.C{j}",
                    json.dumps(
                        {
                            "stream_name": f"M{i}",
                            "config": {"durable_name": f"C{j}", "ack_policy": "explicit"},
                            "action": "create",
                        }
                    ).encode(),
                )
                for i in range(streams)
                for j in range(consumers_per)
            ],
        )
        await nc.flush()
    finally:
        await nc.close()


class LoopProbe(threading.Thread):
    """PING/PONG round trips on a raw client connection, one every 2 ms: the longest is how long the
    server's event loop stalled (a Python server answers PING on its loop, as it serves every client)."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.recv(65536)  # INFO
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
        self._pong()
        self.stop = threading.Event()
        self.rtts: list[float] = []

    def _pong(self) -> None:
        buf = b""
        while b"PONG\r\n" not in buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("server closed the probe connection")
            buf += chunk

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                t0 = time.perf_counter()
                self.sock.sendall(b"PING\r\n")
                self._pong()
                self.rtts.append(time.perf_counter() - t0)
                time.sleep(0.002)
        finally:
            self.sock.close()

    def finish(self) -> list[float]:
        self.stop.set()
        self.join()
        return self.rtts


def scrape_once(base: str, paths: list[str]) -> int:
    size = 0
    for p in paths:
        with urllib.request.urlopen(base + p, timeout=120) as r:
            size += len(r.read())
    return size


class Scraper(threading.Thread):
    """Scrapes the given paths one after another, ``interval`` seconds apart, until stopped."""

    def __init__(self, base: str, paths: list[str], interval: float) -> None:
        super().__init__(daemon=True)
        self.base, self.paths, self.interval = base, paths, interval
        self.stop = threading.Event()
        self.durations: list[float] = []
        self.sizes: list[int] = []

    def run(self) -> None:
        while not self.stop.is_set():
            t0 = time.perf_counter()
            size = 0
            for p in self.paths:
                with urllib.request.urlopen(self.base + p, timeout=120) as r:
                    size += len(r.read())
            self.durations.append(time.perf_counter() - t0)
            self.sizes.append(size)
            self.stop.wait(self.interval)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def jsbench(url: str, workload: str, n: int, size: int) -> float | None:
    """The run's rate, or None when jsbench gave up (its async publish fails when no ack frees a slot of its
    4,096-message window within 200 ms, which a busy shared machine can cause with or without a scrape)."""
    out = subprocess.run([str(JSBENCH), url, workload, str(n), str(size)], capture_output=True, text=True, timeout=900)
    for tok in out.stdout.split():
        if tok.startswith("rate="):
            return float(tok[5:])
    sys.stderr.write(f"jsbench {workload} failed: {out.stdout.strip()} {out.stderr.strip()}\n")
    return None


def measure(kind: str, a: argparse.Namespace) -> dict:
    srv = MonitoredServer(kind)
    try:
        t0 = time.perf_counter()
        asyncio.run(populate(srv.url, a.streams, a.consumers, a.storage))
        setup = time.perf_counter() - t0
        base = f"http://127.0.0.1:{srv.http_port}"
        paths = NATSD_SCRAPE if kind == "natsd" else REFERENCE_SCRAPE
        first_size = scrape_once(base, paths)  # the first one also builds caches
        # Idle scrapes: wall time, the server's CPU seconds, and the longest PING/PONG while one runs (the
        # event loop's longest stall) against the longest over as long a quiet stretch.
        walls, cpus, stalls, quiet_stalls = [], [], [], []
        for _ in range(a.idle_scrapes):
            probe = LoopProbe(srv.port)
            probe.start()
            time.sleep(1.0)
            quiet_stalls.append(max(probe.finish(), default=0.0))
            probe = LoopProbe(srv.port)
            probe.start()
            c0, t1 = cpu_seconds(srv.proc.pid), time.perf_counter()
            scrape_once(base, paths)
            walls.append(time.perf_counter() - t1)
            cpus.append(cpu_seconds(srv.proc.pid) - c0)
            stalls.append(max(probe.finish(), default=0.0))
        n = a.n
        if not n:  # size the runs to last about --seconds, from a short calibration run
            rate = jsbench(srv.url, a.workload, 100_000, a.size) or 10_000.0
            n = int(rate * a.seconds)
        quiet, scraped, durations = [], [], []
        cpu_quiet, cpu_scraped = [], []  # the server's CPU seconds for each run of n messages
        scrapes = 0
        for _ in range(a.rounds):
            c0 = cpu_seconds(srv.proc.pid)
            quiet.append(jsbench(srv.url, a.workload, n, a.size))
            c1 = cpu_seconds(srv.proc.pid)
            sc = Scraper(base, paths, a.interval)
            sc.start()
            scraped.append(jsbench(srv.url, a.workload, n, a.size))
            sc.stop.set()
            sc.join()
            c2 = cpu_seconds(srv.proc.pid)
            cpu_quiet.append(c1 - c0)
            cpu_scraped.append(c2 - c1)
            scrapes += len(sc.durations)
            durations += sc.durations
        ok_q, ok_s = [x for x in quiet if x], [x for x in scraped if x]
        q = statistics.median(ok_q) if ok_q else float("nan")
        sm = statistics.median(ok_s) if ok_s else float("nan")
        # the cost per round (quiet and scraped back to back) and its median: less exposed to the machine's
        # load drifting over the whole run than the ratio of the two medians
        pairs = [(1 - y / x) * 100 for x, y in zip(quiet, scraped) if x and y]
        # The same n messages cost the server this much more CPU with the scrapes: for natsd, whose message path
        # and scrape share one thread, that is the throughput a CPU-bound server gives up, and unlike the rates it
        # does not move with how much CPU the shared machine leaves the server.
        cpu_pairs = [
            (1 - q / sc_) * 100 for q, sc_, x, y in zip(cpu_quiet, cpu_scraped, quiet, scraped) if x and y and sc_ > 0
        ]
        return {
            "kind": kind,
            "setup_s": round(setup, 1),
            "scrape_bytes": first_size,
            "idle_scrape_s": round(statistics.median(walls), 3),
            "scrape_server_cpu_s": round(statistics.median(cpus), 3),
            "max_stall_scrape_ms": round(statistics.median(stalls) * 1000, 1),
            "max_stall_quiet_ms": round(statistics.median(quiet_stalls) * 1000, 1),
            "n": n,
            "quiet": quiet,
            "scraped": scraped,
            "quiet_median": q,
            "scraped_median": sm,
            "cost_pct": round((1 - sm / q) * 100, 2),
            "pair_costs_pct": [round(x, 2) for x in pairs],
            "pair_cost_median_pct": round(statistics.median(pairs), 2) if pairs else None,
            "cpu_quiet_s": [round(x, 2) for x in cpu_quiet],
            "cpu_scraped_s": [round(x, 2) for x in cpu_scraped],
            "cpu_cost_median_pct": round(statistics.median(cpu_pairs), 2) if cpu_pairs else None,
            "scrapes": scrapes,
            "scrape_mean_s": round(statistics.mean(durations), 3) if durations else None,
        }
    finally:
        srv.stop()


async def _loop_turns(a: argparse.Namespace) -> dict:
    """natsd in this process: the most CPU one event-loop turn takes while ``/metrics`` is scraped (by a thread,
    so the scraper's own work is not on the loop). A task that only yields measures the loop thread's CPU time
    between two of its wakeups: that is how long every client waited at most, whatever the machine's load
    (wall-clock stalls on a shared machine are this times however many processes share the core)."""
    sys.path.insert(0, str(ROOT))
    from tests.helpers.inproc import running_server

    async with running_server(http_port=-1, jetstream=True) as server:
        await populate(server.client_url, a.streams, a.consumers, a.storage)
        base = f"http://127.0.0.1:{server.http_port}"
        await asyncio.to_thread(scrape_once, base, NATSD_SCRAPE)  # the first one builds the label cache
        turns: list[float] = []
        idle_turns: list[float] = []
        done = asyncio.Event()

        async def watch(out: list[float]) -> None:
            while not done.is_set():
                t = time.thread_time()
                await asyncio.sleep(0)
                out.append(time.thread_time() - t)

        for _ in range(a.idle_scrapes):
            done.clear()
            w = asyncio.ensure_future(watch(idle_turns))
            await asyncio.sleep(0.5)
            done.set()
            await w
            done.clear()
            w = asyncio.ensure_future(watch(turns))
            await asyncio.to_thread(scrape_once, base, NATSD_SCRAPE)
            done.set()
            await w
        turns.sort()
        idle_turns.sort()
        return {
            "max_turn_cpu_ms": round(turns[-1] * 1000, 1),
            "p999_turn_cpu_ms": round(turns[int(len(turns) * 0.999)] * 1000, 2),
            "idle_max_turn_cpu_ms": round(idle_turns[-1] * 1000, 2),
            "turns": len(turns),
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="core", choices=["core", "jspub", "jspubmem"])
    ap.add_argument("--n", type=int, default=0, help="messages per run (default: what lasts --seconds)")
    ap.add_argument("--seconds", type=float, default=30.0, help="length of each run when --n is not given")
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--consumers", type=int, default=10, help="consumers per stream")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--interval", type=float, default=15.0, help="seconds between scrapes (Prometheus default: 15)")
    ap.add_argument(
        "--storage",
        default="memory",
        choices=["memory", "file"],
        help="storage of the 1,000 streams (default memory: a scrape reads the same either way)",
    )
    ap.add_argument("--idle-scrapes", type=int, default=3, help="scrapes of the idle server timed (medians)")
    ap.add_argument("--only", choices=["natsd", "reference"])
    ap.add_argument(
        "--turns",
        action="store_true",
        help="only natsd in this process: the longest event-loop turn (CPU) while /metrics is scraped",
    )
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not JSBENCH.exists():
        subprocess.run(["bash", str(ROOT / "scripts" / "build-jsbench.sh")], check=True, cwd=ROOT)
    if a.turns:
        r = asyncio.run(_loop_turns(a))
        print(
            json.dumps(r, indent=2)
            if a.json
            else f"{a.streams} {a.storage} streams x {a.consumers} consumers, {a.idle_scrapes} scrapes of /metrics: "
            f"longest loop turn {r['max_turn_cpu_ms']} ms CPU (99.9th percentile {r['p999_turn_cpu_ms']} ms, "
            f"{r['turns']} turns; without a scrape: {r['idle_max_turn_cpu_ms']} ms)"
        )
        return 0
    kinds = [k for k in ("natsd", "reference") if a.only in (None, k)]
    results = [measure(k, a) for k in kinds]
    if a.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"{a.workload}, {a.streams} {a.storage} streams x {a.consumers} consumers, scrape every {a.interval}s, "
        f"{a.rounds} rounds (medians)"
    )
    print(
        f"{'server':<10} {'setup s':>8} {'quiet/s':>10} {'scraped/s':>10} {'cost':>7} {'pair cost':>9} {'CPU cost':>8} "
        f"{'scrapes':>8} {'scrape s':>9} {'idle scrape s':>13} {'server CPU s':>12} {'stall ms':>9} "
        f"{'quiet stall':>11} {'bytes':>10}"
    )
    for r in results:
        print(
            f"{r['kind']:<10} {r['setup_s']:>8.1f} {r['quiet_median']:>10.0f} {r['scraped_median']:>10.0f} "
            f"{r['cost_pct']:>6.1f}% {r['pair_cost_median_pct'] or 0:>8.1f}% {r['cpu_cost_median_pct'] or 0:>7.1f}% "
            f"{r['scrapes']:>8} {r['scrape_mean_s'] or 0:>9.3f} {r['idle_scrape_s']:>13.3f} "
            f"{r['scrape_server_cpu_s']:>12.3f} {r['max_stall_scrape_ms']:>9.1f} {r['max_stall_quiet_ms']:>11.1f} "
            f"{r['scrape_bytes']:>10}"
        )
    if len(results) == 2:
        print(f"ratio natsd / nats-server (quiet): {results[0]['quiet_median'] / results[1]['quiet_median']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
