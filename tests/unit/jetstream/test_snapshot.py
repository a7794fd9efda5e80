"""Snapshot/restore without sockets: the NATSARC1 archive codec, the chunked snapshot protocol
(acks, window, final status, no-flow timeout on the ManualClock) and restore into a second engine."""

from __future__ import annotations

import json

import pytest

from natsd.jetstream.snapshot import (
    END_ENTRY, MAGIC, ArchiveError, ArchiveReader, encode_entry, encode_uvarint, encode_varint,
)
from natsd.jetstream.models import SECOND
from tests.helpers.fakeports import JsEnv

pytestmark = pytest.mark.unit


# ---------------------------------------------------------------------------------------------
# codec


def test_varints_match_go_encoding():
    assert encode_uvarint(0) == b"\x00"
    assert encode_uvarint(127) == b"\x7f"
    assert encode_uvarint(128) == b"\x80\x01"
    assert encode_uvarint(300) == b"\xac\x02"
    # zig-zag: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3
    assert [encode_varint(v) for v in (0, -1, 1, -2)] == [b"\x00", b"\x01", b"\x02", b"\x03"]
    assert encode_varint(1_700_000_000_000_000_000) == encode_uvarint(3_400_000_000_000_000_000)


def test_entry_layout_is_the_reference_layout():
    e = encode_entry(b"orders.1", 5, 7, b"NATS/1.0\r\n\r\n", b"hello")
    # name_len, ts (zig-zag), seq, hdr_size, payload_size, name, hdr, payload
    assert e == b"\x08\x0a\x07\x0c\x05orders.1NATS/1.0\r\n\r\nhello"
    assert END_ENTRY == b"\x00" * 5


def _archive() -> bytes:
    return (MAGIC + encode_entry(b"state.json", 1, 0, b"", b'{"first_seq":1}')
            + encode_entry(b"a.b", -3, 1, b"HH", b"body") + END_ENTRY)


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
def test_reader_accepts_any_chunking(step):
    data = _archive()
    r = ArchiveReader()
    got = []
    for i in range(0, len(data), step):
        got.extend(r.feed(data[i:i + step]))
    assert [e.name for e in got] == ["state.json", "a.b", ""]
    assert got[1].ts == -3 and got[1].seq == 1 and got[1].hdr_size == 2 and got[1].payload == b"HHbody"
    assert got[2].is_end and r.ended


def test_reader_rejects_bad_magic_and_trailing_data():
    with pytest.raises(ArchiveError, match="unsupported snapshot format"):
        ArchiveReader().feed(b"NOTANARCHIVE")
    with pytest.raises(ArchiveError, match="after the end"):
        ArchiveReader().feed(_archive() + b"x")


def test_reader_bounds_entry_size():
    r = ArchiveReader(max_entry=10)
    with pytest.raises(ArchiveError, match="too large"):
        r.feed(MAGIC + encode_entry(b"x", 0, 1, b"", b"y" * 20))


# ---------------------------------------------------------------------------------------------
# protocol over FakePorts


@pytest.fixture
def env(tmp_path):
    e = JsEnv(str(tmp_path / "a"))
    yield e
    e.stop()


@pytest.fixture
def env2(tmp_path):
    e = JsEnv(str(tmp_path / "b"))
    yield e
    e.stop()


def _setup(env: JsEnv, n: int = 50, storage: str = "file") -> None:
    env.create("ORDERS", subjects=["orders.>"], storage=storage)
    for i in range(n):
        hdrs = {"X-I": str(i)} if i % 3 == 0 else None
        assert env.pub(f"orders.{i % 5}", f"m{i}".encode(), hdrs)["seq"] == i + 1
    env.api("$JS.API.STREAM.MSG.DELETE.ORDERS", {"seq": 10})
    env.api("$JS.API.STREAM.MSG.DELETE.ORDERS", {"seq": 11})
    out = env.api("$JS.API.CONSUMER.CREATE.ORDERS.C1",
                  {"stream_name": "ORDERS", "config": {"durable_name": "C1", "ack_policy": "explicit"}})
    assert "error" not in out, out


