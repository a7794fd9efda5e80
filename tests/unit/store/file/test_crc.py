"""natsd.store.file.crc: whichever implementation is picked, the checksums are zlib.crc32's (the
bytes on disk must not depend on whether ``isal`` is installed)."""

from __future__ import annotations

import builtins
import os
import zlib

import pytest

from natsd.store.file import crc


@pytest.mark.parametrize("n", [0, 1, 22, 150, 5000, 16384, 1 << 20])
def test_same_values_as_zlib(n):
    data = os.urandom(n)
    for fn in (crc.crc32, crc.crc32_big):
        assert fn(data) == zlib.crc32(data)
        assert fn(data, 0x1234ABCD) == zlib.crc32(data, 0x1234ABCD)
        buf = bytearray(data + b"tail")
        with memoryview(buf) as mv:
            assert fn(mv[:n]) == zlib.crc32(data)


def test_isal_is_used_for_big_buffers_when_installed():
    isal_zlib = pytest.importorskip("isal.isal_zlib")
    assert crc.IMPLEMENTATION == "isal" and crc.crc32_big is isal_zlib.crc32
    assert crc.crc32 is zlib.crc32


def test_falls_back_to_zlib_without_isal(monkeypatch):
    real_import = builtins.__import__

    def no_isal(name, *args, **kw):
        if name == "isal" or name.startswith("isal."):
            raise ImportError("no isal here")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_isal)
    fn, name = crc.pick()
    assert (fn, name) == (zlib.crc32, "zlib")
