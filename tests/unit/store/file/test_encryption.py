"""Encryption at rest in the file store (natsd.store.file.encryption): the primitives against
known answers and against files nats-server 2.15.1 wrote, the key files, rotation, refusals,
and the torn-tail and corruption behaviour of encrypted blocks (the same as plain ones)."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from natsd.clock import ManualClock
from natsd.store import open_stream_store
from natsd.store.base import CorruptState, StoreConfig, StoreKeyError
from natsd.store.file.encryption import (
    KEY_FILE,
    AssetKey,
    Encryption,
    Keystream,
    StoreCipher,
    _hchacha20,
    block_key_name,
    parse_cipher,
)
from natsd.store.file.layout import INDEX_FILE, MSGS_DIR

REF = Path(__file__).resolve().parents[3] / "data" / "nats-server-encrypted"
KEY = "unit-test-key"


def keys(cipher=StoreCipher.CHACHA, key=KEY, prev="", account="$G"):
    return Encryption(cipher, key, prev).for_account(account)


def cfg(**kw) -> StoreConfig:
    kw.setdefault("name", "S")
    return StoreConfig(storage="file", **kw)


def test_hchacha20_known_answer():
    # draft-irtf-cfrg-xchacha-03, section 2.2.1
    key = bytes(range(32))
    nonce = bytes.fromhex("000000090000004a0000000031415927")
    assert _hchacha20(key, nonce).hex() == "82413b4227b27bfed30e42508a877d73a0f9e4d58a74a853c12ec41326d3ecdc"


@pytest.mark.parametrize("cipher", list(StoreCipher))
def test_keystream_is_positional(cipher):
    ks = Keystream(cipher, os.urandom(32), os.urandom(cipher.nonce_size))
    data = os.urandom(1000)
    whole = ks.xor(data, 0)
    assert whole != data and ks.xor(whole, 0) == data
    for off in (1, 15, 16, 17, 63, 64, 65, 333, 999):
        assert ks.xor(data[off:], off) == whole[off:], off
    # Appends continue the running cipher, and start a new one wherever they jump.
    got = b"".join(ks.xor_append(data[a:b], a) for a, b in ((0, 10), (10, 100), (100, 101), (101, 1000)))
    assert got == whole
    assert ks.xor_append(data[500:600], 500) == whole[500:600]
    assert ks.xor_append(data[600:], 600) == whole[600:]


@pytest.mark.parametrize("cipher", list(StoreCipher))
def test_opens_what_nats_server_wrote(cipher):
    """The key hierarchy, the AEADs and the block stream cipher are the reference's, byte for
    byte: natsd opens a stream, a block and a consumer nats-server 2.15.1 encrypted."""
    d = REF / cipher.value
    k = keys(cipher, "s3cr3t-key")
    stream = k.open(str(d / KEY_FILE), "ORDERS", fsync=False)
    assert stream.cipher is cipher
    meta = json.loads(stream.open((d / "meta.inf").read_bytes(), "meta.inf"))
    assert meta["name"] == "ORDERS" and meta["subjects"] == ["orders.>"]
    block = k.open(str(d / MSGS_DIR / block_key_name(1)), "ORDERS:1", fsync=False)
    plain = block.keystream().xor((d / MSGS_DIR / "1.blk").read_bytes(), 0)
    for i in range(5):
        assert b"orders.new" + b"hello %d" % i in plain
    consumer = k.open(str(d / "obs" / "D" / KEY_FILE), "ORDERS.D", fsync=False)
    assert json.loads(consumer.open((d / "obs" / "D" / "meta.inf").read_bytes(), "meta.inf"))["name"] == "D"
    # Their o.dat: the reference's own state encoding (magic 0x16, version 2) under the seal.
    assert consumer.open((d / "obs" / "D" / "o.dat").read_bytes(), "o.dat")[:2] == b"\x16\x02"
    # Another account, another context or another key: no.
    for acc, ctx, key in (("OTHER", "ORDERS", "s3cr3t-key"), ("$G", "ORDERS2", "s3cr3t-key"), ("$G", "ORDERS", "x")):
        with pytest.raises(StoreKeyError):
            keys(cipher, key, account=acc).open(str(d / KEY_FILE), ctx, fsync=False)


def test_parse_cipher_spellings():
    assert parse_cipher("ChaCha") is parse_cipher("chachapoly") is StoreCipher.CHACHA
    assert parse_cipher("AES") is StoreCipher.AES
    assert parse_cipher("des") is None


@pytest.mark.parametrize("cipher", list(StoreCipher))
def test_key_files_and_sealed_blobs(tmp_path, cipher):
    k = keys(cipher)
    path = str(tmp_path / KEY_FILE)
    made = k.create(path, "S")
    assert os.path.getsize(path) == cipher.nonce_size + 32 + 16
    assert os.stat(path).st_mode & 0o777 == 0o600
    opened = k.open(path, "S")
    sealed = made.seal(b"hello")
    assert b"hello" not in sealed and opened.open(sealed, "x") == b"hello"
    assert made.seal(b"hello") != sealed  # a fresh nonce each time
    damaged = bytearray(sealed)
    damaged[-1] ^= 1
    with pytest.raises(CorruptState, match="authentication tag"):
        opened.open(bytes(damaged), "x")


def test_rotation_rewraps_the_same_seed(tmp_path):
    path = str(tmp_path / KEY_FILE)
    old = keys(key="old").create(path, "S")
    before = Path(path).read_bytes()
    with pytest.raises(StoreKeyError, match="does not open with the key configured"):
        keys(key="new").open(path, "S")
    assert Path(path).read_bytes() == before  # refused: untouched
    rotated = keys(key="new", prev="old").open(path, "S")
    assert Path(path).read_bytes() != before
    assert rotated.open(old.seal(b"data"), "x") == b"data"  # same seed: the data stays readable
    keys(key="new").open(path, "S")  # the new key alone opens it now
    with pytest.raises(StoreKeyError):
        keys(key="old").open(path, "S")


def test_no_secret_in_reprs_or_errors(tmp_path):
    enc = Encryption(StoreCipher.AES, "topsecret-1", "topsecret-2")
    k = enc.for_account("$G")
    a = k.create(str(tmp_path / KEY_FILE), "S")
    texts = [repr(enc), repr(k), repr(a), repr(a.keystream())]
    with pytest.raises(StoreKeyError) as exc:
        Encryption(StoreCipher.AES, "topsecret-3").for_account("$G").open(str(tmp_path / KEY_FILE), "S")
    texts.append(str(exc.value))
    for t in texts:
        assert "topsecret" not in t and a._seed.hex() not in t, t


def _fill(s, n):
    for i in range(1, n + 1):
        s.store_msg(f"s.{i % 3}", None, b"payload-%04d" % i)
    s.flush()


def test_an_encrypted_store_holds_no_plain_bytes(tmp_path):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), ManualClock(), d, block_size=300, keys=keys())
    _fill(s, 30)
    c = s.consumer_store("C", {"name": "C", "durable_name": "C"})
    c.flush()
    s.stop()
    for root, _dirs, files in os.walk(d):
        for f in files:
            data = Path(root, f).read_bytes()
            assert b"payload-" not in data and b"s.1" not in data and b'"name"' not in data, f
    assert sorted(n for n in os.listdir(os.path.join(d, MSGS_DIR)) if n.endswith(".key")) == sorted(
        block_key_name(int(n[:-4])) for n in os.listdir(os.path.join(d, MSGS_DIR)) if n.endswith(".blk")
    )


def test_purged_blocks_take_their_key_files(tmp_path):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), ManualClock(), d, block_size=300, keys=keys())
    _fill(s, 30)
    s.purge()
    s.stop()
    m = os.path.join(d, MSGS_DIR)
    blks = {n[:-4] for n in os.listdir(m) if n.endswith(".blk")}
    assert {n[:-4] for n in os.listdir(m) if n.endswith(".key")} == blks


def test_torn_tail_of_an_encrypted_block_is_cut(tmp_path, caplog):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), ManualClock(), d, keys=keys())
    _fill(s, 10)
    s.flush()
    s._abandon()
    blk = os.path.join(d, MSGS_DIR, "1.blk")
    os.truncate(blk, os.path.getsize(blk) - 5)  # the last record cut mid-way
    with caplog.at_level(logging.WARNING, logger="natsd.store"):
        s = open_stream_store(cfg(), ManualClock(), d, keys=keys())
    assert s.state().msgs == 9 and s.load_msg(9).msg == b"payload-0009"
    assert s.store_msg("s.0", None, b"next")[0] == 10  # appended after the cut, readable again
    s.stop()
    s = open_stream_store(cfg(), ManualClock(), d, keys=keys())
    assert s.load_msg(10).msg == b"next"
    s.stop()


def test_corruption_inside_an_encrypted_block_loses_only_that_record(tmp_path):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), ManualClock(), d, keys=keys())
    _fill(s, 10)
    s.stop()
    os.unlink(os.path.join(d, MSGS_DIR, INDEX_FILE))
    blk = os.path.join(d, MSGS_DIR, "1.blk")
    data = bytearray(Path(blk).read_bytes())
    data[len(data) // 2] ^= 0x40  # inside a record in the middle of the block
    Path(blk).write_bytes(bytes(data))
    s = open_stream_store(cfg(), ManualClock(), d, keys=keys())
    st = s.state()
    assert st.msgs == 9 and len(st.lost_msgs) == 1
    for seq in range(1, 11):
        if seq not in st.lost_msgs:
            assert s.load_msg(seq).msg == b"payload-%04d" % seq
    s.stop()


def test_a_block_without_its_key_file_is_refused(tmp_path):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), ManualClock(), d, keys=keys())
    _fill(s, 3)
    s.stop()
    os.unlink(os.path.join(d, MSGS_DIR, INDEX_FILE))
    os.unlink(os.path.join(d, MSGS_DIR, block_key_name(1)))
    with pytest.raises(StoreKeyError, match="has no key file"):
        open_stream_store(cfg(), ManualClock(), d, keys=keys())


def test_wrong_key_writes_nothing(tmp_path):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), ManualClock(), d, keys=keys())
    _fill(s, 3)
    s.stop()
    copy = str(tmp_path / "copy")
    shutil.copytree(d, copy)
    with pytest.raises(StoreKeyError):
        open_stream_store(cfg(), ManualClock(), d, keys=keys(key="wrong"))
    with pytest.raises(StoreKeyError, match="no encryption key is configured"):
        open_stream_store(cfg(), ManualClock(), d)
    for root, _dirs, files in os.walk(copy):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), copy)
            assert Path(d, rel).read_bytes() == Path(root, f).read_bytes(), rel


def test_an_empty_blob_seals_and_opens():
    a = AssetKey(StoreCipher.AES, os.urandom(32), os.urandom(16))
    assert a.open(a.seal(b""), "x") == b""


def test_a_compressed_block_has_a_key_stream_of_its_own(tmp_path):
    """Compressing a sealed block rewrites it: under the plain block's key stream, copies of the
    disk from before and after would give away their XOR, so the compressed form has its own."""
    from natsd.store.file.compress import MAGIC

    d = str(tmp_path / "S")
    k = keys(StoreCipher.AES)
    s = open_stream_store(cfg(compression="s2"), ManualClock(), d, block_size=400, keys=k, compress_inline=True)
    _fill(s, 40)
    s.stop()
    blk = Path(d, MSGS_DIR, "1.blk").read_bytes()
    ks = k.open(os.path.join(d, MSGS_DIR, block_key_name(1)), "S:1").keystream()
    assert ks.compressed.xor(blk[:8], 0) == MAGIC and ks.xor(blk[:8], 0) != MAGIC
    s = open_stream_store(cfg(compression="s2"), ManualClock(), d, block_size=400, keys=k)
    assert s._blocks[1].compressed and s.load_msg(2).msg == b"payload-0002"
    s.stop()
