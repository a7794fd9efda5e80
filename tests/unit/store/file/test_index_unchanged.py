"""A stop that changed nothing does not rewrite msgs/index.db (IndexFile.mark): the file already
describes the index exactly; any change (a store, a removal, a compaction, a new block) does."""

from __future__ import annotations

import os

import pytest

from natsd.clock import ManualClock
from natsd.store import open_stream_store
from natsd.store.base import StoreConfig
from natsd.store.file.layout import INDEX_FILE, MSGS_DIR

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


def _open(d):
    return open_stream_store(StoreConfig(name="S", storage="file"), ManualClock(), d, block_size=400)


def _ino(d) -> int:
    # (atomic_write replaces the file: a rewrite is a new inode)
    return os.stat(os.path.join(d, MSGS_DIR, INDEX_FILE)).st_ino


def test_a_stop_after_reads_only_keeps_index_db(tmp_path):
    d = str(tmp_path / "S")
    s = _open(d)
    for i in range(30):
        s.store_msg(f"s.{i % 4}", None, b"m-%d" % i)
    s.stop()
    ino = _ino(d)
    s = _open(d)
    assert s.load_msg(7).msg == b"m-6" and s.state().msgs == 30
    s.stop()
    assert _ino(d) == ino  # nothing changed: not rewritten

    for change in (lambda s: s.store_msg("s.new", None, b"x"), lambda s: s.remove_msg(3), lambda s: s.erase_msg(4)):
        s = _open(d)
        before = s.state()
        change(s)
        after = s.state()
        assert after != before
        s.stop()
        assert _ino(d) != ino  # changed: rewritten
        ino = _ino(d)
        s = _open(d)
        assert s.state() == after
        s.stop()
        assert _ino(d) == ino


def test_an_index_replayed_at_start_is_rewritten(tmp_path):
    """Records appended after index.db (a kill -9): the start replays them, the stop writes."""
    d = str(tmp_path / "S")
    s = _open(d)
    s.store_msg("a", None, b"1")
    s.stop()
    ino = _ino(d)
    s = _open(d)
    s.store_msg("a", None, b"2")
    s.flush()
    s._abandon()
    s = _open(d)
    assert s.state().msgs == 2
    s.stop()
    assert _ino(d) != ino
