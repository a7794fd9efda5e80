"""Atomic batch publish without sockets: staging, commit, the reference's errors and limits,
the inactivity timeout on the ManualClock, and the repair of a batch torn by a crash."""

from __future__ import annotations

import pytest

from natsd.jetstream.stream import batch as batch_mod
from natsd.jetstream.stream.batch import BatchLimits, repair_torn_batch
from natsd.jetstream.config.models import SECOND
from natsd.protocol.headers import get_header
from tests.helpers.fakeports import JsEnv

pytestmark = pytest.mark.unit


@pytest.fixture
def env(tmp_path):
    e = JsEnv(str(tmp_path))
    yield e
    e.stop()
    assert batch_mod.inflight_total() == 0  # every open batch was forgotten with its stream


def hdr(bid: str, seq: int | str, commit: str | None = None, **extra: str) -> bytes:
    lines = [f"Nats-Batch-Id: {bid}", f"Nats-Batch-Sequence: {seq}"]
    if commit is not None:
        lines.append(f"Nats-Batch-Commit: {commit}")
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in extra.items()]
    return ("NATS/1.0\r\n" + "".join(x + "\r\n" for x in lines) + "\r\n").encode()


def err(code: int, err_code: int, desc: str, stream: str = "A") -> bytes:
    return b'{"error":{"code":%d,"err_code":%d,"description":"%s"},"stream":"%s","seq":0}' % (
        code,
        err_code,
        desc.encode(),
        stream.encode(),
    )


INCOMPLETE = err(400, 10176, "atomic publish batch is incomplete")


def mk(env: JsEnv, name: str = "A", **cfg) -> None:
    cfg.setdefault("storage", "memory")
    cfg.setdefault("allow_atomic", True)
    env.create(name, **cfg)


def msgs(env: JsEnv, name: str = "A") -> int:
    return env.account.streams[name].store.state().msgs


def test_staged_messages_are_stored_only_at_the_commit(env):
    mk(env)
    assert env.raw_pub_reply("a.1", b"one", hdr("b1", 1)) == b""
    assert env.raw_pub_reply("a.2", b"two", hdr("b1", 2)) == b""
    assert msgs(env) == 0  # nothing visible before the commit
    assert env.raw_pub_reply("a.3", b"three", hdr("b1", 3, "1")) == b'{"stream":"A","seq":3,"batch":"b1","count":3}'
    st = env.account.streams["A"].store
    assert [st.load_msg(s).msg for s in (1, 2, 3)] == [b"one", b"two", b"three"]
    # stored with their batch headers, the last one marked as the commit (as the reference)
    assert get_header(st.load_msg(2).hdr, "Nats-Batch-Sequence") == "2"
    assert get_header(st.load_msg(2).hdr, "Nats-Batch-Commit") is None
    assert get_header(st.load_msg(3).hdr, "Nats-Batch-Commit") == "1"


def test_commit_is_one_flush_and_acks_after_it(env):
    mk(env)
    stream = env.account.streams["A"]
    for i in range(1, 5):
        env.raw_pub_reply("a.x", b"m", hdr("b", i))
    flushes = []
    orig = stream.store.flush
    stream.store.flush = lambda: (flushes.append(stream.store.state().msgs), orig())[1]
    reply = env.ports.request("a.x", b"m", hdr("b", 5, "1"))
    assert not env.replies(reply)  # the PubAck waits for the turn's flush
    env.clock.run_soon()
    assert flushes == [5]  # all five reached the store before the single flush
    assert env.replies(reply)[0].json() == {"stream": "A", "seq": 5, "batch": "b", "count": 5}


