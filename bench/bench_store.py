"""Store micro-benchmarks: append/flush throughput, load/scan, and opening a big file store.

Not part of the test suite; prints numbers. Run:

    .venv/bin/python bench/bench_store.py                 # defaults: 200k msgs, 1M for the open test
    .venv/bin/python bench/bench_store.py --msgs 100000 --open-msgs 1000000 --size 128
    .venv/bin/python bench/bench_store.py --skip-open --reference   # + whole-server restart vs nats-server

The "open" figures are measured in a fresh child process (time to open_stream_store() and its
peak RSS), once with index.db (normal restart) and once without (full scan fallback).
Targets (issue 3): a 1M-message file stream opens in under 2 s with RSS under 150 MB.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from natsd.clock import SystemClock
from natsd.store import open_stream_store
from natsd.store.base import StoreConfig


def _store(kind: str, directory: str | None, **kw):
    cfg = StoreConfig(name="BENCH", storage=kind, **kw)
    return open_stream_store(cfg, SystemClock(), directory)


def bench_append(kind: str, n: int, size: int, batch: int, directory: str | None) -> float:
    s = _store(kind, directory)
    payload = os.urandom(size)
    store, flush = s.store_msg, s.flush
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        for _ in range(min(batch, n - i)):
            store("bench.sub", None, payload)
        flush()
    dt = time.perf_counter() - t0
    s.stop()
    return n / dt


def bench_reads(kind: str, n: int, size: int, directory: str | None) -> tuple[float, float, float, float]:
    s = _store(kind, directory)
    payload = os.urandom(size)
    for i in range(n):
        s.store_msg(f"bench.{i % 10}", None, payload)
    s.flush()
    t0 = time.perf_counter()
    seq = 0
    count = 0
    while True:
        try:
            m = s.load_next_msg(">", seq + 1)
        except Exception:
            break
        seq = m.seq
        count += 1
    scan = count / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    seq = 0
    count = 0
    while True:
        try:
            m = s.load_next_msg("bench.3", seq + 1)
        except Exception:
            break
        seq = m.seq
        count += 1
    filtered = count / (time.perf_counter() - t0)
    # A consumer's forward read: iter_msgs over the whole stream (4 passes from the middle on).
    t0 = time.perf_counter()
    count = 0
    for start in (1, n // 4, n // 2, 3 * n // 4):
        for m in s.iter_msgs(start, n):
            count += 1
    it = count / (time.perf_counter() - t0)
    rng = random.Random(1)
    seqs = [rng.randrange(1, n + 1) for _ in range(min(n, 100_000))]
    t0 = time.perf_counter()
    for q in seqs:
        s.load_msg(q)
    rand = len(seqs) / (time.perf_counter() - t0)
    s.stop()
    return scan, filtered, rand, it


_CHILD = """
import resource, sys, time
from natsd.clock import SystemClock
from natsd.store import open_stream_store
from natsd.store.base import StoreConfig
t0 = time.perf_counter()
s = open_stream_store(StoreConfig(name="BENCH", storage="file"), SystemClock(), sys.argv[1])
dt = time.perf_counter() - t0
st = s.state()
m = s.load_msg(st.last_seq)
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across exec.
rss_mb = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
print(f"{dt:.3f} {rss_mb:.1f} {st.msgs}")
s._abandon()
"""


def bench_open(n: int, size: int, root: str) -> None:
    d = os.path.join(root, "open")
    s = _store("file", d)
    payload = os.urandom(size)
    t0 = time.perf_counter()
    for i in range(0, n, 1000):
        for j in range(min(1000, n - i)):
            s.store_msg(f"open.{(i + j) % 100}", None, payload)
        s.flush()
    s.stop()
    print(
        f"  wrote {n:,} msgs of {size} B in {time.perf_counter() - t0:.1f}s "
        f"({sum(os.path.getsize(os.path.join(d, 'msgs', f)) for f in os.listdir(os.path.join(d, 'msgs'))) / 2**20:.0f} MiB on disk)"
    )
    base_rss = _child_rss_baseline()
    for label in ("with index.db", "full scan (no index.db)"):
        if label.startswith("full"):
            os.unlink(os.path.join(d, "msgs", "index.db"))
        out = subprocess.run([sys.executable, "-c", _CHILD, d], capture_output=True, text=True, check=True)
        secs, rss, msgs = out.stdout.split()
        print(
            f"  open {label:<26} {float(secs):6.2f} s   peak RSS {float(rss):6.1f} MB "
            f"(interpreter+imports alone: {base_rss:.1f} MB)   msgs={int(msgs):,}"
        )


def _child_rss_baseline() -> float:
    code = (
        "import natsd.store.file; "
        "print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')) / 1024)"
    )
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def _fill_stream(url: str, n: int, size: int) -> None:
    """Create stream BENCH (file, subject bench.js) and store ``n`` messages in it over one raw
    connection."""
    import socket

    host, port = url.rsplit("/", 1)[-1].split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.recv(4096)
        cfg = b'{"name":"BENCH","subjects":["bench.js"],"storage":"file"}'
        sock.sendall(
            b'CONNECT {"verbose":false}\r\nSUB _INBOX.c 1\r\n'
            b"PUB $JS.API.STREAM.CREATE.BENCH _INBOX.c %d\r\n%s\r\n" % (len(cfg), cfg)
        )
        buf = b""
        while b"}\r\n" not in buf:
            buf += sock.recv(65536)
        # Acknowledged publishes in windows of 2000: lossless (nats-server drops unacknowledged
        # JetStream publishes under load) and the same work for both servers.
        one = b"PUB bench.js _INBOX.a %d\r\n%s\r\n" % (size, os.urandom(size // 2 + 1).hex()[:size].encode())
        sock.sendall(b"SUB _INBOX.a 2\r\n")
        left = n
        buf = b""
        while left:
            k = min(2000, left)
            sock.sendall(one * k)
            got = 0
            while got < k:
                buf += sock.recv(1 << 20)
                cut = buf.rfind(b"\n") + 1  # count only complete lines
                got += buf[:cut].count(b"MSG _INBOX.a ")
                buf = buf[cut:]
            left -= k


def _wait_stream(url: str, n: int | None, deadline: float) -> int:
    """Poll STREAM.INFO BENCH over a raw connection until it answers (with ``n`` messages when
    given); returns the message count."""
    import json
    import socket

    host, port = url.rsplit("/", 1)[-1].split(":")
    while time.perf_counter() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=2) as sock:
                sock.recv(4096)
                sock.sendall(
                    b'CONNECT {"verbose":false,"headers":true,"no_responders":true}\r\n'
                    b"SUB _INBOX.bench 1\r\nPUB $JS.API.STREAM.INFO.BENCH _INBOX.bench 0\r\n\r\n"
                )
                buf = b""
                while b"}\r\n" not in buf:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
                body = buf[buf.find(b"{") : buf.rfind(b"}") + 1]
                msgs = json.loads(body).get("state", {}).get("messages") if body else None
                if msgs is not None and (n is None or msgs == n):
                    return msgs
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    raise RuntimeError("server did not recover the stream in time")


def bench_restart_vs_reference(n: int, size: int) -> None:
    """Store ``n`` messages in natsd and in nats-server, restart each on its store (clean stop)
    and time until STREAM.INFO reports every message; RSS after recovery."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import run  # bench/run.py: server processes on free ports

    results = {}
    for kind in ("nats-server", "natsd"):
        srv = run.ServerProc(kind)
        try:
            t0 = time.perf_counter()
            _fill_stream(srv.url, n, size)
            # Unacknowledged publishes may be dropped under load (nats-server does): wait until
            # the count reaches n or stops moving, then restart on whatever was stored.
            stored, still = -1, 0
            while stored != n and still < 4:
                now = _wait_stream(srv.url, None, time.perf_counter() + 60)
                still = still + 1 if now == stored else 0
                stored = now
                time.sleep(0.5)
            rate = stored / (time.perf_counter() - t0)
            srv.proc.terminate()
            srv.proc.wait(60)
            args = srv.proc.args
            t0 = time.perf_counter()
            srv.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            run.wait_port(srv.port, timeout=120)
            _wait_stream(srv.url, stored, time.perf_counter() + 300)
            secs = time.perf_counter() - t0
            results[kind] = (secs, srv.rss_mb(), rate)
            print(
                f"  {kind:<11} {stored:>9,} msgs stored (ingest {rate:,.0f} msgs/s)   restart to "
                f"STREAM.INFO {secs:6.2f} s   RSS after {results[kind][1]:6.1f} MB"
            )
        finally:
            srv.stop()
    if len(results) == 2:
        a, b = results["natsd"], results["nats-server"]
        print(f"  ratio natsd/nats-server: restart time {a[0] / b[0]:.2f}x   RSS {a[1] / b[1]:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--msgs", type=int, default=200_000)
    ap.add_argument("--open-msgs", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--batch", type=int, default=100, help="messages per flush (one loop turn)")
    ap.add_argument("--dir", default=None, help="where file stores go (default: a temp dir)")
    ap.add_argument("--skip-open", action="store_true")
    ap.add_argument(
        "--reference", action="store_true", help="also restart natsd and nats-server on an --open-msgs stream"
    )
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="bench_store_", dir=args.dir)
    try:
        print(f"append: {args.msgs:,} msgs x {args.size} B, flush every {args.batch}")
        for kind in ("memory", "file"):
            d = os.path.join(root, f"append_{kind}") if kind == "file" else None
            print(f"  {kind:<6} {bench_append(kind, args.msgs, args.size, args.batch, d):>12,.0f} msgs/s")
        print(
            "reads: sequential load_next_msg('>'), filtered load_next_msg (1 subject in 10), random load_msg, iter_msgs"
        )
        for kind in ("memory", "file"):
            d = os.path.join(root, f"reads_{kind}") if kind == "file" else None
            scan, filt, rand, it = bench_reads(kind, args.msgs, args.size, d)
            print(
                f"  {kind:<6} scan {scan:>10,.0f}/s   filtered {filt:>10,.0f}/s   random {rand:>10,.0f}/s"
                f"   iter {it:>10,.0f}/s"
            )
        if not args.skip_open:
            print(f"open a {args.open_msgs:,}-message file store:")
            bench_open(args.open_msgs, args.size, root)
        if args.reference:
            print(f"restart with a {args.open_msgs:,}-message file stream, natsd vs nats-server:")
            bench_restart_vs_reference(args.open_msgs, args.size)
        print(f"(this process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
