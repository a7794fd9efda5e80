"""The per-sequence layout of the shared index (issue 31: bytes per stored message): sizes in 16
bits with the large ones kept aside, and per-subject chains only where a per-subject limit above 1
needs them. Checked on every store kind (memory; file after a stop, a crash, without index.db),
against what the messages themselves say."""

from __future__ import annotations

import random

import pytest

from natsd.clock import ManualClock
from natsd.store.base import DiscardPolicy, StoreConfig
from natsd.store.file.stream_store import FileStreamStore
from natsd.store.memory import MemoryStreamStore
from natsd.store.seqindex import SZ_BIG

pytestmark = pytest.mark.unit


def _bytes_per_seq(store) -> int:
    arrays = [store._pos, store._sid, store._ts, store._sz]
    if store._nxt is not None:
        arrays.append(store._nxt)
    return sum(a.itemsize for a in arrays)


def _sizes(store) -> dict[int, int]:
    return {m.seq: store.msg_size(m.subject, m.hdr, m.msg) for m in store.iter_msgs(0, store.state().last_seq)}


def _check(store) -> None:
    sizes = _sizes(store)
    st = store.state()
    assert (st.msgs, st.bytes) == (len(sizes), sum(sizes.values()))
    got = {seq: store._size(seq - store._base) for seq in sizes}
    assert got == sizes
    # Only live large messages keep their size aside.
    assert set(store._szx) == {q for q, z in sizes.items() if z >= SZ_BIG}


def test_a_message_costs_11_bytes_of_index_without_a_subject_limit_above_1(store_factory):
    """File store: position 4, subject 1 (up to 254 subjects), time 4, size 2 (+ 4 of chain with
    a per-subject limit above 1; 28 in all before issue 31); a memory store's positions take 1."""
    clock = ManualClock()
    for maxp, chain in ((0, 0), (1, 0), (5, 4)):
        s = store_factory.make(StoreConfig(name=f"L{maxp}", max_msgs_per_subject=maxp), clock)
        want = (8 if isinstance(s, MemoryStreamStore) else 11) + chain
        for i in range(100):
            s.store_msg(f"k.{i % 7}", None, b"v")
        s.remove_msg(3)
        assert _bytes_per_seq(s) == want
        assert len(s._sz) == len(s._pos) and (s._nxt is None or len(s._nxt) == len(s._pos))
        again = store_factory.reopen(s, clock)
        if again is not None:
            s = again
            assert _bytes_per_seq(s) == want
        s.stop()


@pytest.mark.parametrize("seed", range(3))
def test_large_messages_keep_their_size_aside(store_factory, seed):
    """Messages of 64 KiB and more (record or accounted size >= SZ_BIG) through every way of
    storing, removing and reopening: state().bytes and each size agree with the messages."""
    rng = random.Random(seed)
    clock = ManualClock()
    s = store_factory.make(StoreConfig(name="BIG", max_msgs=40, discard=DiscardPolicy.OLD), clock)

    def payload() -> bytes:
        return b"b" * rng.choice((1, 100, SZ_BIG - 40, SZ_BIG, 70_000))

    for step in range(120):
        r = rng.random()
        if r < 0.35:
            s.store_msg(rng.choice(("a", "b.c")), None, payload())
        elif r < 0.5:
            s.store_run("run", [payload() for _ in range(rng.randrange(1, 5))])
        elif r < 0.6:
            n = rng.randrange(1, 4)
            s.store_many([f"m.{i}" for i in range(n)], [payload() for _ in range(n)])
        elif r < 0.7:
            st = s.state()
            if st.msgs:
                s.remove_msg(rng.randrange(st.first_seq, st.last_seq + 1))
        elif r < 0.75:
            st = s.state()
            s.truncate(max(st.last_seq - rng.randrange(3), st.first_seq - 1))
        elif r < 0.8:
            st = s.state()
            s.compact(st.first_seq + rng.randrange(3))
        elif r < 0.9:
            again = store_factory.reopen(s, clock)
            if again is not None:
                s = again
        _check(s)
        clock.advance(1)
    s.stop()


