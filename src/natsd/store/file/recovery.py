"""Recovery of a file stream at start: rebuilding the index from ``msgs/index.db`` and the blocks.

A part of :class:`~natsd.store.file.stream_store.FileStreamStore` (it rebuilds that class's index
and opens its blocks), kept apart so the store's main module stays about the running store. The bytes it
reads are documented in :mod:`natsd.store.file.record` (block records) and
:mod:`natsd.store.file.index` (index.db).

- **Fast path** (``_load_index``): ``msgs/index.db`` is loaded when its checksum is good and
  every block still holds the bytes it recorded (size and last 8 bytes); records written after
  it are replayed from the recorded offsets, blocks created after it from the start. A block
  the index lists that is gone: its messages are reported lost (``_report_missing_blocks``).
- **Full scan** (``_full_scan``) otherwise: every block is replayed in order
  (``_replay_block``). A hole in the block numbering is a lost block: the sequences between the
  last message before it and the first after it are reported lost (the "suspect ranges", minus
  sequences that tombstones or skips show were removed on purpose). Sequences the stale index
  knew beyond the blocks' last are reported lost and never handed out again (``keep_last``).
- **Checksums**: every record is verified (length at both ends and CRC-32, in one C call
  through the residue, ``record.CRC_RESIDUE``) before it is applied.
- **Damaged bytes**: a damaged record followed by intact ones costs only itself: recovery finds
  the next intact record (``next_record``) and goes on from there (``_skip_damage``), and the
  first message after the gap shows which sequences were in it (``_report_gap``).
- **Torn tail**: a damaged record with nothing intact after it (a write cut by a crash)
  truncates its block at that offset, fsynced (``_truncate_block``); the bytes dropped, and the
  sequence the torn record claimed when plausible, are reported lost and logged.

What was lost shows in ``state().lost_msgs``/``lost_bytes`` and in the log, never silently.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING
from array import array
from operator import sub

from natsd.store.file.crc import crc32
from natsd.store.base import CorruptState, StoreKeyError
from natsd.store.file.block import MessageBlock
from natsd.store.file.index import IndexSnapshot
from natsd.store.file.keyfiles import block_key_name
from natsd.store.file.layout import MAX_RECORD_SIZE, TMP_SUFFIX, block_file_name, parse_block_file_name
from natsd.store.file.record import (
    CRC_RESIDUE,
    FLAG_ERASED,
    FLAG_FIRST,
    FLAG_MASK,
    FLAG_SKIP,
    FLAG_TOMB,
    FLAG_TRUNC,
    FLAG_TTL,
    HEAD_STRUCT,
    HEADER_SIZE,
    RECORD_OVERHEAD,
    SEQ_MASK,
    TRAILER_STRUCT,
    RecordError,
    intact_crc,
)
from natsd.store.seqindex import DEAD_SIDS, NEVER_EXPIRES, IndexedStreamStore
from natsd.store import memtrim

if TYPE_CHECKING:
    from natsd.store.file.stream_store import FileStreamStore

__all__ = ["Recovery", "next_record"]

log = logging.getLogger("natsd.store")

_crc32 = crc32
_HEAD_UNPACK = HEAD_STRUCT.unpack_from
_TRAILER_UNPACK = TRAILER_STRUCT.unpack_from


def next_record(data: bytes, mv, start: int, end: int) -> int:
    """Offset of the first intact record at or after ``start`` in ``data[:end]`` (plausible
    length, repeated length and checksum all match), or -1. Tries every offset; an intact
    record is found by accident with odds of 2**-32 per offset that passes the length checks."""
    lim = end - RECORD_OVERHEAD
    o = start
    while o <= lim:
        total, _raw, _ts, slen = _HEAD_UNPACK(data, o)
        size = total & 0x7FFFFFFF
        if RECORD_OVERHEAD + slen <= size <= MAX_RECORD_SIZE and o + size <= end:
            if int.from_bytes(data[o + size - 4 : o + size], "little") == size and _crc32(
                mv[o : o + size]
            ) == intact_crc(size):
                return o
        o += 1
    return -1


class Recovery:
    """Start-up recovery; see the module docstring. Run once from FileStreamStore.__init__
    (``run``) while the store's ``_replaying`` is set, so its payload hooks write nothing. Owns
    what only recovery needs (a pending gap, the full scan's bookkeeping); rebuilds the store's
    index and opens its blocks through ``store``."""

    __slots__ = (
        "_s",
        "gap_from",
        "keep_last",
        "scanning",
        "scan_removed",
        "scan_suspect",
        "pending_suspect",
        "max_msg",
    )

    def __init__(self, store: FileStreamStore) -> None:
        self._s = store
        #: After damaged bytes: the first sequence that may have been in them (0: none pending);
        #: the next message record closes the gap (``_report_gap``).
        self.gap_from = 0
        #: (last sequence, its time) the stale index knew beyond the blocks: never handed out again.
        self.keep_last: tuple[int, int] | None = None
        # The full scan (``_full_scan``): sequences removed on purpose, start/end pairs of
        # ranges that may have been lost, the start of the open one, the highest message seen.
        self.scanning = False
        self.scan_removed = array("q")
        self.scan_suspect: list[int] = []
        self.pending_suspect = 0
        self.max_msg = 0

    def run(self, new: bool = False) -> None:
        """Rebuild the index: from index.db when it is current, else by a full scan. Leftover
        ``*.tmp`` files (a rewrite cut by a crash) are removed first. ``new``: the store's
        directory was just created, empty (the same empty scan, without reading it). A
        directory without ``msgs/`` is a stream that never wrote a block: empty, as new."""
        s = self._s
        ids = []
        snap = None
        if not new:
            try:
                names = os.listdir(s._msgs_dir)
            except FileNotFoundError:
                names = None
            if names is not None:
                s._msgs_made = True
                for name in names:
                    bid = parse_block_file_name(name)
                    if bid is not None:
                        ids.append(bid)
                    elif name.endswith(TMP_SUFFIX):
                        os.unlink(os.path.join(s._msgs_dir, name))
                ids.sort()
                try:
                    snap = s._index_file.read()
                except CorruptState as exc:
                    log.warning("stream %s: %s; rebuilding from the blocks", s.config.name, exc)
        before = (0, 0)  # what earlier recoveries lost: index.db carries their total
        if snap is not None and self._load_index(snap, ids):
            before = (len(set(snap.lost)), snap.lost_bytes)
        else:  # (a full scan starts from nothing: everything it reports lost is this recovery's)
            self._full_scan(ids, snap)
        s.recovered_lost = (max(len(set(s._lost_msgs)) - before[0], 0), max(s._lost_bytes - before[1], 0))
        memtrim.after_large_index(len(s._snames) + len(s._pos))

    def _open_block(self, bid: int) -> MessageBlock:
        s = self._s
        path = os.path.join(s._msgs_dir, block_file_name(bid))
        try:
            ks, key_path = s.block_keys(bid)
        except FileNotFoundError:
            if os.path.getsize(path):
                raise StoreKeyError(
                    f"stream {s.config.name!r}: block {path} has no key file "
                    f"({block_key_name(bid)}): its bytes can not be read"
                ) from None
            ks, key_path = s.block_keys(bid, create=True)  # created, then cut by a crash: empty
        blk = MessageBlock(bid, path, cache=s._compression.chunks, ks=ks, key_path=key_path)
        s._blocks[bid] = blk
        return blk

    def _load_index(self, snap: IndexSnapshot, ids: list[int]) -> bool:
        """Use index.db if the blocks still hold what it recorded; replay what was appended
        after it. False (nothing changed) when it is stale."""
        s = self._s
        present = set(ids)
        listed = {b.id for b in snap.blocks}
        top = max(listed) if listed else 0
        if any(bid not in listed and bid < top for bid in ids):
            log.warning("stream %s: index.db does not list every block; rebuilding", s.config.name)
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
            log.warning("stream %s: index.db is stale; rebuilding from the blocks", s.config.name)
            for blk in s._blocks.values():
                blk.close()
            s._blocks.clear()
            return False
        # Adopt the snapshot.
        s._first, s._last = snap.first, snap.last
        s._first_ts, s._last_ts = snap.first_ts, snap.last_ts
        s._msgs, s._bytes, s._base = snap.msgs, snap.bytes, snap.base
        s._pos, s._sid, s._ts, s._sz, s._nxt = snap.pos, snap.sid, snap.ts, snap.sz, snap.nxt
        s._szx = snap.szx
        s._dead = DEAD_SIDS[snap.sid.typecode]
        s._tss, s._tsb = snap.tss, snap.tsb
        if snap.tsb:
            s._tsc = snap.tsb[-1]
        s._pss, s._psh = snap.pss, snap.psh
        if snap.psh:
            s._psc = snap.psh[-1]
        s._fit_chains()
        # Freed slots stay None (see IndexedStreamStore._snames).
        s._snames = snap.snames
        s._smsgs, s._sfirst, s._slast, s._sstale = snap.smsgs, snap.sfirst, snap.slast, snap.sstale
        if snap.free_slots:
            s._free_sids = [sid for sid, name in enumerate(snap.snames) if name is None]
        else:
            s._free_sids = []
        # The subject table's cells as index.db holds them (version 6): adopted, no name hashed
        # (a restart of a 200,000-key bucket spent half its load building a dict of them). An
        # older index's names are indexed when lookups make it pay (SubjectTable.load). The
        # store's own table object, refilled in place: the hot path holds its cache.
        s._sid_of.load(snap.snames, snap.scells, snap.sover, len(snap.snames) - len(s._free_sids))
        s._sgen += 1
        for seq, exp in snap.ttl:
            s._ttl[seq] = exp
            if exp != NEVER_EXPIRES:
                s._ttl_heap.append((exp, seq))
        s._ttl_heap.sort()
        s._lost_msgs = list(snap.lost)
        s._lost_bytes = snap.lost_bytes
        # index.db describes the blocks exactly (nothing to replay, nothing missing)?
        current = s._index_file.read_current and all(blk.flushed == size for blk, size in opened) and set(ids) == listed
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
        if s._blocks:
            s._lmb = s._blocks[max(s._blocks)]
        if current:  # (index.db is this index: a stop that changes nothing keeps it, IndexFile.mark)
            s._index_file.mark = s._index_file.summary()
        return True

    def _report_missing_blocks(self, missing: set[int]) -> None:
        """Messages the index placed in blocks that are gone are lost (a block unlinked because
        all of it was below first holds no live message any more, so it reports nothing)."""
        s = self._s
        lost = [seq for seq, pos in s._iter_index() if (pos >> 32) in missing]
        for seq in lost:
            s._lost_msgs.append(seq)
            s._lost_bytes += s._size(seq - s._base)
            s._remove(seq, notify=False)
        if lost:
            log.error(
                "stream %s: block file(s) %s missing; %d message(s) lost", s.config.name, sorted(missing), len(lost)
            )

    def _full_scan(self, ids: list[int], snap: IndexSnapshot | None) -> None:
        """Rebuild the index from every block, in order."""
        s = self._s
        self.scanning = True
        prev = 0
        for n, bid in enumerate(ids):
            if prev and bid != prev + 1:
                log.error("stream %s: block file(s) %d..%d missing", s.config.name, prev + 1, bid - 1)
                self.pending_suspect = self.max_msg + 1
            prev = bid
            blk = self._open_block(bid)
            truncated = self._replay_block(blk, 0, last_block=n == len(ids) - 1)
            if truncated and n != len(ids) - 1:
                self.pending_suspect = self.max_msg + 1
        if s._blocks:
            s._lmb = s._blocks[max(s._blocks)]
        removed = set(self.scan_removed)
        lost: list[int] = []
        for lo, hi in self._scan_suspect_ranges():
            lost.extend(q for q in range(max(lo, s._first), hi + 1) if q not in removed)
        if snap is not None and snap.last > s._last:
            # The index knew of later sequences than the blocks hold: those messages are lost,
            # and their sequences must never be reused.
            base = snap.base
            lost.extend(base + i for i in range(max(s._last + 1 - base, 0), len(snap.pos)) if snap.pos[i] >= 0)
            self.keep_last = (snap.last, snap.last_ts)
        lost = sorted(set(lost) - set(s._lost_msgs))
        if lost:
            log.error("stream %s: %d message(s) lost: %s", s.config.name, len(lost), lost[:20])
            s._lost_msgs = sorted(set(s._lost_msgs).union(lost))
        self.scanning = False
        self.scan_removed = array("q")
        self.scan_suspect = []

    def _scan_suspect_ranges(self) -> list[tuple[int, int]]:
        pairs = self.scan_suspect
        return [(pairs[i], pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)]

    def _replay_block(self, blk: MessageBlock, start: int, last_block: bool) -> bool:
        """Apply the records of ``blk`` from offset ``start``. On a bad record the block is
        truncated there and the loss reported. Returns True if it truncated.

        The whole block is read at once and walked with ``unpack_from`` over it. The hot loop
        (a full scan walks every record) handles the common record inline: an intact message
        with the next sequence and a subject already seen. It keeps its counters in locals,
        appends the sid, timestamp and chain link per record and fills the position and size
        arrays in bulk when the run ends. Anything else (markers, new subjects, gaps, damage)
        goes through :meth:`_replay_one`, one record at a time.

        A compressed block reads as its plain records (a chunk that fails its check reads as
        zeros, which the record checks below then treat as damaged bytes); one whose header is
        damaged holds nothing readable: it is reported lost whole and emptied."""
        s = self._s
        if blk.damaged:
            self._lose_damaged_block(blk)
            return True
        data = blk.read_all()
        mv = memoryview(data)
        end = len(data)
        off = start
        scanning = self.scanning
        head_unpack = _HEAD_UNPACK
        crc32 = _crc32
        max_size = MAX_RECORD_SIZE
        lim = end - HEADER_SIZE
        residues: dict[int, int] = {}  # record size -> CRC of a whole intact record of that size
        # subject bytes -> decoded subject (every subject seen), and -> sid for the hot loop;
        # the latter is dropped whenever a subject slot is freed or reused (_sgen moves).
        subjects: dict[bytes, str] = {}
        sidcache: dict[bytes, int] = {}
        sgen = s._sgen
        try:
            while off < end:
                if (
                    s._msgs
                    and not self.gap_from
                    and not (scanning and self.pending_suspect)
                    and s._base + len(s._pos) == s._last + 1
                ):
                    if s._sgen != sgen:
                        sidcache.clear()
                        sgen = s._sgen
                    base = s._base
                    first = seq = s._last + 1
                    nxt = s._nxt
                    tsc = s._tsc  # (a time outside its segment takes the general path)
                    smsgs, slast, sstale = s._smsgs, s._slast, s._sstale
                    offs: list[int] = []
                    offs_append = offs.append
                    sid_append, ts_append = s._sid.append, s._ts.append
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
                        if raw != seq or rec_end > end or size - slen < 30 or not 0 <= ts - tsc <= 0xFFFFFFFF:
                            break
                        if size != psize:
                            psize = size
                            want = residues.get(size)
                            if want is None:
                                want = residues[size] = crc32(size.to_bytes(4, "little"), CRC_RESIDUE)
                        if crc32(mv[off:rec_end]) != want:
                            break
                        s0 = off + hsize
                        sid = get(data[s0 : s0 + slen])
                        if sid is None:
                            break
                        smsgs[sid] += 1
                        prev = slast[sid]
                        slast[sid] = seq
                        if sstale[sid]:
                            sstale[sid] &= ~2
                        # prev >= base: a live subject's last message is in the arrays.
                        if nxt is not None:
                            nxt.append(0)
                            nxt[prev - base] = seq - prev
                        offs_append(off)
                        sid_append(sid)
                        ts_append(ts - tsc)
                        seq += 1
                        off = rec_end
                    k = seq - first
                    if k:
                        if blk.id != s._psc:
                            s._pos_open(blk.id)
                        s._pos.extend(offs)
                        ends = offs[1:]
                        ends.append(off)
                        s._extend_sizes(first, list(map(sub, ends, offs)))
                        s._msgs += k
                        s._bytes += off - offs[0]
                        s._last = seq - 1
                        s._last_ts = tsc + s._ts[-1]
                        if seq - 1 > blk.max_ref:
                            blk.max_ref = seq - 1
                        if scanning:
                            self.max_msg = seq - 1
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

    def _lose_damaged_block(self, blk: MessageBlock) -> None:
        s = self._s
        size = os.fstat(blk.fd).st_size
        s._lost_bytes += size
        log.error(
            "stream %s: compressed block %d is damaged (%s); its %d byte(s) are lost and the messages "
            "in it reported lost",
            s.config.name,
            blk.id,
            blk.damaged,
            size,
        )
        blk.truncate(0)

    def _replay_one(
        self, blk: MessageBlock, data: bytes, mv, off: int, end: int, subjects: dict, sidcache: dict, scanning: bool
    ) -> int:
        """Verify and apply the one record at ``off``; returns where the next one starts.
        RecordError (or a decoding error) when it is damaged."""
        s = self._s
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
        if _crc32(mv[off : rec_end - 8]) != crc:
            raise RecordError(off, "checksum mismatch")
        if raw <= SEQ_MASK:  # a message: no flag bits
            seq = raw
            sb = data[off + HEADER_SIZE : off + HEADER_SIZE + slen]
            subject = subjects.get(sb)
            if subject is None:
                subject = subjects[sb] = sb.decode()
            if seq > s._last:
                if self.gap_from:
                    self._report_gap(seq)
                if scanning:
                    if self.pending_suspect:
                        self.scan_suspect += (self.pending_suspect, seq - 1)
                        self.pending_suspect = 0
                    self.max_msg = seq
                sidcache[sb] = s._index_add(seq, ts, subject, size, (blk.id << 32) | off)
            else:
                log.warning(
                    "stream %s: block %d offset %d repeats sequence %d; ignored", s.config.name, blk.id, off, seq
                )
            if seq > blk.max_ref:
                blk.max_ref = seq
            return rec_end
        self._replay_marker(blk, mv, off, rec_end, raw, ts, slen, scanning)
        return rec_end

    def _replay_marker(
        self, blk: MessageBlock, mv, off: int, rec_end: int, raw: int, ts: int, slen: int, scanning: bool
    ) -> None:
        """Apply the intact marker record (flag bits set) at ``off``; RecordError for unknown flags."""
        s = self._s
        flags = raw & FLAG_MASK
        seq = raw & SEQ_MASK
        if flags & FLAG_ERASED:
            if seq > s._last:
                s._skip_range(s._last + 1, seq - s._last, ts)
            else:
                s._remove(seq, notify=False)
            if scanning:
                self.scan_removed.append(seq)
                self.max_msg = max(self.max_msg, seq)
            blk.max_ref = max(blk.max_ref, seq)
        elif flags == FLAG_TOMB:
            if seq > s._last:
                # Its message record is gone (block compacted): the sequence was used.
                s._skip_range(s._last + 1, seq - s._last, ts)
            else:
                s._remove(seq, notify=False)
            if scanning:
                self.scan_removed.append(seq)
            blk.max_ref = max(blk.max_ref, seq)
        elif flags == FLAG_TTL:
            i = seq - s._base
            if seq >= s._first and 0 <= i < len(s._pos) and s._pos[i] >= 0:
                s._ttl[seq] = ts
                if ts != NEVER_EXPIRES:
                    s._ttl_heap.append((ts, seq))
        elif flags == FLAG_FIRST:
            s.compact(seq)
            blk.max_ref = max(blk.max_ref, seq)
        elif flags == FLAG_TRUNC:
            IndexedStreamStore.truncate(self._s, seq)
            blk.max_ref = max(blk.max_ref, seq)
        elif flags == FLAG_SKIP:
            count = int.from_bytes(mv[off + HEADER_SIZE + slen : rec_end - 8], "little")
            top = seq + count - 1
            if top > s._last:
                s._skip_range(s._last + 1, top - s._last, ts)
            if scanning:
                self._scan_suspect_skip(seq, top)
            blk.max_ref = max(blk.max_ref, top)
        else:
            raise RecordError(off, f"unknown flags {flags:#x}")

    def _scan_suspect_skip(self, lo: int, hi: int) -> None:
        # Sequences skipped on purpose are not lost; too large a range is not worth listing.
        if hi - lo < 1_000_000:
            self.scan_removed.extend(range(lo, hi + 1))
        self.max_msg = max(self.max_msg, hi)

    def _truncate_block(self, blk: MessageBlock, off: int, end: int, mv, exc, last_block: bool) -> None:
        s = self._s
        lost_bytes = end - off
        what = "torn tail" if last_block else "corrupt record"
        # The sequence in a damaged header is only a hint; report it when it is plausible.
        if end - off >= 12:
            raw = int.from_bytes(mv[off + 4 : off + 12], "little")
            seq = raw & SEQ_MASK
            if not raw & FLAG_MASK and s._last < seq <= s._last + 1_000_000:
                s._lost_msgs.append(seq)
        s._lost_bytes += lost_bytes
        log.error(
            "stream %s: %s in block %d at offset %d (%s); truncated %d byte(s) and reported them lost",
            s.config.name,
            what,
            blk.id,
            off,
            exc,
            lost_bytes,
        )
        mv.release()
        blk.truncate(off)

    def _skip_damage(self, blk: MessageBlock, off: int, nxt: int, mv, exc, scanning: bool) -> None:
        """Bytes ``off .. nxt`` of ``blk`` are damaged and an intact record starts at ``nxt``:
        recovery goes on from there instead of dropping the rest of the block (every record
        carries its own length and checksum, so the next one is found by trying each offset).
        The bytes stay in the file (intact records after them keep their offsets); what was
        lost is reported: the bytes now, the sequences when the next message shows how far the
        gap goes (the full scan's suspect ranges, or gap_from / _report_gap)."""
        s = self._s
        s._lost_bytes += nxt - off
        if scanning:
            if not self.pending_suspect:
                self.pending_suspect = self.max_msg + 1
        else:
            self.gap_from = s._last + 1
        log.error(
            "stream %s: damaged record in block %d at offset %d (%s); skipped %d byte(s) up to the next "
            "intact record at offset %d",
            s.config.name,
            blk.id,
            off,
            exc,
            nxt - off,
            nxt,
        )

    def _report_gap(self, seq: int) -> None:
        """The first message after damaged bytes has sequence ``seq``: the sequences from
        _gap_from up to it were in the damaged bytes (or were skipped: a skip record lost with
        them reads the same), so they are reported lost."""
        s = self._s
        lo, self.gap_from = self.gap_from, 0
        if 0 < seq - lo <= 1_000_000:
            s._lost_msgs.extend(range(lo, seq))
            log.error("stream %s: message(s) %d..%d lost in damaged bytes", s.config.name, lo, seq - 1)
