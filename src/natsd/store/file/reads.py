"""Reading records back from the block files: the part of
:class:`~natsd.store.file.stream_store.FileStreamStore` that owns the read-ahead chunk (it reads
the store's index and blocks), kept apart so the store's main module stays about writes,
removals and durability.

Blocks are read through ``MessageBlock.pread`` (the file, or the decoded chunks of a compressed
block: natsd.store.file.compress), by the records' plain offsets either way.

- ``read``: one message, from the file (``pread``, with a read-ahead chunk for forward
  readers) or, for bytes not yet flushed, from the pending buffer (flushed first). Every read
  verifies the record's length, checksum and sequence.
- ``iter_msgs``: a forward read taking runs of back-to-back records from one read-ahead chunk,
  each checked with one CRC call (the residue, ``record.CRC_RESIDUE``).
- ``load_run``: a consumer's delivery pass; a *uniform* stretch of records (one size, subject
  length and header length) is decoded column-wise (``_uniform``) and checked with one CRC over
  the stretch (``_run_crc``).

A record that fails any check is reported lost (``lose``: ``state().lost_msgs``/``lost_bytes``,
logged, removed from the index) and never served. The byte layout read here is documented in
:mod:`natsd.store.file.record`.
"""

from __future__ import annotations

import logging
import struct
from itertools import compress, count, repeat
from operator import ne
from typing import TYPE_CHECKING, NoReturn

from natsd.store.file.crc import BIG, crc32, crc32_big
from natsd.store.base import CorruptState, MsgNotFound, MsgRun, StoreMsg
from natsd.store.seqindex import SZ_BIG as _SZ_BIG
from natsd.store.file.record import (
    FLAG_MASK,
    HDR_BIT,
    HEAD_STRUCT,
    HEADER_SIZE,
    RECORD_OVERHEAD,
    SEQ_MASK,
    TRAILER_SIZE,
    TRAILER_STRUCT,
    RecordError,
    intact_crc,
    parse_header,
)

if TYPE_CHECKING:
    from natsd.store.file.stream_store import FileStreamStore

__all__ = ["BlockReads", "MsgCorrupt", "READ_AHEAD", "RUN_BYTES"]

log = logging.getLogger("natsd.store")

_OFF_MASK = 0xFFFFFFFF
#: Bytes read at once for a message read that misses the read-ahead cache.
READ_AHEAD = 64 * 1024
#: Most bytes iter_msgs and load_run read with one pread (a run of back-to-back records).
RUN_BYTES = 64 * 1024
_crc32 = crc32
_crc_big = crc32_big  # ISA-L for big buffers (natsd.store.file.crc)
_HEAD_UNPACK = HEAD_STRUCT.unpack_from
_TRAILER_LEN = TRAILER_SIZE
#: record size -> the crc32 a whole intact record of that size has (record.intact_crc).
_RESIDUES: dict[int, int] = {}


def _add_msg(
    sm: StoreMsg, seq: int, seqs: list, tss: list, subjects: list, hdrs: list | None, msgs: list
) -> list | None:
    """Append one message read record by record to load_run's columns; returns ``hdrs``
    (created, with None for the messages before, at the first message with headers)."""
    if sm.hdr is not None and hdrs is None:
        hdrs = [None] * len(seqs)
    seqs.append(seq)
    tss.append(sm.ts)
    subjects.append(sm.subject.encode())
    if hdrs is not None:
        hdrs.append(sm.hdr)
    msgs.append(sm.msg)
    return hdrs


def _residue(size: int) -> int:
    """The CRC-32 of a whole intact record of ``size`` bytes (see _RESIDUES); remembered."""
    if len(_RESIDUES) >= 4096:  # bounded: payload sizes can vary a lot
        _RESIDUES.clear()
    want = _RESIDUES[size] = intact_crc(size)
    return want


#: record size -> [CRC-32 of 0, 1, 2, ... intact records of that size back to back] (_run_crc).
_RUN_CRCS: dict[int, list[int]] = {}
#: (record size, subject length, header length or -1) -> the Struct that decodes such records.
_RUN_STRUCTS: dict[tuple[int, int, int], struct.Struct] = {}