def test_a_per_subject_limit_added_or_dropped_keeps_subjects_right(store_factory):
    """The chains appear (all "unknown") when a per-subject limit above 1 is configured on a
    stream holding messages, and go when it is dropped; either way each subject's first, last
    and count stay those of its messages."""
    clock = ManualClock()
    cfg = StoreConfig(name="CFG")
    s = store_factory.make(cfg, clock)
    for i in range(200):
        s.store_msg(f"k.{i % 5}", None, b"%d" % i)
    assert s._nxt is None
    limited = StoreConfig(name="CFG", max_msgs_per_subject=3)
    s.update_config(limited)
    assert s._nxt is not None and len(s._nxt) == len(s._pos)
    for i in range(50):
        s.store_msg(f"k.{i % 7}", None, b"x")
        _assert_subjects(s)
    again = store_factory.reopen(s, clock)
    if again is not None:
        s = again
        assert s._nxt is not None
        _assert_subjects(s)
    s.update_config(StoreConfig(name="CFG"))
    assert s._nxt is None
    for i in range(30):
        s.store_msg(f"k.{i % 3}", None, b"y")
        st = s.state()
        s.remove_msg(st.first_seq)  # each subject's first goes: found by a search, no chain
        _assert_subjects(s)
    s.stop()


def _assert_subjects(store) -> None:
    out: dict[str, list[int]] = {}
    for m in store.iter_msgs(0, store.state().last_seq):
        out.setdefault(m.subject, []).append(m.seq)
    got = {k: (v.msgs, v.first, v.last) for k, v in store.subjects_state(">").items()}
    assert got == {k: (len(v), v[0], v[-1]) for k, v in out.items()}


def _times(store) -> dict[int, int]:
    return {m.seq: m.ts for m in store.iter_msgs(0, store.state().last_seq)}


@pytest.mark.parametrize("seed", range(2))
def test_times_stay_exact_across_time_segments(store_factory, seed):
    """Times are u32 nanoseconds from their segment's base: gaps of more than 4.29 s, a wall
    clock stepped back, runs, skips and removals from the front (which trim the arrays) open
    and drop segments; every time read back is the one stored, and the times the index keeps
    (first_ts, age expiry, get_seq_from_time, a memory store's reads) agree with them."""
    rng = random.Random(seed)
    clock = ManualClock()
    cfg = StoreConfig(name="TS", max_msgs=1000, discard=DiscardPolicy.OLD)
    s = store_factory.make(cfg, clock)
    stored: dict[int, int] = {}
    for step in range(6000):
        r = rng.random()
        if r < 0.002:
            clock.set_time_ns(clock.time_ns() - rng.randrange(1, 10**10))  # stepped back
        elif r < 0.01:
            clock.advance(rng.randrange(4 * 10**9, 10**11))  # beyond one segment
        else:
            clock.advance(rng.randrange(0, 3000))
        if r < 0.97:
            seq, ts = s.store_msg(f"t.{step % 3}", None, b"p")
            stored[seq] = ts
        elif r < 0.98:
            first, ts, n, _err = s.store_run("t.run", [b"r"] * 5)
            stored.update((q, ts) for q in range(first, first + n))
        elif r < 0.998:
            s.skip_msg()
        else:
            again = store_factory.reopen(s, clock)
            if again is not None:
                s = again
    got = _times(s)
    assert got == {q: t for q, t in stored.items() if q in got}
    st = s.state()
    assert st.msgs == 1000 and st.first_ts == got[st.first_seq] and len(s._tss) > 1
    assert s._base > 1 and s._tss[0] <= s._base  # (trimmed or recovered: the first entry's segment kept)
    run = s.load_run(st.first_seq, 200)
    assert run.tss == [got[q] for q in run.seqs]
    # get_seq_from_time over ordered times: the first stored at or after each probe.
    ordered = sorted(got)
    if all(got[a] <= got[b] for a, b in zip(ordered, ordered[1:])):
        for q in rng.sample(ordered, 20):
            assert s.get_seq_from_time(got[q]) == min(x for x in ordered if got[x] >= got[q])
    s.stop()


def test_age_expiry_and_truncate_across_segments(store_factory):
    clock = ManualClock()
    s = store_factory.make(StoreConfig(name="AGE", max_age_ns=20 * 10**9), clock)
    seqs = []
    for i in range(10):
        seqs.append(s.store_msg("a", None, b"%d" % i))
        clock.advance(5 * 10**9)  # a segment each
    assert len(s._tss) == 10
    s.truncate(seqs[6][0])  # drops the segments above
    assert len(s._tss) == 7 and s.state().last_ts == seqs[6][1]
    q, ts = s.store_msg("a", None, b"after")
    assert s.load_msg(q).ts == ts and len(s._tss) == 8
    clock.advance(1)
    assert s.expire(clock.time_ns()) == 7  # stored 20 s ago or more: all but the last
    st = s.state()
    assert (st.msgs, st.first_seq, st.first_ts) == (1, q, ts)
    s.stop()


