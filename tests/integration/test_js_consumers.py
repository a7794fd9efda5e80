"""Consumers end to end with nats-py through the in-process server: deliver policies, every ack
type, pull fetch options and status codes, push flow control and heartbeats, ordered consumers,
deliver groups, retention interplay and durable state across a restart."""

from __future__ import annotations

import asyncio
import json
import tempfile

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, RetentionPolicy, StreamConfig
from nats.js.errors import BadRequestError, NotFoundError

from natsd.clock import ManualClock
from tests.helpers.inproc import running_server

SEC = 1_000_000_000
MS = 1_000_000


@pytest.fixture
async def js_env():
    async with running_server(jetstream=True) as srv:
        nc = await nats.connect(srv.client_url, allow_reconnect=False)
        try:
            yield nc, nc.jetstream()
        finally:
            await nc.close()


class LoopManualClock(ManualClock):
    """Timers move only when advanced; per-turn batching (call_soon) runs on the real loop, so
    the server keeps serving clients between advances."""

    def call_soon(self, callback) -> None:
        asyncio.get_running_loop().call_soon(callback)


@pytest.fixture
async def manual_env():
    """A server whose timers (ack waits, heartbeats, expiry) move only when the test advances."""
    clock = LoopManualClock()
    async with running_server(jetstream=True, clock=clock) as srv:
        nc = await nats.connect(srv.client_url, allow_reconnect=False)
        try:
            yield nc, nc.jetstream(), clock
        finally:
            await nc.close()


async def _until(pred, timeout: float = 2.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if pred():
            return
        await asyncio.sleep(0.01)
    assert pred()


class Inbox:
    """A raw subscription collecting messages, for status-level assertions."""

    def __init__(self, nc, subject: str) -> None:
        self.nc, self.subject, self.msgs = nc, subject, []

    async def start(self) -> "Inbox":
        async def cb(m) -> None:
            self.msgs.append(m)

        self.sub = await self.nc.subscribe(self.subject, cb=cb)
        await self.nc.flush()
        return self

    def statuses(self) -> list[str]:
        out = []
        for m in self.msgs:
            if m.headers and m.headers.get("Status"):
                out.append(m.headers["Status"] + " " + m.headers.get("Description", ""))
        return out

    def data(self) -> list:
        return [m for m in self.msgs if not (m.headers and m.headers.get("Status"))]


async def _stream(js, name="S", subjects=None, **kw) -> None:
    await js.add_stream(StreamConfig(name=name, subjects=subjects or ["s.>"], **kw))


# ---------------------------------------------------------------------------------------------
# deliver policies


async def test_every_deliver_policy(js_env) -> None:
    nc, js = js_env
    await _stream(js)
    for subj in ("s.a", "s.b", "s.a", "s.b"):
        await js.publish(subj, subj.encode())
    info = await js.stream_info("S")
    mid_time = None
    r = await nc.request("$JS.API.STREAM.MSG.GET.S", json.dumps({"seq": 3}).encode())
    mid_time = json.loads(r.data)["message"]["time"]
    assert info.state.messages == 4

    async def seqs(**cfg) -> list[int]:
        psub = await js.pull_subscribe("s.>", stream="S", config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, **cfg))
        try:
            msgs = await psub.fetch(10, timeout=0.5)
        except nats.errors.TimeoutError:
            msgs = []
        await psub.unsubscribe()
        return [m.metadata.sequence.stream for m in msgs]

    assert await seqs(deliver_policy=DeliverPolicy.ALL) == [1, 2, 3, 4]
    assert await seqs(deliver_policy=DeliverPolicy.LAST) == [4]
    assert await seqs(deliver_policy=DeliverPolicy.NEW) == []
    assert await seqs(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=3) == [3, 4]
    from datetime import datetime

    t = datetime.fromisoformat(mid_time.replace("Z", "+00:00")[:26] + "+00:00")
    assert await seqs(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=t.isoformat()) in ([3, 4], [2, 3, 4])
    # last per subject needs a filter: pull_subscribe("s.>") sets filter_subject
    assert await seqs(deliver_policy=DeliverPolicy.LAST_PER_SUBJECT) == [3, 4]


# ---------------------------------------------------------------------------------------------
# acks


