"""MessageBlock: one append-only block file ``msgs/<n>.blk`` (records: natsd.store.file.record).

Appends go into an in-memory ``pending`` buffer; ``flush()`` hands all of it to the OS with one
``pwrite`` at the end of the file. Reads of flushed bytes use ``pread`` (no shared file offset,
no seek); reads of bytes still pending come from the buffer, so a message is readable the moment
it is stored.

A failed write (ENOSPC, EIO...) cuts the file back to its last good size (``ftruncate``, which
needs no free space) so it still ends on a record boundary, and raises StoreWriteError; the
pending bytes stay for the owner to roll back or retry (natsd.store.file.stream_store). Only when
that cut fails too is the tail unknown: ``werr`` is kept and every later flush first retries the
cut, so the block recovers by itself once the disk answers again (the reference keeps
``mb.werr`` until a restart).

A sealed block may be compressed (``compression: s2``, natsd.store.file.compress): the file is
then replaced by its compressed form and ``comp`` reads it by plain offsets, so offsets,
``flushed`` (the plain size) and every read method mean the same for both kinds. A compressed
block is never appended to; an in-place change (secure erase, truncation) first turns it back
into a plain file (``_decompress_file``), and the store compresses it again later.
"""

from __future__ import annotations

import os

from natsd.atomicfile import atomic_write, fsync_dir
from natsd.store.base import StoreWriteError
from natsd.store.file.compress import ChunkCache, CompressedView, CorruptBlock, is_compressed

__all__ = ["MessageBlock"]

# The system calls that write, behind module names so tests can inject faults (ENOSPC, EIO,
# short writes) without a full disk.
_pwrite = os.pwrite
_fsync = os.fsync
_ftruncate = os.ftruncate


