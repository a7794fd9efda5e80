"""The bytes a file store writes for a fixed script of operations (appends with headers and TTLs,
turn flushes, a removal, an erase, skips, a run, a per-subject purge, a compaction, a truncation,
sync, stop, reopen) hash to recorded values: a change to the store's code that changes its files
fails here. Change the hashes only with a deliberate format change (docs/adr/0005, CHANGELOG)."""

from __future__ import annotations

import hashlib
import os

import pytest

from natsd.clock import ManualClock
from natsd.store.base import StoreConfig
from natsd.store.file import stream_store
from natsd.store.file.stream_store import FileStreamStore

pytestmark = pytest.mark.unit

#: File -> sha256 (first 16 hex digits) of its bytes after the script (meta.inf holds the config
#: as JSON and is not the store's format: left out).
EXPECTED = {
    "msgs/5.blk": "c1be869a4cce57a2",
    "msgs/6.blk": "9fb77afb9548423d",
    "msgs/index.db": "9d289b64edeecf5e",  # version 6: 11 bytes per sequence here, the subject table (issue 31)
}


def _script(directory: str) -> None:
    clock = ManualClock()
    cfg = StoreConfig(name="S", subjects=[">"], max_msgs_per_subject=3)
    st = FileStreamStore(cfg, clock, directory, block_size=4096)
    for i in range(300):
        clock.advance(1000)
        hdr = b"NATS/1.0\r\nA: b\r\n\r\n" if i % 5 == 0 else None
        st.store_msg(f"s.{i % 7}", hdr, b"x" * (i % 50), ttl_ns=10**9 if i % 11 == 0 else 0)
        if i % 10 == 9:
            st.flush()
    st.remove_msg(298)
    st.erase_msg(297)
    st.skip_msgs(st.state().last_seq + 1, 5)
    st.store_run("run.a", [b"y" * 10] * 20)
    st.purge_ex("s.1", 0, 1)
    st.compact(50)
    st.truncate(st.state().last_seq - 2)
    st.sync()
    st.stop()
    st = FileStreamStore(cfg, clock, directory, block_size=4096)
    st.store_msg("after", None, b"z")
    st.stop()


def test_the_store_writes_the_recorded_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(stream_store.os, "urandom", lambda n: b"\x5a" * n)  # what erase writes
    _script(str(tmp_path))
    got = {}
    for root, _dirs, files in os.walk(tmp_path):
        for name in files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, tmp_path)
            if rel.startswith("msgs" + os.sep):
                with open(path, "rb") as f:
                    got[rel.replace(os.sep, "/")] = hashlib.sha256(f.read()).hexdigest()[:16]
    assert got == EXPECTED
