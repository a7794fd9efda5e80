"""TLS benchmarks: natsd against the reference nats-server, both with the same tls {} block.

    .venv/bin/python bench/bench_tls.py                  # everything
    .venv/bin/python bench/bench_tls.py core jspub       # a subset: core jspub idle flood

* ``core``: jsbench (libnats) publisher -> subscriber over TLS, msgs/s received;
* ``jspub``: jsbench JetStream async publish over TLS into a file stream, acked msgs/s;
* ``idle``: server RSS before and after 1,000 idle TLS client connections (handshake + CONNECT/PING);
* ``flood``: request/reply round-trip p50/p99 of a healthy TLS client (nats-py) alone, then while
  another process floods the port with failing handshakes (half of them garbage bytes after INFO,
  half a real ClientHello that is never finished).

Certificates are generated for the run (tests/helpers/certs.py); libnats trusts the test CA through
``SSL_CERT_FILE``. Both servers share the 2 cores with the clients, so the figures are noisy: compare
ratios from the same run. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.run import JSBENCH, VENV_BIN, ServerProc, free_port, wait_port  # noqa: E402
from tests.helpers.certs import make_pki  # noqa: E402

KINDS = ("natsd", "nats-server")


class TlsServer(ServerProc):
    """A ServerProc (its RSS and stop) started with a tls {} block."""

    def __init__(self, kind: str, pki, workdir: Path) -> None:
        self.kind = kind
        self.port = free_port()
        self.store = tempfile.mkdtemp(prefix=f"bench-tls-{kind}-", dir=workdir)
        conf = Path(self.store) / "tls.conf"
        conf.write_text(
            f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", ca_file: "{pki.ca_file}" }}\n'
        )
        args = ["-c", str(conf), "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", self.store]
        cmd = [sys.executable, "-m", "natsd", *args] if kind == "natsd" else [str(VENV_BIN / "nats-server"), *args]
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        wait_port(self.port)
        time.sleep(0.3)


def jsbench(port: int, workload: str, n: int, ca: str) -> float | None:
    out = subprocess.run(
        [str(JSBENCH), f"tls://localhost:{port}", workload, str(n), "128"],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, SSL_CERT_FILE=ca),
    )
    for tok in out.stdout.split():
        if tok.startswith("rate="):
            return float(tok[5:])
    sys.stderr.write(f"[{workload}] {out.stderr.strip()}\n")
    return None


def idle_tls(srv: TlsServer, pki, count: int) -> tuple[float, float]:
    ctx = pki.client_context(with_cert=False)
    before = srv.rss_mb()
    socks = []
    try:
        for _ in range(count):
            raw = socket.create_connection(("127.0.0.1", srv.port))
            raw.recv(4096)  # INFO, in plaintext
            s = ctx.wrap_socket(raw, server_hostname="localhost")
            s.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
            socks.append(s)
        for s in socks:
            s.settimeout(5)
            s.recv(64)  # PONG
        time.sleep(1.0)
        return before, srv.rss_mb()
    finally:
        for s in socks:
            s.close()


_FLOOD = r"""
import socket, ssl, sys, time


done = [0]  # handshakes attempted (kept outside flood() so an interrupt anywhere keeps the count)


def flood(port, seconds, rate):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    open_socks, n, t0 = [], 0, time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end:
        if rate:  # an open-loop flood: the same attempts per second whatever the server's speed
            ahead = t0 + n / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.recv(4096)  # INFO
            if n % 2:
                s.sendall(b"\x00garbage that is not a TLS record\r\n" * 4)
                s.close()
            else:
                inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
                obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
                try:
                    obj.do_handshake()
                except ssl.SSLWantReadError:
                    pass
                s.sendall(out.read())  # a ClientHello, never followed up
                open_socks.append(s)
                if len(open_socks) > 300:
                    open_socks.pop(0).close()
            n += 1
            done[0] = n
        except OSError:
            time.sleep(0.001)


try:
    flood(int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]))
except KeyboardInterrupt:
    pass
