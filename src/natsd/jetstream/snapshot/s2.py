"""Compression: the S2 (or Snappy) framed stream nats-server wraps its snapshot archive in, decoded.

Restores accept this format, which is also the reference's archive once S2-decompressed; an
S2-framed upload (what nats-server 2.15 sends, starting ``ff 06 00 00 "S2sTwO"``) is decoded by
:class:`S2StreamDecoder` first, so a nats-server 2.15 backup restores into natsd. The older
S2-compressed tar format (nats-server before 2.15) is refused with "restore failed: unsupported
snapshot format". natsd's own snapshots are not S2-framed, so nats-server cannot restore them.

Only decoding is needed: natsd sends the bare archive (:mod:`natsd.jetstream.snapshot.archive`).
The restore sniffs the first bytes of an upload (:data:`S2_STREAM_ID`) and, for an S2-framed
one, feeds every chunk through :class:`S2StreamDecoder` before the archive reader.
"""

from __future__ import annotations

from natsd.jetstream.snapshot.archive import ArchiveError

__all__ = ["S2_STREAM_ID", "SNAPPY_STREAM_ID", "S2StreamDecoder", "s2_decode_block"]

#: The stream identifier frame an S2 (resp. Snappy) framed stream starts with.
S2_STREAM_ID = b"\xff\x06\x00\x00S2sTwO"
SNAPPY_STREAM_ID = b"\xff\x06\x00\x00sNaPpY"


class S2StreamDecoder:
    """Incremental decoder of the S2 (or Snappy) framing format nats-server wraps its archives in.

    Frames: 1 type byte, 3-byte little-endian length, body. ``0xff`` stream identifier
    (``S2sTwO`` / ``sNaPpY``), ``0x00`` compressed block (4-byte masked CRC-32C + block), ``0x01``
    uncompressed block (4-byte CRC + data), ``0x80``-``0xfe`` skippable (padding, index),
    ``0x02``-``0x7f`` reserved (error). A block is ``uvarint(decoded length)`` followed by
    Snappy elements (literal, copy with 1/2/4-byte offset) plus S2's repeat-offset copy (a
    1-byte-offset copy whose offset is 0). The CRCs are not verified: the archive inside has its
    own structure checks, and pure-Python CRC-32C would dominate the restore time.
    """

    MAX_BLOCK = 4 * 1024 * 1024 + 64

    def __init__(self) -> None:
        self._buf = bytearray()
        self._seen_id = False

    def feed(self, data: bytes) -> bytes:
        buf = self._buf
        buf += data
        out = bytearray()
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            typ = buf[pos]
            ln = buf[pos + 1] | (buf[pos + 2] << 8) | (buf[pos + 3] << 16)
            if ln > self.MAX_BLOCK:
                raise ArchiveError("S2 frame too large")
            if n - pos - 4 < ln:
                break
            body = bytes(buf[pos + 4:pos + 4 + ln])
            pos += 4 + ln
            if typ == 0xFF:
                if body not in (b"S2sTwO", b"sNaPpY"):
                    raise ArchiveError("invalid S2 stream identifier")
                self._seen_id = True
                continue
            if not self._seen_id:
                raise ArchiveError("S2 stream without identifier")
            if typ == 0x00:
                if ln < 4:
                    raise ArchiveError("corrupt S2 frame")
                out += s2_decode_block(body[4:])
            elif typ == 0x01:
                if ln < 4:
                    raise ArchiveError("corrupt S2 frame")
                out += body[4:]
            elif typ < 0x80:
                raise ArchiveError("unsupported S2 frame type")
            # 0x80-0xfe: skippable
        del buf[:pos]
        return bytes(out)


def s2_decode_block(src: bytes) -> bytes:
    """Decode one S2 (or Snappy) block."""
    n = len(src)
    s = 0
    dlen = 0
    shift = 0
    while True:
        if s >= n:
            raise ArchiveError("corrupt S2 block")
        b = src[s]
        s += 1
        dlen |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 35:
            raise ArchiveError("corrupt S2 block")
    if dlen > S2StreamDecoder.MAX_BLOCK:
        raise ArchiveError("S2 block too large")
    dst = bytearray()
    offset = 0
    while s < n:
        tag = src[s]
        kind = tag & 3
        if kind == 0:  # literal
            x = tag >> 2
            if x < 60:
                s += 1
            else:
                nb = x - 59
                if s + 1 + nb > n:
                    raise ArchiveError("corrupt S2 block")
                x = int.from_bytes(src[s + 1:s + 1 + nb], "little")
                s += 1 + nb
            length = x + 1
            if s + length > n:
                raise ArchiveError("corrupt S2 block")
            dst += src[s:s + length]
            s += length
            continue
        if kind == 1:  # copy, 1-byte offset; offset 0 = S2 repeat
            if s + 2 > n:
                raise ArchiveError("corrupt S2 block")
            toff = ((tag & 0xE0) << 3) | src[s + 1]
            length = (tag >> 2) & 7
            s += 2
            if toff == 0:
                if length == 5:
                    length = src[s] + 4
                    s += 1
                elif length == 6:
                    length = int.from_bytes(src[s:s + 2], "little") + (1 << 8)
                    s += 2
                elif length == 7:
                    length = int.from_bytes(src[s:s + 3], "little") + (1 << 16)
                    s += 3
            else:
                offset = toff
            length += 4
        elif kind == 2:
            if s + 3 > n:
                raise ArchiveError("corrupt S2 block")
            offset = src[s + 1] | (src[s + 2] << 8)
            length = 1 + (tag >> 2)
            s += 3
        else:
            if s + 5 > n:
                raise ArchiveError("corrupt S2 block")
            offset = int.from_bytes(src[s + 1:s + 5], "little")
            length = 1 + (tag >> 2)
            s += 5
        d = len(dst)
        if offset <= 0 or d < offset or d + length > dlen:
            raise ArchiveError("corrupt S2 block")
        if offset >= length:
            dst += dst[d - offset:d - offset + length]
        else:
            # overlapping copy: repeat the last ``offset`` bytes
            pat = bytes(dst[d - offset:d])
            reps, rem = divmod(length, offset)
            dst += pat * reps + pat[:rem]
    if len(dst) != dlen:
        raise ArchiveError("corrupt S2 block")
    return bytes(dst)
