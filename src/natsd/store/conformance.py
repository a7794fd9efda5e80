"""The conformance suite every StreamStore/ConsumerStore implementation must pass.

Shipped with the package (like trio's ``check_*`` kits) so a new store is checked by the same
code as the existing ones. A store is described by a :class:`StoreFactory`; each ``check_*``
function takes one and raises ``AssertionError`` on the first deviation. ``STREAM_STORE_CHECKS``
lists them all, for parametrisation::

    @pytest.mark.parametrize("check", STREAM_STORE_CHECKS, ids=lambda c: c.__name__)
    def test_conformance(check, factory):
        check(factory)

:func:`run_model_ops` drives a store and a plain-Python model with the same random sequence of
publish / delete / purge / compact / truncate / skip / expiry / restart operations and compares them after
every step; :func:`check_random_ops` runs it from a seed and :func:`model_ops` is the hypothesis
strategy for it.

Time is a :class:`natsd.clock.ManualClock` throughout; nothing sleeps.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Callable

from natsd.clock import ManualClock
from natsd.subjects.tokens import subject_matches as _matches
from natsd.store.base import (
    ConsumerState,
    DiscardPolicy,
    MaxBytes,
    MaxMsgs,
    MaxMsgsPerSubject,
    MsgNotFound,
    Pending,
    SequencePair,
    StoreClosed,
    StoreConfig,
    StoreEOF,
    StreamStore,
)
from natsd.protocolbase import Protocol

__all__ = [
    "StoreFactory",
    "STREAM_STORE_CHECKS",
    "CONSUMER_STORE_CHECKS",
    "Model",
    "run_model_ops",
    "check_random_ops",
    "model_ops",
    "random_ops",
]

SEC = 10**9


def subject_matches(subject: str, filter: str) -> bool:
    """The store API's filter rule: ``""`` and ``">"`` match everything, else subscribe form."""
    return filter == "" or _matches(filter, subject)


class StoreFactory(Protocol):
    """How the suite makes stores. ``reopen`` stops a store and opens it again from what it
    persisted (file stores), or returns None when the store does not persist (memory)."""

    def make(self, config: StoreConfig, clock: ManualClock) -> StreamStore: ...

    def reopen(self, store: StreamStore, clock: ManualClock) -> StreamStore | None: ...


def _cfg(**kw) -> StoreConfig:
    kw.setdefault("name", "S")
    return StoreConfig(**kw)


def _msg_size_of(store: StreamStore) -> Callable[[str, bytes | None, bytes], int]:
    """The store's accounting of one message (``state().bytes``, ``max_bytes``): the stores of
    this package have it as the static ``msg_size`` (IndexedStreamStore); the protocol leaves it
    out because the engine never asks for it."""
    return type(store).msg_size  # type: ignore[attr-defined]


def _size(store, subject, hdr, msg) -> int:
    return _msg_size_of(store)(subject, hdr, msg)


def _raises(exc, fn, *args):
    try:
        fn(*args)
    except exc:
        return
    raise AssertionError(f"{fn.__name__}{args} did not raise {exc.__name__}")


def _restart(factory: StoreFactory, store, clock):
    """Reopen when the store persists; otherwise keep using it."""
    again = factory.reopen(store, clock)
    return store if again is None else again


# ---------------------------------------------------------------------------------------------
# Stream store checks.


def check_store_and_load(factory: StoreFactory) -> None:
    """Sequences start at 1, timestamps come from the clock, messages load back byte for byte."""
    clock = ManualClock()
    s = factory.make(_cfg(), clock)
    hdr = b"NATS/1.0\r\nA: b\r\n\r\n"
    assert s.store_msg("foo", None, b"hello") == (1, clock.time_ns())
    clock.advance(5)
    seq, ts = s.store_msg("bar.baz", hdr, b"")
    assert (seq, ts) == (2, clock.time_ns())
    s.flush()
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq, st.num_subjects) == (2, 1, 2, 2)
    assert st.bytes == _size(s, "foo", None, b"hello") + _size(s, "bar.baz", hdr, b"")
    assert st.first_ts == ts - 5 and st.last_ts == ts
    for restart in (False, True):
        if restart:
            s = _restart(factory, s, clock)
            assert s.state() == st
        m = s.load_msg(1)
        assert (m.subject, m.hdr, m.msg, m.seq, m.ts) == ("foo", None, b"hello", 1, ts - 5)
        m = s.load_msg(2)
        assert (m.subject, m.hdr, m.msg, m.seq) == ("bar.baz", hdr, b"", 2)
        _raises(StoreEOF, s.load_msg, 3)
        _raises(MsgNotFound, s.load_msg, 0)
    s.stop()
    _raises(StoreClosed, s.store_msg, "foo", None, b"x")
    _raises(StoreClosed, s.load_msg, 1)


def check_first_seq(factory: StoreFactory) -> None:
    """config.first_seq sets the first sequence of an empty stream."""
    clock = ManualClock()
    s = factory.make(_cfg(first_seq=100), clock)
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 100, 99)
    assert s.store_msg("a", None, b"1")[0] == 100
    s = _restart(factory, s, clock)
    assert s.store_msg("a", None, b"2")[0] == 101
    assert s.state().first_seq == 100
    s.stop()


def check_max_msgs(factory: StoreFactory) -> None:
    """max_msgs: discard old drops the oldest, discard new raises MaxMsgs."""
    clock = ManualClock()
    removed = []
    s = factory.make(_cfg(max_msgs=3), clock)
    s.register_storage_updates(lambda m, b, seq, subj: removed.append((m, b, seq, subj)))
    for i in range(5):
        s.store_msg(f"s.{i}", None, b"x")
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (3, 3, 5)
    assert removed == [(-1, -_size(s, "s.0", None, b"x"), 1, "s.0"), (-1, -_size(s, "s.1", None, b"x"), 2, "s.1")]
    s.stop()
    s = factory.make(_cfg(max_msgs=2, discard=DiscardPolicy.NEW), clock)
    s.store_msg("a", None, b"1")
    s.store_msg("a", None, b"2")
    _raises(MaxMsgs, s.store_msg, "a", None, b"3")
    st = s.state()
    assert (st.msgs, st.last_seq) == (2, 2)
    s.stop()


