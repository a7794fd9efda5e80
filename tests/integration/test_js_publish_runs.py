"""Fire-and-forget publishes to a stream sent back to back reach it as one run (parser
``Run`` -> router.route_run/route_batch -> ``Stream.process_run``). Over real sockets: the
stream holds exactly what publishing them one at a time stores, in order, and a client
subscribed to the same subjects (so the run is not handed over whole) sees the same."""

from __future__ import annotations

import pytest

from natsd.jetstream.stream.core import Stream
from tests.helpers.inproc import server_and_client
from tests.helpers.rawclient import RawClient

pytestmark = pytest.mark.integration


async def _stored(js, stream: str, n: int) -> list[tuple[str, bytes]]:
    out = []
    for seq in range(1, n + 1):
        m = await js.get_msg(stream, seq)
        out.append((m.subject, m.data))
    return out


@pytest.mark.parametrize("same_subject", [False, True])
async def test_a_run_of_publishes_is_stored_in_order(same_subject, monkeypatch):
    runs = []
    real = Stream.process_run

    def process_run(self, run):
        runs.append(len(run))
        real(self, run)

    monkeypatch.setattr(Stream, "process_run", process_run)
    async with server_and_client(jetstream=True) as (server, nc):
        js = nc.jetstream()
        await js.add_stream(name="R", subjects=["r.>"])
        n = 200
        # Same size (the parser's run shape) and, for OP_PUB_RUN, varying subjects.
        subjects = [b"r.1" if same_subject else b"r.%d" % (i % 7) for i in range(n)]
        payloads = [b"p%04d" % i for i in range(n)]
        async with RawClient.connect(server.port) as c:
            await c.send(b'CONNECT {"verbose":false,"pedantic":false}\r\n')
            await c.send(
                b"".join(b"PUB %s %d\r\n%s\r\n" % (s, len(p), p) for s, p in zip(subjects, payloads)) + b"PING\r\n"
            )
            await c.expect(rb"PONG\r\n")
        info = await js.stream_info("R")
        assert info.state.messages == n and info.state.last_seq == n
        assert await _stored(js, "R", n) == [(s.decode(), p) for s, p in zip(subjects, payloads)]
        # The stream took them as runs (the first message of a read teaches the parser the shape).
        assert runs and sum(runs) >= n - 10 and max(runs) > 1


async def test_a_run_with_a_client_subscriber_too_goes_message_by_message():
    async with server_and_client(jetstream=True) as (server, nc):
        js = nc.jetstream()
        await js.add_stream(name="R", subjects=["r.>"])
        got = []

        async def cb(m):
            got.append((m.subject, m.data))

        await nc.subscribe("r.>", cb=cb)
        await nc.flush()
        n = 50
        sent = [(b"r.%d" % (i % 3), b"q%03d" % i) for i in range(n)]
        async with RawClient.connect(server.port) as c:
            await c.send(b'CONNECT {"verbose":false,"pedantic":false}\r\n')
            await c.send(b"".join(b"PUB %s %d\r\n%s\r\n" % (s, len(p), p) for s, p in sent) + b"PING\r\n")
            await c.expect(rb"PONG\r\n")
        await nc.flush()
        want = [(s.decode(), p) for s, p in sent]
        assert await _stored(js, "R", n) == want
        for _ in range(50):
            if len(got) == n:
                break
            await nc.flush()
        assert got == want
