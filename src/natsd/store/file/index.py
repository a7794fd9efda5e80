"""``msgs/index.db``: a snapshot of the file store's in-memory index, for fast restart.

Written on clean stop and periodically by ``sync()``, always after a flush, atomically (tmp +
fsync + rename). It records, for every block, the flushed size and the last 8 bytes at that size,
so on open the store can tell whether the blocks still hold what the index describes: blocks may
have *grown* since (those bytes are replayed record by record), but a block that shrank or whose
bytes at the recorded end differ makes the index stale and the store falls back to a full scan.

Layout (little-endian; the arrays are dumped with ``array.tobytes()`` and the byte order is
checked through the version word)::

    "NIDX"           magic
    u32              version (6) | 0x8000_0000 when written on a big-endian host
    10 x i64         first, last, first_ts, last_ts, msgs, bytes, base, n, marker_first, lost_bytes
    n x i32          pos   (offset in the block, -1 = absent, -offset - 2 = removed, its record
                            still there)
    u32              position segments (b); b x i64 first sequence, b x i64 block id: the
                     sequences from one segment's first up to the next's are in its block
    u8               sid width in bytes (w: 1, 2 or 4, the store's, see IndexedStreamStore._sid)
    n x u<w>         sid   (subject id, the largest value = absent)
    n x u32          ts    (store time, ns from the base of its time segment)
    u32              time segments (t); t x i64 first sequence, t x i64 base (Unix ns): the
                     sequences from one segment's first up to the next's are its
    n x u16          sz    (record size; 0xFFFF = 64 KiB or more, the size is in the list below)
    u32              large sizes (m); m x (i64 seq, i64 size)
    u8               1 when the per-subject chains follow, else 0 (a stream without a per-subject
                     limit above 1 keeps none, see IndexedStreamStore)
    n x u32          nxt   (distance to the next sequence of the same subject, 0 = none/unknown)
                     (versions 1 to 4 hold n x i64 pos = block_id << 32 | offset without
                     segments, n x u32 sid without its width, n x i64 ts without segments,
                     n x u32 sz, then n x u32 nxt always, without the large sizes and the flag;
                     version 1 holds no nxt either: 28 bytes per sequence where version 5 holds
                     11 to 14, 4 more with chains, issue 31)
    u32              subject slots (s), then the slots in columns (version 4):
    u32              length in bytes of the names, then the names, UTF-8, separated by "\n" (a
                     free slot is an empty name; a subject never holds whitespace, so one C-level
                     split rebuilds them: a slice per name from version 3's lengths took most of
                     a 200,000-key bucket's index load, issue 31)
    s x i64          msgs   (0 for a free slot)
    s x i64          first
    s x i64          last
    s x u8           stale flags
                     (version 3 holds s x u16 name lengths in bytes, 0xFFFF = free slot, then the
                     names one after the other, instead of the u32 length and the separated
                     names: written still when a name holds "\n"; versions 1 and 2 hold per
                     slot: u16 name length (0xFFFF = free slot), name, i64 msgs, i64 first,
                     i64 last, u8 stale flags: a restart of a 200,000-key bucket spent most of
                     its time unpacking those one by one, issue 31)
    u32              TTL entries; per entry: i64 seq, i64 expiry (Unix ns, -1 = never)
    u32              lost sequences; per entry: i64 seq
    u32              blocks; per block: u32 id, i64 flushed size, i64 max_ref, 8 bytes (file tail)
    u32              subject table cells (c, a power of two, or 0: none), then c x u32 cells
                     (slot id + 1, 0 = empty, 0xFFFFFFFF = removed; a subject's cell is found
                     from the CRC-32 of its UTF-8 name, see natsd.store.subjtab), then u32 count
                     (o) and o x u32 the slot ids kept outside the cells (version 6; a restart
                     adopts the cells instead of hashing every name into a new map, issue 31:
                     most of a 200,000-key bucket's index load; versions 1 to 5 have none)
    u32              CRC-32 (zlib's polynomial) of every preceding byte
"""

from __future__ import annotations

import mmap
import struct
from bisect import bisect_right
import sys
from array import array
from dataclasses import field

