"""natsd.atomicfile: a whole-file replace leaves the old content or the new, never a mix."""

from __future__ import annotations

import os
import stat

import pytest

from natsd import atomicfile
from natsd.atomicfile import TMP_SUFFIX, atomic_write, fsync_dir


def test_creates_and_replaces(tmp_path):
    p = tmp_path / "meta.inf"
    atomic_write(str(p), b"one")
    assert p.read_bytes() == b"one"
    atomic_write(p, b"two, longer")  # a PathLike works too
    assert p.read_bytes() == b"two, longer"
    atomic_write(p, b"")
    assert p.read_bytes() == b""
    assert not (tmp_path / ("meta.inf" + TMP_SUFFIX)).exists()


def test_a_tuple_of_buffers_is_written_in_order_through_short_writes(tmp_path):
    p = tmp_path / "index.db"
    atomic_write(p, (b"body-" * 1000, memoryview(b"crc!")), write=lambda fd, view: os.write(fd, view[:7]))
    assert p.read_bytes() == b"body-" * 1000 + b"crc!"


def test_mode_of_a_new_file(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "ctx.json", b"{}", fsync=False, mode=0o600)
        atomic_write(tmp_path / "x", b"{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "ctx.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "x").st_mode) == 0o644


def test_a_failed_write_keeps_the_old_file_and_leaves_no_tmp(tmp_path, monkeypatch):
    p = tmp_path / "state"
    atomic_write(p, b"old")

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomicfile.os, "fsync", full_disk)
    with pytest.raises(OSError):
        atomic_write(p, b"new")
    assert p.read_bytes() == b"old"
    assert not (tmp_path / ("state" + TMP_SUFFIX)).exists()


def test_a_stale_tmp_from_a_crash_is_overwritten(tmp_path):
    p = tmp_path / "index.db"
    (tmp_path / ("index.db" + TMP_SUFFIX)).write_bytes(b"torn half of something much longer")
    atomic_write(p, b"whole")
    assert p.read_bytes() == b"whole"


def test_fsync_dir_tolerates_a_missing_directory(tmp_path):
    fsync_dir(tmp_path)
    fsync_dir(tmp_path / "absent")


def test_read_whole_with_a_guess_and_a_directory_fd_reads_every_byte(tmp_path):
    from natsd.atomicfile import read_whole

    data = bytes(range(256)) * 40  # 10,240 bytes
    (tmp_path / "f").write_bytes(data)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for guess in (None, 1, 100, len(data), len(data) + 1, 1 << 16):
            assert read_whole("f", fd, guess) == data, guess
        (tmp_path / "empty").write_bytes(b"")
        assert read_whole("empty", fd, 64) == b""
        with pytest.raises(FileNotFoundError):
            read_whole("absent", fd, 64)
    finally:
        os.close(fd)
    assert read_whole(tmp_path / "f") == data
