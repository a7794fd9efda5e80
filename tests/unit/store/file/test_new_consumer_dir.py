"""A consumer store whose directory the create makes (issue 31): meta.inf and meta.sum written in
place (no ``*.tmp`` and rename), no key, meta or state file looked for; a directory that is already
there (a restart, a create over what a crash left) takes the usual path."""

from __future__ import annotations

import os

import pytest

from natsd.clock import ManualClock
from natsd.store.base import StoreConfig
from natsd.store.file import FileStreamStore
from natsd.store.file.meta import read_meta
from tests.unit.store.file.test_new_stream_dir import _calls

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

META = {"name": "D", "config": {"durable_name": "D", "ack_policy": "explicit"}}


def test_a_new_consumer_is_written_without_looking_or_renaming(tmp_path, monkeypatch):
    d = str(tmp_path / "S")
    st = FileStreamStore(StoreConfig(name="S", subjects=["s.>"]), ManualClock(), d)
    try:
        seen = _calls(monkeypatch)
        cs = st.consumer_store("D", META)  # (the stream's first: obs/ is made too)
        monkeypatch.undo()
        obs = os.path.join(d, "obs")
        assert [f for n, f in seen if n == "mkdir"] == ["D", "obs", "D"]  # (obs/ missing: makedirs)
        assert sorted(f for n, f in seen if n == "open") == ["meta.inf", "meta.sum", "obs.idx"]
        assert not [c for c in seen if c[0] == "replace"]
        assert read_meta(os.path.join(obs, "D"), "S")["name"] == "D"
        assert cs.state().delivered.stream_seq == 0 and not cs.state().pending
        seen = _calls(monkeypatch)
        st.consumer_store("E", {**META, "name": "E"})
        monkeypatch.undo()
        assert [f for n, f in seen if n == "mkdir"] == ["E"]
        assert sorted(f for n, f in seen if n == "open") == ["meta.inf", "meta.sum", "obs.idx"]
    finally:
        st.stop()
    again = FileStreamStore(StoreConfig(name="S", subjects=["s.>"]), ManualClock(), d)
    try:
        assert again.consumer_names() == ["D", "E"]
        assert again.consumer_store("D", None).meta == META
    finally:
        again.stop()


def test_an_existing_consumer_directory_takes_the_usual_path(tmp_path, monkeypatch):
    d = tmp_path / "S"
    st = FileStreamStore(StoreConfig(name="S", subjects=["s.>"]), ManualClock(), str(d))
    try:
        c = d / "obs" / "D"
        c.mkdir(parents=True)
        (c / "meta.inf").write_bytes(b'{"stale": true}')  # (a create cut before meta.sum)
        seen = _calls(monkeypatch)
        st.consumer_store("D", META)
        monkeypatch.undo()
        assert ("replace", "meta.inf.tmp") in seen and ("replace", "meta.sum.tmp") in seen
        assert ("open", "o.dat") in seen  # (its state is looked for)
        assert read_meta(str(c), "S") == META
    finally:
        st.stop()
