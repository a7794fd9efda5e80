"""natsd.s2: the one framed-stream decoder of leafnode links and snapshot archives."""

from __future__ import annotations

import cramjam
import pytest

from natsd.s2 import MAX_BLOCK, S2_STREAM_ID, SNAPPY_STREAM_ID, FrameDecoder, S2Error

pytestmark = pytest.mark.unit

DATA = b"".join(b"message %d of the stream;" % i for i in range(3000))


def framed() -> bytes:
    return bytes(cramjam.snappy.compress(DATA))  # cramjam's framed (sNaPpY) stream


@pytest.mark.parametrize("check", [False, True])
def test_any_chunking_decodes_the_whole_stream(check):
    stream = framed()
    assert stream.startswith(SNAPPY_STREAM_ID)
    for step in (1, 3, 4, 5, 1000, len(stream)):
        d = FrameDecoder(check_snappy_crc=check)
        assert b"".join(d.feed(stream[i : i + step]) for i in range(0, len(stream), step)) == DATA


def test_a_bad_crc_is_refused_only_when_checked():
    bad = bytearray(framed())
    bad[len(SNAPPY_STREAM_ID) + 4] ^= 0x01  # the first chunk's CRC
    assert FrameDecoder().feed(bytes(bad)) == DATA  # (links: TCP/TLS, CRCs not read)
    with pytest.raises(S2Error, match="corrupt Snappy frame"):
        FrameDecoder(check_snappy_crc=True).feed(bytes(bad))


def test_s2_identifier_skippable_frames_and_stored_chunks():
    stored = b"\x01" + (4 + 5).to_bytes(3, "little") + b"\0\0\0\0" + b"hello"
    skip = b"\x80" + (3).to_bytes(3, "little") + b"abc"
    assert FrameDecoder().feed(S2_STREAM_ID + skip + stored + stored) == b"hellohello"


@pytest.mark.parametrize(
    "stream,why",
    [
        (b"\x01\x09\x00\x00\0\0\0\0hello", "without identifier"),
        (b"\xff\x06\x00\x00NoNoNo", "invalid S2 stream identifier"),
        (S2_STREAM_ID + b"\x02\x01\x00\x00x", "unsupported S2 frame type"),
        (S2_STREAM_ID + b"\x01\x02\x00\x00xx", "corrupt S2 frame"),
        (S2_STREAM_ID + b"\x00" + (MAX_BLOCK + 1).to_bytes(3, "little"), "too large"),
        (S2_STREAM_ID + b"\x00\x06\x00\x00\0\0\0\0\x05\xff", "corrupt S2 block"),
    ],
)
def test_bad_streams_raise_s2_error(stream, why):
    with pytest.raises(S2Error, match=why):
        FrameDecoder().feed(stream)