print(done[0], flush=True)
"""


async def _rtt(port: int, pki, count: int) -> list[float]:
    import nats

    ctx = pki.client_context(with_cert=False)
    a = await nats.connect(f"tls://localhost:{port}", tls=ctx)
    b = await nats.connect(f"tls://localhost:{port}", tls=ctx)

    async def echo(m):
        await m.respond(m.data)

    await b.subscribe("rtt", cb=echo)
    await b.flush()
    out = []
    for _ in range(count):
        t = time.perf_counter()
        await a.request("rtt", b"x", timeout=2)
        out.append((time.perf_counter() - t) * 1000)
        await asyncio.sleep(0.001)
    await a.close()
    await b.close()
    return out


def flood(srv: TlsServer, pki, count: int, rate: float = 0) -> dict:
    quiet = asyncio.run(_rtt(srv.port, pki, count))
    proc = subprocess.Popen(
        [sys.executable, "-c", _FLOOD, str(srv.port), "60", str(rate)], stdout=subprocess.PIPE, text=True
    )
    try:
        time.sleep(1.0)
        t0 = time.monotonic()
        busy = asyncio.run(_rtt(srv.port, pki, count))
        elapsed = time.monotonic() - t0
    finally:
        proc.send_signal(signal.SIGINT)
        attempts = proc.communicate(timeout=10)[0].strip()

    def pct(v, p):
        return statistics.quantiles(v, n=100)[p - 1]

    return {
        "quiet_p50_ms": round(pct(quiet, 50), 3),
        "quiet_p99_ms": round(pct(quiet, 99), 3),
        "flood_p50_ms": round(pct(busy, 50), 3),
        "flood_p99_ms": round(pct(busy, 99), 3),
        "failing_handshakes": int(attempts or 0),
        "flood_seconds": round(elapsed + 1.0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("parts", nargs="*", default=["core", "jspub", "idle", "flood"])
    ap.add_argument("--n-core", type=int, default=500_000)
    ap.add_argument("--n-jspub", type=int, default=100_000)
    ap.add_argument("--conns", type=int, default=1000)
    ap.add_argument("--rtts", type=int, default=2000)
    ap.add_argument(
        "--flood-rate",
        type=float,
        default=0,
        help="failing handshakes per second (0: as fast as the server lets the flooder go; a faster "
        "server then gets a heavier flood, so compare servers at a fixed rate)",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if not JSBENCH.exists():
        subprocess.run(["bash", str(ROOT / "scripts" / "build-jsbench.sh")], check=True, cwd=ROOT)
    workdir = Path(tempfile.mkdtemp(prefix="bench-tls-"))
    pki = make_pki(workdir / "pki")
    results: dict = {}
    try:
        for part in args.parts:
            res = {}
            for kind in KINDS:
                srv = TlsServer(kind, pki, workdir)
                try:
                    if part in ("core", "jspub"):
                        res[kind] = jsbench(
                            srv.port, part, args.n_core if part == "core" else args.n_jspub, pki.ca_file
                        )
                    elif part == "idle":
                        before, after = idle_tls(srv, pki, args.conns)
                        res[kind] = {
                            "idle_rss_mb": round(before, 1),
                            "with_conns_rss_mb": round(after, 1),
                            "added_mb": round(after - before, 1),
                        }
                    elif part == "flood":
                        res[kind] = flood(srv, pki, args.rtts, args.flood_rate)
                finally:
                    srv.stop()
            if part in ("core", "jspub"):
                ours, ref = res["natsd"], res["nats-server"]
                res["ratio"] = round(ours / ref, 2) if ours and ref else None
                print(
                    f"{part:<6} natsd {ours or 0:>12,.0f}/s  nats-server {ref or 0:>12,.0f}/s  ratio {res['ratio']}",
                    flush=True,
                )
            else:
                for kind in KINDS:
                    print(f"{part:<6} {kind:<12} {json.dumps(res[kind])}", flush=True)
            results[part] = res
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
