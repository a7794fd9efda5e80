"""Server CPU per message of a pull consumer's work, without sockets or a second process.

A real natsd ``Server`` (JetStream on a file store) runs in this process; one client connection
is a ``ClientConnection`` over a fake transport, so every byte still goes through the parser,
the connection, the router, the ack hub and the consumer. For batches of 500 it measures
(``time.process_time``):

* deliver: from the ``CONSUMER.MSG.NEXT`` request to the 500 MSG frames in the output buffer;
* ack: the 500 ``PUB $JS.ACK... 4\\r\\n+ACK\\r\\n`` the client sends back one by one (as libnats,
  nats-py and nats.js do), fed in reads of at most 32 KiB, until they are all applied.

    .venv/bin/python bench/bench_acks.py [N=50000]

The two figures are what ``jsfetch`` (bench/run.py) spends per message in the server; they move
little with machine load, unlike the socket benchmark's rate.
"""

from __future__ import annotations

import asyncio
import pathlib
import re
import sys
import tempfile
import time

import nats
from nats.js.api import AckPolicy, ConsumerConfig

from natsd.config.options import JetStreamOptions, ServerOptions
from natsd.server import Server
from natsd.server.connection import ClientConnection

# (the checkout's root goes last on the path: the natsd measured stays the one PYTHONPATH names)
sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))
from tests.helpers.faketransport import BufferTransport as _Transport  # noqa: E402

BATCH = 500
READ = 32 * 1024
ACK_RE = re.compile(rb"MSG \S+ 1 (\$JS\.ACK\.\S+) \d+\r\n")


async def run(n: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="bench-acks-") as d:
        opts = ServerOptions(host="127.0.0.1", port=0, http_port=0)
        opts.jetstream = JetStreamOptions(enabled=True, store_dir=d)
        server = Server(opts)
        await server.start()
        try:
            nc = await nats.connect(f"nats://127.0.0.1:{server.port}")
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s"])
            for _ in range(n):
                await nc.publish("s", b"x" * 128)
            await nc.flush()
            await js.add_consumer(
                "S", ConsumerConfig(durable_name="C", ack_policy=AckPolicy.EXPLICIT, max_ack_pending=100_000)
            )
            t = _Transport()
            c = ClientConnection(server)
            c.connection_made(t)
            c.data_received(
                b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\nSUB _INBOX.x.* 1\r\n'
            )
            await asyncio.sleep(0.01)
            t.buf.clear()
            req = b'{"batch":%d,"expires":5000000000}' % BATCH
            deliver = ack = 0.0
            got = k = 0
            while got < n:
                k += 1
                want = min(BATCH, n - got)
                c0 = time.process_time()
                c.data_received(b"PUB $JS.API.CONSUMER.MSG.NEXT.S.C _INBOX.x.%d %d\r\n%s\r\n" % (k, len(req), req))
                while t.buf.count(b"MSG ") < want:
                    await asyncio.sleep(0)
                c1 = time.process_time()
                acks = ACK_RE.findall(t.buf)
                t.buf.clear()
                got += len(acks)
                data = b"".join(b"PUB %s 4\r\n+ACK\r\n" % a for a in acks)
                c2 = time.process_time()
                for i in range(0, len(data), READ):
                    c.data_received(data[i : i + READ])
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                c3 = time.process_time()
                deliver += c1 - c0
                ack += c3 - c2
            info = await js.consumer_info("S", "C")
            assert info.num_ack_pending == 0 and info.ack_floor.stream_seq == n, info
            await nc.close()
            c.close()
        finally:
            await server.shutdown()
    return deliver / n * 1e6, ack / n * 1e6


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    d, a = asyncio.run(run(n))
    print(f"pull consumer, batches of {BATCH}, n={n}: deliver {d:.2f} us/msg, ack {a:.2f} us/msg (server CPU)")


if __name__ == "__main__":
    main()