def check_store_run(factory: StoreFactory) -> None:
    """store_run: consecutive sequences, one timestamp, the same state and loads as store_msg
    of each; discard-old limits once after the run; discard new stops at the first refusal and
    reports it; a closed store raises."""
    clock = ManualClock(start_time_ns=7 * SEC)
    s = factory.make(_cfg(), clock)
    s.store_msg("a", None, b"0")
    bodies = [b"%03d" % i for i in range(300)] + [b"", b"longer one"]
    first, ts, stored, err = s.store_run("s.x", bodies)
    assert (first, ts, stored, err) == (2, 7 * SEC, len(bodies), None)
    st = s.state()
    want_bytes = _size(s, "a", None, b"0") + sum(_size(s, "s.x", None, b) for b in bodies)
    assert (st.msgs, st.bytes, st.first_seq, st.last_seq, st.num_subjects) == (303, want_bytes, 1, 303, 2)
    assert s.subjects_totals(">") == {"a": 1, "s.x": 302}
    for i in (0, 1, 150, 299, 300, 301):
        m = s.load_msg(first + i)
        assert (m.subject, m.hdr, m.msg, m.seq, m.ts) == ("s.x", None, bodies[i], first + i, ts)
    assert s.load_last_msg("s.x").seq == 303 and s.load_next_msg("s.x", 1).seq == 2
    assert s.filtered_state(0, "s.x").msgs == 302
    seq, _ = s.store_msg("s.x", None, b"after")
    assert seq == 304 and s.load_last_msg("s.x").seq == 304
    s.flush()
    s = _restart(factory, s, clock)
    assert s.state().msgs == 304 and s.load_msg(first + 150).msg == bodies[150]
    s.stop()

    removed = []
    s = factory.make(_cfg(max_msgs=4), clock)
    s.register_storage_updates(lambda m, b, seq, subj: removed.append(seq))
    s.store_msg("a", None, b"x")
    assert s.store_run("b", [b"1", b"2", b"3", b"4", b"5"])[1:] == (7 * SEC, 5, None)
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (4, 3, 6) and removed == [1, 2]
    s.stop()

    # a KV bucket: discard new with a per-subject limit alone refuses nothing, the old goes
    s = factory.make(_cfg(max_msgs_per_subject=1, discard=DiscardPolicy.NEW), clock)
    assert s.store_run("k", [b"1", b"2", b"3"])[2:] == (3, None)
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (1, 3, 3) and s.load_last_msg("k").msg == b"3"
    s.stop()

    s = factory.make(_cfg(max_msgs=3, discard=DiscardPolicy.NEW), clock)
    first, _, stored, err = s.store_run("b", [b"1", b"2", b"3", b"4", b"5"])
    assert (first, stored) == (1, 3) and isinstance(err, MaxMsgs)
    assert s.state().last_seq == 3
    s.stop()
    _raises(StoreClosed, s.store_run, "b", [b"1", b"2"])

    # hdr_len: each item is a header block of that length and the payload (an HPUB burst):
    # stored as store_msg(subject, item[:hdr_len], item[hdr_len:]) of each
    hdrs = [b"NATS/1.0\r\nNats-Msg-Id: %04d\r\n\r\n" % i for i in range(200)]
    hl = len(hdrs[0])
    bodies = [b"%05d" % i for i in range(199)] + [b"a different length"]
    s = factory.make(_cfg(), clock)
    s.store_msg("a", None, b"0")
    first, ts, stored, err = s.store_run("h.x", [h + b for h, b in zip(hdrs, bodies)], hl)
    assert (first, stored, err) == (2, 200, None)
    want_bytes = _size(s, "a", None, b"0") + sum(_size(s, "h.x", h, b) for h, b in zip(hdrs, bodies))
    assert (s.state().msgs, s.state().bytes) == (201, want_bytes)
    for i in (0, 1, 100, 198, 199):
        m = s.load_msg(first + i)
        assert (m.subject, m.hdr, m.msg, m.seq, m.ts) == ("h.x", hdrs[i], bodies[i], first + i, ts)
    s.flush()
    s = _restart(factory, s, clock)
    assert (s.state().msgs, s.state().bytes) == (201, want_bytes)
    assert (s.load_msg(first + 150).hdr, s.load_msg(first + 150).msg) == (hdrs[150], bodies[150])
    s.stop()
    # ... and one at a time under discard new with a limit that can refuse
    s = factory.make(_cfg(max_msgs=2, discard=DiscardPolicy.NEW), clock)
    first, _, stored, err = s.store_run("h.x", [h + b for h, b in zip(hdrs[:4], bodies)], hl)
    assert (first, stored) == (1, 2) and isinstance(err, MaxMsgs)
    assert (s.load_msg(2).hdr, s.load_msg(2).msg) == (hdrs[1], bodies[1])
    s.stop()


def check_max_bytes(factory: StoreFactory) -> None:
    """max_bytes counts the store's accounted size; discard new raises MaxBytes."""
    clock = ManualClock()
    one = None
    s = factory.make(_cfg(), clock)
    one = _size(s, "b", None, b"0123456789")
    s.stop()
    s = factory.make(_cfg(max_bytes=one * 3), clock)
    for _ in range(5):
        s.store_msg("b", None, b"0123456789")
    st = s.state()
    assert (st.msgs, st.bytes, st.first_seq) == (3, one * 3, 3)
    assert s.bytes_used == st.bytes  # what the server-wide limits count
    assert s.take_rollback() is None  # no write failed
    s.stop()
    s = factory.make(_cfg(max_bytes=one * 2, discard=DiscardPolicy.NEW), clock)
    s.store_msg("b", None, b"0123456789")
    s.store_msg("b", None, b"0123456789")
    _raises(MaxBytes, s.store_msg, "b", None, b"0123456789")
    assert s.state().msgs == 2
    s.stop()


def check_max_msgs_per_subject(factory: StoreFactory) -> None:
    """Per-subject limit: the subject's oldest goes (even with discard new, unless
    discard_new_per_subject, which raises MaxMsgsPerSubject but lets Nats-Rollup through)."""
    clock = ManualClock()
    s = factory.make(_cfg(max_msgs_per_subject=2), clock)
    for i in range(6):
        s.store_msg(f"k.{i % 2}", None, str(i).encode())
    assert s.subjects_totals(">") == {"k.0": 2, "k.1": 2}
    assert [m.msg for m in s.iter_msgs(1, 10)] == [b"2", b"3", b"4", b"5"]
    assert s.load_last_msg("k.0").msg == b"4"
    s.stop()
    # discard new at max_msgs, but the subject is at its limit: replacing counts as room.
    s = factory.make(_cfg(max_msgs=2, max_msgs_per_subject=1, discard=DiscardPolicy.NEW), clock)
    s.store_msg("k.a", None, b"1")
    s.store_msg("k.b", None, b"1")
    s.store_msg("k.a", None, b"2")
    _raises(MaxMsgs, s.store_msg, "k.c", None, b"1")
    assert s.subjects_totals(">") == {"k.a": 1, "k.b": 1}
    s.stop()
    s = factory.make(_cfg(max_msgs_per_subject=1, discard=DiscardPolicy.NEW, discard_new_per_subject=True), clock)
    s.store_msg("k.a", None, b"1")
    _raises(MaxMsgsPerSubject, s.store_msg, "k.a", None, b"2")
    rollup = b"NATS/1.0\r\nNats-Rollup: sub\r\n\r\n"
    seq, _ = s.store_msg("k.a", rollup, b"3")
    assert seq == 2 and s.state().msgs == 1 and s.load_last_msg("k.a").msg == b"3"
    s.stop()


