"""Fast batch publish without sockets: the ``.$FI`` reply grammar, flow-control acks sent only
after the turn's write, the idle timeout on the ManualClock, and the inflight limit."""

from __future__ import annotations

import pytest

from natsd.jetstream.stream import fastbatch
from natsd.jetstream.stream.fastbatch import parse_reply
from natsd.jetstream.config.models import SECOND
from tests.helpers.fakeports import JsEnv

pytestmark = pytest.mark.unit


@pytest.fixture
def env(tmp_path):
    e = JsEnv(str(tmp_path))
    e.create("F", storage="memory", allow_batched=True)
    yield e
    e.stop()
    assert fastbatch._inflight[0] == 0


def test_reply_grammar():
    fb = parse_reply("_INBOX.abc.b1.100.ok.1.0.$FI")
    assert (fb.id, fb.flow, fb.gap_ok, fb.seq, fb.op) == ("b1", 100, True, 1, 0)
    assert parse_reply("p.b.0.fail.2.1.$FI").flow == 10  # <= 0: the default
    assert parse_reply("p.b.x.fail.2.1.$FI").flow == 10
    assert parse_reply("p.b.99999.fail.2.1.$FI").flow == 65535
    for bad in (
        "b.10.fail.1.0.$FI",  # no prefix before the id
        "p.b.10.fail.2.0.$FI",  # start must be sequence 1
        "p.b.10.fail.1.1.$FI",  # append must be > 1
        "p.b.10.fail.1.3.$FI",  # end-of-batch commit on sequence 1
        "p.b.10.fail.1.5.$FI",
        "p.b.10.maybe.1.0.$FI",
        "p.b.10.fail.0.2.$FI",
        "p.b.10.fail.-1.2.$FI",
        "p.b.10.fail.%d.2.$FI" % (2**64 - 1),
    ):
        assert parse_reply(bad) is None, bad


def _send(env, seq: int, op: int, flow: int = 4, bid: str = "b") -> str:
    reply = f"_INBOX.x.{bid}.{flow}.fail.{seq}.{op}.$FI"
    env.ports.publish("f.1", reply, None, b"m%d" % seq)
    return reply


def test_acks_follow_the_write_and_the_pace_ramps(env):
    stream = env.account.streams["F"]
    flushed: list[int] = []
    orig = stream.store.flush
    stream.store.flush = lambda: (flushed.append(stream.store.state().msgs), orig())[1]
    r1 = _send(env, 1, 0)
    assert not env.replies(r1)  # nothing before the turn's flush
    env.clock.run_soon()
    assert flushed == [1]
    assert [m.json() for m in env.replies(r1)] == [{"type": "ack", "seq": 0, "msgs": 4}]
    replies = [_send(env, i, 1) for i in range(2, 9)]
    env.clock.run_soon()
    acks = [m.json() for r in replies for m in env.replies(r)]
    assert acks == [{"type": "ack", "seq": 4, "msgs": 4}, {"type": "ack", "seq": 8, "msgs": 4}]
    rc = _send(env, 9, 2)
    env.clock.run_soon()
    assert env.replies(rc)[0].json() == {"stream": "F", "seq": 9, "batch": "b", "count": 9}
    assert stream.store.state().msgs == 9


def test_idle_batch_is_forgotten(env):
    _send(env, 1, 0)
    env.clock.run_soon()
    assert fastbatch._inflight[0] == 1
    env.clock.advance(10 * SECOND)
    assert fastbatch._inflight[0] == 0
    r = _send(env, 2, 1)
    env.clock.run_soon()
    assert env.replies(r)[0].json()["error"]["err_code"] == 10208


def test_inflight_limit_per_stream(env):
    env.account.streams["F"].batches = None
    _send(env, 1, 0, bid="a")
    env.clock.run_soon()
    env.account.streams["F"].batches.fast.max_per_stream = 1
    r = _send(env, 1, 0, bid="b")
    env.clock.run_soon()
    assert env.replies(r)[0].json()["error"] == {
        "code": 429,
        "err_code": 10211,
        "description": "batch publish too many inflight",
    }


def test_streams_without_allow_batched_refuse(env):
    env.create("N", storage="memory")
    reply = "_INBOX.x.b.10.fail.1.0.$FI"
    env.ports.publish("n.1", reply, None, b"x")
    env.clock.run_soon()
    assert env.replies(reply)[0].json()["error"]["err_code"] == 10205
    assert env.account.streams["N"].store.state().msgs == 0
