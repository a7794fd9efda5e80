"""Block records: the byte layout of ``msgs/<n>.blk`` (pure encode/decode, no I/O).

A block file is a plain concatenation of records. Every record, little-endian::

    offset  size  field
    0       4     total_len   u32: length of the whole record, trailer included.
                              bit 31 set = the record has a header block (hdr_len + hdr present)
    4       8     seq         u64: stream sequence; the top bits are flags (FLAG_*), the rest the seq
    12      8     ts          i64: store time, Unix ns (marker records: see below)
    20      2     subj_len    u16
    22      n     subject     UTF-8
    [       4     hdr_len     u32 ] only when bit 31 of total_len is set
    [       m     hdr         raw "NATS/1.0\\r\\n..." block ]
    ..      k     msg         payload
    -8      4     checksum    u32: CRC-32 (IEEE, as zlib.crc32) of every preceding byte of the record
    -4      4     total_len   u32: total_len again (without the header bit)

So a message costs ``22 + subject + [4 + hdr] + msg + 8`` bytes: exactly the reference's
``fileStoreMsgSize``, which is why ``state.bytes`` matches nats-server's STREAM.INFO. The
checksum is CRC-32 rather than the reference's keyed HighwayHash-64 because it runs in C (ISA-L's
when the ``isal`` package is there, else the standard library's ``zlib.crc32``: same values, see
natsd.store.file.crc) and detects every torn write and every burst error shorter than 32 bits;
the repeated length makes a record checkable from its end too, and a torn tail (a record cut
anywhere) never passes both checks.

Flags in the top bits of ``seq`` (the reference uses bit 63 "erased" and bit 62 "tombstone"
the same way):

- FLAG_ERASED   the message was securely erased in place: subject, headers and payload were
                overwritten with random bytes and the checksum recomputed. Counts as deleted.
- FLAG_TOMB     tombstone: message ``seq`` (stored earlier) was removed. No subject/payload.
- FLAG_TTL      message ``seq`` has its own expiry: ``ts`` holds the expiry time (Unix ns) or
                -1 for "never expires".
- FLAG_FIRST    every sequence below ``seq`` is gone (limits, purge, compact); if ``seq`` is above
                the last sequence, the stream's last sequence becomes ``seq - 1``.
- FLAG_TRUNC    every sequence above ``seq`` is gone; the last sequence becomes ``seq``.
- FLAG_SKIP     sequences ``seq .. seq + count - 1`` were consumed without a message; ``msg`` is
                ``count`` as u64, ``ts`` the time of the skip.

Records are applied in file order (blocks by number, then by offset) at recovery. Because each
record is self-checking (length at both ends, CRC), recovery that meets a damaged one finds the
next intact record by trying each following offset and goes on from there
(natsd.store.file.recovery.next_record); only the damaged bytes are lost.
"""

from __future__ import annotations

import struct

from natsd.lazydataclass import dataclass
from natsd.store.file.crc import BIG, crc32, crc32_big
from natsd.store.file.layout import MAX_RECORD_SIZE

__all__ = [
    "HDR_BIT",
    "FLAG_ERASED",
    "FLAG_TOMB",
    "FLAG_TTL",
    "FLAG_FIRST",
    "FLAG_TRUNC",
    "FLAG_SKIP",
    "FLAG_MASK",
    "SEQ_MASK",
    "HEADER_SIZE",
    "TRAILER_SIZE",
    "RECORD_OVERHEAD",
    "file_store_msg_size",
    "encode_msg_into",
    "encode_msgs",
    "encode_msgs_into",
    "encode_subject_msgs",
    "encode_marker",
    "erase_record",
    "Record",
    "decode_record",
    "RecordError",
    "parse_header",
    "HEAD_STRUCT",
    "TRAILER_STRUCT",
    "CRC_RESIDUE",
    "intact_crc",
]

HDR_BIT = 1 << 31
FLAG_ERASED = 1 << 63
FLAG_TOMB = 1 << 62
FLAG_TTL = 1 << 61
FLAG_FIRST = 1 << 60
FLAG_TRUNC = 1 << 59
FLAG_SKIP = 1 << 58
FLAG_MASK = FLAG_ERASED | FLAG_TOMB | FLAG_TTL | FLAG_FIRST | FLAG_TRUNC | FLAG_SKIP
SEQ_MASK = (1 << 58) - 1

