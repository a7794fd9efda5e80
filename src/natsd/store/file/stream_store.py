"""FileStreamStore: a stream persisted in append-only block files.

Bookkeeping is the shared :class:`natsd.store._core.IndexedStreamStore` (compact arrays, no object
per message); this class adds the files:

- **Writes.** ``store_msg`` encodes the record (natsd.store.file.record) into the last block's
  pending buffer; ``flush()`` writes it with one ``pwrite`` (plus, when the first sequence moved
  since the last flush, one FIRST marker record in the same write). After ``flush()`` returns
  the bytes are in the OS: a ``kill -9`` loses nothing flushed. With ``sync_always`` flush()
  also fsyncs; otherwise the owner calls ``sync()`` every ``sync_interval``. Blocks roll over
  at ``block_size`` (8 MiB default, as the reference).
- **Removals** of interior messages append a tombstone record; removals from the front are
  covered by the FIRST marker written at the next flush (so a max_msgs stream does not write a
  tombstone per publish); a front block whose records all refer to sequences below the first
  sequence is unlinked. ``erase_msg`` overwrites the record in place (random bytes, FLAG_ERASED,
  fresh checksum). Purge and compact-past-the-end start a fresh block holding a FIRST marker
  (written and fsynced before the old blocks are unlinked).
- **Reads** go to the file (``pread``) or, for bytes not yet flushed, to the pending buffer;
  every read verifies the record's checksum. Forward reads share one read-ahead chunk:
  ``iter_msgs`` and ``load_run`` (a consumer's delivery pass) take runs of back-to-back records
  from it; ``load_run`` decodes a stretch of equally sized records column-wise and checks their
  checksums with one CRC over the stretch (see its docstring). A record that fails is reported
  lost (``state().lost_msgs``/``lost_bytes``, logged, a tombstone written) and never served.
- **Recovery.** ``msgs/index.db`` (natsd.store.file.index) is loaded when its checksum is good
  and every block still holds the bytes it recorded; records written after it are replayed
  from the recorded offsets. Otherwise every block is scanned. A torn or corrupt record
  truncates its block at that offset (fsynced) and is reported lost; a damaged record followed
  by intact ones costs only itself (recovery resynchronises at the next intact record, see
  natsd.store.file.faults); a missing block's messages are reported lost and the rest served.
- **Failed writes** (disk full, I/O error): every message not on disk is rolled back and the
  owner told (``take_rollback``); nothing unwritten is ever served; the next flush retries.
  See natsd.store.file.faults.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import os
import shutil
import struct
import zlib
from array import array
from itertools import compress, count, repeat
from operator import ne, or_, sub
from typing import NoReturn

from natsd.store._core import NEVER_EXPIRES, IndexedStreamStore
from natsd.store.base import (
    CorruptState, MsgNotFound, MsgRun, StoreClosed, StoreConfig, StoreError, StoreMsg, StoreWriteError,
)
from natsd.store.file.block import MessageBlock
from natsd.store.file.consumer_state import FileConsumerStore
from natsd.store.file.faults import FaultHandling, next_record
from natsd.store.file.index import BlockInfo, IndexSnapshot, decode_index, encode_index
from natsd.store.file.layout import (
    DEFAULT_BLOCK_SIZE, DEFAULT_INDEX_INTERVAL_NS, INDEX_FILE, META_FILE, MSGS_DIR, OBS_DIR, TMP_SUFFIX,
    block_file_name, parse_block_file_name,
)
from natsd.store.file.meta import atomic_write, fsync_dir, write_meta
from natsd.store.file.layout import MAX_RECORD_SIZE
from natsd.store.file.record import HEAD_STRUCT, RECORD_OVERHEAD, TRAILER_STRUCT
from natsd.store.file.record import (
    FLAG_ERASED, FLAG_FIRST, FLAG_MASK, FLAG_SKIP, FLAG_TOMB, FLAG_TRUNC, FLAG_TTL, HDR_BIT, HEADER_SIZE, SEQ_MASK,
    TRAILER_SIZE, RecordError, encode_marker, encode_msg_into, erase_record, file_store_msg_size, parse_header,
)

__all__ = ["FileStreamStore", "MsgCorrupt"]

log = logging.getLogger("natsd.store")

_OFF_MASK = 0xFFFFFFFF
#: Bytes read at once for a message read that misses the read-ahead cache.
READ_AHEAD = 64 * 1024
_crc32 = zlib.crc32
_HEAD_UNPACK = HEAD_STRUCT.unpack_from
_TRAILER_UNPACK = TRAILER_STRUCT.unpack_from
_TRAILER_LEN = TRAILER_SIZE
# CRC-32 residue: the CRC of any data followed by its own CRC (little-endian) is this constant.
# So a record checks out, checksum *and* repeated length, when the CRC of all of it equals
# ``crc32(total_len as u32 LE, _CRC_RESIDUE)``: one C call per record, no trailer unpacking.
_CRC_RESIDUE = 0x2144DF1C
#: record size -> the crc32 a whole intact record of that size has (see _CRC_RESIDUE).
_RESIDUES: dict[int, int] = {}


def _add_msg(sm: StoreMsg, seq: int, seqs: list, tss: list, subjects: list, hdrs: list | None,
             msgs: list) -> list | None:
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
    want = _RESIDUES[size] = zlib.crc32(size.to_bytes(4, "little"), _CRC_RESIDUE)
    return want
#: Most bytes iter_msgs and load_run read with one pread (a run of back-to-back records).
RUN_BYTES = 64 * 1024


#: record size -> [CRC-32 of 0, 1, 2, ... intact records of that size back to back] (_run_crc).
_RUN_CRCS: dict[int, list[int]] = {}
#: (record size, subject length, header length or -1) -> the Struct that decodes such records.
_RUN_STRUCTS: dict[tuple[int, int, int], struct.Struct] = {}


def _run_crc(size: int, k: int) -> int:
    """The CRC-32 of ``k`` intact records of ``size`` bytes each, back to back.

    Any intact record of a given size has the same CRC (the residue, see ``_CRC_RESIDUE``), and
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
        hlen = int.from_bytes(data[p: p + 4], "little")
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
    seg = memoryview(data)[o: o + m * size]
    if hlen < 0:
        totals, raws, tss, slens, subjects, msgs = zip(*st.iter_unpack(seg))
        hdrs = None
    else:
        totals, raws, tss, slens, subjects, hlens, hdrs, msgs = zip(*st.iter_unpack(seg))
        if hlens.count(hlen) != m:
            return None
    if (totals.count(total) != m or slens.count(slen) != m or raws != tuple(range(seq, seq + m))
            or _crc32(seg) != _run_crc(size, m)):
        return None
    return raws, tss, subjects, hdrs, msgs


