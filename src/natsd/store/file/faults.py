"""What the file store does when the disk fails it: a write that fails (issue 14, item 1) and
damaged bytes met at recovery (item 4). A mixin of :class:`~natsd.store.file.stream_store.FileStreamStore`
(it uses that class's index and blocks), kept apart so the store's main module stays readable.

- **Failed write** (``_write_failed``): the block has cut its file back to the last good size;
  every message not on disk is rolled back (the sequences are free again, nobody was told of
  them), records about durable messages stay pending for the next flush, and the owner learns
  what was taken back through ``take_rollback()``. Readers never see unwritten records
  (``_flush_for_read``). Nothing is sticky: the next flush simply tries again.
- **Damaged bytes** (``next_record``, ``_skip_damage``, ``_report_gap``): every record carries
  its own length (twice) and CRC-32, so after a damaged record recovery looks for the next offset
  where an intact record starts and goes on from there, reporting exactly the sequences that
  were in the damaged bytes instead of dropping the rest of the block.
"""

from __future__ import annotations

import logging
import zlib

from natsd.store._core import IndexedStreamStore
from natsd.store.base import MsgNotFound, StorageUpdateHandler, StoreConfig, StoreWriteError
from natsd.store.file.block import MessageBlock
from natsd.store.file.layout import MAX_RECORD_SIZE
from natsd.store.file.record import FLAG_ERASED, FLAG_FIRST, FLAG_MASK, HEAD_STRUCT, RECORD_OVERHEAD, SEQ_MASK

__all__ = ["FaultHandling", "next_record"]

log = logging.getLogger("natsd.store")

_HEAD_UNPACK = HEAD_STRUCT.unpack_from
_crc32 = zlib.crc32
# CRC-32 residue (see natsd.store.file.stream_store): an intact record of ``size`` bytes, trailer
# included, has the CRC ``crc32(size as u32 LE, _CRC_RESIDUE)`` whatever it holds.
_CRC_RESIDUE = 0x2144DF1C


def _residue(size: int) -> int:
    return _crc32(size.to_bytes(4, "little"), _CRC_RESIDUE)


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
                    and _crc32(mv[o: o + size]) == _residue(size)):
                return o
        o += 1
    return -1


class FaultHandling:
    """Failed writes and damaged bytes; see the module docstring. State it uses (set up by
    FileStreamStore): ``_durable_last``, ``_rollback``, ``_write_failing``, ``_gap_from``."""

    # What the mixin uses of FileStreamStore (and its IndexedStreamStore base), declared for the
    # type checker; the values are set up by FileStreamStore.__init__.
    config: StoreConfig
    _last: int
    _cb: StorageUpdateHandler | None
    _replaying: bool
    _marker_first: int
    _blive: dict[int, int] | None
    _rcache: tuple[int, int, int, bytes] | None
    _durable_last: int
    _rollback: tuple[int, StoreWriteError] | None
    _write_failing: bool
    _lost_bytes: int
    _lost_msgs: list[int]
    _scan_pending_suspect: int
    _scan_max_msg: int
    _gap_from: int

    def flush(self) -> None: ...

    def _write_failed(self, blk: MessageBlock, exc: StoreWriteError, marker_first: int) -> None:
        """A write of ``blk``'s pending records failed (the block cut the file back to its last
        good size). Nothing that is not on disk may stay visible, and no sequence may be used
        twice on disk, so:

        - every message (and skip) above the last durable sequence is rolled back: removed from
          the index with no record written, ``last`` falls back to the durable one, and the
          next store reuses those sequences, exactly as if the publishes had never arrived (the
          stream answers each of them with an error, see ``take_rollback``);
        - records about durable sequences (tombstones, truncations, skips written at recovery)
          stay pending and are written by the next flush; the FIRST marker is rebuilt then.

        Removals that the rolled back messages caused (discard "old" limits) stay done: they
        only move the stream ahead of what it would hold, they lose nothing that was not going
        to be removed by the next store anyway."""
        durable = self._durable_last
        data = blk.pending
        keep = bytearray()
        off = 0
        end = len(data)
        while off < end:
            total, raw, _ts, _slen = _HEAD_UNPACK(data, off)
            size = total & 0x7FFFFFFF
            flags = raw & FLAG_MASK
            if flags and not flags & (FLAG_FIRST | FLAG_ERASED) and raw & SEQ_MASK <= durable:
                keep += data[off: off + size]
            off += size
        blk.pending = keep
        self._marker_first = marker_first
        self._blive = None
        self._rcache = None
        rolled = self._last - durable
        if rolled > 0:
            cb, self._cb = self._cb, None
            self._replaying = True
            try:
                IndexedStreamStore.truncate(self, durable)  # type: ignore[arg-type]  # self is a FileStreamStore
            finally:
                self._replaying = False
                self._cb = cb
        # Logged once per outage (a full disk fails every flush until space returns).
        (log.debug if self._write_failing else log.error)(
            "stream %s: write failed (%s); rolled back %d sequence(s) after %d", self.config.name, exc,
            max(rolled, 0), durable)
        self._write_failing = True
        prev = self._rollback
        self._rollback = (durable if prev is None else min(prev[0], durable), exc)

    def take_rollback(self) -> tuple[int, StoreWriteError] | None:
        """``(last durable sequence, error)`` if a failed write rolled messages back since the
        last call (every sequence above it was taken back), else None. The stream answers the
        publishes of those sequences with an error instead of a PubAck."""
        rb = self._rollback
        self._rollback = None
        return rb

    def _flush_for_read(self, seq: int) -> None:
        """Before serving ``seq`` from the pending buffer: flush. If that fails, the write was
        rolled back and ``seq`` no longer exists (MsgNotFound)."""
        try:
            self.flush()
        except StoreWriteError:
            pass
        if seq > self._durable_last:
            raise MsgNotFound(f"message {seq} was not stored (write failed)")

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
