"""Encryption at rest through the server (``jetstream { cipher, key, prev_key }``) with nats-py:
what a client stored survives restarts, nothing readable is left on disk, key rotation through
``prev_key``, and every way the keys and the store can disagree stops JetStream with a clear
error that names no key and changes no file. The key never reaches a log line."""

from __future__ import annotations

import hashlib
import logging
import os

import nats
import pytest

from natsd.server import Server
from natsd.server.server import JetStreamStartError
from tests.helpers.inproc import make_options, running_server

pytestmark = pytest.mark.integration

KEY = "s3cr3t-at-rest-key-1"
KEY2 = "s3cr3t-at-rest-key-2"
PAYLOAD = b"plain-text-payload-%d"


def _opts(store_dir, key: str = KEY, prev_key: str = "", cipher: str = "chachapoly"):
    opts = make_options(jetstream=True, store_dir=str(store_dir))
    opts.jetstream.key = key
    opts.jetstream.prev_key = prev_key
    opts.jetstream.cipher = cipher
    return opts


async def _fill(url: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="ORDERS", subjects=["orders.>"])
    for i in range(20):
        await js.publish("orders.new", PAYLOAD % i)
    sub = await js.pull_subscribe("orders.>", durable="WORKER")
    for m in await sub.fetch(5):
        await m.ack()
    await nc.flush()
    await nc.close()


