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

A flush may also go to the writer thread (natsd.store.file.writer): ``write_begin`` swaps
``pending`` out into a WriteJob (its bytes lie between ``flushed`` and ``pend_off``, the offset of
``pending``'s first byte) and ``write_end`` applies the result on the loop: ``flushed`` advances,
or, the file already cut back by the thread, the bytes go back in front of ``pending`` and
StoreWriteError is raised exactly as by a failed ``flush``. Anything that needs those bytes
(``flush``, ``sync``, reads and changes at or above ``flushed``) first waits for the job.

A block may be made **lazily** (``make`` given, the last block a store opens): it exists only
in memory (``fd`` -1, nothing flushed) until its first bytes are written, and ``make`` creates
its file then (with ``msgs/`` and, encrypted, its key: the store's ``_create_block_file``), so a
stream that is created, or that starts or rolls, writes no empty block. Nothing can be read
from it before that but its ``pending`` bytes.

A sealed block may be compressed (``compression: s2``, natsd.store.file.compress): the file is
then replaced by its compressed form and ``comp`` reads it by plain offsets, so offsets,
``flushed`` (the plain size) and every read method mean the same for both kinds. A compressed
block is never appended to; an in-place change (secure erase, truncation) first turns it back
into a plain file (``_decompress_file``), and the store compresses it again later.

An encrypted store (natsd.store.file.encryption) gives each block a ``Keystream`` (``ks``): the
file holds the plain bytes XORed with it at their own offsets (``_enc``/``_dec`` at every
``pwrite``/``pread`` and whole-file write, a compressed file's bytes too), so everything above
this class, ``flushed``, offsets and the records' checks included, sees plain bytes. The block's
wrapped key is ``msgs/<n>.key`` (``key_path``), removed with the block. A rewrite of the file
(compaction, erase, a cut after a failed write) reuses the block's key stream, as the reference
does; its compressed form has a key stream of its own (``Keystream.compressed``).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Callable

from natsd.atomicfile import atomic_write, fsync_dir
from natsd.store.base import StoreWriteError
from natsd.store import stopsync
from natsd.store.file.compress import ChunkCache, CompressedView, CorruptBlock, is_compressed

if TYPE_CHECKING:
    from natsd.store.file.encryption import Keystream

__all__ = ["MessageBlock", "WriteJob"]

# The system calls that write, behind module names so tests can inject faults (ENOSPC, EIO,
# short writes) without a full disk.
_pwrite = os.pwrite
_fsync = os.fsync
_ftruncate = os.ftruncate


def _write_rest(fd: int, data: bytes | bytearray, off: int, done: int) -> None:
    """Finish writing ``data`` at file offset ``off`` of which the first ``done`` bytes are
    written: ``pwrite`` the rest through a view until none is left (a short write is retried
    from where it stopped). ``_pwrite`` is looked up per call, so fault injection reaches it."""
    view = memoryview(data)[done:]
    off += done
    try:
        while view:
            n = _pwrite(fd, view, off)
            view = view[n:]
            off += n
    finally:
        view.release()


class WriteJob:
    """One buffer to write at ``off`` of file ``fd`` (then fsync when ``sync``). ``err`` is the
    OSError of a failed write, ``cut_err`` the one of a failed cut-back (the file's tail is then
    unknown: the block keeps ``werr``)."""

    __slots__ = ("fd", "data", "out", "off", "sync", "err", "cut_err", "done", "on_done", "chain")

    def __init__(
        self, fd: int, data: bytearray, off: int, sync: bool, chain: list, out: bytes | bytearray | None = None
    ) -> None:
        self.fd = fd
        self.data = data
        #: What goes to the file: ``data`` itself, or its encrypted form (an encrypted block).
        self.out = data if out is None else out
        self.off = off
        self.sync = sync
        self.err: OSError | None = None
        self.cut_err: OSError | None = None
        self.done = threading.Event()
        #: Called on the loop once the write is done (set by the submitter).
        self.on_done: Callable[[WriteJob], None] | None = None
        #: Shared by the jobs of one store: ``[the first error]``. A job queued after a failed
        #: one is not written (its bytes would follow bytes that are not there).
        self.chain = chain

    def run(self) -> None:
        """Write (on the writer thread). The module-level system calls are looked up per call,
        so fault injection reaches this path too."""
        if self.chain[0] is not None:
            self.err = self.chain[0]
            self.done.set()
            return
        try:
            _write_rest(self.fd, self.out, self.off, 0)
            if self.sync:
                _fsync(self.fd)
        except OSError as exc:
            self.err = self.chain[0] = exc
            try:
                _ftruncate(self.fd, self.off)
            except OSError as exc2:
                self.cut_err = exc2
        finally:
            self.done.set()

    def wait(self) -> None:
        self.done.wait()


class MessageBlock:
    """One block file. ``size`` is the logical size (flushed + pending bytes)."""

    __slots__ = (
        "id",
        "path",
        "fd",
        "flushed",
        "pending",
        "max_ref",
        "dirty_sync",
        "werr",
        "comp",
        "cache",
        "damaged",
        "gen",
        "pend_off",
        "jobs",
        "ks",
        "key_path",
        "make",
    )

    def __init__(
        self,
        block_id: int,
        path: str,
        create: bool = False,
        cache: ChunkCache | None = None,
        ks: Keystream | None = None,
        key_path: str = "",
        make: Callable[[MessageBlock], int] | None = None,
    ) -> None:
        self.id = block_id
        self.path = path
        #: The block's key stream (an encrypted store) and its key file, else None and "".
        self.ks = ks
        self.key_path = key_path
        #: A lazy block's maker (see the module docstring): creates the file, returns its fd.
        self.make = make
        self.cache = cache
        #: Bumped by every change of the file's bytes (erase, truncate, rewrite): a compression
        #: started before it is stale (see natsd.store.file.stream_store).
        self.gen = 0
        self.jobs: list[WriteJob] = []
        self.comp: CompressedView | None = None
        self.damaged: str | None = None
        if make is None:
            flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
            self.fd = os.open(path, flags, 0o644)
            self._detect()
        else:
            self.fd = -1
            self.flushed = self.pend_off = 0
        self.pending = bytearray()
        # Highest sequence any record in this block refers to: the block may be unlinked once
        # every such sequence is below the stream's first sequence.
        self.max_ref = 0
        self.dirty_sync = create and make is None
        self.werr: OSError | None = None

    @property
    def made(self) -> bool:
        """Whether the block's file exists (a lazy block's first write creates it)."""
        return self.make is None

    def create_file(self) -> None:
        """A lazy block's first write: its file now (StoreWriteError as a failed write, the
        pending bytes kept: the next flush tries again)."""
        make = self.make
        assert make is not None
        try:
            self.fd = make(self)
        except OSError as exc:  # no inode or space left, too many open files...
            raise StoreWriteError(f"creating block {self.path} failed: {exc}", exc.errno) from exc
        self.make = None
        self.dirty_sync = True

    def _detect(self) -> None:
        """Plain or compressed file: sets ``comp`` and ``flushed`` (the plain size). A compressed
        file whose header is damaged reads as empty, ``damaged`` says why (recovery reports it)."""
        self.comp = None
        self.damaged = None
        size = os.fstat(self.fd).st_size
        self.flushed = self.pend_off = size
        ks = self.ks
        if size < 8:
            return
        head = os.pread(self.fd, 8, 0)
        if ks is not None:
            ks = ks.compressed  # a compressed block has a key stream of its own (Keystream.compressed)
            head = ks.xor(head, 0)
        if is_compressed(head):
            try:
                self.comp = CompressedView(self.fd, self.cache if self.cache is not None else ChunkCache(), ks)
            except CorruptBlock as exc:
                self.damaged = str(exc)
                self.flushed = self.pend_off = 0
                return
            self.flushed = self.pend_off = self.comp.raw_len

    @property
    def compressed(self) -> bool:
        return self.comp is not None

    @property
    def disk_size(self) -> int:
        """Bytes the file takes (the compressed size for a compressed block)."""
        return self.comp.disk_size if self.comp is not None else self.flushed

    def _dec(self, data: bytes, off: int) -> bytes:
        """The plain form of file bytes read at ``off`` (the encryption's XOR is its own inverse)."""
        ks = self.ks
        return data if ks is None else ks.xor(data, off)

    _enc = _dec

    def write_file(self, plain: bytes) -> None:
        """Replace the whole file with ``plain`` (encrypted when the block is), atomic, fsynced."""
        atomic_write(self.path, self._enc(plain, 0))

    def pread(self, n: int, off: int) -> bytes:
        """``n`` flushed bytes at plain offset ``off`` (fewer at the end), as ``os.pread``."""
        if self.comp is None:
            return self._dec(os.pread(self.fd, n, off), off)
        return self.comp.read(off, n)

    def reopen(self) -> None:
        """The file was replaced (compressed, compacted, decompressed): open it again."""
        assert not self.jobs
        os.close(self.fd)
        self.fd = os.open(self.path, os.O_RDWR)
        self.gen += 1
        self._detect()
        self.dirty_sync = False

    def _decompress_file(self) -> None:
        """Turn a compressed block back into a plain file (atomic, fsynced) before changing it."""
        if self.comp is not None:
            self.write_file(self.comp.read_all())
            fsync_dir(os.path.dirname(self.path))
            self.reopen()

    @property
    def size(self) -> int:
        return self.pend_off + len(self.pending)

    def append(self, data) -> int:
        """Buffer ``data``; returns the offset it will have in the file."""
        off = self.pend_off + len(self.pending)
        self.pending += data
        return off

    def write_begin(self, sync: bool, chain: list) -> WriteJob:
        """Hand every pending byte to a WriteJob for the writer thread (see the module
        docstring); the caller submits it and later calls ``write_end``."""
        assert self.pending and self.werr is None
        if self.make is not None:
            self.create_file()  # (the store makes it before submitting: _create_block)
        ks = self.ks
        job = WriteJob(
            self.fd,
            self.pending,
            self.pend_off,
            sync,
            chain,
            None if ks is None else ks.xor_append(self.pending, self.pend_off),
        )
        self.jobs.append(job)
        self.pend_off += len(self.pending)
        self.pending = bytearray()
        return job

    def write_end(self) -> None:
        """Wait for the oldest job in flight (if any) and apply it: its bytes are in the OS, or
        StoreWriteError as a failed flush: the file was cut back, and its bytes and those of
        every later job of this block (not written: see WriteJob.chain) are back in ``pending``."""
        if not self.jobs:
            return
        job = self.jobs.pop(0)
        job.wait()
        if job.err is None:
            self.flushed += len(job.data)
            self.dirty_sync = not job.sync
            return
        back = job.data
        for later in self.jobs:
            later.wait()
            back += later.data
        self.jobs.clear()
        self.pending = back + self.pending
        self.pend_off = self.flushed
        if job.cut_err is not None:
            self.werr = job.err
        exc = job.err
        raise StoreWriteError(f"block {self.path}: write failed: {exc}", exc.errno) from exc

    def write_end_all(self) -> None:
        """Apply every job in flight (StoreWriteError as ``write_end``)."""
        while self.jobs:
            self.write_end()

    def flush(self, sync: bool = False) -> bool:
        """Write every pending byte (one pwrite), and fsync when ``sync``; True if anything was
        written. On failure the file is cut back to the bytes written before this call (see the
        module docstring), ``pending`` is kept and StoreWriteError raised."""
        if self.jobs:
            self.write_end_all()
        if not self.pending:
            if sync:
                self.sync()
            return False
        if self.make is not None:
            self.create_file()
        if self.werr is not None:
            self._cut_back()
        data = self.pending
        off = self.flushed
        try:
            # One pwrite of the whole buffer is the rule; only a short write takes the loop
            # over a view (no view made per flush: a synchronous publisher waits for each).
            out = data if self.ks is None else self.ks.xor_append(data, off)
            n = _pwrite(self.fd, out, off)
            if n < len(out):
                _write_rest(self.fd, out, off, n)
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
        self.pend_off = self.flushed
        self.pending = bytearray()
        self.dirty_sync = not sync
        return True

    def _cut_back(self) -> None:
        """After a failed write: drop whatever part of it reached the file (``flushed`` is the
        size before it). Clears ``werr`` when the cut works."""
        try:
            _ftruncate(self.fd, self.flushed)
        except OSError as exc:
            raise StoreWriteError(
                f"block {self.path}: earlier write failed ({self.werr}) and the file can not be cut back: {exc}",
                exc.errno,
            ) from exc
        self.werr = None

    def sync(self) -> None:
        if self.jobs:
            self.write_end_all()
        if self.dirty_sync and not stopsync.deferred():  # (a stop syncs the filesystem once)
            try:
                _fsync(self.fd)
            except OSError as exc:
                raise StoreWriteError(f"block {self.path}: fsync failed: {exc}", exc.errno) from exc
            self.dirty_sync = False

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes at ``offset`` (from the pending buffer when not yet flushed)."""
        if offset + size > self.flushed and self.jobs:
            self.write_end_all()
        if offset >= self.flushed:
            start = offset - self.pend_off
            return bytes(self.pending[start : start + size])
        if self.comp is not None:
            return self.comp.read(offset, size)
        return self._dec(os.pread(self.fd, size, offset), offset)

    def overwrite(self, offset: int, data: bytes) -> None:
        """Replace bytes in place (secure erase). Pending bytes are patched in the buffer."""
        if self.jobs:
            self.write_end_all()
        if offset >= self.flushed:
            start = offset - self.pend_off
            self.pending[start : start + len(data)] = data
            return
        assert offset + len(data) <= self.flushed, "an overwrite never straddles the flush point"
        self._decompress_file()
        self.gen += 1
        os.pwrite(self.fd, self._enc(data, offset), offset)
        self.dirty_sync = True

    def read_all(self) -> bytes:
        """The whole flushed file (recovery), plain."""
        if self.comp is not None:
            return self.comp.read_all()
        return self._dec(os.pread(self.fd, self.flushed, 0), 0) if self.flushed else b""

    def truncate(self, size: int) -> None:
        """Cut the file at ``size`` (recovery of a torn or corrupt tail); fsynced."""
        assert not self.pending and not self.jobs
        if self.comp is not None or self.damaged:
            # Compressed: the kept part becomes a plain file (a damaged one: an empty file).
            self.write_file(self.comp.read(0, size) if self.comp is not None else b"")
            fsync_dir(os.path.dirname(self.path))
            self.reopen()
            return
        os.ftruncate(self.fd, size)
        os.fsync(self.fd)
        self.flushed = self.pend_off = size
        self.gen += 1

    def close(self) -> None:
        for job in self.jobs:  # never close the fd under the writer thread
            job.wait()
        self.jobs.clear()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def unlink(self) -> None:
        self.close()
        for path in (self.path, self.key_path) if self.key_path else (self.path,):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