def test_eob_commit_drops_the_marker_and_marks_the_last(env):
    mk(env)
    env.raw_pub_reply("a.1", b"x", hdr("b2", 1))
    assert env.raw_pub_reply("a.1", b"ignored", hdr("b2", 2, "eob")) == b'{"stream":"A","seq":1,"batch":"b2","count":1}'
    sm = env.account.streams["A"].store.load_msg(1)
    assert sm.msg == b"x" and get_header(sm.hdr, "Nats-Batch-Commit") == "1"
    # eob on the first message is incomplete
    assert env.raw_pub_reply("a.1", b"y", hdr("b3", 1, "eob")) == INCOMPLETE
    assert msgs(env) == 1


def test_bad_input_gets_the_reference_errors_and_stores_nothing(env):
    mk(env)
    mk(env, "N", allow_atomic=False)
    assert env.raw_pub_reply("a.1", b"y", hdr("b5", 2, "1")) == INCOMPLETE  # commit without a batch
    assert env.raw_pub_reply("a.1", b"y", b"NATS/1.0\r\nNats-Batch-Id: b7\r\n\r\n") == err(
        400, 10175, "atomic publish sequence is missing"
    )
    assert env.raw_pub_reply("a.1", b"y", hdr("b7", "x")) == err(400, 10175, "atomic publish sequence is missing")
    assert env.raw_pub_reply("a.1", b"y", hdr("b7", 0)) == INCOMPLETE
    assert env.raw_pub_reply("a.1", b"y", hdr("b8", 1, "yes")) == err(
        400, 10200, "atomic publish batch commit is invalid"
    )
    assert env.raw_pub_reply("a.1", b"y", hdr("x" * 65, 1)) == err(400, 10179, "atomic publish batch ID is invalid")
    assert env.raw_pub_reply("a.1", b"y", hdr("b9", 1001, "1")) == err(
        400, 10199, "atomic publish batch is too large: 1000"
    )
    assert env.raw_pub_reply("a.1", b"y", hdr("b9", 1001, "eob")) == INCOMPLETE
    assert env.raw_pub_reply("n.1", b"y", hdr("b9", 1)) == err(400, 10174, "atomic publish is disabled", "N")
    # a gap abandons the batch: the rest of it is refused too
    assert env.raw_pub_reply("a.1", b"y", hdr("g", 1)) == b""
    assert env.raw_pub_reply("a.1", b"y", hdr("g", 3)) == INCOMPLETE
    assert env.raw_pub_reply("a.1", b"y", hdr("g", 2, "1")) == INCOMPLETE
    assert msgs(env) == 0 and msgs(env, "N") == 0
    # a commit header alone is an ordinary publish (stored with it)
    assert env.raw_pub_reply("a.1", b"y", b"NATS/1.0\r\nNats-Batch-Commit: 1\r\n\r\n") == b'{"stream":"A","seq":1}'


def test_commit_checks_every_message_in_order(env):
    mk(env)
    env.pub("a.0")
    env.raw_pub_reply("a.1", b"y", hdr("c1", 1, Nats_Msg_Id="m1"))
    assert env.raw_pub_reply("a.1", b"y", hdr("c1", 2, "1", Nats_Msg_Id="m1")) == err(
        400, 10201, "atomic publish batch contains duplicate message id"
    )
    assert env.raw_pub_reply("a.1", b"y", hdr("c2", 1, "1", Nats_Expected_Last_Msg_Id="m1")) == err(
        400, 10177, "atomic publish unsupported header used: Nats-Expected-Last-Msg-Id"
    )
    assert env.raw_pub_reply("a.1", b"y", hdr("c3", 1, "1", Nats_Expected_Last_Sequence="5")) == err(
        400, 10071, "wrong last sequence: 1"
    )
    # the expectation counts the batch's own earlier messages, and only the first may carry one
    env.raw_pub_reply("a.1", b"y", hdr("c4", 1))
    assert env.raw_pub_reply("a.1", b"y", hdr("c4", 2, "1", Nats_Expected_Last_Sequence="2")) == err(
        400, 10164, "wrong last sequence"
    )
    env.raw_pub_reply("a.1", b"y", hdr("c5", 1))
    assert env.raw_pub_reply("a.1", b"y", hdr("c5", 2, "1", Nats_Expected_Last_Sequence="1")) == err(
        400, 10071, "wrong last sequence: 2"
    )
    # expected subject sequence on a subject the batch already wrote
    env.raw_pub_reply("a.s", b"y", hdr("c6", 1))
    assert env.raw_pub_reply("a.s", b"y", hdr("c6", 2, "1", Nats_Expected_Last_Subject_Sequence="0")) == err(
        400, 10164, "wrong last sequence"
    )
    assert msgs(env) == 1
    # a stored id is a duplicate too
    env.pub("a.0", b"z", {"Nats-Msg-Id": "stored"})
    assert env.raw_pub_reply("a.1", b"y", hdr("c7", 1, "1", Nats_Msg_Id="stored")) == err(
        400, 10201, "atomic publish batch contains duplicate message id"
    )
    assert (
        env.raw_pub_reply("a.1", b"y", hdr("c8", 1, "1", Nats_Expected_Last_Sequence="2"))
        == b'{"stream":"A","seq":3,"batch":"c8","count":1}'
    )


