"""The block writer thread: a loop turn's coalesced block bytes are written (``pwrite``, and
``fsync`` when asked) off the event loop, so the loop parses the next publishes meanwhile (the
second core: the GIL is released inside ``os.pwrite``/``os.fsync``, and for 16 KB
messages the write was ~40% of the loop's time).

Protocol (natsd.store.file.stream_store ``flush_async``, natsd.jetstream.stream ``_flush``):

1. At the end of a loop turn the store swaps its last block's ``pending`` buffer out into a
   :class:`WriteJob` (``MessageBlock.write_begin``) and submits it here. The buffer is never
   touched by the loop again until the job is done, so no lock guards it.
2. This thread writes every queued job in submission order (a store has at most one job in
   flight, so a store's writes never overtake each other), cuts a failed write back to the
   block's last good size (``ftruncate``, as ``MessageBlock.flush`` does inline), and wakes the
   loop **once** for everything it finished (``call_soon_threadsafe``), so publishes to many
   streams in one turn cost one wake-up.
3. On the loop the store applies the result (``MessageBlock.write_end``: ``flushed`` advances,
   or the bytes go back to ``pending`` and the store rolls back what is not on disk) and only
   then calls the owner back, which sends the PubAcks: a PubAck still means the record reached
   the OS.

Whatever needs the bytes before that (a read of them, a block roll, purge, stop...) waits for the
job on the spot (``WriteJob.wait``) and applies it there.

Off by default (``THRESHOLD``: measured not to pay on the shared machine). Small turns stay
inline: handing a buffer over and being woken costs more than a small ``pwrite`` (measured, see
``THRESHOLD``). Without a loop to call back (``Clock.threadsafe_soon`` is None: a script using
the store directly, a test on manual time) everything is inline too.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import Callable

from natsd.store.file.block import WriteJob

__all__ = ["WriteJob", "BlockWriter", "THRESHOLD", "shared_writer"]

#: Turns whose buffer is smaller than this are written inline; 0 (the default): the server does
#: not use the writer thread at all. Measured on the shared 2-core machine with
#: ``bench/run_wide.py jspub16k``: the loop's CPU per 16 KB message fell by up to ~35% with 256 KB,
#: but the server's total CPU did not, and the publish rate was lower in most alternating runs
#: against main (the hand-over and wake-up cost two GIL trips and a scheduling delay per write,
#: and delay the PubAcks by about a loop turn). So it is off until it pays on a quiet machine:
#: ``NATSD_WRITER_THRESHOLD=262144`` in the server's environment turns it on for such a test.
#: Re-measured on the quiet machine (``run_wide.py --runs 7 jspub16k``, 64 KiB threshold): median
#: 0.73 x nats-server on (runs 0.58-0.97) against 0.92 off (0.65-1.01): run-to-run spread (page
#: cache) swamps any gain, so it stays off.
THRESHOLD = int(os.environ.get("NATSD_WRITER_THRESHOLD", "0") or 0)


class BlockWriter:
    """One writer thread (started on first use) with a FIFO of jobs; see the module docstring."""

    def __init__(self, threshold: int | None = None) -> None:
        self._threshold = threshold
        self._queue: deque[tuple[WriteJob, Callable[..., object]]] = deque()
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None

    @property
    def threshold(self) -> int:
        """Smallest buffer worth the thread (the module's THRESHOLD unless given)."""
        return THRESHOLD if self._threshold is None else self._threshold

    def submit(self, job: WriteJob, post: Callable[..., object]) -> None:
        """Queue ``job``; once it is written, ``post(_deliver, jobs)`` (thread-safe, from
        ``Clock.threadsafe_soon``) runs its ``on_done`` on the owner's loop."""
        with self._cv:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="natsd-block-writer", daemon=True)
                self._thread.start()
            self._queue.append((job, post))
            self._cv.notify()

    def _run(self) -> None:
        queue = self._queue
        while True:
            with self._cv:
                while not queue:
                    self._cv.wait()
                batch = list(queue)
                queue.clear()
            by_loop: dict[Callable[..., object], list[WriteJob]] = {}
            for job, post in batch:
                job.run()
                by_loop.setdefault(post, []).append(job)
            for post, jobs in by_loop.items():
                try:
                    post(_deliver, jobs)
                except RuntimeError:
                    pass  # the loop is closed: whoever waits uses WriteJob.wait


def _deliver(jobs: list[WriteJob]) -> None:
    """On the loop: the owners apply their jobs' results, in submission order."""
    for job in jobs:
        cb = job.on_done
        if cb is not None:
            cb(job)


_shared: BlockWriter | None = None
_shared_lock = threading.Lock()


def shared_writer() -> BlockWriter:
    """The process's writer (one thread: writes of a disk are not faster in parallel, and one
    wake-up per batch serves every stream)."""
    global _shared
    if _shared is None:
        with _shared_lock:
            if _shared is None:
                _shared = BlockWriter()
    return _shared
