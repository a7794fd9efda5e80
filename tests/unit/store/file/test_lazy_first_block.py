"""A file stream writes no ``msgs/`` and no block until its first write (issue 31, ADR 0005): a create
makes the stream's directory, meta.inf and meta.sum only. The first flush that has bytes makes
``msgs/`` and ``1.blk`` (encrypted: ``1.key`` too); a directory without ``msgs/`` is an empty stream
to recovery (clean stop, kill -9), to the peek of an asleep stream, and to the restart file's
fingerprint; and whatever moves the sequences of a stream that never stored a message (compact,
purge, skip) makes its block as a write does."""

from __future__ import annotations

import errno
import os

import pytest

from natsd.clock import ManualClock
from natsd.jetstream.dormant import fingerprint
from natsd.store.base import StoreConfig, StoreWriteError
from natsd.store.file import FileStreamStore
from natsd.store.file.encryption import AccountKeys, Encryption, StoreCipher
from natsd.store.file.peek import peek_stream_state
from tests.helpers.fakeports import JsEnv

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]


def _open(d: str, **kw) -> FileStreamStore:
    return FileStreamStore(StoreConfig(name="S", subjects=["s.>"]), ManualClock(), d, **kw)


def _keys() -> AccountKeys:
    return Encryption(StoreCipher.AES, "topsecret-1").for_account("$G")


@pytest.mark.parametrize("opts", [{}, {"sync_always": True}, {"encrypted": True}])
def test_no_msgs_until_the_first_message_then_kill9_keeps_it(tmp_path, opts):
    d = str(tmp_path / "S")
    kw = {"sync_always": True} if opts.get("sync_always") else {}
    if opts.get("encrypted"):
        kw["keys"] = _keys()
    st = _open(d, **kw)
    want = ["meta.inf", "meta.sum"] + (["meta.key"] if "keys" in kw else [])
    assert sorted(os.listdir(d)) == sorted(want)
    st._abandon()  # kill -9 right after the create
    st = _open(d, **kw)
    assert sorted(os.listdir(d)) == sorted(want)  # (recovery of nothing makes nothing)
    s0 = st.state()
    assert (s0.msgs, s0.first_seq, s0.last_seq) == (0, 1, 0)
    assert st.store_msg("s.a", None, b"one")[0] == 1
    assert sorted(os.listdir(d)) == sorted(want)  # (buffered until the turn's flush)
    st.flush()
    blocks = sorted(os.listdir(os.path.join(d, "msgs")))
    assert blocks == (["1.blk", "1.key"] if "keys" in kw else ["1.blk"])
    st._abandon()  # kill -9 after the first message
    st = _open(d, **kw)
    try:
        s1 = st.state()
        assert (s1.msgs, s1.first_seq, s1.last_seq) == (1, 1, 1)
        assert st.load_msg(1).msg == b"one"
    finally:
        st.stop()


def test_a_clean_stop_of_an_empty_stream_writes_nothing_and_peeks_empty(tmp_path):
    d = str(tmp_path / "S")
    st = _open(d)
    st.stop()
    assert sorted(os.listdir(d)) == ["meta.inf", "meta.sum"]  # (no index.db: nothing to describe)
    got = peek_stream_state(d)
    assert got is not None
    assert (got[0].msgs, got[0].first_seq, got[0].last_seq, got[1]) == (0, 1, 0, [])
    fp = fingerprint(d)
    assert fp is not None and fp[0] == 0
    assert fingerprint(d, int(fp[0])) == fp
    st = _open(d)
    st.store_msg("s.a", None, b"x")
    st.stop()
    assert fingerprint(d) != fp  # (the first block changes it: an entry taken before is not trusted)


@pytest.mark.parametrize("op", ["compact", "purge", "skip"])
def test_moving_the_sequences_of_a_stream_without_a_block_makes_one(tmp_path, op):
    d = str(tmp_path / "S")
    st = _open(d)
    if op == "compact":
        st.compact(100)
        want = (0, 100, 99)
    elif op == "purge":
        st.purge()
        want = (0, 1, 0)
    else:
        st.skip_msgs(1, 41)
        want = (0, 42, 41)
    st.flush()
    st._abandon()
    st = _open(d)
    try:
        s = st.state()
        assert (s.msgs, s.first_seq, s.last_seq) == want
        assert st.store_msg("s.a", None, b"x")[0] == want[2] + 1
    finally:
        st.stop()