async def test_ack_types_and_ack_sync(manual_env) -> None:
    nc, js, clock = manual_env
    await _stream(js)
    for i in range(5):
        await js.publish("s.x", b"%d" % i)
    psub = await js.pull_subscribe("s.x", durable="A", config=ConsumerConfig(ack_wait=10))
    msgs = await psub.fetch(5, timeout=1)
    assert [m.metadata.num_delivered for m in msgs] == [1] * 5
    await msgs[0].ack()
    await msgs[1].ack_sync()
    await msgs[2].nak()
    await msgs[3].in_progress()
    await msgs[4].term()
    await nc.flush()
    redo = await psub.fetch(1, timeout=1)
    assert redo[0].metadata.sequence.stream == 3 and redo[0].metadata.num_delivered == 2
    await redo[0].ack_sync()
    info = await js.consumer_info("S", "A")
    assert info.num_ack_pending == 1 and info.num_redelivered == 0  # seq 4 (+WPI) still pending
    clock.advance(11 * SEC)
    again = await psub.fetch(1, timeout=1)
    assert again[0].metadata.sequence.stream == 4 and again[0].metadata.num_delivered == 2
    await again[0].ack_sync()
    info = await js.consumer_info("S", "A")
    assert info.num_ack_pending == 0 and (info.ack_floor.stream_seq, info.ack_floor.consumer_seq) == (5, 7)


async def test_nak_delay_and_max_deliver_advisory(manual_env) -> None:
    nc, js, clock = manual_env
    await _stream(js)
    await js.publish("s.x", b"poison")
    advisories: list = []

    async def on_adv(m) -> None:
        advisories.append(json.loads(m.data))

    await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.P", cb=on_adv)
    psub = await js.pull_subscribe("s.x", durable="P", config=ConsumerConfig(ack_wait=1, max_deliver=2))
    m = (await psub.fetch(1, timeout=1))[0]
    await m.nak(delay=5)
    await nc.flush()
    with pytest.raises(nats.errors.TimeoutError):
        await psub.fetch(1, timeout=0.2)
    clock.advance(5 * SEC + 10 * MS)
    m2 = (await psub.fetch(1, timeout=1))[0]
    assert m2.metadata.num_delivered == 2
    clock.advance(2 * SEC)
    # As nats-server: a pull consumer notices the exhausted message when the next request comes.
    with pytest.raises(nats.errors.TimeoutError):
        await psub.fetch(1, timeout=0.2)
    await _until(lambda: len(advisories) == 1)
    assert advisories[0]["type"] == "io.nats.jetstream.advisory.v1.max_deliver"
    assert advisories[0]["deliveries"] == 2 and advisories[0]["stream_seq"] == 1
    info = await js.consumer_info("S", "P")
    assert info.num_ack_pending == 0 and info.num_redelivered == 1


async def test_ack_all_and_ack_none(js_env) -> None:
    nc, js = js_env
    await _stream(js)
    for i in range(4):
        await js.publish("s.x", b"%d" % i)
    psub = await js.pull_subscribe("s.x", durable="ALL", config=ConsumerConfig(ack_policy=AckPolicy.ALL))
    msgs = await psub.fetch(4, timeout=1)
    await msgs[2].ack_sync()
    info = await js.consumer_info("S", "ALL")
    assert info.ack_floor.stream_seq == 3 and info.num_ack_pending == 1
    got: list = []

    async def cb(m) -> None:
        got.append(m)

    await js.subscribe("s.x", durable="NONE", cb=cb, config=ConsumerConfig(ack_policy=AckPolicy.NONE))
    await _until(lambda: len(got) == 4)
    info = await js.consumer_info("S", "NONE")
    assert info.ack_floor.stream_seq == 4 and info.num_ack_pending == 0


# ---------------------------------------------------------------------------------------------
# pull statuses