@pytest.mark.parametrize("seed", range(3))
def test_positions_follow_their_blocks(store_factory, seed):
    """A file store keeps 32-bit offsets and a position segment per block: small blocks, a
    truncation back into an earlier block (new records then land in the last block under
    sequences an older block held), removals, compactions and reopens; every read path
    (load_msg, iter_msgs, load_run) returns what was stored."""
    rng = random.Random(seed)
    clock = ManualClock()
    s = store_factory.make(StoreConfig(name="POS"), clock)
    model: dict[int, bytes] = {}
    for step in range(400):
        r = rng.random()
        if r < 0.7:
            body = b"%d-%d" % (step, rng.randrange(10**6)) * rng.randrange(1, 6)
            seq, _ts = s.store_msg(f"p.{step % 4}", None, body)
            model[seq] = body
        elif r < 0.78:
            first, _ts, n, _err = s.store_run("p.run", [b"r%d" % step] * 4)
            model.update((q, b"r%d" % step) for q in range(first, first + n))
        elif r < 0.86 and model:
            q = rng.choice(sorted(model))
            s.remove_msg(q)
            del model[q]
        elif r < 0.9:
            st = s.state()
            to = max(st.last_seq - rng.randrange(1, 30), st.first_seq - 1)
            s.truncate(to)
            model = {q: b for q, b in model.items() if q <= to}
        elif r < 0.95 and hasattr(s, "compact_blocks"):
            s.flush()
            s.compact_blocks()
        else:
            again = store_factory.reopen(s, clock)
            if again is not None:
                s = again
        if step % 25 == 0 or step == 399:
            last = s.state().last_seq
            assert {m.seq: m.msg for m in s.iter_msgs(0, last)} == model
            run = s.load_run(0, len(model) + 1)
            assert dict(zip(run.seqs, run.msgs)) == model
            for q in rng.sample(sorted(model), min(5, len(model))):
                assert s.load_msg(q).msg == model[q]
    if getattr(s, "_block_size", 1 << 30) <= 512:
        assert len(s._pss) > 1 and len(s._blocks) > 1  # (the reads above crossed blocks)
    s.stop()


def _widen(s, clock, reopen, n: int) -> None:
    for i in range(300):
        s.store_msg(f"w.{i % 255}", None, b"a")
    s.remove_msg(5)  # w.4 (again at 260)
    s.remove_msg(6)  # w.5 (again at 261)
    assert s._sid.typecode == "B"
    s.store_msg("w.new.1", None, b"b")
    assert s._sid.typecode == "H"
    s.store_many([f"x.{i}" for i in range(n)], [b"c"] * n)
    assert s._sid.typecode == ("I" if n + 256 > 0xFFFF else "H")
    for _ in range(2):
        st = s.state()
        assert st.msgs == 300 - 2 + 1 + n and st.num_subjects == 255 + 1 + n
        assert s.filtered_state(1, "w.4").msgs == 1 and s.filtered_state(1, "w.5").first == 261
        assert s.filtered_state(1, "w.*").msgs == 298 and s.filtered_state(1, "x.*").msgs == n
        assert s.load_msg(301).subject == "w.new.1" and s.load_last_msg(f"x.{n - 1}").msg == b"c"
        assert s.state(deleted_details=True).deleted == [5, 6]
        again = reopen(s, clock)
        if again is None:
            break
        s = again
    s.stop()


def test_subject_ids_widen_as_subjects_are_added(store_factory):
    """``_sid`` starts one byte wide and widens to two when the 256th subject slot appears,
    with removed messages in it (their "absent" id is translated): counts, filtered state and
    reads stay right, and after a reopen too."""
    clock = ManualClock()
    _widen(store_factory.make(StoreConfig(name="W"), clock), clock, store_factory.reopen, 100)


def test_subject_ids_widen_to_four_bytes(tmp_path):
    """... and to four when the 65,536th appears (a memory store; a file store through index.db)."""
    clock = ManualClock()
    mem = MemoryStreamStore(StoreConfig(name="W"), clock)
    _widen(mem, clock, lambda s, c: None, 66_000)

    def reopen(s, c):
        s.stop()
        return FileStreamStore(StoreConfig(name="W"), c, str(tmp_path))

    _widen(FileStreamStore(StoreConfig(name="W"), clock, str(tmp_path)), clock, reopen, 66_000)
