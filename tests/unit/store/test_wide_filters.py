"""Filtered reads over a wildcard matching many subjects (a consumer on ``plgd.*.<event>`` over
10,000 devices, issue 31): the matching subjects are cached as a list and a set that grow with new
subjects and are rebuilt when a subject slot is freed or reused; every read is checked against a
brute-force scan through adds, removals, purges, reuse of freed slots and restarts."""

from __future__ import annotations

import random

import pytest

from natsd.clock import ManualClock
from natsd.store.base import StoreConfig, StoreEOF
from natsd.subjects.tokens import subject_matches

_FILTERS = ("plgd.*.online", "plgd.*.offline", "plgd.>", "plgd.d1*.online")


def _brute_next(store, filter: str, start: int) -> int:
    for m in store.iter_msgs(start, store.state().last_seq):
        if subject_matches(filter, m.subject):
            return m.seq
    return 0


def _next(store, filter: str, start: int) -> int:
    try:
        return store.load_next_msg(filter, start).seq
    except StoreEOF:
        return 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", range(3))
def test_wide_filter_reads_match_brute_force(store_factory, seed):
    rng = random.Random(seed)
    clock = ManualClock()
    s = store_factory.make(StoreConfig(name="WIDE"), clock)
    devices = 60  # well above the per-subject search limit (16 matching subjects)
    for step in range(250):
        r = rng.random()
        if r < 0.7:
            ev = rng.choice(("online", "offline", "registered"))
            s.store_msg(f"plgd.d{rng.randrange(devices)}.{ev}", None, b"x")
        elif r < 0.85:
            st = s.state()
            if st.msgs:
                s.remove_msg(rng.randrange(st.first_seq, st.last_seq + 1))
        elif r < 0.9:
            s.purge_ex(f"plgd.d{rng.randrange(devices)}.online", 0, 0)
        elif r < 0.92:
            again = store_factory.reopen(s, clock)
            if again is not None:
                s = again
        st = s.state()
        for f in _FILTERS:
            # a consumer that keeps up (the next sequence) and one that starts over
            for start in (max(st.last_seq - 3, 0), st.first_seq):
                assert _next(s, f, start) == _brute_next(s, f, start), (step, f, start)
        clock.advance(1)
    s.stop()
