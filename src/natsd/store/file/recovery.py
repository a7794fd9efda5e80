"""Recovery of a file stream at start: rebuilding the index from ``msgs/index.db`` and the blocks.

A mixin of :class:`~natsd.store.file.stream_store.FileStreamStore` (it uses that class's index
and blocks), kept apart so the store's main module stays about the running store. The bytes it
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
  knew beyond the blocks' last are reported lost and never handed out again (``_keep_last``).
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
from array import array
from itertools import repeat
from operator import or_, sub

from natsd.store.file.crc import crc32
from natsd.store.base import CorruptState
from natsd.store.file.block import MessageBlock
from natsd.store.file.compress import ChunkCache
from natsd.store.file.index import IndexSnapshot, decode_index
from natsd.store.file.layout import MAX_RECORD_SIZE, TMP_SUFFIX, block_file_name, parse_block_file_name
from natsd.store.file.record import (
    CRC_RESIDUE, FLAG_ERASED, FLAG_FIRST, FLAG_MASK, FLAG_SKIP, FLAG_TOMB, FLAG_TRUNC, FLAG_TTL, HEAD_STRUCT,
    HEADER_SIZE, RECORD_OVERHEAD, SEQ_MASK, TRAILER_STRUCT, RecordError, intact_crc,
)
from natsd.store.seqindex import NEVER_EXPIRES, IndexedStreamStore

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
            if (int.from_bytes(data[o + size - 4: o + size], "little") == size
                    and _crc32(mv[o: o + size]) == intact_crc(size)):
                return o
        o += 1
    return -1


class Recovery(IndexedStreamStore):
    """Start-up recovery; see the module docstring. Called once from FileStreamStore.__init__
    (``_recover``) while ``_replaying`` is set, so the payload hooks write nothing. A part of
    FileStreamStore: it subclasses the index for the type checker and declares the
    FileStreamStore state it uses; a full scan adds ``_scan_*`` attributes while it runs."""

    _msgs_dir: str
    _index_path: str
    _blocks: dict[int, MessageBlock]
    _lmb: MessageBlock | None
    #: (last sequence, its time) the stale index knew beyond the blocks: never handed out again.
    _keep_last: tuple[int, int] | None
    #: After damaged bytes: the first sequence that may have been in them (0: none pending).
    _gap_from: int
    _chunk_cache: ChunkCache

    def _recover(self) -> None:
        """Rebuild the index: from index.db when it is current, else by a full scan. Leftover
        ``*.tmp`` files (a rewrite cut by a crash) are removed first."""
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
        before = (0, 0)  # what earlier recoveries lost: index.db carries their total
        if snap is not None and self._load_index(snap, ids):
            before = (len(set(snap.lost)), snap.lost_bytes)
        else:  # (a full scan starts from nothing: everything it reports lost is this recovery's)
            self._full_scan(ids, snap)
        self.recovered_lost = (max(len(set(self._lost_msgs)) - before[0], 0),
                               max(self._lost_bytes - before[1], 0))

    def _open_block(self, bid: int) -> MessageBlock:
        blk = MessageBlock(bid, os.path.join(self._msgs_dir, block_file_name(bid)), cache=self._chunk_cache)
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
        goes through :meth:`_replay_one`, one record at a time.

        A compressed block reads as its plain records (a chunk that fails its check reads as
        zeros, which the record checks below then treat as damaged bytes); one whose header is
        damaged holds nothing readable: it is reported lost whole and emptied."""
        if blk.damaged:
            self._lose_damaged_block(blk)
            return True
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
                                want = residues[size] = crc32(size.to_bytes(4, "little"), CRC_RESIDUE)
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

    def _lose_damaged_block(self, blk: MessageBlock) -> None:
        size = os.fstat(blk.fd).st_size
        self._lost_bytes += size
        log.error("stream %s: compressed block %d is damaged (%s); its %d byte(s) are lost and the messages "
                  "in it reported lost", self.config.name, blk.id, blk.damaged, size)
        blk.truncate(0)

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

    def _skip_damage(self, blk: MessageBlock, off: int, nxt: int, mv, exc, scanning: bool) -> None:
        """Bytes ``off .. nxt`` of ``blk`` are damaged and an intact record starts at ``nxt``:
        recovery goes on from there instead of dropping the rest of the block (every record
        carries its own length and checksum, so the next one is found by trying each offset).
        The bytes stay in the file (intact records after them keep their offsets); what was
        lost is reported: the bytes now, the sequences when the next message shows how far the
        gap goes (the full scan's suspect ranges, or _gap_from / _report_gap)."""
        self._lost_bytes += nxt - off
        if scanning:
            if not self._scan_pending_suspect:
                self._scan_pending_suspect = self._scan_max_msg + 1
        else:
            self._gap_from = self._last + 1
        log.error("stream %s: damaged record in block %d at offset %d (%s); skipped %d byte(s) up to the next "
                  "intact record at offset %d", self.config.name, blk.id, off, exc, nxt - off, nxt)

    def _report_gap(self, seq: int) -> None:
        """The first message after damaged bytes has sequence ``seq``: the sequences from
        _gap_from up to it were in the damaged bytes (or were skipped: a skip record lost with
        them reads the same), so they are reported lost."""
        lo, self._gap_from = self._gap_from, 0
        if 0 < seq - lo <= 1_000_000:
            self._lost_msgs.extend(range(lo, seq))
            log.error("stream %s: message(s) %d..%d lost in damaged bytes", self.config.name, lo, seq - 1)
