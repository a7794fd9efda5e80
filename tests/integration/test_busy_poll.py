"""Busy polling after requests (natsd.server.transport.busypoll) on a real server with nats-py: a request
keeps the loop polling for the window and only a request does; ``busy_poll: false`` (window 0)
never polls; a request answered while the window is open is answered as before."""

from __future__ import annotations

import asyncio

import nats

from natsd.config.options import options_from_tree
from natsd.config.parser import parse
from tests.helpers.inproc import running_server


async def _wait_idle(server, timeout: float = 2.0) -> None:
    for _ in range(int(timeout / 0.005)):
        if not server.busy_poll.running:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("busy polling never ended")


async def test_requests_open_the_window_plain_publishes_do_not():
    async with running_server(jetstream=True, busy_poll_ns=2_000_000) as s:
        nc = await nats.connect(s.client_url)
        try:
            bp = s.busy_poll
            # Core publishes without a reply subject (and PINGs): no request, no polling.
            for _ in range(20):
                await nc.publish("other", b"x")
            await nc.flush()
            await asyncio.sleep(0.01)
            assert bp.passes == 0 and not bp.running
            # A request (the STREAM.CREATE) opens the 2 ms window, which then runs out: a miss.
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s.>"])
            await _wait_idle(s)
            assert bp.passes > 0 and bp.misses == 1
            # Synchronous publishes one after the other: each lands within a window of the one
            # before, so the credit comes back and the loop keeps polling between them (hits).
            for i in range(50):
                assert (await js.publish("s.1", b"x")).seq == i + 1
            assert bp.running and bp.hits >= 40
            # (a publish that took longer than the 2 ms window on a loaded machine is one more miss)
            misses = bp.misses
            await _wait_idle(s)
            assert bp.misses == misses + 1
        finally:  # (a failed assertion must not leave the connection to a closed loop)
            await nc.close()


async def test_busy_poll_false_never_polls():
    opts = options_from_tree(parse("busy_poll: false\nport: -1", "t.conf", env={}))
    async with running_server(options=opts, jetstream=True) as s:
        assert s.busy_poll.window_ns == 0
        nc = await nats.connect(s.client_url)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        for _ in range(20):
            await js.publish("s.1", b"x")
        assert s.busy_poll.passes == 0 and not s.busy_poll.running
        await nc.close()


async def test_shutdown_ends_the_window():
    async with running_server(busy_poll_ns=60 * 10**9) as s:
        nc = await nats.connect(s.client_url)

        async def answer(m):
            await m.respond(b"ok")

        sub = await nc.subscribe("svc", cb=answer)
        assert (await nc.request("svc", b"q", timeout=2)).data == b"ok"
        assert s.busy_poll.running  # a minute-long window
        await sub.unsubscribe()
        await nc.close()
    await _wait_idle(s)
