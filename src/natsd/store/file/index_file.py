"""``msgs/index.db`` as a part of :class:`~natsd.store.file.stream_store.FileStreamStore`: the
file's path, how often ``sync()`` rewrites it, and when it last did. The bytes are
:mod:`natsd.store.file.index`'s; recovery reads the file through ``read``. In an encrypted store the file holds
``nonce || AEAD(stream seed).seal(<those bytes>)`` (natsd.store.file.encryption)."""

from __future__ import annotations

import mmap
import os
from typing import TYPE_CHECKING

from natsd.store.file.index import VERSION, BlockInfo, IndexSnapshot, decode_index, encode_index_parts
from natsd.store.file.layout import INDEX_FILE
from natsd.store import stopsync
from natsd.atomicfile import read_whole
from natsd.store.file.meta import atomic_write

if TYPE_CHECKING:
    from natsd.store.file.stream_store import FileStreamStore

__all__ = ["IndexFile"]


class IndexFile:
    """The index snapshot file of one stream; see the module docstring."""

    __slots__ = ("_s", "path", "interval_ns", "written_at", "mark", "read_current")

    def __init__(self, store: FileStreamStore, msgs_dir: str, interval_ns: int) -> None:
        self._s = store
        self.path = os.path.join(msgs_dir, INDEX_FILE)
        #: ``sync()`` rewrites the file once it is this old (and after a block compaction).
        self.interval_ns = interval_ns
        #: Monotonic time of the last write (or of the store's start).
        self.written_at = 0
        #: ``summary()`` of the index the file on disk describes (None: unknown, or none): a
        #: write finding the same skips rewriting it (a stop after reads only, issue 31).
        self.mark: tuple | None = None
        #: ``read`` found a file of the current format (an older one is rewritten at the stop).
        self.read_current = False

    def summary(self) -> tuple:
        """What any change to the index changes: the counters (a store, removal, erase, purge
        or skip moves one of them) and each block's flushed size (a compaction, a new block, a
        FIRST marker)."""
        s = self._s
        return (
            s._first,
            s._last,
            s._msgs,
            s._bytes,
            s._lost_bytes,
            len(s._lost_msgs),
            s._sgen,
            tuple((b.id, b.flushed) for b in s._blocks.values()),
        )

    def read(self) -> IndexSnapshot | None:
        """The snapshot on disk, None when there is none; CorruptState when it fails its checks."""
        asset = self._s._asset
        try:
            if asset is None:
                # A plain file is mapped, not read: the decoder copies what it keeps, and the buffer
                # a read would fill (11 MB for a 200,000-key bucket) was ~10% of the load (issue 31).
                plain: bytes | mmap.mmap = _mapped(self.path)
            else:
                data = read_whole(self.path)
        except FileNotFoundError:
            return None
        if asset is not None:
            plain = asset.open(data, self.path)
        snap = decode_index(plain)
        self.read_current = int.from_bytes(plain[4:8], "little") & 0x7FFFFFFF == VERSION
        return snap

    def due(self, now_ns: int) -> bool:
        return now_ns - self.written_at >= self.interval_ns

    def write(self) -> None:
        """Snapshot the store's in-memory index (after a flush; atomic, fsynced)."""
        s = self._s
        s.flush()
        if not s._msgs_made:
            return  # no block was ever written: no msgs/, and recovery finds an empty stream
        mark = self.summary()
        if mark == self.mark and os.path.exists(self.path):
            self.written_at = s._clock.monotonic_ns()
            return  # (the file already describes exactly this index)
        for blk in s._blocks.values():
            blk.sync()
        # (a lazy last block not written yet has no file: not listed, as a block made after
        # the index would not be, so recovery and peek_stream_state see exactly the files)
        blocks = [
            BlockInfo(b.id, b.flushed, b.max_ref, b.read(b.flushed - 8, 8) if b.flushed >= 8 else b"")
            for b in s._blocks.values()
            if b.made
        ]
        snap = IndexSnapshot(
            s._first,
            s._last,
            s._first_ts,
            s._last_ts,
            s._msgs,
            s._bytes,
            s._base,
            s._marker_first,
            s._lost_bytes,
            s._pos,
            s._sid,
            s._ts,
            s._sz,
            s._nxt,
            s._snames,
            s._smsgs,
            s._sfirst,
            s._slast,
            s._sstale,
            sorted(s._ttl.items()),
            list(s._lost_msgs),
            blocks,
            s._szx,
            s._tss,
            s._tsb,
            s._pss,
            s._psh,
            s._sid_of.cells(),
            s._sid_of.over_sids(),
        )
        body, crc = encode_index_parts(snap)
        asset = s._asset
        # (a clean stop of many streams syncs the filesystem once instead: stopsync)
        out = (body, crc) if asset is None else asset.seal(body + crc)
        atomic_write(self.path, out, fsync=not stopsync.deferred())
        self.written_at = s._clock.monotonic_ns()
        self.mark = mark

    def remove(self) -> None:
        """An index older than a truncation or a purge would describe sequences that no longer exist."""
        self.mark = None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def remove_quietly(self) -> None:
        # An index.db older than the blocks is detected and ignored anyway; removing it only
        # saves the check.
        try:
            self.remove()
        except OSError:
            pass


def _mapped(path: str) -> bytes | mmap.mmap:
    """The file's bytes, mapped read-only (b"" when it is empty: an empty file cannot be mapped).
    index.db is replaced by a rename, never rewritten in place, so the mapped bytes cannot change
    under the decoder; the mapping goes with its last reference."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if not os.fstat(fd).st_size:
            return b""
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
