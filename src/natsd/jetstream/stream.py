"""A JetStream stream: ingest (the publish path), retention, and the stream-side of the API.

The publish path is the hot path. A message on one of the stream's subjects arrives through an
internal subscription (``Ports.subscribe``) and :meth:`Stream.process_msg`. A message without
headers on a stream with nothing to check first (limits retention, not sealed, no
``max_msg_size``, no republish / subject transform, no account byte limits) takes a fast path
straight to ``store_msg``; otherwise the steps are:

0. ``subject_transform`` rewrites the subject;
1. rejects it when sealed / too big (``max_msg_size``, 64 KiB of headers);
2. only if the message has a header block, scans it once for the ``Nats-*`` headers we honour
   (``Nats-Expected-Stream``, ``Nats-TTL``, ``Nats-Expected-Last-Subject-Sequence`` (+``-Subject``),
   ``Nats-Expected-Last-Sequence``, ``Nats-Msg-Id``, ``Nats-Expected-Last-Msg-Id``,
   ``Nats-Rollup``), checked in the reference's order; a reply ending in ``.$FI`` (fast batch,
   natsd.jetstream.fastbatch) or a ``Nats-Batch-Id`` (atomic batch, natsd.jetstream.batch) hands
   the message to those modules; ``Nats-Incr`` and counter streams go through
   natsd.jetstream.counters (the PubAck then carries ``"val"``);
3. appends it to the store (``store_msg``; the store applies discard-old limits and raises on
   discard-new) or, on an interest stream nobody is interested in, skips the sequence;
4. queues the reply (a PubAck built from bytes, never ``json.dumps``) and, once per loop turn
   (``Clock.call_soon``), :meth:`_flush` hands the batch to the OS (``store.flush()``, plus
   ``store.sync()`` with ``sync_always``), then sends every queued PubAck, then tells each
   consumer ``on_new_messages(last_seq)``. So a PubAck always follows the write of its record.
   A big turn's write may go to the store's writer thread (``store.flush_async``, see
   natsd.store.file.writer): then the turn's replies and the consumers' wake-up wait, in turn
   order, until the store reports it written (:meth:`_written`).

   Except with ``persist_mode: async`` (file storage only, as the reference): there the PubAck
   is sent at the end of the turn *without* writing first; the records stay in the store's
   buffer (a read of one of them, e.g. a delivery, writes them first: the file store never
   serves bytes it has not written) and ``_persist`` writes them ``ASYNC_PERSIST_DELAY_NS``
   (10 ms) later in one ``pwrite``, never fsynced per write even with ``sync_always`` (the
   server's ``sync_interval`` still fsyncs). So for such a stream a PubAck does **not** mean the
   record reached the OS: a crash (kill -9) within those 10 ms, or a failed write (then logged,
   and the stream's state cut back to what is on disk), loses acknowledged messages.

PubAck bytes (the reference builds them by hand, note the space in ``"duplicate": true``)::

    {"stream":"ORDERS","seq":5}
    {"stream":"ORDERS","seq":2,"duplicate": true}
    {"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 2"},"stream":"ORDERS","seq":0}

``no_ack`` streams never reply, not even errors.

When the store's write fails (disk full, I/O error) the store rolls back every message not on
disk (``store.take_rollback()``): :meth:`_flush` then answers each publish whose sequence was
taken back with an error instead of its PubAck (10023 "insufficient resources" for ENOSPC /
EDQUOT, 10077 with the OS error otherwise; nats-server 2.15.1 answers nothing at all there),
forgets their msg ids and never tells consumers about them. Nothing is left unanswered.

Server-wide limits (``jetstream { max_file_store, max_memory_store }``, defaults computed by the
engine as the reference): before storing, a publish is refused with 10023 when the bytes stored
by every stream of that storage type already exceed the limit (the reference's
``limitsExceeded``). The engine's running total (``engine.used``) is kept by folding each
stream's ``store.bytes_used`` into it (``_fold_usage``): at each flush and each removal.

Timers (all on the injected clock): max_age / Nats-TTL expiry (armed from ``store.next_expiry()``),
the dedupe window, and ``sync_interval`` (owned by the engine).

Consumers (``natsd.jetstream.consumer``) see the stream through: ``consumers`` (name -> consumer),
``add_consumer`` / ``remove_consumer``, ``ack_processed(consumer, sseq)`` (retention),
``check_workqueue_filters``; the stream calls ``on_new_messages(last_seq)``, ``on_purge(first_seq)``,
``on_msg_removed(seq)``, ``stop()`` and ``delete()`` on them.
"""

from __future__ import annotations

import errno
import json
import logging
from collections import deque
from typing import TYPE_CHECKING, Any, Iterator

from natsd.gotime import format_duration
from natsd.jetstream import counters
from natsd.jetstream.batch import H_BATCH_ID, AtomicBatches, on_batch_msg, repair_torn_batch
from natsd.jetstream.errors import ApiError, ApiErrors
from natsd.jetstream.fastbatch import SUFFIX as FAST_BATCH_SUFFIX, on_fast_batch_msg
from natsd.jetstream.models import SECOND, StreamConfig, rfc3339, state_to_json, with_dynamic_metadata
from natsd.jetstream.schedules import SCHEDULE_MARK, Schedules, check_publish as check_schedule, schedule_to_purge
from natsd.jetstream.sourcing import SourceLink
from natsd.jetstream.wire import dumps, parse_ttl
from natsd.protocol.headers import get_header_bytes, nats_headers
from natsd.store.base import (
    MaxBytes, MaxMsgs, MaxMsgsPerSubject, MsgNotFound, StoreConfig, StoreEOF, StoreError, StoreFull,
    StoreMsg, StoreWriteError, StreamStore,
)
from natsd.subjects.tokens import subject_matches, subjects_collide, subset
from natsd.subjects.transform import transform as _transform

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Clock, Timer
    from natsd.jetstream.consumer import Consumer
    from natsd.jetstream.manager import JsAccount
    from natsd.jetstream.ports import Subscription
    from natsd.jetstream.sourcing import SourceLink

__all__ = ["Stream", "store_config_for", "parse_ttl"]

log = logging.getLogger("natsd.jetstream.stream")

# Header names we look at on ingest (exact spelling as the reference; compared case-sensitively
# like nats-server's getHeader).
H_MSG_ID = b"Nats-Msg-Id"
H_EXP_STREAM = b"Nats-Expected-Stream"
H_EXP_LAST_SEQ = b"Nats-Expected-Last-Sequence"
H_EXP_LAST_SUBJ_SEQ = b"Nats-Expected-Last-Subject-Sequence"
H_EXP_LAST_SUBJ_SEQ_SUBJ = b"Nats-Expected-Last-Subject-Sequence-Subject"
H_EXP_LAST_MSG_ID = b"Nats-Expected-Last-Msg-Id"
H_ROLLUP = b"Nats-Rollup"
H_TTL = b"Nats-TTL"
H_MARKER_REASON = b"Nats-Marker-Reason"
H_STREAM_SOURCE = b"Nats-Stream-Source"

MAX_HDR_SIZE = 65535  # math.MaxUint16 in the reference
_NO_SOURCES: dict = {}  # (the counter sources of a counter message stored without any; never changed)
COUNTER_CACHE_MAX = 100_000  # counter totals kept in memory per stream (see Stream.counter_stored)
# persist_mode: async: how long acknowledged records may wait in the store's buffer before
# they are written (coalescing the writes of many loop turns into one).
ASYNC_PERSIST_DELAY_NS = 10 * 10**6