def check_max_age(factory: StoreFactory) -> None:
    """max_age: expire() removes what is due at the given time; next_expiry() says when."""
    clock = ManualClock()
    s = factory.make(_cfg(max_age_ns=10 * SEC), clock)
    assert s.next_expiry() == 0
    t0 = clock.time_ns()
    s.store_msg("a", None, b"1")
    clock.advance(4 * SEC)
    s.store_msg("a", None, b"2")
    assert s.next_expiry() == t0 + 10 * SEC
    assert s.expire(clock.time_ns()) == 0
    clock.advance(6 * SEC)
    assert s.expire(clock.time_ns()) == 1
    st = s.state()
    assert (st.msgs, st.first_seq) == (1, 2)
    assert s.next_expiry() == t0 + 14 * SEC
    s = _restart(factory, s, clock)
    assert s.next_expiry() == t0 + 14 * SEC
    clock.advance(4 * SEC)
    assert s.expire(clock.time_ns()) == 1
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 3, 2)
    assert s.next_expiry() == 0
    s.stop()


def check_max_age_keep_last(factory: StoreFactory) -> None:
    """keep_last_under_max_age: age expiry never removes a subject's last message (nor counts
    it in next_expiry); a newer message on the subject makes the old one due again; per-subject
    limits, removes and purges still remove last messages; it holds across a restart."""
    clock = ManualClock()
    s = factory.make(_cfg(max_age_ns=10 * SEC, keep_last_under_max_age=True, max_msgs_per_subject=5), clock)
    t0 = clock.time_ns()
    s.store_msg("k.a", None, b"a1")
    s.store_msg("k.b", None, b"b1")
    s.store_msg("k.a", None, b"a2")
    clock.advance(11 * SEC)
    assert s.next_expiry() == t0 + 10 * SEC  # a1 is due (not its subject's last)
    assert s.expire(clock.time_ns()) == 1
    assert (s.state().msgs, s.state().first_seq) == (2, 2)
    assert s.next_expiry() == 0  # b1 and a2 are their subjects' last messages
    clock.advance(100 * SEC)
    assert s.expire(clock.time_ns()) == 0
    assert s.load_last_msg("k.a").msg == b"a2" and s.load_last_msg("k.b").msg == b"b1"
    s = _restart(factory, s, clock)
    assert s.expire(clock.time_ns()) == 0 and s.state().msgs == 2
    t1 = clock.time_ns()
    s.store_msg("k.b", None, b"b2")  # b1 is no longer the last of k.b: due at once
    assert s.next_expiry() <= t1
    assert s.expire(clock.time_ns()) == 1
    assert [m.msg for m in s.iter_msgs(1, 10)] == [b"a2", b"b2"]
    assert s.next_expiry() == 0
    assert s.remove_msg(3)  # a delete still removes a subject's last message
    assert s.purge() == 1  # and so does a purge
    assert s.state().msgs == 0
    s.stop()


def check_msg_ttl(factory: StoreFactory) -> None:
    """Per-message TTL expires that message only; ttl < 0 never expires, even past max_age."""
    clock = ManualClock()
    s = factory.make(_cfg(allow_msg_ttl=True, max_age_ns=100 * SEC), clock)
    t0 = clock.time_ns()
    s.store_msg("a", None, b"keep")
    s.store_msg("b", None, b"short", ttl_ns=5 * SEC)
    s.store_msg("c", None, b"never", ttl_ns=-1)
    assert s.next_expiry() == t0 + 5 * SEC
    s = _restart(factory, s, clock)
    assert s.next_expiry() == t0 + 5 * SEC
    clock.advance(5 * SEC)
    assert s.expire(clock.time_ns()) == 1
    _raises(MsgNotFound, s.load_msg, 2)
    assert s.state().msgs == 2
    clock.advance(200 * SEC)
    assert s.expire(clock.time_ns()) == 1
    assert [m.msg for m in s.iter_msgs(0, 10)] == [b"never"]
    assert s.next_expiry() == 0
    s.stop()


def check_remove_and_deleted(factory: StoreFactory) -> None:
    """Interior deletes are tracked (num_deleted, deleted) and survive a restart; removing the
    first message moves first_seq to the next live one."""
    clock = ManualClock()
    s = factory.make(_cfg(), clock)
    for i in range(1, 11):
        s.store_msg(f"d.{i % 3}", None, b"%d" % i)
    assert s.remove_msg(4) and s.remove_msg(5) and s.erase_msg(8)
    assert not s.remove_msg(4)
    assert not s.remove_msg(11)
    st = s.state(deleted_details=True)
    assert (st.msgs, st.first_seq, st.last_seq, st.num_deleted, st.deleted) == (7, 1, 10, 3, [4, 5, 8])
    _raises(MsgNotFound, s.load_msg, 5)
    s = _restart(factory, s, clock)
    st = s.state(deleted_details=True)
    assert (st.msgs, st.num_deleted, st.deleted) == (7, 3, [4, 5, 8])
    _raises(MsgNotFound, s.load_msg, 8)
    assert s.remove_msg(1) and s.remove_msg(2) and s.remove_msg(3)
    st = s.state(deleted_details=True)
    assert (st.first_seq, st.num_deleted, st.deleted) == (6, 1, [8])
    assert s.load_next_msg(">", 0).seq == 6
    assert s.state().first_ts == s.load_msg(6).ts
    s.stop()


def check_never_written(factory: StoreFactory) -> None:
    """A stream that never stored anything (a file store has no block yet: its first write makes
    it) answers every read as empty, across restarts (of every kind the factory makes), and its
    first message, purge, compact, skip or config change works as on any stream."""
    clock = ManualClock()
    s = factory.make(_cfg(first_seq=50), clock)
    for _ in range(2):
        s = _restart(factory, s, clock)
        st = s.state()
        assert (st.msgs, st.bytes, st.first_seq, st.last_seq, st.num_subjects) == (0, 0, 50, 49, 0)
        _raises(StoreEOF, s.load_msg, 50)
        assert list(s.iter_msgs(0, 100)) == []
        assert s.load_run(1, 10).seqs == []
        assert s.subjects_totals(">") == {}
        assert s.purge() == 0 and s.purge_ex("a", 0, 0) == 0
        assert s.bytes_used == 0
    s.update_config(_cfg(first_seq=50, max_msgs=5))
    s = _restart(factory, s, clock)
    assert s.store_msg("a", None, b"first")[0] == 50
    s = _restart(factory, s, clock)
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (1, 50, 50)
    assert s.load_msg(50).msg == b"first"
    s.stop()
    for op in ("compact", "skip", "purge"):
        s = factory.make(_cfg(), clock)
        if op == "compact":
            assert s.compact(7) == 0
            want = (0, 7, 6)
        elif op == "skip":
            s.skip_msgs(1, 3)
            want = (0, 4, 3)
        else:
            assert s.purge() == 0
            want = (0, 1, 0)
        s.flush()
        s = _restart(factory, s, clock)
        st = s.state()
        assert (st.msgs, st.first_seq, st.last_seq) == want, op
        assert s.store_msg("a", None, b"x")[0] == want[2] + 1, op
        s.stop()