def _snapshot(env: JsEnv, chunk_size: int = 1024, ack: bool = True, **extra) -> tuple[dict, list, bytes]:
    inbox = env.ports.client_subscribe("backup.inbox")
    reply = env.api("$JS.API.STREAM.SNAPSHOT.ORDERS",
                    {"deliver_subject": "backup.inbox", "chunk_size": chunk_size, **extra})
    data = bytearray()
    seen = 0
    for _ in range(10_000):
        env.clock.run_soon()
        new = inbox.msgs[seen:]
        seen = len(inbox.msgs)
        for m in new:
            if m.payload:
                data += m.payload
                if m.reply and ack:
                    env.ports.publish(m.reply, "", None, b"")
        if inbox.msgs and inbox.msgs[-1].status is not None:
            break
        if not new and not ack:
            break
    return reply, inbox.msgs, bytes(data)


def test_snapshot_reply_chunks_acks_and_final_204(env):
    _setup(env)
    reply, msgs, data = _snapshot(env)
    assert reply["type"] == "io.nats.jetstream.api.v1.stream_snapshot_response"
    assert reply["config"]["name"] == "ORDERS"
    assert reply["state"]["messages"] == 48 and reply["state"]["last_seq"] == 50
    assert reply["state"]["consumer_count"] == 1
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
    _setup(env, n=200)
    # window of 2 chunks: without acks only 2 chunks go out, then 408 No Flow Response after 5s
    reply, msgs, _ = _snapshot(env, chunk_size=1024, ack=False, window_size=2048)
    assert "error" not in reply
    assert len([m for m in msgs if m.payload]) == 2
    assert msgs[-1].status is None
    env.clock.advance(5 * SECOND + 1)
    inbox = [m for m in env.ports.published if m.subject == "backup.inbox"]
    assert inbox[-1].hdr == b"NATS/1.0 408 No Flow Response\r\n\r\n"


def test_snapshot_errors(env):
    _setup(env, n=1)
    assert env.api("$JS.API.STREAM.SNAPSHOT.ORDERS")["error"]["err_code"] == 10003
    assert env.api("$JS.API.STREAM.SNAPSHOT.NOPE", {"deliver_subject": "x"})["error"]["err_code"] == 10059
    out = env.api("$JS.API.STREAM.SNAPSHOT.ORDERS", {"deliver_subject": "bad.*"})
    assert out["error"] == {"code": 400, "err_code": 10015, "description": "deliver subject not valid"}


def test_config_frozen_and_no_expiry_during_snapshot(env):
    env.create("ORDERS", subjects=["orders.>"], storage="memory", max_age=2 * SECOND)
    for _ in range(100):
        env.pub("orders.x", b"y" * 100)
    inbox = env.ports.client_subscribe("backup.inbox")
    env.api("$JS.API.STREAM.SNAPSHOT.ORDERS", {"deliver_subject": "backup.inbox", "chunk_size": 1024,
                                                "window_size": 1024})
    env.clock.run_soon()
    assert len(inbox.msgs) == 1  # one chunk in flight, waiting for its ack
    upd = env.api("$JS.API.STREAM.UPDATE.ORDERS", {"name": "ORDERS", "subjects": ["orders.>"],
                                                    "storage": "memory", "max_age": 20 * SECOND})
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
    upd = env.api("$JS.API.STREAM.UPDATE.ORDERS", {"name": "ORDERS", "subjects": ["orders.>"],
                                                    "storage": "memory", "max_age": 20 * SECOND})
    assert "error" not in upd


