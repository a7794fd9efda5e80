"""Unsigned LEB128 varints (Go's ``binary.PutUvarint`` / ``binary.Uvarint``), the one copy for
the formats that use them: S2 block lengths (natsd.s2), snapshot archives
(natsd.jetstream.snapshot.archive) and consumer state files (natsd.store.file.consumer_state).
Each caller turns a truncated or overlong varint into its own format's error."""

from __future__ import annotations

__all__ = ["append_uvarint", "encode_uvarint", "read_uvarint"]

_SMALL = [bytes([i]) for i in range(128)]


def encode_uvarint(n: int) -> bytes:
    """``n`` (>= 0) as a varint."""
    if n < 128:
        if n < 0:
            raise ValueError("uvarint must be >= 0")
        return _SMALL[n]
    out = bytearray()
    append_uvarint(out, n)
    return bytes(out)


def append_uvarint(out: bytearray, v: int) -> None:
    """Append ``v`` (>= 0) as a varint to ``out``."""
    if v < 0:
        raise ValueError("negative varint")
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_uvarint(buf, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``buf[pos:end]``: ``(value, position after it)``; the position is -1 when
    the bytes end inside it. ValueError when it runs past 64 bits (more than ten bytes)."""
    v = shift = 0
    while pos < end:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint overflow")
    return v, -1
