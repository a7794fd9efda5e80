"""Bursts of frames that repeat one control line, measured in C.

A publisher streaming to one subject sends the very same control line before every payload
(``PUB s 128\\r\\n<128 bytes>\\r\\n`` again and again; on a leaf link ``LMSG s 128``). Every such
frame has the same length, ``len(line) + size + 2``, so the frames of a buffer sit at a fixed
stride: one strided slice per byte of the line (``region[j::step]``), plus two for the CRLF after
the payload, checks that byte of *every* frame at once. A buffer that is one burst therefore costs
``len(line) + 2`` C-level compares instead of a Python iteration per frame; a burst that ends
inside the buffer is found by bisection (the checks are monotone: the first k frames are good
for every k up to the first bad frame).

Asynchronous JetStream publishers vary one thing per frame: the reply, an inbox ``<prefix>.<token>``
whose token has a fixed length in every client (a NUID or fixed-width random string), so the
frames still sit at a fixed stride: :func:`reply_run_length` checks the line's bytes before the
token and after it column by column as above, and each token column for whitespace (one
``translate`` per column), so a burst of ``PUB s _INBOX.x.<token> 128`` is found without a Python
iteration per frame either.

Used by :mod:`natsd.protocol.parser` (client ``PUB``/``HPUB``) and :mod:`natsd.protocol.leaf`.
"""

from __future__ import annotations

__all__ = ["run_length", "reply_run_length"]

# What ends an argument of a control line (the parser splits on it): never inside a token.
_WS = b" \t\n\r\x0b\x0c"


def frames_ok(buf: bytes, pos: int, head: bytes, step: int, k: int) -> bool:
    """Whether the ``k`` frames of ``step`` bytes at ``pos`` all start with ``head`` and end with
    CRLF (the caller made sure they are inside ``buf``)."""
    region = buf[pos : pos + k * step]
    for j in range(len(head)):
        if region[j::step] != head[j : j + 1] * k:
            return False
    return region[step - 2 :: step] == b"\r" * k and region[step - 1 :: step] == b"\n" * k


def run_length(buf: bytes, pos: int, head: bytes, step: int, n: int) -> int:
    """How many complete frames (``head``, ``step - len(head) - 2`` payload bytes, CRLF) follow
    one another from ``pos`` in ``buf[:n]``."""
    hi = (n - pos) // step
    if hi <= 0:
        return 0
    if frames_ok(buf, pos, head, step, hi):
        return hi
    lo = 0  # invariant: the first lo frames are good, the first hi are not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if frames_ok(buf, pos, head, step, mid):
            lo = mid
        else:
            hi = mid
    return lo


def reply_frames_ok(buf: bytes, pos: int, head: bytes, hole: int, tail: bytes, step: int, k: int) -> bool:
    """Whether the ``k`` frames of ``step`` bytes at ``pos`` all start with ``head``, then
    ``hole`` bytes without whitespace, then ``tail``, and end with CRLF."""
    region = buf[pos : pos + k * step]
    for j in range(len(head)):
        if region[j::step] != head[j : j + 1] * k:
            return False
    t0 = len(head) + hole
    for j in range(len(tail)):
        if region[t0 + j :: step] != tail[j : j + 1] * k:
            return False
    if region[step - 2 :: step] != b"\r" * k or region[step - 1 :: step] != b"\n" * k:
        return False
    for j in range(len(head), t0):
        if len(region[j::step].translate(None, _WS)) != k:
            return False
    return True


def reply_run_length(buf: bytes, pos: int, head: bytes, hole: int, tail: bytes, step: int, n: int) -> int:
    """How many complete frames (``head``, a ``hole``-byte token without whitespace, ``tail``,
    ``step - len(head) - hole - len(tail) - 2`` payload bytes, CRLF) follow one another from
    ``pos`` in ``buf[:n]``."""
    hi = (n - pos) // step
    if hi <= 0:
        return 0
    if reply_frames_ok(buf, pos, head, hole, tail, step, hi):
        return hi
    lo = 0  # invariant: the first lo frames are good, the first hi are not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if reply_frames_ok(buf, pos, head, hole, tail, step, mid):
            lo = mid
        else:
            hi = mid
    return lo
