"""Compression of snapshot archives: the S2/Snappy stream framing nats-server wraps them in.

A nats-server 2.15 snapshot is the ``NATSARC1`` archive (:mod:`natsd.jetstream.snapshot.archive`)
passed through Go's ``s2.NewWriter``; its restore reads the upload through ``s2.NewReader``,
which also accepts the Snappy framing format. So natsd **sends** its archive Snappy-framed
(:func:`frame_archive`, written by ``cramjam.snappy``) and nats-server restores it, and natsd
**reads** both framings (:class:`S2StreamDecoder`) as well as its own older, unframed archives
(they start with the bare ``NATSARC1`` magic; the restore sniffs the first bytes).

Framing format (the Snappy "framing format", which S2 extends)::

    stream  := frame*            the first frame is the stream identifier
    frame   := type:u8 length:u24le body[length]
    0xff    stream identifier, body "sNaPpY" (Snappy) or "S2sTwO" (S2)
    0x00    compressed chunk: masked CRC-32C (u32le) of the decoded data, then one compressed block
    0x01    uncompressed chunk: masked CRC-32C, then the data
    0x80-0xfe skippable (padding, S2's seek index); 0x02-0x7f reserved: an error

A block is ``uvarint(decoded length)`` followed by Snappy elements (literals, copies with 1-, 2-
or 4-byte offsets). S2 adds one element, the *repeat* copy (a 1-byte-offset copy whose offset
is 0: "the previous offset again"), and allows chunks up to 4 MiB (Snappy: 64 KiB).

What is hand-written here and why (measured, cramjam 2.14): cramjam's streaming
``snappy.Decompressor`` is not incremental (fed part of a stream it fails with "failed to fill
whole buffer"), and this cramjam build has no S2 module. So the frame walk (4-byte headers) is
done here, every block is decoded by ``cramjam.snappy.decompress_raw`` (C), and only a block that
Snappy's decoder refuses -- an S2 block using the repeat copy, which Go's ``s2.NewWriter`` (what
nats-server sends) emits -- goes through :func:`s2_decode_block`, the pure-Python decoder. Measured on a nats-server 2.15.1
snapshot of 50,000 messages: all 30 of its 1 MiB blocks use the repeat copy, so nats-server's
archives are decoded by the Python decoder (15.5 MB in 0.18 s here), natsd's own by cramjam. CRCs:
a chunk inside a ``sNaPpY`` stream is checked by cramjam (it is decoded as a one-chunk framed
stream, which verifies the masked CRC-32C); S2 chunks are not checked (no CRC-32C in C at hand,
and in Python it would dominate the restore), the archive inside has its own structure checks.
"""

from __future__ import annotations

from types import ModuleType
from typing import Iterable, Iterator

from natsd.jetstream.snapshot.archive import ArchiveError

__all__ = ["S2_STREAM_ID", "SNAPPY_STREAM_ID", "S2StreamDecoder", "s2_decode_block", "frame_archive",
           "FRAME_INPUT", "is_framed"]

#: The stream identifier frame an S2 (resp. Snappy) framed stream starts with.
S2_STREAM_ID = b"\xff\x06\x00\x00S2sTwO"
SNAPPY_STREAM_ID = b"\xff\x06\x00\x00sNaPpY"
#: Archive bytes compressed at once by :func:`frame_archive` (cramjam cuts them into 64 KiB
#: Snappy chunks; a bigger batch only means fewer calls).
FRAME_INPUT = 256 * 1024



def _cramjam() -> ModuleType:
    """cramjam, imported on first use: it costs ~2 MB of RSS in every server, and only backups
    and restores need it here."""
    import cramjam

    return cramjam


def is_framed(head: bytes) -> bool:
    """True when ``head`` (the first bytes of an archive) starts an S2 or Snappy framed stream."""
    return head.startswith(b"\xff\x06\x00\x00")


def frame_archive(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The archive ``pieces`` as a Snappy-framed stream (what nats-server's ``s2.NewReader``
    reads), in pieces: the stream identifier first, then the compressed chunks of every
    FRAME_INPUT bytes of archive. Lazy: it pulls archive pieces only as its output is taken."""
    comp = _cramjam().snappy.Compressor()
    batch = bytearray()
    for p in pieces:
        batch += p
        if len(batch) >= FRAME_INPUT:
            comp.compress(bytes(batch))
            batch.clear()
            out = comp.flush()
            if len(out):
                yield bytes(out)
    if batch:
        comp.compress(bytes(batch))
    out = comp.finish()
    if len(out):
        yield bytes(out)


class S2StreamDecoder:
    """Incremental decoder of the S2 (or Snappy) framing format (see the module docstring):
    ``feed`` takes bytes in any chunking and returns what they decode to."""

    MAX_BLOCK = 4 * 1024 * 1024 + 64

    def __init__(self) -> None:
        self._buf = bytearray()
        self._ident: bytes | None = None

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
            start = pos
            pos += 4 + ln
            if typ == 0xFF:
                body = bytes(buf[start + 4:pos])
                if body == b"S2sTwO":
                    self._ident = S2_STREAM_ID
                elif body == b"sNaPpY":
                    self._ident = SNAPPY_STREAM_ID
                else:
                    raise ArchiveError("invalid S2 stream identifier")
                continue
            if self._ident is None:
                raise ArchiveError("S2 stream without identifier")
            if typ in (0x00, 0x01):
                if ln < 4:
                    raise ArchiveError("corrupt S2 frame")
                out += self._chunk(typ, buf, start, pos)
            elif typ < 0x80:
                raise ArchiveError("unsupported S2 frame type")
            # 0x80-0xfe: skippable
        del buf[:pos]
        return bytes(out)

    def _chunk(self, typ: int, buf: bytearray, start: int, end: int) -> bytes:
        if self._ident is SNAPPY_STREAM_ID:
            # One-chunk framed stream: cramjam checks the chunk's CRC and decodes it in C.
            cramjam = _cramjam()
            try:
                return bytes(cramjam.snappy.decompress(SNAPPY_STREAM_ID + bytes(buf[start:end])))
            except cramjam.DecompressionError as exc:
                raise ArchiveError(f"corrupt Snappy frame: {exc}") from None
        if typ == 0x01:
            return bytes(buf[start + 8:end])
        block = bytes(buf[start + 8:end])
        cramjam = _cramjam()
        try:
            return bytes(cramjam.snappy.decompress_raw(block))
        except cramjam.DecompressionError:
            # An S2 block using the repeat copy (Snappy's decoder refuses offset 0).
            return s2_decode_block(block)


def s2_decode_block(src: bytes) -> bytes:
    """Decode one S2 (or Snappy) block, S2's repeat copy included (pure Python: the fallback
    for blocks cramjam's Snappy decoder refuses, see the module docstring)."""
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
