"""Server CPU per core publish with and without subject mappings (issue 29), no sockets.

A real ``Server`` runs in this process; a publisher and a subscriber are ``ClientConnection`` s
over fake transports, so every byte goes through the parser, the connection and the router.
Reads of 200 ``PUB`` messages (128-byte payloads) to one subject are fed again and again;
figures are ``time.process_time`` per message, best of 20 rounds:

* ``none``: no mappings configured (the hot path: must cost what it cost before mappings);
* ``none-hpub``: the same with a header block per message (HPUB);
* ``unrelated``: the account has a mapping, not for this subject (every publish takes the
  checked path and is looked up);
* ``mapped``: the subject is mapped (``in.* -> out.{{partition(8,1)}}.$1``).

    PYTHONPATH=src .venv/bin/python bench/bench_mappings.py

Run it with ``PYTHONPATH`` naming an older checkout to compare ``none`` before and after.
"""

from __future__ import annotations

import asyncio
import pathlib
import sys
import time

from natsd.config.options import ServerOptions
from natsd.server import Server
from natsd.server.connection import ClientConnection

sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))
from tests.helpers.faketransport import BufferTransport as _Transport

BODY = b"x" * 128
CHUNK = b"".join(b"PUB in.k 128\r\n%s\r\n" % BODY for _ in range(200))
# HPUB with a header per message (the shape of a JetStream publish with Nats-Msg-Id): every HPUB's
# header block is searched for Nats-Trace-Dest (message tracing), so this shows that search's cost.
HCHUNK = b"".join(b"HPUB in.k 35 163\r\nNATS/1.0\r\nNats-Msg-Id: abcdefgh\r\n\r\n%s\r\n" % BODY for _ in range(200))
CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n'


async def measure(mappings: list | None, chunk: bytes = CHUNK) -> float:
    opts = ServerOptions(host="127.0.0.1", port=0, http_port=0)
    if mappings is not None:
        from natsd.subjects.mapping import MapDest

        opts.mappings = [(src, [MapDest(dest)]) for src, dest in mappings]
    server = Server(opts)
    await server.start()
    try:
        sub_t, pub_t = _Transport(), _Transport()
        sub, pub = ClientConnection(server), ClientConnection(server)
        sub.connection_made(sub_t)
        pub.connection_made(pub_t)
        sub.data_received(CONNECT + b"SUB > 1\r\n")
        pub.data_received(CONNECT)
        await asyncio.sleep(0.01)
        best = float("inf")
        for _ in range(20):
            t0 = time.process_time()
            for _ in range(50):
                pub.data_received(chunk)
                sub_t.buf.clear()
                sub.flush()
            best = min(best, (time.process_time() - t0) / (50 * 200) * 1e6)
        return best
    finally:
        await server.shutdown()


async def main() -> None:
    print(f"none       {await measure(None):.3f} us/msg")
    print(f"none-hpub  {await measure(None, HCHUNK):.3f} us/msg")
    try:
        print(f"unrelated  {await measure([('other.*', 'x.$1')]):.3f} us/msg")
        print(f"mapped     {await measure([('in.*', 'out.{{partition(8,1)}}.$1')]):.3f} us/msg")
    except ImportError:
        print("(this checkout has no subject mappings)")


if __name__ == "__main__":
    asyncio.run(main())