def test_rollups_inside_a_batch(env):
    mk(env, allow_rollup_hdrs=True)
    env.pub("a.x")
    env.raw_pub_reply("a.x", b"1", hdr("r", 1))
    assert env.raw_pub_reply("a.y", b"2", hdr("r", 2, "1", Nats_Rollup="all")) == err(
        500, 10111, "batch rollup all invalid"
    )
    env.raw_pub_reply("a.x", b"1", hdr("r2", 1))
    assert env.raw_pub_reply("a.x", b"2", hdr("r2", 2, "1", Nats_Rollup="sub")) == err(
        500, 10111, "batch rollup sub invalid"
    )
    assert env.raw_pub_reply("a.z", b"3", hdr("r3", 1, Nats_Rollup="all")) == b""
    assert env.raw_pub_reply("a.z", b"4", hdr("r3", 2, "1")) == b'{"stream":"A","seq":3,"batch":"r3","count":2}'
    assert msgs(env) == 2  # the rollup of message 1 removed what was there before


def test_discard_new_counts_the_staged_messages(env):
    mk(env, discard="new", max_msgs=3)
    env.pub("a.0")
    for i in (1, 2):
        env.raw_pub_reply("a.1", b"y", hdr("d", i))
    assert env.raw_pub_reply("a.1", b"y", hdr("d", 3, "1")) == err(503, 10077, "maximum messages exceeded")
    assert msgs(env) == 1
    env.raw_pub_reply("a.1", b"y", hdr("d2", 1))
    assert env.raw_pub_reply("a.1", b"y", hdr("d2", 2, "1")) == b'{"stream":"A","seq":3,"batch":"d2","count":2}'


