"""MessageBlock: one append-only block file ``msgs/<n>.blk`` (records: natsd.store.file.record).

Appends go into an in-memory ``pending`` buffer; ``flush()`` hands all of it to the OS with one
``pwrite`` at the end of the file. Reads of flushed bytes use ``pread`` (no shared file offset,
no seek); reads of bytes still pending come from the buffer, so a message is readable the moment
it is stored. After a failed write the error is sticky: every later write raises it again
(the reference's ``mb.werr``), because the file's tail is then unknown.
"""

from __future__ import annotations

import os

from natsd.store.base import StoreError

__all__ = ["MessageBlock"]


class MessageBlock:
    """One block file. ``size`` is the logical size (flushed + pending bytes)."""

    __slots__ = ("id", "path", "fd", "flushed", "pending", "max_ref", "dirty_sync", "werr")

    def __init__(self, block_id: int, path: str, create: bool = False) -> None:
        self.id = block_id
        self.path = path
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self.fd = os.open(path, flags, 0o644)
        self.flushed = os.fstat(self.fd).st_size
        self.pending = bytearray()
        # Highest sequence any record in this block refers to: the block may be unlinked once
        # every such sequence is below the stream's first sequence.
        self.max_ref = 0
        self.dirty_sync = create
        self.werr: OSError | None = None

    @property
    def size(self) -> int:
        return self.flushed + len(self.pending)

    def append(self, data) -> int:
        """Buffer ``data``; returns the offset it will have in the file."""
        off = self.flushed + len(self.pending)
        self.pending += data
        return off

    def flush(self) -> bool:
        """Write every pending byte (one pwrite); True if anything was written."""
        if not self.pending:
            return False
        if self.werr is not None:
            raise StoreError(f"block {self.path}: earlier write failed: {self.werr}")
        data = self.pending
        try:
            view = memoryview(data)
            off = self.flushed
            while view:
                n = os.pwrite(self.fd, view, off)
                view = view[n:]
                off += n
            view.release()
        except OSError as exc:
            self.werr = exc
            raise StoreError(f"block {self.path}: write failed: {exc}") from exc
        self.flushed += len(data)
        self.pending = bytearray()
        self.dirty_sync = True
        return True

    def sync(self) -> None:
        if self.dirty_sync:
            os.fsync(self.fd)
            self.dirty_sync = False

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes at ``offset`` (from the pending buffer when not yet flushed)."""
        if offset >= self.flushed:
            start = offset - self.flushed
            return bytes(self.pending[start: start + size])
        return os.pread(self.fd, size, offset)

    def overwrite(self, offset: int, data: bytes) -> None:
        """Replace bytes in place (secure erase). Pending bytes are patched in the buffer."""
        if offset >= self.flushed:
            start = offset - self.flushed
            self.pending[start: start + len(data)] = data
            return
        assert offset + len(data) <= self.flushed, "an overwrite never straddles the flush point"
        os.pwrite(self.fd, data, offset)
        self.dirty_sync = True

    def read_all(self) -> bytes:
        """The whole flushed file (recovery)."""
        return os.pread(self.fd, self.flushed, 0) if self.flushed else b""

    def truncate(self, size: int) -> None:
        """Cut the file at ``size`` (recovery of a torn or corrupt tail); fsynced."""
        assert not self.pending
        os.ftruncate(self.fd, size)
        os.fsync(self.fd)
        self.flushed = size

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
