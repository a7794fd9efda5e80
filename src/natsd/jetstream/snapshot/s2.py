"""Compression of snapshot archives: the S2/Snappy stream framing nats-server wraps them in.

A nats-server 2.15 snapshot is the ``NATSARC1`` archive (:mod:`natsd.jetstream.snapshot.archive`)
passed through Go's ``s2.NewWriter``; its restore reads the upload through ``s2.NewReader``,
which also accepts the Snappy framing format. So natsd **sends** its archive Snappy-framed
(:func:`frame_archive`, written by ``cramjam.snappy``) and nats-server restores it, and natsd
**reads** both framings (:class:`S2StreamDecoder`) as well as its own older, unframed archives
(they start with the bare ``NATSARC1`` magic; the restore sniffs the first bytes).

The framing, and how it is decoded (one decoder, :class:`natsd.s2.FrameDecoder`, for leafnode
links and archives alike; cramjam for Snappy blocks, a pure-Python decoder for S2's repeat copy;
Snappy chunk CRCs checked for archives), are documented in :mod:`natsd.s2`. Here: the archive's
side, what is written (cramjam's Snappy frame encoder) and the reader's errors as ArchiveError.
"""

from __future__ import annotations

from types import ModuleType
from typing import Iterable, Iterator

from natsd.jetstream.snapshot.archive import ArchiveError
from natsd.s2 import S2_STREAM_ID, SNAPPY_STREAM_ID, FrameDecoder, S2Error, decode_block

__all__ = [
    "S2_STREAM_ID",
    "SNAPPY_STREAM_ID",
    "S2StreamDecoder",
    "s2_decode_block",
    "frame_archive",
    "FRAME_INPUT",
    "is_framed",
]

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
    """Incremental decoder of a framed archive upload (:class:`natsd.s2.FrameDecoder`, Snappy
    chunk CRCs checked): ``feed`` takes bytes in any chunking and returns what they decode to;
    a bad stream raises ArchiveError."""

    __slots__ = ("_dec",)

    def __init__(self) -> None:
        self._dec = FrameDecoder(check_snappy_crc=True)

    def feed(self, data: bytes) -> bytes:
        try:
            return self._dec.feed(data)
        except S2Error as e:
            raise ArchiveError(str(e)) from None


def s2_decode_block(src: bytes) -> bytes:
    """One S2 (or Snappy) block decoded (:func:`natsd.s2.decode_block`); ArchiveError when bad."""
    try:
        return decode_block(src)
    except S2Error as e:
        raise ArchiveError(str(e)) from None
