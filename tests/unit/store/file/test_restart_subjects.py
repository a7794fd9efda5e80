"""A file stream's subjects after a restart from index.db (issue 31): the subject -> id table is not
built at recovery (``natsd.store.subjtab``, ADR 0013), and every lookup, store, removal, listing and replay
after a crash answers as before; index.db tells free subject slots from the names' bytes. The
tests look at behaviour, not at the structure that stands for the dict (the per-subject layout's
own, issue 31 item 3)."""

from __future__ import annotations

import random

import pytest

from natsd.clock import ManualClock
from natsd.store.base import MsgNotFound, StoreConfig
from natsd.store.file.index import decode_index, encode_index
from natsd.store.file.layout import INDEX_FILE, MSGS_DIR
from natsd.store.file.stream_store import FileStreamStore

pytestmark = pytest.mark.unit

N = 500


def _open(path, clock, per_subject: int = 1) -> FileStreamStore:
    cfg = StoreConfig(name="KV", subjects=["kv.>"], max_msgs_per_subject=per_subject)
    return FileStreamStore(cfg, clock, str(path))


def _filled(path, clock, n: int = N) -> None:
    st = _open(path, clock)
    for i in range(n):
        st.store_msg(f"kv.key{i}", None, b"v%d" % i)
    st.stop()


@pytest.fixture
def clock():
    return ManualClock()


def test_a_restart_answers_a_lookup_and_the_count_without_building_the_dict(tmp_path, clock):
    _filled(tmp_path, clock)
    st = _open(tmp_path, clock)
    try:
        assert not isinstance(st._sid_of, dict)  # (no dict of 500 names built by the recovery)
        assert st.state().num_subjects == N
        assert st.load_last_msg(f"kv.key{N - 1}").msg == b"v%d" % (N - 1)
        assert st.last_seq_of("kv.key7") == 8
        with pytest.raises(MsgNotFound):
            st.load_last_msg("kv.nope")
        assert not isinstance(st._sid_of, dict)  # (a few lookups: still none)
    finally:
        st.stop()


def test_a_new_subject_after_a_restart_is_indexed(tmp_path, clock):
    _filled(tmp_path, clock)
    st = _open(tmp_path, clock)
    try:
        seq, _ = st.store_msg("kv.new", None, b"n")
        assert st.load_last_msg("kv.new").seq == seq
        st.store_msg("kv.key1", None, b"again")  # (per-subject limit 1: replaces the old one)
        assert st.load_last_msg("kv.key1").msg == b"again"
        assert st.state().num_subjects == N + 1 and st.state().msgs == N + 1
    finally:
        st.stop()
    st = _open(tmp_path, clock)
    try:
        assert st.load_last_msg("kv.key1").msg == b"again" and st.load_last_msg("kv.new").msg == b"n"
    finally:
        st.stop()


def test_freed_slots_survive_a_restart_and_are_reused(tmp_path, clock):
    _filled(tmp_path, clock)
    st = _open(tmp_path, clock)
    st.purge_ex("kv.key0", 0, 0)
    st.purge_ex("kv.key250", 0, 0)
    st.purge_ex(f"kv.key{N - 1}", 0, 0)
    st.stop()
    st = _open(tmp_path, clock)
    try:
        assert st.state().num_subjects == N - 3
        assert sorted(st._free_sids) == [0, 250, N - 1]
        assert st.last_seq_of("kv.key0") == 0 and st.last_seq_of("kv.key1") == 2
        st.store_msg("kv.fresh", None, b"f")  # takes a freed slot
        assert st._snames.count(None) == 2 and "kv.fresh" in st._snames
        assert st.last_seq_of("kv.fresh") and st.last_seq_of("kv.key250") == 0
        assert st.subjects_totals("kv.fresh") == {"kv.fresh": 1}
    finally:
        st.stop()


def test_a_purge_after_a_restart_empties_the_map(tmp_path, clock):
    _filled(tmp_path, clock)
    st = _open(tmp_path, clock)
    try:
        st.purge()
        assert st.state().num_subjects == 0 and st.last_seq_of("kv.key1") == 0
        st.store_msg("kv.key1", None, b"x")
        assert st.load_last_msg("kv.key1").msg == b"x" and st.state().num_subjects == 1
    finally:
        st.stop()


def test_listing_subjects_after_a_restart(tmp_path, clock):
    _filled(tmp_path, clock, 50)
    st = _open(tmp_path, clock)
    try:
        assert st.subjects_totals(">") == {f"kv.key{i}": 1 for i in range(50)}
        assert set(st.subjects_state("kv.*")) == {f"kv.key{i}" for i in range(50)}
        assert st.subjects_state("kv.key7")["kv.key7"].msgs == 1
        assert st.num_pending(1, ">", True) == 50
    finally:
        st.stop()


def test_a_tail_replayed_after_a_crash_is_indexed(tmp_path, clock):
    # index.db from a clean stop, then more records appended and the process killed: the replay
    # looks subjects up through the stand-in
    _filled(tmp_path, clock, 100)
    st = _open(tmp_path, clock)
    for i in range(100, 180):
        st.store_msg(f"kv.key{i % 120}", None, b"w%d" % i)
    st.flush()
    st._abandon()
    st = _open(tmp_path, clock)
    try:
        assert st.state().msgs == 120 and st.state().num_subjects == 120
        assert st.load_last_msg("kv.key5").msg == b"w125" and st.load_last_msg("kv.key119").msg == b"w119"
        assert st.load_last_msg("kv.key99").msg == b"v99"
    finally:
        st.stop()


def test_random_operations_after_a_restart_match_a_model(tmp_path, clock):
    rng = random.Random(31)
    st = _open(tmp_path, clock, per_subject=2)
    model: dict[str, list[bytes]] = {}

    def put(name: str) -> None:
        data = b"%d" % rng.randrange(10**9)
        st.store_msg(name, None, data)
        model[name] = (model.get(name, []) + [data])[-2:]

    for i in range(300):
        put(f"kv.k{rng.randrange(200)}")
    for restart in range(4):
        st.stop()
        st = _open(tmp_path, clock, per_subject=2)
        for _ in range(60):
            op = rng.randrange(4)
            name = f"kv.k{rng.randrange(260)}"
            if op == 0:
                put(name)
            elif op == 1 and name in model:
                st.purge_ex(name, 0, 0)
                del model[name]
            else:
                got = st.last_seq_of(name)
                assert (got != 0) == (name in model), (restart, name)
                if got:
                    assert st.load_last_msg(name).msg == model[name][-1]
        assert st.state().num_subjects == len(model)
        assert st.subjects_totals(">") == {k: len(v) for k, v in model.items()}
    st.stop()


@pytest.mark.parametrize(
    "free",
    [(), (0,), (3,), (5,), (0, 1), (4, 5), (0, 5), (2, 3), (0, 1, 2, 3, 4, 5)],
)
def test_index_db_tells_free_slots_from_the_names_bytes(tmp_path, clock, free):
    st = _open(tmp_path, clock)
    names = [f"kv.s{i}" for i in range(6)]
    for n in names:
        st.store_msg(n, None, b"x")
    for i in free:
        st.purge_ex(names[i], 0, 0)
    st.stop()
    with open(tmp_path / MSGS_DIR / INDEX_FILE, "rb") as f:
        snap = decode_index(f.read())
    assert snap.free_slots == bool(free)
    assert [i for i, n in enumerate(snap.snames) if n is None] == list(free)
    assert decode_index(encode_index(snap)).snames == snap.snames
