"""Core NATS through the real nats-py client: pub/sub, wildcards, queue groups, request/reply,
headers, no-responders, echo, auto-unsubscribe, drain."""

from __future__ import annotations

import asyncio

import nats
import pytest
from nats.errors import NoRespondersError, TimeoutError as NatsTimeout

from tests.helpers.inproc import running_server


async def collect(sub, n, timeout=2.0):
    return [await sub.next_msg(timeout=timeout) for _ in range(n)]


async def test_connect_info(server, nc):
    assert nc.is_connected
    assert nc.connected_server_version.major == 2
    assert nc.connected_server_version.minor >= 9
    assert nc._server_info["headers"] is True
    assert nc._server_info["max_payload"] == 1024 * 1024
    assert nc.client_id > 0
    assert nc._server_info["client_ip"] == "127.0.0.1"
    assert nc._server_info["server_id"] == server.server_id


async def test_pub_sub_exact_and_wildcards(nc):
    exact = await nc.subscribe("a.b.c")
    star = await nc.subscribe("a.*.c")
    full = await nc.subscribe("a.>")
    await nc.publish("a.b.c", b"one")
    await nc.publish("a.x.c", b"two")
    await nc.publish("a.x.y.z", b"three")
    await nc.publish("b.b.c", b"none")
    await nc.flush()
    assert [m.data for m in await collect(exact, 1)] == [b"one"]
    assert [m.data for m in await collect(star, 2)] == [b"one", b"two"]
    got = await collect(full, 3)
    assert [(m.subject, m.data) for m in got] == [("a.b.c", b"one"), ("a.x.c", b"two"), ("a.x.y.z", b"three")]
    with pytest.raises(NatsTimeout):
        await exact.next_msg(timeout=0.05)


async def test_queue_group_one_delivery_per_message(server):
    clients = [await nats.connect(server.client_url) for _ in range(3)]
    try:
        subs = [await c.subscribe("work", queue="q") for c in clients]
        plain = await clients[0].subscribe("work")
        for c in clients:
            await c.flush()
        pub = clients[1]
        for i in range(30):
            await pub.publish("work", str(i).encode())
        await pub.flush()
        await collect(plain, 30)  # every plain subscriber gets all of them
        for c in clients:
            await c.flush()
        await asyncio.sleep(0.05)
        counts = [s.pending_msgs for s in subs]
        assert sum(counts) == 30
        assert all(n > 0 for n in counts)  # round-robin spreads the work
    finally:
        for c in clients:
            await c.close()


async def test_request_reply_and_inbox_subject_verbatim(nc):
    async def responder(msg):
        await msg.respond(msg.data.upper())

    await nc.subscribe("svc.upper", cb=responder)
    for word in (b"hello", b"world"):
        r = await nc.request("svc.upper", word, timeout=2)
        assert r.data == word.upper()


async def test_old_style_request(nc):
    async def responder(msg):
        await msg.respond(b"ok")

    await nc.subscribe("svc.old", cb=responder)
    r = await nc.request("svc.old", b"x", timeout=2, old_style=True)
    assert r.data == b"ok"


async def test_headers_round_trip(nc):
    sub = await nc.subscribe("h")
    await nc.publish("h", b"body", headers={"Foo": "Bar", "X-Multi": "1"})
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"body"
    assert msg.headers == {"Foo": "Bar", "X-Multi": "1"}


async def test_no_responders(nc):
    with pytest.raises(NoRespondersError):
        await nc.request("nobody.home", b"?", timeout=2)


async def test_echo_off(server):
    nc = await nats.connect(server.client_url, no_echo=True)
    other = await nats.connect(server.client_url)
    try:
        mine = await nc.subscribe("e")
        theirs = await other.subscribe("e")
        await other.flush()
        await nc.publish("e", b"from-nc")
        await nc.flush()
        assert (await theirs.next_msg(timeout=2)).data == b"from-nc"
        with pytest.raises(NatsTimeout):
            await mine.next_msg(timeout=0.1)
        await other.publish("e", b"from-other")
        await other.flush()
        assert (await mine.next_msg(timeout=2)).data == b"from-other"
    finally:
        await nc.close()
        await other.close()


async def test_auto_unsubscribe(nc, server):
    sub = await nc.subscribe("auto")
    await sub.unsubscribe(limit=2)  # sends UNSUB <sid> 2: the server auto-unsubscribes
    for i in range(5):
        await nc.publish("auto", str(i).encode())
    await nc.flush()
    got = await collect(sub, 2)
    assert [m.data for m in got] == [b"0", b"1"]
    assert server.global_account.sublist.count() == 0


async def test_unsubscribe_stops_delivery(nc, server):
    sub = await nc.subscribe("u")
    await nc.flush()
    assert server.global_account.sublist.count() == 1
    await sub.unsubscribe()
    await nc.flush()
    assert server.global_account.sublist.count() == 0


async def test_drain(server, nc):
    got = []

    async def cb(msg):
        got.append(msg.data)

    await nc.subscribe("d", cb=cb)
    pub = await nats.connect(server.client_url)
    try:
        for i in range(100):
            await pub.publish("d", b"%d" % i)
        await pub.flush()
        await nc.flush()
        await nc.drain()
        assert len(got) == 100
        assert nc.is_closed
    finally:
        await pub.close()


async def test_large_payload_and_many_messages(nc):
    sub = await nc.subscribe("big")
    payload = bytes(range(256)) * 4000  # ~1 MB
    await nc.publish("big", payload)
    for i in range(1000):
        await nc.publish("big", b"m%d" % i)
    await nc.flush()
    first = await sub.next_msg(timeout=5)
    assert first.data == payload
    rest = await collect(sub, 1000)
    assert rest[-1].data == b"m999"


async def test_reconnect_after_server_restart():
    async with running_server() as s1:
        port = s1.port
        reconnected = asyncio.Event()

        async def on_reconnect():
            reconnected.set()

        nc = await nats.connect(
            s1.client_url, reconnect_time_wait=0.05, max_reconnect_attempts=-1, reconnected_cb=on_reconnect
        )
        sub = await nc.subscribe("r")
        await nc.flush()
    # s1 is shut down here; bring a new server up on the same port.
    try:
        async with running_server(port=port) as s2:
            await asyncio.wait_for(reconnected.wait(), 5)
            await nc.flush()
            assert s2.global_account.sublist.count() == 1  # subscriptions were replayed
            await nc.publish("r", b"after")
            assert (await sub.next_msg(timeout=2)).data == b"after"
    finally:
        await nc.close()


async def test_old_style_request_no_responders_releases_the_inbox(nc, server):
    with pytest.raises(NoRespondersError):
        await nc.request("nobody.home", b"?", timeout=2, old_style=True)
    await nc.flush()
    assert server.global_account.sublist.count() == 0  # UNSUB <sid> 1 was honoured by the 503