def _restore(env2: JsEnv, meta: dict, data: bytes, chunk: int = 700) -> dict:
    out = env2.api("$JS.API.STREAM.RESTORE.ORDERS", {"config": meta["config"], "state": meta["state"]})
    assert out["type"] == "io.nats.jetstream.api.v1.stream_restore_response", out
    deliver = out["deliver_subject"]
    assert deliver.startswith("$JS.SNAPSHOT.RESTORE.ORDERS.")
    for i in range(0, len(data), chunk):
        r = env2.ports.request(deliver, data[i:i + chunk])
        env2.clock.run_soon()
        acks = env2.replies(r)
        assert acks and acks[-1].payload == b"", acks
    r = env2.ports.request(deliver, b"")
    env2.clock.run_soon()
    return env2.replies(r)[-1].json()


@pytest.mark.parametrize("storage", ["file", "memory"])
def test_restore_into_second_engine_is_identical(env, env2, storage):
    _setup(env, storage=storage)
    # consumer state: deliver 5, ack 3 of them
    msgs = env.request_msgs("$JS.API.CONSUMER.MSG.NEXT.ORDERS.C1", {"batch": 5, "no_wait": True})
    for m in msgs[:3]:
        env.ports.publish(m.reply, "", None, b"+ACK")
    env.clock.run_soon()
    env.api("$JS.API.STREAM.MSG.DELETE.ORDERS", {"seq": 50})  # a trailing deleted sequence
    reply, _, data = _snapshot(env)
    final = _restore(env2, reply, data)
    assert final["type"] == "io.nats.jetstream.api.v1.stream_create_response", final
    a = env.api("$JS.API.STREAM.INFO.ORDERS", {"deleted_details": True})["state"]
    b = env2.api("$JS.API.STREAM.INFO.ORDERS", {"deleted_details": True})["state"]
    for k in ("messages", "bytes", "first_seq", "first_ts", "last_seq", "num_deleted", "deleted", "num_subjects",
              "consumer_count"):
        assert a.get(k) == b.get(k), k
    for seq in (1, 3, 12, 49):
        ma = env.api("$JS.API.STREAM.MSG.GET.ORDERS", {"seq": seq})["message"]
        mb = env2.api("$JS.API.STREAM.MSG.GET.ORDERS", {"seq": seq})["message"]
        assert ma == mb
    ca = env.api("$JS.API.CONSUMER.INFO.ORDERS.C1")
    cb = env2.api("$JS.API.CONSUMER.INFO.ORDERS.C1")
    for k in ("delivered", "ack_floor"):
        assert {x: y for x, y in ca[k].items() if x != "last_active"} == \
            {x: y for x, y in cb[k].items() if x != "last_active"}, k
    for k in ("num_ack_pending", "num_redelivered"):
        assert ca[k] == cb[k], (k, ca[k], cb[k])
    # 6..49 without the deleted 10 and 11 (the source's own num_pending may lag a deletion on a
    # limits stream: engine issue reported separately)
    assert cb["num_pending"] == 42
    # the restored stream takes new messages after the old last sequence
    assert env2.pub("orders.9", b"new")["seq"] == 51


def test_restore_errors(env, env2):
    _setup(env, n=5)
    reply, _, data = _snapshot(env)
    assert env2.api("$JS.API.STREAM.RESTORE.ORDERS")["error"]["err_code"] == 10003
    out = env2.api("$JS.API.STREAM.RESTORE.OTHER", {"config": reply["config"]})
    assert out["error"]["err_code"] == 10056
    # the name exists already
    assert env.api("$JS.API.STREAM.RESTORE.ORDERS", {"config": reply["config"]})["error"] == {
        "code": 400, "err_code": 10130, "description": "stream name already in use, cannot restore"}
    # a truncated upload fails and leaves nothing behind
    out = env2.api("$JS.API.STREAM.RESTORE.ORDERS", {"config": reply["config"], "state": reply["state"]})
    r = env2.ports.request(out["deliver_subject"], data[:-5])
    env2.clock.run_soon()
    assert env2.replies(r)[-1].payload == b""
    r = env2.ports.request(out["deliver_subject"], b"")
    env2.clock.run_soon()
    err = env2.replies(r)[-1].json()
    assert err["type"] == "io.nats.jetstream.api.v1.stream_create_response"
    assert err["error"] == {"code": 500, "err_code": 10062, "description": "restore failed: backup was truncated"}
    assert "ORDERS" not in env2.account.streams
    # garbage
    out = env2.api("$JS.API.STREAM.RESTORE.ORDERS", {"config": reply["config"], "state": reply["state"]})
    r = env2.ports.request(out["deliver_subject"], b"this is not an archive")
    env2.clock.run_soon()
    assert env2.replies(r)[-1].json()["error"]["description"] == "restore failed: unsupported snapshot format"


