"""Block record encode/decode: layout, sizes, and every corruption detected."""

from __future__ import annotations

import os
import struct
import zlib

import pytest

from natsd.store.file.record import (
    FLAG_ERASED,
    FLAG_FIRST,
    FLAG_SKIP,
    FLAG_TOMB,
    FLAG_TTL,
    RECORD_OVERHEAD,
    RecordError,
    decode_record,
    BIG_RECORD,
    encode_marker,
    encode_msg_into,
    encode_msgs,
    encode_msgs_into,
    erase_record,
    file_store_msg_size,
    intact_crc,
    marker_count,
)

HDR = b"NATS/1.0\r\nNats-Msg-Id: 1\r\n\r\n"


def encode(seq=7, ts=123, subject=b"foo.bar", hdr=None, msg=b"hello"):
    buf = bytearray()
    n = encode_msg_into(buf, seq, ts, subject, hdr, msg)
    assert n == len(buf)
    return bytes(buf)


@pytest.mark.parametrize("hdr", [None, HDR])
def test_round_trip(hdr):
    rec = encode(hdr=hdr)
    r = decode_record(rec)
    assert (r.seq, r.flags, r.ts, r.subject, r.hdr, r.msg, r.size) == (7, 0, 123, b"foo.bar", hdr, b"hello", len(rec))


def test_size_is_the_reference_file_store_size():
    # 22 + subj + msg + 8 without headers; 22 + subj + 4 + hdr + msg + 8 with (fileStoreMsgSize).
    assert len(encode(hdr=None)) == 22 + 7 + 5 + 8 == file_store_msg_size("foo.bar", None, b"hello")
    assert len(encode(hdr=HDR)) == 22 + 7 + 4 + len(HDR) + 5 + 8 == file_store_msg_size("foo.bar", HDR, b"hello")
    assert RECORD_OVERHEAD == 30


def test_exact_layout():
    rec = encode(seq=1, ts=2, subject=b"a", msg=b"b")
    total, seq, ts, slen = struct.unpack_from("<IQqH", rec)
    assert (total, seq, ts, slen) == (len(rec), 1, 2, 1)
    assert rec[22:24] == b"ab"
    assert struct.unpack_from("<I", rec, len(rec) - 4)[0] == len(rec)
    with_hdr = encode(hdr=HDR)
    assert struct.unpack_from("<I", with_hdr)[0] & (1 << 31)


@pytest.mark.parametrize("hdr", [None, HDR])
def test_every_single_bit_flip_is_detected(hdr):
    rec = encode(hdr=hdr)
    for i in range(len(rec)):
        for bit in (0, 3, 7):
            bad = bytearray(rec)
            bad[i] ^= 1 << bit
            with pytest.raises(RecordError):
                decode_record(bytes(bad))


def test_every_truncation_is_detected():
    rec = encode(hdr=HDR)
    for cut in range(len(rec)):
        with pytest.raises(RecordError):
            decode_record(rec[:cut])


def test_decode_at_offset_with_trailing_data():
    a, b = encode(seq=1), encode(seq=2, hdr=HDR)
    buf = a + b + b"\x00garbage"
    assert decode_record(buf, 0).seq == 1
    assert decode_record(buf, len(a)).seq == 2


def test_implausible_length_rejected():
    rec = bytearray(encode())
    struct.pack_into("<I", rec, 0, 0x7FFFFFFF)
    with pytest.raises(RecordError, match="implausible"):
        decode_record(bytes(rec))


def test_markers():
    t = decode_record(encode_marker(FLAG_TOMB, 42))
    assert (t.seq, t.flags, t.subject, t.msg, t.size) == (42, FLAG_TOMB, b"", b"", 30)
    s = decode_record(encode_marker(FLAG_SKIP, 10, ts=5, count=3))
    assert (s.seq, s.flags, s.ts, marker_count(s)) == (10, FLAG_SKIP, 5, 3)


@pytest.mark.parametrize("hdr", [None, HDR])
def test_erase_keeps_length_replaces_content(hdr):
    rec = encode(hdr=hdr, msg=b"secret-payload")
    erased = erase_record(rec, os.urandom)
    assert len(erased) == len(rec)
    assert b"secret-payload" not in erased and b"foo.bar" not in erased
    r = decode_record(erased)
    assert r.flags == FLAG_ERASED and r.seq == 7


@pytest.mark.parametrize("hdr", [None, HDR])
def test_intact_crc_is_the_crc_of_any_whole_intact_record(hdr):
    # The one-call check recovery and the forward reads use: the CRC of a whole record, trailer
    # included, depends on its length only; any damage changes it.
    recs = [
        encode(hdr=hdr),
        encode(seq=9, ts=-5, subject=b"x" * 300, hdr=hdr, msg=os.urandom(1000)),
        erase_record(encode(hdr=hdr), os.urandom),
        encode_marker(FLAG_TOMB, 3, 9),
        encode_marker(FLAG_TTL, 4, -1),
        encode_marker(FLAG_FIRST, 5),
        encode_marker(FLAG_SKIP, 6, 1, count=7),
    ]
    for rec in recs:
        assert zlib.crc32(rec) == intact_crc(len(rec))
        for i in (0, 4, len(rec) // 2, len(rec) - 5, len(rec) - 1):
            bad = bytearray(rec)
            bad[i] ^= 0x10
            assert zlib.crc32(bad) != intact_crc(len(rec))


@pytest.mark.parametrize("size", [0, 1, 128, BIG_RECORD - 1, BIG_RECORD, 16384])
def test_a_run_encodes_as_its_records_one_by_one(size):
    """encode_msgs and encode_msgs_into (both sides of BIG_RECORD) give exactly the bytes of
    encode_msg_into per message, and the records decode back."""
    msgs = [bytes([65 + i]) * size for i in range(5)]
    one_by_one = b"".join(encode(seq=40 + i, ts=99, subject=b"s.run", msg=m) for i, m in enumerate(msgs))
    assert encode_msgs(40, 99, b"s.run", msgs) == one_by_one
    buf = bytearray(b"prefix")
    encode_msgs_into(buf, 40, 99, b"s.run", msgs)
    assert bytes(buf) == b"prefix" + one_by_one
    off = 6
    for i, m in enumerate(msgs):
        r = decode_record(bytes(buf), off)
        assert (r.seq, r.ts, r.subject, r.msg) == (40 + i, 99, b"s.run", m)
        off += r.size
    assert off == len(buf)