class MsgCorrupt(CorruptState, MsgNotFound):
    """The message's record failed its checksum on read: it was reported lost and removed.
    A MsgNotFound too, so readers treat it as deleted."""


class FileStreamStore(FaultHandling, IndexedStreamStore):
    """A StreamStore in a directory; see the module docstring for the design."""

    msg_size = staticmethod(file_store_msg_size)

    def __init__(self, config: StoreConfig, clock, directory: str, *, sync_interval_ns: int = 120 * 10**9,
                 sync_always: bool = False, block_size: int = DEFAULT_BLOCK_SIZE,
                 index_interval_ns: int = DEFAULT_INDEX_INTERVAL_NS) -> None:
        self._dir = directory
        self._msgs_dir = os.path.join(directory, MSGS_DIR)
        self._obs_dir = os.path.join(directory, OBS_DIR)
        self._index_path = os.path.join(self._msgs_dir, INDEX_FILE)
        self._block_size = block_size
        self._sync_always = sync_always
        self.sync_interval_ns = sync_interval_ns
        self._index_interval_ns = index_interval_ns
        self._blocks: dict[int, MessageBlock] = {}
        # The block appended to. None only before recovery opens one and after close, when no
        # write may come, so it is typed by what the write path sees.
        self._lmb: MessageBlock = None  # type: ignore[assignment]
        self._replaying = True
        self._no_tombstones = False
        self._marker_first = 0
        self._consumers: dict[str, FileConsumerStore] = {}
        self._keep_last: tuple[int, int] | None = None
        self._rcache: tuple[int, int, int, bytes] | None = None
        # block id -> bytes of live message records in it (compaction); built lazily.
        self._blive: dict[int, int] | None = None
        self._unlink_dead = False
        # The last sequence whose record (message or marker) is on disk, and what the last
        # failed write rolled back (take_rollback); see _write_failed.
        self._durable_last = 0
        self._rollback: tuple[int, StoreWriteError] | None = None
        self._write_failing = False
        # Recovery resynchronised after damaged bytes (not in a full scan): the first sequence
        # that may have been in them; the next message record closes the gap (_replay_one).
        self._gap_from = 0
        super().__init__(config, clock)
        os.makedirs(self._msgs_dir, exist_ok=True)
        write_meta(directory, self._meta_dict(), config.name)
        try:
            self._recover()
        except BaseException:
            for b in self._blocks.values():
                b.close()
            raise
        heapq.heapify(self._ttl_heap)
        self._replaying = False
        self._marker_first = self._first
        self._index_written_at = clock.monotonic_ns()
        if self._lmb is None:
            self._roll()
        keep = self._keep_last
        if keep is not None and keep[0] > self._last:
            # Sequences known lost must never be handed out again.
            self._skip_range(self._last + 1, keep[0] - self._last, keep[1])
        # Anything recovery itself decided goes to disk now. It counts as durable even if that
        # write fails (a full disk at start): the records stay pending and the next flush
        # writes them, so a sequence known lost is never handed out again.
        self._durable_last = self._last
        try:
            self.flush()
        except StoreWriteError as exc:
            log.error("stream %s: writing recovery records failed (%s); will retry", config.name, exc)
            self._rollback = None

    # ------------------------------------------------------------------ config
    def _meta_dict(self) -> dict:
        if self.config.meta:
            return self.config.meta
        d = dataclasses.asdict(self.config)
        d.pop("meta", None)
        return d

    # ------------------------------------------------------------------ payload hooks
    def _roll(self) -> MessageBlock:
        """Start a new last block (flushing the old one's pending bytes first)."""
        old = self._lmb
        if old is not None:
            marker_first = self._marker_first
            try:
                old.flush(self._sync_always)
            except StoreWriteError as exc:
                self._write_failed(old, exc, marker_first)
                raise
            self._durable_last = self._last
        bid = (max(self._blocks) + 1) if self._blocks else 1
        try:
            blk = MessageBlock(bid, os.path.join(self._msgs_dir, block_file_name(bid)), create=True)
        except OSError as exc:  # no inode left, too many open files...: the store refuses the write
            raise StoreWriteError(f"creating block {bid} of stream {self.config.name} failed: {exc}",
                                  exc.errno) from exc
        self._blocks[bid] = blk
        self._lmb = blk
        return blk

    def _write(self, seq: int, ts: int, subject: str, hdr: bytes | None, msg: bytes, ttl_ns: int) -> int:
        lmb = self._lmb
        sb = subject.encode()
        off = lmb.flushed + len(lmb.pending)
        if off and off + 30 + len(sb) + len(msg) + (4 + len(hdr) if hdr else 0) > self._block_size:
            lmb = self._roll()
            off = lmb.flushed
        size = encode_msg_into(lmb.pending, seq, ts, sb, hdr, msg)
        lmb.max_ref = seq
        if self._blive is not None:
            self._blive[lmb.id] = self._blive.get(lmb.id, 0) + size
        if ttl_ns:
            lmb.pending += encode_marker(FLAG_TTL, seq, ts + ttl_ns if ttl_ns > 0 else NEVER_EXPIRES)
        return (lmb.id << 32) | off

    def _read(self, seq: int, pos: int) -> StoreMsg:
        i = seq - self._base
        size = self._sz[i]
        bid = pos >> 32
        off = pos & _OFF_MASK
        # Read-ahead: consumers mostly read forward, so one pread of READ_AHEAD bytes serves the
        # next records too. Only flushed bytes are cached; erase/truncate invalidate.
        c = self._rcache
        if c is not None and c[0] == bid and c[1] <= off and off + size <= c[2]:
            start = off - c[1]
            data = c[3][start: start + size]
        else:
            blk = self._blocks.get(bid)
            if blk is None:
                self._lose(seq, size, "its block is missing")
            if off + size > blk.flushed:
                # Not written yet: write it first, so that nobody (a consumer, a direct get)
                # ever sees a message that a failed write would then take back.
                self._flush_for_read(seq)
                data = blk.read(off, size)
            elif c is not None and c[0] == bid and c[1] <= off < c[2] + READ_AHEAD:
                # Forward, close to the previous read (sequential, or a filtered consumer
                # skipping a few records): read ahead.
                chunk = os.pread(blk.fd, max(size, READ_AHEAD), off)
                self._rcache = (bid, off, off + len(chunk), chunk)
                data = chunk[:size]
            else:
                data = os.pread(blk.fd, size, off)
                self._rcache = (bid, off, off + size, data)
        try:
            rsize, has_hdr, raw, ts, slen = parse_header(data, 0)
            if rsize != size or len(data) != size:
                raise RecordError(0, "length differs from the index")
            crc = int.from_bytes(data[size - 8: size - 4], "little")
            if _crc32(memoryview(data)[: size - 8]) != crc:
                raise RecordError(0, "checksum mismatch")
            if raw != seq:
                raise RecordError(0, f"sequence {raw & SEQ_MASK} (flags {raw & FLAG_MASK:#x}) where {seq} was expected")
        except RecordError as exc:
            self._lose(seq, size, str(exc))
        p = HEADER_SIZE + slen
        hdr = None
        if has_hdr:
            hlen = int.from_bytes(data[p: p + 4], "little")
            hdr = data[p + 4: p + 4 + hlen]
            p += 4 + hlen
        return StoreMsg(self._snames[self._sid[i]], hdr, data[p: size - _TRAILER_LEN], seq, ts)

    def iter_msgs(self, start_seq: int, end_seq: int):
        """Live messages with start_seq <= seq <= end_seq, in order (a consumer's forward read).

        Runs of consecutive live sequences whose records lie back to back in the flushed part
        of one block are read with one ``pread`` (up to RUN_BYTES) and checked in the loop with
        the CRC residue (one crc32 call per record covers checksum and repeated length, as the
        recovery scan). Anything else (unflushed bytes, a gap, a record that fails) takes the
        per-message path, which reports corrupt records lost. Between two yields the store may
        change (acks removing messages, a purge): every record is re-checked against the index
        before it is handed out."""
        self._check_open()
        seq = max(start_seq, self._first)
        residues = _RESIDUES
        unpack = _HEAD_UNPACK
        crc32 = _crc32
        snames = self._snames
        while True:
            seq = self._next_live(seq)
            if not seq or seq > end_seq:
                return
            base = self._base
            posa, sza, sida = self._pos, self._sz, self._sid
            i = seq - base
            p0 = posa[i]
            bid = p0 >> 32
            off = p0 & _OFF_MASK
            blk = self._blocks.get(bid)
            end = off + sza[i]
            if blk is None or end > blk.flushed:
                try:
                    yield self._read(seq, p0)
                except MsgNotFound:
                    pass
                seq += 1
                continue
            # The read-ahead chunk, when it holds this record (a previous pass read it), else
            # one pread of up to RUN_BYTES that becomes the chunk. Records are then taken while
            # the next sequence's record starts where this one ended, inside the chunk.
            c = self._rcache
            if c is not None and c[0] == bid and c[1] <= off and end <= c[2]:
                data = c[3]
                o = off - c[1]
            else:
                data = os.pread(blk.fd, max(min(blk.flushed, off + RUN_BYTES), end) - off, off)
                if len(data) < end - off:  # file shorter than recorded: per-message path
                    try:
                        yield self._read(seq, p0)
                    except MsgNotFound:
                        pass
                    seq += 1
                    continue
                self._rcache = (bid, off, off + len(data), data)
                o = 0
            dlen = len(data)
            mv = memoryview(data)
            p0 -= o  # the record at chunk offset x is expected at position p0 + x
            hi = end_seq - base
            k = i
            bad = False
            while True:
                size = sza[k]
                rec_end = o + size
                if rec_end > dlen:
                    break
                want = residues.get(size) or _residue(size)
                total, raw, ts, slen = unpack(data, o)
                if crc32(mv[o: rec_end]) != want or raw != base + k or (total & ~HDR_BIT) != size:
                    bad = True  # the per-message path below reports it
                    break
                p = o + HEADER_SIZE + slen
                if total & HDR_BIT:
                    hlen = int.from_bytes(data[p: p + 4], "little")
                    hdr = data[p + 4: p + 4 + hlen]
                    p += 4 + hlen
                else:
                    hdr = None
                yield StoreMsg(snames[sida[k]], hdr, data[p: rec_end - _TRAILER_LEN], base + k, ts)
                k += 1
                o = rec_end
                # Resumed: the consumer may have changed the store meanwhile; anything but the
                # next record back to back (a gap, a removal, a purge) goes back to the index.
                if (k > hi or self._base != base or self._pos is not posa or k >= len(posa)
                        or posa[k] != p0 + o):
                    break
            seq = base + k
            if bad:
                try:
                    yield self._read(seq, posa[k])
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
        length only (the residue, see ``_CRC_RESIDUE``), and CRC-32 is affine, so the CRC of k
        intact records of size s back to back is one value, :func:`_run_crc` (s, k), whatever
        they hold. A single damaged record changes it exactly when its own check would fail (an
        error pattern shifted by the records after it is still not a multiple of the generator,
        which has a constant term); damage in several records is missed only if the combined
        pattern is a multiple of the generator, the odds of any CRC-32 check of that many bytes.
        When the stretch fails any check it is read again record by record (the ``iter_msgs``
        loop), which serves the good ones and reports the bad one lost through ``_read``, as
        every other read does. Other layouts (sizes that vary, unflushed bytes) take that loop
        directly."""
        self._check_open()
        seqs: list = []
        tss: list = []
        subjects: list = []
        hdrs: list | None = None
        msgs: list = []
        need = max_msgs
        seq = max(start_seq, self._first)
        while need > 0:
            seq = self._next_live(seq)
            if not seq:
                break
            base = self._base
            posa, sza = self._pos, self._sz
            i = seq - base
            p0 = posa[i]
            bid = p0 >> 32
            off = p0 & _OFF_MASK
            size = sza[i]
            end = off + size
            blk = self._blocks.get(bid)
            data = None
            if blk is not None and end <= blk.flushed:
                c = self._rcache
                if c is not None and c[0] == bid and c[1] <= off and end <= c[2]:
                    data = c[3]
                    o = off - c[1]
                else:
                    chunk = os.pread(blk.fd, max(min(blk.flushed, off + RUN_BYTES), end) - off, off)
                    if len(chunk) >= end - off:
                        self._rcache = (bid, off, off + len(chunk), chunk)
                        data = chunk
                        o = 0
            if data is None:
                # Not flushed yet, block missing, file shorter than recorded: per message.
                try:
                    sm = self._read(seq, p0)
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
            k = min(need, (dlen - o) // size, len(posa) - i)
            m = next(compress(count(), map(ne, posa[i: i + k], range(p0, p0 + k * size, size))), k) if k > 1 else k
            if m > 1 and sza[i: i + m].count(size) == m:
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
                rec_end = o + size
                if rec_end > dlen:
                    break
                want = residues.get(size) or _residue(size)
                total, raw, ts, slen = unpack(data, o)
                if _crc32(mv[o: rec_end]) != want or raw != base + i or (total & ~HDR_BIT) != size:
                    bad = True
                    break
                p = o + HEADER_SIZE + slen
                subj = data[o + HEADER_SIZE: p]
                if total & HDR_BIT:
                    hlen = int.from_bytes(data[p: p + 4], "little")
                    if hdrs is None:
                        hdrs = [None] * len(seqs)
                    hdrs.append(data[p + 4: p + 4 + hlen])
                    p += 4 + hlen
                elif hdrs is not None:
                    hdrs.append(None)
                seqs.append(raw)
                tss.append(ts)
                subjects.append(subj)
                msgs.append(data[p: rec_end - _TRAILER_LEN])
                need -= 1
                i += 1
                o = rec_end
                if need == 0 or i >= n or posa[i] != p0 + o:
                    break
            seq = base + i
            if bad:
                try:
                    sm = self._read(seq, posa[i])
                except MsgNotFound:
                    pass
                else:  # pragma: no cover - a record that failed the run check but reads fine
                    hdrs = _add_msg(sm, seq, seqs, tss, subjects, hdrs, msgs)
                    need -= 1
                seq += 1
        return MsgRun(seqs, tss, subjects, hdrs, msgs)

    def _lose(self, seq: int, size: int, why: str) -> NoReturn:
        """Report message ``seq`` lost (corrupt on disk), drop it from the index, raise MsgCorrupt."""
        log.error("stream %s: message %d is corrupt on disk (%s); reported lost", self.config.name, seq, why)
        self._rcache = None
        self._lost_msgs.append(seq)
        self._lost_bytes += size
        self._remove(seq)
        raise MsgCorrupt(f"message {seq} is corrupt on disk: {why}")

    def _drop(self, seq: int, pos: int, size: int, erase: bool, front: bool) -> None:
        if self._replaying:
            return
        if erase:
            self._rcache = None
            blk = self._blocks.get(pos >> 32)
            if blk is not None:
                off = pos & _OFF_MASK
                blk.overwrite(off, erase_record(blk.read(off, size), os.urandom))
        blive = self._blive
        if blive is not None and (pos >> 32) in blive:
            blive[pos >> 32] -= size
        if not front and not self._no_tombstones:
            lmb = self._lmb
            lmb.pending += encode_marker(FLAG_TOMB, seq, self._last_ts)
            if seq > lmb.max_ref:
                lmb.max_ref = seq

    def _drop_all(self, first: int) -> None:
        if self._replaying:
            return
        # Crash safety: the new block (with the FIRST marker that keeps the sequence) is on
        # disk before anything old disappears.
        self._rcache = None
        self._blive = None
        old = list(self._blocks.values())
        for b in old:
            b.pending = bytearray()
        self._lmb = None  # type: ignore[assignment]  # _roll() opens the next one
        blk = self._roll()
        blk.pending += encode_marker(FLAG_FIRST, first)
        blk.max_ref = first
        blk.flush(sync=True)
        self._durable_last = max(self._durable_last, first - 1)
        fsync_dir(self._msgs_dir)
        self._remove_index_file()
        for b in old:
            b.unlink()
            del self._blocks[b.id]
        fsync_dir(self._msgs_dir)
        self._marker_first = first

    def _on_skip(self, seq: int, num: int, ts: int) -> None:
        if self._replaying:
            return
        lmb = self._lmb
        lmb.pending += encode_marker(FLAG_SKIP, seq, ts, count=num)
        lmb.max_ref = max(lmb.max_ref, seq + num - 1)

    def _on_truncate(self, seq: int) -> None:
        if self._replaying:
            return
        lmb = self._lmb
        lmb.pending += encode_marker(FLAG_TRUNC, seq)
        lmb.max_ref = max(lmb.max_ref, seq)
        # An older index would describe sequences that no longer exist.
        self._remove_index_file()
        self.flush()

    def truncate(self, seq: int) -> None:
        """Remove every message above ``seq`` (one TRUNC record, no tombstones)."""
        self._no_tombstones = True
        try:
            super().truncate(seq)
        finally:
            self._no_tombstones = False

    def _remove_index_file(self) -> None:
        try:
            os.unlink(self._index_path)
        except FileNotFoundError:
            pass

    # ------------------------------------------------------------------ durability
    def flush(self) -> None:
        """Hand every buffered record to the OS: one pwrite on the last block."""
        lmb = self._lmb
        if lmb is None:
            return
        marker_first = self._marker_first
        if self._first != marker_first:
            lmb.pending += encode_marker(FLAG_FIRST, self._first)
            if self._first > lmb.max_ref:
                lmb.max_ref = self._first
            self._marker_first = self._first
            self._unlink_dead = True
        if lmb.pending:
            try:
                lmb.flush(self._sync_always)
            except StoreWriteError as exc:
                self._write_failed(lmb, exc, marker_first)
                raise
        self._durable_last = self._last
        if self._write_failing:
            self._write_failing = False
            log.warning("stream %s: writes work again", self.config.name)
        if self._unlink_dead:
            self._unlink_dead = False
            self._unlink_dead_blocks()

    def _unlink_dead_blocks(self) -> None:
        """Unlink the prefix of blocks whose every record refers to sequences below first."""
        first = self._first
        for bid in list(self._blocks):
            blk = self._blocks[bid]
            if blk is self._lmb or blk.max_ref >= first:
                break
            blk.unlink()
            del self._blocks[bid]

    def sync(self) -> None:
        """flush(), fsync every block written since the last sync, write consumer states, and
        rewrite index.db when it is older than the index interval."""
        self._check_open()
        self.flush()
        for blk in self._blocks.values():
            blk.sync()
        for cs in list(self._consumers.values()):
            cs.flush(fsync=True)
        if self.compact_blocks() or self._clock.monotonic_ns() - self._index_written_at >= self._index_interval_ns:
            self.write_index()

    def compact_blocks(self) -> int:
        """Rewrite sealed blocks that are at least half dead (interior deletes, per-subject
        limits: a KV bucket whose old revisions are gone but whose oldest key pins the first
        sequence). Returns how many blocks were rewritten. Called by ``sync()``."""
        if self._blive is None:
            blive: dict[int, int] = {}
            sz = self._sz
            base = self._base
            for seq, pos in self._iter_index():
                bid = pos >> 32
                blive[bid] = blive.get(bid, 0) + sz[seq - base]
            self._blive = blive
        done = 0
        min_dead = min(self._block_size // 4, 1 << 16)
        for blk in list(self._blocks.values()):
            if blk is self._lmb:
                continue
            dead = blk.flushed - self._blive.get(blk.id, 0)
            if dead >= min_dead and dead * 2 >= blk.flushed:
                if self._compact_block(blk):
                    done += 1
        return done

    def _compact_block(self, blk: MessageBlock) -> bool:
        """Rewrite ``blk`` keeping what recovery still needs (see the keep rules below), via a
        tmp file + fsync + rename. The file is kept even when empty, so the block numbering has
        no hole (a hole means a lost block to the full scan)."""
        data = blk.read_all()
        out = bytearray()
        moves: list[tuple[int, int]] = []
        gone: set[int] = set()  # dead records dropped by this rewrite
        first, base, pos_arr, last = self._first, self._base, self._pos, self._last
        off = 0
        end = len(data)
        while off < end:
            try:
                size, _h, raw, ts, slen = parse_header(data, off)
                if off + size > end or _crc32(data[off: off + size - 8]) != int.from_bytes(
                        data[off + size - 8: off + size - 4], "little"):
                    raise RecordError(off, "bad record")
            except RecordError as exc:
                log.warning("stream %s: not compacting block %d: %s", self.config.name, blk.id, exc)
                return False
            flags = raw & FLAG_MASK
            seq = raw & SEQ_MASK
            i = seq - base
            live = seq >= first and 0 <= i < len(pos_arr) and pos_arr[i] >= 0
            if not flags:
                loc = blk.id << 32 | off
                keep = live and pos_arr[i] == loc
                if keep:
                    moves.append((seq, len(out)))
                elif 0 <= i < len(pos_arr) and pos_arr[i] == -loc - 2:
                    gone.add(seq)
            elif flags & FLAG_ERASED:
                keep = False  # its tombstone or a FIRST marker elsewhere records the removal
            elif flags == FLAG_TTL:
                keep = live
            elif flags == FLAG_TOMB:
                # Needed while the dead message's record still exists somewhere (it would come
                # back on a full scan), and for the last sequence (it records the high-water mark).
                keep = seq == last or (seq >= first and 0 <= i < len(pos_arr) and pos_arr[i] != -1
                                       and seq not in gone)
            elif flags == FLAG_FIRST:
                keep = seq >= self._marker_first
            elif flags == FLAG_SKIP:
                keep = seq + int.from_bytes(data[off + HEADER_SIZE + slen: off + size - 8], "little") - 1 >= first
            else:
                keep = True  # TRUNC: rare, and its order relative to messages matters
            if keep:
                out += data[off: off + size]
            off += size
        atomic_write(blk.path, bytes(out))
        fsync_dir(self._msgs_dir)
        blk.close()
        blk.fd = os.open(blk.path, os.O_RDWR)
        blk.flushed = len(out)
        blk.dirty_sync = False
        shift = blk.id << 32
        for seq, new_off in moves:
            pos_arr[seq - base] = shift | new_off
        for seq in gone:
            pos_arr[seq - base] = -1
        self._rcache = None
        log.debug("stream %s: compacted block %d from %d to %d bytes", self.config.name, blk.id, end, len(out))
        return True

    def write_index(self) -> None:
        """Snapshot the in-memory index to msgs/index.db (after a flush; atomic, fsynced)."""
        self.flush()
        for blk in self._blocks.values():
            blk.sync()
        blocks = [BlockInfo(b.id, b.flushed, b.max_ref, b.read(b.flushed - 8, 8) if b.flushed >= 8 else b"")
                  for b in self._blocks.values()]
        subjects = [None if name is None else (name, self._ss[sid]) for sid, name in enumerate(self._snames)]
        snap = IndexSnapshot(
            self._first, self._last, self._first_ts, self._last_ts, self._msgs, self._bytes, self._base,
            self._marker_first, self._lost_bytes, self._pos, self._sid, self._ts, self._sz, self._nxt, subjects,
            sorted(self._ttl.items()), list(self._lost_msgs), blocks)
        atomic_write(self._index_path, encode_index(snap))
        self._index_written_at = self._clock.monotonic_ns()

    # ------------------------------------------------------------------ recovery
    def _recover(self) -> None:
        ids = []
        for name in os.listdir(self._msgs_dir):
            bid = parse_block_file_name(name)
            if bid is not None:
                ids.append(bid)
            elif name.endswith(TMP_SUFFIX):
                os.unlink(os.path.join(self._msgs_dir, name))
        ids.sort()
        snap = None
        try:
            with open(self._index_path, "rb") as f:
                snap = decode_index(f.read())
        except FileNotFoundError:
            pass
        except CorruptState as exc:
            log.warning("stream %s: %s; rebuilding from the blocks", self.config.name, exc)
        if snap is not None and self._load_index(snap, ids):
            return
        self._full_scan(ids, snap)

    def _open_block(self, bid: int) -> MessageBlock:
        blk = MessageBlock(bid, os.path.join(self._msgs_dir, block_file_name(bid)))
        self._blocks[bid] = blk
        return blk

    def _load_index(self, snap: IndexSnapshot, ids: list[int]) -> bool:
        """Use index.db if the blocks still hold what it recorded; replay what was appended
        after it. False (nothing changed) when it is stale."""
        present = set(ids)
        listed = {b.id for b in snap.blocks}
        top = max(listed) if listed else 0
        if any(bid not in listed and bid < top for bid in ids):
            log.warning("stream %s: index.db does not list every block; rebuilding", self.config.name)
            return False
        opened: list[tuple[MessageBlock, int]] = []
        ok = True
        for info in snap.blocks:
            if info.id not in present:
                continue
            blk = self._open_block(info.id)
            opened.append((blk, info.size))
            blk.max_ref = info.max_ref
            if blk.flushed < info.size or (info.size >= 8 and blk.read(info.size - 8, 8) != info.tail):
                ok = False
                break
        if not ok:
            log.warning("stream %s: index.db is stale; rebuilding from the blocks", self.config.name)
            for blk in self._blocks.values():
                blk.close()
            self._blocks.clear()
            return False
        # Adopt the snapshot.
        self._first, self._last = snap.first, snap.last
        self._first_ts, self._last_ts = snap.first_ts, snap.last_ts
        self._msgs, self._bytes, self._base = snap.msgs, snap.bytes, snap.base
        self._pos, self._sid, self._ts, self._sz, self._nxt = snap.pos, snap.sid, snap.ts, snap.sz, snap.nxt
        # Freed slots stay None (see IndexedStreamStore._snames).
        self._snames = [None if s is None else s[0] for s in snap.subjects]  # type: ignore[misc]
        self._ss = [None if s is None else s[1] for s in snap.subjects]  # type: ignore[misc]
        self._sid_of = {s[0]: sid for sid, s in enumerate(snap.subjects) if s is not None}
        self._free_sids = [sid for sid, s in enumerate(snap.subjects) if s is None]
        self._sgen += 1
        for seq, exp in snap.ttl:
            self._ttl[seq] = exp
            if exp != NEVER_EXPIRES:
                self._ttl_heap.append((exp, seq))
        self._ttl_heap.sort()
        self._lost_msgs = list(snap.lost)
        self._lost_bytes = snap.lost_bytes
        # Replay what was appended after the snapshot, then blocks created after it.
        for blk, size in opened:
            if blk.flushed > size:
                self._replay_block(blk, size, last_block=blk.id == ids[-1])
        for bid in ids:
            if bid not in listed:
                self._replay_block(self._open_block(bid), 0, last_block=bid == ids[-1])
        missing = listed - present
        if missing:
            self._report_missing_blocks(missing)
        if self._blocks:
            self._lmb = self._blocks[max(self._blocks)]
        return True

    def _report_missing_blocks(self, missing: set[int]) -> None:
        """Messages the index placed in blocks that are gone are lost (a block unlinked because
        all of it was below first holds no live message any more, so it reports nothing)."""
        lost = [seq for seq, pos in self._iter_index() if (pos >> 32) in missing]
        for seq in lost:
            self._lost_msgs.append(seq)
            self._lost_bytes += self._sz[seq - self._base]
            self._remove(seq, notify=False)
        if lost:
            log.error("stream %s: block file(s) %s missing; %d message(s) lost", self.config.name,
                      sorted(missing), len(lost))

    def _full_scan(self, ids: list[int], snap: IndexSnapshot | None) -> None:
        """Rebuild the index from every block, in order."""
        self._scan_removed = array("q")
        self._scan_suspect: list[int] = []  # start sequences of ranges that may have been lost
        self._scan_pending_suspect = 0
        self._scan_max_msg = 0
        prev = 0
        for n, bid in enumerate(ids):
            if prev and bid != prev + 1:
                log.error("stream %s: block file(s) %d..%d missing", self.config.name, prev + 1, bid - 1)
                self._scan_pending_suspect = self._scan_max_msg + 1
            prev = bid
            blk = self._open_block(bid)
            truncated = self._replay_block(blk, 0, last_block=n == len(ids) - 1)
            if truncated and n != len(ids) - 1:
                self._scan_pending_suspect = self._scan_max_msg + 1
        if self._blocks:
            self._lmb = self._blocks[max(self._blocks)]
        removed = set(self._scan_removed)
        lost: list[int] = []
        for lo, hi in self._scan_suspect_ranges():
            lost.extend(s for s in range(max(lo, self._first), hi + 1) if s not in removed)
        if snap is not None and snap.last > self._last:
            # The index knew of later sequences than the blocks hold: those messages are lost,
            # and their sequences must never be reused.
            base = snap.base
            lost.extend(base + i for i in range(max(self._last + 1 - base, 0), len(snap.pos)) if snap.pos[i] >= 0)
            self._keep_last = (snap.last, snap.last_ts)
        lost = sorted(set(lost) - set(self._lost_msgs))
        if lost:
            log.error("stream %s: %d message(s) lost: %s", self.config.name, len(lost), lost[:20])
            self._lost_msgs = sorted(set(self._lost_msgs).union(lost))
        del self._scan_removed, self._scan_suspect

    def _scan_suspect_ranges(self) -> list[tuple[int, int]]:
        pairs = self._scan_suspect
        return [(pairs[i], pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)]

    def _replay_block(self, blk: MessageBlock, start: int, last_block: bool) -> bool:
        """Apply the records of ``blk`` from offset ``start``. On a bad record the block is
        truncated there and the loss reported. Returns True if it truncated.

        The whole block is read at once and walked with ``unpack_from`` over it. The hot loop
        (a full scan walks every record) handles the common record inline: an intact message
        with the next sequence and a subject already seen. It keeps its counters in locals,
        appends the sid, timestamp and chain link per record and fills the position and size
        arrays in bulk when the run ends. Anything else (markers, new subjects, gaps, damage)
        goes through :meth:`_replay_one`, one record at a time."""
        data = blk.read_all()
        mv = memoryview(data)
        end = len(data)
        off = start
        scanning = hasattr(self, "_scan_removed")
        head_unpack = _HEAD_UNPACK
        crc32 = _crc32
        max_size = MAX_RECORD_SIZE
        lim = end - HEADER_SIZE
        residues: dict[int, int] = {}  # record size -> CRC of a whole intact record of that size
        # subject bytes -> decoded subject (every subject seen), and -> sid for the hot loop;
        # the latter is dropped whenever a subject slot is freed or reused (_sgen moves).
        subjects: dict[bytes, str] = {}
        sidcache: dict[bytes, int] = {}
        sgen = self._sgen
        try:
            while off < end:
                if (self._msgs and not self._gap_from and not (scanning and self._scan_pending_suspect)
                        and self._base + len(self._pos) == self._last + 1):
                    if self._sgen != sgen:
                        sidcache.clear()
                        sgen = self._sgen
                    base = self._base
                    first = seq = self._last + 1
                    nxt = self._nxt
                    nxt_append = nxt.append
                    ss_list = self._ss
                    offs: list[int] = []
                    offs_append = offs.append
                    sid_append, ts_append = self._sid.append, self._ts.append
                    get = sidcache.get
                    hsize = HEADER_SIZE
                    psize = -1
                    want: int | None = -1
                    # A block no larger than MAX_RECORD_SIZE holds no record claiming more.
                    stop = lim if end <= max_size else -1
                    while off <= stop:
                        total, raw, ts, slen = head_unpack(data, off)
                        size = total & 0x7FFFFFFF
                        rec_end = off + size
                        # raw == seq: a message (no flag bits) with the next sequence.
                        if raw != seq or rec_end > end or size - slen < 30:
                            break
                        if size != psize:
                            psize = size
                            want = residues.get(size)
                            if want is None:
                                want = residues[size] = crc32(size.to_bytes(4, "little"), _CRC_RESIDUE)
                        if crc32(mv[off: rec_end]) != want:
                            break
                        s0 = off + hsize
                        sid = get(data[s0: s0 + slen])
                        if sid is None:
                            break
                        ss = ss_list[sid]
                        ss[0] += 1
                        prev = ss[2]
                        ss[2] = seq
                        if ss[3]:
                            ss[3] &= ~2
                        # prev >= base: a live subject's last message is in the arrays.
                        nxt_append(0)
                        nxt[prev - base] = seq - prev
                        offs_append(off)
                        sid_append(sid)
                        ts_append(ts)
                        seq += 1
                        off = rec_end
                    k = seq - first
                    if k:
                        self._pos.extend(map(or_, repeat(blk.id << 32), offs))
                        ends = offs[1:]
                        ends.append(off)
                        self._sz.extend(map(sub, ends, offs))
                        self._msgs += k
                        self._bytes += off - offs[0]
                        self._last = seq - 1
                        self._last_ts = self._ts[-1]
                        if seq - 1 > blk.max_ref:
                            blk.max_ref = seq - 1
                        if scanning:
                            self._scan_max_msg = seq - 1
                    if off >= end:
                        break
                try:
                    off = self._replay_one(blk, data, mv, off, end, subjects, sidcache, scanning)
                except (RecordError, UnicodeDecodeError, ValueError) as exc:
                    at = next_record(data, mv, off + 1, end)
                    if at < 0:
                        # Nothing intact after it: a torn (or damaged) tail.
                        self._truncate_block(blk, off, end, mv, exc, last_block)
                        return True
                    self._skip_damage(blk, off, at, mv, exc, scanning)
                    off = at
        finally:
            mv.release()
        return False

    def _replay_one(self, blk: MessageBlock, data: bytes, mv, off: int, end: int, subjects: dict,
                    sidcache: dict, scanning: bool) -> int:
        """Verify and apply the one record at ``off``; returns where the next one starts.
        RecordError (or a decoding error) when it is damaged."""
        if end - off < HEADER_SIZE:
            raise RecordError(off, "short header")
        total, raw, ts, slen = _HEAD_UNPACK(data, off)
        size = total & 0x7FFFFFFF
        if size < 30 + slen or size > MAX_RECORD_SIZE:
            raise RecordError(off, f"implausible length {size}")
        rec_end = off + size
        if rec_end > end:
            raise RecordError(off, "short record")
        crc, size2 = _TRAILER_UNPACK(data, rec_end - 8)
        if size2 != size:
            raise RecordError(off, "trailing length mismatch")
        if _crc32(mv[off: rec_end - 8]) != crc:
            raise RecordError(off, "checksum mismatch")
        if raw <= SEQ_MASK:  # a message: no flag bits
            seq = raw
            sb = data[off + HEADER_SIZE: off + HEADER_SIZE + slen]
            subject = subjects.get(sb)
            if subject is None:
                subject = subjects[sb] = sb.decode()
            if seq > self._last:
                if self._gap_from:
                    self._report_gap(seq)
                if scanning:
                    if self._scan_pending_suspect:
                        self._scan_suspect += (self._scan_pending_suspect, seq - 1)
                        self._scan_pending_suspect = 0
                    self._scan_max_msg = seq
                sidcache[sb] = self._index_add(seq, ts, subject, size, (blk.id << 32) | off)
            else:
                log.warning("stream %s: block %d offset %d repeats sequence %d; ignored",
                            self.config.name, blk.id, off, seq)
            if seq > blk.max_ref:
                blk.max_ref = seq
            return rec_end
        flags = raw & FLAG_MASK
        seq = raw & SEQ_MASK
        if flags & FLAG_ERASED:
            if seq > self._last:
                self._skip_range(self._last + 1, seq - self._last, ts)
            else:
                self._remove(seq, notify=False)
            if scanning:
                self._scan_removed.append(seq)
                self._scan_max_msg = max(self._scan_max_msg, seq)
            blk.max_ref = max(blk.max_ref, seq)
        elif flags == FLAG_TOMB:
            if seq > self._last:
                # Its message record is gone (block compacted): the sequence was used.
                self._skip_range(self._last + 1, seq - self._last, ts)
            else:
                self._remove(seq, notify=False)
            if scanning:
                self._scan_removed.append(seq)
            blk.max_ref = max(blk.max_ref, seq)
        elif flags == FLAG_TTL:
            i = seq - self._base
            if seq >= self._first and 0 <= i < len(self._pos) and self._pos[i] >= 0:
                self._ttl[seq] = ts
                if ts != NEVER_EXPIRES:
                    self._ttl_heap.append((ts, seq))
        elif flags == FLAG_FIRST:
            self.compact(seq)
            blk.max_ref = max(blk.max_ref, seq)
        elif flags == FLAG_TRUNC:
            IndexedStreamStore.truncate(self, seq)
            blk.max_ref = max(blk.max_ref, seq)
        elif flags == FLAG_SKIP:
            count = int.from_bytes(mv[off + HEADER_SIZE + slen: rec_end - 8], "little")
            top = seq + count - 1
            if top > self._last:
                self._skip_range(self._last + 1, top - self._last, ts)
            if scanning:
                self._scan_suspect_skip(seq, top)
            blk.max_ref = max(blk.max_ref, top)
        else:
            raise RecordError(off, f"unknown flags {flags:#x}")
        return rec_end

    def _scan_suspect_skip(self, lo: int, hi: int) -> None:
        # Sequences skipped on purpose are not lost; too large a range is not worth listing.
        if hi - lo < 1_000_000:
            self._scan_removed.extend(range(lo, hi + 1))
        self._scan_max_msg = max(self._scan_max_msg, hi)

    def _truncate_block(self, blk: MessageBlock, off: int, end: int, mv, exc, last_block: bool) -> None:
        lost_bytes = end - off
        what = "torn tail" if last_block else "corrupt record"
        # The sequence in a damaged header is only a hint; report it when it is plausible.
        if end - off >= 12:
            raw = int.from_bytes(mv[off + 4: off + 12], "little")
            seq = raw & SEQ_MASK
            if not raw & FLAG_MASK and self._last < seq <= self._last + 1_000_000:
                self._lost_msgs.append(seq)
        self._lost_bytes += lost_bytes
        log.error("stream %s: %s in block %d at offset %d (%s); truncated %d byte(s) and reported them lost",
                  self.config.name, what, blk.id, off, exc, lost_bytes)
        mv.release()
        blk.truncate(off)

    # ------------------------------------------------------------------ state / consumers / lifecycle
    def update_config(self, config: StoreConfig) -> None:
        super().update_config(config)
        write_meta(self._dir, self._meta_dict(), config.name)
        self.flush()

    def consumer_store(self, name: str, meta: dict) -> FileConsumerStore:
        self._check_open()
        cs = self._consumers.get(name)
        if cs is not None:
            if meta:
                cs.update_config(meta)
            return cs
        cs = FileConsumerStore(os.path.join(self._obs_dir, name), name, meta, self.config.name,
                               fsync=self._sync_always, on_close=self._consumer_closed)
        self._consumers[name] = cs
        return cs

    def _consumer_closed(self, cs: FileConsumerStore) -> None:
        if self._consumers.get(cs.name) is cs:
            del self._consumers[cs.name]

    def consumer_names(self) -> list[str]:
        try:
            names = os.listdir(self._obs_dir)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if os.path.isfile(os.path.join(self._obs_dir, n, META_FILE)))

    def stop(self) -> None:
        """Flush, write consumer states and index.db, fsync, close files. On a full disk (or any
        write error) the files are closed all the same: what is on disk is consistent (a
        failed write was cut back) and the next start recovers from the blocks."""
        if self._closed:
            return
        try:
            try:
                self.flush()
            finally:
                for cs in list(self._consumers.values()):
                    cs.stop()
            self.write_index()
        except (StoreError, OSError) as exc:
            log.error("stream %s: stopping with a write error (%s); recovery will rebuild from the blocks",
                      self.config.name, exc)
            self._remove_index_file_quietly()
        finally:
            for blk in self._blocks.values():
                blk.close()
            self._closed = True

    def _remove_index_file_quietly(self) -> None:
        # An index.db older than the blocks is detected and ignored anyway; removing it only
        # saves the check.
        try:
            self._remove_index_file()
        except OSError:
            pass

    def _abandon(self) -> None:
        """Close the files without flushing or writing anything: what a ``kill -9`` leaves
        behind (for tests of recovery)."""
        for blk in self._blocks.values():
            blk.close()
        self._closed = True

    def delete(self) -> None:
        """Stop and remove the stream's directory."""
        if not self._closed:
            for blk in self._blocks.values():
                blk.close()
            self._closed = True
        shutil.rmtree(self._dir, ignore_errors=True)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("store is closed")