def test_restore_stalls_after_five_seconds(env2):
    out = env2.api("$JS.API.STREAM.RESTORE.ORDERS", {"config": {"name": "ORDERS", "subjects": ["orders.>"]}})
    deliver = out["deliver_subject"]
    assert env2.ports.has_interest(deliver)
    env2.clock.advance(5 * SECOND + 1)
    assert not env2.ports.has_interest(deliver)
    assert "ORDERS" not in env2.account.streams


# ---------------------------------------------------------------------------------------------
# S2 framing (nats-server 2.15 wraps its archives in it)


def _frame(typ: int, body: bytes) -> bytes:
    return bytes([typ]) + len(body).to_bytes(3, "little") + body


def test_s2_block_literals_copies_and_repeat_offsets():
    from natsd.jetstream.snapshot import s2_decode_block
    # "abcd" literal; copy2 offset 4 len 8; S2 repeat (copy1 with offset 0) len 4+1=5
    blk = (encode_uvarint(17) + bytes([3 << 2]) + b"abcd" + bytes([((8 - 1) << 2) | 2, 4, 0])
           + bytes([(1 << 2) | 1, 0]))
    assert s2_decode_block(blk) == b"abcd" * 4 + b"a"
    # long literal (tag 60: one length byte) and a copy1 with a real offset
    lit = bytes(range(100))
    blk = encode_uvarint(107) + bytes([60 << 2, 99]) + lit + bytes([((7 - 4) << 2) | 1, 100])
    assert s2_decode_block(blk) == lit + lit[:7]
    with pytest.raises(ArchiveError):
        s2_decode_block(encode_uvarint(10) + bytes([3 << 2]) + b"abcd")  # short


def test_s2_stream_decoder_frames_any_chunking():
    from natsd.jetstream.snapshot import S2StreamDecoder
    archive = _archive()
    block = encode_uvarint(len(archive)) + bytes([60 << 2, len(archive) - 1]) + archive
    stream = (_frame(0xFF, b"S2sTwO") + _frame(0x00, b"\0\0\0\0" + block) + _frame(0xFE, b"pad")
              + _frame(0x01, b"\0\0\0\0" + b"tail"))
    for step in (1, 5, len(stream)):
        d = S2StreamDecoder()
        out = b"".join(d.feed(stream[i:i + step]) for i in range(0, len(stream), step))
        assert out == archive + b"tail"
    with pytest.raises(ArchiveError):
        S2StreamDecoder().feed(_frame(0x00, b"\0\0\0\0" + block))  # no stream identifier


def test_restored_stream_and_consumer_state_survive_restart(env, env2):
    _setup(env)
    msgs = env.request_msgs("$JS.API.CONSUMER.MSG.NEXT.ORDERS.C1", {"batch": 4, "no_wait": True})
    for m in msgs[:2]:
        env.ports.publish(m.reply, "", None, b"+ACK")
    env.clock.run_soon()
    reply, _, data = _snapshot(env)
    assert "error" not in _restore(env2, reply, data)
    before = env2.api("$JS.API.CONSUMER.INFO.ORDERS.C1")
    env2.restart()
    after = env2.api("$JS.API.CONSUMER.INFO.ORDERS.C1")
    assert after["ack_floor"]["stream_seq"] == before["ack_floor"]["stream_seq"] == 2
    assert after["delivered"]["stream_seq"] == before["delivered"]["stream_seq"] == 4
    assert after["num_ack_pending"] == 2
    assert env2.api("$JS.API.STREAM.INFO.ORDERS")["state"]["messages"] == 48