def check_purge(factory: StoreFactory) -> None:
    """purge() empties, sequences continue; purge_ex with subject / seq / keep."""
    clock = ManualClock()
    updates = []
    s = factory.make(_cfg(), clock)
    s.register_storage_updates(lambda *a: updates.append(a))
    for i in range(1, 11):
        s.store_msg("p.a" if i % 2 else "p.b", None, b"x")
    total = s.state().bytes
    assert s.purge() == 10
    assert updates[-1] == (-10, -total, 0, "")
    st = s.state()
    assert (st.msgs, st.bytes, st.first_seq, st.last_seq, st.first_ts) == (0, 0, 11, 10, 0)
    assert s.bytes_used == 0
    s = _restart(factory, s, clock)
    assert s.store_msg("p.a", None, b"y")[0] == 11
    for i in range(12, 21):
        s.store_msg("p.a" if i % 2 else "p.b", None, b"x")
    # keep the newest 2 of p.a (odd: 11..19 -> keep 17, 19)
    assert s.purge_ex("p.a", 0, 2) == 3
    assert s.subjects_state("p.a")["p.a"].first == 17
    # below seq 16 on p.b (12, 14) removed
    assert s.purge_ex("p.b", 16, 0) == 2
    assert s.subjects_totals(">") == {"p.a": 2, "p.b": 3}
    # whole-stream keep
    assert s.purge_ex("", 0, 2) == 3
    assert [m.seq for m in s.iter_msgs(0, 100)] == [19, 20]
    # whole stream below seq
    s.store_msg("p.c", None, b"z")
    assert s.purge_ex(">", 20, 0) == 1
    assert s.state().first_seq == 20
    s = _restart(factory, s, clock)
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (2, 20, 21)
    s.stop()


def check_purge_keep_counts_messages(factory: StoreFactory) -> None:
    """purge_ex("", 0, keep) keeps the newest ``keep`` messages that exist, not the newest
    ``keep`` sequences: after a filtered purge (or deletes) the tail has holes."""
    clock = ManualClock()
    s = factory.make(_cfg(), clock)
    for i in range(1, 11):
        s.store_msg("k.a" if i % 2 else "k.b", None, b"x")
    # Remove every k.b (the even sequences, including the last one, 10).
    assert s.purge_ex("k.b", 0, 0) == 5
    assert s.purge_ex("", 0, 1) == 4
    assert [m.seq for m in s.iter_msgs(0, 100)] == [9]
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (1, 9, 10)
    for _ in range(6):
        s.store_msg("k.c", None, b"y")  # 11..16
    assert s.remove_msg(15) and s.remove_msg(14) and s.remove_msg(12)
    # Live: 9, 11, 13, 16; the newest 3 are 11, 13, 16.
    assert s.purge_ex(">", 0, 3) == 1
    assert [m.seq for m in s.iter_msgs(0, 100)] == [11, 13, 16]
    assert s.purge_ex("", 0, 3) == 0
    s = _restart(factory, s, clock)
    assert [m.seq for m in s.iter_msgs(0, 100)] == [11, 13, 16]
    assert s.state().first_seq == 11
    s.stop()


def check_compact_truncate(factory: StoreFactory) -> None:
    """compact(seq) removes below seq; truncate(seq) removes above it; both persist."""
    clock = ManualClock()
    s = factory.make(_cfg(), clock)
    for i in range(1, 21):
        s.store_msg(f"c.{i % 4}", None, b"%d" % i)
    s.remove_msg(8)
    assert s.compact(6) == 5
    st = s.state()
    assert (st.msgs, st.first_seq) == (14, 6)
    s.truncate(15)
    st = s.state(deleted_details=True)
    assert (st.msgs, st.first_seq, st.last_seq, st.deleted) == (9, 6, 15, [8])
    assert st.last_ts == s.load_msg(15).ts
    assert s.load_last_msg("c.0").seq == 12
    assert s.subjects_totals(">") == {"c.0": 1, "c.1": 2, "c.2": 3, "c.3": 3}
    s = _restart(factory, s, clock)
    st = s.state(deleted_details=True)
    assert (st.msgs, st.first_seq, st.last_seq, st.deleted) == (9, 6, 15, [8])
    assert s.store_msg("c.9", None, b"new")[0] == 16
    assert s.compact(100) == 10
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 100, 99)
    assert s.store_msg("c.9", None, b"x")[0] == 100
    s.stop()


def check_skip(factory: StoreFactory) -> None:
    """skip_msg/skip_msgs consume sequences; on an empty stream first_seq moves past them."""
    clock = ManualClock()
    s = factory.make(_cfg(), clock)
    assert s.skip_msg() == 1
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 2, 1)
    s.store_msg("a", None, b"1")
    s.skip_msgs(3, 3)
    s.store_msg("a", None, b"2")
    st = s.state(deleted_details=True)
    assert (st.msgs, st.first_seq, st.last_seq, st.deleted) == (2, 2, 6, [3, 4, 5])
    s = _restart(factory, s, clock)
    st = s.state(deleted_details=True)
    assert (st.msgs, st.first_seq, st.last_seq, st.deleted) == (2, 2, 6, [3, 4, 5])
    assert s.store_msg("a", None, b"3")[0] == 7
    s.store_raw_msg("r", None, b"raw", 10, 123)
    m = s.load_msg(10)
    assert (m.subject, m.ts) == ("r", 123)
    assert s.state(deleted_details=True).deleted == [3, 4, 5, 8, 9]
    s.stop()


def check_reads(factory: StoreFactory) -> None:
    """load_next_msg (literal, wildcard, all), load_last_msg, load_prev_msg, iter_msgs."""
    clock = ManualClock()
    s = factory.make(_cfg(), clock)
    subs = ["a.b", "a.c", "x.y", "a.b.c", "a.b"]
    for i, subj in enumerate(subs * 4, 1):
        s.store_msg(subj, None, b"%d" % i)
    s.remove_msg(6)
    assert s.load_next_msg("a.b", 2).seq == 5
    assert s.load_next_msg("a.b", 5).seq == 5
    assert s.load_next_msg("a.b", 6).seq == 10
    assert s.load_next_msg("a.*", 3).seq == 5
    assert s.load_next_msg("a.>", 3).seq == 4
    assert s.load_next_msg(">", 6).seq == 7
    assert s.load_next_msg("", 0).seq == 1
    _raises(StoreEOF, s.load_next_msg, "nope", 1)
    _raises(StoreEOF, s.load_next_msg, "x.y", 19)
    _raises(StoreEOF, s.load_next_msg, ">", 21)
    assert s.load_last_msg("a.b").seq == 20
    assert s.load_last_msg("x.*").seq == 18
    assert s.load_last_msg(">").seq == 20
    _raises(MsgNotFound, s.load_last_msg, "zz")
    assert s.load_prev_msg(6).seq == 5
    assert s.load_prev_msg(100).seq == 20
    assert [m.seq for m in s.iter_msgs(4, 8)] == [4, 5, 7, 8]
    s.remove_msg(20)
    assert s.load_last_msg("a.b").seq == 16
    s.stop()


