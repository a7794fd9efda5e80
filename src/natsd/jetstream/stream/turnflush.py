"""A stream's loop-turn flush (:class:`natsd.jetstream.stream.Stream` takes these functions as its
methods): write the turn's records, then send the turn's PubAcks, then wake the consumers.

Once per loop turn (``Clock.call_soon``), :func:`_flush` hands the batch to the OS
(``store.flush()``, plus ``store.sync()`` with ``sync_always``), then sends every queued PubAck,
then tells each consumer ``on_new_messages(last_seq)``. So a PubAck always follows the write of its
record. A big turn's write may go to the store's writer thread (``store.flush_async``, see
natsd.store.file.writer): then the turn's replies and the consumers' wake-up wait, in turn order,
until the store reports it written (:func:`_written`).

Except with ``persist_mode: async`` (file storage only, as the reference): there the PubAck is sent
at the end of the turn *without* writing first; the records stay in the store's buffer (a read of
one of them, e.g. a delivery, writes them first: the file store never serves bytes it has not
written) and :func:`_persist` writes them ``ASYNC_PERSIST_DELAY_NS`` (10 ms) later in one
``pwrite``, never fsynced per write even with ``sync_always`` (the server's ``sync_interval`` still
fsyncs). So for such a stream a PubAck does **not** mean the record reached the OS: a crash
(kill -9) within those 10 ms, or a failed write (then logged, and the stream's state cut back to
what is on disk), loses acknowledged messages.

When the store's write fails (disk full, I/O error) the store rolls back every message not on disk
(``store.take_rollback()``): :func:`_flush` then answers each publish whose sequence was taken back
with an error instead of its PubAck (10023 "insufficient resources" for ENOSPC / EDQUOT, 10077 with
the OS error otherwise; nats-server 2.15.1 answers nothing at all there), forgets their msg ids and
never tells consumers about them. Nothing is left unanswered. The engine's running total of stored
bytes (``engine.used``) is folded in here too, once per turn.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from natsd.jetstream.errors import ApiErrors
from natsd.jetstream.stream.ingest import _err_ack, _write_error
from natsd.store.base import StoreError, StoreWriteError

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.stream.core import Stream

__all__ = ["ASYNC_PERSIST_DELAY_NS"]

log = logging.getLogger("natsd.jetstream.stream")

# persist_mode: async: how long acknowledged records may wait in the store's buffer before
# they are written (coalescing the writes of many loop turns into one).
ASYNC_PERSIST_DELAY_NS = 10 * 10**6


def _flush(self: Stream) -> None:
    """Once per loop turn: write, (fsync), then PubAcks, then wake consumers."""
    self._flush_scheduled = False
    if self._async_persist and not self.closed:
        # persist_mode: async: PubAcks go out now; the write follows within
        # ASYNC_PERSIST_DELAY_NS (see the module docstring).
        if self._persist_timer is None:
            self._persist_timer = self.clock.call_later(ASYNC_PERSIST_DELAY_NS, self._persist)
    elif not self.closed:
        failed: StoreError | None = None
        store = self.store
        token = 0
        try:
            if self.account.engine.sync_always:
                store.sync()
            else:
                token = store.flush_async(self._written)
        except StoreError as e:
            failed = e
        rb = store.take_rollback()
        if rb is not None or failed is not None:
            self._unwait()
            self._write_failed(rb, failed)
        elif token or self._waits:
            # Written on the writer thread (or after writes still waited for): this turn's
            # replies and consumers wait for it, in order (_written).
            self._waits.append(
                (token or self._waits[-1][0], self._ack_subjects, self._ack_payloads, self._new_msgs, self.lseq)
            )
            self._ack_subjects, self._ack_payloads = [], []
            self._new_msgs = False
            self._written()
            return
        b = store.bytes_used
        if b != self._counted:  # (_fold_usage, inlined: once per turn of every stream)
            self._used[self._ut] += b - self._counted
            self._counted = b
    subs, pays = self._ack_subjects, self._ack_payloads
    if subs:
        self._ack_subjects, self._ack_payloads = [], []
        self.account.ports.publish_many(subs, pays)  # one call for the turn's PubAcks, in order
    if self._new_msgs:
        self._new_msgs = False
        if not self.closed:
            cfg = self.config
            if cfg.max_age or cfg.allow_msg_ttl:
                self._arm_expiry()
            if self.consumers:
                self._notify_new(self.lseq)


def _written(self: Stream) -> None:
    """Writes on the store's writer thread finished (records in the OS, or rolled back):
    send the replies of the turns they carried and wake consumers, as ``_flush`` does after
    an inline write."""
    waits = self._waits
    if not waits:
        return
    rb = self.store.take_rollback()
    if rb is not None:
        # Taken back, with every later message: their replies become errors.
        self._unwait()
        self._write_failed(rb, None)
        subs, pays = self._ack_subjects, self._ack_payloads
        if subs:
            self._ack_subjects, self._ack_payloads = [], []
            self.account.ports.publish_many(subs, pays)
        if self._new_msgs and not self.closed:  # (what was written before the failure)
            self._new_msgs = False
            self._arm_expiry()
            self._notify_new(self.lseq)
        return
    done = self.store.written_token
    new = 0
    publish = self.account.ports.publish_many
    while waits and waits[0][0] <= done:
        _tok, subs, pays, anew, lseq = waits.popleft()
        if subs:
            publish(subs, pays)
        if anew:
            new = lseq
    if not self.closed:
        if self._counted != self.store.bytes_used:
            self._fold_usage()
        if new:
            self._arm_expiry()
            self._notify_new(new)


def _unwait(self: Stream) -> None:
    """Replies waiting for writes go back in front of this turn's (a write failed)."""
    subs: list[str] = []
    pays: list[bytes] = []
    for _tok, s, p, new, _lseq in self._waits:
        subs += s
        pays += p
        if new:
            self._new_msgs = True
    self._waits.clear()
    if subs:
        self._ack_subjects[:0] = subs
        self._ack_payloads[:0] = pays


