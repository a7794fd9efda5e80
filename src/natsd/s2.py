"""The S2 / Snappy framed stream nats-server speaks: one incremental decoder for every reader.

Two places read it: compressed leafnode links (:mod:`natsd.server.leaf.compress`: Go's
``s2.NewWriter`` on the other side) and snapshot archives (:mod:`natsd.jetstream.snapshot`:
nats-server wraps them in the same stream). Both use :class:`FrameDecoder` and map
:class:`S2Error` to their own error.

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
done here, every compressed block is decoded by ``cramjam.snappy.decompress_raw_into`` (C, into
a bytearray: converting cramjam's Buffer to bytes costs more than the decoding), and only a
block that Snappy's decoder refuses -- an S2 block using the repeat copy, which Go's
``s2.NewWriter`` emits at ``s2_fast`` and above -- goes through :func:`decode_block`, the
pure-Python decoder (a nats-server 2.15.1 snapshot of 50,000 messages: all 30 of its 1 MiB blocks
use the repeat copy; 15.5 MB decoded in 0.18 s here). Stored chunks are sliced.

CRCs: with ``check_snappy_crc`` a chunk inside a ``sNaPpY`` stream is checked by cramjam (it is
decoded as a one-chunk framed stream, which verifies the masked CRC-32C): snapshots ask for it.
S2 chunks are never checked (no CRC-32C in C at hand, and in Python it would dominate); a link is
TCP (or TLS, which authenticates), an archive has its own structure checks.
"""

from __future__ import annotations

from natsd.varint import read_uvarint

__all__ = ["S2Error", "FrameDecoder", "decode_block", "S2_STREAM_ID", "SNAPPY_STREAM_ID", "MAX_BLOCK"]

#: The stream identifier frame an S2 (resp. Snappy) framed stream starts with.
S2_STREAM_ID = b"\xff\x06\x00\x00S2sTwO"
SNAPPY_STREAM_ID = b"\xff\x06\x00\x00sNaPpY"
#: S2's largest block plus its CRC and length: a bigger frame is refused before it is buffered.
MAX_BLOCK = 4 * 1024 * 1024 + 64


class S2Error(ValueError):
    """The stream is not a valid S2/Snappy framed stream."""


class FrameDecoder:
    """Incremental decoder of the framed stream: ``feed`` takes bytes in any chunking and
    returns what the complete frames among them decode to (the rest waits for more)."""

    __slots__ = ("_buf", "_ident", "_check_crc", "_raw_len", "_raw_into", "_refused", "_framed")

    def __init__(self, check_snappy_crc: bool = False) -> None:
        # cramjam is imported here, not at module import: it costs ~2 MB of RSS in every server,
        # and only compressed links, backups and restores need it.
        import cramjam

        self._buf = b""
        self._ident: bytes | None = None
        self._check_crc = check_snappy_crc
        self._raw_len = cramjam.snappy.decompress_raw_len
        self._raw_into = cramjam.snappy.decompress_raw_into
        self._refused = cramjam.DecompressionError
        self._framed = cramjam.snappy.decompress

    def feed(self, data: bytes) -> bytes:
        buf = self._buf + data if self._buf else bytes(data)
        out: list[bytes | bytearray] = []
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            typ = buf[pos]
            ln = buf[pos + 1] | (buf[pos + 2] << 8) | (buf[pos + 3] << 16)
            if ln > MAX_BLOCK:
                raise S2Error("S2 frame too large")
            end = pos + 4 + ln
            if end > n:
                break
            if typ == 0x00 or typ == 0x01:
                if self._ident is None:
                    raise S2Error("S2 stream without identifier")
                if ln < 4:
                    raise S2Error("corrupt S2 frame")
                if self._check_crc and self._ident is SNAPPY_STREAM_ID:
                    # A one-chunk framed stream: cramjam checks the chunk's CRC and decodes it.
                    try:
                        out.append(bytes(self._framed(SNAPPY_STREAM_ID + buf[pos:end])))
                    except self._refused as exc:
                        raise S2Error(f"corrupt Snappy frame: {exc}") from None
                elif typ == 0x01:
                    out.append(buf[pos + 8 : end])
                else:
                    body = buf[pos + 8 : end]
                    try:
                        dst = bytearray(self._raw_len(body))
                        self._raw_into(body, dst)
                        out.append(dst)
                    except self._refused:
                        # An S2 block using the repeat copy (Snappy's decoder refuses offset 0).
                        out.append(decode_block(body))
            elif typ == 0xFF:
                ident = buf[pos + 4 : end]
                if ident == b"S2sTwO":
                    self._ident = S2_STREAM_ID
                elif ident == b"sNaPpY":
                    self._ident = SNAPPY_STREAM_ID
                else:
                    raise S2Error("invalid S2 stream identifier")
            elif typ < 0x80:
                raise S2Error("unsupported S2 frame type")
            # 0x80-0xfe: skippable (padding, S2's index)
            pos = end
        self._buf = buf[pos:] if pos < n else b""
        if not out:
            return b""
        return bytes(out[0]) if len(out) == 1 else b"".join(out)


def decode_block(src: bytes) -> bytes:
    """Decode one S2 (or Snappy) block, S2's repeat copy included (pure Python: the fallback
    for blocks cramjam's Snappy decoder refuses, see the module docstring)."""
    n = len(src)
    try:
        dlen, s = read_uvarint(src, 0, n)
    except ValueError:
        s = -1
    if s < 0:
        raise S2Error("corrupt S2 block")
    if dlen > MAX_BLOCK:
        raise S2Error("S2 block too large")
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
                    raise S2Error("corrupt S2 block")
                x = int.from_bytes(src[s + 1 : s + 1 + nb], "little")
                s += 1 + nb
            length = x + 1
            if s + length > n:
                raise S2Error("corrupt S2 block")
            dst += src[s : s + length]
            s += length
            continue
        if kind == 1:  # copy, 1-byte offset; offset 0 = S2 repeat
            if s + 2 > n:
                raise S2Error("corrupt S2 block")
            toff = ((tag & 0xE0) << 3) | src[s + 1]
            length = (tag >> 2) & 7
            s += 2
            if toff == 0:
                if length == 5:
                    length = src[s] + 4
                    s += 1
                elif length == 6:
                    length = int.from_bytes(src[s : s + 2], "little") + (1 << 8)
                    s += 2
                elif length == 7:
                    length = int.from_bytes(src[s : s + 3], "little") + (1 << 16)
                    s += 3
            else:
                offset = toff
            length += 4
        elif kind == 2:
            if s + 3 > n:
                raise S2Error("corrupt S2 block")
            offset = src[s + 1] | (src[s + 2] << 8)
            length = 1 + (tag >> 2)
            s += 3
        else:
            if s + 5 > n:
                raise S2Error("corrupt S2 block")
            offset = int.from_bytes(src[s + 1 : s + 5], "little")
            length = 1 + (tag >> 2)
            s += 5
        d = len(dst)
        if offset <= 0 or d < offset or d + length > dlen:
            raise S2Error("corrupt S2 block")
        if offset >= length:
            dst += dst[d - offset : d - offset + length]
        else:
            # overlapping copy: repeat the last ``offset`` bytes
            pat = bytes(dst[d - offset : d])
            reps, rem = divmod(length, offset)
            dst += pat * reps + pat[:rem]
    if len(dst) != dlen:
        raise S2Error("corrupt S2 block")
    return bytes(dst)