async def test_pull_status_codes(js_env) -> None:
    nc, js = js_env
    await _stream(js)
    cfg = {
        "durable_name": "C",
        "ack_policy": "explicit",
        "max_waiting": 1,
        "max_batch": 5,
        "max_expires": 2 * SEC,
        "max_bytes": 1000,
    }
    r = await nc.request("$JS.API.CONSUMER.CREATE.S.C", json.dumps({"stream_name": "S", "config": cfg}).encode())
    assert json.loads(r.data)["config"]["max_batch"] == 5
    inbox = await Inbox(nc, "_INBOX.pullstatus").start()

    async def next_req(body) -> None:
        await nc.publish(
            "$JS.API.CONSUMER.MSG.NEXT.S.C",
            json.dumps(body).encode() if isinstance(body, dict) else body,
            reply=inbox.subject,
        )
        await nc.flush()

    await next_req({"batch": 1, "no_wait": True})
    await next_req({"batch": 10})
    await next_req({"batch": 1, "expires": 3 * SEC})
    await next_req({"batch": 1, "max_bytes": 5000})
    await next_req({"batch": 1, "expires": SEC, "idle_heartbeat": 600 * MS})
    await _until(lambda: len(inbox.msgs) == 5)
    assert inbox.statuses() == [
        "404 No Messages",
        "409 Exceeded MaxRequestBatch of 5",
        "409 Exceeded MaxRequestExpires of 2s",
        "409 Exceeded MaxRequestMaxBytes of 1000",
        "400 Bad Request - heartbeat value too large",
    ]
    inbox.msgs.clear()
    await next_req({"batch": 2, "expires": 300 * MS, "idle_heartbeat": 100 * MS})
    await next_req({"batch": 1, "expires": SEC})  # the queue holds 1: exceeded
    await _until(lambda: any(s.startswith("408") for s in inbox.statuses()), timeout=3)
    st = inbox.statuses()
    assert st[0] == "409 Exceeded MaxWaiting"
    assert "100 Idle Heartbeat" in st and st[-1] == "408 Request Timeout"
    hb = [m for m in inbox.msgs if m.headers.get("Status") == "100"][0]
    assert hb.headers["Nats-Last-Consumer"] == "0" and hb.headers["Nats-Last-Stream"] == "0"
    to = inbox.msgs[-1]
    assert to.headers["Nats-Pending-Messages"] == "2" and to.headers["Nats-Pending-Bytes"] == "0"
    inbox.msgs.clear()
    await js.publish("s.x", b"x" * 100)
    await next_req({"batch": 1, "max_bytes": 50, "expires": SEC})
    await _until(lambda: len(inbox.msgs) == 1)
    assert inbox.statuses() == ["409 Message Size Exceeds MaxBytes"]
    inbox.msgs.clear()
    await next_req({"batch": 1, "max_bytes": 900, "expires": SEC})
    await _until(lambda: len(inbox.msgs) == 2)
    assert len(inbox.data()) == 1 and inbox.statuses() == ["409 Batch Completed"]
    inbox.msgs.clear()
    await next_req({"batch": 1, "expires": 2 * SEC})
    await asyncio.sleep(0.05)
    await js.delete_consumer("S", "C")
    await _until(lambda: len(inbox.msgs) == 1)
    assert inbox.statuses() == ["409 Consumer Deleted"]


async def test_fetch_batch_no_wait_and_expiry(js_env) -> None:
    nc, js = js_env
    await _stream(js)
    psub = await js.pull_subscribe("s.>", durable="F")
    with pytest.raises(nats.errors.TimeoutError):
        await psub.fetch(1, timeout=0.3)
    for i in range(3):
        await js.publish("s.x", b"%d" % i)
    msgs = await psub.fetch(10, timeout=0.5)  # no_wait first: 3 then 404
    assert [m.data for m in msgs] == [b"0", b"1", b"2"]
    for m in msgs:
        await m.ack()
    # long poll: the message arrives while the request waits
    task = asyncio.create_task(psub.fetch(1, timeout=2))
    await asyncio.sleep(0.1)
    await js.publish("s.y", b"late")
    got = await task
    assert got[0].data == b"late" and got[0].subject == "s.y"


async def test_fetch_with_heartbeat(js_env) -> None:
    nc, js = js_env
    await _stream(js)
    psub = await js.pull_subscribe("s.>", durable="H")
    task = asyncio.create_task(psub.fetch(2, timeout=1.0, heartbeat=0.2))
    await asyncio.sleep(0.3)
    await js.publish("s.a", b"1")
    msgs = await task
    assert msgs[0].data == b"1"


# ---------------------------------------------------------------------------------------------
# push


