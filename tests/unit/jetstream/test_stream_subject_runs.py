"""Stream.process_rrun(None, run): a run of header-less requests over many subjects
(natsd.jetstream.stream.subjectrun) answers and stores exactly what process_msg of each does:
one store_many on a stream with nothing to check first, message by message from the first
refusal (discard new, per subject), or for the whole run when it cannot be taken at once
(the server's storage limit within reach, a fast-batch reply, a stream with checks first)."""

from __future__ import annotations

import pytest

from natsd.protocol.events import OP_PUB, Run
from tests.helpers.fakeports import JsEnv

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]


def _twins(tmp_path, n: int, storage: str = "file", replies=None, tweak=None, **cfg):
    """(PubAcks, state, lseq, stored messages, store_many calls) of the run and of process_msg
    one by one, on two fresh engines."""
    names = ["orders.%d.%d" % (i % 5, i % 3) for i in range(n)]
    replies = replies or [b"_INBOX.t.%04d" % i for i in range(n)]
    payloads = [b"m%03d" % i for i in range(n)]
    out = []
    for mode in ("run", "one"):
        env = JsEnv(str(tmp_path / mode))
        try:
            cfg.setdefault("subjects", ["orders.>"])
            env.create("ORDERS", storage=storage, **cfg)
            stream = env.account.streams["ORDERS"]
            if tweak:
                tweak(stream)
            calls: list = []
            if mode == "run":
                real = stream.store.store_many

                def spy(subjects, msgs, real=real):
                    calls.append(len(msgs))
                    return real(subjects, msgs)

                stream.store.store_many = spy
                run = Run(OP_PUB, b"", [s.encode() for s in names], b"", 0, payloads, list(names), replies)
                stream.process_rrun(None, run)
            else:
                for s, r, p in zip(names, replies, payloads):
                    stream.process_msg(s, r.decode(), None, p)
            env.clock.run_soon()
            acks = [(m.subject, m.payload) for m in env.inbox.msgs if m.subject.startswith("_INBOX.t.")]
            st = stream.store.state()
            stored = [(m.subject, m.msg) for m in stream.store.iter_msgs(1, 10**6)]
            out.append((acks, (st.msgs, st.bytes, st.first_seq, st.last_seq, st.num_subjects), stream.lseq, stored))
            out.append(calls)
        finally:
            env.stop()
    return out[0], out[2], out[1]


@pytest.mark.parametrize("storage", ["file", "memory"])
def test_a_run_over_many_subjects_is_stored_at_once_and_acknowledged_as_one_by_one(tmp_path, storage):
    run, one, calls = _twins(tmp_path, 60, storage=storage)
    assert run == one and calls == [60]
    assert run[0][7] == ("_INBOX.t.0007", b'{"stream":"ORDERS","seq":8}') and run[2] == 60
    assert run[1][4] == 15


@pytest.mark.parametrize(
    "case", ["per_subject_new", "max_msgs_new", "server_full", "fast_batch_reply", "no_ack", "discard_old", "checks"]
)
def test_a_run_answers_each_message_as_alone(tmp_path, case):
    replies = None
    tweak = None
    cfg: dict = {}
    if case == "per_subject_new":
        cfg = {"max_msgs_per_subject": 2, "discard": "new", "discard_new_per_subject": True}
    elif case == "max_msgs_new":
        cfg = {"max_msgs": 7, "discard": "new"}
    elif case == "discard_old":
        cfg = {"max_msgs": 9, "max_msgs_per_subject": 1}
    elif case == "no_ack":
        cfg = {"no_ack": True}
    elif case == "checks":
        cfg = {"max_msg_size": 3}
    elif case == "fast_batch_reply":
        replies = [b"_INBOX.t.%04d" % i for i in range(40)]
        replies[5] = b"_INBOX.t.x.1.0.$FI"
    else:

        def tweak(stream):
            stream._max_used = stream._used[stream._ut] + 300  # room for a few messages only

    run, one, calls = _twins(tmp_path, 40, replies=replies, tweak=tweak, **cfg)
    assert run == one
    errors = [a for a in run[0] if b'"error"' in a[1]]
    assert bool(errors) == (case in ("per_subject_new", "max_msgs_new", "server_full", "fast_batch_reply", "checks"))
    assert bool(run[0]) == (case != "no_ack")
    # taken as a batch only where nothing needs looking at first
    assert bool(calls) == (case in ("per_subject_new", "max_msgs_new", "no_ack", "discard_old"))
