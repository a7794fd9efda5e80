"""Slow consumers, write deadline, lame duck mode, shutdown, and the JetStream seam (Ports) seen
from real clients."""

from __future__ import annotations

import asyncio
import socket

import nats
import pytest

from natsd.clock import ManualClock
from natsd.server.ports import ServerPorts
from tests.helpers.inproc import running_server
from tests.helpers.rawclient import RawClient

QUIET = b'CONNECT {"verbose":false,"pedantic":false}\r\n'


async def stuck_subscriber(port: int, subject: bytes) -> RawClient:
    """A raw client that subscribes and then never reads (tiny receive buffer)."""
    c = await RawClient.open(port)
    sock = c.writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await c.send(QUIET + b"SUB " + subject + b" 1\r\nPING\r\n")
    await c.expect(rb"PONG\r\n")
    c.reader._limit = 1024  # stop the StreamReader from draining the socket for us
    return c


async def flood(port: int, subject: bytes, total: int, size: int = 65536) -> RawClient:
    pub = await RawClient.open(port)
    await pub.send(QUIET)
    chunk = b"PUB " + subject + b" %d\r\n" % size + b"x" * size + b"\r\n"
    for _ in range(total // size):
        await pub.send(chunk)
    await pub.send(b"PING\r\n")
    await pub.expect(rb"PONG\r\n", timeout=10)  # the publisher is never affected
    return pub


async def test_slow_consumer_is_cut_off_alone():
    async with running_server(max_pending=256 * 1024, max_payload=65536) as s:
        stuck = await stuck_subscriber(s.port, b"firehose")
        good = await nats.connect(s.client_url)
        other = await good.subscribe("other")
        await good.flush()
        pub = await flood(s.port, b"firehose", 24 * 1024 * 1024)
        for _ in range(200):
            if s.slow_consumers:
                break
            await asyncio.sleep(0.02)
        assert s.slow_consumers == 1
        assert len(s.clients) == 2  # the publisher and the healthy subscriber remain
        await pub.send(b"PUB other 2\r\nok\r\n")
        assert (await other.next_msg(timeout=2)).data == b"ok"
        assert good.is_connected
        await pub.close()
        await good.close()
        stuck.writer.transport.abort()


async def test_write_deadline_and_producer_stall_with_manual_clock():
    clock = ManualClock()
    async with running_server(clock=clock, max_payload=65536, write_deadline_ns=2_000_000_000) as s:
        stuck = await stuck_subscriber(s.port, b"wd")
        flood_task = asyncio.create_task(flood(s.port, b"wd", 16 * 1024 * 1024))
        for _ in range(500):  # wait until the receiver is congested and the producer stalled
            if s.stalled_clients and any(c.congested for c in s.clients.values()):
                break
            await asyncio.sleep(0.01)
        assert s.stalled_clients >= 1
        assert not flood_task.done()  # the producer is held back, not cut off
        assert s.slow_consumers == 0  # still within the write deadline
        clock.advance(2_000_000_000)
        assert s.slow_consumers == 1
        for _ in range(20):  # stalls end with the consumer, or after STALL_MAX each
            clock.advance(50_000_000)
            await asyncio.sleep(0.01)
            if flood_task.done():
                break
        pub = await asyncio.wait_for(flood_task, 10)  # the publisher finishes normally
        await pub.close()
        stuck.writer.transport.abort()


async def test_lame_duck_mode():
    clock = ManualClock()
    async with running_server(
        clock=clock, lame_duck_duration_ns=3_000_000_000, lame_duck_grace_period_ns=1_000_000_000
    ) as s:
        ldm = asyncio.Event()

        async def on_ldm():
            ldm.set()

        clients = [await nats.connect(s.client_url, allow_reconnect=False, lame_duck_mode_cb=on_ldm) for _ in range(2)]
        task = asyncio.create_task(s.lame_duck())
        await asyncio.wait_for(ldm.wait(), 2)
        assert s.lame_duck_mode
        with pytest.raises(OSError):  # no longer accepting
            await asyncio.open_connection("127.0.0.1", s.port)
        await asyncio.sleep(0.02)
        assert all(c.is_connected for c in clients)  # nobody is dropped during the grace period
        clock.advance(1_000_000_000)
        await asyncio.sleep(0.02)
        clock.advance(2_000_000_000)
        await asyncio.wait_for(task, 2)
        assert not s.running
        for _ in range(100):
            if all(c.is_closed for c in clients):
                break
            await asyncio.sleep(0.02)
        assert all(c.is_closed for c in clients)


async def test_shutdown_flushes_and_closes_clients():
    async with running_server() as s:
        c = await RawClient.open(s.port)
        await c.send(QUIET + b"PING\r\n")
        await c.expect(rb"PONG\r\n")
        await s.shutdown()
        await c.expect_closed()
        await c.close()


async def test_ports_internal_subscription_is_interest_for_clients():
    async with running_server() as s:
        acc = s.global_account
        ports = ServerPorts(acc)
        interest = []
        ports.on_interest(lambda subj, added: interest.append((subj, added)))

        def api(subject, reply, hdr, payload):
            ports.publish(reply, "", None, b'{"ok":' + payload + b"}")

        ports.subscribe("$JS.API.>", api)
        nc = await nats.connect(s.client_url)
        try:
            r = await nc.request("$JS.API.INFO", b"1", timeout=2)  # not a no-responders answer
            assert r.data == b'{"ok":1}'
            sub = await nc.subscribe("deliver.x")
            await nc.flush()
            assert ("deliver.x", True) in interest
            got = []
            ports.subscribe("events.>", lambda *a: got.append(a))
            await nc.publish("events.1", b"e", headers={"K": "V"})
            await nc.flush()
            assert got == [("events.1", "", b"NATS/1.0\r\nK: V\r\n\r\n", b"e")]
            ports.publish("deliver.x", "", b"NATS/1.0\r\nA: b\r\n\r\n", b"pushed")
            m = await sub.next_msg(timeout=2)
            assert (m.data, m.headers) == (b"pushed", {"A": "b"})
            ports.deliver("deliver.x", "orders.9", "$JS.ACK.x", None, b"stored")
            m = await sub.next_msg(timeout=2)
            assert (m.subject, m.reply, m.data) == ("orders.9", "$JS.ACK.x", b"stored")
            await sub.unsubscribe()
            await nc.flush()
            assert ("deliver.x", False) in interest
        finally:
            await nc.close()
        await asyncio.sleep(0.02)
        # the request inbox subscription went away with the client
        assert interest[-1][1] is False


async def test_pid_and_ports_files(tmp_path):
    import json
    import os

    pid_file = tmp_path / "natsd.pid"
    async with running_server(pid_file=str(pid_file), ports_file_dir=str(tmp_path), http_port=-1) as s:
        assert pid_file.read_text() == str(os.getpid())
        ports = json.loads((tmp_path / f"natsd_{os.getpid()}.ports").read_text())
        assert ports == {"nats": [f"nats://127.0.0.1:{s.port}"], "monitoring": [f"http://127.0.0.1:{s.http_port}"]}
    assert not (tmp_path / f"natsd_{os.getpid()}.ports").exists()


async def test_start_failure_cleans_up():
    async with running_server() as s1:
        with pytest.raises(OSError):
            async with running_server(port=s1.port):
                pass  # pragma: no cover - start must fail: the port is taken
