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
