"""Many consumers on one stream (issue 31): a publish wakes only the consumers that can take the
message (push, or pull with requests waiting); the idle ones must still count num_pending
exactly, get exactly their filter's messages, and keep interest/workqueue retention right."""

from __future__ import annotations

import asyncio

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StreamConfig

from tests.helpers.inproc import running_server

pytestmark = pytest.mark.timeout(60)

N_FILTERS = 12


@pytest.fixture
async def js_env():
    async with running_server(jetstream=True) as srv:
        nc = await nats.connect(srv.client_url, allow_reconnect=False)
        try:
            yield nc, nc.jetstream()
        finally:
            await nc.close()


async def _consumers(js, stream: str, per_filter: int) -> list[tuple[str, str]]:
    out = []
    for k in range(N_FILTERS):
        for j in range(per_filter):
            name = f"D{k}_{j}"
            cfg = ConsumerConfig(durable_name=name, ack_policy=AckPolicy.EXPLICIT, filter_subject=f"m.{k}")
            await js.add_consumer(stream, cfg)
            out.append((name, f"m.{k}"))
    return out


async def _publish(js, n: int) -> dict[str, list[bytes]]:
    sent: dict[str, list[bytes]] = {}
    for i in range(n):
        subj = f"m.{(i * 7) % N_FILTERS}"
        payload = str(i).encode()
        await js.publish(subj, payload)
        sent.setdefault(subj, []).append(payload)
    return sent


async def _fetch_all(js, stream: str, name: str, filt: str, n: int, ack: bool = True) -> list[bytes]:
    sub = await js.pull_subscribe_bind(name, stream)
    got = []
    while len(got) < n:
        for m in await sub.fetch(n - len(got), timeout=2):
            assert m.subject == filt
            got.append(m.data)
            if ack:
                await m.ack_sync()
    await sub.unsubscribe()
    return got


async def test_idle_filtered_consumers_count_and_get_exactly_their_messages(js_env):
    nc, js = js_env
    await js.add_stream(StreamConfig(name="M", subjects=["m.>"]))
    cons = await _consumers(js, "M", 3)
    sent = await _publish(js, 240)
    for name, filt in cons:
        info = await js.consumer_info("M", name)
        assert info.num_pending == len(sent[filt]), name
    # one consumer per filter reads everything: exactly its subject's messages, in order
    for name, filt in cons[::3]:
        assert await _fetch_all(js, "M", name, filt, len(sent[filt])) == sent[filt]
        info = await js.consumer_info("M", name)
        assert info.num_pending == 0 and info.num_ack_pending == 0
    # more publishes while all are idle again: the counts follow
    more = await _publish(js, 24)
    for name, filt in cons:
        info = await js.consumer_info("M", name)
        expected = len(more[filt]) + (0 if (name, filt) in cons[::3] else len(sent[filt]))
        assert info.num_pending == expected, name


async def test_waiting_pull_request_is_served_by_a_later_publish(js_env):
    nc, js = js_env
    await js.add_stream(StreamConfig(name="W", subjects=["m.>"]))
    await _consumers(js, "W", 2)
    sub = await js.pull_subscribe_bind("D5_1", "W")
    fetch = asyncio.ensure_future(sub.fetch(1, timeout=3))
    await asyncio.sleep(0.2)  # the request waits on an empty stream
    await js.publish("m.4", b"no")
    await js.publish("m.5", b"a")
    msgs = await fetch
    assert [(m.subject, m.data) for m in msgs] == [("m.5", b"a")]
    await msgs[0].ack_sync()
    # served: the consumer is idle; a publish meanwhile is counted and a new request gets it
    await js.publish("m.5", b"b")
    assert (await js.consumer_info("W", "D5_1")).num_pending == 1
    fetch = asyncio.ensure_future(sub.fetch(1, timeout=3))
    await asyncio.sleep(0.2)
    msgs = await fetch
    assert [m.data for m in msgs] == [b"b"]
    assert (await js.consumer_info("W", "D5_0")).num_pending == 2
    await sub.unsubscribe()


async def test_interest_retention_with_many_consumers(js_env):
    nc, js = js_env
    await js.add_stream(StreamConfig(name="I", subjects=["m.>"], retention=RetentionPolicy.INTEREST))
    cons = await _consumers(js, "I", 2)
    sent = await _publish(js, 120)
    assert (await js.stream_info("I")).state.messages == 120
    for name, filt in cons:
        if name != "D3_1":
            await _fetch_all(js, "I", name, filt, len(sent[filt]))
    # only D3_1's messages are still wanted
    assert (await js.stream_info("I")).state.messages == len(sent["m.3"])
    await _fetch_all(js, "I", "D3_1", "m.3", len(sent["m.3"]))
    for _ in range(100):
        if (await js.stream_info("I")).state.messages == 0:
            break
        await asyncio.sleep(0.02)
    assert (await js.stream_info("I")).state.messages == 0


async def test_workqueue_with_many_filtered_consumers(js_env):
    nc, js = js_env
    await js.add_stream(StreamConfig(name="Q", subjects=["m.>"], retention=RetentionPolicy.WORK_QUEUE))
    cons = await _consumers(js, "Q", 1)
    sent = await _publish(js, 120)
    for name, filt in cons:
        assert (await js.consumer_info("Q", name)).num_pending == len(sent[filt])
    for name, filt in cons:
        assert await _fetch_all(js, "Q", name, filt, len(sent[filt])) == sent[filt]
    for _ in range(100):
        if (await js.stream_info("Q")).state.messages == 0:
            break
        await asyncio.sleep(0.02)
    assert (await js.stream_info("Q")).state.messages == 0
    for name, _filt in cons:
        assert (await js.consumer_info("Q", name)).num_pending == 0
