"""Replacing a file so a crash leaves the old content or the new, never a mix.

The one way natsd writes a small whole file (stream and consumer ``meta.inf``/``meta.sum``, the
file store's index and compacted blocks, consumer state, stream-template files, account JWTs,
natsctl contexts and backups): write ``<path>.tmp``, optionally fsync it, ``os.replace`` it over
``path`` (atomic on POSIX and Windows). The rename is durable only once the directory is fsynced
too: callers that promise durability call :func:`fsync_dir` after their last rename, once for
several files. A leftover ``.tmp`` (a crash mid-write) is never read and is overwritten by the
next write. A leaf module: any natsd package may import it (``tests/unit/test_layering.py``).
"""

from __future__ import annotations

import os
from typing import Any, Callable

__all__ = ["TMP_SUFFIX", "atomic_write", "fsync_dir", "read_whole"]

TMP_SUFFIX = ".tmp"


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes | tuple[bytes, ...],
    *,
    fsync: bool = True,
    mode: int = 0o644,
    write: Callable[[int, Any], int] | None = None,
    sync: Callable[[int], None] | None = None,
) -> None:
    """Replace ``path`` with ``data`` (or the concatenation of a tuple of buffers, written one
    after the other: a caller's big body is not copied to append a few bytes): ``<path>.tmp``
    (created with ``mode``), (fsync,) rename.
    On an error the temporary file is removed and the old ``path`` is left as it was.
    ``write``/``sync``: the system calls, for a caller whose writes fault injection reaches
    (the consumer state store passes its own); ``os.write``/``os.fsync`` by default."""
    write = os.write if write is None else write
    sync = os.fsync if sync is None else sync
    path = os.fspath(path)
    tmp = path + TMP_SUFFIX
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        try:
            for part in data if isinstance(data, tuple) else (data,):
                view = memoryview(part)
                while view:
                    n = write(fd, view)
                    view = view[n:]
            if fsync:
                sync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so a rename or create inside it is durable (no-op where unsupported)."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_whole(path: str | os.PathLike[str], dir_fd: int | None = None, guess: int | None = None) -> bytes:
    """The bytes of the (small) file at ``path``: open, fstat, read, close. ``open(path,
    "rb").read()`` makes nine system calls and a buffered file object, which a restart of 1,000
    streams paid for six files each (issue 31). FileNotFoundError (an OSError) when absent.

    ``dir_fd``: ``path`` is relative to that open directory (a caller reading many files under
    one: the kernel walks two path components per file, not the whole path). ``guess``: the
    size the file almost always stays under (a meta.inf): no fstat, the first read asks for
    that many bytes and a file that fills them is read on (a restart after a kill -9 reads two
    metas per consumer, and the fstat was one system call of four)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        size = os.fstat(fd).st_size + 1 if guess is None else guess
        data = os.read(fd, size)
        if len(data) < size:
            return data  # (a short read of a regular file is its end)
        parts = [data]
        while chunk := os.read(fd, 1 << 20):  # (it grew meanwhile, or passed the guess)
            parts.append(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)
