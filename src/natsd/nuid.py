"""NUIDs: the 22-character base-62 unique ids NATS uses for advisory ids, inboxes and internal
reply subjects (nats-server's ``nuid.Next()``).

nats-py's :class:`nats.nuid.NUID` is the generator (a crypto-random 12-character prefix and a
10-character sequence stepped by a random increment, so an id costs an addition and ten digit
lookups, not 22 calls into ``secrets``). This module is the one process-wide instance, a leaf
any natsd package may import (``tests/unit/test_layering.py``):

* a lock, because the Spark data source and natsctl may ask from more than one thread and
  ``NUID.next`` is a read-modify-write of its sequence;
* a fresh generator in a forked child (Spark forks its Python workers), which would otherwise
  continue the parent's prefix and sequence and hand out the same ids.
"""

from __future__ import annotations

import os
import threading

from nats.nuid import NUID

__all__ = ["nuid"]

_lock = threading.Lock()
_gen = NUID()


def nuid() -> str:
    """The next NUID, e.g. ``"mM6dUMb0ZVYFAbGzCs0G6j"``."""
    with _lock:
        return _gen.next().decode()


def _reseed_after_fork() -> None:
    global _gen, _lock
    _lock = threading.Lock()
    _gen = NUID()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed_after_fork)
