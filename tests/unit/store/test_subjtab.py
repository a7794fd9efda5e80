"""The packed subject -> slot id table of the sequence index (issue 31 item 3: memory per subject).

Checked as a map against a plain dict through random adds, removes and slot reuse (removal by
backward shift must keep every remaining subject findable, wrap-around included), and by what it
and the index cost per subject, measured with tracemalloc: order-of-magnitude bounds that a dict
of ``int`` objects (the layout before it) exceeds, not timings.
"""

from __future__ import annotations

import gc
import random
import sys
import tracemalloc
from array import array

import pytest

from natsd.clock import ManualClock
from natsd.store.base import StoreConfig
from natsd.store.file.stream_store import FileStreamStore
from natsd.store.memory import MemoryStreamStore
from natsd.store import subjtab
from natsd.store.subjtab import HOT_MAX, MAX_PROBE, SubjectTable

pytestmark = pytest.mark.unit


def _check_same(tab: SubjectTable, model: dict[str, int], absent: list[str]) -> None:
    assert len(tab) == len(model)
    for name, sid in model.items():
        assert tab.get(name) == sid
        assert name in tab
    for name in absent:
        assert tab.get(name) is None
        assert name not in tab
    assert sorted(tab.values()) == sorted(model.values())
    assert dict(tab.items()) == model


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_table_behaves_as_a_dict_through_adds_removes_and_reuse(seed: int) -> None:
    rng = random.Random(seed)
    names: list = []
    tab = SubjectTable(names)
    model: dict[str, int] = {}
    free: list[int] = []
    gone: list[str] = []
    for step in range(6000):
        if model and rng.random() < 0.45:
            name = rng.choice(list(model))
            sid = model.pop(name)
            tab.remove(name, sid)
            names[sid] = None
            free.append(sid)
            gone.append(name)
        else:
            name = f"k.{rng.randrange(1 << 30)}.{step}"
            if free:
                sid = free.pop()
                names[sid] = name
            else:
                sid = len(names)
                names.append(name)
            tab.add(name, sid)
            model[name] = sid
        if step % 500 == 0:
            _check_same(tab, model, gone[-50:])
    _check_same(tab, model, gone)
    # Rebuilt from the names (a restart's load), free slots included.
    again = SubjectTable(list(names))
    _check_same(again, model, gone)


@pytest.mark.timeout(30)
def test_small_table_wraps_around_and_shifts_back_across_the_end() -> None:
    # Eight cells: every run of collisions wraps, and removals shift entries across the end.
    names: list = []
    tab = SubjectTable(names)
    model: dict[str, int] = {}
    for round_ in range(200):
        for k in range(4):
            name = f"w.{round_}.{k}"
            names.append(name)
            tab.add(name, len(names) - 1)
            model[name] = len(names) - 1
        for name in list(model)[:4]:
            sid = model.pop(name)
            tab.remove(name, sid)
            names[sid] = None
        _check_same(tab, model, [])
        assert tab.nbytes() <= 4 * 16


@pytest.mark.timeout(30)
def test_hot_cache_is_bounded_and_forgets_a_removed_subject() -> None:
    names = [f"h.{i}" for i in range(3 * HOT_MAX)]
    tab = SubjectTable(names)
    for i, name in enumerate(names):
        assert tab.get(name) == i
        assert len(tab.hot) <= HOT_MAX
    tab.get("h.5")
    assert "h.5" in tab.hot
    tab.remove("h.5", 5)
    names[5] = None
    assert "h.5" not in tab.hot
    assert tab.get("h.5") is None
    # The slot reused by another subject: found under the new name only.
    names[5] = "other"
    tab.add("other", 5)
    assert tab.get("other") == 5 and tab.get("h.5") is None


@pytest.mark.timeout(30)
def test_table_costs_at_most_sixteen_bytes_per_subject() -> None:
    names = [f"dev.{i}.temp" for i in range(100_000)]
    tab = SubjectTable(names)
    assert tab.nbytes() == 0  # (many names: indexed when lookups make it pay)
    names.append("new")
    tab.add("new", len(names) - 1)  # (anything but a lookup builds it)
    # At most half full, at least a quarter (one doubling): 8 to 16 bytes of u32 cells per subject.
    assert 8 * len(names) <= tab.nbytes() <= 16 * len(names)


