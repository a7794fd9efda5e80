"""A JetStream stream: its lifecycle, retention, consumers and the stream side of the API.

The hot path lives in two modules whose functions the :class:`Stream` class takes as its methods
(so ``stream.process_msg`` is an ordinary bound method, no extra call on the way):

* :mod:`natsd.jetstream.stream.ingest`: the publish path: a message (or a run of them) in, the
  ``Nats-*`` header checks in the reference's order, the store, the PubAck queued; dedupe
  (``Nats-Msg-Id``), rollups, republish, counters' light path;
* :mod:`natsd.jetstream.stream.turnflush`: once per loop turn, write the turn's records, then send its
  PubAcks, then wake the consumers (``persist_mode: async``, writer-thread writes and failed
  writes included). So a PubAck always follows the write of its record.

Timers (all on the injected clock): max_age / Nats-TTL expiry (:class:`~natsd.jetstream.stream.expiry.Expiry`,
armed from ``store.next_expiry()``), the dedupe window, and ``sync_interval`` (owned by the engine).

Consumers (``natsd.jetstream.consumer``) see the stream through: ``consumers`` (name -> consumer),
``add_consumer`` / ``remove_consumer``, ``ack_processed(consumer, sseq)`` (retention),
``check_workqueue_filters``; the rest of natsd reaches them through ``consumer(name)``,
``all_consumers()`` and ``num_consumers()`` (:mod:`natsd.jetstream.stream.consumers`, the
accessors: some consumers may not be recovered yet). The stream calls ``on_new_messages(last_seq)``,
``on_purge(first_seq)``, ``on_msg_removed(seq)``, ``stop()`` and ``delete()`` on them.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Iterator

from natsd.jetstream.stream import ingest, turnflush
from natsd.jetstream.stream.consumers import StreamConsumers
from natsd.jetstream.stream.expiry import Expiry
from natsd.jetstream.errors import ApiErrors
from natsd.jetstream.features.metadata import stream_features
from natsd.jetstream.config.models import SECOND, StreamConfig, rfc3339, state_to_json, with_dynamic_metadata
from natsd.jetstream.wire import dumps, parse_ttl
from natsd.store.base import MsgNotFound, StoreConfig, StoreEOF, StoreMsg, StreamStore
from natsd.subjects.tokens import subjects_collide, subset

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Clock, Timer
    from natsd.jetstream.stream.schedules import Schedules
    from natsd.jetstream.stream.tracing import JsOutcome
    from natsd.jetstream.views import AccountView, ConsumerView, LazyConsumersView
    from natsd.jetstream.ports import Subscription
    from natsd.jetstream.stream.batch import AtomicBatches
    from natsd.jetstream.stream.sourcing import SourceLink

__all__ = ["Stream", "store_config_for", "parse_ttl"]

log = logging.getLogger("natsd.jetstream.stream")


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
        keep_last_under_max_age=stream_features(cfg.metadata).keep_last_under_max_age,  # (natsd feature)
        meta={"config": cfg.to_json(), "created": rfc3339(created_ns), "created_ns": created_ns},
    )


class Stream(StreamConsumers):
    """One stream of one account. Created by the account (``JsAccount.add_stream``)."""

    def __init__(self, account: "AccountView", config: StreamConfig, store: StreamStore, created_ns: int) -> None:
        self.account = account
        self.name = config.name
        self.config = config
        self.store: StreamStore = store
        self.created_ns = created_ns
        self.clock: Clock = account.clock
        self.consumers: dict[str, ConsumerView] = {}
        # A woken stream's consumers not recovered yet (natsd.jetstream.dormant.LazyConsumers):
        # every lookup by name goes through consumer(), anything needing all of them through
        # all_consumers(), counts through num_consumers(); ``consumers`` holds the recovered ones.
        self.lazy: LazyConsumersView | None = None
        # Consumers told about new messages after each turn: push consumers and pull consumers
        # with waiting requests (issue 31: a publish must not touch thousands of idle consumers;
        # they read notified_seq when they next count num_pending or get a request).
        self.wakers: dict[str, ConsumerView] = {}
        self.notified_seq = 0
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
        # max_age / Nats-TTL expiry and subject delete markers (natsd.jetstream.stream.expiry);
        # _arm_expiry is its bound method: the turn's flush re-arms it without an extra call
        self.expiry = Expiry(self)
        self._arm_expiry = self.expiry.arm
        self._dedupe_pending = False
        self._removed: list[tuple[int, str]] | None = None
        # Set (to the messages removed) while a purge or rollup runs: consumers learn of it once,
        # through _after_purge, as the reference's purge (a pending message it removes is dropped
        # with the ack floor raised past it, not terminated one by one).
        self._purging: list[tuple[int, str]] | None = None
        self._links: list[SourceLink] = []  # mirror / sources
        self._sched: Schedules | None = None  # allow_msg_schedules (natsd.jetstream.stream.schedules)
        self._persist_timer: Timer | None = None  # persist_mode: async (see _flush)
        self.batches: AtomicBatches | None = None  # open atomic batches (natsd.jetstream.stream.batch)
        # Counter streams: subject -> (seq, total, sources) of the last counter message stored
        # here, and the one apply_incr just computed (natsd.jetstream.stream.counters). Bounded.
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
        self._ack_prefix = b'{"stream":' + self._name_json + (b',"domain":' + dumps(dom) if dom else b"") + b',"seq":'
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
        # natsd feature (issue 27): JSON Schemas checked at publish (features/schemas.py).
        specs = stream_features(cfg.metadata).schemas
        self._schemas = None
        if specs:  # (the schema layer loads with the first stream that has a schema: issue 31)
            from natsd.jetstream.features.schemas import SchemaChecker

            self._schemas = SchemaChecker(specs, self._kv_entry)
        plain = (
            not cfg.sealed
            and self._schemas is None
            and cfg.max_msg_size < 0
            and cfg.retention == "limits"
            and not cfg.republish
            and not self._transform
            and not self.closed
            and not self.account.limits_enforced
            and not cfg.allow_msg_schedules
        )
        self._fast = plain and not self._counter
        self._counter_fast = plain and self._counter
        if cfg.allow_msg_schedules and self._sched is None:
            # (the schedule layer, with datetime, loads with the first stream allowing schedules: issue 31)
            from natsd.jetstream.stream.schedules import Schedules

            self._sched = Schedules(
                self.clock,
                self.store,
                self._produce_scheduled,
                self.account.stream_dir(self.name) if cfg.storage == "file" else None,
            )

    def _kv_entry(self, bucket: str, key: str) -> tuple[int, bytes] | None:
        """A KV entry of this account as (revision, value); None when absent or deleted (a
        ``kv:`` schema reference, natsd.jetstream.features.schemas)."""
        kv = self.account.streams.get("KV_" + bucket)
        if kv is None:
            return None
        try:
            sm = kv.store.load_last_msg(f"$KV.{bucket}.{key}")
        except (MsgNotFound, StoreEOF):
            return None
        if sm.hdr and b"KV-Operation:" in sm.hdr:
            return None  # a delete or purge marker
        return sm.seq, sm.msg

    def start(self, links: bool = True, subscribe: bool = True) -> None:
        """Subscribe the stream's subjects (and direct get), rebuild dedupe state, arm timers and
        (``links``) connect mirror / sources; recovery connects those once every stream is back."""
        # The dedupe map (and the last Nats-Msg-Id) of a recovered stream is rebuilt lazily, on
        # the first publish that needs it: restarting a big stream that never uses msg ids must
        # not read back a whole duplicate window of messages.
        if self.config.allow_atomic:
            # (the batch layer loads with the first stream allowing atomic batches, or the first
            # batch message: issue 31)
            from natsd.jetstream.stream.batch import repair_torn_batch

            if repair_torn_batch(self):
                self.lseq = self.store.state().last_seq
        self._dedupe_pending = self.lseq > 0
        if self._sdm_ttl_s and self.lseq:
            self.expiry.recover_markers()
        if subscribe:  # else the caller runs subscribe_steps (a slow STREAM.CREATE)
            self._subscribe()
        self._arm_expiry()
        if self._sched is not None:
            self._sched.recover()
        if links:
            self._start_links()

    def _start_links(self) -> None:
        """Connect the mirror / sources (consumers on the origins, see natsd.jetstream.stream.sourcing)."""
        cfg = self.config
        keep = [cfg.mirror] if cfg.mirror is not None else list(cfg.sources or [])
        for link in self._links:
            link.stop(forget=link.cfg not in keep)  # (a removed source's durable consumer goes)
        if not keep and not self._links:
            return  # (no mirror nor sources: the sourcing layer is not loaded, issue 31)
        from natsd.jetstream.stream.sourcing import SourceLink

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

    def note_stored(self, seq: int) -> None:
        """Message ``seq`` was stored outside the publish path (a mirror's origin message, with
        its own sequence; a subject delete marker): the turn's flush wakes the consumers."""
        self.lseq = seq
        self._new_msgs = True
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._call_soon(self._flush)

    note_mirrored = note_stored

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
                subs[subj] = ports.subscribe(
                    subj, self.process_msg, many=self.process_run, rrun=self.process_rrun, stream=self.name
                )
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
            # ($JS.<domain>.API.DIRECT.GET... reaches these through the domain mapping.)
            self._direct_subs.append(ports.subscribe(f"$JS.API.DIRECT.GET.{self.name}", on_req))
            self._direct_subs.append(ports.subscribe(f"$JS.API.DIRECT.GET.{self.name}.>", on_last))

    def _unsubscribe(self) -> None:
        for s in [*self._subs.values(), *self._direct_subs]:
            s.unsubscribe()
        self._subs, self._direct_subs = {}, []

    def _shut_down(self, forget_links: bool) -> None:
        """What stop and delete share: no more ingest (links, subscriptions), what is pending
        written, and the stream's timers (expiry, schedules) stopped."""
        self._stop_links(forget=forget_links)
        self._unsubscribe()
        self._finish_write()
        self._flush()
        self.closed = True
        self._fast = self._counter_fast = False
        self._uncount()
        if self.batches is not None:
            self.batches.clear()
        self.expiry.cancel()
        if self._sched is not None:
            self._sched.stop()

    def stop(self) -> None:
        """Stop ingest, flush what is pending, stop consumers and close the store."""
        if self.closed:
            return
        self._shut_down(forget_links=False)
        if self._sched is not None:
            self._sched.save()  # after the last flush: schedules.db for a fast restart
        if self._persist_timer is not None:  # (store.stop() below writes what is pending)
            self._persist_timer.cancel()
        if self.lazy is not None:
            self.lazy.close()  # (not recovered: their files stay as they are)
        for c in list(self.consumers.values()):
            try:
                c.stop()
            except Exception:  # a broken consumer must not keep the stream's files open
                log.exception("stopping consumer %s > %s", self.name, c.name)
        self.store.stop()

    def delete(self) -> None:
        """Delete the stream, its consumers and its data."""
        self.all_consumers()  # (each consumer's delete as before: its advisory, its pulls answered)
        self._shut_down(forget_links=True)
        for c in list(self.consumers.values()):
            try:
                c.delete()
            except Exception:
                log.exception("deleting consumer %s > %s", self.name, c.name)
        self.consumers.clear()
        self.store.delete()

    def update_config(self, new: StreamConfig) -> None:
        """Apply an already validated config (see ``policies.check_update``)."""
        # A retention change needs every consumer's acks: asleep, the stream wakes here, before
        # anything reads its consumers (a switch to interest seeing none would purge it all).
        self.all_consumers()
        old = self.config
        self.config = new
        self.account.stream_config_changed(old, new)  # (its max_bytes reservation)
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
            # nats-server 2.12+ (checkStateForInterestStream for each consumer): a message goes
            # when consumers match it and all of them acked it; what no consumer matches stays
            # until a consumer acks it or the limits remove it. Without consumers, all go.
            if self.consumers:
                self._drop_acked_on_interest_switch()
            elif self.store.state().msgs:
                self.store.purge()
                self.store.flush()
                self._pristine = False
        if self.consumers:
            self._notify_new(self.lseq, everyone=True)  # (retention may have changed: acks follow)

    # ---------------------------------------------------------------------------------------
    # the publish path (natsd.jetstream.stream.ingest)
    #
    # Why functions of ingest/turnflush bound as methods rather than parts of their own that
    # reach the stream through a view: every published message runs process_msg/process_run,
    # _process and (per turn) _flush, reading ~60 of the stream's attributes; an ingest part
    # holding a reference to the stream would add an attribute load per access, and a part
    # owning copies would have to be kept in step at every config change. Measured with
    # ``bench/run.py jspub`` and ``jspub16k`` (and ``bench/bench_jspub.py pub``, server CPU per
    # publish; see bench/README.md). The trick stays inside natsd/jetstream/stream/.
    _respond = ingest._respond
    _reject = ingest._reject
    process_run = ingest.process_run
    process_rrun = ingest.process_rrun
    _run_msg_ids = ingest._run_msg_ids
    process_msg = ingest.process_msg
    _incr_light = ingest._incr_light
    _counter_max_size = ingest._counter_max_size
    _process = ingest._process
    _sched_exempt = ingest._sched_exempt
    _schedule_stored = ingest._schedule_stored
    _last_or_none = ingest._last_or_none
    _produce_scheduled = ingest._produce_scheduled
    _server_full = ingest._server_full
    _store_failed = ingest._store_failed
    counter_stored = ingest.counter_stored
    skip_uninterested = ingest.skip_uninterested
    _has_interest = ingest._has_interest
    _check_msg_id = ingest._check_msg_id
    _store_msg_id = ingest._store_msg_id
    _expire_msg_ids = ingest._expire_msg_ids
    _rebuild_dedupe = ingest._rebuild_dedupe
    _rollup = ingest._rollup
    _republish = ingest._republish

    def process_traced(
        self, subject: str, reply: str, hdr: bytes | None, payload: bytes, trace_only: bool
    ) -> JsOutcome:
        """A traced message (natsd.server.msgtrace): natsd.jetstream.stream.tracing loads with the
        first one, not with the stream layer (a restart's first request does not pay for it, issue 31)."""
        from natsd.jetstream.stream.tracing import process_traced

        return process_traced(self, subject, reply, hdr, payload, trace_only)

    def _fold_usage(self) -> None:
        """Bring the engine's total for this storage type up to date with this store."""
        b = self.store.bytes_used
        if b != self._counted:
            self._used[self._ut] += b - self._counted
            self._counted = b

    def _uncount(self) -> None:
        self._used[self._ut] -= self._counted
        self._counted = 0

    # the turn's write, PubAcks and consumer wake-up (natsd.jetstream.stream.turnflush; bound
    # as methods for the same reason as ingest's, see above)
    _flush = turnflush._flush
    _written = turnflush._written
    _unwait = turnflush._unwait
    _finish_write = turnflush._finish_write
    _persist = turnflush._persist
    _write_failed = turnflush._write_failed
    _notify_new = turnflush._notify_new

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
        self.expiry.hold()

    def end_snapshot(self) -> None:
        """A snapshot ended (or failed): expiry resumes once no snapshot runs."""
        self.snapshots_running = max(self.snapshots_running - 1, 0)
        if not self.snapshots_running:
            self._arm_expiry()

    def expire_store(self, collect: bool) -> list[tuple[int, str]] | None:
        """Expire the store now (:class:`Expiry`'s timer); with ``collect``, the (seq, subject)
        of what it removed, gathered by :meth:`_on_storage_update` while it runs."""
        self._removed = [] if collect else None
        try:
            self.store.expire(self.clock.time_ns())
        finally:
            removed, self._removed = self._removed, None
        return removed

    # ---------------------------------------------------------------------------------------
    # consumers (contract with natsd.jetstream.consumer): the accessors (consumer(),
    # all_consumers(), num_consumers()...) are StreamConsumers' (stream/consumers.py); here the
    # retention side, on the messages' paths

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

    def _check_interest_after_removal(self, gone: ConsumerView | None) -> None:
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

    def _drop_acked_on_interest_switch(self) -> None:
        st = self.store.state()
        seq, removed = st.first_seq, False
        consumers = list(self.consumers.values())
        while st.msgs:
            try:
                sm = self.store.load_next_msg(">", seq)
            except (StoreEOF, MsgNotFound):
                break
            seq = sm.seq + 1
            matching = [c for c in consumers if c.filter_matches(sm.subject)]
            if matching and all(c.is_acked(sm.seq) for c in matching):
                self.store.remove_msg(sm.seq)
                removed = True
        if removed:
            self.store.flush()

    def _interest_done(self, sseq: int, subject: str) -> bool:
        for c in self.consumers.values():
            if c.filter_matches(subject) and not c.is_acked(sseq):
                return False
        return True

    def ack_processed(self, consumer: ConsumerView, sseq: int) -> None:
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

    # ---------------------------------------------------------------------------------------
    # admin operations (API)

    def purge(self, subject: str = "", seq: int = 0, keep: int = 0) -> int:
        """STREAM.PURGE: returns the number of messages removed."""
        if self.config.sealed:
            raise ApiErrors.STREAM_SEALED()
        if self.config.deny_purge:
            raise ApiErrors.STREAM_PURGE_FAILED(err="stream purge not permitted")
        # A purge moves the consumers it concerns (_after_purge): every one recovered first;
        # asleep, the stream wakes here (its store's purge would wake it too late for that).
        self.all_consumers()
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
            raise ApiErrors.INVALID_JSON(
                err="json: cannot unmarshal into Go struct field JSApiMsgGetRequest.seq of type uint64"
            )
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

    def state_json(
        self, subjects_filter: str = "", deleted_details: bool = False, offset: int = 0
    ) -> tuple[dict, int, int, int]:
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
                keys = sorted(totals)[offset : offset + limit]
                subjects = {k: totals[k] for k in keys}
            else:
                subjects = totals
        out = state_to_json(st, self.num_consumers(), subjects, deleted_details)
        if self._pristine and st.last_seq == 0:
            # A stream that never held a message: the reference's store starts at sequence 0 and
            # (file store) counts that 0 as deleted when details are asked for.
            out["first_seq"] = 0
            if deleted_details and self.config.storage == "file":
                out["num_deleted"] = 1
                out["deleted"] = [0]
        return out, total, offset, limit

    def info(
        self, subjects_filter: str = "", deleted_details: bool = False, offset: int = 0, dynamic_metadata: bool = True
    ) -> tuple[dict, int, int, int]:
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