def _finish_write(self: Stream) -> None:
    """Stopping: wait for the writes in flight and send what they acknowledge now."""
    if self._waits:
        try:
            self.store.flush()
        except StoreError:
            pass  # rolled back: _written answers with errors
        self._written()


def _persist(self: Stream) -> None:
    """persist_mode: async: hand what was acknowledged to the OS (no fsync, as the reference)."""
    self._persist_timer = None
    if self.closed:
        return
    failed: StoreError | None = None
    try:
        self.store.flush()
    except StoreError as e:
        failed = e
    rb = self.store.take_rollback()
    if rb is not None or failed is not None:
        # Acknowledged messages are lost: that is what async persistence allows. Say so
        # and bring our state back to the store's.
        log.error(
            "stream '%s > %s' (persist_mode async) lost acknowledged messages after %d: %s",
            self.account.name,
            self.name,
            rb[0] if rb else -1,
            rb[1] if rb else failed,
        )
        self._write_failed(rb, failed)
    if self._counted != self.store.bytes_used:
        self._fold_usage()


def _write_failed(self: Stream, rb: tuple[int, StoreWriteError] | None, failed: StoreError | None) -> None:
    """The store's write failed. Every queued PubAck for a sequence the store took back
    becomes an error (see the module docstring); replies about durable sequences (and
    errors) go out unchanged. Without a rollback (a store error of another kind) nothing of
    this turn is known to be on disk: every PubAck becomes an error."""
    exc = rb[1] if rb is not None else failed
    durable = rb[0] if rb is not None else -1
    if not isinstance(exc, StoreWriteError):
        log.error("flush of stream %s failed: %s", self.name, exc)
        err = ApiErrors.STREAM_STORE_FAILED(err=str(exc) or type(exc).__name__)
    else:
        err = _write_error(exc)
    prefix = self._ack_prefix
    n = len(prefix)
    pays = self._ack_payloads
    refused = 0
    for i, p in enumerate(pays):
        if p.startswith(prefix):
            seq = int(p[n:].split(b"}", 1)[0].split(b",", 1)[0])
            if seq > durable:
                pays[i] = _err_ack(self._name_json, err)
                refused += 1
    if rb is not None:
        self.lseq = self.store.state().last_seq
        # Msg ids of taken back messages must not count as duplicates: rebuild the dedupe
        # state from the store when next needed.
        self.lmsg_id = ""
        self._ddmap.clear()
        self._ddq.clear()
        self._dedupe_pending = self.lseq > 0
        self.account.note_removed(self.config.storage, 0)
    now = self.clock.monotonic_ns()
    if now - self._write_err_logged_at >= 10 * 10**9:  # rate limited, as the reference
        self._write_err_logged_at = now
        log.error(
            "JetStream failed to store %d msg(s) on stream '%s > %s': %s", refused, self.account.name, self.name, exc
        )


def _notify_new(self: Stream, last_seq: int, everyone: bool = False) -> None:
    """Tell the consumers that can take them (``wakers``; all with ``everyone``) that messages up
    to ``last_seq`` are stored; the others read ``notified_seq`` when they next need it."""
    if last_seq > self.notified_seq:
        self.notified_seq = last_seq
    wakers = self.wakers
    if not wakers and not everyone:
        return
    consumers = self.consumers
    for name, c in list((consumers if everyone else wakers).items()):
        try:
            c.on_new_messages(last_seq)
        except Exception:
            log.exception("consumer %s > %s on_new_messages", self.name, c.name)
        if name in wakers and (c.closed or consumers.get(name) is not c or not c.wants_new()):
            del wakers[name]  # idle now (its pull requests were served): woken again by the next one
