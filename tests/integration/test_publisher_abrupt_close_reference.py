"""A publisher that pipelines JetStream publishes with replies, never reads its PubAcks (a 4 KB
receive buffer, so the acks back up towards it) and then closes its socket abruptly: every message
it sent is stored at once, and nothing arrives later, on nats-server and natsd alike.

This is the shape of a failed Spark task's writer (issue 17's "rows stored late after a failed task"):
natsd must neither stall a connection's reads on its own congested PubAcks nor keep bytes of a
closed connection to process later. (The late rows of that test came from Spark handing the failed
attempt's Python writer its remaining input after the failure; see docs/spark.md, Guarantees.)
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import socket
import struct
import termios

import nats
import pytest

from tests.helpers.inproc import side_by_side

pytestmark = [pytest.mark.integration, pytest.mark.reference, pytest.mark.timeout(120)]

N = 20_000
PAYLOAD = b"r" * 1000


async def _count(url: str) -> int:
    nc = await nats.connect(url)
    try:
        r = json.loads((await nc.request("$JS.API.STREAM.INFO.SINK", b"", timeout=10)).data)
        return r["state"]["messages"]
    finally:
        await nc.close()


def _observe(close: str):
    async def observe(url: str) -> tuple:
        nc = await nats.connect(url)
        try:
            r = json.loads(
                (
                    await nc.request(
                        "$JS.API.STREAM.CREATE.SINK",
                        json.dumps({"name": "SINK", "subjects": ["sink.>"]}).encode(),
                        timeout=10,
                    )
                ).data
            )
            assert "error" not in r, r
        finally:
            await nc.close()
        host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
        loop = asyncio.get_running_loop()
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.setblocking(False)
        await loop.sock_connect(s, (host, int(port)))
        await loop.sock_sendall(
            s,
            b'CONNECT {"verbose":false,"pedantic":false,"headers":true,'
            b'"no_responders":true,"protocol":1}\r\nSUB _INBOX.w.* 1\r\n',
        )
        frames = b"".join(b"PUB sink.rows _INBOX.w.%d %d\r\n%s\r\n" % (i, len(PAYLOAD), PAYLOAD) for i in range(N))
        await loop.sock_sendall(s, frames)
        # Until every byte left our socket (TIOCOUTQ: bytes not yet acknowledged by the server's
        # kernel): what an RST then discards is only the acks towards us, never a publish.
        for _ in range(200):
            if struct.unpack("i", fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0] == 0:
                break
            await asyncio.sleep(0.05)
        if close == "rst":  # unread acks and SO_LINGER 0: the kernel sends RST
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        seen = []
        for _ in range(300):  # stored promptly (a loaded machine may take seconds), then stable
            seen.append(await _count(url))
            if seen[-1] == N:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        # (count once stored, count a second later): a late copy would show in the second
        return seen[-1], await _count(url)

    return observe


@pytest.mark.parametrize("close", ["rst", "fin"])
async def test_pipelined_publishes_of_an_abruptly_closed_publisher_are_stored_at_once(tmp_path, close):
    ref, got = await side_by_side(tmp_path, _observe(close))
    assert ref == (N, N)
    assert got == ref