_HEAD = struct.Struct("<IQqH")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_TRAILER = struct.Struct("<II")
#: The fixed header (total_len, seq, ts, subj_len) and the trailer (crc32, total_len) structs.
HEAD_STRUCT = _HEAD
TRAILER_STRUCT = _TRAILER
HEADER_SIZE = _HEAD.size  # 22
TRAILER_SIZE = _TRAILER.size  # 8
RECORD_OVERHEAD = HEADER_SIZE + TRAILER_SIZE  # 30, as the reference

#: CRC-32 residue: the CRC of any data followed by its own CRC (u32 little-endian) is this
#: constant. So a record checks out, checksum *and* repeated length, when the CRC of all of it
#: equals ``intact_crc(total_len)``: one C call per record, no trailer unpacking (the recovery
#: scan, the resync after damage and the forward reads all check records this way).
CRC_RESIDUE = 0x2144DF1C

_crc32 = crc32
_crc_big = crc32_big  # ISA-L for big buffers (natsd.store.file.crc)
_pack_head = _HEAD.pack
_pack_u32 = _U32.pack
_pack_trailer = _TRAILER.pack


class RecordError(Exception):
    """A record failed its length or checksum check (``offset`` into the buffer given)."""

    def __init__(self, offset: int, detail: str) -> None:
        super().__init__(f"bad record at offset {offset}: {detail}")
        self.offset = offset
        self.detail = detail


def intact_crc(size: int) -> int:
    """The CRC-32 of a whole intact record of ``size`` bytes, trailer included, whatever it
    holds (see CRC_RESIDUE)."""
    return _crc32(size.to_bytes(4, "little"), CRC_RESIDUE)


def file_store_msg_size(subject: str, hdr: bytes | None, msg: bytes) -> int:
    """Record size of a message = the reference's ``fileStoreMsgSize`` (used for state.bytes).
    ``subject`` length is in bytes of its UTF-8 form (ASCII in practice)."""
    n = len(subject) if subject.isascii() else len(subject.encode())
    if hdr:
        return 34 + n + len(hdr) + len(msg)
    return 30 + n + len(msg)


def encode_msg_into(buf: bytearray, seq: int, ts: int, subject: bytes, hdr: bytes | None, msg: bytes) -> int:
    """Append one message record to ``buf``; returns its length. A big payload is not copied
    before it is appended: the checksum is computed incrementally over the pieces."""
    slen = len(subject)
    assert 0 < seq <= SEQ_MASK and slen < 0x10000
    if len(msg) < BIG:
        # A small record (a 128 B publish): one joined copy, one checksum call and two appends
        # cost less than a call and an append per piece (the per-publish path of many subjects,
        # issue 31, where there is no run to encode at once).
        if hdr:
            total = 34 + slen + len(hdr) + len(msg)
            rec = _pack_head(total | HDR_BIT, seq, ts, slen) + subject + _pack_u32(len(hdr)) + hdr + msg
        else:
            total = 30 + slen + len(msg)
            rec = _pack_head(total, seq, ts, slen) + subject + msg
        buf += rec
        buf += _pack_trailer(_crc32(rec), total)
        return total
    if hdr:
        total = 34 + slen + len(hdr) + len(msg)
        head = _pack_head(total | HDR_BIT, seq, ts, slen)
        hlen = _pack_u32(len(hdr))
        crc = (_crc_big if len(msg) >= BIG else _crc32)(msg, _crc32(hdr, _crc32(hlen, _crc32(subject, _crc32(head)))))
        buf += head
        buf += subject
        buf += hlen
        buf += hdr
    else:
        total = 30 + slen + len(msg)
        head = _pack_head(total, seq, ts, slen)
        crc = (_crc_big if len(msg) >= BIG else _crc32)(msg, _crc32(subject, _crc32(head)))
        buf += head
        buf += subject
    buf += msg
    buf += _pack_trailer(crc, total)
    return total


