"""Compression of leafnode links: the mode negotiation and the S2 stream, as nats-server does them.

Negotiation (nats-server 2.10+; both the accepting ``leafnodes {}`` block and every remote
default to ``s2_auto``)::

    hub  -> leaf   INFO {"compression": "<hub mode>", "nonce": ...}          (plain)
    leaf -> hub    INFO {"compression": "<leaf mode>", ...}                  (plain; only when the
                   leaf's mode is not off and the negotiation says "compress"), then the leaf
                   reads and writes the compressed stream
    hub  -> leaf   INFO {"compression": ..., "nonce": ...}                   (compressed; the hub
                   switched after reading the leaf's INFO)
    leaf -> hub    CONNECT {..., "compress_mode": "<negotiated>"}           (compressed)

A leaf whose mode is ``off`` (or a hub that announced no mode: an old server) sends no INFO:
its CONNECT says ``compress_mode: "off"`` (``"not supported"`` when the hub announced none)
and the link stays plain. Each side picks its own writer's mode with :func:`select_mode`
(compression is asymmetric); ``s2_auto`` becomes a level from the link's RTT
(:func:`auto_mode`: at negotiation the time from connect to the INFO, then every PONG), and
that level is what ``/leafz`` shows as ``compression``.

The stream (Go's ``s2.NewWriter``/``s2.NewReader``; the Snappy framing format that S2 extends,
documented in :mod:`natsd.s2`): ``0xff`` stream identifier, then chunks of
``type:u8 length:u24le masked-CRC32C:u32le data`` (``0x00`` a compressed block, ``0x01`` stored
data). natsd writes every flush of a link through ``cramjam.snappy``'s frame encoder (stream
identifier once, then compressed or stored chunks of at most 64 KiB, CRCs included); Go's
``s2.NewReader`` accepts the ``sNaPpY`` identifier and Snappy blocks (S2 is a superset), verified
against nats-server 2.15.1 in both directions. What natsd does not do: vary the effort with the
level (``s2_uncompressed``/``fast``/``better``/``best`` all write Snappy blocks: cramjam has one
Snappy level, and no CRC-32C to write stored chunks with), and check the CRCs it reads.
"""

from __future__ import annotations

import cramjam

from natsd.config.leafnodes import (
    COMPRESSION_ACCEPT,
    COMPRESSION_NOT_SUPPORTED,
    COMPRESSION_OFF,
    COMPRESSION_S2_AUTO,
    COMPRESSION_S2_BEST,
    COMPRESSION_S2_BETTER,
    COMPRESSION_S2_FAST,
    COMPRESSION_S2_UNCOMPRESSED,
)
from natsd.s2 import FrameDecoder, S2Error

__all__ = ["needs_compression", "select_mode", "auto_mode", "info_mode", "S2Writer", "S2Reader", "CompressionError"]

_LEVELS = (COMPRESSION_S2_UNCOMPRESSED, COMPRESSION_S2_FAST, COMPRESSION_S2_BETTER, COMPRESSION_S2_BEST)


class CompressionError(ValueError):
    """The other side announced a mode we do not know (the reference's text), or sent a stream
    that does not decode."""


def needs_compression(mode: str) -> bool:
    """Whether a (configured or negotiated) mode means S2 on the link."""
    return mode not in ("", COMPRESSION_OFF, COMPRESSION_NOT_SUPPORTED)


def select_mode(local: str, remote: str) -> str:
    """Our writer's mode given our configured ``local`` mode (one that needs compression) and
    the mode the other side announced (nats-server's selectCompressionMode)."""
    if remote in ("", COMPRESSION_NOT_SUPPORTED):
        return COMPRESSION_NOT_SUPPORTED
    if remote == COMPRESSION_OFF:
        return COMPRESSION_OFF
    if remote == COMPRESSION_ACCEPT:
        return COMPRESSION_OFF if local == COMPRESSION_ACCEPT else local
    if remote == COMPRESSION_S2_AUTO or remote in _LEVELS:
        if local == COMPRESSION_ACCEPT:
            # "accept" here, "auto" there: fast (not a recommended setup, as the reference says).
            return COMPRESSION_S2_FAST if remote == COMPRESSION_S2_AUTO else remote
        return local
    raise CompressionError(f'unsupported route compression mode "{remote}"')


def auto_mode(rtt_ns: int, thresholds_ns: list[int]) -> str:
    """The level s2_auto uses for an RTT: the first threshold the RTT does not exceed picks
    uncompressed/fast/better/best by its index (0 entries disable a level); above all of them,
    best when there are 3 or more thresholds, else the last one's level."""
    for i, t in enumerate(thresholds_ns):
        if rtt_ns <= t:
            return _LEVELS[i]
    n = len(thresholds_ns)
    return _LEVELS[3] if n >= 3 else _LEVELS[max(n - 1, 0)]


def info_mode(configured: str, chosen: str) -> str:
    """The ``compression`` of the INFO a side sends once it compresses: "s2_auto" when that is
    its configuration, else the chosen mode."""
    return COMPRESSION_S2_AUTO if configured == COMPRESSION_S2_AUTO else chosen


class S2Writer:
    """Compresses each flush of a link into the framed stream (see the module docstring):
    cramjam's streaming Snappy frame encoder, flushed per call (the stream identifier comes
    once, with the first flush; about 1 µs per small flush, where a one-shot framed
    ``compress`` costs some 50 µs)."""

    __slots__ = ("_c",)

    def __init__(self) -> None:
        self._c = cramjam.snappy.Compressor()

    def __call__(self, data: bytes | bytearray | memoryview) -> bytes:
        c = self._c
        c.compress(bytes(data))
        return bytes(c.flush())


class S2Reader:
    """Decodes the other side's framed stream (S2 or Snappy identifier), in any chunking: the
    shared decoder of :mod:`natsd.s2` (CRCs not checked: the link is TCP, or TLS which
    authenticates); a bad stream raises CompressionError."""

    __slots__ = ("_feed",)

    def __init__(self) -> None:
        self._feed = FrameDecoder().feed

    def __call__(self, data: bytes) -> bytes:
        try:
            return self._feed(data)
        except S2Error as e:
            raise CompressionError(str(e)) from None
