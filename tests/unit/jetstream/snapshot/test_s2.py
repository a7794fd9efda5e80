"""Decoding the S2 framing nats-server 2.15 wraps its archives in (natsd.jetstream.snapshot.s2)."""

from __future__ import annotations

import pytest

from natsd.jetstream.snapshot import ArchiveError, encode_uvarint
from tests.unit.jetstream.snapshot.flows import sample_archive

pytestmark = pytest.mark.unit


def _frame(typ: int, body: bytes) -> bytes:
    return bytes([typ]) + len(body).to_bytes(3, "little") + body


def test_s2_block_literals_copies_and_repeat_offsets():
    from natsd.jetstream.snapshot import s2_decode_block

    # "abcd" literal; copy2 offset 4 len 8; S2 repeat (copy1 with offset 0) len 4+1=5
    blk = encode_uvarint(17) + bytes([3 << 2]) + b"abcd" + bytes([((8 - 1) << 2) | 2, 4, 0]) + bytes([(1 << 2) | 1, 0])
    assert s2_decode_block(blk) == b"abcd" * 4 + b"a"
    # long literal (tag 60: one length byte) and a copy1 with a real offset
    lit = bytes(range(100))
    blk = encode_uvarint(107) + bytes([60 << 2, 99]) + lit + bytes([((7 - 4) << 2) | 1, 100])
    assert s2_decode_block(blk) == lit + lit[:7]
    with pytest.raises(ArchiveError):
        s2_decode_block(encode_uvarint(10) + bytes([3 << 2]) + b"abcd")  # short


def test_s2_stream_decoder_frames_any_chunking():
    from natsd.jetstream.snapshot import S2StreamDecoder

    archive = sample_archive()
    block = encode_uvarint(len(archive)) + bytes([60 << 2, len(archive) - 1]) + archive
    stream = (
        _frame(0xFF, b"S2sTwO")
        + _frame(0x00, b"\0\0\0\0" + block)
        + _frame(0xFE, b"pad")
        + _frame(0x01, b"\0\0\0\0" + b"tail")
    )
    for step in (1, 5, len(stream)):
        d = S2StreamDecoder()
        out = b"".join(d.feed(stream[i : i + step]) for i in range(0, len(stream), step))
        assert out == archive + b"tail"
    with pytest.raises(ArchiveError):
        S2StreamDecoder().feed(_frame(0x00, b"\0\0\0\0" + block))  # no stream identifier


def test_frame_archive_is_a_snappy_stream_any_reader_decodes():
    """natsd's snapshots are Snappy-framed (cramjam): the standard decoder and ours read them back,
    in any chunking; a damaged byte fails the chunk's CRC instead of restoring wrong data."""
    import random

    import cramjam

    from natsd.jetstream.snapshot import S2StreamDecoder, frame_archive

    rnd = random.Random(3)
    pieces = [sample_archive()] + [rnd.randbytes(rnd.randrange(1, 3000)) * rnd.randrange(1, 4) for _ in range(400)]
    archive = b"".join(pieces)
    framed = b"".join(frame_archive(iter(pieces)))
    assert framed.startswith(b"\xff\x06\x00\x00sNaPpY") and len(framed) < len(archive)
    assert bytes(cramjam.snappy.decompress(framed)) == archive
    for step in (7, 4096, len(framed)):
        d = S2StreamDecoder()
        assert b"".join(d.feed(framed[i : i + step]) for i in range(0, len(framed), step)) == archive
    bad = bytearray(framed)
    bad[len(bad) // 2] ^= 0x40
    with pytest.raises(ArchiveError):
        S2StreamDecoder().feed(bytes(bad))


def test_s2_chunks_snappy_refuses_fall_back_to_the_s2_decoder():
    """A block with S2's repeat copy inside an S2 stream: cramjam's Snappy decoder refuses it, the
    pure-Python S2 decoder takes it; plain Snappy blocks in an S2 stream go through cramjam."""
    import cramjam

    from natsd.jetstream.snapshot import S2StreamDecoder

    blk = encode_uvarint(17) + bytes([3 << 2]) + b"abcd" + bytes([((8 - 1) << 2) | 2, 4, 0]) + bytes([(1 << 2) | 1, 0])
    with pytest.raises(cramjam.DecompressionError):
        cramjam.snappy.decompress_raw(blk)
    plain = bytes(cramjam.snappy.compress_raw(b"xyz" * 50))
    stream = _frame(0xFF, b"S2sTwO") + _frame(0x00, b"\0\0\0\0" + blk) + _frame(0x00, b"\0\0\0\0" + plain)
    assert S2StreamDecoder().feed(stream) == b"abcd" * 4 + b"a" + b"xyz" * 50