def store_config_for(cfg: StreamConfig, created_ns: int) -> StoreConfig:
    """The StoreConfig of a stream. ``meta`` is what the store persists to recover the stream:
    ``{"config": <StreamConfig JSON>, "created": <RFC 3339>}``."""
    return StoreConfig(
        name=cfg.name,
        subjects=list(cfg.subjects),
        storage=cfg.storage,
        max_msgs=cfg.max_msgs,
        max_bytes=cfg.max_bytes,
        max_age_ns=cfg.max_age,
        max_msgs_per_subject=cfg.max_msgs_per_subject,
        max_msg_size=cfg.max_msg_size,
        discard=cfg.discard,
        discard_new_per_subject=cfg.discard_new_per_subject,
        first_seq=cfg.first_seq,
        allow_msg_ttl=cfg.allow_msg_ttl,
        async_persist=cfg.persist_mode == "async",
        compression=str(cfg.compression),
        meta={"config": cfg.to_json(), "created": rfc3339(created_ns), "created_ns": created_ns},
    )


def _write_error(e: StoreWriteError) -> ApiError:
    """The PubAck error for a failed store write: a full disk (or quota) is "insufficient
    resources", as the reference answers when its storage limit is reached; any other I/O error
    is "stream store failed" with the OS error."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return ApiErrors.INSUFFICIENT_RESOURCES()
    return ApiErrors.STREAM_STORE_FAILED(err=str(e))


def _err_ack(stream: bytes, err: ApiError) -> bytes:
    # {"error":{...},"stream":"S","seq":0} -- field order of the reference's JSPubAckResponse.
    return b'{"error":' + dumps(err.to_dict()) + b',"stream":' + stream + b',"seq":0}'


class Stream:
    """One stream of one account. Created by the account (``JsAccount.add_stream``)."""

    def __init__(self, account: "JsAccount", config: StreamConfig, store: StreamStore, created_ns: int) -> None:
        self.account = account
        self.name = config.name
        self.config = config
        self.store: StreamStore = store
        self.created_ns = created_ns
        self.clock: Clock = account.clock
        self.consumers: dict[str, Consumer] = {}
        self.closed = False
        # Snapshots being sent (natsd.jetstream.snapshot): while any runs, nothing expires (the
        # backup must be consistent) and STREAM.UPDATE is refused (see api/snapshot.py).
        self.snapshots_running = 0
        self._subs: dict[str, Subscription] = {}  # subject -> its subscription
        self._direct_subs: list[Subscription] = []
        # Replies waiting for this turn's flush: reply subject, payload, parallel lists.
        self._ack_subjects: list[str] = []
        self._ack_payloads: list[bytes] = []
        self._flush_scheduled = False
        self._new_msgs = False
        # Writes on the store's writer thread (store.flush_async): per turn written there, its
        # token, replies, "new messages" flag and last sequence wait for it (_written).
        self._waits: deque[tuple[int, list[str], list[bytes], bool, int]] = deque()
        # last sequence (includes interest-skipped sequences), and last Nats-Msg-Id stored.
        st = store.state()
        self.lseq: int = st.last_seq
        # Never held a message nor purged: the reference reports first_seq 0 then (state_json).
        self._pristine = st.last_seq == 0 and not config.first_seq
        self.lmsg_id: str = ""
        # dedupe: msg id -> (seq, ts); insertion-ordered for expiry.
        self._ddmap: dict[str, tuple[int, int]] = {}
        self._ddq: deque[tuple[int, str]] = deque()
        self._expiry_timer: Timer | None = None
        self._expiry_at = 0  # wall ns the timer is armed for
        self._marker_seqs: set[int] = set()
        self._dedupe_pending = False
        self._removed: list[tuple[int, str]] | None = None
        # Set (to the messages removed) while a purge or rollup runs: consumers learn of it once,
        # through _after_purge, as the reference's purge (a pending message it removes is dropped
        # with the ack floor raised past it, not terminated one by one).
        self._purging: list[tuple[int, str]] | None = None
        self._links: list[SourceLink] = []  # mirror / sources
        self._sched: Schedules | None = None  # allow_msg_schedules (natsd.jetstream.schedules)
        self._persist_timer: Timer | None = None  # persist_mode: async (see _flush)
        self.batches: AtomicBatches | None = None  # open atomic batches (natsd.jetstream.batch)
        # Counter streams: subject -> (seq, total, sources) of the last counter message stored
        # here, and the one apply_incr just computed (natsd.jetstream.counters). Bounded.
        self.counter_cache: dict[str, tuple[int, int, dict]] = {}
        self.counter_next: tuple[str, int, dict] | None = None
        # Server-wide usage: the engine's [memory, file] totals, this stream's slot in them, the
        # limit, and the bytes of this store already counted there (see _fold_usage).
        engine = account.engine
        self._used: list[int] = engine.used
        self._ut = 0 if config.storage == "memory" else 1
        self._max_used: int = engine.max_memory if self._ut == 0 else engine.max_store
        self._counted = 0
        self._write_err_logged_at = -(10**12)
        self._fold_usage()
        self._set_derived()
        store.register_storage_updates(self._on_storage_update)

    # ---------------------------------------------------------------------------------------
    # lifecycle

    def _set_derived(self) -> None:
        cfg = self.config
        self._name_json = dumps(cfg.name)
        # With a JetStream domain the reference's PubAck names it: {"stream":"S","domain":"D","seq":N}
        dom = self.account.engine.domain
        self._ack_prefix = (b'{"stream":' + self._name_json + (b',"domain":' + dumps(dom) if dom else b"")
                            + b',"seq":')
        self._interest = cfg.retention == "interest"
        self._workqueue = cfg.retention == "workqueue"
        self._max_msg_size = cfg.max_msg_size
        self._allow_rollup = cfg.allow_rollup_hdrs and not cfg.deny_purge
        self._dup_window = cfg.duplicate_window
        self._sdm_ttl_s = cfg.subject_delete_marker_ttl // SECOND if cfg.subject_delete_marker_ttl > 0 else 0
        self._do_ack = not cfg.no_ack
        self._async_persist = cfg.persist_mode == "async"
        self._store_msg = self.store.store_msg
        self._call_soon = self.clock.call_soon
        tr = cfg.subject_transform
        self._transform = ((tr.get("src") or ">"), tr["dest"]) if tr and tr.get("dest") else None
        self._counter = cfg.allow_msg_counter
        self._engine_options = self.account.engine.options  # (max_payload: see _counter_max_size)
        plain = (not cfg.sealed and cfg.max_msg_size < 0 and cfg.retention == "limits"
                 and not cfg.republish and not self._transform and not self.closed
                 and not self.account.limits_enforced and not cfg.allow_msg_schedules)
        self._fast = plain and not self._counter
        self._counter_fast = plain and self._counter
        if cfg.allow_msg_schedules and self._sched is None:
            self._sched = Schedules(self.clock, self.store, self._produce_scheduled,
                                    self.account.stream_dir(self.name) if cfg.storage == "file" else None)

    def start(self, links: bool = True, subscribe: bool = True) -> None:
        """Subscribe the stream's subjects (and direct get), rebuild dedupe state, arm timers and
        (``links``) connect mirror / sources; recovery connects those once every stream is back."""
        # The dedupe map (and the last Nats-Msg-Id) of a recovered stream is rebuilt lazily, on
        # the first publish that needs it: restarting a big stream that never uses msg ids must
        # not read back a whole duplicate window of messages.
        if self.config.allow_atomic and repair_torn_batch(self):
            self.lseq = self.store.state().last_seq
        self._dedupe_pending = self.lseq > 0
        if self._sdm_ttl_s and self.lseq:
            self._recover_marker_seqs()
        if subscribe:  # else the caller runs subscribe_steps (a slow STREAM.CREATE)
            self._subscribe()
        self._arm_expiry()
        if self._sched is not None:
            self._sched.recover()
        if links:
            self._start_links()

    def _start_links(self) -> None:
        """Connect the mirror / sources (consumers on the origins, see natsd.jetstream.sourcing)."""
        cfg = self.config
        keep = [cfg.mirror] if cfg.mirror is not None else list(cfg.sources or [])
        for link in self._links:
            link.stop(forget=link.cfg not in keep)  # (a removed source's durable consumer goes)
        if cfg.mirror is not None:
            self._links = [SourceLink(self, cfg.mirror, True)]
        else:
            self._links = [SourceLink(self, src, False) for src in (cfg.sources or [])]
        for link in self._links:
            link.start()

    def _stop_links(self, forget: bool = False) -> None:
        for link in self._links:
            link.stop(forget=forget)
        self._links = []

    def note_mirrored(self, seq: int) -> None:
        """A mirror stored origin message ``seq`` (raw, with its own sequence)."""
        self.lseq = seq
        self._new_msgs = True
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._call_soon(self._flush)

    def _recover_marker_seqs(self) -> None:
        """Delete markers still alive after a restart (stored within the last marker TTL), so
        that their own expiry does not leave a marker for a marker."""
        cutoff = self.clock.time_ns() - self._sdm_ttl_s * SECOND - SECOND
        seq = self.lseq
        while seq > 0:
            try:
                sm = self.store.load_prev_msg(seq)
            except StoreError:
                break
            if sm.ts < cutoff:
                break
            if sm.hdr and H_MARKER_REASON in sm.hdr and not sm.msg:
                self._marker_seqs.add(sm.seq)
            seq = sm.seq - 1

    def _subscribe(self) -> None:
        for _ in self.subscribe_steps():
            pass

    def subscribe_steps(self, chunk: int = 0) -> Iterator[None]:
        """Make the subscriptions match the config, yielding after every ``chunk`` new ones (0:
        never), so that a slow STREAM.CREATE inserts tens of thousands of subjects across loop
        turns. Subscriptions change by difference: a stream with 77k subjects that gains one
        keeps its 77k (re-inserting all of them took seconds on the loop)."""
        ports = self.account.ports
        want = self.config.subjects or []
        wanted = set(want)
        subs = self._subs
        for subj in [x for x in subs if x not in wanted]:
            subs.pop(subj).unsubscribe()
        n = 0
        for subj in want:
            if subj not in subs:
                subs[subj] = ports.subscribe(subj, self.process_msg, many=self.process_run, rrun=self.process_rrun)
                n += 1
                if chunk and n % chunk == 0:
                    yield None
                    if self.closed:  # stopped meanwhile (server shutdown): it unsubscribed all
                        return
        for d in self._direct_subs:
            d.unsubscribe()
        self._direct_subs = []
        api = self.account.engine.api
        if self.config.allow_direct and api is not None:
            on_req, on_last = api.direct_get_handlers(self)
            prefixes = ["$JS.API."]
            if self.account.engine.domain:
                prefixes.append(f"$JS.{self.account.engine.domain}.API.")
            for pfx in prefixes:
                self._direct_subs.append(ports.subscribe(f"{pfx}DIRECT.GET.{self.name}", on_req))
                self._direct_subs.append(ports.subscribe(f"{pfx}DIRECT.GET.{self.name}.>", on_last))

    def _unsubscribe(self) -> None:
        for s in [*self._subs.values(), *self._direct_subs]:
            s.unsubscribe()
        self._subs, self._direct_subs = {}, []

    def stop(self) -> None:
        """Stop ingest, flush what is pending, stop consumers and close the store."""
        if self.closed:
            return
        self._stop_links()
        self._unsubscribe()
        self._finish_write()
        self._flush()
        self.closed = True
        self._fast = self._counter_fast = False
        self._uncount()
        if self.batches is not None:
            self.batches.clear()
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
        if self._sched is not None:
            self._sched.stop()
            self._sched.save()  # after the last flush: schedules.db for a fast restart
        if self._persist_timer is not None:  # (store.stop() below writes what is pending)
            self._persist_timer.cancel()
        for c in list(self.consumers.values()):
            try:
                c.stop()
            except Exception:  # a broken consumer must not keep the stream's files open
                log.exception("stopping consumer %s > %s", self.name, c.name)
        self.store.stop()

    def delete(self) -> None:
        """Delete the stream, its consumers and its data."""
        self._stop_links(forget=True)
        self._unsubscribe()
        self._finish_write()
        self._flush()
        self.closed = True
        self._fast = self._counter_fast = False
        self._uncount()
        if self.batches is not None:
            self.batches.clear()
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
        if self._sched is not None:
            self._sched.stop()
        for c in list(self.consumers.values()):
            try:
                c.delete()
            except Exception:
                log.exception("deleting consumer %s > %s", self.name, c.name)
        self.consumers.clear()
        self.store.delete()

    def update_config(self, new: StreamConfig) -> None:
        """Apply an already validated config (see ``policies.check_update``)."""
        old = self.config
        self.config = new
        self._set_derived()
        if self.batches is not None:
            self.batches.config_changed()
        self.store.update_config(store_config_for(new, self.created_ns))
        if old.subjects != new.subjects or old.allow_direct != new.allow_direct:
            self._subscribe()
        if old.mirror != new.mirror or old.sources != new.sources:
            self._start_links()  # removing the mirror promotes it to a normal stream
        self._arm_expiry()
        if new.retention == "interest" and old.retention != "interest":
            # Messages nobody is interested in go now, as the reference (its interest check on
            # update); without consumers that is all of them.
            if self.consumers:
                self._check_interest_after_removal(None)
            elif self.store.state().msgs:
                self.store.purge()
                self.store.flush()
                self._pristine = False
        if self.consumers:
            self._notify_new(self.lseq)

    # ---------------------------------------------------------------------------------------
    # the publish path

    def _respond(self, reply: str, data: bytes) -> None:
        self._ack_subjects.append(reply)
        self._ack_payloads.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.clock.call_soon(self._flush)

    def _reject(self, reply: str, err: ApiError) -> None:
        if reply and self._do_ack:
            self._respond(reply, _err_ack(self._name_json, err))

    def process_run(self, run) -> None:
        """Ingest a run of reply-less, header-less publishes (``Ports.subscribe(many=...)``: a
        ``natsd.protocol.events.Run`` read through ``names``/``payloads``), in order."""
        process = self.process_msg
        for subject, payload in zip(run.names, run.payloads):
            process(subject, "", None, payload)

    def process_rrun(self, subject: str, run) -> None:
        """Ingest a run of publishes to ``subject`` with a reply each (``Ports.subscribe(rrun=...)``:
        an asynchronous publisher's burst, ``run.replies``/``run.payloads``), in order.

        Header-less runs on a ``_fast`` stream (see :meth:`process_msg`) that leave the server's
        storage limit alone and hold no fast-batch reply are stored with one ``store_run`` and
        answered with the turn's PubAcks, as :meth:`process_msg` would answer each; anything
        else (headers, a refusal on the way) goes through :meth:`process_msg` message by
        message, from the first message the run path did not store."""
        replies = run.replies
        payloads = run.payloads
        n = len(payloads)
        done = 0
        if (self._fast and not run.hdr_len and b".$FI\n" not in b"\n".join(replies) + b"\n"
                and self._used[self._ut] + self.store.bytes_used - self._counted
                + n * (len(payloads[0]) + len(subject) + 64) <= self._max_used):
            try:
                first, ts, done, err = self.store.store_run(subject, payloads)
            except StoreError:
                done, err = 0, None  # (closed: each message is refused below, as alone)
            if done:
                last = first + done
                self.lseq = last - 1
                self.lmsg_id = ""
                self._new_msgs = True
                if self._do_ack:
                    self._ack_subjects += [r.decode() for r in replies[:done]]
                    prefix = self._ack_prefix
                    self._ack_payloads += [b"%s%d}" % (prefix, s) for s in range(first, last)]
                if not self._flush_scheduled:
                    self._flush_scheduled = True
                    self._call_soon(self._flush)
            if err is not None:
                self._store_failed(replies[done].decode(), err)
                done += 1
        if done < n:
            hl = run.hdr_len
            process = self.process_msg
            for i in range(done, n):
                data = payloads[i]
                process(subject, replies[i].decode(), data[:hl] if hl else None, data[hl:] if hl else data)

    def process_msg(self, subject: str, reply: str, hdr: bytes | None, payload: bytes, sourced: bool = False) -> int:
        """Ingest one message; returns its sequence (0 when rejected or a duplicate). ``sourced``:
        stored by a source link (``Nats-Stream-Source`` is its own, counters aggregate).

        Three light paths come first, for a stream with nothing to check before storing (not
        sealed, no ``max_msg_size``, limits retention, no account byte limits, no republish, no
        subject transform, no schedules; ``_fast``) and no fast batch publish (a reply ending
        in ``.$FI``, natsd.jetstream.fastbatch): a message without headers; one whose headers
        hold no ``Nats-*`` name but at most ``Nats-Msg-Id`` (one scan of the block finds that
        out, :func:`nats_headers`); and, on such a counter stream (``_counter_fast``), a lone
        ``Nats-Incr`` whose subject's last total is known (:meth:`_incr_light`). Everything
        else, and every refusal, takes :meth:`_process`, which checks in the reference's order.
        """
        if self._fast and not reply.endswith(FAST_BATCH_SUFFIX):
            msg_id = ""
            if hdr:
                # One scan instead of nats_headers(): the first Nats-* line must be Nats-Msg-Id
                # and no other may follow (the rules of get_header_bytes: the name starts a line,
                # the value runs to the CRLF, leading spaces skipped).
                i = hdr.find(b"\r\nNats-")
                if len(hdr) > MAX_HDR_SIZE:
                    return self._process(subject, reply, hdr, payload, sourced, None)
                if i >= 0:
                    if not hdr.startswith(b"Msg-Id:", i + 7):
                        return self._process(subject, reply, hdr, payload, sourced, None)
                    j = hdr.find(b"\r\n", i + 14)
                    if j < 0:
                        j = len(hdr)
                    if hdr.find(b"\r\nNats-", j) >= 0:
                        return self._process(subject, reply, hdr, payload, sourced, None)
                    v = hdr[i + 14:j].lstrip(b" ")  # Nats-Msg-Id alone
                    if self._dedupe_pending:
                        self._rebuild_dedupe()
                    if v:
                        msg_id = v.decode()
                        dup = self._ddmap.get(msg_id)
                        if dup is not None and dup[1] > self.clock.time_ns() - self._dup_window:
                            if reply and self._do_ack:
                                self._respond(reply, self._ack_prefix + str(dup[0]).encode() + b',"duplicate": true}')
                            return 0
            # (a message without Nats-* headers, or with a new msg id)
            if self._used[self._ut] + self.store.bytes_used - self._counted > self._max_used:
                self._server_full(reply)
                return 0
            try:
                seq, ts = self._store_msg(subject, hdr or None, payload, 0)
            except StoreError as e:
                self._store_failed(reply, e)
                return 0
            self.lseq = seq
            self.lmsg_id = msg_id
            if msg_id and self._dup_window > 0:
                self._ddmap[msg_id] = (seq, ts)
                q = self._ddq
                q.append((ts, msg_id))
                if len(q) & 1023 == 0:
                    self._expire_msg_ids()
            self._new_msgs = True
            if reply and self._do_ack:
                self._ack_subjects.append(reply)
                self._ack_payloads.append(self._ack_prefix + str(seq).encode() + b"}")
            if not self._flush_scheduled:
                self._flush_scheduled = True
                self._call_soon(self._flush)
            return seq
        if self._counter_fast and hdr and not payload and not sourced and not reply.endswith(FAST_BATCH_SUFFIX):
            h = nats_headers(hdr)
            if len(h) == 1 and len(hdr) <= MAX_HDR_SIZE:
                iv = h.get(counters.H_INCR)
                if iv:
                    seq = self._incr_light(subject, reply, hdr, iv)
                    if seq >= 0:
                        return seq
            return self._process(subject, reply, hdr, payload, sourced, h)
        return self._process(subject, reply, hdr, payload, sourced, None)

    def _incr_light(self, subject: str, reply: str, hdr: bytes, v: bytes) -> int:
        """A lone ``Nats-Incr: <v>`` on a ``_counter_fast`` stream, when the subject has no
        message yet or its last total is the one this stream stored (``counter_cache``, valid
        while the index still names that sequence last) without counter sources: the new total
        is stored with the publisher's headers as they are. Returns the sequence (0: refused by
        the store), or -1 when the case needs :meth:`_process` (a bad value, an unknown last
        total, a stored message over the size limit: it checks and answers)."""
        incr: int | None
        if v.isdigit():  # (ASCII digits only, as bytes.isdigit is: the usual "1")
            incr = int(v)
        else:
            incr = counters.parse_incr(v)
            if incr is None:
                return -1
        last = self.store.last_seq_of(subject)
        if last:
            hit = self.counter_cache.get(subject)
            if hit is None or hit[0] != last or hit[2]:
                return -1
            total = hit[1] + incr
        else:
            total = incr
        val = str(total).encode()
        body = b'{"val":"' + val + b'"}'
        if len(hdr) + len(body) > self._engine_options.max_payload:  # (no max_msg_size here)
            return -1
        if self._used[self._ut] + self.store.bytes_used - self._counted > self._max_used:
            self._server_full(reply)
            return 0
        try:
            seq = self._store_msg(subject, hdr, body, 0)[0]
        except StoreError as e:
            self._store_failed(reply, e)
            return 0
        self.lseq = seq
        self.lmsg_id = ""
        self._new_msgs = True
        cache = self.counter_cache
        if len(cache) >= COUNTER_CACHE_MAX and subject not in cache:
            cache.clear()
        cache[subject] = (seq, total, _NO_SOURCES)
        if reply and self._do_ack:
            self._ack_subjects.append(reply)
            self._ack_payloads.append(self._ack_prefix + str(seq).encode() + b',"val":"' + val + b'"}')
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._call_soon(self._flush)
        return seq

    def _counter_max_size(self) -> int:
        """The size limit of a stored counter message (headers + ``{"val":"N"}`` body): the
        stream's ``max_msg_size``, or without one the server's ``max_payload``, as the reference
        refuses (10054) a total whose message outgrows it although the increment itself fit."""
        mms = self._max_msg_size
        return mms if mms >= 0 else self._engine_options.max_payload

    def _process(self, subject: str, reply: str, hdr: bytes | None, payload: bytes, sourced: bool,
                 h: dict[bytes, bytes] | None) -> int:
        """:meth:`process_msg` for everything the light paths do not take; ``h``: the block's
        ``Nats-*`` headers when the caller already scanned it."""
        if self.closed:
            return 0
        if self._transform is not None:
            # subject_transform is applied before anything else, as the reference
            tsrc, tdest = self._transform
            if subject_matches(tsrc, subject):
                subject = _transform(tsrc, tdest, subject) or subject
        cfg = self.config
        if cfg.sealed:
            self._reject(reply, ApiErrors.STREAM_SEALED())
            return 0
        hlen = len(hdr) if hdr else 0
        mms = self._max_msg_size
        if mms >= 0 and (hlen > mms or len(payload) > mms - hlen):
            self._reject(reply, ApiErrors.STREAM_MESSAGE_EXCEEDS_MAXIMUM())
            return 0
        if hlen > MAX_HDR_SIZE:
            self._reject(reply, ApiErrors.STREAM_HEADER_EXCEEDS_MAXIMUM())
            return 0

        if reply.endswith(FAST_BATCH_SUFFIX):
            return on_fast_batch_msg(self, subject, reply, hdr, payload)
        msg_id = ""
        ttl = 0
        bad_ttl = False
        rollup = b""
        incr: int | None = None
        if hdr:
            if h is None:
                h = nats_headers(hdr)
            if h:
                if h.get(H_BATCH_ID):
                    return on_batch_msg(self, subject, reply, hdr, payload, h)
                if counters.H_INCR in h or self._counter:
                    try:
                        incr = counters.check_incr(h, payload, self._counter, sourced)
                    except ApiError as e:
                        self._reject(reply, e)
                        return 0
                v = h.get(H_EXP_STREAM)
                if v and v.decode() != self.name:
                    self._reject(reply, ApiErrors.STREAM_NOT_MATCH())
                    return 0
                v = h.get(H_TTL)
                if v:  # an empty value is no TTL (the reference ignores it)
                    # An unparsable TTL is reported later (after the other checks), as the
                    # reference does; a valid one on a stream without TTLs fails right here.
                    try:
                        ttl = parse_ttl(v.decode())
                    except ApiError:
                        ttl = 0
                        bad_ttl = True
                    if ttl != 0 and not cfg.allow_msg_ttl:
                        self._reject(reply, ApiErrors.MESSAGE_TTL_DISABLED())
                        return 0
                v = h.get(H_EXP_LAST_SUBJ_SEQ)
                if v:  # an empty value is no expectation (the reference ignores it)
                    want = _parse_uint(v)
                    ssubj = h.get(H_EXP_LAST_SUBJ_SEQ_SUBJ)
                    check_subj = ssubj.decode() if ssubj else subject
                    try:
                        fseq = self.store.load_last_msg(check_subj).seq
                    except (MsgNotFound, StoreEOF):
                        fseq = 0
                    if want is None or fseq != want:
                        self._reject(reply, ApiErrors.STREAM_WRONG_LAST_SEQUENCE(seq=fseq))
                        return 0
                elif h.get(H_EXP_LAST_SUBJ_SEQ_SUBJ):
                    self._reject(reply, ApiErrors.STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_INVALID())
                    return 0
                v = h.get(H_EXP_LAST_SEQ)
                if v is not None:
                    want = _parse_uint(v)
                    if want is None or want != self.lseq:
                        self._reject(reply, ApiErrors.STREAM_WRONG_LAST_SEQUENCE(seq=self.lseq))
                        return 0
                if not sourced and counters.H_STREAM_SOURCE in h:
                    self._reject(reply, ApiErrors.MESSAGE_SOURCE_HDR_NOT_ALLOWED())
                    return 0
                if SCHEDULE_MARK in hdr and not self._sched_exempt(h):
                    try:
                        nh = check_schedule(subject, hdr, h, cfg.allow_msg_schedules, cfg.allow_msg_ttl,
                                            cfg.subjects, self._last_or_none, parse_ttl)
                    except ApiError as e:
                        self._reject(reply, e)
                        return 0
                    if nh is not hdr:  # a schedule: Nats-Rollup: sub was added
                        hdr, h = nh, nats_headers(nh)
                        hlen = len(hdr)
                if self._dedupe_pending and (H_MSG_ID in h or H_EXP_LAST_MSG_ID in h):
                    self._rebuild_dedupe()
                v = h.get(H_MSG_ID)
                if v:
                    msg_id = v.decode()
                    dup = self._check_msg_id(msg_id)
                    if dup:
                        if reply and self._do_ack:
                            self._respond(reply, self._ack_prefix + str(dup).encode() + b',"duplicate": true}')
                        return 0
                v = h.get(H_EXP_LAST_MSG_ID)
                if v:
                    if v.decode() != self.lmsg_id:
                        self._reject(reply, ApiErrors.STREAM_WRONG_LAST_MSG_ID(id=self.lmsg_id))
                        return 0
                v = h.get(H_ROLLUP)
                if v:
                    if not self._allow_rollup:
                        self._reject(reply, ApiErrors.STREAM_ROLLUP_FAILED(err="rollup not permitted"))
                        return 0
                    if v not in (b"sub", b"all"):
                        self._reject(reply, ApiErrors.STREAM_ROLLUP_FAILED(
                            err="rollup value invalid: " + json.dumps(v.decode(errors="replace"))))
                        return 0
                    rollup = v

        ack_tail = b"}"
        if self._counter:
            if incr is None:
                self._reject(reply, ApiErrors.MESSAGE_INCR_MISSING())
                return 0
            try:
                hdr, payload, val = counters.apply_incr(self, subject, hdr, payload, incr)
            except ApiError as e:
                self._reject(reply, e)
                return 0
            hlen = len(hdr) if hdr else 0
            if hlen + len(payload) > self._counter_max_size():
                self._reject(reply, ApiErrors.STREAM_MESSAGE_EXCEEDS_MAXIMUM())
                return 0
            ack_tail = b',"val":"' + val.encode() + b'"}'
        if bad_ttl and not (self._interest and not self._has_interest(subject)):
            # (the reference reads the TTL after skipping a message nobody is interested in)
            self._reject(reply, ApiErrors.MESSAGE_TTL_INVALID())
            return 0
        if self._used[self._ut] + self.store.bytes_used - self._counted > self._max_used:
            self._server_full(reply)
            return 0
        acct = self.account
        if acct.limits_enforced:
            err = acct.check_store_limits(self.config.storage, len(subject) + hlen + len(payload))
            if err is not None:
                self._reject(reply, err)
                return 0

        if self._interest and not self._has_interest(subject):
            seq = self.skip_uninterested(subject, msg_id, rollup)
            if self._sched is not None or (hdr and self._allow_rollup and SCHEDULE_MARK in hdr):
                self._schedule_stored(seq, subject, hdr, self.clock.time_ns())
            if reply and self._do_ack:
                self._respond(reply, self._ack_prefix + str(seq).encode() + b"}")
            return seq

        # TTLs shorter than the delete-marker TTL are raised to it (reference behaviour).
        if ttl > 0 and self._sdm_ttl_s and cfg.max_msgs_per_subject != 1 and ttl < self._sdm_ttl_s:
            ttl = self._sdm_ttl_s
            hdr = _set_header(hdr or b"", b"Nats-TTL", str(ttl).encode())
        tlseq = 0
        if cfg.republish:
            try:
                tlseq = self.store.load_last_msg(subject).seq
            except (MsgNotFound, StoreEOF):
                tlseq = 0
        try:
            seq, ts = self.store.store_msg(subject, hdr, payload, ttl * SECOND if ttl > 0 else ttl)
        except StoreError as e:
            self._store_failed(reply, e)
            return 0
        self.lseq = seq
        self.lmsg_id = msg_id
        if self._counter:
            self.counter_stored(seq)
        if msg_id:
            self._store_msg_id(msg_id, seq, ts)
        acct.note_stored(self.config.storage, len(subject) + hlen + len(payload))
        if rollup:
            self._rollup(subject, rollup, 1)
        if self._sched is not None or (hdr and self._allow_rollup and SCHEDULE_MARK in hdr):
            self._schedule_stored(seq, subject, hdr, ts)
        if cfg.republish:
            self._republish(subject, hdr, payload, seq, ts, tlseq)
        self._new_msgs = True
        if reply and self._do_ack:
            self._respond(reply, self._ack_prefix + str(seq).encode() + ack_tail)
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self.clock.call_soon(self._flush)
        return seq

    # -- message schedules (natsd.jetstream.schedules) --------------------------------------------
    def _sched_exempt(self, h: dict[bytes, bytes]) -> bool:
        """Messages the server itself writes skip the schedule header checks, as the reference
        skips them for sourced messages: produced messages, and sourced copies."""
        if self._sched is not None and self._sched.producing:
            return True
        return bool(self.config.sources) and H_STREAM_SOURCE in h

    def _schedule_stored(self, seq: int, subject: str, hdr: bytes | None, ts: int) -> None:
        """After storing (or interest-skipping) a message: schedule bookkeeping, and
        ``Nats-Schedule-Next: purge`` (a one-shot schedule fired, or a cancel) purges the
        schedule's subject on any stream that allows roll-ups (a sourced copy too), as the
        reference."""
        if self._sched is not None:
            self._sched.on_stored(seq, subject, hdr, ts)
        if hdr and self._allow_rollup and SCHEDULE_MARK in hdr:
            done = schedule_to_purge(hdr)
            if done:
                self._rollup(done, b"sub", 0)

    def _last_or_none(self, subject: str) -> StoreMsg | None:
        try:
            return self.store.load_last_msg(subject)
        except (MsgNotFound, StoreEOF):
            return None

    def _produce_scheduled(self, target: str, hdr: bytes | None, payload: bytes) -> int:
        """A schedule is due: its produced message goes through the publish path."""
        return self.process_msg(target, "", hdr, payload)

    def _server_full(self, reply: str) -> None:
        """The server-wide limit of this storage type is exceeded: 10023, as the reference."""
        self.account.engine.resources_exceeded(self.config.storage)
        self._reject(reply, ApiErrors.INSUFFICIENT_RESOURCES())

    def _fold_usage(self) -> None:
        """Bring the engine's total for this storage type up to date with this store."""
        b = self.store.bytes_used
        if b != self._counted:
            self._used[self._ut] += b - self._counted
            self._counted = b

    def _uncount(self) -> None:
        self._used[self._ut] -= self._counted
        self._counted = 0

    def _store_failed(self, reply: str, e: StoreError) -> None:
        """Map a store refusal to the reference's PubAck error."""
        if isinstance(e, StoreWriteError):
            err = _write_error(e)
        elif isinstance(e, MaxMsgs):
            err = ApiErrors.STREAM_STORE_FAILED(err="maximum messages exceeded")
        elif isinstance(e, MaxBytes):
            err = ApiErrors.STREAM_STORE_FAILED(err="maximum bytes exceeded")
        elif isinstance(e, MaxMsgsPerSubject):
            err = ApiErrors.STREAM_STORE_FAILED(err="maximum messages per subject exceeded")
        elif isinstance(e, StoreFull):
            err = ApiErrors.INSUFFICIENT_RESOURCES()
        else:
            log.error("JetStream failed to store a msg on stream '%s > %s': %s", self.account.name, self.name, e)
            err = ApiErrors.STREAM_STORE_FAILED(err=str(e) or type(e).__name__)
        self._reject(reply, err)

    def counter_stored(self, seq: int) -> None:
        """The counter message apply_incr computed was stored as ``seq``: remember its total."""
        nxt, self.counter_next = self.counter_next, None
        if nxt is not None:
            cache = self.counter_cache
            if len(cache) >= COUNTER_CACHE_MAX and nxt[0] not in cache:
                cache.clear()
            cache[nxt[0]] = (seq, nxt[1], nxt[2])

    def skip_uninterested(self, subject: str, msg_id: str, rollup: bytes) -> int:
        """An interest stream's message no consumer wants: its sequence is used, nothing stored
        (the msg id still counts for dedupe, a rollup still applies). Returns the sequence."""
        seq = self.store.skip_msg()
        self.lseq = seq
        self.lmsg_id = msg_id
        if msg_id:
            self._store_msg_id(msg_id, seq, self.clock.time_ns())
        if rollup:
            self._rollup(subject, rollup, 0)
        return seq

    def _has_interest(self, subject: str) -> bool:
        for c in self.consumers.values():
            if c.filter_matches(subject):
                return True
        return False

    def _flush(self) -> None:
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
                self._waits.append((token or self._waits[-1][0], self._ack_subjects, self._ack_payloads,
                                    self._new_msgs, self.lseq))
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

    def _written(self) -> None:
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

    def _unwait(self) -> None:
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

    def _finish_write(self) -> None:
        """Stopping: wait for the writes in flight and send what they acknowledge now."""
        if self._waits:
            try:
                self.store.flush()
            except StoreError:
                pass  # rolled back: _written answers with errors
            self._written()

    def _persist(self) -> None:
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
            log.error("stream '%s > %s' (persist_mode async) lost acknowledged messages after %d: %s",
                      self.account.name, self.name, rb[0] if rb else -1, rb[1] if rb else failed)
            self._write_failed(rb, failed)
        if self._counted != self.store.bytes_used:
            self._fold_usage()

    def _write_failed(self, rb: tuple[int, StoreWriteError] | None, failed: StoreError | None) -> None:
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
            log.error("JetStream failed to store %d msg(s) on stream '%s > %s': %s", refused, self.account.name,
                      self.name, exc)

    def _notify_new(self, last_seq: int) -> None:
        for c in list(self.consumers.values()):
            try:
                c.on_new_messages(last_seq)
            except Exception:
                log.exception("consumer %s > %s on_new_messages", self.name, c.name)

    # -- dedupe ---------------------------------------------------------------------------------
    def _check_msg_id(self, msg_id: str) -> int:
        """Sequence of a live duplicate of ``msg_id`` or 0. One lookup: an entry older than the
        window is no duplicate even before :meth:`_expire_msg_ids` (every 1,024 inserts, see
        :meth:`_store_msg_id`) removes it."""
        e = self._ddmap.get(msg_id)
        if e is None or e[1] <= self.clock.time_ns() - self._dup_window:
            return 0
        return e[0]

    def _store_msg_id(self, msg_id: str, seq: int, ts: int) -> None:
        if self._dup_window <= 0:
            return
        self._ddmap[msg_id] = (seq, ts)
        self._ddq.append((ts, msg_id))
        if len(self._ddq) & 1023 == 0:
            self._expire_msg_ids()

    def _expire_msg_ids(self) -> None:
        cutoff = self.clock.time_ns() - self._dup_window
        q = self._ddq
        m = self._ddmap
        while q and q[0][0] <= cutoff:
            ts, mid = q.popleft()
            e = m.get(mid)
            if e is not None and e[1] == ts:
                del m[mid]

    def _rebuild_dedupe(self) -> None:
        """After recovery: msg ids stored within the duplicate window (read back from the end)
        and the msg id of the last message."""
        self._dedupe_pending = False
        self._ddmap.clear()
        self._ddq.clear()
        if self.lseq == 0:
            return
        try:
            last = self.store.load_prev_msg(self.lseq)
            v = get_header_bytes(last.hdr, H_MSG_ID)
            self.lmsg_id = v.decode() if v else ""
        except StoreError:
            self.lmsg_id = ""
        cutoff = self.clock.time_ns() - self._dup_window
        found: list[tuple[int, str, int]] = []
        seq = self.lseq
        while seq > 0 and self._dup_window > 0:
            try:
                sm = self.store.load_prev_msg(seq)
            except StoreError:
                break
            if sm.ts <= cutoff:
                break
            if sm.hdr:
                v = get_header_bytes(sm.hdr, H_MSG_ID)
                if v:
                    found.append((sm.ts, v.decode(), sm.seq))
            seq = sm.seq - 1
        for ts, mid, sq in reversed(found):  # oldest first: the expiry queue stays in time order
            self._ddmap[mid] = (sq, ts)
            self._ddq.append((ts, mid))

    # -- rollup / republish ------------------------------------------------------------------------
    def _rollup(self, subject: str, kind: bytes, keep: int) -> None:
        self._purging = []
        try:
            if kind == b"sub":
                self.store.purge_ex(subject, 0, keep)
            elif keep:
                # The store keeps the newest ``keep`` messages (not sequences).
                self.store.purge_ex("", 0, keep)
            else:
                self.store.purge()
        finally:
            removed, self._purging = self._purging, None
        self._after_purge(subject if kind == b"sub" else "", removed)  # the reference purges like this too

    def _republish(self, subject: str, hdr: bytes | None, payload: bytes, seq: int, ts: int,
                   tlseq: int) -> None:
        """republish: a copy of the stored message to the mapped subject, with the headers
        ``Nats-Stream``, ``Nats-Subject``, ``Nats-Sequence``, ``Nats-Time-Stamp``,
        ``Nats-Last-Sequence`` (previous seq on the subject) and, headers-only, ``Nats-Msg-Size``
        appended after the message's own headers."""
        rp = self.config.republish or {}
        src = rp.get("src") or ">"
        if not subject_matches(src, subject):
            return
        dest = _transform(src, rp.get("dest", ""), subject)
        if not dest:
            return
        base = (b"NATS/1.0\r\nNats-Stream: " + self.name.encode() + b"\r\nNats-Subject: " + subject.encode()
                + b"\r\nNats-Sequence: " + str(seq).encode() + b"\r\nNats-Time-Stamp: " + rfc3339(ts).encode()
                + b"\r\nNats-Last-Sequence: " + str(tlseq).encode() + b"\r\n")
        if rp.get("headers_only"):
            base += b"Nats-Msg-Size: " + str(len(payload)).encode() + b"\r\n"
            body = b""
        else:
            body = payload
        if hdr:
            # original headers first (without the trailing CRLF), then ours
            nh = hdr[: len(hdr) - 2] + base[len(b"NATS/1.0\r\n"):] + b"\r\n"
        else:
            nh = base + b"\r\n"
        self.account.ports.publish(dest, "", nh, body)

    # -- storage updates (removals) ------------------------------------------------------------------
    def _on_storage_update(self, msgs_delta: int, bytes_delta: int, seq: int, subject: str) -> None:
        # (once per message a limit removes: every KV put of an existing key, history 1)
        acct = self.account
        if acct.limits_enforced:
            acct.note_removed(self.config.storage, bytes_delta)
        b = self.store.bytes_used
        if b != self._counted:  # (_fold_usage, inlined)
            self._used[self._ut] += b - self._counted
            self._counted = b
        if msgs_delta < 0 and seq:
            if self._removed is not None:
                self._removed.append((seq, subject))
            if self._purging is not None:
                self._purging.append((seq, subject))
            elif self.consumers:
                for c in list(self.consumers.values()):
                    c.on_msg_removed(seq, subject)

    # -- expiry ------------------------------------------------------------------------------------
    def begin_snapshot(self) -> None:
        """A snapshot starts: hold expiry (max_age, Nats-TTL) until :meth:`end_snapshot`."""
        self.snapshots_running += 1
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
            self._expiry_at = 0

    def end_snapshot(self) -> None:
        """A snapshot ended (or failed): expiry resumes once no snapshot runs."""
        self.snapshots_running = max(self.snapshots_running - 1, 0)
        if not self.snapshots_running:
            self._arm_expiry()

    def _arm_expiry(self) -> None:
        if self.closed or self.snapshots_running:
            return
        cfg = self.config
        if not cfg.max_age and not cfg.allow_msg_ttl:
            return
        nxt = self.store.next_expiry()
        if nxt <= 0:
            return
        if self._expiry_timer is not None and self._expiry_at and self._expiry_at <= nxt:
            return  # already armed for an earlier or equal time
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
        self._expiry_at = nxt
        self._expiry_timer = self.clock.call_later(max(nxt - self.clock.time_ns(), 0), self._run_expiry)

    def _run_expiry(self) -> None:
        self._expiry_timer = None
        self._expiry_at = 0
        if self.closed:
            return
        sdm = self._sdm_ttl_s > 0
        self._removed = [] if sdm else None
        try:
            self.store.expire(self.clock.time_ns())
        finally:
            removed, self._removed = self._removed, None
        # Consumers skip expired messages when they reach them (as the reference); interest /
        # workqueue consumers were told one by one through on_msg_removed.
        if sdm and removed:
            self._write_delete_markers(removed)
        self._arm_expiry()

    def _write_delete_markers(self, removed: list[tuple[int, str]]) -> None:
        """Subject delete markers: the last message of a subject expired -> store a marker
        ``NATS/1.0\\r\\nNats-Marker-Reason: MaxAge\\r\\nNats-TTL: <ttl>\\r\\nNats-Rollup: sub\\r\\n\\r\\n``
        with an empty body on that subject (it expires itself after subject_delete_marker_ttl)."""
        done: set[str] = set()
        ttl_s = self._sdm_ttl_s
        hdr = (b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: " + format_duration(ttl_s * SECOND).encode()
               + b"\r\nNats-Rollup: sub\r\n\r\n")
        for seq, subj in removed:
            if seq in self._marker_seqs:
                self._marker_seqs.discard(seq)
                continue
            if not subj or subj in done:
                continue
            done.add(subj)
            try:
                self.store.load_last_msg(subj)
                continue  # the subject still has messages
            except (MsgNotFound, StoreEOF):
                pass
            try:
                mseq, _ = self.store.store_msg(subj, hdr, b"", ttl_s * SECOND)
            except StoreError:
                continue
            self._marker_seqs.add(mseq)
            self.lseq = mseq
            self._new_msgs = True
        if self._new_msgs and not self._flush_scheduled:
            self._flush_scheduled = True
            self.clock.call_soon(self._flush)

    # ---------------------------------------------------------------------------------------
    # consumers (contract with natsd.jetstream.consumer)

    def add_consumer(self, consumer: Consumer) -> None:
        """Register ``consumer`` (``.name``). Enforces the stream's max_consumers and the
        account's max_consumers (10026 "maximum consumers limit reached")."""
        name = consumer.name
        if name not in self.consumers and not _is_direct(consumer):
            # internal (direct: mirror / source) consumers do not count, as the reference's
            # numLimitableConsumers
            mc = self.config.max_consumers
            if mc > 0 and sum(1 for c in self.consumers.values() if not _is_direct(c)) >= mc:
                raise ApiErrors.MAXIMUM_CONSUMERS_LIMIT()
            lim = self.account.limits
            if lim is not None and lim.max_consumers > 0 and self.account.num_consumers(limitable=True) >= lim.max_consumers:
                raise ApiErrors.MAXIMUM_CONSUMERS_LIMIT()
        self.consumers[name] = consumer

    def remove_consumer(self, name: str) -> None:
        """Forget consumer ``name``; on interest streams, messages only it held are removed."""
        c = self.consumers.pop(name, None)
        if c is None:
            return
        if self._interest and self.consumers is not None:
            if not self.consumers and self.config.retention == "interest":
                # The last consumer of an interest stream leaves: nats-server purges the stream
                # (its first sequence moves past the last, even when it was empty).
                self.store.purge()
                self.store.flush()
                self._pristine = False
                return
            self._check_interest_after_removal(c)

    def _check_interest_after_removal(self, gone: Consumer | None) -> None:
        # Remove messages no remaining consumer needs (of those ``gone`` matched; all when None).
        # Bounded walk over the stored range.
        st = self.store.state()
        if st.msgs == 0:
            return
        seq = st.first_seq
        removed = False
        while True:
            try:
                sm = self.store.load_next_msg(">", seq)
            except (StoreEOF, MsgNotFound):
                break
            seq = sm.seq + 1
            if gone is not None and not gone.filter_matches(sm.subject):
                continue
            if self._interest_done(sm.seq, sm.subject):
                self.store.remove_msg(sm.seq)
                removed = True
        if removed:
            self.store.flush()

    def _interest_done(self, sseq: int, subject: str) -> bool:
        for c in self.consumers.values():
            if c.filter_matches(subject) and not c.is_acked(sseq):
                return False
        return True

    def ack_processed(self, consumer: Consumer, sseq: int) -> None:
        """A consumer acked ``sseq``: workqueue -> remove it; interest -> remove it once every
        interested consumer has acked it. limits retention: nothing."""
        if self._workqueue:
            removed = self.store.remove_msg(sseq)
        elif self._interest:
            try:
                sm = self.store.load_msg(sseq)
            except (MsgNotFound, StoreEOF):
                return
            removed = self._interest_done(sseq, sm.subject) and self.store.remove_msg(sseq)
        else:
            return
        if removed and not self._flush_scheduled:
            # the removal reaches the OS with this turn's batch
            self._flush_scheduled = True
            self._call_soon(self._flush)

    def check_workqueue_filters(self, new_filters: list[str], exclude_name: str | None = None) -> None:
        """Work-queue rule at consumer add: at most one unfiltered consumer (10099) and no two
        consumers with overlapping filters (10100)."""
        if not self._workqueue:
            return
        others = [c for n, c in self.consumers.items() if n != exclude_name and not _is_direct(c)]
        if not others:
            return
        filters = [f for f in new_filters if f]
        if not filters:
            raise ApiErrors.CONSUMER_WQ_MULTIPLE_UNFILTERED()
        for c in others:
            existing = _consumer_filters(c)
            if not existing:
                raise ApiErrors.CONSUMER_WQ_CONSUMER_NOT_UNIQUE()
            for f in existing:
                for nf in filters:
                    if subjects_collide(f, nf):
                        raise ApiErrors.CONSUMER_WQ_CONSUMER_NOT_UNIQUE()

    # ---------------------------------------------------------------------------------------
    # admin operations (API)

    def purge(self, subject: str = "", seq: int = 0, keep: int = 0) -> int:
        """STREAM.PURGE: returns the number of messages removed."""
        if self.config.sealed:
            raise ApiErrors.STREAM_SEALED()
        if self.config.deny_purge:
            raise ApiErrors.STREAM_PURGE_FAILED(err="stream purge not permitted")
        self._purging = []
        try:
            if not subject and not seq and not keep:
                n = self.store.purge()
            else:
                n = self.store.purge_ex(subject, seq, keep)
        finally:
            removed, self._purging = self._purging, None
        self.store.flush()
        if n or (not subject and not keep and seq != 1):
            self._pristine = False  # (a purge that removes nothing from an empty stream changes nothing)
        self._after_purge(subject, removed)
        return n

    def _after_purge(self, subject: str = "", removed: list[tuple[int, str]] | None = None) -> None:
        """Tell the consumers where the stream now starts. A purge of one subject moves only the
        consumers it concerns, as the reference: those whose filters all lie inside the subject
        move to its first remaining message (past the end when none is left); those whose
        filters overlap it more widely only drop what is gone; the others are untouched."""
        st = self.store.state()
        if st.last_seq > self.lseq:
            self.lseq = st.last_seq
        first_of_subject = 0
        if subject:
            try:
                first_of_subject = self.store.load_next_msg(subject, st.first_seq).seq
            except (MsgNotFound, StoreEOF):
                first_of_subject = st.last_seq + 1
        for c in list(self.consumers.values()):
            start = st.first_seq
            if subject:
                filters = c.filters
                if filters and all(subset(f, subject) for f in filters):
                    start = first_of_subject
                elif not filters or any(subjects_collide(f, subject) for f in filters):
                    start = st.first_seq
                else:
                    continue
            try:
                c.on_purge(start)
            except Exception:
                log.exception("consumer %s > %s on_purge", self.name, c.name)
        if subject and removed and len(removed) == 1:
            # The reference's stores report a purge of one subject that removed exactly one
            # message as a single removal, which its consumers then handle as a delete (after
            # the purge): a pending copy is terminated like an ack (AckAll moves its floor).
            seq, subj = removed[0]
            for c in list(self.consumers.values()):
                c.on_msg_removed(seq, subj, purged=True)

    def delete_msg(self, seq: int, no_erase: bool = False) -> None:
        """STREAM.MSG.DELETE. Errors as the reference (10057 with the store's reason)."""
        if self.config.sealed:
            raise ApiErrors.STREAM_SEALED()
        if self.config.deny_delete:
            raise ApiErrors.STREAM_MSG_DELETE_FAILED(err="message delete not permitted")
        # The reference's stores differ here: its memory store reports any missing message as "not
        # removed" (400 10043 sequence N not found); its file store does so for a message deleted
        # between the first and last sequence, and answers 500 10057 with the store's reason
        # beyond them.
        in_memory = self.config.storage == "memory"
        st = self.store.state()
        if seq > st.last_seq:
            if in_memory:
                raise ApiErrors.SEQUENCE_NOT_FOUND(seq=seq)
            raise ApiErrors.STREAM_MSG_DELETE_FAILED(err="stream store EOF")
        try:
            ok = seq > 0 and (self.store.remove_msg(seq) if no_erase else self.store.erase_msg(seq))
        except StoreEOF:
            if in_memory:
                raise ApiErrors.SEQUENCE_NOT_FOUND(seq=seq) from None
            raise ApiErrors.STREAM_MSG_DELETE_FAILED(err="stream store EOF") from None
        except MsgNotFound:
            ok = False
        if not ok:
            if in_memory or st.first_seq <= seq:
                raise ApiErrors.SEQUENCE_NOT_FOUND(seq=seq)
            raise ApiErrors.STREAM_MSG_DELETE_FAILED(err="no message found")
        self.store.flush()

    def get_msg(self, req: dict) -> StoreMsg:
        """STREAM.MSG.GET lookup (seq | last_by_subj | next_by_subj [+seq]). Raises
        NO_MESSAGE_FOUND (10037) when nothing matches, BAD_REQUEST (10003) for a bad combination."""
        seq = req.get("seq") or 0
        last_for = req.get("last_by_subj") or ""
        next_for = req.get("next_by_subj") or ""
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            raise ApiErrors.INVALID_JSON(err="json: cannot unmarshal into Go struct field JSApiMsgGetRequest.seq of type uint64")
        if (seq and last_for) or (last_for and next_for) or (not seq and not last_for and not next_for):
            raise ApiErrors.BAD_REQUEST()
        try:
            if last_for:
                return self.store.load_last_msg(last_for)
            if next_for:
                return self.store.load_next_msg(next_for, seq)
            return self.store.load_msg(seq)
        except (MsgNotFound, StoreEOF):
            raise ApiErrors.NO_MESSAGE_FOUND() from None

    def state_json(self, subjects_filter: str = "", deleted_details: bool = False,
                   offset: int = 0) -> tuple[dict, int, int, int]:
        """(state JSON, total, offset, limit) for STREAM.INFO; subjects paged by 100,000."""
        st = self.store.state(deleted_details)
        subjects = None
        total = 0
        limit = 0
        if subjects_filter:
            totals = self.store.subjects_totals(subjects_filter)
            total = len(totals)
            limit = 100_000
            if offset or total > limit:
                keys = sorted(totals)[offset:offset + limit]
                subjects = {k: totals[k] for k in keys}
            else:
                subjects = totals
        out = state_to_json(st, len(self.consumers), subjects, deleted_details)
        if self._pristine and st.last_seq == 0:
            # A stream that never held a message: the reference's store starts at sequence 0 and
            # (file store) counts that 0 as deleted when details are asked for.
            out["first_seq"] = 0
            if deleted_details and self.config.storage == "file":
                out["num_deleted"] = 1
                out["deleted"] = [0]
        return out, total, offset, limit

    def info(self, subjects_filter: str = "", deleted_details: bool = False, offset: int = 0,
             dynamic_metadata: bool = True) -> tuple[dict, int, int, int]:
        """StreamInfo JSON (config, created, state, cluster, ts) plus paging numbers."""
        state, total, off, limit = self.state_json(subjects_filter, deleted_details, offset)
        cfg = self.config.to_json()
        if dynamic_metadata:
            cfg = with_dynamic_metadata(cfg)
        out: dict = {"config": cfg, "created": rfc3339(self.created_ns), "state": state}
        dom = self.account.engine.domain
        if dom:
            out["domain"] = dom
        out["cluster"] = {"leader": self.account.engine.server_name}
        if self._links:
            if self.config.mirror is not None:
                out["mirror"] = self._links[0].info()
            else:
                out["sources"] = [link.info() for link in self._links]
        out["ts"] = rfc3339(self.clock.time_ns())
        return out, total, off, limit


def _is_direct(c: "Consumer") -> bool:
    """An internal consumer (mirror / source feed): ``config.direct`` (or ``sourcing``) set."""
    cfg = c.config
    return cfg.direct or cfg.sourcing


def _consumer_filters(c: "Consumer") -> list[str]:
    return [f for f in c.filters if f]


def _parse_uint(v: bytes) -> int | None:
    v = v.strip()
    return int(v) if v.isdigit() else None


def _set_header(hdr: bytes, name: bytes, value: bytes) -> bytes:
    """Replace (or add) header ``name`` in a raw block."""
    if not hdr:
        return b"NATS/1.0\r\n" + name + b": " + value + b"\r\n\r\n"
    lines = hdr[: len(hdr) - 4].split(b"\r\n") if hdr.endswith(b"\r\n\r\n") else hdr.split(b"\r\n")
    out = [ln for ln in lines if not ln.startswith(name + b":")]
    out.append(name + b": " + value)
    return b"\r\n".join(out) + b"\r\n\r\n"