async def test_push_flow_control_and_heartbeats(js_env) -> None:
    nc, js = js_env
    await _stream(js, "BIG", ["big"])
    payload = b"z" * 200_000
    for _ in range(40):
        await js.publish("big", payload)
    got: list = []

    async def cb(m) -> None:
        got.append(len(m.data))

    sub = await js.subscribe(
        "big", cb=cb, flow_control=True, idle_heartbeat=0.5, config=ConsumerConfig(ack_policy=AckPolicy.NONE)
    )
    await _until(lambda: len(got) == 40, timeout=10)
    assert set(got) == {200_000}
    await asyncio.sleep(0.7)  # heartbeats keep flowing while idle; the subscription stays healthy
    info = await sub.consumer_info()
    assert info.delivered.stream_seq == 40 and info.num_pending == 0 and info.push_bound
    await sub.unsubscribe()


async def test_filtered_consumers_ack_floor_is_last_delivered(js_env) -> None:
    # Found by the nats.js compat suite: the stream ends with a message the filter skips. After
    # every match is acked, nats-server reports ack_floor = delivered = (10, 19) for a push
    # consumer and for a pull request asking for more than there is (both look past seq 19).
    nc, js = js_env
    await js.add_stream(StreamConfig(name="EV", subjects=["ev.>"]))
    for i in range(1, 21):
        await js.publish("ev.odd" if i % 2 else "ev.even", b"e%d" % i)
    got: list = []

    async def cb(m) -> None:
        got.append(m.metadata.sequence.stream)
        await m.ack()

    sub = await js.subscribe(
        "ev.odd",
        durable="pushd",
        cb=cb,
        manual_ack=True,
        flow_control=True,
        idle_heartbeat=1.0,
        config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT),
    )
    await _until(lambda: len(got) == 10)
    assert got == list(range(1, 20, 2))
    await nc.flush()
    info = await js.consumer_info("EV", "pushd")
    assert (info.delivered.consumer_seq, info.delivered.stream_seq) == (10, 19)
    assert (info.ack_floor.consumer_seq, info.ack_floor.stream_seq) == (10, 19)
    assert info.num_ack_pending == 0 and info.num_pending == 0
    await sub.unsubscribe()

    psub = await js.pull_subscribe("ev.odd", durable="pulld", config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT))
    msgs = await psub.fetch(50, timeout=0.5)
    assert [m.metadata.sequence.stream for m in msgs] == list(range(1, 20, 2))
    for m in msgs:
        await m.ack_sync()
    info = await js.consumer_info("EV", "pulld")
    assert (info.delivered.consumer_seq, info.delivered.stream_seq) == (10, 19)
    assert (info.ack_floor.consumer_seq, info.ack_floor.stream_seq) == (10, 19)


async def test_ordered_consumer_and_headers_only(js_env) -> None:
    nc, js = js_env
    await _stream(js)
    for i in range(20):
        await js.publish(f"s.{i % 3}", b"v%d" % i, headers={"K": str(i)})
    seen: list = []

    async def cb(m) -> None:
        seen.append((m.subject, m.data, m.headers.get("K") if m.headers else None))

    sub = await js.subscribe("s.>", cb=cb, ordered_consumer=True, idle_heartbeat=0.5)
    await _until(lambda: len(seen) == 20)
    assert [s[1] for s in seen] == [b"v%d" % i for i in range(20)]
    assert seen[4] == ("s.1", b"v4", "4")
    await sub.unsubscribe()
    ho: list = []

    async def cb2(m) -> None:
        ho.append(m)

    sub2 = await js.subscribe("s.0", cb=cb2, headers_only=True, ordered_consumer=True)
    await _until(lambda: len(ho) == 7)
    assert ho[0].data == b"" and ho[0].headers["Nats-Msg-Size"] == "2"
    await sub2.unsubscribe()


async def test_deliver_group_spreads_messages(js_env) -> None:
    nc, js = js_env
    await _stream(js)
    a: list = []
    b: list = []

    async def cba(m) -> None:
        a.append(m)
        await m.ack()

    async def cbb(m) -> None:
        b.append(m)
        await m.ack()

    await js.subscribe("s.>", queue="workers", durable="workers", cb=cba)
    await js.subscribe("s.>", queue="workers", durable="workers", cb=cbb)
    for i in range(40):
        await js.publish("s.x", b"%d" % i)
    await _until(lambda: len(a) + len(b) == 40)
    assert a and b
    assert sorted(m.metadata.sequence.stream for m in a + b) == list(range(1, 41))
    info = await js.consumer_info("S", "workers")
    assert info.config.deliver_group == "workers"


