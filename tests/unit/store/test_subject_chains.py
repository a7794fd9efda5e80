"""The per-subject chains (``_nxt``) that make per-subject limits O(1), checked against brute
force through every kind of removal, truncate and restart (index.db, tail replay, full scan)."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import pytest

from natsd.clock import ManualClock
from natsd.store.base import DiscardPolicy, MaxBytes, MaxMsgs, MaxMsgsPerSubject, StoreConfig
from natsd.subjects.tokens import matcher, subject_matches

_SUBJECTS = ["c.a", "c.b", "c.c", "c.d.x"]


def _brute(store) -> dict[str, tuple[int, int, int]]:
    out: dict[str, list[int]] = {}
    for m in store.iter_msgs(0, store.state().last_seq):
        out.setdefault(m.subject, []).append(m.seq)
    return {s: (len(v), v[0], v[-1]) for s, v in out.items()}


def _check(store) -> None:
    got = {s: (st.msgs, st.first, st.last) for s, st in store.subjects_state(">").items()}
    assert got == _brute(store)


@pytest.mark.parametrize("seed", range(4))
def test_subject_first_follows_chains(store_factory, seed):
    rng = random.Random(seed)
    clock = ManualClock()
    cfg = StoreConfig(
        name="CHAINS", max_msgs_per_subject=3, discard=DiscardPolicy.NEW if seed % 2 else DiscardPolicy.OLD
    )
    s = store_factory.make(cfg, clock)
    for step in range(300):
        r = rng.random()
        if r < 0.6:
            s.store_msg(rng.choice(_SUBJECTS), None, b"x" * rng.randrange(4))
        elif r < 0.75:
            st = s.state()
            if st.msgs:
                s.remove_msg(rng.randrange(st.first_seq, st.last_seq + 1))
        elif r < 0.8:
            st = s.state()
            s.truncate(max(st.last_seq - rng.randrange(4), st.first_seq - 1))
        elif r < 0.85:
            s.skip_msg()
        elif r < 0.9:
            s.purge_ex(rng.choice(_SUBJECTS), 0, rng.randrange(2))
        elif r < 0.93:
            again = store_factory.reopen(s, clock)
            if again is not None:
                s = again
        _check(s)
        clock.advance(1)
    s.stop()


def test_kv_history_one_replaces_in_place(store_factory):
    """max_msgs_per_subject=1 (a KV bucket): every put removes the previous revision."""
    clock = ManualClock()
    s = store_factory.make(StoreConfig(name="KV", max_msgs_per_subject=1, discard=DiscardPolicy.NEW), clock)
    for rnd in range(3):
        for k in range(50):
            s.store_msg(f"$KV.b.k{k}", None, b"%d" % rnd)
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq, st.num_subjects) == (50, 101, 150, 50)
    _check(s)
    assert s.load_last_msg("$KV.b.k7").msg == b"2"
    s.stop()


def test_kv_discard_new_refuses_once_a_limit_applies(store_factory):
    """A KV bucket (discard new, a per-subject limit alone) never refuses, so the store skips
    the discard-new check per put; a config update that adds max_msgs, max_bytes or
    discard_new_per_subject brings the refusals back at once."""
    clock = ManualClock()
    s = store_factory.make(StoreConfig(name="KV", max_msgs_per_subject=1, discard=DiscardPolicy.NEW), clock)
    for k in range(4):
        s.store_msg(f"$KV.b.k{k}", None, b"v")
    s.store_msg("$KV.b.k0", None, b"w")  # replaces: no refusal
    s.update_config(replace(s.config, max_msgs=4))
    with pytest.raises(MaxMsgs):
        s.store_msg("$KV.b.k9", None, b"v")
    s.store_msg("$KV.b.k1", None, b"w")  # a subject at its limit: replacing counts as room
    s.update_config(replace(s.config, max_msgs=-1, max_bytes=s.state().bytes))
    with pytest.raises(MaxBytes):
        s.store_msg("$KV.b.k9", None, b"v")
    s.update_config(replace(s.config, max_bytes=-1, discard_new_per_subject=True))
    with pytest.raises(MaxMsgsPerSubject):
        s.store_msg("$KV.b.k2", None, b"w")
    s.update_config(replace(s.config, discard_new_per_subject=False))
    s.store_msg("$KV.b.k2", None, b"w")
    st = s.state()
    assert (st.msgs, st.last_seq) == (4, 7)
    _check(s)
    s.stop()


def test_matcher_agrees_with_subject_matches():
    toks = ["a", "b", "*", ">"]
    literals = [".".join(p) for n in range(1, 4) for p in itertools.product("abc", repeat=n)]
    patterns = [".".join(p) for n in range(1, 4) for p in itertools.product(toks, repeat=n) if ">" not in p[:-1]]
    for p in patterns:
        m = matcher(p)
        for lit in literals:
            assert m(lit) == subject_matches(p, lit), (p, lit)