from natsd.lazydataclass import dataclass
from natsd.store.base import CorruptState
from natsd.store.file.crc import crc32_big
from natsd.store.seqindex import DEAD_SIDS, SZ_BIG, TS_MAX

__all__ = ["IndexSnapshot", "BlockInfo", "encode_index", "encode_index_parts", "decode_index"]

MAGIC = b"NIDX"
VERSION = 6
_VERSIONS = (1, 2, 3, 4, 5, 6)
_FREE = 0xFFFF
_BIG = 0x80000000
_FIXED = struct.Struct("<4sI10q")
_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")
_SS = struct.Struct("<qqqB")
_PAIR = struct.Struct("<qq")
_Q = struct.Struct("<q")
_BLK = struct.Struct("<Iqq8s")
_SID_CODES = {1: "B", 2: "H", 4: "I"}


@dataclass(slots=True)
class BlockInfo:
    """One message block as ``index.db`` records it: id, flushed size, max_ref and the file's last
    8 bytes (see the format above)."""

    id: int
    size: int
    max_ref: int
    tail: bytes


# (no repr nor eq: one holds a stream's whole index, never printed nor compared; their generated
# methods were a visible part of loading this module at a restart, issue 31)
@dataclass(slots=True, repr=False, eq=False)
class IndexSnapshot:
    """A stream's index as ``index.db`` holds it (see the format above)."""

    first: int
    last: int
    first_ts: int
    last_ts: int
    msgs: int
    bytes: int
    base: int
    marker_first: int
    lost_bytes: int
    pos: array
    sid: array
    ts: array
    sz: array
    nxt: array | None
    # Per subject slot: its name (None for a free slot) and its msgs/first/last/stale (0 for a
    # free slot): the store's own ``_snames``/``_smsgs``/``_sfirst``/``_slast``/``_sstale``,
    # adopted as they are at recovery.
    snames: list
    smsgs: array
    sfirst: array
    slast: array
    sstale: array
    ttl: list[tuple[int, int]] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    blocks: list[BlockInfo] = field(default_factory=list)
    #: sequence -> size of the messages whose ``sz`` is SZ_BIG (see IndexedStreamStore._szx).
    szx: dict[int, int] = field(default_factory=dict)
    #: The time segments (IndexedStreamStore._tss / _tsb): first sequence, base time.
    tss: array = field(default_factory=lambda: array("q"))
    tsb: array = field(default_factory=lambda: array("q"))
    #: The position segments (IndexedStreamStore._pss / _psh): first sequence, block id.
    pss: array = field(default_factory=lambda: array("q"))
    psh: array = field(default_factory=lambda: array("q"))
    #: The subject table's cells and the slots outside them (SubjectTable.cells / over_sids);
    #: None when the index holds none (before version 6, written as version 3, or a table
    #: that was never built: see SubjectTable.load).
    scells: array | None = None
    sover: list[int] = field(default_factory=list)
    #: Whether ``snames`` holds a free slot (None), as ``decode_index`` found it (a writer
    #: leaves it: encode_index looks at the names).
    free_slots: bool = False


def encode_index(snap: IndexSnapshot) -> bytes:
    """The index file's bytes (see :func:`encode_index_parts`)."""
    return b"".join(encode_index_parts(snap))