def _index_bytes_per_subject(build) -> tuple[float, object]:
    """tracemalloc bytes per subject of what ``build()`` keeps (a store of N subjects, one
    message each), the subjects' names themselves left out: what the index spends per subject."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        store, n = build()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    names = sum(sys.getsizeof(x) for x in store._snames if x is not None)
    return (grown - names) / n, store


N_SUBJECTS = 100_000


@pytest.mark.timeout(120)
def test_file_store_reopened_from_index_db_spends_under_80_bytes_per_subject(tmp_path) -> None:
    # Beyond the names: the names list (8), the table (~10), the per-subject columns (25), the
    # per-message columns (14): ~60 bytes. A dict[str, int] with an int object per slot (the
    # layout before, issue 31) made it ~120.
    cfg = StoreConfig(name="S", subjects=[">"])
    st = FileStreamStore(cfg, ManualClock(), str(tmp_path))
    for i in range(N_SUBJECTS):
        st.store_msg(f"dev.{i}.temp", None, b"")
    st.stop()
    del st

    def build():
        return FileStreamStore(cfg, ManualClock(), str(tmp_path)), N_SUBJECTS

    per, st = _index_bytes_per_subject(build)
    try:
        # (the file store's blocks and caches are a fixed part: a few hundred KB at most)
        assert per < 80, per
        assert st.state().num_subjects == N_SUBJECTS
        assert st.load_last_msg("dev.99999.temp").seq == N_SUBJECTS
        assert st.last_seq_of("dev.4242.temp") == 4243
    finally:
        st.stop()


@pytest.mark.timeout(60)
def test_colliding_subjects_go_outside_the_cells_and_stay_found(monkeypatch) -> None:
    # A CRC is not keyed: crafted subjects can share a cell. Every one of them here does.
    monkeypatch.setattr(subjtab, "crc32", lambda b: 12345)
    names: list = []
    tab = SubjectTable(names)
    for i in range(3 * MAX_PROBE):
        names.append(f"c.{i}")
        tab.add(names[-1], i)
    assert len(tab.over) >= len(names) - MAX_PROBE
    assert all(tab.get(n) == i for i, n in enumerate(names))
    assert tab.get("c.absent") is None
    # Removed from the cells (a tombstone) and from outside them; adds reuse the tombstones.
    for sid in (0, 5, 2 * MAX_PROBE):
        tab.remove(names[sid], sid)
        names[sid] = None
    for sid in (0, 5, 2 * MAX_PROBE):
        names[sid] = f"n.{sid}"
        tab.add(names[sid], sid)
    assert all(tab.get(n) == i for i, n in enumerate(names))
    # What index.db keeps is adopted as it is by a table over the same names.
    again = SubjectTable([])
    again.load(list(names), array("I", tab.cells()), tab.over_sids())
    assert again.cells() is not tab.cells() and again.over == tab.over
    assert all(again.get(n) == i for i, n in enumerate(names))


@pytest.mark.timeout(60)
def test_churn_of_removed_subjects_does_not_grow_the_table() -> None:
    # KV keys deleted and new ones put: the tombstones are dropped by rebuilds at the same size.
    names: list = []
    tab = SubjectTable(names)
    for i in range(1000):
        names.append(f"k.{i}")
        tab.add(names[-1], i)
    size = tab.nbytes()
    for step in range(20_000):
        sid = step % 1000
        tab.remove(names[sid], sid)
        names[sid] = f"k.{1000 + step}"
        tab.add(names[sid], sid)
    assert tab.nbytes() <= 2 * size
    assert all(tab.get(n) == i for i, n in enumerate(names))
    assert len(tab) == 1000


@pytest.mark.timeout(60)
def test_restart_adopts_the_table_from_index_db(tmp_path, monkeypatch) -> None:
    cfg = StoreConfig(name="S", subjects=[">"])
    st = FileStreamStore(cfg, ManualClock(), str(tmp_path))
    for i in range(5000):
        st.store_msg(f"dev.{i}.temp", None, b"")
    st.purge_ex("dev.7.temp", 0, 0)  # a freed slot: a tombstone in the cells
    st.stop()
    built: list[int] = []
    real = SubjectTable._build

    def spy(self, size):
        built.append(len(self.names))
        real(self, size)

    monkeypatch.setattr(SubjectTable, "_build", spy)
    st = FileStreamStore(cfg, ManualClock(), str(tmp_path))
    try:
        assert built and max(built) == 0  # (the empty store's tables; none from the 5,000 names)
        assert st.last_seq_of("dev.4999.temp") == 5000
        assert st.last_seq_of("dev.7.temp") == 0
        assert st.state().num_subjects == 4999
        st.store_msg("dev.7.temp", None, b"again")  # (reuses the freed slot)
        assert st.load_last_msg("dev.7.temp").msg == b"again"
    finally:
        st.stop()


@pytest.mark.timeout(60)
def test_many_names_are_scanned_until_lookups_make_the_table_pay() -> None:
    names = [f"k.{i}" for i in range(10_000)]
    tab = SubjectTable(names)
    assert tab.cells() is None and len(tab) == 10_000
    assert tab.get("k.9999") == 9999 and tab.get("k.absent") is None
    assert tab.cells() is None  # (two scans: still no table)
    for i in range(0, 10_000, 50):  # (scans of ~half the names each: the budget runs out)
        assert tab.get(f"k.{5000 + i // 2}") == 5000 + i // 2
    assert tab.cells() is not None
    assert all(tab.get(n) == i for i, n in enumerate(names))


@pytest.mark.timeout(60)
def test_store_many_over_more_subjects_than_the_hot_cache_holds() -> None:
    # store_many's batch path asks the hot dict for a whole batch, the table for what it misses.
    st = MemoryStreamStore(StoreConfig(name="S", subjects=[">"], storage="memory"), ManualClock())
    subjects = [f"m.{i}" for i in range(2 * HOT_MAX)]
    for s in subjects:
        st.store_msg(s, None, b"first")
    assert st._sid_of.sids(subjects) == list(range(len(subjects)))
    st.store_many(subjects, [b"again"] * len(subjects))
    totals = st.subjects_totals(">")
    assert len(totals) == len(subjects) and set(totals.values()) == {2}
    assert st.load_last_msg(subjects[-1]).msg == b"again"


def test_empty_and_tombstone_counts_match_array_count():
    from natsd.store.subjtab import empty_and_tombstones

    rng = random.Random(7)
    # (values sharing bytes with 0 and 0xffffffff: one lane alone must not decide)
    tricky = [0, 0xFFFFFFFF, 0xFF, 0xFF00, 0xFF000000, 0xFFFFFF00, 0x00FFFFFF, 1 << 24, 1, 0xFFFEFFFF]
    for size in (8, 64, 1 << 12):
        cells = array("I", (rng.choice(tricky + [rng.randrange(1 << 32)]) for _ in range(size)))
        assert empty_and_tombstones(cells) == (cells.count(0), cells.count(0xFFFFFFFF))
    assert empty_and_tombstones(array("I", bytes(32))) == (8, 0)
