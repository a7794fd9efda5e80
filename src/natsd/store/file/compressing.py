"""Compressing sealed blocks (``compression: s2``): the part of
:class:`~natsd.store.file.stream_store.FileStreamStore` that owns the compressions under way.

A block is compressed when it is sealed, on the compression thread (``queue``); the compressed
file replaces the plain one on the store's own thread at the next flush or within
COMPRESS_POLL_NS (a timer on the injected clock, armed only while a compression runs;
``install``) unless the block changed meanwhile (``MessageBlock.gen``: then it is compressed
again). The codec and the thread are :mod:`natsd.store.file.compress`'s.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable

from natsd.clock import Timer
from natsd.store.file.block import MessageBlock
from natsd.store.file.compress import SHARED_CHUNKS, ChunkCache, compress_file, submit

if TYPE_CHECKING:
    from natsd.store.file.stream_store import FileStreamStore

__all__ = ["Compression", "COMPRESS_POLL_NS"]

log = logging.getLogger("natsd.store")

#: While blocks are being compressed, how often the store looks whether one is done.
COMPRESS_POLL_NS = 50 * 10**6


def unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class Compression:
    """The compressions of one stream's blocks; see the module docstring."""

    __slots__ = ("_s", "chunks", "running", "inline", "timer")

    def __init__(self, store: FileStreamStore, inline: bool) -> None:
        self._s = store
        #: Decoded chunks of compressed blocks (shared by every store: one memory bound).
        self.chunks: ChunkCache = SHARED_CHUNKS
        #: Block id -> (block, its gen when queued, the job).
        self.running: dict[int, tuple[MessageBlock, int, Future]] = {}
        #: Compress at once, on the caller's thread (tests).
        self.inline = inline
        self.timer: Timer | None = None

    def queue(self, blk: MessageBlock) -> None:
        """Compress sealed block ``blk`` when the stream asks for it."""
        s = self._s
        if (
            s.config.compression != "s2"
            or blk.compressed
            or blk is s._lmb
            or blk.pending
            or blk.jobs
            or blk.id in self.running
            or not blk.flushed
        ):
            return
        if self.inline:
            self._install_one(blk.id, blk, blk.gen, compress_file, (blk.path, blk.ks))
            return
        self.running[blk.id] = (blk, blk.gen, submit(compress_file, blk.path, blk.ks))
        self._arm_poll()

    def _arm_poll(self) -> None:
        # While a compression runs, look every COMPRESS_POLL_NS whether it is done (through the
        # injected clock, on the store's thread), so a block is put in place even if the stream
        # goes idle; nothing is armed when nothing is being compressed.
        if self.timer is None:
            try:
                self.timer = self._s._clock.call_later(COMPRESS_POLL_NS, self._poll)
            except RuntimeError:
                pass  # a SystemClock without a running loop (a script using the store): flush()/sync() do it

    def _poll(self) -> None:
        self.timer = None
        if self._s._closed:
            return
        self.install()
        if self.running:
            self._arm_poll()

    def cancel_poll(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def install(self, wait: bool = False) -> None:
        """Put finished compressions in place (all of them, waiting, when ``wait``)."""
        for bid, (blk, gen, fut) in list(self.running.items()):
            if wait or fut.done():
                del self.running[bid]
                self._install_one(bid, blk, gen, fut.result, ())

    def _install_one(self, bid: int, blk: MessageBlock, gen: int, result: Callable[..., Any], args: tuple) -> None:
        s = self._s
        current = not s._closed and s._blocks.get(bid) is blk
        try:
            tmp, raw_len, disk_len = result(*args)
        except Exception as exc:  # the block stays plain; reads are unaffected
            if current:  # (a block unlinked meanwhile, by a purge say, is no news)
                log.warning("stream %s: compressing block %d failed: %s", s.config.name, bid, exc)
            return
        if not current or blk.gen != gen or blk is s._lmb or blk.pending or blk.jobs or raw_len != blk.flushed:
            # Changed (erased in, compacted), unlinked or closed meanwhile: this copy is stale.
            # A block still there is compressed again from what it holds now.
            unlink_quietly(tmp)
            if current:
                self.queue(blk)
            return
        try:
            # No directory fsync: after a crash either file is the block (same records; the
            # compressed one was fsynced before the rename), so the rename need not be durable.
            os.replace(tmp, blk.path)
            blk.reopen()
        except OSError as exc:
            unlink_quietly(tmp)
            log.warning("stream %s: installing compressed block %d failed: %s", s.config.name, bid, exc)
            return
        log.debug("stream %s: block %d compressed from %d to %d bytes", s.config.name, bid, raw_len, disk_len)

    def drop(self, cancel: bool) -> None:
        """Forget the compressions under way (the store is abandoned or deleted): each one still
        running finishes first (its ``*.tmp`` file is recovery's to remove), none is put in place;
        ``cancel``: those not started yet never run."""
        self.cancel_poll()
        for _blk, _gen, fut in self.running.values():
            if cancel:
                fut.cancel()
            try:
                fut.result()
            except BaseException:  # cancelled or failed: nothing to keep
                pass
        self.running.clear()