def encode_index_parts(snap: IndexSnapshot) -> tuple[bytes, bytes]:
    """The index file as (its body, its CRC-32): written one after the other, so that the body
    (11 MB for 1M messages) is copied once, not three times (``tobytes`` of each array, the
    join, ``+ crc``): a clean stop holding 1M messages encoded its 11 MB in 14-17 ms, now 1.2-1.6 ms
    (the first encode in a process, fresh pages; issue 31)."""
    n = len(snap.pos)
    assert len(snap.sid) == len(snap.ts) == len(snap.sz) == n and (snap.nxt is None or len(snap.nxt) == n)
    assert snap.sz.typecode == "H" and snap.ts.typecode == "I" and len(snap.tss) == len(snap.tsb)
    assert snap.pos.typecode == "i" and len(snap.pss) == len(snap.psh)
    subjects = _encode_subjects(snap)
    # (a name holding the separator: version 3's subject slots, and so its per-message section)
    version = VERSION if len(subjects) == 5 else 3
    if version == 3:
        sz = _wide_sizes(snap.sz, snap.szx, snap.base)
        nxt = snap.nxt if snap.nxt is not None else array("I", bytes(4 * n))
        ts = array("q", _times(snap.ts, snap.tss, snap.tsb, snap.base))
        pos = array("q", _wide_positions(snap.pos, snap.pss, snap.psh, snap.base))
        sid = snap.sid
        if sid.typecode != "I":
            sid = array("I", [x if x != DEAD_SIDS[sid.typecode] else 0xFFFFFFFF for x in sid])
        per_msg: list[bytes | memoryview] = [pos.tobytes(), sid.tobytes(), ts.tobytes(), sz.tobytes(), nxt.tobytes()]
    else:
        # (the arrays as they are in memory: the join below is their one copy)
        mv = memoryview
        per_msg = [mv(snap.pos), _U32.pack(len(snap.pss)), mv(snap.pss), mv(snap.psh)]
        per_msg += [bytes((snap.sid.itemsize,)), mv(snap.sid)]
        per_msg += [mv(snap.ts), _U32.pack(len(snap.tss)), mv(snap.tss)]
        per_msg.append(mv(snap.tsb))
        per_msg += [mv(snap.sz), _U32.pack(len(snap.szx))]
        per_msg.extend(_PAIR.pack(q, z) for q, z in sorted(snap.szx.items()))
        per_msg += [b"\0"] if snap.nxt is None else [b"\1", mv(snap.nxt)]
    version |= _BIG if sys.byteorder == "big" else 0
    parts = [
        _FIXED.pack(
            MAGIC,
            version,
            snap.first,
            snap.last,
            snap.first_ts,
            snap.last_ts,
            snap.msgs,
            snap.bytes,
            snap.base,
            n,
            snap.marker_first,
            snap.lost_bytes,
        ),
        *per_msg,
        _U32.pack(len(snap.snames)),
    ]
    parts.extend(subjects)
    parts.append(_U32.pack(len(snap.ttl)))
    parts.extend(_PAIR.pack(s, e) for s, e in snap.ttl)
    parts.append(_U32.pack(len(snap.lost)))
    parts.extend(_Q.pack(s) for s in snap.lost)
    parts.append(_U32.pack(len(snap.blocks)))
    parts.extend(_BLK.pack(b.id, b.size, b.max_ref, b.tail.rjust(8, b"\0")) for b in snap.blocks)
    if version & ~_BIG == VERSION:
        cells = snap.scells if snap.scells is not None else array("I")
        assert cells.typecode == "I"
        parts += [_U32.pack(len(cells)), memoryview(cells), _U32.pack(len(snap.sover))]
        parts.append(array("I", snap.sover).tobytes())
    data = b"".join(parts)
    return data, _U32.pack(crc32_big(data))


