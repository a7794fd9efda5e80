"""``load_filtered_run`` (a filtered consumer's delivery pass reads its new messages as one run,
issue 31's plgd shape: a consumer on ``plgd.*.<event>`` over thousands of devices) gives exactly
what successive ``load_next_msg`` calls give, on every store, through adds with and without
headers, removals, purges, reuse of freed subject slots and restarts; and a pending count over a
short stretch of such a stream does not look at every matching subject."""

from __future__ import annotations

import random

import pytest

from natsd.clock import ManualClock
from natsd.store.base import StoreConfig, StoreEOF
from natsd.store.memory import MemoryStreamStore
from natsd.store.seqindex import IndexedStreamStore
from natsd.subjects.tokens import subject_matches

pytestmark = [pytest.mark.unit]

_FILTER_SETS = (
    ["plgd.*.online"],  # many subjects: the set scan
    ["plgd.d1.online"],  # one literal subject: the per-subject search
    ["plgd.d1*.online"],  # no subject matches
    ["plgd.d2.*"],  # a few subjects
    ["plgd.*.online", "plgd.d3.offline"],  # several filters
    [">"],
)


def _successive(store, filters: list[str], start: int, n: int) -> list:
    """What the delivery loop's per-message path finds: the lowest next match over the filters."""
    out = []
    while len(out) < n:
        best = None
        for f in filters:
            try:
                m = store.load_next_msg(f, start)
            except StoreEOF:
                continue
            if best is None or m.seq < best.seq:
                best = m
        if best is None:
            break
        out.append((best.seq, best.ts, best.subject.encode(), best.hdr, best.msg))
        start = best.seq + 1
    return out


def _columns(run) -> list:
    hdrs = run.hdrs if run.hdrs is not None else [None] * len(run.seqs)
    return list(zip(run.seqs, run.tss, run.subjects, hdrs, run.msgs))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("seed", range(2))
def test_filtered_run_is_successive_next_msg_reads(store_factory, seed):
    rng = random.Random(seed)
    clock = ManualClock()
    s = store_factory.make(StoreConfig(name="RUNS"), clock)
    devices = 60  # well above the per-subject search limit (16 matching subjects)
    for step in range(300):
        r = rng.random()
        if r < 0.7:
            ev = rng.choice(("online", "offline", "registered"))
            hdr = b"NATS/1.0\r\nK: v\r\n\r\n" if rng.random() < 0.2 else None
            s.store_msg(f"plgd.d{rng.randrange(devices)}.{ev}", hdr, b"x%d" % step)
        elif r < 0.85:
            st = s.state()
            if st.msgs:
                s.remove_msg(rng.randrange(st.first_seq, st.last_seq + 1))
        elif r < 0.88:
            s.purge_ex(f"plgd.d{rng.randrange(devices)}.online", 0, 0)
        elif r < 0.9:
            s.skip_msg()
        elif r < 0.92:
            again = store_factory.reopen(s, clock)
            if again is not None:
                s = again
        st = s.state()
        if step % 5:
            continue
        for filters in _FILTER_SETS:
            for start in (0, st.first_seq + 3, max(st.last_seq - 5, 0), st.last_seq + 1):
                for n in (1, 7, 1000):
                    want = _successive(s, filters, start, n)
                    got = _columns(s.load_filtered_run(start, n, filters))
                    assert got == want, (step, filters, start, n)
        clock.advance(1)
    s.stop()


def test_pending_count_over_a_short_stretch_looks_at_no_subject(monkeypatch):
    """10,000 devices: the consumer's count of what arrived since it last counted (a few
    sequences) is one pass over those sequences, not a look at 10,000 subjects' first and last."""
    st = MemoryStreamStore(StoreConfig(name="S", subjects=["plgd.>"]), ManualClock())
    for d in range(10_000):
        st.store_msg("plgd.d%05d.online" % d, None, b"p")
        st.store_msg("plgd.d%05d.offline" % d, None, b"p")
    for d in (7, 3, 7, 9000):
        st.store_msg("plgd.d%05d.online" % d, None, b"p")
        st.store_msg("plgd.d%05d.offline" % d, None, b"p")
    st.remove_msg(20_003)
    looked = []
    for name in ("_subject_first", "_subject_last"):
        orig = getattr(IndexedStreamStore, name)
        monkeypatch.setattr(st, name, lambda sid, orig=orig: looked.append(sid) or orig(st, sid))
    got = st.filtered_state(20_001, "plgd.*.online")
    assert (got.msgs, got.first, got.last) == (3, 20_001, 20_007)
    assert st.num_pending(20_002, "plgd.*.offline", False) == 4
    assert looked == []
    # from further back: the same as a brute count
    for start in (10, 15_000):
        got = st.filtered_state(start, "plgd.*.online")
        live = [m for m in st.iter_msgs(start, 20_008) if subject_matches("plgd.*.online", m.subject)]
        assert (got.msgs, got.first, got.last) == (len(live), live[0].seq, live[-1].seq)
    # a long stretch over few subjects: the per-subject way
    for i in range(3_000):
        st.store_msg("plgd.d%05d.x" % (i % 20), None, b"p")
    got = st.filtered_state(10, "plgd.*.x")
    assert looked and (got.msgs, got.first, got.last) == (3_000, 20_009, 23_008)
