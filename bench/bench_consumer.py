"""Consumer delivery rates of natsd (and, for replay, nats-server in the same run).

    .venv/bin/python bench/bench_consumer.py replay [N]     # push replay of N stored messages
    .venv/bin/python bench/bench_consumer.py loop [N]       # consumer loop alone, no sockets
    .venv/bin/python bench/bench_consumer.py idle [N]       # N idle durables: RSS and idle CPU

``replay``: a stream with N 128-byte messages, one push consumer configured like nats-py's
ordered consumer (ack none, flow control, 5s heartbeats), one raw-socket subscriber that answers
flow-control requests and only counts bytes (so the client costs little). Both servers are run,
natsd in-process on its own loop and nats-server as a subprocess; the figure is messages/s
from consumer creation to the last message.

``loop``: the consumer code alone over a memory store and an in-memory Ports: push/ack none and
pull/explicit acks (batch 500), messages/s. It isolates what the consumer costs per message
from the server's routing and socket work.

``idle``: N durable pull consumers on one file stream (both servers as subprocesses): RSS
before/after and CPU seconds used during 5 idle seconds.

Nothing is asserted; targets (issue 4): push replay >= 150k msgs/s; jsfetch (bench/run.py)
>= 0.7x nats-server; 10,000 idle durables < 200 MB RSS and no CPU while idle.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

SEC = 1_000_000_000
FC_RE = re.compile(rb"HMSG dlv 1 (\$JS\.FC\.[^ ]+) ")


async def _replay_client(port: int, n: int, fill) -> float:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    await r.readline()
    w.write(b'CONNECT {"verbose":false,"headers":true,"protocol":1}\r\nPING\r\n')
    await w.drain()
    while not (await r.readline()).startswith(b"PONG"):
        pass

    async def req(subj: str, body: dict) -> None:
        data = json.dumps(body).encode()
        w.write(b"SUB _R 99\r\nPUB %s _R %d\r\n%s\r\n" % (subj.encode(), len(data), data))
        await w.drain()
        line = await r.readline()
        while not line.startswith(b"MSG"):  # skip async INFO / PONG lines
            line = await r.readline()
        await r.readexactly(int(line.split()[-1]) + 2)
        w.write(b"UNSUB 99\r\n")

    await req("$JS.API.STREAM.CREATE.R", {"name": "R", "subjects": ["r"], "storage": "memory"})
    await fill(w, r, n)
    w.write(b"SUB dlv 1\r\n")
    await w.drain()
    cfg = {
        "deliver_subject": "dlv",
        "ack_policy": "none",
        "flow_control": True,
        "idle_heartbeat": 5 * SEC,
        "max_deliver": 1,
        "mem_storage": True,
    }
    t0 = time.perf_counter()
    await req("$JS.API.CONSUMER.CREATE.R", {"stream_name": "R", "config": cfg})
    got, tail, t_last = 0, b"", t0
    while got < n:
        try:
            chunk = await asyncio.wait_for(r.read(1 << 20), 3)
        except asyncio.TimeoutError:
            break
        if not chunk:
            break
        t_last = time.perf_counter()
        buf = tail + chunk
        got += buf.count(b"MSG r 1 ") - tail.count(b"MSG r 1 ")
        for m in FC_RE.finditer(buf[max(len(tail) - 80, 0) :]):
            w.write(b"PUB " + m.group(1) + b" 0\r\n\r\n")
        tail = buf[-80:]
    w.close()
    return got / (t_last - t0)


async def _fill_by_publish(w, r, n: int) -> None:
    payload = b"x" * 128
    for i in range(0, n, 1000):
        k = min(1000, n - i)
        w.write(b"".join(b"PUB r 128\r\n" + payload + b"\r\n" for _ in range(k)))
        await w.drain()
    w.write(b"PING\r\n")
    await w.drain()
    while not (await r.readline()).startswith(b"PONG"):
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(kind: str, port: int, store: str) -> subprocess.Popen:
    args = ["-a", "127.0.0.1", "-p", str(port), "-js", "-sd", store]
    cmd = [sys.executable, "-m", "natsd", *args] if kind == "natsd" else [str(ROOT / ".venv/bin/nats-server"), *args]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise RuntimeError(f"{kind} did not start")


async def bench_replay(n: int) -> None:
    """Both servers as subprocesses (the client must not share natsd's loop)."""
    rates = {}
    for kind in ("natsd", "nats-server"):
        port = free_port()
        with tempfile.TemporaryDirectory() as d:
            p = _start(kind, port, d)
            try:
                rates[kind] = await _replay_client(port, n, _fill_by_publish)
            finally:
                p.terminate()
                p.wait()
    ours, ref = rates["natsd"], rates["nats-server"]
    print(
        f"push replay n={n}: natsd {ours:,.0f} msgs/s, nats-server {ref:,.0f} msgs/s, ratio {ours / ref:.2f}"
        " (the Python reading client caps the reference's figure)"
    )


def bench_loop(n: int) -> None:
    from tests.unit.jetstream.test_consumer_harness import Harness

    h = Harness()
    for _ in range(n):
        h.store.store_msg("orders.x", None, b"x" * 128)
    count = [0]

    def deliver(route, subject, reply, hdr, payload) -> None:  # noqa: ANN001
        count[0] += 1

    h.ports.deliver = deliver
    h.ports.client_subscribe("push.x")
    t0 = time.perf_counter()
    c = h.consumer(deliver_subject="push.x", ack_policy="none", flow_control=True, idle_heartbeat=5 * SEC)
    while count[0] < n:
        h.clock.run_soon()
        if c.push.fcid:
            c.process_flow_control(c.push.fcid)
    dt = time.perf_counter() - t0
    print(f"loop push/ack none: {n / dt:,.0f} msgs/s")

    h2 = Harness()
    for _ in range(n):
        h2.store.store_msg("orders.x", None, b"x" * 128)
    replies: list[str] = []
    h2.ports.deliver = lambda route, subject, reply, hdr, payload: replies.append(reply)
    h2.consumer(durable_name="P", ack_policy="explicit", max_ack_pending=100_000)
    h2.ports.client_subscribe("_INBOX.p")
    hub = h2.account.consumer_hub
    t0 = time.perf_counter()
    got = 0
    while got < n:
        h2.ports.publish("$JS.API.CONSUMER.MSG.NEXT.ORDERS.P", "_INBOX.p", None, b'{"batch":500,"expires":5000000000}')
        h2.clock.run_soon()
        for r in replies:
            hub._on_ack(r, "", None, b"")
        got += len(replies)
        replies.clear()
        h2.clock.run_soon()
    dt = time.perf_counter() - t0
    print(f"loop pull/explicit acks (batch 500): {n / dt:,.0f} msgs/s")


def _proc_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0


async def bench_idle(n: int) -> None:
    import nats

    for kind in ("natsd", "nats-server"):
        port = free_port()
        with tempfile.TemporaryDirectory() as d:
            p = _start(kind, port, d)
            try:
                nc = await nats.connect(f"nats://127.0.0.1:{port}")
                await nc.request("$JS.API.STREAM.CREATE.S", json.dumps({"name": "S", "subjects": ["s.>"]}).encode())
                r0 = _proc_rss_mb(p.pid)
                futs = []
                for i in range(n):
                    body = {"stream_name": "S", "config": {"durable_name": f"c{i}", "ack_policy": "explicit"}}
                    futs.append(nc.request(f"$JS.API.CONSUMER.CREATE.S.c{i}", json.dumps(body).encode(), timeout=30))
                    if len(futs) >= 200:
                        await asyncio.gather(*futs)
                        futs = []
                await asyncio.gather(*futs)
                await asyncio.sleep(1)
                r1, c0 = _proc_rss_mb(p.pid), _proc_cpu_s(p.pid)
                await asyncio.sleep(5)
                c1 = _proc_cpu_s(p.pid)
                await nc.close()
                print(f"{kind}: {n} idle durables: RSS {r0:.0f} -> {r1:.0f} MB, CPU in 5 idle s: {c1 - c0:.2f} s")
            finally:
                p.terminate()
                p.wait()


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "replay"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else (200_000 if what == "replay" else 100_000)
    if what == "replay":
        asyncio.run(bench_replay(count))
    elif what == "idle":
        asyncio.run(bench_idle(int(sys.argv[2]) if len(sys.argv) > 2 else 10_000))
    else:
        bench_loop(count)
