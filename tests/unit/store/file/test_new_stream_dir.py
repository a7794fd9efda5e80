"""A stream store whose directory the create makes (issue 31): meta.inf and meta.sum written in
place (no ``*.tmp`` and rename: there is nothing old to keep), no key, meta, index or block
looked for, and nothing else made (``msgs/`` and the first block come with the first write); a
directory that is already there takes the usual path (compared, replaced atomically,
recovered). A crash between the two files leaves a meta.inf without its checksum, which a
restart refuses (the stream is skipped, the others start), and a create of the same name
afterwards works."""

from __future__ import annotations

import os

import pytest

from natsd.clock import ManualClock
from natsd.store.base import CorruptState, StoreConfig
from natsd.store.file import FileStreamStore
from natsd.store.file.meta import read_meta
from tests.helpers.fakeports import JsEnv

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]


def _calls(monkeypatch) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for name in ("open", "listdir", "replace", "stat", "mkdir"):
        real = getattr(os, name)

        def spy(*a, _real=real, _name=name, **k):
            seen.append((_name, os.path.basename(str(a[0])) if a else ""))
            return _real(*a, **k)

        monkeypatch.setattr(os, name, spy)
    return seen


def test_a_new_directory_is_written_without_looking_or_renaming(tmp_path, monkeypatch):
    d = str(tmp_path / "S")
    seen = _calls(monkeypatch)
    st = FileStreamStore(StoreConfig(name="S", subjects=["s.>"]), ManualClock(), d)
    monkeypatch.undo()
    try:
        opened = sorted(f for n, f in seen if n == "open")
        assert opened == ["meta.inf", "meta.sum"]  # (written once each; nothing read)
        assert [f for n, f in seen if n == "mkdir"] == ["S"]  # (no msgs/, no obs/)
        assert not [c for c in seen if c[0] in ("listdir", "replace")]
        assert sorted(os.listdir(d)) == ["meta.inf", "meta.sum"]
        assert read_meta(d, "S")["name"] == "S"
        st.store_msg("s.a", None, b"x")
        assert sorted(os.listdir(d)) == ["meta.inf", "meta.sum"]  # (buffered: the flush writes it)
        st.flush()
        assert sorted(os.listdir(d)) == ["meta.inf", "meta.sum", "msgs"]
        assert os.listdir(os.path.join(d, "msgs")) == ["1.blk"]
    finally:
        st.stop()
    again = FileStreamStore(StoreConfig(name="S", subjects=["s.>"]), ManualClock(), d)
    try:
        assert again.state().msgs == 1
    finally:
        again.stop()


def test_an_existing_directory_takes_the_usual_path(tmp_path, monkeypatch):
    d = tmp_path / "S"
    (d / "msgs").mkdir(parents=True)
    (d / "meta.inf").write_bytes(b'{"stale": true}')  # (a create cut before meta.sum)
    seen = _calls(monkeypatch)
    st = FileStreamStore(StoreConfig(name="S", subjects=["s.>"]), ManualClock(), str(d))
    monkeypatch.undo()
    try:
        assert ("listdir", "msgs") in seen  # recovered
        assert ("replace", "meta.inf.tmp") in seen and ("replace", "meta.sum.tmp") in seen
        assert read_meta(str(d), "S")["name"] == "S"
    finally:
        st.stop()


def test_a_create_cut_between_the_files_is_skipped_and_can_be_made_again(tmp_path):
    env = JsEnv(str(tmp_path))
    try:
        for name in ("A", "B"):
            body = {"name": name, "subjects": [f"{name}.>"], "storage": "file"}
            assert "error" not in env.api(f"$JS.API.STREAM.CREATE.{name}", body)
    finally:
        env.stop()
    b = tmp_path / "jetstream" / "$G" / "streams" / "B"
    os.remove(b / "meta.sum")  # (what a kill between the two writes leaves)
    for f in ("natsd-restart.json",):
        p = tmp_path / "jetstream" / "$G" / f
        if p.exists():
            p.unlink()
    with pytest.raises(CorruptState):
        read_meta(str(b), "B")
    env = JsEnv(str(tmp_path))
    try:
        assert sorted(env.account.streams) == ["A"]
        body = {"name": "B", "subjects": ["B.>"], "storage": "file"}
        assert "error" not in env.api("$JS.API.STREAM.CREATE.B", body)
        assert read_meta(str(b), "B")["config"]["name"] == "B"
    finally:
        env.stop()
    env = JsEnv(str(tmp_path))
    try:
        assert sorted(env.account.streams) == ["A", "B"]
    finally:
        env.stop()
