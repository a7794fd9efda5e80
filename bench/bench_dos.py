"""Issue 14's abuse measures, natsd and nats-server in the same run (both as subprocesses).

    .venv/bin/python bench/bench_dos.py pending [N]   # one consumer with N pending acks (default 1,000,000)
    .venv/bin/python bench/bench_dos.py pulls [N]     # N pull requests waiting, then N messages (default 100,000)
    .venv/bin/python bench/bench_dos.py overlap [N]   # STREAM.CREATE + UPDATE with N subjects (default: a 1 MB request)

Every mode runs a latency probe meanwhile: a separate process doing request/reply through the
server (one connection that subscribes, answers itself and times the round trip, a request every
5 ms); the figure is its p99 during the work.

``pending``: a file stream holds N 16-byte messages; a durable pull consumer (explicit acks,
max_ack_pending unlimited, ack_wait 10 min) gets them all in requests of 100,000 without acking
(N pending acks); then every 100th message is acked while the probe runs (state writes with N
pending). Figures: delivery time, probe p99 during delivery and during the acks, server RSS
growth from before the delivery to the end.

``pulls``: a pull consumer with max_waiting > N gets N requests (batch 1, expires 60 s, all on
one connection, each its own inbox) while its stream is empty, then N messages are published;
the figure is the time from the first request to the last message received.

``overlap``: one STREAM.CREATE with N subjects ``ov.<i>.*`` (as many as fit in the 1 MB the
default max_payload admits), then a STREAM.UPDATE adding one; the figure is each answer's time.

Nothing is asserted: the machine is shared, figures are noisy; the ratio natsd / nats-server is
printed.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEC = 1_000_000_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(kind: str, port: int, store: str) -> subprocess.Popen:
    args = ["-a", "127.0.0.1", "-p", str(port), "-js", "-sd", store]
    if kind == "natsd":
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        cmd = [sys.executable, "-m", "natsd", *args]
        if os.environ.get("BENCH_SCRIPT"):  # another entry point (debugging)
            cmd = [sys.executable, os.environ["BENCH_SCRIPT"], *args]
        if os.environ.get("BENCH_PROFILE"):  # cProfile of the server, written at its clean exit
            cmd = [sys.executable, "-m", "cProfile", "-o", os.environ["BENCH_PROFILE"], "-m", "natsd", *args]
    else:
        env = None
        cmd = [str(ROOT / ".venv/bin/nats-server"), *args]
    err = open(os.environ["BENCH_SERVER_LOG"], "ab") if os.environ.get("BENCH_SERVER_LOG") else subprocess.DEVNULL
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise RuntimeError(f"{kind} did not start")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- the latency probe (its own process) ----------------------------------------------------------


def probe_main(port: int) -> None:
    """Round trips until stdin closes; then prints the latencies (ms) as JSON, one per mark
    ("mark <name>" lines on stdin start a new phase)."""
    import select

    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.recv(65536)
    s.sendall(b'CONNECT {"verbose":false}\r\nSUB echo 1\r\nSUB _r 2\r\nPING\r\n')
    buf = b""
    while b"PONG" not in buf:
        buf += s.recv(65536)
    phases: dict[str, list[float]] = {"start": []}
    phase = "start"
    while True:
        r, _, _ = select.select([sys.stdin], [], [], 0.005)
        if r:
            line = sys.stdin.readline()
            if not line:
                break
            phase = line.split()[-1]
            phases.setdefault(phase, [])
            continue
        t = time.perf_counter()
        s.sendall(b"PUB echo _r 2\r\nhi\r\n")
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return
            buf += chunk
            if b"MSG echo 1 _r 2\r\nhi\r\n" in buf:
                buf = buf.replace(b"MSG echo 1 _r 2\r\nhi\r\n", b"", 1)
                s.sendall(b"PUB _r 2\r\nok\r\n")
            if b"MSG _r 2 2\r\nok\r\n" in buf:
                break
        phases[phase].append((time.perf_counter() - t) * 1000)
    print(json.dumps(phases))


class Probe:
    def __init__(self, port: int) -> None:
        self.p = subprocess.Popen(
            [sys.executable, __file__, "probe", str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def mark(self, name: str) -> None:
        self.p.stdin.write(f"mark {name}\n")
        self.p.stdin.flush()

    def finish(self) -> dict[str, list[float]]:
        out, _ = self.p.communicate(timeout=60)
        return json.loads(out)


def p99(xs: list[float]) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))]


# -- a raw client ------------------------------------------------------------------------------------


class Client:
    def __init__(self, r, w) -> None:
        self.r, self.w = r, w

    @classmethod
    async def connect(cls, port: int) -> "Client":
        r, w = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
        await r.readline()
        w.write(b'CONNECT {"verbose":false,"headers":true,"protocol":1}\r\nPING\r\n')
        await w.drain()
        while not (await r.readline()).startswith(b"PONG"):
            pass
        return cls(r, w)

    async def ping(self) -> None:
        self.w.write(b"PING\r\n")
        await self.w.drain()
        while not (await self.r.readline()).startswith(b"PONG"):
            pass

    async def req(self, subj: str, body: bytes | dict, timeout: float = 600) -> bytes:
        data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
        self.w.write(b"SUB _R 99\r\nPUB %s _R %d\r\n%s\r\n" % (subj.encode(), len(data), data))
        await self.w.drain()

        async def read() -> bytes:
            line = await self.r.readline()
            while not line.startswith(b"MSG"):
                line = await self.r.readline()
            return (await self.r.readexactly(int(line.split()[-1]) + 2))[:-2]

        out = await asyncio.wait_for(read(), timeout)
        self.w.write(b"UNSUB 99\r\n")
        return out

    async def publish_many(self, subj: str, n: int, payload: bytes) -> None:
        one = b"PUB %s %d\r\n%s\r\n" % (subj.encode(), len(payload), payload)
        for i in range(0, n, 5000):
            self.w.write(one * min(5000, n - i))
            await self.w.drain()
        await self.ping()

    async def count(self, marker: bytes, n: int, idle: float = 30.0, on_chunk=None) -> int:
        """Read until ``n`` occurrences of ``marker`` (across chunk boundaries) or ``idle`` s of silence."""
        got, tail = 0, b""
        keep = len(marker) - 1
        self.t_last = time.perf_counter()
        while got < n:
            try:
                chunk = await asyncio.wait_for(self.r.read(1 << 20), idle)
            except asyncio.TimeoutError:
                break
            if not chunk:
                break
            self.t_last = time.perf_counter()
            buf = tail + chunk
            got += buf.count(marker) - tail.count(marker)
            if on_chunk is not None:
                on_chunk(buf)
            tail = buf[-keep:]
        return got

    def close(self) -> None:
        self.w.close()


async def fill(c: Client, stream: str, subject: str, n: int, payload: bytes) -> None:
    """Publish until the stream holds ``n`` messages: publishes without a reply are dropped by
    nats-server when its ingest queue is full, so top up what is missing until it settles."""
    want = n
    while True:
        await c.publish_many(subject, want, payload)
        last = -1
        while True:
            info = json.loads(await c.req(f"$JS.API.STREAM.INFO.{stream}", b""))
            have = info["state"]["messages"]
            if have >= n or have == last:
                break
            last = have
            await asyncio.sleep(0.5)
        if have >= n:
            return
        want = n - have


# -- pending ---------------------------------------------------------------------------------------


async def run_pending(kind: str, port: int, pid: int, n: int) -> dict:
    c = await Client.connect(port)
    await c.req("$JS.API.STREAM.CREATE.P", {"name": "P", "subjects": ["p"], "storage": "file"})
    await fill(c, "P", "p", n, b"0123456789abcdef")
    await c.req(
        "$JS.API.CONSUMER.CREATE.P.C",
        {
            "stream_name": "P",
            "config": {"durable_name": "C", "ack_policy": "explicit", "max_ack_pending": -1, "ack_wait": 600 * SEC},
        },
    )
    await asyncio.sleep(1)
    r0 = rss_mb(pid)
    probe = Probe(port)
    await asyncio.sleep(1)
    probe.mark("deliver")
    d = await Client.connect(port)
    d.w.write(b"SUB _D.* 1\r\n")
    t0 = time.perf_counter()
    acks: list[bytes] = []
    got = 0
    per = 100_000
    while got < n:
        k = min(per, n - got)
        d.w.write(
            b"PUB $JS.API.CONSUMER.MSG.NEXT.P.C _D.%d %d\r\n%s\r\n"
            % (got, len(b'{"batch":%d}' % k), b'{"batch":%d}' % k)
        )
        await d.w.drain()
        before = got

        def keep(buf: bytes) -> None:
            # every 100th ack subject, for the ack phase
            for line in buf.split(b"\r\n"):
                if line.startswith(b"MSG p 1 $JS.ACK.") and len(acks) < n // 100 + 1:
                    parts = line.split()
                    try:
                        if int(parts[3].split(b".")[5]) % 100 == 0 and parts[3].count(b".") == 8:
                            acks.append(parts[3])
                    except (IndexError, ValueError):
                        pass  # a line cut at the chunk's end

        got += await d.count(b"MSG p 1 $JS.ACK.", k, idle=60, on_chunk=keep)
        if got == before:
            break
    t_deliver = time.perf_counter() - t0
    r1 = rss_mb(pid)
    probe.mark("acks")
    t1 = time.perf_counter()
    for i in range(0, len(acks), 1000):
        d.w.write(b"".join(b"PUB %s 0\r\n\r\n" % a for a in acks[i : i + 1000]))
        await d.w.drain()
        await asyncio.sleep(0.02)
    await d.ping()
    await asyncio.sleep(2)  # state writes after the acks
    t_acks = time.perf_counter() - t1
    r2 = rss_mb(pid)
    lat = probe.finish()
    info = json.loads(await c.req("$JS.API.CONSUMER.INFO.P.C", b""))
    c.close()
    d.close()
    return {
        "delivered": got,
        "deliver_s": t_deliver,
        "acks": len(acks),
        "acks_s": t_acks,
        "p99_deliver_ms": p99(lat.get("deliver", [])),
        "p99_acks_ms": p99(lat.get("acks", [])),
        "probes": len(lat.get("deliver", [])),
        "rss_growth_mb": max(r1, r2) - r0,
        "num_ack_pending": info.get("num_ack_pending"),
    }


# -- pulls -----------------------------------------------------------------------------------------


async def run_pulls(kind: str, port: int, pid: int, n: int) -> dict:
    c = await Client.connect(port)
    await c.req("$JS.API.STREAM.CREATE.Q", {"name": "Q", "subjects": ["q"], "storage": "memory"})
    await c.req(
        "$JS.API.CONSUMER.CREATE.Q.C",
        {"stream_name": "Q", "config": {"durable_name": "C", "ack_policy": "none", "max_waiting": n + 10}},
    )
    probe = Probe(port)
    await asyncio.sleep(1)
    probe.mark("pulls")
    d = await Client.connect(port)
    d.w.write(b"SUB _P.* 1\r\n")
    body = b'{"batch":1,"expires":60000000000}'
    t0 = time.perf_counter()
    for i in range(0, n, 5000):
        d.w.write(
            b"".join(
                b"PUB $JS.API.CONSUMER.MSG.NEXT.Q.C _P.%d %d\r\n%s\r\n" % (j, len(body), body)
                for j in range(i, min(n, i + 5000))
            )
        )
        await d.w.drain()
    await d.ping()
    t_intake = time.perf_counter() - t0
    reader = asyncio.ensure_future(d.count(b"MSG q 1 ", n, idle=10))
    await fill(c, "Q", "q", n, b"x")
    got = await reader
    t_all = d.t_last - t0  # to the last message received
    lat = probe.finish()
    c.close()
    d.close()
    return {"answered": got, "intake_s": t_intake, "total_s": t_all, "p99_ms": p99(lat.get("pulls", []))}


# -- overlap ---------------------------------------------------------------------------------------


async def run_overlap(kind: str, port: int, pid: int, n: int) -> dict:
    c = await Client.connect(port)
    subjects = [f"ov.{i}.*" for i in range(n)]
    probe = Probe(port)
    await asyncio.sleep(1)
    probe.mark("create")
    t0 = time.perf_counter()
    r = json.loads(await c.req("$JS.API.STREAM.CREATE.OV", {"name": "OV", "subjects": subjects, "storage": "memory"}))
    t_create = time.perf_counter() - t0
    probe.mark("update")
    t0 = time.perf_counter()
    r2 = json.loads(
        await c.req("$JS.API.STREAM.UPDATE.OV", {"name": "OV", "subjects": subjects + ["ov2.>"], "storage": "memory"})
    )
    t_update = time.perf_counter() - t0
    await asyncio.sleep(0.5)
    lat = probe.finish()
    c.close()
    return {
        "subjects": n,
        "create_s": t_create,
        "update_s": t_update,
        "create_error": r.get("error"),
        "update_error": r2.get("error"),
        "p99_ms": p99(lat.get("create", []) + lat.get("update", [])),
    }


def main() -> None:
    what = sys.argv[1] if len(sys.argv) > 1 else "pending"
    if what == "probe":
        probe_main(int(sys.argv[2]))
        return
    defaults = {"pending": 1_000_000, "pulls": 100_000, "overlap": 0}
    n = int(sys.argv[2]) if len(sys.argv) > 2 else defaults[what]
    if what == "overlap" and not n:
        # as many "ov.<i>.*" as fit in a 1 MB request
        size, n = 60, 0
        while size < 1_000_000 - 20:
            size += len(f'"ov.{n}.*",')
            n += 1
        n -= 1
    fn = {"pending": run_pending, "pulls": run_pulls, "overlap": run_overlap}[what]
    kinds = sys.argv[3].split(",") if len(sys.argv) > 3 else ["natsd", "nats-server"]
    results = {}
    for kind in kinds:
        port = free_port()
        with tempfile.TemporaryDirectory() as d:
            p = start(kind, port, d)
            try:
                results[kind] = asyncio.run(fn(kind, port, p.pid, n))
            finally:
                p.terminate()
                p.wait()
        print(kind, json.dumps(results[kind]), flush=True)
    if len(results) == 2:
        a, b = results["natsd"], results["nats-server"]
        for k in a:
            if isinstance(a[k], float) and isinstance(b.get(k), float) and b[k]:
                print(f"  {k}: natsd {a[k]:.3f} / nats-server {b[k]:.3f} = {a[k] / b[k]:.2f}")


if __name__ == "__main__":
    main()
