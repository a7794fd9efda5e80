"""natsd.store.load_stream_meta on a plain server (no keys): a stream's meta.key is looked for only
when its meta.inf does not read as plain, so a start after a kill -9 stats no meta.key per stream;
an encrypted stream is still refused with StoreKeyError (JetStream does not start on it)."""

from __future__ import annotations

import os

import pytest

from natsd.clock import ManualClock
from natsd.store import load_stream_meta, open_stream_store
from natsd.store.base import StoreConfig, StoreKeyError
from natsd.store.file.encryption import Encryption, StoreCipher

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


def _stream(d: str, keys=None) -> None:
    s = open_stream_store(
        StoreConfig(name="S", storage="file", meta={"config": {"name": "S"}}), ManualClock(), d, keys=keys
    )
    s.store_msg("a", None, b"x")
    s.stop()


def test_a_plain_stream_is_read_without_looking_for_a_key(tmp_path, monkeypatch):
    d = str(tmp_path / "S")
    _stream(d)
    looked: list[str] = []
    real = os.path.exists

    def spy(p):
        looked.append(os.path.basename(p))
        return real(p)

    monkeypatch.setattr(os.path, "exists", spy)
    assert load_stream_meta(d, None, settle=False) == {"config": {"name": "S"}}
    assert "meta.key" not in looked


def test_an_encrypted_stream_without_a_configured_key_is_refused(tmp_path):
    d = str(tmp_path / "S")
    _stream(d, keys=Encryption(StoreCipher.AES, "topsecret-1").for_account("$G"))
    with pytest.raises(StoreKeyError, match="no encryption key is configured"):
        load_stream_meta(d, None, settle=False)