def _run_rows(run) -> list[tuple]:
    """A MsgRun as rows ``(seq, ts, subject, hdr, msg)`` (subject as str)."""
    assert len(run.seqs) == len(run.tss) == len(run.subjects) == len(run.msgs) == len(run)
    hdrs = run.hdrs if run.hdrs is not None else [None] * len(run)
    assert len(hdrs) == len(run)
    assert run.hdrs is None or any(h is not None for h in run.hdrs), "hdrs must be None when no message has one"
    return [(q, t, s.decode(), h, m) for q, t, s, h, m in zip(run.seqs, run.tss, run.subjects, hdrs, run.msgs)]


def _iter_rows(s, start: int, n: int) -> list[tuple]:
    out: list[tuple] = []
    for m in s.iter_msgs(start, 1 << 62):
        if len(out) == n:
            break
        out.append((m.seq, m.ts, m.subject, m.hdr, m.msg))
    return out


def check_load_run(factory: StoreFactory) -> None:
    """load_run: the next max_msgs live messages as columns, equal to iter_msgs' messages, over
    uniform stretches (one size), headers, mixed sizes, gaps, skips, erased messages, a purge
    and a restart; empty past the end."""
    clock = ManualClock()
    s = factory.make(_cfg(), clock)
    hdr = b"NATS/1.0\r\nK: v\r\n\r\n"
    for i in range(1, 61):
        subj = "u.a" if i <= 20 else ("u.%d" % (i % 3) if i <= 40 else "v.long.subject")
        s.store_msg(subj, hdr if 30 < i <= 45 else None, b"p" * (8 if i <= 50 else i))
    s.flush()
    rows = _iter_rows(s, 0, 100)
    assert [r[0] for r in rows] == list(range(1, 61))
    for start in (0, 1, 5, 19, 20, 29, 31, 44, 50, 59, 60):
        for n in (1, 2, 3, 16, 60, 100):
            assert _run_rows(s.load_run(start, n)) == _iter_rows(s, start, n), (start, n)
    run = s.load_run(1, 3)
    assert (list(run.seqs), run.hdrs) == ([1, 2, 3], None)
    assert (list(run.subjects), list(run.msgs)) == ([b"u.a"] * 3, [b"p" * 8] * 3)
    run = s.load_run(31, 2)
    assert list(run.hdrs or ()) == [hdr, hdr]
    assert len(s.load_run(61, 10)) == 0 and len(s.load_run(1000, 1)) == 0
    # Gaps: removed, erased, skipped sequences are left out.
    assert s.remove_msg(3) and s.erase_msg(4) and s.remove_msg(33) and s.remove_msg(60)
    s.skip_msg()
    s.store_msg("u.a", None, b"p" * 8)
    assert [q for q in s.load_run(1, 8).seqs] == [1, 2, 5, 6, 7, 8, 9, 10]
    assert list(s.load_run(58, 10).seqs) == [58, 59, 62]
    for start in (0, 2, 3, 30, 32, 59, 61):
        assert _run_rows(s.load_run(start, 100)) == _iter_rows(s, start, 100), start
    s = _restart(factory, s, clock)
    for start in (0, 2, 3, 30, 32, 59, 61):
        assert _run_rows(s.load_run(start, 7)) == _iter_rows(s, start, 7), start
    s.purge()
    assert len(s.load_run(0, 10)) == 0
    seq, _ = s.store_msg("w", None, b"after")
    run = s.load_run(0, 10)
    assert list(run.seqs) == [seq] and list(run.msgs) == [b"after"] and list(run.subjects) == [b"w"]
    s.stop()
    _raises(StoreClosed, s.load_run, 0, 1)


def check_subject_state(factory: StoreFactory) -> None:
    """filtered_state, subjects_state, subjects_totals, num_pending, multi_last_seqs."""
    clock = ManualClock()
    s = factory.make(_cfg(), clock)
    for i in range(1, 13):
        s.store_msg(["o.1", "o.2", "p.1"][i % 3], None, b"x")
    fs = s.filtered_state(0, "o.*")
    assert (fs.msgs, fs.first, fs.last) == (8, 1, 12)
    fs = s.filtered_state(5, "o.1")
    assert (fs.msgs, fs.first, fs.last) == (3, 6, 12)
    fs = s.filtered_state(5, ">")
    assert (fs.msgs, fs.first, fs.last) == (8, 5, 12)
    assert s.filtered_state(13, ">").msgs == 0
    ss = s.subjects_state("o.*")
    assert {k: (v.msgs, v.first, v.last) for k, v in ss.items()} == {"o.1": (4, 3, 12), "o.2": (4, 1, 10)}
    assert s.subjects_totals("p.>") == {"p.1": 4}
    assert s.num_pending(6, "o.>", False) == 5
    assert s.num_pending(11, ">", True) == 2
    assert s.num_pending(0, ">", True) == 3
    assert s.multi_last_seqs(["o.1", "p.*"], 0) == [11, 12]
    assert s.multi_last_seqs([">"], 8) == [6, 7, 8]
    s.stop()


def check_update_config(factory: StoreFactory) -> None:
    """update_config applies tighter limits at once."""
    clock = ManualClock()
    s = factory.make(_cfg(), clock)
    for i in range(10):
        s.store_msg(f"u.{i % 2}", None, b"x")
    s.update_config(replace(s.config, max_msgs_per_subject=3))
    assert s.subjects_totals(">") == {"u.0": 3, "u.1": 3}
    s.update_config(replace(s.config, max_msgs=4))
    st = s.state()
    assert (st.msgs, st.first_seq) == (4, 7)
    s = _restart(factory, s, clock)
    assert s.config.max_msgs == 4 and s.state().msgs == 4
    s.stop()


def check_storage_updates(factory: StoreFactory) -> None:
    """Every removal is reported through the registered callback."""
    clock = ManualClock()
    got = []
    s = factory.make(_cfg(max_age_ns=SEC), clock)
    s.register_storage_updates(lambda *a: got.append(a))
    for i in range(6):
        s.store_msg("e", None, b"x")
    sz = _size(s, "e", None, b"x")
    s.remove_msg(3)
    assert got == [(-1, -sz, 3, "e")]
    s.compact(3)
    assert got[-1] == (-2, -2 * sz, 0, "")
    clock.advance(2 * SEC)
    s.expire(clock.time_ns())
    assert got[-3:] == [(-1, -sz, 4, "e"), (-1, -sz, 5, "e"), (-1, -sz, 6, "e")]
    s.stop()


