"""The snapshot chunk flow without sockets (natsd.jetstream.snapshot.transfer): chunks and their
ack replies, the window, the final status, the no-flow and no-interest ends on the ManualClock,
and the stream held still while a snapshot runs."""

from __future__ import annotations

import json
import random

import cramjam

import pytest

from natsd.jetstream.config.models import SECOND
from natsd.jetstream.snapshot import MAGIC, ArchiveReader
from tests.unit.jetstream.snapshot.flows import setup_orders, take_snapshot

pytestmark = pytest.mark.unit


def test_snapshot_reply_chunks_acks_and_final_204(env):
    setup_orders(env)
    reply, msgs, data = take_snapshot(env)
    assert reply["type"] == "io.nats.jetstream.api.v1.stream_snapshot_response"
    assert reply["config"]["name"] == "ORDERS"
    assert reply["state"]["messages"] == 48 and reply["state"]["last_seq"] == 50
    assert reply["state"]["consumer_count"] == 1
    # Snappy-framed as nats-server's archives are S2-framed; inside, the NATSARC1 archive
    assert data.startswith(b"\xff\x06\x00\x00sNaPpY")
    data = bytes(cramjam.snappy.decompress(data))
    assert data.startswith(MAGIC)
    chunks = [m for m in msgs if m.payload]
    full = chunks[:-1]
    assert all(len(m.payload) == 1024 for m in full)
    for i, m in enumerate(full, 1):
        parts = m.reply.split(".")
        assert parts[:4] == ["$JS", "SNAPSHOT", "ACK", "ORDERS"]
        assert parts[-2:] == ["1024", str(i)]
    assert chunks[-1].reply == ""  # the short last chunk is not acknowledged
    last = msgs[-1]
    assert last.hdr == b"NATS/1.0 204\r\n\r\n" and last.payload == b""
    entries = ArchiveReader().feed(data)
    assert entries[0].name == "state.json"
    assert entries[1].name == "consumers/C1"
    body = json.loads(entries[1].payload)
    assert body["config"]["durable_name"] == "C1" and "delivered" in body["state"]
    seqs = [e.seq for e in entries[2:-1]]
    assert seqs == [s for s in range(1, 51) if s not in (10, 11)]
    assert entries[-1].is_end


def test_snapshot_window_limits_chunks_in_flight_and_times_out_without_acks(env):
    setup_orders(env, n=200)
    # window of 2 chunks: without acks only 2 chunks go out, then 408 No Flow Response after 5s
    reply, msgs, _ = take_snapshot(env, chunk_size=1024, ack=False, window_size=2048)
    assert "error" not in reply
    assert len([m for m in msgs if m.payload]) == 2
    assert msgs[-1].status is None
    env.clock.advance(5 * SECOND + 1)
    inbox = [m for m in env.ports.published if m.subject == "backup.inbox"]
    assert inbox[-1].hdr == b"NATS/1.0 408 No Flow Response\r\n\r\n"


def test_snapshot_errors(env):
    setup_orders(env, n=1)
    assert env.api("$JS.API.STREAM.SNAPSHOT.ORDERS")["error"]["err_code"] == 10003
    assert env.api("$JS.API.STREAM.SNAPSHOT.NOPE", {"deliver_subject": "x"})["error"]["err_code"] == 10059
    out = env.api("$JS.API.STREAM.SNAPSHOT.ORDERS", {"deliver_subject": "bad.*"})
    assert out["error"] == {"code": 400, "err_code": 10015, "description": "deliver subject not valid"}


def test_config_frozen_and_no_expiry_during_snapshot(env):
    env.create("ORDERS", subjects=["orders.>"], storage="memory", max_age=2 * SECOND)
    noise = random.Random(1).randbytes  # incompressible: the archive spans several chunks
    for _ in range(100):
        env.pub("orders.x", noise(100))
    inbox = env.ports.client_subscribe("backup.inbox")
    env.api(
        "$JS.API.STREAM.SNAPSHOT.ORDERS", {"deliver_subject": "backup.inbox", "chunk_size": 1024, "window_size": 1024}
    )
    env.clock.run_soon()
    assert len(inbox.msgs) == 1  # one chunk in flight, waiting for its ack
    upd = env.api(
        "$JS.API.STREAM.UPDATE.ORDERS",
        {"name": "ORDERS", "subjects": ["orders.>"], "storage": "memory", "max_age": 20 * SECOND},
    )
    assert upd["error"] == {"code": 500, "err_code": 10069, "description": "stream snapshot in progress"}
    stream = env.account.streams["ORDERS"]
    env.clock.advance(3 * SECOND)  # past max_age: nothing expires while the snapshot runs
    env.clock.run_soon()
    assert stream.store.state().msgs == 100
    env.clock.advance(3 * SECOND)  # > 5 s without an ack: the snapshot ends (408) ...
    assert inbox.msgs[-1].hdr == b"NATS/1.0 408 No Flow Response\r\n\r\n"
    env.clock.advance(1)  # ... and expiry resumes
    env.clock.run_soon()
    assert stream.store.state().msgs == 0
    upd = env.api(
        "$JS.API.STREAM.UPDATE.ORDERS",
        {"name": "ORDERS", "subjects": ["orders.>"], "storage": "memory", "max_age": 20 * SECOND},
    )
    assert "error" not in upd


def test_snapshot_waits_for_interest_then_stops_when_receiver_leaves(env):
    setup_orders(env, n=200)
    noise = random.Random(2).randbytes  # incompressible: the framed archive is more than 4 chunks
    for _ in range(100):
        env.pub("orders.x", noise(100))
    env.api(
        "$JS.API.STREAM.SNAPSHOT.ORDERS", {"deliver_subject": "late.inbox", "chunk_size": 1024, "window_size": 4096}
    )
    env.clock.run_soon()
    assert env.ports.sent_to("late.inbox") == []  # nobody listens yet: wait (up to 2 s)
    inbox = env.ports.client_subscribe("late.inbox")
    env.clock.run_soon()
    assert len(inbox.msgs) == 4  # the window: 4 chunks of 1 KiB
    inbox.unsubscribe()
    sent = env.ports.sent_to("late.inbox")
    assert sent[-1].hdr == b"NATS/1.0 408 No Interest\r\n\r\n"
    # the stream is usable again (config updates allowed)
    upd = env.api("$JS.API.STREAM.UPDATE.ORDERS", {"name": "ORDERS", "subjects": ["orders.>"], "max_msgs": 1000})
    assert "error" not in upd, upd