def decode_index(data: bytes | mmap.mmap) -> IndexSnapshot:
    """Parse and verify an index; CorruptState on any mismatch (the caller then rebuilds)."""
    if len(data) < _FIXED.size + 4:
        raise CorruptState("index: short file")
    (crc,) = _U32.unpack_from(data, len(data) - 4)
    # (ISA-L's CRC-32 where installed, as the records': ~4 ms less for a 200,000-key bucket's 11 MB)
    if crc32_big(memoryview(data)[:-4]) != crc:
        raise CorruptState("index: checksum mismatch")
    try:
        (magic, version, first, last, first_ts, last_ts, msgs, nbytes, base, n, marker_first, lost_bytes) = (
            _FIXED.unpack_from(data, 0)
        )
        if magic != MAGIC or version & ~_BIG not in _VERSIONS:
            raise CorruptState("index: bad magic or version")
        if bool(version & _BIG) != (sys.byteorder == "big"):
            raise CorruptState("index: written on a host of the other byte order")
        mv = memoryview(data)
        arrays, szx, segs, p = _decode_per_msg(mv, _FIXED.size, n, version & ~_BIG, base)
        (nslots,) = _U32.unpack_from(data, p)
        p += 4
        snames, cols, p, free = _SLOT_DECODERS.get(version & ~_BIG, _decode_subjects_v2)(mv, p, nslots)
        (nttl,) = _U32.unpack_from(data, p)
        p += 4
        ttl = []
        for _ in range(nttl):
            ttl.append(_PAIR.unpack_from(data, p))
            p += _PAIR.size
        (nlost,) = _U32.unpack_from(data, p)
        p += 4
        lost = []
        for _ in range(nlost):
            lost.append(_Q.unpack_from(data, p)[0])
            p += 8
        (nblk,) = _U32.unpack_from(data, p)
        p += 4
        blocks = []
        for _ in range(nblk):
            bid, size, max_ref, tail = _BLK.unpack_from(data, p)
            blocks.append(BlockInfo(bid, size, max_ref, tail))
            p += _BLK.size
        scells, sover, p = _decode_table(mv, p) if version & ~_BIG >= 6 else (None, [], p)
        if p != len(data) - 4:
            raise CorruptState("index: trailing bytes")
    except (struct.error, UnicodeDecodeError, IndexError) as exc:
        raise CorruptState(f"index: malformed: {exc}") from None
    return IndexSnapshot(
        first,
        last,
        first_ts,
        last_ts,
        msgs,
        nbytes,
        base,
        marker_first,
        lost_bytes,
        arrays[0],
        arrays[1],
        arrays[2],
        arrays[3],
        arrays[4],
        snames,
        cols[0],
        cols[1],
        cols[2],
        cols[3],
        ttl,
        lost,
        blocks,
        szx,
        segs[0],
        segs[1],
        segs[2],
        segs[3],
        scells,
        sover,
        free,
    )


def _decode_table(mv: memoryview, p: int) -> tuple[array | None, list[int], int]:
    """Version 6's subject table: (its cells, None when it has none; the slots outside them)."""
    (c,) = _U32.unpack_from(mv, p)
    cells, p = _column(mv, p + 4, "I", c)
    (o,) = _U32.unpack_from(mv, p)
    over, p = _column(mv, p + 4, "I", o)
    return (cells if c else None), over.tolist(), p


def _wide_sizes(sz: array, szx: dict[int, int], base: int) -> array:
    """Version 3's u32 sizes from the u16 sizes and the large ones."""
    wide = array("I", sz)
    for q, z in szx.items():
        wide[q - base] = z
    return wide


def _times(ts: array, tss: array, tsb: array, base: int) -> list[int]:
    """The times of every entry from the u32 deltas and the segments."""
    out: list[int] = []
    bounds = [q - base for q in tss[1:]] + [len(ts)]
    lo = 0
    for b, hi in zip(tsb, bounds):
        out += map(b.__add__, ts[lo:hi])
        lo = hi
    return out


def _wide_positions(pos: array, pss: array, psh: array, base: int) -> list[int]:
    """Version 3's i64 positions (block_id << 32 | offset) from the offsets and the segments."""
    out: list[int] = []
    bounds = [q - base for q in pss[1:]] + [len(pos)]
    lo = 0
    for hi, end in zip(psh, bounds):
        shift = hi << 32
        out += [p if p == -1 else (shift | p if p >= 0 else -(shift | (-p - 2)) - 2) for p in pos[lo:end]]
        lo = end
    return out


def _split_positions(wide: array, base: int) -> tuple[array, array, array]:
    """Version 4's i64 positions as offsets and position segments (one per block)."""
    pos = array("i")
    pss, psh = array("q"), array("q")
    cur = None
    for i, p in enumerate(wide):
        if p == -1:
            pos.append(-1)
            continue
        full = p if p >= 0 else -p - 2
        hi, off = full >> 32, full & 0xFFFFFFFF
        if hi != cur:
            pss.append(base + i)
            psh.append(hi)
            cur = hi
        pos.append(off if p >= 0 else -off - 2)
    return pos, pss, psh