def check_consumer_store(factory: StoreFactory) -> None:
    """Consumer state and config round-trip (and survive a restart when the store persists)."""
    clock = ManualClock()
    s = factory.make(_cfg(), clock)
    cs = s.consumer_store("dur", {"durable_name": "dur", "ack_policy": "explicit"})
    assert cs.state() == ConsumerState()
    t = clock.time_ns()
    st = ConsumerState(
        delivered=SequencePair(10, 12),
        ack_floor=SequencePair(5, 6),
        pending={8: Pending(7, t), 11: Pending(9, t + 5)},
        redelivered={8: 2},
    )
    cs.update(st)
    cs.flush()
    assert cs.state() == st
    cs.update_config({"durable_name": "dur", "ack_policy": "all"})
    assert s.consumer_names() == ["dur"]
    s.consumer_store("gone", {"durable_name": "gone"}).delete()
    assert s.consumer_names() == ["dur"]
    s2 = factory.reopen(s, clock)
    if s2 is not None:
        assert s2.consumer_names() == ["dur"]
        cs2 = s2.consumer_store("dur", {})  # no config given: the persisted one stays
        assert cs2.state() == st
        assert cs2.meta == {"durable_name": "dur", "ack_policy": "all"}
        s2.stop()
    else:
        s.stop()


def check_seq_from_time(factory: StoreFactory) -> None:
    """get_seq_from_time: first live message stored at or after a wall time."""
    clock = ManualClock()
    s = factory.make(_cfg(), clock)
    t0 = clock.time_ns()
    assert s.get_seq_from_time(t0) == 1
    for _ in range(10):
        s.store_msg("t", None, b"x")
        clock.advance(SEC)
    s.skip_msg()
    s.remove_msg(4)
    assert s.get_seq_from_time(0) == 1
    assert s.get_seq_from_time(t0 + 3 * SEC) == 5
    assert s.get_seq_from_time(t0 + 2 * SEC + 1) == 5
    assert s.get_seq_from_time(t0 + 9 * SEC) == 10
    assert s.get_seq_from_time(t0 + 100 * SEC) == 12
    s.stop()


def check_delete(factory: StoreFactory) -> None:
    """delete() stops the store; it cannot be used afterwards."""
    clock = ManualClock()
    s = factory.make(_cfg(), clock)
    s.store_msg("a", None, b"x")
    s.delete()
    _raises(StoreClosed, s.store_msg, "a", None, b"x")


# ---------------------------------------------------------------------------------------------
# The model and random operation sequences.


class Model:
    """A deliberately simple reference implementation (dict by sequence) of the semantics the
    random test exercises: discard-old limits, deletes, purges, compact, truncate, skip and
    max_age."""

    def __init__(self, config: StoreConfig, size: Callable[[str, bytes | None, bytes], int]) -> None:
        self.cfg = config
        self.size = size
        self.msgs: dict[int, tuple[str, bytes | None, bytes, int]] = {}
        self.first = config.first_seq or 1
        self.last = self.first - 1

    def _fix_first(self) -> None:
        self.first = min(self.msgs) if self.msgs else self.last + 1

    def store(self, subj, hdr, msg, ts) -> int:
        self.last += 1
        self.msgs[self.last] = (subj, hdr, msg, ts)
        maxp = self.cfg.max_msgs_per_subject
        if maxp > 0:
            seqs = sorted(s for s, m in self.msgs.items() if m[0] == subj)
            for s in seqs[: max(0, len(seqs) - maxp)]:
                del self.msgs[s]
        if self.cfg.max_msgs > 0:
            while len(self.msgs) > self.cfg.max_msgs:
                del self.msgs[min(self.msgs)]
        if self.cfg.max_bytes > 0:
            while self.bytes() > self.cfg.max_bytes:
                del self.msgs[min(self.msgs)]
        self._fix_first()
        return self.last

    def bytes(self) -> int:
        return sum(self.size(m[0], m[1], m[2]) for m in self.msgs.values())

    def remove(self, seq) -> bool:
        ok = self.msgs.pop(seq, None) is not None
        self._fix_first()
        return ok

    def skip(self) -> None:
        self.last += 1
        self._fix_first()

    def purge(self) -> int:
        n = len(self.msgs)
        self.msgs.clear()
        self._fix_first()
        return n

    def purge_subject(self, subj: str, keep: int) -> int:
        seqs = sorted(s for s, m in self.msgs.items() if subject_matches(m[0], subj))
        if keep >= len(seqs):
            return 0
        doomed = seqs[: len(seqs) - keep] if keep else seqs
        for s in doomed:
            del self.msgs[s]
        self._fix_first()
        return len(doomed)

    def compact(self, seq: int) -> int:
        if seq > self.last:
            n = len(self.msgs)
            self.msgs.clear()
            self.last = seq - 1
            self.first = seq
            return n
        doomed = [s for s in self.msgs if s < seq]
        for s in doomed:
            del self.msgs[s]
        self._fix_first()
        if self.first < seq and not self.msgs:
            self.first = self.last + 1
        return len(doomed)

    def truncate(self, seq: int) -> None:
        if seq >= self.last:
            return
        for s in [s for s in self.msgs if s > seq]:
            del self.msgs[s]
        self.last = seq
        self._fix_first()

    def expire(self, now: int) -> int:
        if self.cfg.max_age_ns <= 0:
            return 0
        doomed = []
        keep_last = self.cfg.keep_last_under_max_age
        lasts = {m[0]: s for s, m in sorted(self.msgs.items())} if keep_last else {}
        for s in sorted(self.msgs):
            if self.msgs[s][3] > now - self.cfg.max_age_ns:
                break
            if keep_last and lasts[self.msgs[s][0]] == s:
                continue  # keep_last_under_max_age: a subject's last message stays
            doomed.append(s)
        for s in doomed:
            del self.msgs[s]
        self._fix_first()
        return len(doomed)


def random_ops(rng: random.Random, n: int) -> list[tuple]:
    """``n`` random operations (plain tuples, so hypothesis can shrink the equivalent)."""
    ops: list[tuple] = []
    for _ in range(n):
        r = rng.random()
        if r < 0.47:
            ops.append(("pub", rng.randrange(6), rng.randrange(40), rng.random() < 0.2))
        elif r < 0.55:
            ops.append(("run", rng.randrange(6), rng.randrange(1, 9), rng.randrange(40), rng.random() < 0.7))
        elif r < 0.68:
            ops.append(("rm", rng.randrange(60), rng.random() < 0.3))
        elif r < 0.73:
            ops.append(("skip",))
        elif r < 0.78:
            ops.append(("purge_subj", rng.randrange(len(_PURGE_FILTERS)), rng.randrange(3)))
        elif r < 0.81:
            ops.append(("compact", rng.randrange(80)))
        elif r < 0.83:
            ops.append(("purge",))
        elif r < 0.85:
            ops.append(("trunc", rng.randrange(6)))
        elif r < 0.93:
            ops.append(("tick", rng.randrange(1, 4)))
        else:
            ops.append(("restart",))
    return ops


