"""Random sequences of publish (with and without Nats-Msg-Id / Nats-Expected-Last-Sequence),
purge, message delete and clock advances, checked against a simple model of the stream."""

from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from natsd.jetstream.config.models import SECOND
from tests.helpers.fakeports import JsEnv

pytestmark = pytest.mark.unit

WINDOW = 2 * SECOND

ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("pub"), st.sampled_from(["m.a", "m.b", "m.c"]), st.none() | st.sampled_from(["i1", "i2", "i3"])
        ),
        st.tuples(st.just("expect"), st.sampled_from(["m.a", "m.b"]), st.booleans()),
        st.tuples(st.just("purge"), st.none() | st.sampled_from(["m.a", "m.b"]), st.none()),
        st.tuples(st.just("delete"), st.integers(min_value=1, max_value=30), st.none()),
        st.tuples(st.just("tick"), st.integers(min_value=0, max_value=3), st.none()),
    ),
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_stream_matches_model(seq_ops):
    tmp = tempfile.mkdtemp(prefix="natsd-model-")
    env = JsEnv(tmp)
    try:
        env.create("M", storage="memory", subjects=["m.>"], duplicate_window=WINDOW, max_msgs_per_subject=3)
        lseq = 0
        stored: dict[int, str] = {}  # seq -> subject
        ids: dict[str, tuple[int, int]] = {}  # msg id -> (seq, time stored)
        now = 0
        for op, a, b in seq_ops:
            if op == "pub":
                live = {k: v for k, v in ids.items() if v[1] > now - WINDOW}
                ack = env.pub(a, b"x", {"Nats-Msg-Id": b} if b else None)
                if b and b in live:
                    assert ack == {"stream": "M", "seq": live[b][0], "duplicate": True}
                    continue
                lseq += 1
                assert ack == {"stream": "M", "seq": lseq}
                stored[lseq] = a
                if b:
                    ids[b] = (lseq, now)
                same = sorted(s for s, subj in stored.items() if subj == a)
                for s in same[:-3]:  # max_msgs_per_subject 3, discard old
                    del stored[s]
            elif op == "expect":
                want = lseq if b else lseq + 7
                ack = env.pub(a, b"x", {"Nats-Expected-Last-Sequence": str(want)})
                if b:
                    lseq += 1
                    assert ack == {"stream": "M", "seq": lseq}
                    stored[lseq] = a
                    same = sorted(s for s, subj in stored.items() if subj == a)
                    for s in same[:-3]:
                        del stored[s]
                else:
                    assert ack["error"]["err_code"] == 10071
                    assert ack["error"]["description"] == f"wrong last sequence: {lseq}"
            elif op == "purge":
                out = env.api("$JS.API.STREAM.PURGE.M", {"filter": a} if a else b"")
                gone = [s for s, subj in stored.items() if a is None or subj == a]
                assert out["purged"] == len(gone)
                for s in gone:
                    del stored[s]
            elif op == "delete":
                out = env.api("$JS.API.STREAM.MSG.DELETE.M", {"seq": a, "no_erase": True})
                if a in stored:
                    assert out.get("success") is True
                    del stored[a]
                else:
                    assert out["error"]["err_code"] == 10043  # memory store: "sequence N not found"
            else:
                env.clock.advance(a * SECOND)
                now += a * SECOND
            state = env.api("$JS.API.STREAM.INFO.M")["state"]
            assert state["messages"] == len(stored)
            assert state["last_seq"] == lseq
    finally:
        env.stop()
        shutil.rmtree(tmp, ignore_errors=True)
