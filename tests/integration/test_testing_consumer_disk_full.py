"""The disk-full fault on a consumer's state writes (issue 26), through nats-py.

As nats-server's consumer store: a state write that fails leaves the older state on disk and the
state dirty (tried again by the next flush, here the stream's periodic sync on the server's
clock); the consumer goes on in memory, its clients see nothing. A crash while the write keeps
failing loses exactly the acknowledgements not on disk: those messages are redelivered after the
restart, nothing else changes."""

from __future__ import annotations

import nats
import pytest
from nats.js.api import ConsumerConfig

from natsd.testing import InProcessServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


async def _setup(srv):
    nc = await nats.connect(srv.url, max_reconnect_attempts=-1, reconnect_time_wait=0.05)
    js = nc.jetstream()
    await js.add_stream(name="FS", subjects=["fs"])
    await js.add_consumer("FS", ConsumerConfig(durable_name="D", ack_policy="explicit"))
    for i in range(10):
        await js.publish("fs", b"%d" % i)
    sub = await js.pull_subscribe_bind("D", stream="FS")
    for m in await sub.fetch(4, timeout=2):
        await m.ack_sync()
    await srv.advance(1)  # past the state writer's gap: ack floor 4 is on disk
    return nc, sub


async def _ack_four_on_a_full_disk(srv, sub) -> None:
    srv.faults.disk_full()
    for m in await sub.fetch(4, timeout=2):
        await m.ack_sync()  # answered as usual: the consumer goes on in memory
    await srv.advance(1)  # the state writer's turn: its write fails
    info = srv.consumer_info("FS", "D")
    assert info["ack_floor"]["stream_seq"] == 8 and info["num_ack_pending"] == 0
    assert sum("writing its state failed" in line for line in srv.captured.logs) == 1, srv.captured.logs


async def test_a_crash_while_consumer_state_writes_fail_redelivers_what_was_not_written():
    async with InProcessServer() as srv:
        nc, sub = await _setup(srv)
        await _ack_four_on_a_full_disk(srv, sub)
        await srv.crash()
        srv.faults.disk_ok()
        await srv.start()
        info = srv.consumer_info("FS", "D")
        assert info["ack_floor"]["stream_seq"] == 4 and info["num_pending"] == 6
        (m,) = await sub.fetch(1, timeout=5)
        assert m.metadata.sequence.stream == 5 and m.data == b"4"
        await nc.close()


async def test_consumer_state_is_written_again_once_space_is_back():
    async with InProcessServer() as srv:
        nc, sub = await _setup(srv)
        await _ack_four_on_a_full_disk(srv, sub)
        srv.faults.disk_ok()
        await srv.advance(121)  # the stream's periodic sync (sync_interval 2m): the dirty state goes out
        assert any("its state is written again" in line for line in srv.captured.logs), srv.captured.logs
        await srv.crash()
        await srv.start()
        info = srv.consumer_info("FS", "D")
        assert info["ack_floor"]["stream_seq"] == 8 and info["num_pending"] == 2
        (m,) = await sub.fetch(1, timeout=5)
        assert m.metadata.sequence.stream == 9
        await nc.close()
