"""The heap trim after a large index is built (natsd.store.memtrim, issue 31)."""

from __future__ import annotations

import platform

import pytest

from natsd.clock import ManualClock
from natsd.store import memtrim
from natsd.store.base import StoreConfig
from natsd.store.file.stream_store import FileStreamStore

pytestmark = pytest.mark.unit


def test_only_a_large_index_is_trimmed_for():
    assert memtrim.after_large_index(memtrim.TRIM_MIN_ITEMS - 1) is False
    done = memtrim.after_large_index(memtrim.TRIM_MIN_ITEMS)
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert done is True


def test_a_recovery_reports_its_index_size(tmp_path, monkeypatch):
    seen: list[int] = []
    monkeypatch.setattr(memtrim, "after_large_index", seen.append)
    clock = ManualClock()
    st = FileStreamStore(StoreConfig(name="T"), clock, str(tmp_path))
    st.store_many([f"t.{i}" for i in range(50)], [b"x"] * 50)
    st.store_msg("t.0", None, b"y")
    st.stop()
    st = FileStreamStore(StoreConfig(name="T"), clock, str(tmp_path))
    assert seen[-1] == 50 + 51  # subject slots + sequences
    st.stop()


class _Last:
    def __init__(self) -> None:
        self.seq = 0

    def __call__(self) -> int:
        return self.seq


def _counting(monkeypatch) -> list[int]:
    done: list[int] = []
    monkeypatch.setattr(memtrim, "trim", lambda: done.append(1) or True)
    return done


def test_a_burst_of_writes_is_trimmed_for_once_it_pauses(monkeypatch):
    done = _counting(monkeypatch)
    clock, last = ManualClock(), _Last()
    heap = memtrim.AfterWrites(clock, last)
    last.seq = memtrim.TRIM_MIN_ITEMS - 1
    heap.grew()
    assert clock.pending_timers() == 0  # a small growth arms nothing
    last.seq = memtrim.TRIM_MIN_ITEMS
    heap.grew()
    heap.grew()  # (one timer however often it is told)
    assert clock.pending_timers() == 1
    for _ in range(3):  # writes keep coming: it waits for a pause
        last.seq += 1000
        clock.advance(memtrim.QUIET_NS)
    assert done == []
    clock.advance(memtrim.QUIET_NS)
    assert done == [1] and clock.pending_timers() == 0
    heap.grew()  # counted again from the trim
    assert clock.pending_timers() == 0


def test_a_store_written_without_pause_is_trimmed_all_the_same(monkeypatch):
    done = _counting(monkeypatch)
    clock, last = ManualClock(), _Last()
    heap = memtrim.AfterWrites(clock, last)
    last.seq = memtrim.TRIM_MIN_ITEMS
    heap.grew()
    for _ in range(memtrim.MAX_WAITS):
        last.seq += 1
        clock.advance(memtrim.QUIET_NS)
    assert done == []
    last.seq += 1
    clock.advance(memtrim.QUIET_NS)
    assert done == [1]


def test_a_file_store_trims_after_its_writes_and_not_after_it_stopped(tmp_path, monkeypatch):
    done = _counting(monkeypatch)
    monkeypatch.setattr(memtrim, "TRIM_MIN_ITEMS", 200)
    clock = ManualClock()
    st = FileStreamStore(StoreConfig(name="T"), clock, str(tmp_path), block_size=4096)
    for _ in range(3):
        st.store_many(["t.x"] * 100, [b"y" * 64] * 100)
    st.flush()
    clock.advance(memtrim.QUIET_NS)  # (the last batch came after the timer was armed: it waits once)
    clock.advance(memtrim.QUIET_NS)
    assert done == [1]
    st.store_many(["t.x"] * 300, [b"y" * 64] * 100 * 3)
    st.stop()
    clock.advance(10 * memtrim.QUIET_NS)
    assert done == [1] and clock.pending_timers() == 0