class MessageBlock:
    """One block file. ``size`` is the logical size (flushed + pending bytes)."""

    __slots__ = ("id", "path", "fd", "flushed", "pending", "max_ref", "dirty_sync", "werr", "comp", "cache",
                 "damaged", "gen")

    def __init__(self, block_id: int, path: str, create: bool = False, cache: ChunkCache | None = None) -> None:
        self.id = block_id
        self.path = path
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self.fd = os.open(path, flags, 0o644)
        self.cache = cache
        #: Bumped by every change of the file's bytes (erase, truncate, rewrite): a compression
        #: started before it is stale (see natsd.store.file.stream_store).
        self.gen = 0
        self._detect()
        self.pending = bytearray()
        # Highest sequence any record in this block refers to: the block may be unlinked once
        # every such sequence is below the stream's first sequence.
        self.max_ref = 0
        self.dirty_sync = create
        self.werr: OSError | None = None

    def _detect(self) -> None:
        """Plain or compressed file: sets ``comp`` and ``flushed`` (the plain size). A compressed
        file whose header is damaged reads as empty, ``damaged`` says why (recovery reports it)."""
        self.comp: CompressedView | None = None
        self.damaged: str | None = None
        size = os.fstat(self.fd).st_size
        self.flushed = size
        if size >= 8 and is_compressed(os.pread(self.fd, 8, 0)):
            try:
                self.comp = CompressedView(self.fd, self.cache if self.cache is not None else ChunkCache())
            except CorruptBlock as exc:
                self.damaged = str(exc)
                self.flushed = 0
                return
            self.flushed = self.comp.raw_len

    @property
    def compressed(self) -> bool:
        return self.comp is not None

    @property
    def disk_size(self) -> int:
        """Bytes the file takes (the compressed size for a compressed block)."""
        return self.comp.disk_size if self.comp is not None else self.flushed

    def pread(self, n: int, off: int) -> bytes:
        """``n`` flushed bytes at plain offset ``off`` (fewer at the end), as ``os.pread``."""
        if self.comp is None:
            return os.pread(self.fd, n, off)
        return self.comp.read(off, n)

    def reopen(self) -> None:
        """The file was replaced (compressed, compacted, decompressed): open it again."""
        os.close(self.fd)
        self.fd = os.open(self.path, os.O_RDWR)
        self.gen += 1
        self._detect()
        self.dirty_sync = False

    def _decompress_file(self) -> None:
        """Turn a compressed block back into a plain file (atomic, fsynced) before changing it."""
        if self.comp is not None:
            atomic_write(self.path, self.comp.read_all())
            fsync_dir(os.path.dirname(self.path))
            self.reopen()

    @property
    def size(self) -> int:
        return self.flushed + len(self.pending)

    def append(self, data) -> int:
        """Buffer ``data``; returns the offset it will have in the file."""
        off = self.flushed + len(self.pending)
        self.pending += data
        return off

    def flush(self, sync: bool = False) -> bool:
        """Write every pending byte (one pwrite), and fsync when ``sync``; True if anything was
        written. On failure the file is cut back to the bytes written before this call (see the
        module docstring), ``pending`` is kept and StoreWriteError raised."""
        if not self.pending:
            if sync:
                self.sync()
            return False
        if self.werr is not None:
            self._cut_back()
        data = self.pending
        off = self.flushed
        try:
            view = memoryview(data)
            try:
                while view:
                    n = _pwrite(self.fd, view, off)
                    view = view[n:]
                    off += n
            finally:
                view.release()
            if sync:
                _fsync(self.fd)
        except OSError as exc:
            self.werr = exc
            try:
                self._cut_back()
            except StoreWriteError:
                pass
            raise StoreWriteError(f"block {self.path}: write failed: {exc}", exc.errno) from exc
        self.flushed += len(data)
        self.pending = bytearray()
        self.dirty_sync = not sync
        return True

    def _cut_back(self) -> None:
        """After a failed write: drop whatever part of it reached the file (``flushed`` is the
        size before it). Clears ``werr`` when the cut works."""
        try:
            _ftruncate(self.fd, self.flushed)
        except OSError as exc:
            raise StoreWriteError(f"block {self.path}: earlier write failed ({self.werr}) and the "
                                  f"file can not be cut back: {exc}", exc.errno) from exc
        self.werr = None

    def sync(self) -> None:
        if self.dirty_sync:
            try:
                _fsync(self.fd)
            except OSError as exc:
                raise StoreWriteError(f"block {self.path}: fsync failed: {exc}", exc.errno) from exc
            self.dirty_sync = False

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes at ``offset`` (from the pending buffer when not yet flushed)."""
        if offset >= self.flushed:
            start = offset - self.flushed
            return bytes(self.pending[start: start + size])
        if self.comp is not None:
            return self.comp.read(offset, size)
        return os.pread(self.fd, size, offset)

    def overwrite(self, offset: int, data: bytes) -> None:
        """Replace bytes in place (secure erase). Pending bytes are patched in the buffer."""
        if offset >= self.flushed:
            start = offset - self.flushed
            self.pending[start: start + len(data)] = data
            return
        assert offset + len(data) <= self.flushed, "an overwrite never straddles the flush point"
        self._decompress_file()
        self.gen += 1
        os.pwrite(self.fd, data, offset)
        self.dirty_sync = True

    def read_all(self) -> bytes:
        """The whole flushed file (recovery), plain."""
        if self.comp is not None:
            return self.comp.read_all()
        return os.pread(self.fd, self.flushed, 0) if self.flushed else b""

    def truncate(self, size: int) -> None:
        """Cut the file at ``size`` (recovery of a torn or corrupt tail); fsynced."""
        assert not self.pending
        if self.comp is not None or self.damaged:
            # Compressed: the kept part becomes a plain file (a damaged one: an empty file).
            atomic_write(self.path, self.comp.read(0, size) if self.comp is not None else b"")
            fsync_dir(os.path.dirname(self.path))
            self.reopen()
            return
        os.ftruncate(self.fd, size)
        os.fsync(self.fd)
        self.flushed = size
        self.gen += 1

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def unlink(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