async def test_push_waits_for_interest(js_env) -> None:
    nc, js = js_env
    await _stream(js)
    await js.publish("s.x", b"1")
    await js.add_consumer(
        "S", ConsumerConfig(durable_name="W", deliver_subject="late.inbox", ack_policy=AckPolicy.EXPLICIT)
    )
    await asyncio.sleep(0.1)
    info = await js.consumer_info("S", "W")
    assert info.delivered.consumer_seq == 0 and not info.push_bound
    inbox = await Inbox(nc, "late.inbox").start()
    await _until(lambda: len(inbox.msgs) == 1)
    assert inbox.msgs[0].subject == "s.x"
    assert (await js.consumer_info("S", "W")).push_bound is True


# ---------------------------------------------------------------------------------------------
# retention


async def test_interest_retention(js_env) -> None:
    nc, js = js_env
    await _stream(js, "I", ["i.>"], retention=RetentionPolicy.INTEREST)
    ack = await js.publish("i.x", b"nobody")
    assert ack.seq == 1
    assert (await js.stream_info("I")).state.messages == 0
    p1 = await js.pull_subscribe("i.>", durable="c1")
    p2 = await js.pull_subscribe("i.x", durable="c2")
    await js.publish("i.x", b"both")
    await js.publish("i.y", b"only c1")
    assert (await js.stream_info("I")).state.messages == 2
    m1 = await p1.fetch(2, timeout=1)
    for m in m1:
        await m.ack_sync()
    st = (await js.stream_info("I")).state
    assert st.messages == 1  # i.y gone (only c1 wanted it); i.x waits for c2
    m2 = await p2.fetch(1, timeout=1)
    await m2[0].ack_sync()
    st = (await js.stream_info("I")).state
    assert st.messages == 0 and st.last_seq == 3


async def test_workqueue_retention_and_overlap_error(js_env) -> None:
    nc, js = js_env
    await _stream(js, "WQ", ["wq.>"], retention=RetentionPolicy.WORK_QUEUE)
    p = await js.pull_subscribe("wq.a", durable="wa")
    with pytest.raises(BadRequestError) as ei:
        await js.add_consumer(
            "WQ", ConsumerConfig(durable_name="wb", filter_subject="wq.>", ack_policy=AckPolicy.EXPLICIT)
        )
    assert ei.value.err_code == 10100
    for i in range(3):
        await js.publish("wq.a", b"%d" % i)
    msgs = await p.fetch(3, timeout=1)
    await msgs[0].ack_sync()
    assert (await js.stream_info("WQ")).state.messages == 2
    for m in msgs[1:]:
        await m.ack_sync()
    assert (await js.stream_info("WQ")).state.messages == 0


async def test_limits_apply_on_top_of_interest(js_env) -> None:
    nc, js = js_env
    await _stream(js, "IL", ["il.>"], retention=RetentionPolicy.INTEREST, max_msgs=2)
    p = await js.pull_subscribe("il.>", durable="c")
    for i in range(4):
        await js.publish("il.x", b"%d" % i)
    st = (await js.stream_info("IL")).state
    assert st.messages == 2 and st.first_seq == 3
    msgs = await p.fetch(4, timeout=1)
    assert [m.metadata.sequence.stream for m in msgs] == [3, 4]


# ---------------------------------------------------------------------------------------------
# API basics through nats-py


async def test_consumer_api_through_nats_py(js_env) -> None:
    nc, js = js_env
    await _stream(js)
    with pytest.raises(NotFoundError):
        await js.consumer_info("S", "nope")
    await js.add_consumer("S", ConsumerConfig(durable_name="d1", ack_policy=AckPolicy.EXPLICIT))
    await js.add_consumer("S", ConsumerConfig(durable_name="d2", ack_policy=AckPolicy.EXPLICIT, deliver_subject="x.y"))
    infos = await js.consumers_info("S")
    assert sorted(i.name for i in infos) == ["d1", "d2"]
    p = await js.pause_consumer("S", "d1", "2100-01-01T00:00:00Z")
    assert p.paused is True
    info = await js.consumer_info("S", "d1")
    assert info.paused is True and info.pause_remaining > 0
    r = await js.resume_consumer("S", "d1")
    assert r.paused is False
    assert await js.delete_consumer("S", "d2") is True
    with pytest.raises(NotFoundError):
        await js.delete_consumer("S", "d2")