def model_ops():
    """Hypothesis strategy producing the same operation tuples as :func:`random_ops`."""
    from hypothesis import strategies as st

    op = st.one_of(
        st.tuples(st.just("pub"), st.integers(0, 5), st.integers(0, 40), st.booleans()),
        st.tuples(st.just("run"), st.integers(0, 5), st.integers(1, 8), st.integers(0, 40), st.booleans()),
        st.tuples(st.just("rm"), st.integers(0, 60), st.booleans()),
        st.tuples(st.just("skip")),
        st.tuples(st.just("purge_subj"), st.integers(0, len(_PURGE_FILTERS) - 1), st.integers(0, 2)),
        st.tuples(st.just("compact"), st.integers(0, 80)),
        st.tuples(st.just("purge")),
        st.tuples(st.just("tick"), st.integers(1, 3)),
        st.tuples(st.just("trunc"), st.integers(0, 5)),
        st.tuples(st.just("restart")),
    )
    return st.lists(op, max_size=60)


_SUBJECTS = ["m.a", "m.b", "m.c.x", "n.a", "n.b.c", "m.a.b"]
_FILTERS = [">", "m.*", "m.>", "n.a", "*.a", "m.c.x"]
_HDR = b"NATS/1.0\r\nX: y\r\n\r\n"
# purge_ex filters: each subject, and the whole stream (keep counts messages, not sequences).
_PURGE_FILTERS = _SUBJECTS + ["", ">"]


def _compare(store, model: Model, rng: random.Random) -> None:
    st = store.state(deleted_details=True)
    exp_deleted = [s for s in range(model.first, model.last + 1) if s not in model.msgs] if model.msgs else []
    got = (st.msgs, st.bytes, st.first_seq, st.last_seq, st.deleted)
    want = (len(model.msgs), model.bytes(), model.first, model.last, exp_deleted)
    assert got == want, f"state {got} != model {want}"
    totals: dict[str, int] = {}
    for m in model.msgs.values():
        totals[m[0]] = totals.get(m[0], 0) + 1
    assert store.subjects_totals(">") == totals
    assert st.num_subjects == len(totals)
    if model.msgs:
        assert st.first_ts == model.msgs[model.first][3]
    for _ in range(3):
        seq = rng.randrange(0, model.last + 3)
        if seq in model.msgs:
            m = store.load_msg(seq)
            assert (m.subject, m.hdr, m.msg, m.ts) == model.msgs[seq], f"load {seq}"
        else:
            try:
                store.load_msg(seq)
            except (MsgNotFound, StoreEOF):
                pass
            else:
                raise AssertionError(f"seq {seq} should be absent")
        flt = rng.choice(_FILTERS)
        want_seq = next((s for s in sorted(model.msgs) if s >= seq and subject_matches(model.msgs[s][0], flt)), 0)
        try:
            got_seq = store.load_next_msg(flt, seq).seq
        except StoreEOF:
            got_seq = 0
        assert got_seq == want_seq, f"load_next_msg({flt!r}, {seq}) {got_seq} != {want_seq}"
        fs = store.filtered_state(seq, flt)
        matching = [s for s in model.msgs if s >= seq and subject_matches(model.msgs[s][0], flt)]
        assert fs.msgs == len(matching), f"filtered_state({seq}, {flt!r})"
        if matching:
            assert (fs.first, fs.last) == (min(matching), max(matching))
        lasts = {}
        for s in sorted(model.msgs):
            if subject_matches(model.msgs[s][0], flt):
                lasts[model.msgs[s][0]] = s
        try:
            got_last = store.load_last_msg(flt).seq
        except MsgNotFound:
            got_last = 0
        assert got_last == (max(lasts.values()) if lasts else 0), f"load_last_msg({flt!r})"
        assert store.multi_last_seqs([flt], 0) == sorted(lasts.values())
    # load_run from a random start: the model's next live messages, as columns.
    # (its own generator: the shared one decides the operations and payloads)
    r2 = random.Random(model.last * 7919 + len(model.msgs))
    start = r2.randrange(0, model.last + 3)
    n = r2.choice((1, 2, 5, 50))
    rows = [
        (q, model.msgs[q][3], model.msgs[q][0], model.msgs[q][1], model.msgs[q][2])
        for q in sorted(model.msgs)
        if q >= start
    ][:n]
    assert _run_rows(store.load_run(start, n)) == rows, f"load_run({start}, {n})"


def run_model_ops(factory: StoreFactory, ops: list[tuple], config: StoreConfig | None = None, seed: int = 0) -> None:
    """Apply ``ops`` to a fresh store and to :class:`Model`, comparing after every step."""
    clock = ManualClock()
    config = config or _cfg()
    store = factory.make(config, clock)
    model = Model(config, _msg_size_of(store))
    rng = random.Random(seed)
    try:
        for op in ops:
            kind = op[0]
            if kind == "pub":
                subj = _SUBJECTS[op[1]]
                hdr = _HDR if op[3] else None
                body = bytes(rng.randrange(256) for _ in range(op[2]))
                seq, ts = store.store_msg(subj, hdr, body)
                assert seq == model.store(subj, hdr, body, ts)
            elif kind == "run":
                # store_run: messages to one subject, of one length (an async publisher's
                # burst) or of mixed lengths, header-less or each behind a header block (an
                # HPUB burst, hdr_len); the model stores them one by one.
                subj = _SUBJECTS[op[1]]
                sizes = [op[3]] * op[2] if op[4] else [rng.randrange(40) for _ in range(op[2])]
                bodies = [bytes(rng.randrange(256) for _ in range(n)) for n in sizes]
                hdr = _HDR if rng.random() < 0.4 else None
                if hdr:
                    first, ts, stored, err = store.store_run(subj, [hdr + b for b in bodies], len(hdr))
                else:
                    first, ts, stored, err = store.store_run(subj, bodies)
                assert (stored, err) == (len(bodies), None)
                assert [model.store(subj, hdr, b, ts) for b in bodies] == list(range(first, first + stored))
            elif kind == "rm":
                seq = op[1] + max(model.first - 5, 0)
                fn = store.erase_msg if op[2] else store.remove_msg
                assert fn(seq) == model.remove(seq), f"remove {seq}"
            elif kind == "skip":
                assert store.skip_msg() == model.last + 1
                model.skip()
            elif kind == "purge_subj":
                flt = _PURGE_FILTERS[op[1]]
                assert store.purge_ex(flt, 0, op[2]) == model.purge_subject(flt, op[2]), (
                    f"purge_ex({flt!r}, 0, {op[2]})"
                )
            elif kind == "compact":
                seq = op[1] + max(model.first - 10, 1)
                if seq >= model.first:
                    assert store.compact(seq) == model.compact(seq)
            elif kind == "purge":
                assert store.purge() == model.purge()
            elif kind == "trunc":
                seq = max(model.last - op[1], model.first - 1)
                store.truncate(seq)
                model.truncate(seq)
            elif kind == "tick":
                clock.advance(op[1] * SEC)
                assert store.expire(clock.time_ns()) == model.expire(clock.time_ns())
            elif kind == "restart":
                store.flush()
                store = _restart(factory, store, clock)
            _compare(store, model, rng)
    finally:
        store.stop()