def _run_crc(size: int, k: int) -> int:
    """The CRC-32 of ``k`` intact records of ``size`` bytes each, back to back.

    Any intact record of a given size has the same CRC (the residue, see ``record.CRC_RESIDUE``), and
    ``crc32(b, crc32(a)) == crc32(a + b)``: so the CRC of a run is the CRC of a run of equally
    sized stand-in records (zero bytes, their own checksum, their length), extended one record
    at a time and remembered per size."""
    lst = _RUN_CRCS.get(size)
    if lst is None:
        if len(_RUN_CRCS) >= 32:  # bounded: a stream whose sizes keep changing
            _RUN_CRCS.clear()
        lst = _RUN_CRCS[size] = [0]
    if k >= len(lst):
        body = bytes(size - _TRAILER_LEN)
        rec = body + TRAILER_STRUCT.pack(_crc32(body), size)
        c = lst[-1]
        for _ in range(len(lst), k + 1):
            c = _crc32(rec, c)
            lst.append(c)
    return lst[k]


def _uniform(data: bytes, o: int, size: int, m: int, seq: int):
    """Decode ``m`` message records of ``size`` bytes each at ``data[o:]`` that should hold
    sequences ``seq .. seq + m - 1`` and share the first one's subject and header lengths:
    ``(seqs, tss, subjects, hdrs or None, msgs)`` columns, or None when any check fails (a
    length, a sequence, the stretch's checksum): the caller then reads record by record."""
    total, raw, ts, slen = _HEAD_UNPACK(data, o)
    hlen = -1
    if total & HDR_BIT:
        p = o + HEADER_SIZE + slen
        hlen = int.from_bytes(data[p : p + 4], "little")
        plen = size - RECORD_OVERHEAD - 4 - slen - hlen
    else:
        plen = size - RECORD_OVERHEAD - slen
    if plen < 0 or (total & ~HDR_BIT) != size:
        return None
    key = (size, slen, hlen)
    st = _RUN_STRUCTS.get(key)
    if st is None:
        if len(_RUN_STRUCTS) >= 256:
            _RUN_STRUCTS.clear()
        # The record layout of natsd.store.file.record, payload and trailer included.
        fmt = f"<IQqH{slen}s{plen}s8x" if hlen < 0 else f"<IQqH{slen}sI{hlen}s{plen}s8x"
        st = _RUN_STRUCTS[key] = struct.Struct(fmt)
    seg = memoryview(data)[o : o + m * size]
    if hlen < 0:
        totals, raws, tss, slens, subjects, msgs = zip(*st.iter_unpack(seg))
        hdrs = None
    else:
        totals, raws, tss, slens, subjects, hlens, hdrs, msgs = zip(*st.iter_unpack(seg))
        if hlens.count(hlen) != m:
            return None
    if (
        totals.count(total) != m
        or slens.count(slen) != m
        or raws != tuple(range(seq, seq + m))
        or _crc_big(seg) != _run_crc(size, m)
    ):
        return None
    return raws, tss, subjects, hdrs, msgs


class MsgCorrupt(CorruptState, MsgNotFound):
    """The message's record failed its checksum on read: it was reported lost and removed.
    A MsgNotFound too, so readers treat it as deleted."""