async def _check(url: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    info = await js.stream_info("ORDERS")
    assert info.state.messages == 20
    m = await js.get_msg("ORDERS", 7)
    assert m.data == PAYLOAD % 6
    ci = await js.consumer_info("ORDERS", "WORKER")
    assert ci.ack_floor.stream_seq == 5
    await nc.close()


def _tree(root) -> dict[str, str]:
    """Every file under ``root`` with the hash of its bytes."""
    out = {}
    for d, _dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def _all_bytes(root) -> bytes:
    out = b""
    for d, _dirs, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                out += fh.read()
    return out


async def _refused(opts, match: str) -> str:
    server = Server(opts)
    with pytest.raises(JetStreamStartError, match=match) as exc:
        await server.start()
    assert not server.running
    return str(exc.value)


@pytest.mark.parametrize("cipher", ["chachapoly", "aes"])
async def test_stored_encrypted_and_back_after_restart(tmp_path, cipher, caplog):
    with caplog.at_level(logging.DEBUG, logger="natsd"):
        async with running_server(options=_opts(tmp_path, cipher=cipher)) as s:
            await _fill(s.client_url)
        stream_dir = tmp_path / "jetstream" / "$G" / "streams" / "ORDERS"
        names = sorted(os.listdir(stream_dir))
        assert "meta.key" in names and "meta.key" in os.listdir(stream_dir / "obs" / "WORKER")
        assert any(n.endswith(".key") and n != "meta.key" for n in os.listdir(stream_dir / "msgs"))
        on_disk = _all_bytes(tmp_path)
        # Nothing a client sent or named is readable on disk: payloads, subjects, names in configs.
        for plain in (b"plain-text-payload", b"orders.new", b"orders.>", b"WORKER", b'"name"'):
            assert plain not in on_disk, plain
        async with running_server(options=_opts(tmp_path, cipher=cipher)) as s:
            await _check(s.client_url)
    assert "JetStream encryption: " + ("ChaCha20-Poly1305" if cipher == "chachapoly" else "AES-GCM") in caplog.text
    assert KEY not in caplog.text


async def test_wrong_key_is_refused_and_nothing_is_written(tmp_path, caplog):
    async with running_server(options=_opts(tmp_path)) as s:
        await _fill(s.client_url)
    before = _tree(tmp_path)
    with caplog.at_level(logging.DEBUG, logger="natsd"):
        msg = await _refused(_opts(tmp_path, key=KEY2), "does not open with the key configured")
        assert "meta.key" in msg and KEY2 not in msg and KEY not in msg
        # The previous key as prev_key opens it; a wrong one in both places does not.
        await _refused(_opts(tmp_path, key=KEY2, prev_key="not-it-either"), "the key or prev_key")
    assert _tree(tmp_path) == before
    assert KEY2 not in caplog.text and "not-it-either" not in caplog.text
    async with running_server(options=_opts(tmp_path)) as s:  # the right key still opens all of it
        await _check(s.client_url)


async def test_key_rotation_through_prev_key(tmp_path):
    async with running_server(options=_opts(tmp_path)) as s:
        await _fill(s.client_url)
    before = _tree(tmp_path)
    async with running_server(options=_opts(tmp_path, key=KEY2, prev_key=KEY)) as s:
        await _check(s.client_url)
    after = _tree(tmp_path)
    # Every key file was wrapped again under the new key; the data itself was not rewritten.
    rewrapped = {p for p in before if p.endswith(".key") and after.get(p) != before[p]}
    assert rewrapped == {p for p in before if p.endswith(".key")}
    for p in before:
        if p.endswith(".blk"):
            assert after[p] == before[p], p
    # The new key alone opens it now; the old one no longer does.
    async with running_server(options=_opts(tmp_path, key=KEY2)) as s:
        await _check(s.client_url)
    await _refused(_opts(tmp_path, key=KEY), "does not open")


async def test_changing_the_cipher_keeps_the_data_readable(tmp_path):
    """As the reference, each key file is tried with both ciphers: data written with one stays
    readable when the configuration names the other; new assets use the configured one."""
    async with running_server(options=_opts(tmp_path, cipher="chachapoly")) as s:
        await _fill(s.client_url)
    async with running_server(options=_opts(tmp_path, cipher="aes")) as s:
        await _check(s.client_url)
        nc = await nats.connect(s.client_url)
        await nc.jetstream().publish("orders.new", b"after the switch")
        await nc.close()
    async with running_server(options=_opts(tmp_path, cipher="aes")) as s:
        nc = await nats.connect(s.client_url)
        assert (await nc.jetstream().get_msg("ORDERS", 21)).data == b"after the switch"
        await nc.close()


async def test_an_encrypted_store_without_its_key_is_refused(tmp_path):
    enc = tmp_path / "enc"
    async with running_server(options=_opts(enc)) as s:
        await _fill(s.client_url)
    before = _tree(enc)
    await _refused(make_options(jetstream=True, store_dir=str(enc)), "no encryption key is configured")
    assert _tree(enc) == before


@pytest.mark.parametrize("cipher", ["chachapoly", "aes"])
async def test_a_plain_store_is_encrypted_when_a_key_is_configured(tmp_path, cipher, caplog):
    """As nats-server converts it: the streams and consumers written unencrypted are encrypted
    at the first start with a key (natsd.store.file.encrypt_plain), and stay readable."""
    async with running_server(options=make_options(jetstream=True, store_dir=str(tmp_path))) as s:
        await _fill(s.client_url)
    assert b"plain-text-payload" in _all_bytes(tmp_path)
    with caplog.at_level(logging.WARNING, logger="natsd.store"):
        async with running_server(options=_opts(tmp_path, cipher=cipher)) as s:
            await _check(s.client_url)
    assert "stream ORDERS: encrypted (" in caplog.text and KEY not in caplog.text
    stream_dir = tmp_path / "jetstream" / "$G" / "streams" / "ORDERS"
    assert (stream_dir / "meta.key").exists() and (stream_dir / "obs" / "WORKER" / "meta.key").exists()
    assert b"plain-text-payload" not in _all_bytes(tmp_path)
    async with running_server(options=_opts(tmp_path, cipher=cipher)) as s:
        await _check(s.client_url)
    await _refused(make_options(jetstream=True, store_dir=str(tmp_path)), "no encryption key is configured")


@pytest.mark.timeout(60)
def test_a_backup_restores_encrypted_and_back(tmp_path):
    """The way to encrypt a plain stream (or the reverse): backups are logical, so a restore into
    an encrypted server writes the stream encrypted."""
    from tests.helpers.cli import ok
    from tests.helpers.servers import start_server

    conf = tmp_path / "enc.conf"
    conf.write_text(f'jetstream {{ cipher: aes, key: "{KEY}" }}\n')
    plain = start_server("natsd", tmp_path / "plain", store_dir=tmp_path / "plain-store")
    enc = start_server("natsd", tmp_path / "enc", config=conf, store_dir=tmp_path / "enc-store")
    try:
        ok(plain.url, "stream", "add", "ORDERS", "--subjects", "orders.*", "--defaults")
        ok(plain.url, "pub", "orders.new", "plain-text-payload {{Count}}", "--count", "20", "--wait", "-q")
        ok(plain.url, "stream", "backup", "ORDERS", str(tmp_path / "bk"), "--no-progress")
        ok(enc.url, "stream", "restore", str(tmp_path / "bk"), "--no-progress")
        got = ok(enc.url, "stream", "get", "ORDERS", "20", "-j").json()
        assert got["subject"] == "orders.new"
        ok(enc.url, "stream", "backup", "ORDERS", str(tmp_path / "bk2"), "--no-progress")
    finally:
        plain.stop()
        enc.stop()
    stream_dir = tmp_path / "enc-store" / "jetstream" / "$G" / "streams" / "ORDERS"
    assert (stream_dir / "meta.key").exists()
    assert b"plain-text-payload" not in _all_bytes(stream_dir)
    back = start_server("natsd", tmp_path / "back", store_dir=tmp_path / "back-store")
    try:
        ok(back.url, "stream", "restore", str(tmp_path / "bk2"), "--no-progress")
        assert ok(back.url, "stream", "info", "ORDERS", "-j").json()["state"]["messages"] == 20
    finally:
        back.stop()
    assert not (tmp_path / "back-store" / "jetstream" / "$G" / "streams" / "ORDERS" / "meta.key").exists()
