"""Pinned-client pull fetch throughput (priority groups), natsd vs nats-server in the same run.

    .venv/bin/python bench/bench_priority.py [N] [--batch B]

A memory stream holding N 128-byte messages; a pull consumer with ``priority_policy:
pinned_client`` (group ``A``, ack none) and, for comparison, the same consumer without priority
groups. One raw-socket client fetches everything: a first request ``{"batch": B, "group": "A"}``
gets the pin, then it keeps two requests carrying the pin id (``"id"``) outstanding, sending the
next each time B messages arrived. Every delivery of the pinned consumer carries ``Nats-Pin-Id``
(checked on the first one). The client only counts frames, so it costs little; both servers run
as subprocesses, one after the other, on the same machine. Figure: messages/s from the first
request to the last message. Nothing is asserted; target: pinned natsd / nats-server >= 0.8.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from bench.bench_consumer import _fill_by_publish, _start, free_port  # noqa: E402

SEC = 1_000_000_000
PIN_RE = re.compile(rb"Nats-Pin-Id: ([A-Za-z0-9]+)\r\n")
FRAME = b"HMSG r 1 "
PLAIN_FRAME = b"MSG r 1 "


async def _fetch(port: int, n: int, batch: int, pinned: bool) -> float:
    r, w = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
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
    await _fill_by_publish(w, r, n)
    cfg: dict = {"durable_name": "C", "ack_policy": "none", "max_waiting": 16}
    if pinned:
        cfg.update(priority_groups=["A"], priority_policy="pinned_client")
    await req("$JS.API.CONSUMER.CREATE.R.C", {"stream_name": "R", "config": cfg})
    w.write(b"SUB in 1\r\n")
    nxt = b"$JS.API.CONSUMER.MSG.NEXT.R.C"

    def pull(pin: bytes | None) -> None:
        body: dict = {"batch": batch, "expires": 30 * SEC}
        if pinned:
            body["group"] = "A"
            if pin:
                body["id"] = pin.decode()
        data = json.dumps(body).encode()
        w.write(b"PUB %s in %d\r\n%s\r\n" % (nxt, len(data), data))

    frame = FRAME if pinned else PLAIN_FRAME
    t0 = time.perf_counter()
    pull(None)
    await w.drain()
    got, tail, t_last = 0, b"", t0
    pin: bytes | None = None
    asked = batch
    while got < n:
        try:
            chunk = await asyncio.wait_for(r.read(1 << 20), 5)
        except asyncio.TimeoutError:
            break
        if not chunk:
            break
        t_last = time.perf_counter()
        buf = tail + chunk
        got += buf.count(frame) - tail.count(frame)
        tail = buf[-96:]
        if pin is None:
            if pinned:
                m = PIN_RE.search(buf)
                if m is None:
                    continue
                pin = m.group(1)
            else:
                pin = b""
            pull(pin)  # two outstanding from now on
            asked += batch
        while asked - got < 2 * batch and asked < n:
            pull(pin)
            asked += batch
    w.close()
    if got < n:
        raise RuntimeError(f"only {got} of {n} messages arrived")
    return got / (t_last - t0)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=500)
    a = ap.parse_args()
    rates: dict = {}
    for pinned in (True, False):
        for kind in ("natsd", "nats-server"):
            port = free_port()
            with tempfile.TemporaryDirectory() as d:
                p = _start(kind, port, d)
                try:
                    rates[kind, pinned] = await _fetch(port, a.n, a.batch, pinned)
                finally:
                    p.terminate()
                    p.wait()
    for pinned in (True, False):
        ours, ref = rates["natsd", pinned], rates["nats-server", pinned]
        what = "pinned_client" if pinned else "no priority groups"
        print(
            f"pull fetch, {what}, n={a.n} batch={a.batch}: natsd {ours:,.0f} msgs/s, "
            f"nats-server {ref:,.0f} msgs/s, ratio {ours / ref:.2f}"
        )
    print("(a Python client counting frames: it caps the reference's figure; the machine is shared, figures are noisy)")


if __name__ == "__main__":
    asyncio.run(main())
