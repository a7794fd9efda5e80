"""A clean stop of many streams syncs the filesystem once (natsd.store.stopsync, issue 31):
inside ``one_sync_for`` the stores make no fsync of their own, the filesystem is synced once at
the end, and every store restarts from its index.db exactly as after an ordinary stop."""

from __future__ import annotations

import os

import pytest

from natsd.clock import ManualClock
from natsd.store import open_stream_store
from natsd.store.base import StoreConfig
from natsd.store import stopsync
from natsd.store.file import block
from natsd.store.file.layout import INDEX_FILE, MSGS_DIR

pytestmark = pytest.mark.timeout(30)


def _fill(store, n: int) -> None:
    for i in range(1, n + 1):
        store.store_msg(f"s.{i % 3}", None, b"payload-%04d" % i)
    store.flush()


def test_stops_in_one_sync_block_skip_fsyncs_and_sync_once(tmp_path, monkeypatch):
    clock = ManualClock()
    fsyncs: list[int] = []
    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(block, "_fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd)))
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd)))
    real_sync = stopsync.sync_filesystem
    monkeypatch.setattr(stopsync, "sync_filesystem", lambda d: (synced.append(d), real_sync(d)))
    dirs = [str(tmp_path / f"S{i}") for i in range(5)]
    stores = [open_stream_store(StoreConfig(storage="file", name=f"S{i}"), clock, d) for i, d in enumerate(dirs)]
    states = []
    for s in stores:
        _fill(s, 20)
        s.remove_msg(3)
        states.append((s.state(deleted_details=True), s.subjects_state(">")))
    fsyncs.clear()
    with stopsync.one_sync_for(str(tmp_path)):
        assert stopsync.deferred()
        for s in stores:
            s.stop()
        assert fsyncs == [] and synced == []
    assert synced == [str(tmp_path)] and not stopsync.deferred()
    for i, d in enumerate(dirs):
        assert os.path.exists(os.path.join(d, MSGS_DIR, INDEX_FILE))
        s = open_stream_store(StoreConfig(storage="file", name=f"S{i}"), clock, d)
        assert (s.state(deleted_details=True), s.subjects_state(">")) == states[i]
        s.stop()


def test_a_stop_outside_the_block_still_fsyncs(tmp_path, monkeypatch):
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(block, "_fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd)))
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd)))
    s = open_stream_store(StoreConfig(storage="file", name="S"), ManualClock(), str(tmp_path / "S"))
    _fill(s, 5)
    fsyncs.clear()
    s.stop()
    assert len(fsyncs) >= 2  # the block and index.db


def test_sync_filesystem_of_a_missing_directory_falls_back_to_sync(tmp_path, monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(os, "sync", lambda: calls.append(1))
    stopsync.sync_filesystem(str(tmp_path / "missing"))
    assert calls == [1]
    stopsync.sync_filesystem(str(tmp_path))  # syncfs answers (Linux): no whole-system sync
    assert calls == [1]


def test_head_start_for_many_streams_syncs_early_and_still_last(tmp_path, monkeypatch):
    """With many streams stopping, a thread syncs the filesystem as the block opens; the sync at
    the end still runs after it and after every write made inside the block."""
    events: list[str] = []
    monkeypatch.setattr(stopsync, "sync_filesystem", lambda d: events.append("sync " + d))
    with stopsync.one_sync_for(str(tmp_path), streams=stopsync.HEAD_START_STREAMS):
        assert stopsync.deferred()
        events.append("write")
    # (the head start's sync may run before or after the write; the last sync is after both)
    assert sorted(events[:2]) == sorted([f"sync {tmp_path}", "write"]) and events[2:] == [f"sync {tmp_path}"]
    events.clear()
    with stopsync.one_sync_for(str(tmp_path), streams=stopsync.HEAD_START_STREAMS - 1):
        events.append("write")
    assert events == ["write", f"sync {tmp_path}"]  # few streams: no head start