def encode_msgs(seq: int, ts: int, subject: bytes, msgs: list[bytes], hdr_len: int = 0) -> bytes:
    """Records of ``msgs`` (all of one length) as sequences ``seq``, ``seq + 1``..., all with
    timestamp ``ts``, back to back: byte for byte what :func:`encode_msg_into` appends for each
    (the layout of the module docstring: head, subject, payload, CRC-32 of those, length).
    With ``hdr_len`` > 0 each item is a header block of that many bytes and the payload, as an
    HPUB carries them: the record's ``hdr_len`` field goes between subject and header block,
    which are then already in place. Two list comprehensions instead of a call per record: a
    burst of asynchronous publishes is encoded at C speed but for the checksums."""
    slen = len(subject)
    assert 0 < seq and seq + len(msgs) - 1 <= SEQ_MASK and slen < 0x10000
    if hdr_len:
        size = 34 + slen + len(msgs[0])
        total = size | HDR_BIT
        subject += _pack_u32(hdr_len)
    else:
        size = total = 30 + slen + len(msgs[0])
    crc = _crc_big if size >= BIG else _crc32
    pack_head = _pack_head
    pack_trailer = _pack_trailer
    recs = [pack_head(total, s, ts, slen) + subject + m for s, m in zip(range(seq, seq + len(msgs)), msgs)]
    return b"".join([r + pack_trailer(crc(r), size) for r in recs])


#: From this payload size on, :func:`encode_msgs_into` appends each record's pieces straight to
#: the buffer (one copy of the payload) instead of building the records first: measured with
#: ``bench/bench_jspub.py pub --size S --pipeline 200 --read 256000``, the three extra copies of a
#: payload cost more than the per-record Python calls they save from ~2 KB on (4 KB: 6.2 against
#: 7.2 µs per publish; 16 KB: 14 against 16.5; 1 KB: even; 128 B: the comprehensions win).
BIG_RECORD = 2048


def encode_msgs_into(buf: bytearray, seq: int, ts: int, subject: bytes, msgs: list[bytes], hdr_len: int = 0) -> None:
    """Append :func:`encode_msgs` of the arguments to ``buf`` (same bytes), copying big payloads
    once (``BIG_RECORD``)."""
    m0 = len(msgs[0])
    if m0 < BIG_RECORD:
        buf += encode_msgs(seq, ts, subject, msgs, hdr_len)
        return
    slen = len(subject)
    assert 0 < seq and seq + len(msgs) - 1 <= SEQ_MASK and slen < 0x10000
    if hdr_len:
        # (subject and header length together: the record's bytes between head and header)
        total = (34 + slen + m0) | HDR_BIT
        subject += _pack_u32(hdr_len)
    else:
        total = 30 + slen + m0
    size = total & ~HDR_BIT
    crc = _crc_big
    pack_head = _pack_head
    pack_trailer = _pack_trailer
    for s, m in zip(range(seq, seq + len(msgs)), msgs):
        head = pack_head(total, s, ts, slen)
        buf += head
        buf += subject
        buf += m
        buf += pack_trailer(crc(m, _crc32(subject, _crc32(head))), size)


def encode_subject_msgs(
    seq: int, ts: int, subjects: list[bytes], msgs: list[bytes], slens: list[int], sizes: list[int]
) -> bytes:
    """Header-less records of ``msgs[i]`` to ``subjects[i]`` as sequences ``seq``, ``seq + 1``...,
    all with timestamp ``ts``, back to back: byte for byte what :func:`encode_msg_into` appends
    for each (a burst of publishes over many subjects, small payloads: see ``BIG_RECORD``).
    ``slens``/``sizes``: each subject's length and record's size (30 + subject + payload), which
    the caller has already."""
    assert 0 < seq and seq + len(msgs) - 1 <= SEQ_MASK
    pack_head = _pack_head
    pack_trailer = _pack_trailer
    crc = _crc32
    recs = [
        pack_head(size, s, ts, slen) + sb + m
        for s, size, slen, sb, m in zip(range(seq, seq + len(msgs)), sizes, slens, subjects, msgs)
    ]
    return b"".join([r + pack_trailer(crc(r), size) for r, size in zip(recs, sizes)])