def _reopened_after_kill9_holds_kept(st: FileStreamStore, d: str) -> None:
    """Abandon ``st`` as a kill -9 would, reopen ``d``: exactly the one message ``kept`` is there."""
    st._abandon()
    st = _open(d)
    try:
        assert st.state().msgs == 1 and st.load_msg(1).msg == b"kept"
    finally:
        st.stop()


def test_a_block_file_that_can_not_be_made_fails_as_a_write(tmp_path, monkeypatch):
    d = str(tmp_path / "S")
    st = _open(d)
    real = os.mkdir

    def full(path, *a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    st.store_msg("s.a", None, b"lost")
    monkeypatch.setattr(os, "mkdir", full)
    with pytest.raises(StoreWriteError):
        st.flush()
    durable, err = st.take_rollback()
    assert durable == 0 and err.errno == errno.ENOSPC
    assert st.state().msgs == 0 and not os.path.exists(os.path.join(d, "msgs"))
    monkeypatch.setattr(os, "mkdir", real)
    assert st.store_msg("s.a", None, b"kept")[0] == 1  # (the sequence taken back is used again)
    st.flush()
    _reopened_after_kill9_holds_kept(st, d)


def test_streams_created_through_the_api_have_no_msgs_until_used(tmp_path):
    env = JsEnv(str(tmp_path))
    streams = tmp_path / "jetstream" / "$G" / "streams"
    try:
        for name in ("A", "B"):
            env.create(name, subjects=[f"{name}.>"], storage="file")
        assert sorted(os.listdir(streams / "A")) == ["meta.inf", "meta.sum"]
        info = env.api("$JS.API.STREAM.INFO.A")
        assert info["state"]["messages"] == 0 and info["state"]["last_seq"] == 0
        assert env.pub("B.x", b"b")["seq"] == 1
        assert os.listdir(streams / "B" / "msgs") == ["1.blk"]
        env.restart()  # clean: A may sleep (its fingerprint without msgs/), B too
        assert env.api("$JS.API.STREAM.INFO.A")["state"]["messages"] == 0
        assert env.pub("A.x", b"a")["seq"] == 1  # wakes it, makes its first block
        assert env.api("$JS.API.STREAM.INFO.B")["state"]["messages"] == 1
        assert os.listdir(streams / "A" / "msgs") == ["1.blk"]
    finally:
        env.stop()


def test_with_sync_always_a_failed_fsync_of_the_new_entry_leaves_nothing_half_made(tmp_path, monkeypatch):
    from natsd.store.file import stream_store

    d = str(tmp_path / "S")
    st = _open(d, sync_always=True)
    real = stream_store.fsync_dir
    calls: list[str] = []

    def flaky(path: str) -> None:
        calls.append(os.path.basename(path))
        if path.endswith("msgs") and calls.count("msgs") == 1:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(path)

    monkeypatch.setattr(stream_store, "fsync_dir", flaky)
    st.store_msg("s.a", None, b"lost")
    with pytest.raises(StoreWriteError):
        st.flush()
    assert st.take_rollback() is not None
    assert os.listdir(os.path.join(d, "msgs")) == []  # (the block file went with its failed fsync)
    assert st.store_msg("s.a", None, b"kept")[0] == 1
    st.flush()  # the retry makes the file again
    assert calls == ["S", "msgs", "msgs"]  # (msgs/ made and synced once)
    _reopened_after_kill9_holds_kept(st, d)


def test_a_never_written_stream_with_a_first_seq_starts_there_after_kill9(tmp_path):
    # After a kill -9 the stream starts asleep from a peek of its directory: without msgs/ the
    # peek must place the empty stream at its configured first sequence, as recovery does.
    st, lost = peek_stream_state(str(tmp_path), 50)
    assert (st.msgs, st.first_seq, st.last_seq, lost) == (0, 50, 49, [])
    from natsd.jetstream import dormant

    env = JsEnv(str(tmp_path / "js"))
    env.create("F", subjects=["f"], storage="file", first_seq=50)
    env.stop()
    os.remove(tmp_path / "js" / "jetstream" / "$G" / dormant.RESTART_FILE)  # (what a kill -9 leaves)
    env = JsEnv(str(tmp_path / "js"))
    try:
        state = env.api("$JS.API.STREAM.INFO.F")["state"]
        assert (state["messages"], state["first_seq"], state["last_seq"]) == (0, 50, 49)
        assert env.pub("f", b"x")["seq"] == 50
    finally:
        env.stop()
