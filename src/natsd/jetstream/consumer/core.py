"""JetStream consumers: one :class:`Consumer` composed of parts along their seams.

A consumer reads its stream's store and delivers messages to a deliver subject (push) or to
the inboxes of waiting pull requests (pull), through the account's
:class:`~natsd.jetstream.ports.Ports`. It never sleeps and never polls: everything that waits
(ack wait and backoff, idle heartbeats, pull expiry, replay pacing, rate limit, pause,
inactivity) is a timer on the injected :class:`~natsd.clock.Clock`, and delivery runs in
batches once per loop turn (``Clock.call_soon``), woken by the stream (new messages), acks,
pull requests, flow-control replies and interest changes.

The parts (each its own module; the class here holds config, lifecycle, info, num pending and
the stream's hooks, and composes the rest):

=================== ==========================================================================
``tracking.py``     :class:`Tracking`, pure: cursor, pending acks, redelivery queue and counts,
                    ack floors (nats-server's names: ``sseq``, ``dseq``, ``adflr``/``asflr``,
                    ``pending``, ``rdc``, ``rdq``)
``acks.py``         the ack subject, the account's ack hub, ``+ACK``/``-NAK``/``+WPI``/
                    ``+NXT``/``+TERM``, the ack (redelivery) timer
``delivery.py``     the delivery pass and its pull fast path, pacing, pause
``pull.py``         pull requests and the waiting queue's serving, expiry and heartbeats
``priority.py``     priority groups: request checks, overflow/pinned/prioritized serving, the pin
``push.py``         interest, flow control, idle heartbeats
``durable.py``      when the state goes to the ConsumerStore (whole or as a delta)
``status.py``       the status messages' wire bytes
``helpers.py``      local copies of shared helpers (names, nuid, Go durations, headers)
=================== ==========================================================================

Deliveries keep the stored subject and headers and carry the v1 ack subject
``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>`` as reply.

Priority groups of pull consumers (``priority_groups``/``priority_policy``/``priority_timeout``,
the pull requests' ``group``, ``min_pending``, ``min_ack_pending``, ``id``, ``priority``, the pin)
are ``priority.py``, applied by ``pull.py``.

Not implemented (accepted and echoed in the config, no effect on delivery): ``direct``/``sourcing``
consumers, the v2 ack subject (accepted on ``$JS.ACK``, never sent).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from natsd.gotime import GO_ZERO_TIME, format_rfc3339
from natsd.jetstream import gojson
from natsd.jetstream.consumer import status as D
from natsd.jetstream.consumer.acks import UNACKED_LIMITS_REASON, Acks, ack_templates, hub
from natsd.jetstream.consumer.delivery import Delivery
from natsd.jetstream.consumer.durable import StateWriter
from natsd.jetstream.consumer.helpers import nuid
from natsd.jetstream.consumer.pull import MSG_NEXT_PREFIX, Pull
from natsd.jetstream.consumer.push import Push
from natsd.jetstream.consumer.tracking import Tracking
from natsd.jetstream.config.consumer_config import DELETE_WAIT_DEFAULT, MS, ConsumerConfig
from natsd.jetstream.errors import ApiError, ApiErrors
from natsd.jetstream.features.metadata import DEAD_LETTER, partition_spec
from natsd.jetstream.config.requests import CONSUMER_RESET_REQUEST
from natsd.gohash import get_hash
from natsd.jetstream.identity import identity_header, requested_identity, stream_identity
from natsd.jetstream.wire import dumps, error_envelope, required_level_too_high, resp
from natsd.store.base import ConsumerState, MsgNotFound, StoreEOF, StoreError
from natsd.subjects.tokens import subject_matches

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Timer
    from natsd.jetstream.consumer.deadletter import DeadLetters
    from natsd.jetstream.consumer.partition import Partitions
    from natsd.jetstream.ports import Subscription
    from natsd.jetstream.views import AccountView, StreamView
    from natsd.store.base import ConsumerStore

__all__ = ["Consumer"]

ADVISORY_PREFIX = "$JS.EVENT.ADVISORY.CONSUMER."
METRIC_ACK_PREFIX = "$JS.EVENT.METRIC.CONSUMER.ACK."
ADV_TYPE = "io.nats.jetstream.advisory.v1."


# The dead-letter and partition layers (with the key parser) and ``random`` load with the first
# consumer that uses them: a plain durable's first create does not import them (issue 31).


def _attach_dead_letters(o: Consumer, cur: DeadLetters | None) -> DeadLetters | None:
    """natsd.jetstream.consumer.deadletter.attach, loaded when the config names the key or one is
    attached (without the key, attach gives None)."""
    if cur is None and not (o.cfg.metadata and DEAD_LETTER in o.cfg.metadata):
        return None
    from natsd.jetstream.consumer.deadletter import attach

    return attach(o, cur)


def _attach_partitions(o: Consumer, spec: Any) -> Partitions | None:
    if spec is None:
        return None
    from natsd.jetstream.consumer.partition import attach

    return attach(o, spec)


def _randrange(n: int) -> int:
    from random import randrange

    return randrange(n)


class Consumer:
    """One consumer of a stream (push or pull). Created by the API handlers or by recovery.

    ``t`` (:class:`Tracking`), ``acks`` (:class:`Acks`), ``delivery`` (:class:`Delivery`),
    ``writer`` (:class:`StateWriter`) and one of ``push`` (:class:`Push`) / ``pull``
    (:class:`Pull`) are its parts; ``npc`` (num pending: messages not yet delivered) is kept
    here, where the store is asked about it for the consumer's filters."""

    def __init__(
        self,
        stream: "StreamView",
        cfg: ConsumerConfig,
        name: str,
        created_ns: int,
        store: "ConsumerStore | None" = None,
        state: ConsumerState | None = None,
    ) -> None:
        self.stream = stream
        self.account: "AccountView" = stream.account
        self.ports = self.account.ports
        self.clock = self.account.clock
        self.name = name
        self.stream_name = stream.name
        self.cfg = cfg
        self.config = cfg  # alias used by other modules
        self.created_ns = created_ns
        self.store: ConsumerStore | None = store  # None: ephemeral / memory only
        self.closed = False

        self.t = Tracking(cfg.ack_policy == "explicit", cfg.max_deliver, cfg.max_ack_pending)
        self.npc = 0
        self._npc_last = 0  # last stream seq already counted in npc
        self._npc_upto = 0  # last stream seq the stream told us about
        self._npc_dirty = False  # a removal ahead of sseq: recount before use
        self.ldt = 0  # last delivery wall ns
        self.lat = 0  # last ack wall ns
        self.ack_fmt, self.ack_fmt1 = ack_templates(self.stream_name, name, self.v2_token())
        self._set_filters()

        self.writer = StateWriter(self)
        self.acks = Acks(self, self.t, self.writer)
        #: ``process_ack(sseq, dseq, delivered, reply, body)``: apply one ack message
        #: (:meth:`Acks.process`), bound directly: no extra call per ack.
        self.process_ack = self.acks.process
        self.delivery = Delivery(self)
        self.kick = self.delivery.kick  # the most called method of all: no extra call
        self.push: Push | None = Push(self) if cfg.deliver_subject else None
        self.pull: Pull | None = None if cfg.deliver_subject else Pull(self, cfg.max_waiting)

        self._dtmr: Timer | None = None  # inactivity (delete) timer
        self.dthresh = 0
        self._subs: list[Subscription] = []
        # bound once: Delivery calls them per message (Ports declares both)
        self.deliver_one = self.ports.deliver
        self.deliver_many = self.ports.deliver_many

        if state is not None:
            self.t.load(state)
        self._update_inactive_threshold()
        # natsd feature (issue 27): the natsd.dead_letter subject, None without it.
        self.dead_letters: DeadLetters | None = _attach_dead_letters(self, None)
        # natsd feature: natsd.partition_key (per-key ordered pull consumer), None without it.
        self.partitions: Partitions | None = _attach_partitions(self, partition_spec(cfg.metadata, cfg.filters()))

    # ------------------------------------------------------------------------------------------
    # Setup.

    def _set_filters(self) -> None:
        fl = self.cfg.filters()
        self.filters = fl
        self.single_filter = fl[0] if len(fl) == 1 else ""

    def _update_inactive_threshold(self) -> None:
        """Ephemerals always expire (5s default, stamped in the config without jitter); durables
        only with an explicit threshold. Jitter of 0.1-1s as the reference."""
        cfg = self.cfg
        if not cfg.durable_name and cfg.inactive_threshold <= 0:
            cfg.inactive_threshold = DELETE_WAIT_DEFAULT
            self.dthresh = DELETE_WAIT_DEFAULT + 100 * MS + _randrange(900) * MS
        elif cfg.inactive_threshold > 0:
            self.dthresh = cfg.inactive_threshold
            if not cfg.deliver_subject:
                self.dthresh += 100 * MS + _randrange(900) * MS
        else:
            self.dthresh = 0

    def select_start(self) -> None:
        """Pick the first stream sequence for a new consumer (``selectStartingSeqNo``)."""
        st = self.stream.store.state()
        cfg = self.cfg
        t = self.t
        first, last = st.first_seq, st.last_seq
        sseq = 0
        if cfg.opt_start_seq == 0:
            dp = cfg.deliver_policy
            if dp == "all":
                sseq = first
            elif dp == "last":
                if not self.filters:
                    sseq = last
                else:
                    for f in self.filters:
                        ss = self.stream.store.filtered_state(1, f)
                        if ss.last > sseq:
                            sseq = ss.last
            elif dp == "last_per_subject":
                mmp = self.stream.config.max_msgs_per_subject
                if mmp == 1:
                    sseq = first
                else:
                    fl = self.filters or [">"]
                    seqs = list(self.stream.store.multi_last_seqs(fl, 0))
                    t.lss_resume = last
                    if seqs:
                        sseq = seqs[0]
                        t.lss = seqs
                    else:
                        sseq = last
            elif dp == "by_start_time":
                sseq = self.stream.store.get_seq_from_time(cfg.opt_start_time or 0)
            else:  # new
                sseq = last + 1
        else:
            sseq = cfg.opt_start_seq
        if first == 0 and cfg.opt_start_seq == 0:
            sseq = 1
        elif sseq > last and cfg.opt_start_seq == 0:
            sseq = last + 1
        elif sseq < first:
            sseq = first
        if sseq <= 0:
            sseq = 1
        t.start_at(sseq)
        self.recalc_pending()
        if sseq > 1:
            # (A start at 1 is the zero state, which is what a durable without a state file
            # recovers as, and recovers as fresh either way: no file to create for it, which
            # was a tenth of a durable's creation time.)
            self.writer.mark_dirty()

    def restart_after_damage(self) -> None:
        """Recovery found the durable state damaged (the store logged what): start again from
        the config's start, but never after the first message stored since the consumer was
        created, so everything it may not have acknowledged is delivered again (redelivery
        rather than loss; "new", "last" and "last per subject" would otherwise skip them)."""
        self.select_start()
        cfg = self.cfg
        t = self.t
        if cfg.opt_start_seq == 0 and cfg.deliver_policy in ("new", "last", "last_per_subject"):
            since = self.stream.store.get_seq_from_time(self.created_ns)
            if since < t.sseq:
                t.lss = None
                t.sseq = since
                t.asflr = t.dlv_sseq = since - 1
                self.recalc_pending()

    def v2_token(self) -> str:
        """``"<domain or _>.<account hash>."`` when v2 ack / flow-control subjects are on
        (feature flag ``js_ack_fc_v2``, as nats-server builds them), else ``""``."""
        eng = self.stream.account.engine
        if eng is None or not eng.ack_v2:  # (None: the unit tests' account without an engine)
            return ""
        return f"{eng.domain or '_'}.{get_hash(self.stream.account.name)}."

    def clamp_to_stream(self, first: int | None = None) -> None:
        """After recovery: messages below the stream's first sequence are gone (purged or
        expired while we were down), so start no lower than it. ``first``: the first sequence
        to take instead of the stream's now (a consumer recovered after its stream woke takes
        the one of the wake, as if recovered then: natsd.jetstream.dormant.LazyConsumers)."""
        self.t.clamp(self.stream.store.state().first_seq if first is None else first)

    def start(self) -> None:
        """Subscribe, compute num pending, arm timers and start delivering."""
        st = self.stream.store.state()
        if self.delivery.replay:
            self.delivery.replay_lseq = st.last_seq
        self.recalc_pending()
        self._subs.append(
            self.ports.subscribe(MSG_NEXT_PREFIX + self.stream_name + "." + self.name, self._on_next_request)
        )
        # RESET answers from the consumer itself: a missing consumer gives no responders.
        self._subs.append(
            self.ports.subscribe("$JS.API.CONSUMER.RESET." + self.stream_name + "." + self.name, self._on_reset_request)
        )
        hub(self.account)
        if self.push is not None:
            self.stream.wake_on_new(self)
            self.push.start()
        elif self.dthresh > 0:
            self.pull.wq.last = self.clock.monotonic_ns()  # type: ignore[union-attr]
            self._arm_delete_timer(self.dthresh)
        t = self.t
        if t.pending:
            t.forget_redelivered_below(st.first_seq)
            self.acks.arm(self.acks.wait_for(0))
        self.delivery.update_pause_timer()
        self.kick()

    # ------------------------------------------------------------------------------------------
    # Info.

    @property
    def is_push(self) -> bool:
        return bool(self.cfg.deliver_subject)

    def filter_matches(self, subject: str) -> bool:
        """True when ``subject`` passes this consumer's filter(s)."""
        fl = self.filters
        if not fl:
            return True
        for f in fl:
            if f == subject or subject_matches(f, subject):
                return True
        return False

    def needs_ack(self, sseq: int) -> bool:
        """True while this consumer still needs stream message ``sseq`` (``needAck``)."""
        return self.t.needs_ack(sseq)

    def is_acked(self, sseq: int) -> bool:
        """The stream's retention check: this consumer no longer needs ``sseq``."""
        return not self.t.needs_ack(sseq)

    def num_pending(self) -> int:
        """Messages not yet delivered (``num_pending``). Brought up to date here: new messages
        are only noted as they arrive (see on_new_messages)."""
        self.settle_npc()
        return self.npc if self.npc > 0 else 0

    def info(self) -> dict:
        """ConsumerInfo JSON (without ``type``), with dynamic metadata, as the reference."""
        return self._info(dynamic=True)

    def _info(self, dynamic: bool) -> dict:
        self._check_num_pending()
        t = self.t
        now = self.clock.time_ns()
        delivered: dict[str, Any] = {"consumer_seq": t.dseq - 1, "stream_seq": t.dlv_sseq}
        if self.ldt:
            delivered["last_active"] = format_rfc3339(self.ldt)
        fd, fs = t.reported_floor()
        ack_floor: dict[str, Any] = {"consumer_seq": fd, "stream_seq": fs}
        if self.lat:
            ack_floor["last_active"] = format_rfc3339(self.lat)
        if self.pull is not None:
            self.pull.sweep(False)
        out: dict[str, Any] = {
            "stream_name": self.stream_name,
            "name": self.name,
            "created": format_rfc3339(self.created_ns),
            "config": self.cfg.to_json(dynamic_metadata=dynamic),
            "delivered": delivered,
            "ack_floor": ack_floor,
            "num_ack_pending": len(t.pending),
            "num_redelivered": 0 if self.cfg.max_deliver == 1 else len(t.rdc),
            "num_waiting": len(self.pull.wq) if self.pull is not None else 0,
            "num_pending": self.num_pending(),
        }
        if self.push is not None and self.push.active:
            out["push_bound"] = True
        pu = self.cfg.pause_until
        if pu is not None and now < pu:
            out["paused"] = True
            out["pause_remaining"] = pu - now
        out["ts"] = format_rfc3339(now)
        if self.pull is not None:
            pgs = self.pull.priority_info()
            if pgs:
                out["priority_groups"] = pgs
        return out

    def list_info(self) -> dict:
        """ConsumerInfo as CONSUMER.LIST shows it (no dynamic metadata)."""
        return self._info(dynamic=False)

    def jsz_info(self) -> dict:
        """Consumer entry for ``/jsz?consumers=true`` (ConsumerInfo without ``ts`` noise)."""
        return self._info(dynamic=False)

    def meta(self) -> dict:
        """What the consumer store persists next to the state (like the reference's meta.inf)."""
        return {
            "stream_name": self.stream_name,
            "name": self.name,
            "created": format_rfc3339(self.created_ns),
            "config": self.cfg.to_json(),
        }

    # ------------------------------------------------------------------------------------------
    # Num pending.

    def recalc_pending(self) -> None:
        store = self.stream.store
        t = self.t
        self._npc_dirty = False
        first = 0
        try:
            st = store.state()
            self._npc_last, first = st.last_seq, st.first_seq
        except StoreError:
            self._npc_last = 0
        if self._npc_upto < self._npc_last:
            self._npc_upto = self._npc_last
        if t.lss is not None:
            # Start-list entries the limits removed since are no longer pending.
            n = len(t.lss) if not t.lss or t.lss[0] >= first else sum(1 for q in t.lss if q >= first)
            try:
                n += sum(store.num_pending(t.lss_resume + 1, f, False) for f in (self.filters or [""]))
            except StoreError:
                pass
            self.npc = n
            return
        # A full recount of a last-per-subject consumer counts the last message of each subject
        # only, as the reference does whenever it recounts (creation, update, purge); messages
        # that arrive later are counted one by one (settle_npc), as there too.
        lps = self.cfg.deliver_policy == "last_per_subject"
        try:
            if not self.filters:
                self.npc = store.num_pending(t.sseq, "", lps)
            else:
                self.npc = sum(store.num_pending(t.sseq, f, lps) for f in self.filters)
        except StoreError:
            self.npc = 0

    def _check_num_pending(self) -> None:
        self.settle_npc()
        st = self.stream.store.state()
        t = self.t
        if t.sseq > st.last_seq and t.lss is None:
            self.npc = 0
        elif self.npc > 0:
            self.npc = min(self.npc, st.msgs, st.last_seq - t.sseq + 1) if t.lss is None else self.npc

    def settle_npc(self) -> None:
        """Count the messages that arrived since num_pending was last brought up to date."""
        if self._npc_dirty:
            self.recalc_pending()
            return
        upto, prev = self._npc_upto, self._npc_last
        if self.stream.notified_seq > upto:  # (idle consumers are not told per turn)
            upto = self._npc_upto = self.stream.notified_seq
        if upto <= prev:
            return
        self._npc_last = upto
        t = self.t
        start = max(prev + 1, t.sseq if t.lss is None else t.lss_resume + 1)
        if start > upto:
            return
        store = self.stream.store
        try:
            if not self.filters:
                self.npc += store.num_pending(start, "", False)
            else:
                self.npc += sum(store.num_pending(start, f, False) for f in self.filters)
        except StoreError:
            self._npc_dirty = True

    # ------------------------------------------------------------------------------------------
    # Stream hooks.

    def on_new_messages(self, last_seq: int) -> None:
        """The stream stored messages up to ``last_seq`` (called once per loop turn). Only
        noted here: num_pending is brought up to date lazily, when this consumer delivers or
        reports, so idle consumers cost nothing per publish."""
        if self.closed:
            return
        if last_seq > self._npc_upto:
            self._npc_upto = last_seq
        # A stream can switch between limits and interest retention: acks follow.
        self.acks.retention = self.stream.config.retention != "limits"
        self.kick()

    def wants_new(self) -> bool:
        """Whether new messages can be delivered now: push, or pull with requests waiting."""
        return self.pull is None or bool(self.pull.wq)

    def on_purge(self, first_seq: int) -> None:
        """Everything below ``first_seq`` is gone (purge/compact)."""
        if self.closed:
            return
        store = self.stream.store

        def exists(seq: int) -> bool:
            try:
                store.load_msg(seq)
            except (MsgNotFound, StoreEOF):
                return False
            return True

        if self.t.purge(first_seq, exists):
            # A purged pending message counts as acked, ack time included (as the reference).
            self.lat = self.clock.time_ns()
        self.recalc_pending()
        self.writer.mark_dirty()
        self.kick()

    def on_msg_removed(self, seq: int, subject: str | None = None, purged: bool = False) -> None:
        """One message was deleted, expired or dropped by a limit; a pending one is terminated
        (as the reference, whatever the retention). ``purged``: a purge removed it and has
        already recounted num_pending (only a pending copy is left to terminate)."""
        if self.closed:
            return
        t = self.t
        if purged:
            pass
        elif seq >= t.sseq:
            if subject is None:
                self._npc_dirty = True
            elif seq <= self._npc_last and t.lss is None and self.filter_matches(subject):
                self.npc -= 1  # it was counted in num_pending and will never be delivered
            return
        p = t.pending.get(seq)
        if p is not None and not self.acks.ack_none:
            dc = t.rdc.get(seq, 0) + 1
            self.acks.term(seq, p[0], dc, UNACKED_LIMITS_REASON)

    # ------------------------------------------------------------------------------------------
    # What clients send: pull requests, flow-control replies (acks: ``process_ack``, see
    # __init__), handed to the parts.

    def process_next_request(self, reply: str, body: bytes) -> None:
        """Handle a MSG.NEXT request (or the tail of ``+NXT``) whose inbox is ``reply``."""
        if self.closed or not reply:
            return
        if self.pull is None:
            self.ports.publish(reply, "", D.PUSH_BASED, b"")
            return
        self.pull.request(reply, body)

    def _on_next_request(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        if hdr and reply and required_level_too_high(hdr):
            self.ports.publish(reply, "", D.status(412, "Required Api Level"), b"")
            return
        self.process_next_request(reply, payload)

    def process_flow_control(self, subject: str, hdr: bytes | None = None) -> None:
        """A reply to a flow-control request (see :meth:`Push.process_flow_control`)."""
        if self.push is not None:
            self.push.process_flow_control(subject, hdr)

    def update_interest(self) -> None:
        """Re-check interest on the deliver subject (called by the account's interest hook)."""
        if self.push is not None:
            self.push.update_interest()

    # ------------------------------------------------------------------------------------------
    # Durable state (written by the StateWriter).

    def state(self) -> ConsumerState:
        """The durable state (store.base.ConsumerState)."""
        return self.t.state()

    # ------------------------------------------------------------------------------------------
    # Events.

    def _sample_ack(self, sseq: int, dseq: int, dc: int, ts: int) -> None:
        sfreq = self.acks.sfreq
        if sfreq < 100 and _randrange(100) > sfreq:
            return
        now = self.clock.time_ns()
        obj = {
            "type": "io.nats.jetstream.metric.v1.consumer_ack",
            "id": nuid(),
            "timestamp": format_rfc3339(now),
            "stream": self.stream_name,
            "consumer": self.name,
            "consumer_seq": dseq,
            "stream_seq": sseq,
            "ack_time": now - ts,
            "deliveries": dc,
        }
        self._send_event(METRIC_ACK_PREFIX + self.stream_name + "." + self.name, obj)

    def notify_max_deliveries(self, sseq: int, dc: int) -> None:
        if self.dead_letters is not None:  # natsd feature: the copy to the dead-letter subject
            self.dead_letters.on_max_deliveries(sseq, dc, self.t.dropped_ts)
        self._advisory(
            "MAX_DELIVERIES",
            "max_deliver",
            {"stream": self.stream_name, "consumer": self.name, "stream_seq": sseq, "deliveries": dc},
        )

    def _advisory(self, kind: str, type_suffix: str, body: dict) -> None:
        obj = {"type": ADV_TYPE + type_suffix, "id": nuid(), "timestamp": format_rfc3339(self.clock.time_ns())}
        obj.update(body)
        self._send_event(ADVISORY_PREFIX + kind + "." + self.stream_name + "." + self.name, obj)

    def _send_event(self, subject: str, obj: dict) -> None:
        # Advisories are only built when someone listens (no JSON on the hot path otherwise).
        if not self.ports.has_interest(subject):
            return
        self.account.send_advisory(subject, obj)

    # ------------------------------------------------------------------------------------------
    # Inactivity.

    def _arm_delete_timer(self, delay: int) -> None:
        if self._dtmr is not None:
            self._dtmr.cancel()
        self._dtmr = self.clock.call_later(delay, self._delete_not_active)

    def _cancel_delete_timer(self) -> None:
        if self._dtmr is not None:
            self._dtmr.cancel()
            self._dtmr = None

    def _delete_not_active(self) -> None:
        self._dtmr = None
        if self.closed:
            return
        if self.push is not None:
            if self.push.active:
                return
        else:
            pull = self.pull
            now = self.clock.monotonic_ns()
            elapsed = now - pull.wq.last  # type: ignore[union-attr]
            if elapsed < self.dthresh:
                self._arm_delete_timer(self.dthresh - elapsed)
                return
            pull.sweep(True)  # type: ignore[union-attr]
            if pull.wq:  # type: ignore[union-attr]
                self._arm_delete_timer(self.dthresh)
                return
        self.delete_from_stream()

    def delete_from_stream(self) -> None:
        """Delete this consumer (inactivity or API): stream bookkeeping, advisory, store."""
        if self.closed:
            return
        try:
            self.stream.remove_consumer(self.name)
        except Exception:  # already gone from the stream is fine
            pass
        self.delete()

    # ------------------------------------------------------------------------------------------
    # Config update, pause, reset.

    def update_config(self, ncfg: ConsumerConfig) -> None:
        """Apply an allowed update (already checked by :func:`check_update`)."""
        old = self.cfg
        ncfg.pause_until = ncfg.pause_until if ncfg.pause_until is not None else old.pause_until
        self.cfg = self.config = ncfg
        if ncfg.deliver_subject != old.deliver_subject and self.push is not None:
            self.push.deliver_subject_changed(old.deliver_subject)
        self.t.configure(ncfg.ack_policy == "explicit", ncfg.max_deliver, ncfg.max_ack_pending)
        self.acks.configure()
        if ncfg.filters() != old.filters():
            self._set_filters()
            self.recalc_pending()
        self._update_inactive_threshold()
        self.dead_letters = _attach_dead_letters(self, self.dead_letters)  # (natsd.dead_letter)
        spec = partition_spec(ncfg.metadata, ncfg.filters())  # (natsd.partition_key)
        if (spec is None) != (self.partitions is None) or (
            spec and self.partitions and spec.text != self.partitions.spec.text
        ):
            self.partitions = _attach_partitions(self, spec)
        if self.pull is not None:
            self.pull.wq.max = ncfg.max_waiting
        if self.store is not None:
            try:
                self.store.update_config(self.meta())
            except StoreError:
                pass
        self.kick()

    def set_pause(self, until_ns: int | None) -> None:
        self.cfg.pause_until = until_ns
        self.cfg.set_default_metadata()
        if self.store is not None:
            try:
                self.store.update_config(self.meta())
            except StoreError:
                pass
        self._advisory(
            "PAUSE",
            "consumer_pause",
            {
                "stream": self.stream_name,
                "consumer": self.name,
                "paused": until_ns is not None and self.clock.time_ns() < until_ns,
                # time.Time ignores omitempty in Go: the zero time is written out
                "pause_until": format_rfc3339(until_ns) if until_ns is not None else GO_ZERO_TIME,
            },
        )
        self.delivery.cancel_kick_timer()
        self.delivery.update_pause_timer()
        self.kick()

    def reset(self, seq: int) -> int:
        """CONSUMER.RESET (ADR-60): restart delivery at ``seq`` (0 = ack floor + 1). Drops
        pending and redelivery state; consumer sequences restart at 1. Raises
        CONSUMER_INVALID_RESET (10204) as the reference."""
        cfg = self.cfg
        if seq == 0:
            seq = self.t.asflr + 1
        elif cfg.deliver_policy == "all":
            pass
        elif cfg.deliver_policy == "by_start_sequence":
            if seq < cfg.opt_start_seq:
                raise ApiErrors.CONSUMER_INVALID_RESET(err="below start seq")
        elif cfg.deliver_policy == "by_start_time":
            if seq < self.stream.store.get_seq_from_time(cfg.opt_start_time or 0):
                raise ApiErrors.CONSUMER_INVALID_RESET(err="below start time")
        else:
            raise ApiErrors.CONSUMER_INVALID_RESET(err="not allowed")
        if seq <= 0:
            seq = 1
        self.t.reset(seq)
        self.ldt = self.lat = 0
        self.acks.cancel()
        self.recalc_pending()
        self.writer.mark_dirty()
        self.kick()
        return seq

    def _on_reset_request(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        if not reply or self.closed:
            return
        try:
            if hdr and required_level_too_high(hdr):
                raise ApiErrors.REQUIRED_API_LEVEL()
            seq = 0
            if payload:  # read with a plain json.Unmarshal, as nats-server (unknown fields ignored)
                try:
                    seq = gojson.decode(payload, CONSUMER_RESET_REQUEST, strict=False).get("seq", 0)
                except gojson.GoError as e:
                    raise ApiErrors.INVALID_JSON(err=str(e)) from None
            rs = self.reset(seq)
            body = resp("consumer_reset_response", self.info())
            body["reset_seq"] = rs
        except ApiError as err:
            body = error_envelope("consumer_reset_response", err)
            rhdr = None
        else:
            # A sourcing stream's reset asks for the stream's identity (level 5): never refused.
            rhdr = identity_header(stream_identity(self.stream)) if requested_identity(hdr) is not None else None
        self.ports.publish(reply, "", rhdr, dumps(body))

    # ------------------------------------------------------------------------------------------
    # Lifecycle.

    def _stop_common(self) -> None:
        self.closed = True
        self.acks.cancel()
        if self.dead_letters is not None:
            self.dead_letters.stop()
        self._cancel_delete_timer()
        self.delivery.cancel_kick_timer()
        if self.push is not None:
            self.push.stop()
        if self.pull is not None:
            self.pull.stop()
        self.writer.cancel()
        for sub in self._subs:
            try:
                sub.unsubscribe()
            except Exception:
                pass
        self._subs.clear()

    def stop(self) -> None:
        """Server/stream shutdown: flush state, keep it on disk."""
        if self.closed:
            return
        if self.store is not None and self.writer.dirty:
            self.writer.flush()
        self._stop_common()
        if self.store is not None:
            try:
                self.store.stop()
            except StoreError:
                pass

    def delete(self, advisory: bool = True) -> None:
        """Delete: answer waiting pulls with 409 Consumer Deleted, drop the store, advise."""
        if self.closed:
            return
        if self.pull is not None:
            self.pull.answer_deleted()
        self._stop_common()
        if self.store is not None:
            try:
                self.store.delete()
            except StoreError:
                pass
        if advisory:
            self._advisory(
                "DELETED", "consumer_action", {"stream": self.stream_name, "consumer": self.name, "action": "delete"}
            )
