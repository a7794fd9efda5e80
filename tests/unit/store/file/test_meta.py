"""meta.inf / meta.sum: written atomically, and not rewritten when they already hold the bytes."""

from __future__ import annotations

import json
import os

import pytest

from natsd.store.base import CorruptState
from natsd.store.file.consumer_state import copy_state
from natsd.store.file.meta import read_meta, write_meta
from tests.unit.store.file.test_consumer_state import sample


def _ids(d) -> tuple:
    return tuple(os.stat(os.path.join(d, f)).st_ino for f in ("meta.inf", "meta.sum"))


def test_unchanged_meta_is_not_rewritten(tmp_path):
    # A restart opens every stream with the meta it just read (issue 31): no rename, no fsync.
    write_meta(str(tmp_path), {"name": "S", "subjects": ["a"]}, "S")
    before = _ids(tmp_path)
    write_meta(str(tmp_path), {"name": "S", "subjects": ["a"]}, "S")
    assert _ids(tmp_path) == before
    assert read_meta(str(tmp_path), "S") == {"name": "S", "subjects": ["a"]}


def test_changed_meta_is_replaced(tmp_path):
    write_meta(str(tmp_path), {"name": "S", "subjects": ["a"]}, "S")
    before = _ids(tmp_path)
    write_meta(str(tmp_path), {"name": "S", "subjects": ["a", "b"]}, "S")
    assert _ids(tmp_path) != before
    assert read_meta(str(tmp_path), "S")["subjects"] == ["a", "b"]


@pytest.mark.parametrize("damage", ["sum", "longer", "missing_sum"])
def test_damaged_files_are_rewritten(tmp_path, damage):
    meta = {"name": "S", "subjects": ["a"]}
    write_meta(str(tmp_path), meta, "S")
    inf, sm = tmp_path / "meta.inf", tmp_path / "meta.sum"
    if damage == "sum":
        sm.write_bytes(b"0" * 16)
    elif damage == "longer":
        inf.write_bytes(json.dumps(meta, separators=(",", ":")).encode() + b" ")
    else:
        sm.unlink()
    with pytest.raises(CorruptState):
        read_meta(str(tmp_path), "S")
    write_meta(str(tmp_path), meta, "S")
    assert read_meta(str(tmp_path), "S") == meta


def test_copy_state_shares_nothing_mutable():
    st = sample()
    cp = copy_state(st)
    assert cp == st
    cp.pending[131].timestamp += 1
    cp.delivered.stream_seq += 1
    cp.redelivered[131] = 9
    assert st == sample()


@pytest.mark.parametrize("sync_always", [False, True])
def test_stream_create_fsyncs_its_meta_only_when_syncing_always(tmp_path, monkeypatch, sync_always):
    # As nats-server (no fsync at create unless sync always, issue 31); a kill -9 still finds it.
    from natsd.clock import ManualClock
    from natsd.store import open_stream_store
    from natsd.store.base import StoreConfig

    fsyncs: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real(fd)))
    d = str(tmp_path / "S")
    s = open_stream_store(StoreConfig(storage="file", name="S"), ManualClock(), d, sync_always=sync_always)
    assert (len(fsyncs) >= 3) == sync_always
    assert read_meta(d, "S")["name"] == "S"
    s._abandon()  # kill -9
    s = open_stream_store(StoreConfig(storage="file", name="S"), ManualClock(), d)
    assert s.config.name == "S"
    s.stop()