def encode_marker(flag: int, seq: int, ts: int = 0, count: int | None = None) -> bytes:
    """A record with no subject: tombstone, TTL, FIRST, TRUNC or SKIP (``count`` as the body)."""
    assert flag in (FLAG_TOMB, FLAG_TTL, FLAG_FIRST, FLAG_TRUNC, FLAG_SKIP) and 0 <= seq <= SEQ_MASK
    body = _U64.pack(count) if count is not None else b""
    total = RECORD_OVERHEAD + len(body)
    data = _pack_head(total, seq | flag, ts, 0) + body
    return data + _pack_trailer(_crc32(data), total)


def erase_record(rec: bytes, random_bytes) -> bytes:
    """The erased form of message record ``rec``: same length, FLAG_ERASED set, everything
    after the fixed header (subject, headers, payload) replaced with ``random_bytes(n)``, and a
    fresh checksum. The lengths stay so the block can still be walked record by record."""
    total, seq, ts, slen = _HEAD.unpack_from(rec, 0)
    size = total & ~HDR_BIT
    assert size == len(rec)
    head = _pack_head(total, seq | FLAG_ERASED, ts, slen)
    body_len = size - HEADER_SIZE - TRAILER_SIZE
    body = random_bytes(body_len)
    if total & HDR_BIT:
        # Keep hdr_len readable so the record stays structurally valid.
        body = body[:slen] + rec[HEADER_SIZE + slen : HEADER_SIZE + slen + 4] + body[slen + 4 :]
    data = head + body
    return data + _pack_trailer(_crc32(data), size)


@dataclass(slots=True)
class Record:
    """A decoded record. ``flags`` is the FLAG_* bits of the seq field, ``seq`` the sequence."""

    seq: int
    flags: int
    ts: int
    subject: bytes
    hdr: bytes | None
    msg: bytes
    size: int


def parse_header(buf, offset: int) -> tuple[int, int, int, int, int]:
    """(size, has_hdr, raw_seq, ts, subj_len) of the record at ``offset``; RecordError if the
    fixed header is short or the length is implausible."""
    if len(buf) - offset < HEADER_SIZE:
        raise RecordError(offset, "short header")
    total, raw_seq, ts, slen = _HEAD.unpack_from(buf, offset)
    size = total & ~HDR_BIT
    if size < RECORD_OVERHEAD + slen or size > MAX_RECORD_SIZE:
        raise RecordError(offset, f"implausible length {size}")
    return size, total & HDR_BIT, raw_seq, ts, slen


def decode_record(buf, offset: int = 0) -> Record:
    """Decode and verify the record at ``offset`` of ``buf`` (bytes or memoryview).

    Checks, in order: the fixed header is complete, the length is plausible and the record is
    complete, the trailing length repeats the leading one, the CRC matches, the header-block
    length fits. Raises RecordError otherwise; never returns unverified data.
    """
    size, has_hdr, raw_seq, ts, slen = parse_header(buf, offset)
    end = offset + size
    if end > len(buf):
        raise RecordError(offset, "short record")
    crc, total2 = _TRAILER.unpack_from(buf, end - TRAILER_SIZE)
    if total2 != size:
        raise RecordError(offset, "trailing length mismatch")
    if (_crc_big if size >= BIG else _crc32)(buf[offset : end - TRAILER_SIZE]) != crc:
        raise RecordError(offset, "checksum mismatch")
    p = offset + HEADER_SIZE
    subject = bytes(buf[p : p + slen])
    p += slen
    hdr = None
    if has_hdr:
        if p + 4 > end - TRAILER_SIZE:
            raise RecordError(offset, "header length past the record")
        (hlen,) = _U32.unpack_from(buf, p)
        p += 4
        if p + hlen > end - TRAILER_SIZE:
            raise RecordError(offset, "header block past the record")
        hdr = bytes(buf[p : p + hlen])
        p += hlen
    msg = bytes(buf[p : end - TRAILER_SIZE])
    return Record(raw_seq & SEQ_MASK, raw_seq & FLAG_MASK, ts, subject, hdr, msg, size)


def marker_count(rec: Record) -> int:
    """The count carried by a FLAG_SKIP record."""
    if len(rec.msg) != 8:
        raise RecordError(0, "skip record without a count")
    return _U64.unpack(rec.msg)[0]