#: Limit configurations the random test runs under.
RANDOM_CONFIGS = {
    "unlimited": dict(),
    "max_msgs": dict(max_msgs=12),
    "per_subject": dict(max_msgs_per_subject=3),
    "max_bytes": dict(max_bytes=600),
    "max_age": dict(max_age_ns=5 * SEC),
    "max_age_keep_last": dict(max_age_ns=5 * SEC, keep_last_under_max_age=True),
    "first_seq": dict(first_seq=1000, max_msgs=30),
}


def check_store_many(factory: StoreFactory) -> None:
    """store_many: each message to its own subject, consecutive sequences, one timestamp, the
    same state and loads as store_msg of each; limits applied per message as store_msg (per
    subject, discard old, discard new stopping at the first refusal); a closed store raises."""
    clock = ManualClock(start_time_ns=9 * SEC)
    s = factory.make(_cfg(), clock)
    s.store_msg("a", None, b"0")
    subjects = ["m.%d" % (i % 7) for i in range(250)]
    bodies = [b"%03d" % i for i in range(249)] + [b"a longer one"]
    first, ts, stored, err = s.store_many(subjects, bodies)
    assert (first, ts, stored, err) == (2, 9 * SEC, 250, None)
    st = s.state()
    want_bytes = _size(s, "a", None, b"0") + sum(_size(s, j, None, b) for j, b in zip(subjects, bodies))
    assert (st.msgs, st.bytes, st.last_seq, st.num_subjects) == (251, want_bytes, 251, 8)
    for i in (0, 6, 7, 248, 249):
        m = s.load_msg(first + i)
        assert (m.subject, m.hdr, m.msg, m.seq, m.ts) == (subjects[i], None, bodies[i], first + i, ts)
    assert s.load_last_msg("m.3").seq == first + 248 and s.load_next_msg("m.1", 1).seq == first + 1
    # known subjects (one piece at a time, blocks rolling, a big payload on the way): the same
    # stream as store_msg of each, with the same clock
    again = ["m.%d" % (i % 7) for i in range(700)]
    big = [b"%04d" % i * (600 if i == 350 else 8 if i % 3 else 1) for i in range(700)]
    assert s.store_many(again, big)[2:] == (700, None)
    twin = factory.make(_cfg(name="T"), clock)
    twin.store_msg("a", None, b"0")
    for j, b in zip(subjects + again, bodies + big):
        twin.store_msg(j, None, b)
    st, tw = s.state(), twin.state()
    assert (st.msgs, st.bytes, st.last_seq, st.num_subjects) == (tw.msgs, tw.bytes, tw.last_seq, tw.num_subjects)
    for seq in (252, 253, 600, 601, 951):
        m, t = s.load_msg(seq), twin.load_msg(seq)
        assert (m.subject, m.msg, m.seq) == (t.subject, t.msg, t.seq)
    for j in ("m.0", "m.3", "m.6"):
        assert s.load_last_msg(j).seq == twin.load_last_msg(j).seq
        assert s.load_next_msg(j, 300).seq == twin.load_next_msg(j, 300).seq
        assert s.filtered_state(0, j).msgs == twin.filtered_state(0, j).msgs
    twin.stop()
    s.flush()
    s = _restart(factory, s, clock)
    assert s.state().msgs == 951 and s.load_msg(first + 100).msg == bodies[100]
    assert s.load_msg(951).msg == big[-1] and s.load_last_msg("m.0").seq == 951 - 6
    s.stop()

    # per-subject limit with discard old: each subject keeps its newest
    removed = []
    s = factory.make(_cfg(max_msgs_per_subject=1), clock)
    s.register_storage_updates(lambda m, b, seq, subj: removed.append(seq))
    assert s.store_many(["k.a", "k.b", "k.a", "k.c", "k.b"], [b"1", b"2", b"3", b"4", b"5"])[2:] == (5, None)
    assert s.subjects_totals(">") == {"k.a": 1, "k.b": 1, "k.c": 1} and removed == [1, 2]
    s.stop()

    # discard new, per subject: the third message is refused, nothing after it is stored
    s = factory.make(_cfg(max_msgs_per_subject=1, discard=DiscardPolicy.NEW, discard_new_per_subject=True), clock)
    first, _, stored, err = s.store_many(["p.a", "p.b", "p.a", "p.c"], [b"1", b"2", b"3", b"4"])
    assert (first, stored) == (1, 2) and isinstance(err, MaxMsgsPerSubject)
    assert s.state().last_seq == 2
    s.stop()
    s = factory.make(_cfg(max_msgs=2, discard=DiscardPolicy.NEW), clock)
    first, _, stored, err = s.store_many(["q.a", "q.b", "q.c"], [b"1", b"2", b"3"])
    assert (first, stored) == (1, 2) and isinstance(err, MaxMsgs)
    s.stop()
    _raises(StoreClosed, s.store_many, ["q.a"], [b"1"])


def check_random_ops(factory: StoreFactory, seed: int, n: int = 150, limits: str = "unlimited") -> None:
    """A seeded random sequence of ``n`` operations under one of ``RANDOM_CONFIGS``."""
    rng = random.Random(seed)
    run_model_ops(factory, random_ops(rng, n), _cfg(**RANDOM_CONFIGS[limits]), seed)


STREAM_STORE_CHECKS = [
    check_store_and_load,
    check_first_seq,
    check_never_written,
    check_max_msgs,
    check_max_bytes,
    check_max_msgs_per_subject,
    check_store_run,
    check_store_many,
    check_max_age,
    check_max_age_keep_last,
    check_msg_ttl,
    check_remove_and_deleted,
    check_purge,
    check_purge_keep_counts_messages,
    check_compact_truncate,
    check_skip,
    check_reads,
    check_load_run,
    check_subject_state,
    check_update_config,
    check_storage_updates,
    check_seq_from_time,
    check_delete,
]
CONSUMER_STORE_CHECKS = [check_consumer_store]
