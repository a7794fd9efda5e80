"""MQTT measures (issue 28): natsd vs nats-server in the same run, ratios natsd / nats-server.

* ``qos0`` / ``qos1``: 1 publisher -> 1 subscriber, 128 B payloads, one topic; msgs/s received
  (first publish to last delivery) and the server's CPU µs per message (user+sys of the server
  process over the run, from /proc). QoS 1: the publisher keeps up to ``--window`` PUBLISHes
  unacknowledged; the subscriber PUBACKs every delivery.
* ``idle``: the RSS growth of 1,000 idle MQTT connections (CONNECTed, clean session).

The client is a raw asyncio MQTT 3.1.1 client over natsd.protocol.mqtt's encoders (a client
library in Python would be the bottleneck, not the servers).

    python bench/bench_mqtt.py [--count 50000] [--window 256] [--idle 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from natsd.protocol import mqtt as mp  # noqa: E402
from tests.helpers.servers import free_port, reference_binary  # noqa: E402

PAYLOAD = b"x" * 128
CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / CLK


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Client(asyncio.Protocol):
    """Counts PUBLISHes (PUBACKing QoS 1 ones), PUBACKs and the first CONNACK/SUBACK."""

    def __init__(self) -> None:
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.ready = asyncio.get_running_loop().create_future()
        self.subacked = asyncio.get_running_loop().create_future()
        self.received = 0
        self.acked = 0
        self.want = 0
        self.done = asyncio.get_running_loop().create_future()
        self.ack_event = asyncio.Event()

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        pos, end = 0, len(buf)
        acks = []
        while pos < end:
            start = pos
            b = buf[pos]
            pos += 1
            mult, rl = 1, 0
            while pos < end:
                c = buf[pos]
                pos += 1
                rl += (c & 0x7F) * mult
                mult <<= 7
                if not c & 0x80:
                    break
            else:
                pos = start
                break
            if pos + rl > end:
                pos = start
                break
            t = b & 0xF0
            if t == mp.PUBLISH:
                self.received += 1
                if (b >> 1) & 3:
                    n = (buf[pos] << 8) | buf[pos + 1]
                    pi = buf[pos + 2 + n : pos + 4 + n]
                    acks.append(b"\x40\x02" + pi)
            elif t == mp.PUBACK:
                self.acked += 1
                self.ack_event.set()
            elif t == mp.CONNACK and not self.ready.done():
                self.ready.set_result(buf[pos + 1])
            elif t == mp.SUBACK and not self.subacked.done():
                self.subacked.set_result(None)
            pos += rl
        self.buf = buf[pos:]
        if acks and self.transport is not None:
            self.transport.write(b"".join(acks))
        if self.want and self.received >= self.want and not self.done.done():
            self.done.set_result(time.perf_counter())


async def connect(port: int, cid: str, clean: bool = True) -> Client:
    loop = asyncio.get_running_loop()
    _, c = await loop.create_connection(Client, "127.0.0.1", port)
    c.transport.write(mp.encode_connect(cid, clean=clean, keepalive=0))
    rc = await asyncio.wait_for(c.ready, 10)
    assert rc == 0, rc
    return c


async def throughput(port: int, pid: int, qos: int, count: int, window: int) -> tuple[float, float]:
    sub = await connect(port, f"sub{qos}")
    sub.transport.write(mp.encode_subscribe(1, [(b"bench/t", qos)]))
    await asyncio.wait_for(sub.subacked, 10)
    pub = await connect(port, f"pub{qos}")
    sub.want = count
    cpu0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    if qos == 0:
        pkt = mp.encode_publish(b"bench/t", PAYLOAD)
        chunk = pkt * 100
        for i in range(0, count, 100):
            pub.transport.write(chunk)
            if pub.transport.get_write_buffer_size() > 1 << 20:
                await asyncio.sleep(0)
                while pub.transport.get_write_buffer_size() > 1 << 19:
                    await asyncio.sleep(0.001)
    else:
        sent = 0
        while sent < count:
            n = min(window - (sent - pub.acked), count - sent)
            if n > 0:
                pub.transport.write(
                    b"".join(mp.encode_publish(b"bench/t", PAYLOAD, qos=1, pi=(sent + k) % 65535 + 1) for k in range(n))
                )
                sent += n
            pub.ack_event.clear()
            await pub.ack_event.wait()
    t1 = await asyncio.wait_for(sub.done, 120)
    cpu = cpu_seconds(pid) - cpu0
    for c in (pub, sub):
        c.transport.write(mp.encode_disconnect())
        c.transport.close()
    return count / (t1 - t0), cpu / count * 1e6


async def idle(port: int, pid: int, n: int) -> float:
    await asyncio.sleep(0.5)
    before = rss_bytes(pid)
    conns = []
    for i in range(n):
        conns.append(await connect(port, f"idle{i}"))
    await asyncio.sleep(1.0)
    after = rss_bytes(pid)
    for c in conns:
        c.transport.close()
    return (after - before) / n


def start(kind: str, workdir: Path) -> tuple[subprocess.Popen, int]:
    mport = free_port()
    cfg = workdir / f"{kind}.conf"
    sd = workdir / f"{kind}-store"
    cfg.write_text(f'server_name: {kind}\njetstream {{ store_dir: "{sd}" }}\nmqtt {{ port: {mport} }}\n')
    if kind == "natsd":
        argv = [sys.executable, "-m", "natsd", "-c", str(cfg), "-p", str(free_port()), "-a", "127.0.0.1"]
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    else:
        argv = [reference_binary() or "nats-server", "-c", str(cfg), "-p", str(free_port()), "-a", "127.0.0.1"]
        env = dict(os.environ)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    import socket

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", mport), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, mport


async def run_one(kind: str, args, workdir: Path) -> dict:
    proc, port = start(kind, workdir)
    try:
        try:
            import uvloop  # noqa: F401
        except ImportError:
            pass
        out = {}
        # idle first, on the fresh server: after the throughput runs freed memory would be reused
        # and hide what connections cost
        out["idle"] = await idle(port, proc.pid, args.idle)
        out["qos0"] = await throughput(port, proc.pid, 0, args.count, args.window)
        out["qos1"] = await throughput(port, proc.pid, 1, args.count // 5, args.window)
        return out
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=50_000)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--idle", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        res = {k: asyncio.run(run_one(k, args, Path(d))) for k in ("reference", "natsd")}
    r, n = res["reference"], res["natsd"]
    print(f"{'measure':34} {'nats-server':>14} {'natsd':>14} {'ratio':>7}")
    for key, label in (("qos0", "QoS 0 1->1 128 B"), ("qos1", "QoS 1 1->1 128 B")):
        print(f"{label + ' msgs/s':34} {r[key][0]:14,.0f} {n[key][0]:14,.0f} {n[key][0] / r[key][0]:7.2f}")
        print(f"{label + ' server CPU us/msg':34} {r[key][1]:14.2f} {n[key][1]:14.2f} {n[key][1] / r[key][1]:7.2f}")
    print(
        f"{'idle MQTT connection RSS (bytes)':34} {r['idle']:14,.0f} {n['idle']:14,.0f} "
        f"{n['idle'] / r['idle'] if r['idle'] else float('nan'):7.2f}"
    )


if __name__ == "__main__":
    main()