# ---------------------------------------------------------------------------------------------
# durability


async def test_durable_state_survives_restart() -> None:
    with tempfile.TemporaryDirectory(prefix="natsd-cons-") as d:
        async with running_server(jetstream=True, store_dir=d) as srv:
            nc = await nats.connect(srv.client_url, allow_reconnect=False)
            js = nc.jetstream()
            await js.add_stream(StreamConfig(name="D", subjects=["d.>"], storage="file"))
            for i in range(10):
                await js.publish("d.x", b"%d" % i)
            psub = await js.pull_subscribe("d.>", durable="dur", config=ConsumerConfig(max_deliver=5))
            msgs = await psub.fetch(6, timeout=1)
            for m in msgs[:4]:
                await m.ack_sync()
            await msgs[4].nak()
            await nc.flush()
            again = await psub.fetch(1, timeout=1)  # redelivery of seq 5
            assert again[0].metadata.sequence.stream == 5
            before = await js.consumer_info("D", "dur")
            await nc.close()
        async with running_server(jetstream=True, store_dir=d) as srv:
            nc = await nats.connect(srv.client_url, allow_reconnect=False)
            js = nc.jetstream()
            after = await js.consumer_info("D", "dur")
            assert (
                (after.delivered.consumer_seq, after.delivered.stream_seq)
                == (before.delivered.consumer_seq, before.delivered.stream_seq)
                == (7, 6)
            )
            assert (after.ack_floor.consumer_seq, after.ack_floor.stream_seq) == (4, 4)
            assert after.num_ack_pending == before.num_ack_pending == 2
            assert after.num_redelivered == 1 and after.num_pending == 4
            assert after.config.max_deliver == 5
            psub = await js.pull_subscribe_bind("dur", stream="D")
            rest = await psub.fetch(10, timeout=1)
            assert [m.metadata.sequence.stream for m in rest] == [7, 8, 9, 10]
            await nc.close()


async def test_damaged_state_of_a_deliver_new_durable_redelivers_since_its_creation(caplog) -> None:
    """Issue 14 item 3: a damaged o.dat keeps the consumer (its config is apart) with its state
    reset. For deliver_policy "new" the restart must not start after the stream's end (that
    would skip what it never acked): it starts at the first message stored since creation."""
    import glob
    import os

    with tempfile.TemporaryDirectory(prefix="natsd-cons-") as d:
        async with running_server(jetstream=True, store_dir=d) as srv:
            nc = await nats.connect(srv.client_url, allow_reconnect=False)
            js = nc.jetstream()
            await js.add_stream(StreamConfig(name="N", subjects=["n.>"], storage="file"))
            for i in range(3):
                await js.publish("n.old", b"old%d" % i)  # before the consumer: never delivered
            psub = await js.pull_subscribe("n.>", durable="dn", config=ConsumerConfig(deliver_policy=DeliverPolicy.NEW))
            for i in range(5):
                await js.publish("n.new", b"new%d" % i)
            msgs = await psub.fetch(5, timeout=1)
            for m in msgs[:2]:
                await m.ack_sync()
            await nc.close()
        (odat,) = glob.glob(os.path.join(d, "**", "obs", "dn", "o.dat"), recursive=True)
        with open(odat, "r+b") as f:
            data = bytearray(f.read())
            data[len(data) // 2] ^= 0xFF
            f.seek(0)
            f.write(data)
        async with running_server(jetstream=True, store_dir=d) as srv:
            nc = await nats.connect(srv.client_url, allow_reconnect=False)
            js = nc.jetstream()
            info = await js.consumer_info("N", "dn")
            assert info.config.deliver_policy == DeliverPolicy.NEW
            assert info.num_pending == 5 and info.delivered.stream_seq == 3
            psub = await js.pull_subscribe_bind("dn", stream="N")
            rest = await psub.fetch(10, timeout=1)
            assert [m.data for m in rest] == [b"new%d" % i for i in range(5)]
            await nc.close()
        assert os.path.exists(odat + ".damaged")
    assert any("o.dat" in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
