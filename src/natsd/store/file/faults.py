"""What the file store does when a write fails (disk full, I/O error): the part of
:class:`~natsd.store.file.stream_store.FileStreamStore` that owns what is durable (the last
sequence on disk) and what a failed write took back. Damaged bytes met at start are recovery's
business: :mod:`natsd.store.file.recovery`.

- **Failed write** (``write_failed``): the block has cut its file back to the last good size;
  every message not on disk is rolled back (the sequences are free again, nobody was told of
  them), records about durable messages stay pending for the next flush, and the owner learns
  what was taken back through ``take_rollback()``. Readers never see unwritten records
  (``flush_for_read``). Nothing is sticky: the next flush simply tries again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from natsd.store.base import MsgNotFound, StoreWriteError
from natsd.store.file.block import MessageBlock
from natsd.store.file.record import FLAG_ERASED, FLAG_FIRST, FLAG_MASK, HEAD_STRUCT, SEQ_MASK
from natsd.store.seqindex import IndexedStreamStore

if TYPE_CHECKING:
    from natsd.store.file.stream_store import FileStreamStore

__all__ = ["WriteFaults"]

log = logging.getLogger("natsd.store")

_HEAD_UNPACK = HEAD_STRUCT.unpack_from


class WriteFaults:
    """Failed writes; see the module docstring. Owns the durability state; reaches the store's
    index and write state through ``store``."""

    __slots__ = ("_s", "durable_last", "rollback", "failing")

    def __init__(self, store: FileStreamStore) -> None:
        self._s = store
        #: The last sequence whose record (message or marker) is on disk.
        self.durable_last = 0
        #: What failed writes rolled back since the owner last asked (``take_rollback``).
        self.rollback: tuple[int, StoreWriteError] | None = None
        #: A write failed and none worked since (logged once per outage).
        self.failing = False

    def write_failed(self, blk: MessageBlock, exc: StoreWriteError, marker_first: int) -> None:
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
        s = self._s
        durable = self.durable_last
        data = blk.pending
        keep = bytearray()
        off = 0
        end = len(data)
        while off < end:
            total, raw, _ts, _slen = _HEAD_UNPACK(data, off)
            size = total & 0x7FFFFFFF
            flags = raw & FLAG_MASK
            if flags and not flags & (FLAG_FIRST | FLAG_ERASED) and raw & SEQ_MASK <= durable:
                keep += data[off : off + size]
            off += size
        blk.pending = keep
        s._marker_first = marker_first
        s._blive = None
        s._reads.rcache = None
        rolled = s._last - durable
        if rolled > 0:
            cb, s._cb = s._cb, None
            s._replaying = True
            try:
                IndexedStreamStore.truncate(s, durable)
            finally:
                s._replaying = False
                s._cb = cb
        # Logged once per outage (a full disk fails every flush until space returns).
        (log.debug if self.failing else log.error)(
            "stream %s: write failed (%s); rolled back %d sequence(s) after %d",
            s.config.name,
            exc,
            max(rolled, 0),
            durable,
        )
        self.failing = True
        prev = self.rollback
        self.rollback = (durable if prev is None else min(prev[0], durable), exc)

    def take_rollback(self) -> tuple[int, StoreWriteError] | None:
        """``(last durable sequence, error)`` if a failed write rolled messages back since the
        last call (every sequence above it was taken back), else None. The stream answers the
        publishes of those sequences with an error instead of a PubAck."""
        rb = self.rollback
        self.rollback = None
        return rb

    def flush_for_read(self, seq: int) -> None:
        """Before serving ``seq`` from the pending buffer: flush. If that fails, the write was
        rolled back and ``seq`` no longer exists (MsgNotFound)."""
        try:
            self._s.flush()
        except StoreWriteError:
            pass
        if seq > self.durable_last:
            raise MsgNotFound(f"message {seq} was not stored (write failed)")