def test_limits_inflight_size_and_timeout(env):
    mk(env)
    stream = env.account.streams["A"]
    env.pub("a.0")  # creates nothing: the batches object appears with the first batch message
    env.raw_pub_reply("a.1", b"y", hdr("b1", 1))
    stream.batches.limits = BatchLimits(max_msgs=3, max_inflight_per_stream=2, timeout_ns=1 * SECOND)
    assert env.raw_pub_reply("a.1", b"y", hdr("b2", 1)) == b""
    assert env.raw_pub_reply("a.1", b"y", hdr("b3", 1)) == err(429, 10210, "atomic publish too many inflight")
    env.raw_pub_reply("a.1", b"y", hdr("b1", 2))
    env.raw_pub_reply("a.1", b"y", hdr("b1", 3))
    assert env.raw_pub_reply("a.1", b"y", hdr("b1", 4, "1")) == err(400, 10199, "atomic publish batch is too large: 3")
    # b2 got no message for the timeout: abandoned, with an advisory
    adv = env.ports.client_subscribe("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.A")
    env.clock.advance(1 * SECOND)
    assert env.raw_pub_reply("a.1", b"y", hdr("b2", 2, "1")) == INCOMPLETE
    got = adv.last_json()
    assert got["type"] == "io.nats.jetstream.advisory.v1.stream_batch_abandoned"
    assert (got["stream"], got["batch"], got["reason"]) == ("A", "b2", "timeout")
    # a message moves the deadline on: one that keeps talking is not abandoned
    env.raw_pub_reply("a.1", b"y", hdr("b4", 1))
    env.clock.advance(SECOND * 3 // 4)
    env.raw_pub_reply("a.1", b"y", hdr("b4", 2))
    env.clock.advance(SECOND * 3 // 4)
    assert env.raw_pub_reply("a.1", b"y", hdr("b4", 3, "1")) == b'{"stream":"A","seq":4,"batch":"b4","count":3}'
    assert batch_mod.inflight_total() == 0


def test_no_reply_batch_and_no_ack_stream(env):
    mk(env)
    env.ports.publish("a.1", "", hdr("q", 1), b"one")
    assert env.raw_pub_reply("a.1", b"two", hdr("q", 2, "1")) == b'{"stream":"A","seq":2,"batch":"q","count":2}'
    mk(env, "Z", no_ack=True)
    assert env.raw_pub_reply("z.1", b"one", hdr("q", 1)) is None
    assert env.raw_pub_reply("z.1", b"two", hdr("q", 2, "1")) is None
    assert msgs(env, "Z") == 2


def test_disabling_atomic_drops_open_batches(env):
    mk(env)
    env.raw_pub_reply("a.1", b"y", hdr("b", 1))
    assert batch_mod.inflight_total() == 1
    assert "error" not in env.api("$JS.API.STREAM.UPDATE.A", {"name": "A", "subjects": ["a.>"], "storage": "memory"})
    assert batch_mod.inflight_total() == 0
    assert env.raw_pub_reply("a.1", b"y", hdr("b", 2, "1")) == err(400, 10174, "atomic publish is disabled")


def test_torn_batch_is_removed_at_start(tmp_path):
    env = JsEnv(str(tmp_path))
    try:
        env.create("A", storage="file", allow_atomic=True)
        env.pub("a.0")
        stream = env.account.streams["A"]
        # what a crash inside the commit's write leaves: the first messages of a batch, no commit
        for i in (1, 2):
            stream.store.store_msg("a.1", hdr("t", i), b"m")
        stream.store.flush()
        env.restart()
        stream = env.account.streams["A"]
        st = stream.store.state()
        assert (st.msgs, st.last_seq) == (1, 1)
        assert env.pub("a.2") == {"stream": "A", "seq": 2}
        # a committed batch at the end is kept
        env.raw_pub_reply("a.1", b"y", hdr("k", 1))
        env.raw_pub_reply("a.1", b"y", hdr("k", 2, "1"))
        env.restart()
        assert env.account.streams["A"].store.state().msgs == 4
        assert repair_torn_batch(env.account.streams["A"]) == 0
    finally:
        env.stop()


def test_batch_limits_from_config():
    from natsd.config.options import options_from_tree
    from natsd.jetstream.stream.batch import batch_limits_for

    o = options_from_tree(
        {
            "jetstream": {
                "limits": {
                    "batch": {"max_msgs": 3, "max_inflight_per_stream": 2, "max_inflight_total": 7, "timeout": "1500ms"}
                }
            }
        }
    )
    lim = batch_limits_for(o.jetstream)
    assert (lim.max_msgs, lim.max_inflight_per_stream, lim.max_inflight_total, lim.timeout_ns) == (
        3,
        2,
        7,
        1_500_000_000,
    )
    assert (lim.fast_max_inflight_per_stream, lim.fast_max_inflight_total) == (2, 7)
    default = batch_limits_for(options_from_tree({"jetstream": {"limits": {"max_ack_pending": 5}}}).jetstream)
    assert default == BatchLimits()
