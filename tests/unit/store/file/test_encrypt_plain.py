"""A stream stored unencrypted, encrypted in place once a key is configured (as nats-server
converts it; natsd.store.file.encrypt_plain), and a conversion cut at every step by a crash:
the next start always finds the whole stream, plain or encrypted, never a mix."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from natsd.clock import ManualClock
from natsd.store import list_stream_dirs, load_stream_meta, open_stream_store
from natsd.store.base import ConsumerState, SequencePair, StoreConfig
from natsd.store.file import encrypt_plain, keyfiles
from natsd.store.file.compress import MAGIC
from natsd.store.file.encryption import KEY_FILE, Encryption, StoreCipher, block_key_name
from natsd.store.file.layout import MSGS_DIR

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

N = 60


def _keys(cipher=StoreCipher.CHACHA):
    return Encryption(cipher, "unit-test-key").for_account("$G")


def _cfg() -> StoreConfig:
    return StoreConfig(storage="file", name="S", compression="s2")


def _plain_stream(account_dir: Path) -> str:
    """A plain stream: several blocks (the first ones compressed), a consumer with state."""
    d = str(account_dir / "streams" / "S")
    s = open_stream_store(_cfg(), ManualClock(), d, block_size=400, compress_inline=True)
    for i in range(1, N + 1):
        s.store_msg(f"s.{i % 3}", None, b"payload-%04d" % i)
    c = s.consumer_store("C", {"name": "C", "durable_name": "C"})
    c.update(ConsumerState(delivered=SequencePair(12, 12), ack_floor=SequencePair(10, 10)))
    c.flush()
    s.stop()
    assert Path(d, MSGS_DIR, "1.blk").read_bytes()[:8] == MAGIC  # (a compressed block is converted too)
    return d


def _all_bytes(d: str) -> bytes:
    return b"".join(Path(r, f).read_bytes() for r, _ds, fs in os.walk(d) for f in fs)


def _recover_and_check(account_dir: Path, keys) -> None:
    """What the server does at start: list the streams (settling an interrupted conversion), read
    their config (converting a plain one), open the store; every message and the consumer state
    are there, and no plain byte is left."""
    dirs = list_stream_dirs(str(account_dir))
    assert [os.path.basename(x) for x in dirs] == ["S"]
    assert load_stream_meta(dirs[0], keys)["name"] == "S"
    assert sorted(os.listdir(account_dir / "streams")) == ["S"]
    s = open_stream_store(_cfg(), ManualClock(), dirs[0], block_size=400, keys=keys)
    try:
        assert s.state().msgs == N
        for seq in range(1, N + 1):
            assert s.load_msg(seq).msg == b"payload-%04d" % seq
        c = s.consumer_store("C", None)
        assert c.state().ack_floor.stream_seq == 10 and c.state().delivered.stream_seq == 12
    finally:
        s.stop()
    assert Path(dirs[0], KEY_FILE).exists()
    data = _all_bytes(dirs[0])
    assert b"payload-" not in data and b'"durable_name"' not in data


@pytest.mark.parametrize("cipher", list(StoreCipher))
def test_a_plain_stream_is_encrypted_in_place(tmp_path, cipher):
    d = _plain_stream(tmp_path)
    k = _keys(cipher)
    _recover_and_check(tmp_path, k)
    m = os.path.join(d, MSGS_DIR)
    assert {n[:-4] for n in os.listdir(m) if n.endswith(".blk")} == {
        n[:-4] for n in os.listdir(m) if n.endswith(".key")
    }
    ks = k.open(os.path.join(m, block_key_name(1)), "S:1").keystream()
    assert ks.compressed.xor(Path(m, "1.blk").read_bytes()[:8], 0) == MAGIC
    _recover_and_check(tmp_path, k)  # and it opens as any encrypted stream from then on


class _Crash(Exception):
    pass


def _crash_on(monkeypatch, module, name: str, at: int) -> None:
    real = getattr(module, name)
    calls = [0]

    def wrapper(*a, **kw):
        calls[0] += 1
        if calls[0] == at:
            raise _Crash(f"{name} #{at}")
        return real(*a, **kw)

    monkeypatch.setattr(module, name, wrapper)


# Every step a crash can cut: a file of the copy (the first, one in the middle), each of the two
# renames, the removal of the plain copy; and, on the next start, settling it.
CRASHES = [
    ("_write", 1),
    ("_write", 5),
    ("_rename", 1),
    ("_rename", 2),
    ("_rmtree", 1),
]


@pytest.mark.parametrize("name,at", CRASHES)
def test_a_conversion_cut_by_a_crash_is_settled_at_the_next_start(tmp_path, monkeypatch, name, at):
    d = _plain_stream(tmp_path)
    k = _keys()
    with monkeypatch.context() as mp:
        _crash_on(mp, encrypt_plain, name, at)
        with pytest.raises(_Crash):
            load_stream_meta(d, k)
    # The next start: settled (the finished copy put in place, or the plain stream converted again).
    _recover_and_check(tmp_path, k)


def test_settling_cut_by_a_crash_too(tmp_path, monkeypatch):
    """Between the two renames, then a crash while the next start puts the copy in place."""
    _plain_stream(tmp_path)
    k = _keys()
    with monkeypatch.context() as mp:
        _crash_on(mp, encrypt_plain, "_rename", 2)
        with pytest.raises(_Crash):
            load_stream_meta(str(tmp_path / "streams" / "S"), k)
    assert not (tmp_path / "streams" / "S").exists()
    assert list_stream_dirs(str(tmp_path)) == [str(tmp_path / "streams" / "S")]
    with monkeypatch.context() as mp:
        _crash_on(mp, keyfiles, "_rmtree", 1)
        with pytest.raises(_Crash):
            load_stream_meta(str(tmp_path / "streams" / "S"), k)
    _recover_and_check(tmp_path, k)


def test_a_plain_stream_with_a_damaged_config_is_left_as_it_is(tmp_path):
    d = _plain_stream(tmp_path)
    Path(d, "meta.sum").write_text("0000")
    before = _all_bytes(d)
    assert load_stream_meta(d, _keys()) is None  # (logged, as any stream whose meta fails)
    assert _all_bytes(d) == before and not Path(d, KEY_FILE).exists()
    assert sorted(os.listdir(tmp_path / "streams")) == ["S"]


def test_without_a_key_an_unfinished_copy_goes_and_the_stream_stays_plain(tmp_path, monkeypatch):
    d = _plain_stream(tmp_path)
    with monkeypatch.context() as mp:
        _crash_on(mp, encrypt_plain, "_write", 3)
        with pytest.raises(_Crash):
            load_stream_meta(d, _keys())
    copy = str(tmp_path / "copy")
    shutil.copytree(d, copy)
    dirs = list_stream_dirs(str(tmp_path))
    assert load_stream_meta(dirs[0], None)["name"] == "S"
    assert sorted(os.listdir(tmp_path / "streams")) == ["S"]
    s = open_stream_store(_cfg(), ManualClock(), dirs[0], block_size=400)
    assert s.state().msgs == N
    s.stop()