def _segments(wide: array, base: int) -> tuple[array, array, array]:
    """Version 4's i64 times as u32 deltas and time segments (see IndexedStreamStore._ts_extend)."""
    ts = array("I")
    tss, tsb = array("q"), array("q")
    i, n = 0, len(wide)
    while i < n:
        b = wide[i]
        # Times are in order nearly always: the segment ends at the first one out of reach.
        j = max(bisect_right(wide, b + TS_MAX, i), i + 1)
        chunk = wide[i:j]
        if min(chunk) < b or max(chunk) - b > TS_MAX:
            j = i + 1
            while j < n and 0 <= wide[j] - b <= TS_MAX:
                j += 1
            chunk = wide[i:j]
        tss.append(base + i)
        tsb.append(b)
        ts.extend(array("I", map(b.__rsub__, chunk)))
        i = j
    return ts, tss, tsb


def _decode_per_msg(
    mv: memoryview, p: int, n: int, version: int, base: int
) -> tuple[list, dict[int, int], tuple[array, array, array, array], int]:
    """The per-message arrays (pos as offsets, sid, ts as u32 deltas, sz as u16, nxt or None),
    the large sizes and the time and position segments."""
    szx: dict[int, int] = {}
    if version >= 5:
        pos, p = _column(mv, p, "i", n)
        (b,) = _U32.unpack_from(mv, p)
        pss, p = _column(mv, p + 4, "q", b)
        psh, p = _column(mv, p, "q", b)
        code = _SID_CODES.get(mv[p])
        if code is None:
            raise CorruptState("index: bad subject id width")
        sid, p = _column(mv, p + 1, code, n)
        ts, p = _column(mv, p, "I", n)
        (t,) = _U32.unpack_from(mv, p)
        tss, p = _column(mv, p + 4, "q", t)
        tsb, p = _column(mv, p, "q", t)
        if (n and (not t or tss[0] > base)) or (t and not n):
            raise CorruptState("index: time segments do not cover the sequences")
        sz, p = _column(mv, p, "H", n)
        (m,) = _U32.unpack_from(mv, p)
        p += 4
        for _ in range(m):
            q, z = _PAIR.unpack_from(mv, p)
            szx[q] = z
            p += _PAIR.size
        has_nxt = mv[p]
        p += 1
        nxt = None
        if has_nxt:
            nxt, p = _column(mv, p, "I", n)
        return [pos, sid, ts, sz, nxt], szx, (tss, tsb, pss, psh), p
    wide_pos, p = _column(mv, p, "q", n)
    pos, pss, psh = _split_positions(wide_pos, base)
    sid, p = _column(mv, p, "I", n)
    wide_ts, p = _column(mv, p, "q", n)
    ts, tss, tsb = _segments(wide_ts, base)
    wide, p = _column(mv, p, "I", n)
    nxt = array("I", bytes(4 * n))
    if version > 1:
        nxt, p = _column(mv, p, "I", n)
    if max(wide, default=0) < SZ_BIG:
        sz = array("H", wide)
    else:
        sz = array("H", [z if z < SZ_BIG else SZ_BIG for z in wide])
        szx = {base + i: z for i, z in enumerate(wide) if z >= SZ_BIG}
    return [pos, sid, ts, sz, nxt], szx, (tss, tsb, pss, psh), p


def _encode_subjects(snap: IndexSnapshot) -> list[bytes | memoryview]:
    """The subject slots in columns: version 4's five parts, or version 3's six when a name
    holds the separator (see the module docstring)."""
    names = snap.snames
    assert len(snap.smsgs) == len(snap.sfirst) == len(snap.slast) == len(snap.sstale) == len(names)
    cols: list[bytes | memoryview] = [memoryview(c) for c in (snap.smsgs, snap.sfirst, snap.slast, snap.sstale)]
    # (no scan of the names for None and for "": each took ~3-5 ms of a stop holding 100,000
    # subjects, issue 31; the join refuses a None, and an empty name shows in the joined text)
    try:
        text = "\n".join(names)
        free = False
    except TypeError:
        text = "\n".join(["" if x is None else x for x in names])
        free = True
    empty = bool(names) and (not text or text[0] == "\n" or text[-1] == "\n" or "\n\n" in text)
    if text.count("\n") == max(len(names) - 1, 0) and (free or not empty):
        blob = text.encode()
        return [_U32.pack(len(blob)) + blob, *cols]
    encoded = [None if x is None else x.encode() for x in names]
    lens = array("H", [_FREE if b is None else len(b) for b in encoded])
    return [lens.tobytes(), b"".join(b for b in encoded if b is not None), *cols]


