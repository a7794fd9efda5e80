"""Writes on the writer thread (natsd.store.file.writer, issue 15): a mixin of
:class:`~natsd.store.file.stream_store.FileStreamStore` (it uses that class's blocks and
durability state), kept apart so the store's main module stays readable.

- ``flush_async`` hands the last block's buffer to the writer thread (when the writer is on and
  the buffer is big enough) and returns a token; ``written_token`` tells the owner how far the
  writes got, and ``on_written`` is called on the loop as they finish (``_job_done``).
- At most one write per store comes from ``flush_async``; turns during it go together in the
  next one, started when it finishes. A block roll hands the old block's tail over as well, so
  writes of two blocks can be in flight, in order.
- ``_settle`` applies finished writes, oldest first (or waits for them: every operation that
  needs the bytes or the files does so first); a failed one takes back, as a failed inline
  flush does (natsd.store.file.faults), everything not on disk (``_fail_jobs``), and the writes
  queued after it were never done (``WriteJob.chain``).
"""

from __future__ import annotations

from collections import deque
from typing import Callable

from natsd.store.base import StoreWriteError
from natsd.store.file.block import MessageBlock, WriteJob
from natsd.store.file.faults import FaultHandling
from natsd.store.file.writer import BlockWriter

__all__ = ["ThreadedWrites", "MAX_IN_FLIGHT", "no_post"]

#: Bytes in flight on the writer thread (plus those waiting for the next write) beyond which
#: flush_async waits for the writes: the disk sets the pace.
MAX_IN_FLIGHT = 16 * 1024 * 1024


def no_post(*_args) -> None:
    """``_posting`` before any loop was found (never called: ``_post()`` is checked first)."""
    raise RuntimeError("no loop to call back")


class ThreadedWrites(FaultHandling):
    """The writer-thread half of the file store's writes; see the module docstring. It declares
    the FileStreamStore state and methods it uses."""

    _writer: BlockWriter | None
    _jobs: deque[tuple[WriteJob, MessageBlock, int, int, int]]
    _chain: list
    _inflight: int
    _token: int
    _done_token: int
    _on_written: Callable[[], None] | None
    _posting: Callable[..., object]
    _lmb: MessageBlock
    _sync_always: bool
    _add_first_marker: Callable[[MessageBlock], int]
    _after_write: Callable[[], None]
    _queue_compress: Callable[[MessageBlock], None]

    def flush_async(self, on_written: Callable[[], None]) -> int:
        """``flush()``, on the writer thread when there is one and the buffer is big enough.
        Returns 0 when everything is written (inline; errors raised as by ``flush()``), else a
        token: ``on_written`` runs on the loop (never before this returns) as writes finish,
        and once ``written_token`` has reached the token the records are in the OS, or were
        rolled back (``take_rollback``).

        While a write is in flight the records wait and go together in the next one, started
        when it finishes (``_job_done``): one write per write time, not one per turn, since
        every handover costs two trips of the GIL between the threads."""
        jobs = self._jobs
        if jobs:
            self._on_written = on_written
            lmb = self._lmb
            if not lmb.pending and self._first == self._marker_first:
                return self._token  # (a block roll handed this turn's records over already)
            if self._inflight + len(lmb.pending) <= MAX_IN_FLIGHT:
                return self._token + 1  # the next write (_job_done) takes this turn's records
            failed = self._settle()  # back-pressure: the disk sets the pace
            if failed is not None:
                raise failed
        writer = self._writer
        lmb = self._lmb
        if (writer is None or lmb is None or self._closed or lmb.werr is not None
                or len(lmb.pending) < writer.threshold or not self._post()):
            self.flush()
            return 0
        self._on_written = on_written
        self._submit(lmb)
        return self._token

    def _submit(self, blk: MessageBlock) -> None:
        """Hand ``blk``'s pending bytes (plus a FIRST marker when due, on the last block) to the
        writer thread."""
        marker_first = self._add_first_marker(blk) if blk is self._lmb else self._marker_first
        writer = self._writer
        assert writer is not None
        job = blk.write_begin(self._sync_always, self._chain)
        job.on_done = self._job_done
        self._token += 1
        self._inflight += len(job.data)
        self._jobs.append((job, blk, self._last, marker_first, self._token))
        writer.submit(job, self._posting)

    def _post(self) -> bool:
        """Can the writer thread call back (a running loop)? Remembers how (``_posting``)."""
        post = self._clock.threadsafe_soon()
        if post is None:
            return False
        self._posting = post
        return True

    @property
    def written_token(self) -> int:
        """The token of the last write applied (see ``flush_async``)."""
        return self._done_token

    def _job_done(self, job: WriteJob) -> None:
        """On the loop, from the writer thread: apply the writes done (unless something waited
        for them already), start the next one with what turns buffered meanwhile, and call the
        owner back. After a failed write nothing is retried here (a full disk would make that a
        busy loop): the owner's next flush tries again."""
        if self._jobs:
            self._settle(done_only=True)
        lmb = self._lmb
        if (not self._jobs and not self._closed and not self._write_failing and lmb is not None
                and (lmb.pending or self._first != self._marker_first)):
            writer = self._writer
            if (writer is not None and lmb.werr is None and len(lmb.pending) >= writer.threshold
                    and self._post()):
                self._submit(lmb)
            else:
                try:
                    self.flush()
                except StoreWriteError:
                    pass  # rolled back: the owner learns it from take_rollback
        cb = self._on_written
        if cb is not None:
            cb()

    def _settle(self, count: int = -1, done_only: bool = False) -> StoreWriteError | None:
        """Apply the writes in flight, oldest first (``count`` of them, or those already done,
        or all, waiting for them): their records are durable; or, at the first failed one,
        every message not on disk is rolled back (``_fail_jobs``) and the error returned."""
        jobs = self._jobs
        applied = False
        while jobs and count:
            job, blk, last, marker_first, token = jobs[0]
            if done_only and not job.done.is_set():
                break
            jobs.popleft()
            count -= 1
            self._inflight -= len(job.data)
            try:
                blk.write_end()
            except StoreWriteError as exc:
                self._fail_jobs(blk, exc, marker_first)
                return exc
            if last > self._durable_last:
                self._durable_last = last
            self._done_token = token
            applied = True
            if blk is not self._lmb and not blk.jobs:
                self._queue_compress(blk)
        if applied:
            self._after_write()
        return None

    def _fail_jobs(self, blk: MessageBlock, exc: StoreWriteError, marker_first: int) -> None:
        """A write on the writer thread failed: the writes queued after it were not done
        (WriteJob.chain). Their bytes go back to their blocks (``write_end``) and everything
        not on disk is rolled back as after a failed ``flush()``."""
        blocks = [blk]
        for _job, b, *_ in self._jobs:
            if b not in blocks:
                blocks.append(b)
                try:
                    b.write_end_all()
                except StoreWriteError:
                    pass  # expected: not written, bytes back in pending
        self._jobs.clear()
        self._inflight = 0
        self._done_token = self._token
        self._chain = [None]
        lmb = self._lmb
        if lmb not in blocks:  # records stored after the failed write, not yet handed over
            blocks.append(lmb)
        for b in blocks:
            self._write_failed(b, exc, marker_first)
        for b in blocks:
            if b is not lmb and b.pending:
                # A sealed block is not written again: what it still has to say (records
                # about durable sequences) goes to the last block.
                lmb.pending[:0] = b.pending
                b.pending = bytearray()
                b.pend_off = b.flushed

