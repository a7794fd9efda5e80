"""Writes on the writer thread (natsd.store.file.writer): the part of
:class:`~natsd.store.file.stream_store.FileStreamStore` that owns the writes in flight (the
writer, the queue of jobs, the tokens handed to the owner); it reaches the store's blocks and
durability state through the store.

- ``flush_async`` hands the last block's buffer to the writer thread (when the writer is on and
  the buffer is big enough) and returns a token; ``done_token`` (the store's ``written_token``)
  tells the owner how far the writes got, and ``on_written`` is called on the loop as they
  finish (``_job_done``).
- At most one write per store comes from ``flush_async``; turns during it go together in the
  next one, started when it finishes. A block roll hands the old block's tail over as well, so
  writes of two blocks can be in flight, in order.
- ``settle`` applies finished writes, oldest first (or waits for them: every operation that
  needs the bytes or the files does so first); a failed one takes back, as a failed inline
  flush does (natsd.store.file.faults), everything not on disk (``_fail_jobs``), and the writes
  queued after it were never done (``WriteJob.chain``).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Callable

from natsd.store.base import StoreWriteError
from natsd.store.file.block import MessageBlock, WriteJob
from natsd.store.file.writer import BlockWriter

if TYPE_CHECKING:
    from natsd.store.file.stream_store import FileStreamStore

__all__ = ["InFlightWrites", "MAX_IN_FLIGHT", "no_post"]

#: Bytes in flight on the writer thread (plus those waiting for the next write) beyond which
#: flush_async waits for the writes: the disk sets the pace.
MAX_IN_FLIGHT = 16 * 1024 * 1024


def no_post(*_args) -> None:
    """``posting`` before any loop was found (never called: ``post()`` is checked first)."""
    raise RuntimeError("no loop to call back")


class InFlightWrites:
    """The writer-thread half of the file store's writes; see the module docstring."""

    __slots__ = ("_s", "writer", "jobs", "chain", "inflight", "token", "done_token", "on_written", "posting")

    def __init__(self, store: FileStreamStore, writer: BlockWriter | None) -> None:
        self._s = store
        #: The writer thread (None: always inline).
        self.writer = writer
        #: (job, block, last sequence it covers, marker state before it, token), oldest first.
        self.jobs: deque[tuple[WriteJob, MessageBlock, int, int, int]] = deque()
        self.chain: list = [None]  # see WriteJob.chain
        self.inflight = 0  # bytes in flight
        #: The last token handed out, and the last one whose write was applied.
        self.token = 0
        self.done_token = 0
        #: Whom to call back (on the loop) as writes finish, and how the thread gets there.
        self.on_written: Callable[[], None] | None = None
        self.posting: Callable[..., object] = no_post

    def flush_async(self, on_written: Callable[[], None]) -> int:
        """``flush()``, on the writer thread when there is one and the buffer is big enough.
        Returns 0 when everything is written (inline; errors raised as by ``flush()``), else a
        token: ``on_written`` runs on the loop (never before this returns) as writes finish,
        and once ``written_token`` has reached the token the records are in the OS, or were
        rolled back (``take_rollback``).

        While a write is in flight the records wait and go together in the next one, started
        when it finishes (``_job_done``): one write per write time, not one per turn, since
        every handover costs two trips of the GIL between the threads."""
        s = self._s
        jobs = self.jobs
        if jobs:
            self.on_written = on_written
            lmb = s._lmb
            if not lmb.pending and s._first == s._marker_first:
                return self.token  # (a block roll handed this turn's records over already)
            if self.inflight + len(lmb.pending) <= MAX_IN_FLIGHT:
                return self.token + 1  # the next write (_job_done) takes this turn's records
            failed = self.settle()  # back-pressure: the disk sets the pace
            if failed is not None:
                raise failed
        writer = self.writer
        lmb = s._lmb
        if (
            writer is None
            or lmb is None
            or s._closed
            or lmb.werr is not None
            or len(lmb.pending) < writer.threshold
            or not self.post()
        ):
            s.flush()
            return 0
        if not lmb.made:
            s._create_block(lmb)  # (its file first, on the loop: a failure as flush()'s)
        self.on_written = on_written
        self.submit(lmb)
        return self.token

    def submit(self, blk: MessageBlock) -> None:
        """Hand ``blk``'s pending bytes (plus a FIRST marker when due, on the last block) to the
        writer thread."""
        s = self._s
        marker_first = s._add_first_marker(blk) if blk is s._lmb else s._marker_first
        writer = self.writer
        assert writer is not None
        job = blk.write_begin(s._sync_always, self.chain)
        job.on_done = self._job_done
        self.token += 1
        self.inflight += len(job.data)
        self.jobs.append((job, blk, s._last, marker_first, self.token))
        writer.submit(job, self.posting)

    def post(self) -> bool:
        """Can the writer thread call back (a running loop)? Remembers how (``posting``)."""
        s = self._s
        post = s._clock.threadsafe_soon()
        if post is None:
            return False
        self.posting = post
        return True

    def _job_done(self, job: WriteJob) -> None:
        """On the loop, from the writer thread: apply the writes done (unless something waited
        for them already), start the next one with what turns buffered meanwhile, and call the
        owner back. After a failed write nothing is retried here (a full disk would make that a
        busy loop): the owner's next flush tries again."""
        s = self._s
        if self.jobs:
            self.settle(done_only=True)
        lmb = s._lmb
        if (
            not self.jobs
            and not s._closed
            and not s._faults.failing
            and lmb is not None
            and (lmb.pending or s._first != s._marker_first)
        ):
            writer = self.writer
            if (
                writer is not None
                and lmb.made
                and lmb.werr is None
                and len(lmb.pending) >= writer.threshold
                and self.post()
            ):
                self.submit(lmb)
            else:
                try:
                    s.flush()
                except StoreWriteError:
                    pass  # rolled back: the owner learns it from take_rollback
        cb = self.on_written
        if cb is not None:
            cb()

    def settle(self, count: int = -1, done_only: bool = False) -> StoreWriteError | None:
        """Apply the writes in flight, oldest first (``count`` of them, or those already done,
        or all, waiting for them): their records are durable; or, at the first failed one,
        every message not on disk is rolled back (``_fail_jobs``) and the error returned."""
        s = self._s
        jobs = self.jobs
        applied = False
        while jobs and count:
            job, blk, last, marker_first, token = jobs[0]
            if done_only and not job.done.is_set():
                break
            jobs.popleft()
            count -= 1
            self.inflight -= len(job.data)
            try:
                blk.write_end()
            except StoreWriteError as exc:
                self._fail_jobs(blk, exc, marker_first)
                return exc
            if last > s._faults.durable_last:
                s._faults.durable_last = last
            self.done_token = token
            applied = True
            if blk is not s._lmb and not blk.jobs:
                s._compression.queue(blk)
        if applied:
            s._after_write()
        return None

    def _fail_jobs(self, blk: MessageBlock, exc: StoreWriteError, marker_first: int) -> None:
        """A write on the writer thread failed: the writes queued after it were not done
        (WriteJob.chain). Their bytes go back to their blocks (``write_end``) and everything
        not on disk is rolled back as after a failed ``flush()``."""
        s = self._s
        blocks = [blk]
        for _job, b, *_ in self.jobs:
            if b not in blocks:
                blocks.append(b)
                try:
                    b.write_end_all()
                except StoreWriteError:
                    pass  # expected: not written, bytes back in pending
        self.jobs.clear()
        self.inflight = 0
        self.done_token = self.token
        self.chain = [None]
        lmb = s._lmb
        if lmb not in blocks:  # records stored after the failed write, not yet handed over
            blocks.append(lmb)
        for b in blocks:
            s._faults.write_failed(b, exc, marker_first)
        for b in blocks:
            if b is not lmb and b.pending:
                # A sealed block is not written again: what it still has to say (records
                # about durable sequences) goes to the last block.
                lmb.pending[:0] = b.pending
                b.pending = bytearray()
                b.pend_off = b.flushed