def _column(mv: memoryview, p: int, code: str, n: int) -> tuple[array, int]:
    a = array(code)
    end = p + a.itemsize * n
    a.frombytes(mv[p:end])
    if len(a) != n:
        raise CorruptState("index: short columns")
    return a, end


def _decode_subjects_v4(
    mv: memoryview, p: int, nslots: int
) -> tuple[list, tuple[array, array, array, array], int, bool]:
    """Version 4's columns -> (names, None for free slots; (msgs, first, last, stale) arrays;
    the offset after them; whether a slot is free)."""
    (size,) = _U32.unpack_from(mv, p)
    p += 4
    blob = bytes(mv[p : p + size])
    if len(blob) != size:
        raise CorruptState("index: short subject names")
    p += size
    snames: list = blob.decode().split("\n") if nslots else []
    if len(snames) != nslots:
        raise CorruptState("index: subject names do not match the slots")
    # A free slot is an empty name: an empty first or last one, or two separators in a row
    # (told from the bytes: a scan of 200,000 names for "" took ~4 ms, issue 31).
    free = bool(nslots) and (not blob or blob[0] == 10 or blob[-1] == 10 or b"\n\n" in blob)
    if free:
        snames = [x if x else None for x in snames]
    msgs, p = _column(mv, p, "q", nslots)
    first, p = _column(mv, p, "q", nslots)
    last, p = _column(mv, p, "q", nslots)
    stale, p = _column(mv, p, "B", nslots)
    return snames, (msgs, first, last, stale), p, free


def _decode_subjects(mv: memoryview, p: int, nslots: int) -> tuple[list, tuple[array, array, array, array], int, bool]:
    """Version 3's columns -> (names, None for free slots; (msgs, first, last, stale) arrays)."""
    lens, p = _column(mv, p, "H", nslots)
    total = sum(lens) - _FREE * lens.count(_FREE)
    blob = bytes(mv[p : p + total])
    if len(blob) != total:
        raise CorruptState("index: short subject names")
    p += total
    msgs, p = _column(mv, p, "q", nslots)
    first, p = _column(mv, p, "q", nslots)
    last, p = _column(mv, p, "q", nslots)
    stale, p = _column(mv, p, "B", nslots)
    # Subjects are nearly always ASCII: then byte offsets are character offsets and the names
    # are slices of one decoded string.
    text: str | bytes = blob.decode("ascii") if blob.isascii() else blob
    snames: list = []
    add = snames.append
    off = 0
    for ln in lens:
        if ln == _FREE:
            add(None)
        else:
            add(text[off : off + ln])
            off += ln
    if not isinstance(text, str):
        snames = [n if n is None else n.decode() for n in snames]
    return snames, (msgs, first, last, stale), p, _FREE in lens


def _decode_subjects_v2(
    data: bytes | memoryview, p: int, nslots: int
) -> tuple[list, tuple[array, array, array, array], int, bool]:
    """Versions 1 and 2: one record per slot."""
    snames: list = []
    cols = (array("q"), array("q"), array("q"), array("B"))
    for _ in range(nslots):
        (ln,) = _U16.unpack_from(data, p)
        p += 2
        if ln == _FREE:
            snames.append(None)
            for c in cols:
                c.append(0)
            continue
        snames.append(bytes(data[p : p + ln]).decode())
        p += ln
        for c, v in zip(cols, _SS.unpack_from(data, p)):
            c.append(v)
        p += _SS.size
    return snames, cols, p, None in snames


_SLOT_DECODERS = {
    6: _decode_subjects_v4,
    5: _decode_subjects_v4,
    4: _decode_subjects_v4,
    3: _decode_subjects,
}  # (versions 1 and 2: _decode_subjects_v2)