def test_restore_larger_than_the_account_limit_is_refused(env, tmp_path):
    from natsd.config.options import AccountJetStreamLimits
    _setup(env, n=200)
    reply, _, data = _snapshot(env)
    small = JsEnv(str(tmp_path / "small"), account_limits=AccountJetStreamLimits(max_storage=2000))
    try:
        out = small.api("$JS.API.STREAM.RESTORE.ORDERS", {"config": reply["config"], "state": reply["state"]})
        r = small.ports.request(out["deliver_subject"], data)
        small.clock.run_soon()
        assert small.replies(r)[-1].json()["error"] == {
            "code": 500, "err_code": 10047, "description": "insufficient storage resources available"}
        assert "ORDERS" not in small.account.streams
    finally:
        small.stop()


def test_snapshot_waits_for_interest_then_stops_when_receiver_leaves(env):
    _setup(env, n=200)
    env.api("$JS.API.STREAM.SNAPSHOT.ORDERS", {"deliver_subject": "late.inbox", "chunk_size": 1024,
                                                "window_size": 4096})
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


def test_interrupted_restore_leaves_no_stream_behind(env, env2):
    import os
    _setup(env)
    reply, _, data = _snapshot(env)
    out = env2.api("$JS.API.STREAM.RESTORE.ORDERS", {"config": reply["config"], "state": reply["state"]})
    r = env2.ports.request(out["deliver_subject"], data[: len(data) // 2])
    env2.clock.run_soon()
    assert env2.replies(r)[-1].payload == b""
    streams_dir = env2.account.directory
    hidden = [n for n in os.listdir(streams_dir) if n.startswith(".restore.")]
    assert len(hidden) == 1 and not os.path.exists(os.path.join(streams_dir, "ORDERS"))
    # "crash": restart without finishing; the half upload is neither recovered nor kept
    env2.restart()
    assert "ORDERS" not in env2.account.streams
    assert [n for n in os.listdir(streams_dir) if n.startswith(".restore.")] == []
    # a complete restore ends up in the stream's own directory
    final = _restore(env2, reply, data)
    assert "error" not in final, final
    assert os.path.isdir(os.path.join(streams_dir, "ORDERS"))
    assert [n for n in os.listdir(streams_dir) if n.startswith(".")] == []


def test_restore_that_cannot_add_the_stream_fails_as_the_reference(env):
    _setup(env, n=3)
    reply, _, data = _snapshot(env)
    # another name, same subjects as the live ORDERS: the upload fails when the stream is added
    cfg = dict(reply["config"], name="ORDERS2")
    out = env.api("$JS.API.STREAM.RESTORE.ORDERS2", {"config": cfg, "state": reply["state"]})
    assert out["deliver_subject"].startswith("$JS.SNAPSHOT.RESTORE.ORDERS2.")
    r = env.ports.request(out["deliver_subject"], data)
    env.clock.run_soon()
    assert env.replies(r)[-1].json() == {
        "type": "io.nats.jetstream.api.v1.stream_create_response",
        "error": {"code": 500, "err_code": 10062,
                  "description": "restore failed: error adding stream: subjects overlap with an existing stream "
                                 "(10065)"}}
    assert "ORDERS2" not in env.account.streams
    # with its own subjects it restores fine next to the original
    cfg["subjects"] = ["orders2.>"]
    out = env.api("$JS.API.STREAM.RESTORE.ORDERS2", {"config": cfg, "state": reply["state"]})
    env.ports.request(out["deliver_subject"], data)
    r = env.ports.request(out["deliver_subject"], b"")
    env.clock.run_soon()
    final = env.replies(r)[-1].json()
    assert final["config"]["name"] == "ORDERS2" and final["state"]["messages"] == 3
