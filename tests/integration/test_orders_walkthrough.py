"""The seeds' ORDERS walkthrough (JetStream technical-preview README), with today's clients:
a stream ``ORDERS`` on ``ORDERS.*``, pull consumers ``NEW`` and ``DISPATCH`` (explicit acks,
max 20 deliveries, 100% ack sampling) and a push consumer ``MONITOR`` (ack none, deliver last,
to ``monitor.ORDERS``). The state is checked after each step as the document shows it."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, ReplayPolicy, StreamConfig

from tests.helpers.inproc import running_server

YEAR = 365 * 24 * 3600


@pytest.fixture
async def js_env():
    async with running_server(jetstream=True) as srv:
        nc = await nats.connect(srv.client_url, allow_reconnect=False)
        try:
            yield nc, nc.jetstream()
        finally:
            await nc.close()


async def _names(nc, stream: str) -> list[str]:
    r = await nc.request(f"$JS.API.CONSUMER.NAMES.{stream}", b"", timeout=2)
    return json.loads(r.data)["consumers"]


async def test_orders_walkthrough(js_env) -> None:
    nc, js = js_env
    # nats str add ORDERS --subjects "ORDERS.*" --ack --max-msgs=-1 --max-bytes=-1 --max-age=1y
    #   --storage file --retention limits --max-msg-size=-1 --discard=old
    si = await js.add_stream(
        StreamConfig(
            name="ORDERS",
            subjects=["ORDERS.*"],
            max_msgs=-1,
            max_bytes=-1,
            max_age=YEAR,
            storage="file",
            retention="limits",
            max_msg_size=-1,
            discard="old",
        )
    )
    assert si.config.name == "ORDERS"

    # $ nats con ls ORDERS -> No Consumers defined
    assert await _names(nc, "ORDERS") == []

    # nats con add ORDERS NEW --filter ORDERS.received --ack explicit --pull --deliver all
    #   --max-deliver=20 --sample 100
    new = await js.add_consumer(
        "ORDERS",
        ConsumerConfig(
            durable_name="NEW",
            filter_subject="ORDERS.received",
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            max_deliver=20,
            sample_freq="100",
            replay_policy=ReplayPolicy.INSTANT,
        ),
    )
    assert new.name == "NEW"
    assert new.config.ack_wait == 30 and new.config.max_deliver == 20 and new.config.sample_freq == "100"
    assert new.config.deliver_subject is None and new.config.max_waiting == 512
    assert (new.delivered.consumer_seq, new.delivered.stream_seq) == (0, 0)
    assert (new.ack_floor.consumer_seq, new.ack_floor.stream_seq) == (0, 0)
    assert new.num_pending == 0 and new.num_redelivered == 0

    # nats con add ORDERS DISPATCH --filter ORDERS.processed --ack explicit --pull --deliver all
    #   --sample 100 --max-deliver 20
    await js.add_consumer(
        "ORDERS",
        ConsumerConfig(
            durable_name="DISPATCH",
            filter_subject="ORDERS.processed",
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            max_deliver=20,
            sample_freq="100",
        ),
    )

    # nats con add ORDERS MONITOR --ack none --target monitor.ORDERS --deliver last --replay instant
    monitor_msgs: list = []

    async def on_monitor(m) -> None:
        monitor_msgs.append(m)

    monitor_sub = await nc.subscribe("monitor.ORDERS", cb=on_monitor)
    mon = await js.add_consumer(
        "ORDERS",
        ConsumerConfig(
            durable_name="MONITOR",
            deliver_subject="monitor.ORDERS",
            ack_policy=AckPolicy.NONE,
            deliver_policy=DeliverPolicy.LAST,
            replay_policy=ReplayPolicy.INSTANT,
        ),
    )
    assert mon.config.deliver_subject == "monitor.ORDERS" and mon.config.ack_policy == AckPolicy.NONE
    assert mon.config.max_ack_pending is None  # ack none: no max_ack_pending

    # $ nats con ls ORDERS -> DISPATCH MONITOR NEW
    assert await _names(nc, "ORDERS") == ["DISPATCH", "MONITOR", "NEW"]

    # ack samples of DISPATCH
    metrics: list = []

    async def on_metric(m) -> None:
        metrics.append(json.loads(m.data))

    await nc.subscribe("$JS.EVENT.METRIC.CONSUMER.ACK.ORDERS.DISPATCH", cb=on_metric)
    await nc.flush()

    # nats pub ORDERS.processed "order 1" / "order 2" / "order 3"
    for i in (1, 2, 3):
        await js.publish("ORDERS.processed", f"order {i}".encode())

    # nats con next ORDERS DISPATCH (twice; each acknowledged)
    dispatch = await js.pull_subscribe_bind("DISPATCH", stream="ORDERS")
    for i in (1, 2):
        msgs = await dispatch.fetch(1, timeout=2)
        assert len(msgs) == 1 and msgs[0].subject == "ORDERS.processed" and msgs[0].data == f"order {i}".encode()
        await msgs[0].ack_sync()
    info = await js.consumer_info("ORDERS", "DISPATCH")
    assert (info.delivered.consumer_seq, info.delivered.stream_seq) == (2, 2)
    assert (info.ack_floor.consumer_seq, info.ack_floor.stream_seq) == (2, 2)
    assert info.num_pending == 1 and info.num_ack_pending == 0

    # nats req '$JS.API.CONSUMER.MSG.NEXT.ORDERS.DISPATCH' '' -> order 3 (a plain request cannot ack).
    # The reply keeps the message's own subject, so nats-py's muxed request (which matches replies
    # by subject) times out against nats-server too; an old-style request (own inbox) works.
    r = await nc.request("$JS.API.CONSUMER.MSG.NEXT.ORDERS.DISPATCH", b"", timeout=2, old_style=True)
    assert r.subject == "ORDERS.processed" and r.data == b"order 3"
    assert r.reply.startswith("$JS.ACK.ORDERS.DISPATCH.1.3.3.")
    info = await js.consumer_info("ORDERS", "DISPATCH")
    assert info.num_ack_pending == 1 and info.num_pending == 0
    assert (info.delivered.consumer_seq, info.delivered.stream_seq) == (3, 3)

    # NEW only sees ORDERS.received
    info = await js.consumer_info("ORDERS", "NEW")
    assert info.num_pending == 0
    await js.publish("ORDERS.received", b"order 4")
    newsub = await js.pull_subscribe_bind("NEW", stream="ORDERS")
    msgs = await newsub.fetch(1, timeout=2)
    assert msgs[0].subject == "ORDERS.received" and msgs[0].data == b"order 4"
    await msgs[0].ack_sync()

    # MONITOR pushed every message to monitor.ORDERS with its original subject, no ack reply needed
    for _ in range(50):
        if len(monitor_msgs) >= 4:
            break
        await asyncio.sleep(0.02)
    assert [m.subject for m in monitor_msgs] == ["ORDERS.processed"] * 3 + ["ORDERS.received"]
    assert [m.data for m in monitor_msgs] == [b"order 1", b"order 2", b"order 3", b"order 4"]
    info = await js.consumer_info("ORDERS", "MONITOR")
    assert info.push_bound is True
    assert (info.delivered.consumer_seq, info.delivered.stream_seq) == (4, 4)
    assert (info.ack_floor.consumer_seq, info.ack_floor.stream_seq) == (4, 4)

    # 100% sampling: one metric per ack of DISPATCH
    await nc.flush()
    assert len(metrics) == 2
    assert metrics[0]["type"] == "io.nats.jetstream.metric.v1.consumer_ack"
    assert (metrics[0]["stream"], metrics[0]["consumer"], metrics[0]["stream_seq"], metrics[0]["deliveries"]) == (
        "ORDERS",
        "DISPATCH",
        1,
        1,
    )
    assert metrics[0]["ack_time"] >= 0
    await monitor_sub.unsubscribe()
