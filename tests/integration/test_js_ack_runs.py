"""A client acking messages one by one sends them back to back; the server takes such a read as
one run (parser OP_PUB_RUN -> router.route_run -> the ack hub's run handler). Over real sockets:
the consumer state and the bytes the client gets back are those of acks handled one at a time."""

from __future__ import annotations

import json
import re

import pytest
from nats.js.api import ConsumerConfig

from tests.helpers.inproc import server_and_client
from tests.helpers.rawclient import RawClient

pytestmark = pytest.mark.integration

MSG_RE = re.compile(rb"MSG (\S+) (\S+) (\$JS\.ACK\.\S+) (\d+)\r\n")


async def _fetch_raw(
    c: RawClient, stream: str, consumer: str, n: int, sid: bytes = b"9", verbose: bool = False
) -> list[bytes]:
    req = json.dumps({"batch": n, "expires": 5_000_000_000}).encode()
    await c.send(
        b"PUB $JS.API.CONSUMER.MSG.NEXT.%s.%s _INBOX.raw.%s %d\r\n%s\r\n"
        % (stream.encode(), consumer.encode(), sid, len(req), req)
    )
    if verbose:
        await c.expect(rb"\+OK\r\n")  # the request's, before the deliveries (as nats-server)
    acks = []
    while len(acks) < n:
        m = await c.expect(rb"MSG \S+ " + sid + rb" (\$JS\.ACK\.\S+) (\d+)\r\n", timeout=5)
        await c.expect(rb".{%d}\r\n" % int(m.group(2)))
        acks.append(m.group(1))
    return acks


async def _setup(nc, name: str, n: int, consumers: list[str]) -> None:
    js = nc.jetstream()
    await js.add_stream(name=name, subjects=[name.lower() + ".>"])
    for c in consumers:
        await js.add_consumer(name, ConsumerConfig(durable_name=c, ack_policy="explicit"))
    for i in range(n):
        await js.publish(f"{name.lower()}.{i % 4}", b"m%d" % i)


async def test_a_run_of_acks_in_one_write_acks_everything():
    async with server_and_client(jetstream=True) as (server, nc):
        await _setup(nc, "S", 300, ["C"])
        async with RawClient.connect(server.port) as c:
            await c.send(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB _INBOX.raw.* 9\r\n')
            acks = await _fetch_raw(c, "S", "C", 300)
            await c.send(b"".join(b"PUB %s 4\r\n+ACK\r\n" % a for a in acks) + b"PING\r\n")
            await c.expect(rb"PONG\r\n")
        info = await nc.jetstream().consumer_info("S", "C")
        assert info.num_ack_pending == 0
        assert info.ack_floor.stream_seq == 300 and info.ack_floor.consumer_seq == 300


async def test_verbose_clients_get_one_ok_per_ack():
    async with server_and_client(jetstream=True) as (server, nc):
        await _setup(nc, "S", 50, ["C"])
        async with RawClient.connect(server.port) as c:
            await c.send(b'CONNECT {"verbose":true,"pedantic":false}\r\nSUB _INBOX.raw.* 9\r\n')
            await c.expect(rb"\+OK\r\n\+OK\r\n")
            acks = await _fetch_raw(c, "S", "C", 50, verbose=True)
            await c.send(b"".join(b"PUB %s 4\r\n+ACK\r\n" % a for a in acks) + b"PING\r\n")
            await c.expect(rb"(\+OK\r\n){50}PONG\r\n")
        assert (await nc.jetstream().consumer_info("S", "C")).num_ack_pending == 0


async def test_acks_mixed_with_other_messages_and_consumers_keep_their_order():
    async with server_and_client(jetstream=True) as (server, nc):
        await _setup(nc, "S", 40, ["C", "D"])
        await _setup(nc, "T", 40, ["E"])
        seen = []

        async def watch(m):
            seen.append(m.subject)

        await nc.subscribe("watch.*", cb=watch)
        await nc.flush()
        async with RawClient.connect(server.port) as c:
            await c.send(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB _INBOX.raw.* 9\r\n')
            a = await _fetch_raw(c, "S", "C", 40)
            b = await _fetch_raw(c, "S", "D", 40)
            e = await _fetch_raw(c, "T", "E", 40)
            out = []
            for i in range(40):
                out.append(b"PUB %s 4\r\n+ACK\r\n" % a[i])
                out.append(b"PUB %s 0\r\n\r\n" % b[i])  # an empty body acks too
                if i % 10 == 0:
                    out.append(b"PUB watch.%d 4\r\nnote\r\n" % i)
                out.append(b"PUB %s 4\r\n%s\r\n" % (e[i], b"+ACK" if i % 2 else b"-NAK"))
            # a subject with an unknown consumer and a bad sequence in the middle of a run
            out.insert(7, b"PUB $JS.ACK.S.NOPE.1.1.1.0.0 4\r\n+ACK\r\n")
            out.insert(9, b"PUB $JS.ACK.S.C.1.x.1.0.0 4\r\n+ACK\r\n")
            await c.send(b"".join(out) + b"PING\r\n")
            await c.expect(rb"PONG\r\n")
        await nc.flush()
        js = nc.jetstream()
        assert (await js.consumer_info("S", "C")).num_ack_pending == 0
        assert (await js.consumer_info("S", "D")).num_ack_pending == 0
        e_info = await js.consumer_info("T", "E")
        assert e_info.num_ack_pending == 20 and e_info.num_redelivered == 0  # NAKed: pending again
        assert seen == ["watch.0", "watch.10", "watch.20", "watch.30"]