class BlockReads:
    """Checked reads of stored messages; see the module docstring. Owns the read-ahead chunk;
    reaches the store's index and blocks through ``store``. The store binds ``read`` as its
    ``_read`` hook once (called per message: no extra attribute hop on that path)."""

    __slots__ = ("_s", "rcache")

    def __init__(self, store: FileStreamStore) -> None:
        self._s = store
        #: The read-ahead chunk: block id, start offset, end offset, bytes. Only flushed bytes
        #: are cached; whoever rewrites or drops block bytes sets it to None.
        self.rcache: tuple[int, int, int, bytes] | None = None

    def read(self, seq: int, pos: int) -> StoreMsg:
        s = self._s
        i = seq - s._base
        size = s._size(i)
        bid = pos >> 32
        off = pos & _OFF_MASK
        # Read-ahead: consumers mostly read forward, so one pread of READ_AHEAD bytes serves the
        # next records too. Only flushed bytes are cached; erase/truncate invalidate.
        c = self.rcache
        if c is not None and c[0] == bid and c[1] <= off and off + size <= c[2]:
            start = off - c[1]
            data = c[3][start : start + size]
        else:
            blk = s._blocks.get(bid)
            if blk is None:
                self.lose(seq, size, "its block is missing")
            if off + size > blk.flushed:
                # Not written yet: write it first, so that nobody (a consumer, a direct get)
                # ever sees a message that a failed write would then take back.
                s._faults.flush_for_read(seq)
                data = blk.read(off, size)
            elif c is not None and c[0] == bid and c[1] <= off < c[2] + READ_AHEAD:
                # Forward, close to the previous read (sequential, or a filtered consumer
                # skipping a few records): read ahead.
                chunk = blk.pread(max(size, READ_AHEAD), off)
                self.rcache = (bid, off, off + len(chunk), chunk)
                data = chunk[:size]
            else:
                data = blk.pread(size, off)
                self.rcache = (bid, off, off + size, data)
        try:
            rsize, has_hdr, raw, ts, slen = parse_header(data, 0)
            if rsize != size or len(data) != size:
                raise RecordError(0, "length differs from the index")
            crc = int.from_bytes(data[size - 8 : size - 4], "little")
            if (_crc_big if size >= BIG else _crc32)(memoryview(data)[: size - 8]) != crc:
                raise RecordError(0, "checksum mismatch")
            if raw != seq:
                raise RecordError(0, f"sequence {raw & SEQ_MASK} (flags {raw & FLAG_MASK:#x}) where {seq} was expected")
        except RecordError as exc:
            self.lose(seq, size, str(exc))
        p = HEADER_SIZE + slen
        hdr = None
        if has_hdr:
            hlen = int.from_bytes(data[p : p + 4], "little")
            hdr = data[p + 4 : p + 4 + hlen]
            p += 4 + hlen
        return StoreMsg(s._snames[s._sid[i]], hdr, data[p : size - _TRAILER_LEN], seq, ts)

    def iter_msgs(self, start_seq: int, end_seq: int):
        """Live messages with start_seq <= seq <= end_seq, in order (a consumer's forward read).

        Runs of consecutive live sequences whose records lie back to back in the flushed part
        of one block are read with one ``pread`` (up to RUN_BYTES) and checked in the loop with
        the CRC residue (one crc32 call per record covers checksum and repeated length, as the
        recovery scan). Anything else (unflushed bytes, a gap, a record that fails) takes the
        per-message path, which reports corrupt records lost. Between two yields the store may
        change (acks removing messages, a purge): every record is re-checked against the index
        before it is handed out."""
        s = self._s
        s._check_open()
        seq = max(start_seq, s._first)
        residues = _RESIDUES
        unpack = _HEAD_UNPACK
        crc32 = _crc32
        snames = s._snames
        while True:
            seq = s._next_live(seq)
            if not seq or seq > end_seq:
                return
            base = s._base
            posa, sza, sida = s._pos, s._sz, s._sid
            i = seq - base
            # (_pos holds offsets in the block of the entry's position segment, which ends at
            # seg_end: the next entries are in this block up to there)
            p0 = off = posa[i]
            bid = s._hi_at(i)
            seg_end = s._pos_end(i)
            blk = s._blocks.get(bid)
            end = off + s._size(i)
            if blk is None or end > blk.flushed:
                try:
                    yield self.read(seq, s._pos_at(i))
                except MsgNotFound:
                    pass
                seq += 1
                continue
            # The read-ahead chunk, when it holds this record (a previous pass read it), else
            # one pread of up to RUN_BYTES that becomes the chunk. Records are then taken while
            # the next sequence's record starts where this one ended, inside the chunk.
            c = self.rcache
            if c is not None and c[0] == bid and c[1] <= off and end <= c[2]:
                data = c[3]
                o = off - c[1]
            else:
                data = blk.pread(max(min(blk.flushed, off + RUN_BYTES), end) - off, off)
                if len(data) < end - off:  # file shorter than recorded: per-message path
                    try:
                        yield self.read(seq, s._pos_at(i))
                    except MsgNotFound:
                        pass
                    seq += 1
                    continue
                self.rcache = (bid, off, off + len(data), data)
                o = 0
            dlen = len(data)
            mv = memoryview(data)
            p0 -= o  # the record at chunk offset x is expected at position p0 + x
            hi = end_seq - base
            k = i
            bad = False
            while True:
                size = sza[k]
                if size == _SZ_BIG:  # (a record of 64 KiB or more: its size is kept aside)
                    size = s._size(k)
                rec_end = o + size
                if rec_end > dlen:
                    break
                want = residues.get(size) or _residue(size)
                total, raw, ts, slen = unpack(data, o)
                if crc32(mv[o:rec_end]) != want or raw != base + k or (total & ~HDR_BIT) != size:
                    bad = True  # the per-message path below reports it
                    break
                p = o + HEADER_SIZE + slen
                if total & HDR_BIT:
                    hlen = int.from_bytes(data[p : p + 4], "little")
                    hdr = data[p + 4 : p + 4 + hlen]
                    p += 4 + hlen
                else:
                    hdr = None
                yield StoreMsg(snames[sida[k]], hdr, data[p : rec_end - _TRAILER_LEN], base + k, ts)
                k += 1
                o = rec_end
                # Resumed: the consumer may have changed the store meanwhile; anything but the
                # next record back to back (a gap, a removal, a purge) goes back to the index.
                if (
                    k > hi
                    or s._base != base
                    or s._pos is not posa
                    or k >= len(posa)
                    or posa[k] != p0 + o
                    or k >= seg_end
                ):
                    break
            seq = base + k
            if bad:
                try:
                    yield self.read(seq, s._pos_at(k))
                except MsgNotFound:
                    pass
                seq += 1

    def load_run(self, start_seq: int, max_msgs: int) -> MsgRun:
        """The next ``max_msgs`` live messages from ``start_seq`` as one :class:`MsgRun` (see
        :meth:`natsd.store.base.StreamStore.load_run`): a consumer's delivery pass.

        Reads as ``iter_msgs`` (one read-ahead chunk of up to RUN_BYTES serves a run of records),
        but a *uniform* stretch (records of one size, subject length and header length, back to
        back, every sequence live) is decoded column-wise in C: one ``Struct.iter_unpack`` over
        the stretch gives every record's length, sequence, time, subject, header and payload,
        and one ``crc32`` over the whole stretch checks every record's checksum at once.

        Why one CRC checks them all: an intact record's CRC-32 (trailer included) depends on its
        length only (the residue, see ``record.CRC_RESIDUE``), and CRC-32 is affine, so the CRC of k
        intact records of size s back to back is one value, :func:`_run_crc` (s, k), whatever
        they hold. A single damaged record changes it exactly when its own check would fail (an
        error pattern shifted by the records after it is still not a multiple of the generator,
        which has a constant term); damage in several records is missed only if the combined
        pattern is a multiple of the generator, the odds of any CRC-32 check of that many bytes.
        When the stretch fails any check it is read again record by record (the ``iter_msgs``
        loop), which serves the good ones and reports the bad one lost through ``_read``, as
        every other read does. Other layouts (sizes that vary, unflushed bytes) take that loop
        directly."""
        s = self._s
        s._check_open()
        seqs: list = []
        tss: list = []
        subjects: list = []
        hdrs: list | None = None
        msgs: list = []
        need = max_msgs
        seq = max(start_seq, s._first)
        while need > 0:
            seq = s._next_live(seq)
            if not seq:
                break
            base = s._base
            posa, sza = s._pos, s._sz
            i = seq - base
            p0 = off = posa[i]  # (an offset in the block of the entry's position segment)
            bid = s._hi_at(i)
            seg_end = s._pos_end(i)
            size = sza[i]
            if size == _SZ_BIG:
                size = s._size(i)
            end = off + size
            blk = s._blocks.get(bid)
            data = None
            if blk is not None and end <= blk.flushed:
                c = self.rcache
                if c is not None and c[0] == bid and c[1] <= off and end <= c[2]:
                    data = c[3]
                    o = off - c[1]
                else:
                    chunk = blk.pread(max(min(blk.flushed, off + RUN_BYTES), end) - off, off)
                    if len(chunk) >= end - off:
                        self.rcache = (bid, off, off + len(chunk), chunk)
                        data = chunk
                        o = 0
            if data is None:
                # Not flushed yet, block missing, file shorter than recorded: per message.
                try:
                    sm = self.read(seq, s._pos_at(i))
                except MsgNotFound:
                    seq += 1
                    continue
                hdrs = _add_msg(sm, seq, seqs, tss, subjects, hdrs, msgs)
                need -= 1
                seq += 1
                continue
            dlen = len(data)
            # 1. The uniform stretch from here: positions p0, p0 + size, ... (a gap, a marker
            # record between two messages or another size ends it), all sizes equal.
            k = min(need, (dlen - o) // size, len(posa) - i, seg_end - i)
            m = next(compress(count(), map(ne, posa[i : i + k], range(p0, p0 + k * size, size))), k) if k > 1 else k
            if m > 1 and sza[i : i + m].count(size) == m:
                cols = _uniform(data, o, size, m, seq)
                if cols is not None:
                    if not seqs and m == max_msgs:
                        return MsgRun(cols[0], cols[1], cols[2], cols[3], cols[4])
                    if cols[3] is not None and hdrs is None:
                        hdrs = [None] * len(seqs)
                    seqs += cols[0]
                    tss += cols[1]
                    subjects += cols[2]
                    if hdrs is not None:
                        hdrs += cols[3] if cols[3] is not None else repeat(None, m)
                    msgs += cols[4]
                    need -= m
                    seq += m
                    continue
            # 2. Record by record while the next sequence's record follows back to back in the
            # chunk (iter_msgs' loop); a record that fails goes to _read, which reports it.
            residues = _RESIDUES
            unpack = _HEAD_UNPACK
            mv = memoryview(data)
            p0 -= o  # the record at chunk offset x is expected at position p0 + x
            n = len(posa)
            bad = False
            while True:
                size = sza[i]
                if size == _SZ_BIG:
                    size = s._size(i)
                rec_end = o + size
                if rec_end > dlen:
                    break
                want = residues.get(size) or _residue(size)
                total, raw, ts, slen = unpack(data, o)
                if (
                    (_crc_big if size >= BIG else _crc32)(mv[o:rec_end]) != want
                    or raw != base + i
                    or (total & ~HDR_BIT) != size
                ):
                    bad = True
                    break
                p = o + HEADER_SIZE + slen
                subj = data[o + HEADER_SIZE : p]
                if total & HDR_BIT:
                    hlen = int.from_bytes(data[p : p + 4], "little")
                    if hdrs is None:
                        hdrs = [None] * len(seqs)
                    hdrs.append(data[p + 4 : p + 4 + hlen])
                    p += 4 + hlen
                elif hdrs is not None:
                    hdrs.append(None)
                seqs.append(raw)
                tss.append(ts)
                subjects.append(subj)
                msgs.append(data[p : rec_end - _TRAILER_LEN])
                need -= 1
                i += 1
                o = rec_end
                if need == 0 or i >= n or posa[i] != p0 + o or i >= seg_end:
                    break
            seq = base + i
            if bad:
                try:
                    sm = self.read(seq, s._pos_at(i))
                except MsgNotFound:
                    pass
                else:  # pragma: no cover - a record that failed the run check but reads fine
                    hdrs = _add_msg(sm, seq, seqs, tss, subjects, hdrs, msgs)
                    need -= 1
                seq += 1
        return MsgRun(seqs, tss, subjects, hdrs, msgs)

    def read_run(self, want: list[int]) -> MsgRun:
        """The messages at sequences ``want`` (ascending; a filtered consumer's run, see
        ``IndexedStreamStore.load_filtered_run``) as one :class:`MsgRun`. A record inside the
        read-ahead chunk is decoded in place and checked as ``iter_msgs`` checks it (the CRC
        residue, its length and sequence); any other (not in the chunk, not flushed, failing a
        check) goes through :meth:`read`, which reads ahead for the next ones or reports it lost
        (it is then left out, as a removed one)."""
        s = self._s
        seqs: list = []
        tss: list = []
        subjects: list = []
        hdrs: list | None = None
        msgs: list = []
        residues = _RESIDUES
        unpack = _HEAD_UNPACK
        data = b""
        mv = memoryview(data)
        for seq in want:
            i = seq - s._base
            off = s._pos[i]  # the offset in its block (negative: absent)
            if off < 0:
                continue
            size = s._size(i)
            bid = s._hi_at(i)
            c = self.rcache
            if c is not None and c[0] == bid and c[1] <= off and off + size <= c[2]:
                if c[3] is not data:
                    data = c[3]
                    mv = memoryview(data)
                o = off - c[1]
                rec_end = o + size
                total, raw, ts, slen = unpack(data, o)
                want_crc = residues.get(size) or _residue(size)
                if (
                    raw == seq
                    and (total & ~HDR_BIT) == size
                    and (_crc_big if size >= BIG else _crc32)(mv[o:rec_end]) == want_crc
                ):
                    p = o + HEADER_SIZE + slen
                    if total & HDR_BIT:
                        hlen = int.from_bytes(data[p : p + 4], "little")
                        if hdrs is None:
                            hdrs = [None] * len(seqs)
                        hdrs.append(data[p + 4 : p + 4 + hlen])
                        msgs.append(data[p + 4 + hlen : rec_end - _TRAILER_LEN])
                    else:
                        if hdrs is not None:
                            hdrs.append(None)
                        msgs.append(data[p : rec_end - _TRAILER_LEN])
                    seqs.append(seq)
                    tss.append(ts)
                    subjects.append(data[o + HEADER_SIZE : o + HEADER_SIZE + slen])
                    continue
            try:
                sm = self.read(seq, bid << 32 | off)
            except MsgNotFound:
                continue
            hdrs = _add_msg(sm, seq, seqs, tss, subjects, hdrs, msgs)
        return MsgRun(seqs, tss, subjects, hdrs, msgs)

    def lose(self, seq: int, size: int, why: str) -> NoReturn:
        """Report message ``seq`` lost (corrupt on disk), drop it from the index, raise MsgCorrupt."""
        s = self._s
        log.error("stream %s: message %d is corrupt on disk (%s); reported lost", s.config.name, seq, why)
        self.rcache = None
        s._lost_msgs.append(seq)
        s._lost_bytes += size
        s._remove(seq)
        raise MsgCorrupt(f"message {seq} is corrupt on disk: {why}")
