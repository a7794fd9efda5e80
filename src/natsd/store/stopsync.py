"""One filesystem sync for a whole clean stop (issue 31).

A clean stop writes every stream's last block and ``msgs/index.db``. Each ``fsync`` waits for its
own journal commit: with 1,000 streams that is 2,000 commits, seconds of waiting, for data that one
``syncfs`` of the store's filesystem makes as durable. Inside :func:`one_sync_for` the stores skip
their own fsyncs at stop and the filesystem is synced once when the block ends; what a crash
before that leaves is what a crash in the middle of a stop leaves anyway (a stale or torn index.db
is detected and the stream is recovered from its blocks)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["deferred", "one_sync_for", "sync_filesystem"]

log = logging.getLogger("natsd.store")

_depth = 0


def deferred() -> bool:
    """Whether a stop in progress syncs the filesystem once at its end (skip per-file fsyncs)."""
    return _depth > 0


@contextmanager
def one_sync_for(directory: str) -> Iterator[None]:
    """Stops inside this block leave their fsyncs to one sync of ``directory``'s filesystem."""
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        sync_filesystem(directory)


def sync_filesystem(directory: str) -> None:
    """``syncfs`` of the filesystem holding ``directory`` (``sync()`` where that is missing)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        os.sync()
        return
    try:
        import ctypes  # (only at a clean stop: ~3 ms a start does not pay, issue 26)

        libc = ctypes.CDLL(None, use_errno=True)
        fn = getattr(libc, "syncfs", None)
        if fn is None or fn(fd) != 0:
            os.sync()
    except OSError as exc:
        log.error("sync of %s at stop failed: %s", directory, exc)
    finally:
        os.close(fd)
