"""NUIDs: the 22-character base-62 unique ids NATS uses for advisory ids, inboxes and internal
reply subjects (nats-server's ``nuid.Next()``).

The scheme is the NUID one: a crypto-random 12-character prefix and a 10-character base-62
sequence that advances by a random increment, so an id costs an addition and ten digit lookups,
not 22 calls into ``secrets``; when the sequence runs out, a new prefix is drawn.

It is written here rather than taken from nats-py's ``nats.nuid``: importing that module runs
``nats/__init__.py``, which loads the whole client and aiohttp -- 13 MB more resident memory
for an idle server (``bench/run.py``'s idle RSS went from 34 to 47 MB) for a dozen lines.

This module is the one process-wide generator, a leaf any natsd package may import
(``tests/unit/test_layering.py``):

* a lock, because the Spark data source and natsctl may ask from more than one thread and a
  step is a read-modify-write of the sequence;
* a fresh generator in a forked child (Spark forks its Python workers), which would otherwise
  continue the parent's prefix and sequence and hand out the same ids.
"""

from __future__ import annotations

import os
import threading

__all__ = ["nuid"]

_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_PREFIX_LEN = 12
_SEQ_LEN = 10
_MAX_SEQ = 62**_SEQ_LEN
_MIN_INC, _MAX_INC = 33, 333


class _Nuid:
    __slots__ = ("prefix", "seq", "inc")

    def __init__(self) -> None:
        self._new_prefix()

    def _new_prefix(self) -> None:
        # os.urandom, the source secrets draws from, without importing secrets (hmac, OpenSSL's
        # digests: ~1 ms the first advisory paid, issue 31). Each value is a 256-bit random
        # number reduced modulo a far smaller range, so its bias (below 2**-180) is nothing.
        n = int.from_bytes(os.urandom(32), "big")
        digits = []
        for _ in range(_PREFIX_LEN):
            n, d = divmod(n, 62)
            digits.append(_DIGITS[d])
        self.prefix = "".join(digits)
        self.seq = int.from_bytes(os.urandom(32), "big") % _MAX_SEQ
        self.inc = _MIN_INC + int.from_bytes(os.urandom(32), "big") % (_MAX_INC - _MIN_INC)

    def next(self) -> str:
        self.seq += self.inc
        if self.seq >= _MAX_SEQ:
            self._new_prefix()
        n = self.seq
        out = []
        for _ in range(_SEQ_LEN):
            n, d = divmod(n, 62)
            out.append(_DIGITS[d])
        return self.prefix + "".join(reversed(out))


_lock = threading.Lock()
_gen: _Nuid | None = None  # made by the first nuid()


def nuid() -> str:
    """The next NUID, e.g. ``"mM6dUMb0ZVYFAbGzCs0G6j"``."""
    global _gen
    with _lock:
        gen = _gen
        if gen is None:
            gen = _gen = _Nuid()
        return gen.next()


def _reseed_after_fork() -> None:
    global _gen, _lock
    _lock = threading.Lock()
    _gen = None  # a new prefix with the child's first id


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed_after_fork)
