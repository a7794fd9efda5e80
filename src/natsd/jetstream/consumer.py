"""JetStream consumers: push and pull delivery, acknowledgements, redelivery, durability.

A :class:`Consumer` reads its stream's store and delivers messages to a deliver subject (push)
or to the inboxes of waiting pull requests (pull), through the account's
:class:`~natsd.jetstream.ports.Ports`. It never sleeps and never polls: everything that waits
(ack wait and backoff, idle heartbeats, pull expiry, replay pacing, rate limit, pause,
inactivity) is one timer on the injected :class:`~natsd.clock.Clock`, and delivery runs in
batches once per loop turn (``Clock.call_soon``), woken by the stream (new messages), acks,
pull requests, flow-control replies and interest changes.

State follows nats-server's ``consumer.go`` and keeps its names: ``sseq`` (next stream sequence
to look at), ``dseq`` (next consumer sequence), ``adflr``/``asflr`` (ack floor), ``pending``
(stream seq -> [consumer seq, delivery time]), ``rdc`` (stream seq -> redelivery count), ``rdq``
(redelivery queue, sent before new messages), ``npc`` (num pending).

Deliveries keep the stored subject and headers and carry the v1 ack subject
``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>`` as reply.

The account-wide plumbing (one ``$JS.ACK.>`` and one ``$JS.FC.>`` subscription, interest
tracking, API handlers) is :func:`setup_account`; :func:`recover_consumers` re-creates durable
consumers from the stream's store after a restart.

Durable state: durable, file-backed consumers hand their ConsumerState to the ConsumerStore once
per loop turn with activity, and the store writes it to the OS at most every 100ms (the
reference's cadence); ephemeral and ``mem_storage`` consumers keep it in memory only.

Not implemented (accepted and echoed in the config, no effect on delivery): priority groups
(``priority_groups``/``priority_policy``/``priority_timeout``; pull requests' ``group``,
``min_pending``, ``min_ack_pending``, ``priority`` are ignored), ``direct``/``sourcing``
consumers, the v2 ack subject (accepted on ``$JS.ACK``, never sent).
"""

from __future__ import annotations

import random
from itertools import repeat
from typing import TYPE_CHECKING, Any

from natsd.jetstream import delivery as D
from natsd.jetstream.api.errors import ApiError, ApiErrors
from natsd.jetstream.consumer_config import (
    DELETE_WAIT_DEFAULT, MS, ConsumerConfig, format_time, go_duration,
)
from natsd.jetstream.pull import BadRequest, PullRequest, WaitQueue, parse_next_request
from natsd.store.base import (
    ConsumerDelta, ConsumerState, MsgNotFound, Pending, SequencePair, StoreClosed, StoreEOF, StoreError,
)
from natsd.subjects.tokens import subject_matches, subset

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.manager import JsAccount

__all__ = [
    "Consumer", "setup_account", "recover_consumers", "create_consumer_name", "ConsumerHub",
    "ACK_PREFIX", "FC_PREFIX",
]

ACK_PREFIX = "$JS.ACK."
FC_PREFIX = "$JS.FC."
MSG_NEXT_PREFIX = "$JS.API.CONSUMER.MSG.NEXT."

ADVISORY_PREFIX = "$JS.EVENT.ADVISORY.CONSUMER."
METRIC_ACK_PREFIX = "$JS.EVENT.METRIC.CONSUMER.ACK."
ADV_TYPE = "io.nats.jetstream.advisory.v1."

#: Flow control: window cap and starting window (window doubles on each reply).
FC_MAX_PENDING = 32 * 1024 * 1024
#: Small delay added to the ack timer so bursts expire together (nats-server ackWaitDelay).
ACK_WAIT_DELAY = 1 * MS
#: Deliveries per loop turn before yielding to the loop (keeps other clients responsive: a
#: pass of 512 is a few ms; 2048 held request/reply p99 at ~180 ms while delivering 1M).
TURN_BUDGET = 512
#: Minimum gap between two writes of a durable consumer's state file (nats-server: 100ms).
STATE_WRITE_GAP = 100 * MS
#: Reason given in MSG_TERMINATED when a pending message vanished from the stream.
UNACKED_LIMITS_REASON = "Unacknowledged message was deleted"

_NAME_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def create_consumer_name() -> str:
    """An 8-character random name for legacy ephemerals (as the reference's)."""
    return "".join(random.choice(_NAME_ALPHABET) for _ in range(8))


def _rand4() -> str:
    return "".join(random.choice(_NAME_ALPHABET) for _ in range(4))


def _nuid() -> str:
    return "".join(random.choice(_NAME_ALPHABET) for _ in range(22))


class _Tracked(dict):
    """The consumer's ``pending`` / ``rdc`` maps: a dict that notes the keys it changes, so a
    large durable state is written as the delta of those keys (``ConsumerStore.append_delta``)
    instead of whole. ``clear()`` asks for a whole write.

    A pending entry is a plain ``(dseq, ts_ns)`` tuple, replaced (never changed in place) when
    its timestamp moves: tuples of ints leave the cyclic GC's tracking, lists do not, and a
    million tracked entries made every full collection pause the loop for hundreds of ms."""

    __slots__ = ("touched", "reset")

    def __init__(self, *args: Any) -> None:
        dict.__init__(self, *args)
        self.touched: set[int] = set()
        self.reset = False

    def __setitem__(self, k: int, v: Any) -> None:
        self.touched.add(k)
        dict.__setitem__(self, k, v)

    def __delitem__(self, k: int) -> None:
        self.touched.add(k)
        dict.__delitem__(self, k)

    def pop(self, k: int, *default: Any) -> Any:
        self.touched.add(k)
        return dict.pop(self, k, *default)

    def update(self, other: dict) -> None:  # type: ignore[override]
        self.touched.update(other)
        dict.update(self, other)

    def clear(self) -> None:
        self.touched.clear()
        self.reset = True
        dict.clear(self)

    def take_touched(self) -> set[int]:
        t = self.touched
        self.touched = set()
        self.reset = False
        return t


#: A durable state with at least this many pending + redelivered entries is written as deltas
#: (journal) instead of whole; below it a whole write costs about as little.
DELTA_MIN_ENTRIES = 2048


class Consumer:
    """One consumer of a stream (push or pull). Created by the API handlers or by recovery."""

    #: Pull deliveries in whole runs (_deliver_run) where the general loop would do the same
    #: thing message by message. Only tests turn it off, to compare the two.
    deliver_runs = True

    def __init__(self, stream: Any, cfg: ConsumerConfig, name: str, created_ns: int,
                 store: Any = None, state: ConsumerState | None = None) -> None:
        self.stream = stream
        self.account: "JsAccount" = stream.account
        self.ports = self.account.ports
        self.clock = self.account.clock
        self.name = name
        self.stream_name = stream.name
        self.cfg = cfg
        self.config = cfg  # alias used by other modules
        self.created_ns = created_ns
        self.store = store  # ConsumerStore or None (ephemeral / memory only)
        self.closed = False

        # Sequences (nats-server names).
        self.sseq = 1
        self.dseq = 1
        self.adflr = 0
        self.asflr = 0
        self.dlv_sseq = 0          # stream seq of the last first-time delivery (info "delivered")
        self.pending: _Tracked = _Tracked()       # sseq -> [dseq, ts_ns]
        self.rdc: _Tracked = _Tracked()           # sseq -> redelivery count
        self.rdq: list[int] = []
        self._rdq_set: set[int] = set()
        self.npc = 0
        self._npc_last = 0          # last stream seq already counted in npc
        self._npc_upto = 0          # last stream seq the stream told us about
        self._npc_dirty = False     # a removal ahead of sseq: recount before use
        self.lss: list[int] | None = None         # last_per_subject start list
        self.lss_resume = 0
        self._rep_floor: tuple[int, int] | None = None  # reported floor when it differs (see _reported_floor)
        self.ldt = 0   # last delivery wall ns
        self.lat = 0   # last ack wall ns

        self._ack_prefix = ACK_PREFIX + self.stream_name + "." + name + "."
        self._ack_fmt = self._ack_prefix.replace("%", "%%") + "%d.%d.%d.%d.%d"
        # The same for first deliveries (delivery count 1), as bytes: the pull fast path
        # (_deliver_run) formats the wire bytes directly (bytes %-formatting is the cheapest).
        self._ack_fmt1 = (self._ack_prefix.replace("%", "%%") + "1.%d.%d.%d.%d").encode()
        self._ack_none = cfg.ack_policy == "none"
        self._explicit = cfg.ack_policy == "explicit"
        self._turn_acks = False     # acks arrived this loop turn (stamp last_active at turn end)
        self._retention = stream.config.retention != "limits"
        self.maxdc = max(cfg.max_deliver, 0)
        self.maxp = cfg.max_ack_pending
        self.sfreq = cfg.sample_percent()
        self._set_filters()

        # Push.
        self.active = False
        self.pbytes = 0
        self.pblimit = FC_MAX_PENDING if cfg.flow_control else 0
        self.maxpb = self.pblimit // 16 if cfg.flow_control else 0
        self.fcid = ""
        self.fcsz = 0
        self._last_sent = 0            # monotonic ns of the last data/heartbeat sent
        self._hb_timer = None
        self._rl_t = 0                 # rate limit virtual time (monotonic ns)

        # Pull.
        self.waiting: WaitQueue | None = None if cfg.deliver_subject else WaitQueue(cfg.max_waiting)
        self._wait_timer = None
        self._wait_timer_at = 0

        # Timers and scheduling.
        self._ptmr = None
        self._ptmr_end = 0
        self._dtmr = None
        self._kick_timer = None
        self._scheduled = False
        self._flush_scheduled = False
        self._dirty = False
        self._last_disk = 0            # monotonic ns of the last state write to the OS
        self._disk_timer = None
        self._replay = cfg.replay_policy == "original"
        self._replay_lseq = 0
        self._lts = 0
        self.dthresh = 0
        self._subs: list[Any] = []
        self._deliver = getattr(self.ports, "deliver", None)
        self._deliver_many = getattr(self.ports, "deliver_many", None)

        if state is not None:
            self._apply_state(state)
        self._update_inactive_threshold()

    # ------------------------------------------------------------------------------------------
    # Setup.

    def _set_filters(self) -> None:
        fl = self.cfg.filters()
        self.filters = fl
        self._filter = fl[0] if len(fl) == 1 else ""

    def _update_inactive_threshold(self) -> None:
        """Ephemerals always expire (5s default, stamped in the config without jitter); durables
        only with an explicit threshold. Jitter of 0.1-1s as the reference."""
        cfg = self.cfg
        if not cfg.durable_name and cfg.inactive_threshold <= 0:
            cfg.inactive_threshold = DELETE_WAIT_DEFAULT
            self.dthresh = DELETE_WAIT_DEFAULT + 100 * MS + random.randrange(900) * MS
        elif cfg.inactive_threshold > 0:
            self.dthresh = cfg.inactive_threshold
            if not cfg.deliver_subject:
                self.dthresh += 100 * MS + random.randrange(900) * MS
        else:
            self.dthresh = 0

    def select_start(self) -> None:
        """Pick the first stream sequence for a new consumer (``selectStartingSeqNo``)."""
        st = self.stream.store.state()
        cfg = self.cfg
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
                mmp = getattr(self.stream.config, "max_msgs_per_subject", 0)
                if mmp == 1:
                    sseq = first
                else:
                    fl = self.filters or [">"]
                    seqs = list(self.stream.store.multi_last_seqs(fl, 0))
                    self.lss_resume = last
                    if seqs:
                        sseq = seqs[0]
                        self.lss = seqs
                    else:
                        sseq = last
            elif dp == "by_start_time":
                sseq = self._seq_from_time(cfg.opt_start_time or 0)
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
        self.sseq = sseq
        self.dseq = 1
        self.adflr = 0
        self.asflr = sseq - 1
        self.dlv_sseq = sseq - 1
        self._recalc_pending()
        self._mark_dirty()

    def restart_after_damage(self) -> None:
        """Recovery found the durable state damaged (the store logged what): start again from
        the config's start, but never after the first message stored since the consumer was
        created, so everything it may not have acknowledged is delivered again (redelivery
        rather than loss; "new", "last" and "last per subject" would otherwise skip them)."""
        self.select_start()
        cfg = self.cfg
        if cfg.opt_start_seq == 0 and cfg.deliver_policy in ("new", "last", "last_per_subject"):
            since = self._seq_from_time(self.created_ns)
            if since < self.sseq:
                self.lss = None
                self.sseq = since
                self.asflr = self.dlv_sseq = since - 1
                self._recalc_pending()

    def clamp_to_stream(self) -> None:
        """After recovery: messages below the stream's first sequence are gone (purged or
        expired while we were down), so start no lower than it."""
        first = self.stream.store.state().first_seq
        if self.sseq < first:
            self.sseq = first
            if self.asflr < first - 1 and not self.pending:
                self.asflr = first - 1

    def _seq_from_time(self, ts: int) -> int:
        """First sequence stored at or after wall time ``ts`` (binary search: store timestamps
        only grow with the sequence). last_seq + 1 when none."""
        store = self.stream.store
        st = store.state()
        if st.msgs == 0:
            return st.last_seq + 1
        lo, hi = st.first_seq, st.last_seq + 1
        while lo < hi:
            mid = (lo + hi) // 2
            try:
                sm = store.load_next_msg("", mid)
            except StoreEOF:
                hi = mid
                continue
            if sm.ts >= ts:
                hi = mid
            else:
                lo = sm.seq + 1
        return lo

    def _apply_state(self, state: ConsumerState) -> None:
        self.dseq = state.delivered.consumer_seq + 1
        self.sseq = state.delivered.stream_seq + 1
        self.dlv_sseq = state.delivered.stream_seq
        self.adflr = state.ack_floor.consumer_seq
        self.asflr = state.ack_floor.stream_seq
        # Loaded from the store: nothing is touched yet (the store has all of it).
        self.pending = _Tracked({s: (p.sequence, p.timestamp) for s, p in state.pending.items()})
        self.rdc = _Tracked(state.redelivered)

    def start(self) -> None:
        """Subscribe, compute num pending, arm timers and start delivering."""
        st = self.stream.store.state()
        if self._replay:
            self._replay_lseq = st.last_seq
        self._recalc_pending()
        sub = self.ports.subscribe(MSG_NEXT_PREFIX + self.stream_name + "." + self.name, self._on_next_request)
        self._subs.append(sub)
        # RESET answers from the consumer itself: a missing consumer gives no responders.
        self._subs.append(self.ports.subscribe(
            "$JS.API.CONSUMER.RESET." + self.stream_name + "." + self.name, self._on_reset_request))
        hub = _hub(self.account)
        if self.cfg.deliver_subject:
            hub.track_push(self)
            self.active = bool(self.ports.has_interest(self.cfg.deliver_subject))
            if not self.active and self.dthresh > 0:
                self._arm_delete_timer(self.dthresh)
            if self.cfg.idle_heartbeat:
                self._last_sent = self.clock.monotonic_ns()
                self._arm_hb(self.cfg.idle_heartbeat)
        elif self.dthresh > 0:
            self.waiting.last = self.clock.monotonic_ns()  # type: ignore[union-attr]
            self._arm_delete_timer(self.dthresh)
        if self.pending:
            self._check_redelivered()
            self._arm_ack_timer(self._ack_wait_for(0))
        self._update_pause_timer()
        self.kick()

    # ------------------------------------------------------------------------------------------
    # Info.

    @property
    def is_push(self) -> bool:
        return bool(self.cfg.deliver_subject)

    def _refresh_retention(self) -> None:
        """Acks matter to the stream under interest/workqueue retention (a stream can switch
        between limits and interest; the stream tells us through on_new_messages)."""
        self._retention = self.stream.config.retention != "limits"

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
        """True while this consumer still needs stream message ``sseq`` (``needAck``; the
        filter is the caller's business). Messages past max_deliver stay needed."""
        if self.cfg.ack_policy == "explicit":
            need = sseq > self.asflr and (sseq >= self.sseq or sseq in self.pending)
        else:
            need = sseq > self.asflr
        return need or sseq in self.rdc

    def is_acked(self, sseq: int) -> bool:
        """The stream's retention check: this consumer no longer needs ``sseq``."""
        return not self.needs_ack(sseq)

    def num_pending(self) -> int:
        """Messages not yet delivered (``num_pending``). Brought up to date here: new messages
        are only noted as they arrive (see on_new_messages)."""
        self._settle_npc()
        return self.npc if self.npc > 0 else 0

    def info(self) -> dict:
        """ConsumerInfo JSON (without ``type``), with dynamic metadata, as the reference."""
        return self._info(dynamic=True)

    def _info(self, dynamic: bool) -> dict:
        self._check_num_pending()
        now = self.clock.time_ns()
        delivered: dict[str, Any] = {"consumer_seq": self.dseq - 1, "stream_seq": self.dlv_sseq}
        if self.ldt:
            delivered["last_active"] = format_time(self.ldt)
        fd, fs = self._reported_floor()
        ack_floor: dict[str, Any] = {"consumer_seq": fd, "stream_seq": fs}
        if self.lat:
            ack_floor["last_active"] = format_time(self.lat)
        if self.waiting is not None:
            self._sweep_waiting(False)
        out: dict[str, Any] = {
            "stream_name": self.stream_name,
            "name": self.name,
            "created": format_time(self.created_ns),
            "config": self.cfg.to_json(dynamic_metadata=dynamic),
            "delivered": delivered,
            "ack_floor": ack_floor,
            "num_ack_pending": len(self.pending),
            "num_redelivered": 0 if self.cfg.max_deliver == 1 else len(self.rdc),
            "num_waiting": len(self.waiting) if self.waiting is not None else 0,
            "num_pending": self.num_pending(),
        }
        if self.is_push and self.active:
            out["push_bound"] = True
        pu = self.cfg.pause_until
        if pu is not None and now < pu:
            out["paused"] = True
            out["pause_remaining"] = pu - now
        out["ts"] = format_time(now)
        return out

    def list_info(self) -> dict:
        """ConsumerInfo as CONSUMER.LIST shows it (no dynamic metadata)."""
        return self._info(dynamic=False)

    def jsz_info(self) -> dict:
        """Consumer entry for ``/jsz?consumers=true`` (ConsumerInfo without ``ts`` noise)."""
        return self._info(dynamic=False)

    # ------------------------------------------------------------------------------------------
    # Num pending.

    def _recalc_pending(self) -> None:
        store = self.stream.store
        self._npc_dirty = False
        try:
            self._npc_last = store.state().last_seq
        except StoreError:
            self._npc_last = 0
        if self._npc_upto < self._npc_last:
            self._npc_upto = self._npc_last
        if self.lss is not None:
            n = len(self.lss)
            try:
                n += sum(store.num_pending(self.lss_resume + 1, f, False) for f in (self.filters or [""]))
            except StoreError:
                pass
            self.npc = n
            return
        # A full recount of a last-per-subject consumer counts the last message of each subject
        # only, as the reference does whenever it recounts (creation, update, purge); messages
        # that arrive later are counted one by one (_settle_npc), as there too.
        lps = self.cfg.deliver_policy == "last_per_subject"
        try:
            if not self.filters:
                self.npc = store.num_pending(self.sseq, "", lps)
            else:
                self.npc = sum(store.num_pending(self.sseq, f, lps) for f in self.filters)
        except StoreError:
            self.npc = 0

    def _check_num_pending(self) -> None:
        self._settle_npc()
        st = self.stream.store.state()
        if self.sseq > st.last_seq and self.lss is None:
            self.npc = 0
        elif self.npc > 0:
            self.npc = min(self.npc, st.msgs, st.last_seq - self.sseq + 1) if self.lss is None else self.npc

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
        self._refresh_retention()
        self.kick()

    def _settle_npc(self) -> None:
        """Count the messages that arrived since num_pending was last brought up to date."""
        if self._npc_dirty:
            self._recalc_pending()
            return
        upto, prev = self._npc_upto, self._npc_last
        if upto <= prev:
            return
        self._npc_last = upto
        start = max(prev + 1, self.sseq if self.lss is None else self.lss_resume + 1)
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

    def on_purge(self, first_seq: int) -> None:
        """Everything below ``first_seq`` is gone (purge/compact)."""
        if self.closed:
            return
        if self.sseq < first_seq:
            self.sseq = first_seq
        if self.dlv_sseq < first_seq - 1:
            # The reference reports the purge floor as delivered too (its delivered position is
            # the next sequence to deliver, which a purge moves).
            self.dlv_sseq = first_seq - 1
        if self.lss is not None:
            self.lss = [s for s in self.lss if s >= first_seq] or None
        if self.asflr < first_seq - 1:
            self.asflr = first_seq - 1
        store = self.stream.store
        for seq in list(self.pending):
            gone = seq <= self.asflr
            if not gone:
                try:
                    store.load_msg(seq)
                except (MsgNotFound, StoreEOF):
                    gone = True
            if gone:
                p = self.pending.pop(seq)
                if p[0] > self.adflr:
                    self.adflr = p[0]
                self.rdc.pop(seq, None)
                # A purged pending message counts as acked, ack time included (as the reference).
                self.lat = self.clock.time_ns()
        if not self.pending:
            self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
        self._rep_floor = None
        if self.rdq:
            self.rdq = [s for s in self.rdq if s in self.pending]
            self._rdq_set = set(self.rdq)
        self._recalc_pending()
        self._mark_dirty()
        self.kick()

    def on_msg_removed(self, seq: int, subject: str | None = None) -> None:
        """One message was deleted, expired or dropped by a limit; a pending one is terminated
        (as the reference, whatever the retention)."""
        if self.closed:
            return
        if seq >= self.sseq:
            if subject is None:
                self._npc_dirty = True
            elif seq <= self._npc_last and self.lss is None and self.filter_matches(subject):
                self.npc -= 1  # it was counted in num_pending and will never be delivered
            return
        p = self.pending.get(seq)
        if p is not None and not self._ack_none:
            dc = self.rdc.get(seq, 0) + 1
            self._process_term(seq, p[0], dc, UNACKED_LIMITS_REASON, "")

    # ------------------------------------------------------------------------------------------
    # Scheduling.

    def kick(self) -> None:
        """Ask for a delivery pass at the end of this loop turn (idempotent)."""
        if not self._scheduled and not self.closed:
            self._scheduled = True
            self.clock.call_soon(self._run)

    def _mark_dirty(self) -> None:
        """The durable state changed: write it once, at the end of this loop turn."""
        if self.store is None or self._dirty:
            return
        self._dirty = True
        self._end_turn_soon()

    def _end_turn_soon(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.clock.call_soon(self._end_turn)

    def _end_turn(self) -> None:
        """Once per loop turn with activity: stamp the last ack time, write the state."""
        self._flush_scheduled = False
        if self.closed:
            return
        if self._turn_acks:
            self._turn_acks = False
            self.lat = self.clock.time_ns()
            if self.store is not None:
                self._dirty = True
        if not self._dirty or self.store is None or self._disk_timer is not None:
            return
        # To the OS at most every STATE_WRITE_GAP (as the reference's consumer flush loop):
        # a crash of the process then loses at most that much ack progress.
        now = self.clock.monotonic_ns()
        if now - self._last_disk >= STATE_WRITE_GAP:
            self._write_state()
        else:
            self._disk_timer = self.clock.call_later(self._last_disk + STATE_WRITE_GAP - now, self._write_state)

    _flush_state = _end_turn

    def _write_state(self) -> None:
        self._disk_timer = None
        self._last_disk = self.clock.monotonic_ns()
        if self.store is None or self.closed or not self._dirty:
            return
        self._dirty = False
        try:
            self._hand_state()
            self.store.flush()
        except StoreError:
            pass

    def _hand_state(self) -> None:
        """Give the store what changed since the last write: a delta of the touched entries
        for a large state (cost follows the changes), the whole state otherwise."""
        pending, rdc = self.pending, self.rdc
        store = self.store
        append = getattr(store, "append_delta", None)
        if (append is not None and not pending.reset and not rdc.reset
                and len(pending) + len(rdc) >= DELTA_MIN_ENTRIES):
            # Lazy: the keys touched and the sequence pairs now; the store's worker thread
            # reads the entries' values (so this costs the loop nothing per entry).
            delta = ConsumerDelta(
                SequencePair(self.dseq - 1, self.dlv_sseq), SequencePair(*self._reported_floor()),
                pending.take_touched(), None, [], rdc.take_touched(), None, [])  # type: ignore[arg-type]
            append(delta, self._live_state)
        else:
            pending.take_touched()
            rdc.take_touched()
            store.update(self.state())

    def _live_state(self) -> tuple:
        """For a store checkpoint: the live maps (read, never changed, by the store's worker
        thread) and the sequence pairs now."""
        return (self.pending, self.rdc, SequencePair(self.dseq - 1, self.dlv_sseq),
                SequencePair(*self._reported_floor()))


    def state(self) -> ConsumerState:
        """The durable state (store.base.ConsumerState)."""
        return ConsumerState(
            delivered=SequencePair(self.dseq - 1, self.dlv_sseq),
            ack_floor=SequencePair(*self._reported_floor()),
            pending={s: Pending(p[0], p[1]) for s, p in self.pending.items()},
            redelivered=dict(self.rdc),
        )

    # ------------------------------------------------------------------------------------------
    # Delivery.

    def _paused(self) -> bool:
        pu = self.cfg.pause_until
        return pu is not None and self.clock.time_ns() < pu

    def _run(self) -> None:
        """One delivery pass: up to TURN_BUDGET messages, then yield to the loop.

        Hot path: no per-message JSON, timers or objects beyond the ack subject string; one
        wall-clock read, one ack-timer check and one state write per pass."""
        self._scheduled = False
        if self.closed:
            return
        if self._paused():
            self._update_pause_timer()
            return
        push = self.is_push
        waiting = self.waiting
        clock = self.clock
        deliver = self._deliver
        publish = self.ports.publish
        cfg = self.cfg
        headers_only = cfg.headers_only
        ack_none = self._ack_none
        pending = self.pending
        ack_fmt = self._ack_fmt
        deliver_subject = cfg.deliver_subject
        fc = self.maxpb > 0
        pace = self._replay or cfg.rate_limit_bps > 0
        need_sz = fc or pace
        budget = TURN_BUDGET
        eos = True  # False when we stopped for max_ack_pending or a pacing delay
        now_w = clock.time_ns()
        now_m = clock.monotonic_ns()
        first_pending_seq = 0
        if push:
            if not self.active:
                return
        elif not waiting:
            return
        self._settle_npc()
        retention_acks = ack_none and self.stream.config.retention != "limits"
        checked: set[str] = set()  # pull inboxes whose interest was verified this pass
        # Fast path: nothing to redeliver, no last-per-subject list, no filter narrower than the
        # stream: read forward with one store iterator instead of a lookup per message (made
        # when first needed, and again after a run of _deliver_run moved sseq past it).
        fast_it = None
        fast = not self.rdq and self.lss is None and self._covers_stream()
        maxp = self.maxp if not ack_none else 0
        # Deliveries to one subject are collected and handed over in one deliver_many call (one
        # subscription match, one buffer append per frame). The batch is sent before anything
        # else can publish (statuses, flow control, advisories), so wire order is unchanged.
        many = self._deliver_many if not fc and not retention_acks else None
        # Pull fast path (_deliver_run): whole runs of new messages to the head request.
        runs = self.deliver_runs and fast and many is not None and not push and not pace and not headers_only
        batch: list = []
        bsubj = ""
        try:
            while budget > 0:
                if push:
                    if not self.active or (fc and self.pbytes > self.maxpb):
                        break
                elif not waiting.live:  # (the count itself: no __bool__ call per message)
                    break
                if runs and waiting.live == 1 and not self.rdq:
                    # The common pull case: one waiting request with no byte budget, not
                    # expired, inbox with interest: its whole run at once (see _deliver_run).
                    wr = waiting.head()
                    n = wr.n if wr.n < budget else budget
                    if maxp > 0 and maxp - len(pending) < n:
                        n = maxp - len(pending)
                    if (n > 0 and wr.b == 0 and (not wr.expires or now_m < wr.expires)
                            and (wr.reply in checked or self._has_inbox_interest(wr.reply, checked))):
                        if batch and bsubj != wr.reply:
                            many(bsubj, batch)
                            batch = []
                        bsubj = wr.reply
                        k, first = self._deliver_run(wr, n, batch, now_w)
                        fast_it = None
                        if k:
                            budget -= k
                            if not first_pending_seq and not ack_none:
                                first_pending_seq = first
                        if k < n:  # the stream has nothing more (as next() -> None below)
                            self._at_eof()
                            break
                        continue
                if fast and not self.rdq:
                    if maxp > 0 and len(pending) >= maxp:
                        eos = False
                        break
                    if fast_it is None:
                        fast_it = iter(self.stream.store.iter_msgs(self.sseq, 1 << 62))
                    sm = next(fast_it, None)
                    if sm is None:
                        self._at_eof()
                        break
                    kind, dc = "new", 1
                else:
                    if batch:
                        many(bsubj, batch)
                        batch = []
                    nxt = self._peek()
                    if nxt is None:
                        break
                    if nxt is False:
                        eos = False
                        break
                    kind, sm, dc = nxt
                seq = sm.seq
                hdr, msg = sm.hdr, sm.msg
                if headers_only:
                    hdr = D.headers_only(hdr, len(msg))
                    msg = b""
                dseq = self.dseq
                npc = self.npc
                if kind != "rd":
                    npc -= 1
                # v1 ack subject: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>
                # (%-formatting with a per-consumer template: the cheapest way to build it)
                reply = ack_fmt % (dc, seq, dseq, sm.ts, npc if npc > 0 else 0)
                # Size as the reference counts it (flow control, max_bytes, rate limit).
                sz = (len(sm.subject) + len(reply) + (len(hdr) if hdr else 0) + len(msg)) if need_sz else 0
                if push:
                    dsubj = deliver_subject
                    wr = None
                else:
                    # Common case inline: the head request has no byte budget, has not expired
                    # and its inbox was seen with interest earlier in this pass.
                    wr = waiting.head()
                    if wr.b == 0 and (not wr.expires or now_m < wr.expires) and wr.reply in checked:
                        waiting.pop()
                    else:
                        if not sz:
                            sz = len(sm.subject) + len(reply) + (len(hdr) if hdr else 0) + len(msg)
                        if batch:
                            many(bsubj, batch)
                            batch = []
                        wr = self._next_waiting(sz, checked)
                        if wr is None:
                            break
                    dsubj = wr.reply
                if pace:
                    # Replay original: space messages as they were stored.
                    if self._replay:
                        if self._lts and sm.ts - self._lts > MS:
                            if wr is not None:
                                _credit(waiting, wr)
                            self._schedule_kick(sm.ts - self._lts)
                            self._lts = 0
                            eos = False
                            break
                        self._lts = sm.ts
                    if cfg.rate_limit_bps:
                        delay = self._rate_delay(sz)
                        if delay > 0:
                            if wr is not None:
                                _credit(waiting, wr)
                            self._schedule_kick(delay)
                            eos = False
                            break
                # Commit: the message is going out.
                if kind == "new":
                    self.sseq = seq + 1
                    self.npc = npc
                else:
                    self._commit(kind, seq, dc)
                self.dseq = dseq + 1
                if dc == 1:
                    self.dlv_sseq = seq
                if ack_none:
                    self.adflr = dseq
                    self.asflr = seq
                else:
                    p = pending.get(seq)
                    pending[seq] = (dseq if p is None else p[0], now_w)
                    if not first_pending_seq:
                        first_pending_seq = seq
                if many is not None:
                    if dsubj != bsubj:
                        if batch:
                            many(bsubj, batch)
                            batch = []
                        bsubj = dsubj
                    batch.append((sm.subject.encode(), reply.encode(), hdr, msg))
                elif deliver is not None:
                    deliver(dsubj, sm.subject, reply, hdr, msg)
                else:
                    publish(dsubj, reply, hdr, msg)
                budget -= 1
                if fc:
                    self.pbytes += sz
                    if not self.fcid and (self.pbytes > self.maxpb // 2 or (
                            maxp > 0 and len(pending) >= maxp and cfg.ack_policy == "flow_control")):
                        self._send_flow_control()
                    elif self.fcid and self.pbytes - self.fcsz >= self.maxpb:
                        self.fcsz += sz
                if wr is not None:
                    if wr.n <= 0:
                        if wr.b > 0:
                            if batch:
                                many(bsubj, batch)
                                batch = []
                            publish(dsubj, "", D.pending_status(409, "Batch Completed", wr.n, wr.b), b"")
                    elif wr.hb:
                        wr.hbt = clock.monotonic_ns() + wr.hb
                if retention_acks:
                    self.stream.ack_processed(self, seq)
        except StoreClosed:
            # The stream is being stopped or deleted under us; it stops this consumer next.
            budget = TURN_BUDGET
        finally:
            if batch:
                many(bsubj, batch)
            if budget < TURN_BUDGET:
                self.ldt = now_w
                self._last_sent = now_m
                if waiting is not None and self.dthresh:
                    waiting.last = now_m  # deliveries count as pull activity
                if first_pending_seq and cfg.ack_wait:
                    self._arm_ack_timer(self._ack_wait_for(first_pending_seq))
                self._mark_dirty()
            if budget == 0:
                self.kick()
            else:
                if self._replay and self.sseq > self._replay_lseq and not self.rdq:
                    self._replay = False
                if waiting is not None:
                    self._end_of_pass(eos)

    def _has_inbox_interest(self, inbox: str, checked: set[str]) -> bool:
        """True (and ``inbox`` noted in ``checked``) when a pull request's inbox has interest."""
        if self.ports.has_interest(inbox):
            checked.add(inbox)
            return True
        return False

    def _deliver_run(self, wr: PullRequest, n: int, batch: list, now_w: int) -> tuple[int, int]:
        """Deliver up to ``n`` new messages to pull request ``wr`` (the only waiting one) in one
        go; returns ``(delivered, first stream seq)``, fewer than ``n`` only at the stream's end.

        The caller checked what makes every message of the run take the same path in the
        general loop of :meth:`_run`: a pull consumer, nothing to redeliver, no last-per-subject
        list, no narrowing filter, no pacing, no headers_only, the request has no byte budget,
        has not expired, its inbox has interest, and ``n`` fits the request, the turn budget and
        max_ack_pending. So the run gets exactly what that loop would give it, message for
        message: consumer sequences ``dseq ..``, the v1 ack subject with delivery count 1 and
        the pending count going down to 0, a pending entry stamped ``now_w`` per message (or
        the ack floor for ack none), and the frames appended to ``batch`` as
        ``(subject, reply, hdr, payload)`` bytes items for ``deliver_many``; but the store reads
        the run at once (``load_run``, one object per run) and everything per message is done
        by C-level ``map``/``zip``, with the consumer's state updated once."""
        run = self.stream.store.load_run(self.sseq, n)
        seqs = run.seqs
        k = len(seqs)
        if not k:
            return 0, 0
        dseq = self.dseq
        npc = self.npc
        ds = range(dseq, dseq + k)
        # The pending count each ack subject carries: npc - 1, npc - 2, ... never below 0.
        npcs = range(npc - 1, npc - 1 - k, -1)
        if npc < k:
            npcs = [x if x > 0 else 0 for x in npcs]
        # v1 ack subject, bytes: $JS.ACK.<stream>.<consumer>.1.<sseq>.<dseq>.<ts>.<pending>
        replies = map(self._ack_fmt1.__mod__, zip(seqs, ds, run.tss, npcs))
        hdrs = run.hdrs
        batch += zip(run.subjects, replies, hdrs if hdrs is not None else repeat(None, k), run.msgs)
        last = seqs[-1]
        if self._ack_none:
            self.adflr = dseq + k - 1
            self.asflr = last
        else:
            # New messages are above every pending one (sseq only moves forward; a reset
            # clears pending), so these are all new entries.
            self.pending.update(dict(zip(seqs, zip(ds, repeat(now_w, k)))))
        self.sseq = last + 1
        self.npc = npc - k
        self.dseq = dseq + k
        self.dlv_sseq = last
        self.waiting.take_run(wr, k)
        if wr.n > 0 and wr.hb:
            wr.hbt = self.clock.monotonic_ns() + wr.hb
        return k, seqs[0]

    def _peek(self) -> Any:
        """The next thing to deliver: ``(kind, StoreMsg, delivery count)``; ``None`` when there
        is nothing; ``False`` when new messages are held back by max_ack_pending."""
        store = self.stream.store
        while self.rdq:
            seq = self.rdq[0]
            dc = self.rdc.get(seq, 0) + 1 + 1  # as incDeliveryCount: redelivery count + 1 more
            if self.maxdc and dc > self.maxdc:
                self._pop_rdq()
                self.rdc[seq] = dc - 1
                if dc == self.maxdc + 1:
                    self._notify_max_deliveries(seq, dc - 1)
                p = self.pending.pop(seq, None)
                if p is not None:
                    self._max_deliver_floor(p[0], seq)
                self._mark_dirty()
                continue
            try:
                sm = store.load_msg(seq)
            except (MsgNotFound, StoreEOF):
                self._pop_rdq()
                p = self.pending.get(seq)
                if p is not None:
                    self._process_term(seq, p[0], dc - 1, UNACKED_LIMITS_REASON, "")
                continue
            return ("rd", sm, dc)
        if self.maxp > 0 and len(self.pending) >= self.maxp:
            return False
        if self.lss is not None:
            while self.lss:
                seq = self.lss[0]
                try:
                    return ("lss", store.load_msg(seq), 1)
                except (MsgNotFound, StoreEOF):
                    self.lss.pop(0)
            self.sseq = self.lss_resume + 1
            self.lss = None
            self._recalc_pending()
        fl = self.filters
        try:
            if len(fl) <= 1:
                sm = store.load_next_msg(self._filter, self.sseq)
            else:
                sm = None
                for f in fl:
                    try:
                        cand = store.load_next_msg(f, self.sseq)
                    except StoreEOF:
                        continue
                    if sm is None or cand.seq < sm.seq:
                        sm = cand
                if sm is None:
                    raise StoreEOF()
        except StoreEOF:
            self._at_eof()
            return None
        return ("new", sm, 1)

    def _at_eof(self) -> None:
        """Nothing more to deliver: skip sseq past the stream's end (as the reference)."""
        last = self.stream.store.state().last_seq
        if self.sseq <= last:
            self.sseq = last + 1
        self.npc = 0

    def _covers_stream(self) -> bool:
        """True when the filters let every stream subject through (a filter equal to the
        stream's subject is no filter, as nats-server's isFiltered)."""
        fl = self.filters
        if not fl:
            return True
        subjects = getattr(self.stream.config, "subjects", None) or []
        if not subjects:
            return False
        for s in subjects:
            if not any(subset(s, f) for f in fl):
                return False
        return True

    def _commit(self, kind: str, seq: int, dc: int) -> None:
        if kind == "rd":
            self._pop_rdq()
            self.rdc[seq] = dc - 1
        elif kind == "lss":
            self.lss.pop(0)  # type: ignore[union-attr]
            if not self.lss:
                self.lss = None
                self.sseq = self.lss_resume + 1
            else:
                self.sseq = seq + 1
            self.npc -= 1
        else:
            self.sseq = seq + 1
            self.npc -= 1

    def _pop_rdq(self) -> None:
        seq = self.rdq.pop(0)
        self._rdq_set.discard(seq)

    def _add_rdq(self, seqs: list[int]) -> None:
        for s in seqs:
            if s not in self._rdq_set:
                self.rdq.append(s)
                self._rdq_set.add(s)

    def _remove_rdq(self, seq: int) -> None:
        if seq in self._rdq_set:
            self._rdq_set.discard(seq)
            self.rdq.remove(seq)

    def _schedule_kick(self, delay: int) -> None:
        if self._kick_timer is not None:
            self._kick_timer.cancel()

        def fire() -> None:
            self._kick_timer = None
            self.kick()
        self._kick_timer = self.clock.call_later(delay, fire)

    def _rate_delay(self, sz: int) -> int:
        """Token bucket on bytes (``rate_limit_bps`` / 8 per second); returns ns to wait."""
        rate = self.cfg.rate_limit_bps / 8.0
        now = self.clock.monotonic_ns()
        burst = int(1e9 * max(1.0, min(rate, 1 << 20) / rate)) if rate else 0
        t = max(self._rl_t, now - burst)
        delay = t - now
        if delay > 0:
            return delay
        self._rl_t = t + int(sz * 1e9 / rate)
        return 0

    def _update_pause_timer(self) -> None:
        pu = self.cfg.pause_until
        if pu is None:
            return
        now = self.clock.time_ns()
        if now < pu:
            self._schedule_kick(pu - now)

    # ------------------------------------------------------------------------------------------
    # Pull requests.

    def _on_next_request(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        if hdr and reply and _required_level_too_high(hdr):
            self.ports.publish(reply, "", D.status(412, "Required Api Level"), b"")
            return
        self.process_next_request(reply, payload)

    def process_next_request(self, reply: str, body: bytes) -> None:
        """Handle a MSG.NEXT request (or the tail of ``+NXT``) whose inbox is ``reply``."""
        if self.closed or not reply:
            return
        publish = self.ports.publish
        if self.waiting is None:
            publish(reply, "", D.PUSH_BASED, b"")
            return
        try:
            batch, expires, max_bytes, no_wait, hb = parse_next_request(body)
        except BadRequest as e:
            publish(reply, "", D.status(400, "Bad Request - " + str(e)), b"")
            return
        cfg = self.cfg
        if cfg.max_batch > 0 and batch > cfg.max_batch:
            publish(reply, "", D.status(409, f"Exceeded MaxRequestBatch of {cfg.max_batch}"), b"")
            return
        if expires and cfg.max_expires > 0 and expires > cfg.max_expires:
            publish(reply, "", D.status(409, f"Exceeded MaxRequestExpires of {go_duration(cfg.max_expires)}"), b"")
            return
        if max_bytes > 0 and cfg.max_bytes > 0 and max_bytes > cfg.max_bytes:
            publish(reply, "", D.status(409, f"Exceeded MaxRequestMaxBytes of {cfg.max_bytes}"), b"")
            return
        now = self.clock.monotonic_ns()
        wq = self.waiting
        if wq.is_full():
            self._sweep_waiting(False)
        if no_wait:
            msgs_pending = self.num_pending() + len(self.rdq)
            if msgs_pending == 0 and not expires:
                wq.last = now
                publish(reply, "", D.NO_MESSAGES, b"")
                return
            if msgs_pending > 0:
                # The batch the queue still wants bounds the exact figure (which leaves out
                # requesters that went away): scan only when the bound says "too many".
                brp = wq.want
                if msgs_pending < brp:
                    brp = self._sweep_waiting(False)
                if msgs_pending < brp:
                    wq.last = now
                    publish(reply, "", D.REQUESTS_PENDING, b"")
                    return
        wr = PullRequest(reply, batch, max_bytes, now + expires if expires else 0, hb, no_wait, now)
        if not wq.add(wr):
            if not hb:
                publish(reply, "", D.EXCEEDED_MAX_WAITING, b"")
            return
        self._arm_wait_timer()
        self.kick()

    def _next_waiting(self, sz: int, checked: set[str] | None = None) -> PullRequest | None:
        """The request that gets the next message of size ``sz`` (``nextWaiting``).
        ``checked`` caches inboxes already known to have interest during this pass."""
        wq = self.waiting
        now = self.clock.monotonic_ns()
        publish = self.ports.publish
        while True:
            wr = wq.head()
            if wr is None:
                break
            if wr.expires and now >= wr.expires:
                publish(wr.reply, "", D.pending_status(408, "Request Timeout", wr.n, wr.b), b"")
                wq.remove_head()
                continue
            if wr.b > 0:
                if sz <= wr.b:
                    wr.b -= sz
                    if wr.b == 0:
                        wq.set_want(wr, 1)
                else:
                    publish(wr.reply, "", D.pending_status(409, "Message Size Exceeds MaxBytes", wr.n, wr.b), b"")
                    wq.remove_head()
                    continue
            if checked is not None and wr.reply in checked:
                return wq.pop()
            if self.ports.has_interest(wr.reply):
                if checked is not None:
                    checked.add(wr.reply)
                return wq.pop()
            wq.remove_head()  # requester went away
        return None

    def _sweep_waiting(self, eos: bool) -> int:
        """The full scan (``processWaiting``), for what is rare: info, a full queue, the exact
        batch still wanted, inactivity. Expires requests, answers finished no_wait ones (at the
        end of the stream), drops those whose requester went away, sends due heartbeats;
        returns the batch still wanted by what is left."""
        wq = self.waiting
        if not wq:
            return 0
        now = self.clock.monotonic_ns()
        publish = self.ports.publish
        has_interest = self.ports.has_interest
        brp = 0
        keep = []
        changed = False
        for wr in wq.live_requests():
            expired = wr.expires and now >= wr.expires
            if (eos and wr.no_wait) or expired:
                if expired:
                    publish(wr.reply, "", D.pending_status(408, "Request Timeout", wr.n, wr.b), b"")
                    changed = True
                    continue
                if not wr.expires or wr.d > 0:
                    publish(wr.reply, "", D.NO_MESSAGES, b"")
                    changed = True
                    continue
            if not has_interest(wr.reply):
                changed = True
                continue
            brp += wr.n
            if wr.hbt and now >= wr.hbt:
                publish(wr.reply, "", D.idle_heartbeat(self.dseq - 1, self.sseq - 1), b"")
                wr.hbt = now + wr.hb
                wq.reschedule_hb(wr)
            keep.append(wr)
        if changed:
            wq.replace(keep)
        self._arm_wait_timer()
        return brp

    def _end_of_pass(self, eos: bool) -> None:
        """After a delivery pass: at the end of the stream, answer the no_wait requests that are
        done (without looking at the others); re-arm the timer for the next expiry/heartbeat."""
        wq = self.waiting
        if eos and wq:
            for wr in wq.take_eos():
                wq.discard(wr)
                if wr.expires and self.clock.monotonic_ns() >= wr.expires:
                    self.ports.publish(wr.reply, "", D.pending_status(408, "Request Timeout", wr.n, wr.b), b"")
                else:
                    self.ports.publish(wr.reply, "", D.NO_MESSAGES, b"")
        self._arm_wait_timer()

    def _process_due(self) -> None:
        """Requests whose expiry or heartbeat time has come (the heap's top, nothing else):
        408 for the expired, a heartbeat for the others (dropped when nobody listens)."""
        wq = self.waiting
        now = self.clock.monotonic_ns()
        publish = self.ports.publish
        for wr in wq.due(now):
            if wr.expires and now >= wr.expires:
                wq.discard(wr)
                publish(wr.reply, "", D.pending_status(408, "Request Timeout", wr.n, wr.b), b"")
            elif wr.hbt and now >= wr.hbt:
                if not self.ports.has_interest(wr.reply):
                    wq.discard(wr)
                    continue
                publish(wr.reply, "", D.idle_heartbeat(self.dseq - 1, self.sseq - 1), b"")
                wr.hbt = now + wr.hb
                wq.reschedule_hb(wr)
            else:
                wq.reschedule_hb(wr)  # its heartbeat moved later since it was queued

    def _arm_wait_timer(self) -> None:
        wq = self.waiting
        fexp = wq.next_deadline() if wq else 0
        if not fexp:
            if self._wait_timer is not None:
                self._wait_timer.cancel()
                self._wait_timer = None
            return
        if self._wait_timer is not None:
            if self._wait_timer_at == fexp:
                return
            self._wait_timer.cancel()
        self._wait_timer_at = fexp
        self._wait_timer = self.clock.call_at(fexp, self._on_wait_timer)

    def _on_wait_timer(self) -> None:
        self._wait_timer = None
        if self.closed:
            return
        self._process_due()
        self._end_of_pass(True)
        self.kick()

    # ------------------------------------------------------------------------------------------
    # Push: interest, flow control, heartbeats.

    def update_interest(self) -> None:
        """Re-check interest on the deliver subject (called by the account's interest hook)."""
        if self.closed or not self.is_push:
            return
        interest = bool(self.ports.has_interest(self.cfg.deliver_subject))
        was = self.active
        self.active = interest
        if interest and not was:
            self.kick()
            if self.cfg.idle_heartbeat:
                self._arm_hb(self.cfg.idle_heartbeat)
        if interest:
            if self._dtmr is not None:
                self._dtmr.cancel()
                self._dtmr = None
        elif self.dthresh > 0 and self._dtmr is None:
            self._arm_delete_timer(self.dthresh)

    def _send_flow_control(self) -> None:
        rply = FC_PREFIX + self.stream_name + "." + self.name + "." + _rand4()
        self.fcsz, self.fcid = self.pbytes, rply
        self.ports.publish(self.cfg.deliver_subject, rply, D.FC_REQUEST, b"")

    def process_flow_control(self, subject: str, hdr: bytes | None = None) -> None:
        """A reply to our flow-control request arrived on ``subject``. With ack policy
        ``flow_control`` its ``Nats-Last-Consumer`` / ``Nats-Last-Stream`` headers ack
        everything up to them."""
        if subject != self.fcid:
            return
        if self.maxpb < self.pblimit:
            self.maxpb = min(self.maxpb * 2, self.pblimit)
        self.pbytes = max(self.pbytes - self.fcsz, 0)
        self.fcid, self.fcsz = "", 0
        self.kick()
        if self.cfg.ack_policy == "flow_control" and hdr:
            from natsd.jetstream.api.router import find_header
            ls, ld = _num(find_header(hdr, D.LAST_STREAM) or ""), _num(find_header(hdr, D.LAST_CONSUMER) or "")
            if ls > 0:
                self._process_ack_msg(ls, max(ld, 0), 1, False)

    def _arm_hb(self, delay: int) -> None:
        if self._hb_timer is not None:
            self._hb_timer.cancel()
        self._hb_timer = self.clock.call_later(delay, self._on_hb)

    def _on_hb(self) -> None:
        self._hb_timer = None
        if self.closed:
            return
        hb = self.cfg.idle_heartbeat
        now = self.clock.monotonic_ns()
        idle = now - self._last_sent
        if idle >= hb:
            if self.active:
                self.ports.publish(self.cfg.deliver_subject, "",
                                   D.idle_heartbeat(self.dseq - 1, self.sseq - 1, self.fcid), b"")
                # Ack policy flow_control: ask for the acks of what is outstanding.
                if self.cfg.ack_policy == "flow_control" and self.pending and not self.fcid:
                    self._send_flow_control()
            self._last_sent = now
            self._arm_hb(hb)
        else:
            self._arm_hb(hb - idle)

    # ------------------------------------------------------------------------------------------
    # Inactivity.

    def _arm_delete_timer(self, delay: int) -> None:
        if self._dtmr is not None:
            self._dtmr.cancel()
        self._dtmr = self.clock.call_later(delay, self._delete_not_active)

    def _delete_not_active(self) -> None:
        self._dtmr = None
        if self.closed:
            return
        if self.is_push:
            if self.active:
                return
        else:
            now = self.clock.monotonic_ns()
            elapsed = now - self.waiting.last  # type: ignore[union-attr]
            if elapsed < self.dthresh:
                self._arm_delete_timer(self.dthresh - elapsed)
                return
            self._sweep_waiting(True)
            if self.waiting:
                self._arm_delete_timer(self.dthresh)
                return
        self.delete_from_stream()

    def delete_from_stream(self) -> None:
        """Delete this consumer (inactivity or API): stream bookkeeping, advisory, store."""
        if self.closed:
            return
        try:
            self.stream.remove_consumer(self.name)
        except Exception:  # noqa: BLE001 - already gone from the stream is fine
            pass
        self.delete()

    # ------------------------------------------------------------------------------------------
    # Acks.

    def process_ack(self, sseq: int, dseq: int, dc: int, reply: str, body: bytes) -> None:
        """Apply one ack message (``processAck``)."""
        if self.closed:
            return
        skip_reply = sseq == 0
        if not body or body == b"+ACK" or body == b"+OK":
            if not self._process_ack_msg(sseq, dseq, dc, True):
                skip_reply = True
        elif body.startswith(b"+NXT"):
            self._process_ack_msg(sseq, dseq, dc, True)
            self.process_next_request(reply, body[4:])
            skip_reply = True
        elif body.startswith(b"-NAK"):
            self._process_nak(sseq, dseq, dc, body)
        elif body == b"+WPI":
            p = self.pending.get(sseq)
            if p is not None:
                self.pending[sseq] = (p[0], self.clock.time_ns())
                self._mark_dirty()
        elif body.startswith(b"+TERM"):
            reason = body[5:].strip().decode("utf-8", "replace")
            if not self._process_term(sseq, dseq, dc, reason, reply):
                skip_reply = True  # as for +ACK: a term of nothing pending gets no ack-ack
        if reply and not skip_reply:
            self.ports.publish(reply, "", None, b"")

    def _process_ack_msg(self, sseq: int, dseq: int, dc: int, sample: bool) -> bool:
        """Apply a positive ack; False when it is ignored without an ack-ack reply (an ack
        for a sequence we have not delivered yet, as the reference)."""
        if sseq >= self.sseq and self.lss is None and not self.cfg.flow_control:
            return False
        pending = self.pending
        if self._explicit:
            p = pending.pop(sseq, None)
            if p is not None:
                self._rep_floor = None
                if sample and self.sfreq > 0:
                    self._sample_ack(sseq, p[0], dc, p[1])
                maxp = self.maxp
                if maxp > 0 and len(pending) + 1 >= maxp:
                    self.kick()  # we were at max_ack_pending: delivery can resume
                # Ack floor (moveAckFloor): only moves when the lowest pending entry is acked.
                pdseq = p[0]
                if not pending:
                    self.adflr = self.dseq - 1
                    if self.lss is None:
                        self.asflr = self.sseq - 1
                        if self.dlv_sseq != self.asflr:
                            # sseq ran past the last delivered message (a filtered consumer
                            # looked ahead and found nothing). The reference keeps that in
                            # memory (ack-floor, reset, needAck) but reports and persists its
                            # consumer store's floor, which on an empty pending list is the
                            # store's delivered pair: the last message actually delivered.
                            self._rep_floor = (self.adflr, self.dlv_sseq)
                    else:
                        self.asflr = max(self.asflr, sseq)
                    if self._ptmr is not None:
                        self._ptmr.cancel()
                        self._ptmr = None
                elif pdseq == self.adflr + 1:
                    self.adflr, self.asflr = pdseq, sseq
                    for ss in range(sseq + 1, self.sseq):
                        q = pending.get(ss)
                        if q is not None:
                            if q[0] > 0:
                                self.adflr, self.asflr = q[0] - 1, ss - 1
                            break
            if self.rdc:
                self.rdc.pop(sseq, None)
            if self._rdq_set:
                self._remove_rdq(sseq)
            # After the redelivery count is gone (as processAckMsg): the stream's interest check
            # asks needs_ack, which counts a message with a redelivery count as still needed.
            if p is not None and self._retention:
                self.stream.ack_processed(self, sseq)
        elif not self._ack_none:  # all / flow_control
            if dseq <= self.adflr or sseq <= self.asflr:
                return True
            self._rep_floor = None
            if self.maxp > 0 and len(pending) >= self.maxp:
                self.kick()
            self.adflr, self.asflr = dseq, sseq
            acked: list[int] = []
            for seq in [s for s in pending if s <= sseq]:
                del pending[seq]
                self.rdc.pop(seq, None)
                self._remove_rdq(seq)
                acked.append(seq)
            for seq in [s for s in self.rdc if s <= sseq]:
                del self.rdc[seq]
            if sseq not in acked:
                acked.append(sseq)
            if not pending and self._ptmr is not None:
                self._ptmr.cancel()
                self._ptmr = None
            if self._retention:
                for seq in acked:
                    self.stream.ack_processed(self, seq)
        else:
            # Ack none: nothing to track; the reference answers only on interest/workqueue streams.
            return self.stream.config.retention != "limits"
        if not self._turn_acks:
            self._turn_acks = True
            self._end_turn_soon()
        return True

    def _max_deliver_floor(self, dseq: int, sseq: int) -> None:
        """A message left pending because it hit max_deliver. The floor moves in memory, but
        nats-server reports (and persists) the floor its store last saw from an ack, so the
        reported floor stays where it was until the next ack (quirk kept on purpose)."""
        if self._rep_floor is None:
            self._rep_floor = (self.adflr, self.asflr)
        self._move_ack_floor(dseq, sseq)

    def _reported_floor(self) -> tuple[int, int]:
        """The ack floor INFO shows and the state persists: nats-server's consumer store floor.
        It differs from the in-memory (adflr, asflr) after a max_deliver drop (see
        _max_deliver_floor) and when the last ack of a filtered consumer found sseq past the
        last delivered message (see _process_ack_msg); the next ack brings them together."""
        rep = self._rep_floor
        return rep if rep is not None else (self.adflr, self.asflr)

    def _move_ack_floor(self, dseq: int, sseq: int) -> None:
        if not self.pending:
            self.adflr = self.dseq - 1
            self.asflr = self.sseq - 1 if self.lss is None else max(self.asflr, sseq)
        elif dseq == self.adflr + 1:
            self.adflr, self.asflr = dseq, sseq
            # Jump to just below the next pending entry (in-order acks find it at once).
            pending = self.pending
            for ss in range(sseq + 1, self.sseq):
                p = pending.get(ss)
                if p is not None:
                    if p[0] > 0:
                        self.adflr, self.asflr = p[0] - 1, ss - 1
                    break

    def _process_nak(self, sseq: int, dseq: int, dc: int, body: bytes) -> None:
        if dseq <= self.adflr or dseq > self.dseq:
            return
        p = self.pending.get(sseq)
        if p is None:
            return
        self._advisory("MSG_NAKED", "nak", {
            "stream": self.stream_name, "consumer": self.name, "consumer_seq": dseq,
            "stream_seq": sseq, "deliveries": dc})
        arg = body[4:].strip()
        if arg:
            delay = _parse_nak_delay(arg)
            if delay is not None:
                self._remove_rdq(sseq)
                self.pending[sseq] = (p[0], self.clock.time_ns() - self.cfg.ack_wait + delay)
                self._mark_dirty()
                self._arm_ack_timer(10 * MS, force=True)
                return
        self._add_rdq([sseq])
        self.kick()

    def _process_term(self, sseq: int, dseq: int, dc: int, reason: str, reply: str) -> bool:
        """Terminate a delivery (acked, with an advisory); False when nothing was acked."""
        acked = self._process_ack_msg(sseq, dseq, dc, False)
        body: dict[str, Any] = {"stream": self.stream_name, "consumer": self.name,
                                "consumer_seq": dseq, "stream_seq": sseq, "deliveries": dc}
        if reason:
            body["reason"] = reason
        self._advisory("MSG_TERMINATED", "terminated", body)
        return acked

    def _sample_ack(self, sseq: int, dseq: int, dc: int, ts: int) -> None:
        if self.sfreq < 100 and random.randrange(100) > self.sfreq:
            return
        now = self.clock.time_ns()
        obj = {"type": "io.nats.jetstream.metric.v1.consumer_ack", "id": _nuid(),
               "timestamp": format_time(now), "stream": self.stream_name, "consumer": self.name,
               "consumer_seq": dseq, "stream_seq": sseq, "ack_time": now - ts, "deliveries": dc}
        self._send_event(METRIC_ACK_PREFIX + self.stream_name + "." + self.name, obj)

    def _notify_max_deliveries(self, sseq: int, dc: int) -> None:
        self._advisory("MAX_DELIVERIES", "max_deliver", {
            "stream": self.stream_name, "consumer": self.name, "stream_seq": sseq, "deliveries": dc})

    def _advisory(self, kind: str, type_suffix: str, body: dict) -> None:
        obj = {"type": ADV_TYPE + type_suffix, "id": _nuid(), "timestamp": format_time(self.clock.time_ns())}
        obj.update(body)
        self._send_event(ADVISORY_PREFIX + kind + "." + self.stream_name + "." + self.name, obj)

    def _send_event(self, subject: str, obj: dict) -> None:
        # Advisories are only built when someone listens (no JSON on the hot path otherwise).
        if not self.ports.has_interest(subject):
            return
        send = getattr(self.account, "send_advisory", None)
        if send is not None:
            send(subject, obj)
        else:  # pragma: no cover - account without the helper
            from natsd.jetstream.api.router import dumps
            self.ports.publish(subject, "", None, dumps(obj))

    # ------------------------------------------------------------------------------------------
    # Redelivery timer.

    def _ack_wait_for(self, sseq: int) -> int:
        bo = self.cfg.backoff
        if bo:
            i = self.rdc.get(sseq, 0)
            i = 0 if i < 0 else min(i, len(bo) - 1)
            return bo[i] + ACK_WAIT_DELAY
        return self.cfg.ack_wait + ACK_WAIT_DELAY

    def _arm_ack_timer(self, delay: int, force: bool = False) -> None:
        end = self.clock.monotonic_ns() + delay
        if self._ptmr is not None:
            if not force and self._ptmr_end <= end:
                return
            self._ptmr.cancel()
        self._ptmr_end = end
        self._ptmr = self.clock.call_later(delay, self._check_pending)

    def _check_redelivered(self) -> None:
        first = self.stream.store.state().first_seq
        for seq in [s for s in self.rdc if s < first]:
            del self.rdc[seq]

    def _check_pending(self) -> None:
        """The ack timer fired: queue expired messages for redelivery (``checkPending``)."""
        self._ptmr = None
        if self.closed or not self.cfg.ack_wait:
            return
        first = self.stream.store.state().first_seq
        now = self.clock.time_ns()
        bo = self.cfg.backoff
        ttl = self.cfg.ack_wait
        nxt = bo[-1] if bo else ttl + ACK_WAIT_DELAY
        expired: list[int] = []
        changed = False
        for seq, p in list(self.pending.items()):
            if seq < first or seq <= self.asflr:
                del self.pending[seq]
                self.rdc.pop(seq, None)
                self._remove_rdq(seq)
                if seq > self.asflr:
                    self.asflr = seq
                if p[0] > self.adflr:
                    self.adflr = p[0]
                changed = True
                continue
            elapsed, deadline = now - p[1], ttl
            if bo:
                dcount = self.rdc.get(seq, 0)
                nbi = dcount + 1
                if dcount + 1 >= len(bo):
                    dcount = len(bo) - 1
                    nbi = dcount
                deadline = bo[dcount]
                if bo[nbi] < nxt:
                    nxt = bo[nbi]
            if elapsed >= deadline:
                if seq not in self._rdq_set and not self._has_max_deliveries(seq):
                    expired.append(seq)
                changed = True
            elif deadline - elapsed < nxt:
                nxt = deadline - elapsed
        if expired:
            expired.sort()
            self._add_rdq(expired)
            off = now - self.pending[expired[0]][1]
            for seq in expired:
                p = self.pending.get(seq)
                if p is not None:
                    self.pending[seq] = (p[0], p[1] + off)
            self.kick()
        if self.pending:
            self._arm_ack_timer(max(nxt, 0) + ACK_WAIT_DELAY, force=True)
        else:
            self.rdq.clear()
            self._rdq_set.clear()
            self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
        if changed:
            self._mark_dirty()

    def _has_max_deliveries(self, seq: int) -> bool:
        if not self.maxdc:
            return False
        dc = self.rdc.get(seq, 0)
        if dc < 1:
            dc = 1
        if dc >= self.maxdc:
            if dc == self.maxdc:
                self._notify_max_deliveries(seq, dc)
            if self.maxp > 0 and len(self.pending) >= self.maxp:
                self.kick()
            p = self.pending.pop(seq, None)
            if p is not None:
                self._max_deliver_floor(p[0], seq)
            self.rdc[seq] = dc
            return True
        return False

    # ------------------------------------------------------------------------------------------
    # Config update, pause, reset.

    def update_config(self, ncfg: ConsumerConfig) -> None:
        """Apply an allowed update (already checked by :func:`check_update`)."""
        old = self.cfg
        ncfg.pause_until = ncfg.pause_until if ncfg.pause_until is not None else old.pause_until
        self.cfg = self.config = ncfg
        if ncfg.deliver_subject != old.deliver_subject:
            self.active = bool(self.ports.has_interest(ncfg.deliver_subject))
            _hub(self.account).track_push(self, old.deliver_subject)
        self.maxdc = max(ncfg.max_deliver, 0)
        self.maxp = ncfg.max_ack_pending
        self.sfreq = ncfg.sample_percent()
        if ncfg.filters() != old.filters():
            self._set_filters()
            self._recalc_pending()
        self._update_inactive_threshold()
        if self.waiting is not None:
            self.waiting.max = ncfg.max_waiting
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
        self._advisory("PAUSE", "consumer_pause", {
            "stream": self.stream_name, "consumer": self.name,
            "paused": until_ns is not None and self.clock.time_ns() < until_ns,
            # time.Time ignores omitempty in Go: the zero time is written out
            "pause_until": format_time(until_ns) if until_ns is not None else "0001-01-01T00:00:00Z"})
        if self._kick_timer is not None:
            self._kick_timer.cancel()
            self._kick_timer = None
        self._update_pause_timer()
        self.kick()

    def reset(self, seq: int) -> int:
        """CONSUMER.RESET (ADR-60): restart delivery at ``seq`` (0 = ack floor + 1). Drops
        pending and redelivery state; consumer sequences restart at 1. Raises
        CONSUMER_INVALID_RESET (10204) as the reference."""
        cfg = self.cfg
        if seq == 0:
            seq = self.asflr + 1
        elif cfg.deliver_policy == "all":
            pass
        elif cfg.deliver_policy == "by_start_sequence":
            if seq < cfg.opt_start_seq:
                raise ApiErrors.CONSUMER_INVALID_RESET(err="below start seq")
        elif cfg.deliver_policy == "by_start_time":
            if seq < self._seq_from_time(cfg.opt_start_time or 0):
                raise ApiErrors.CONSUMER_INVALID_RESET(err="below start time")
        else:
            raise ApiErrors.CONSUMER_INVALID_RESET(err="not allowed")
        if seq <= 0:
            seq = 1
        self.pending.clear()
        self.rdc.clear()
        self.rdq.clear()
        self._rdq_set.clear()
        self.lss = None
        self.sseq, self.dseq = seq, 1
        self.adflr, self.asflr = 0, seq - 1
        self._rep_floor = None
        self.dlv_sseq = seq - 1
        self.ldt = self.lat = 0
        if self._ptmr is not None:
            self._ptmr.cancel()
            self._ptmr = None
        self._recalc_pending()
        self._mark_dirty()
        if self.stream.config.retention == "interest":
            check = getattr(self.stream, "check_interest", None)
            if check is not None:
                check()
        self.kick()
        return seq

    def _on_reset_request(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        if not reply or self.closed:
            return
        from natsd.jetstream.api.router import dumps, error_envelope, resp
        import json
        try:
            if hdr and _required_level_too_high(hdr):
                raise ApiErrors.REQUIRED_API_LEVEL()
            seq = 0
            if payload.strip():
                try:
                    req = json.loads(payload)
                except ValueError as e:
                    raise ApiErrors.INVALID_JSON(err=str(e)) from None
                if isinstance(req, dict):
                    v = req.get("seq", 0)
                    seq = int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0
            rs = self.reset(seq)
            body = resp("consumer_reset_response", self.info())
            body["reset_seq"] = rs
        except ApiError as err:
            body = error_envelope("consumer_reset_response", err)
        self.ports.publish(reply, "", None, dumps(body))

    def meta(self) -> dict:
        """What the consumer store persists next to the state (like the reference's meta.inf)."""
        return {"stream_name": self.stream_name, "name": self.name,
                "created": format_time(self.created_ns), "config": self.cfg.to_json()}

    # ------------------------------------------------------------------------------------------
    # Lifecycle.

    def _stop_common(self) -> None:
        self.closed = True
        for t in (self._ptmr, self._hb_timer, self._dtmr, self._kick_timer, self._wait_timer, self._disk_timer):
            if t is not None:
                t.cancel()
        self._ptmr = self._hb_timer = self._dtmr = self._kick_timer = self._wait_timer = self._disk_timer = None
        for sub in self._subs:
            try:
                sub.unsubscribe()
            except Exception:  # noqa: BLE001
                pass
        self._subs.clear()
        _hub(self.account).untrack_push(self)

    def stop(self) -> None:
        """Server/stream shutdown: flush state, keep it on disk."""
        if self.closed:
            return
        if self.store is not None and self._dirty:
            self._dirty = False
            try:
                self._hand_state()
                self.store.flush()
            except StoreError:
                pass
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
        if self.waiting:
            for wr in list(self.waiting.live_requests()):
                self.ports.publish(wr.reply, "", D.CONSUMER_DELETED, b"")
            self.waiting.clear()
        self._stop_common()
        if self.store is not None:
            try:
                self.store.delete()
            except StoreError:
                pass
        if advisory:
            self._advisory("DELETED", "consumer_action", {
                "stream": self.stream_name, "consumer": self.name, "action": "delete"})


def _required_level_too_high(hdr: bytes) -> bool:
    """``Nats-Required-Api-Level: N`` above the level we implement (the reference answers 412)."""
    from natsd.jetstream.api.router import find_header
    from natsd.jetstream.models import JS_API_LEVEL
    v = find_header(hdr, "Nats-Required-Api-Level")
    if v is None:
        return False
    try:
        return int(v) > JS_API_LEVEL
    except ValueError:
        return True


def _credit(wq: WaitQueue | None, wr: PullRequest) -> None:
    """Give back a message's worth to a request we popped but could not use yet."""
    if wq is None:
        return
    wq.credit(wr)


def _parse_nak_delay(arg: bytes) -> int | None:
    if arg[:1] == b"{":
        import json
        try:
            d = json.loads(arg)
            v = d.get("delay", 0) if isinstance(d, dict) else None
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        except ValueError:
            return None
        return None
    return _parse_go_duration(arg.decode("ascii", "replace"))


_UNITS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": MS, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def _parse_go_duration(s: str) -> int | None:
    """Go's time.ParseDuration for the ``-NAK 2s`` form; None when invalid."""
    import re
    s = s.strip()
    if not s:
        return None
    sign = 1
    if s[0] in "+-":
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return 0
    total = 0.0
    pos = 0
    for m in re.finditer(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)", s):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        return None
    return sign * int(total)


# ---------------------------------------------------------------------------------------------
# Account-wide plumbing.

class ConsumerHub:
    """Per-account consumer plumbing: the single ``$JS.ACK.>`` and ``$JS.FC.>`` subscriptions
    and the deliver-subject -> push consumers index used for interest changes."""

    def __init__(self, account: "JsAccount") -> None:
        self.account = account
        self.push: dict[str, list[Consumer]] = {}
        ports = account.ports
        self.subs = [
            ports.subscribe(ACK_PREFIX + ">", self._on_ack, many=self._on_acks),
            ports.subscribe(FC_PREFIX + ">", self._on_fc),
        ]
        on_interest = getattr(ports, "on_interest", None)
        if on_interest is not None:
            self.subs.append(on_interest(self._on_interest))

    def _lookup(self, stream: str, name: str) -> Consumer | None:
        s = self.account.streams.get(stream)
        if s is None:
            return None
        return s.consumers.get(name)

    def _on_ack(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> bool | None:
        # $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>     (v1, 9 tokens)
        # $JS.ACK.<domain>.<acchash>.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>[...] (v2)
        t = subject.split(".")
        n = len(t)
        if n == 9:
            stream, name, i = t[2], t[3], 4
        elif n >= 11:
            stream, name, i = t[4], t[5], 6
        else:
            return False
        s = self.account.streams.get(stream)
        o = s.consumers.get(name) if s is not None else None
        if o is None or o.cfg.ack_policy == "none":
            # The reference subscribes ack subjects per consumer taking acks: anything else has
            # no receiver, and an ack sent as a request gets "no responders" (not a timeout).
            return False
        try:
            dc, sseq, dseq = int(t[i]), int(t[i + 1]), int(t[i + 2])
        except ValueError:  # a bad token counts as 0, as the reference
            dc, sseq, dseq = _num(t[i]), _num(t[i + 1]), _num(t[i + 2])
        o.process_ack(sseq, dseq, dc, reply, payload)

    def _on_acks(self, run) -> None:
        """A run of reply-less acks (``Ports.subscribe(many=...)``, a ``natsd.protocol.events.Run``):
        ``_on_ack`` for each, in order (a client acking one message at a time sends thousands of
        these per read).

        The usual run is v1 acks to one consumer. Then the subjects are split all at once:
        joined with ``.``, the run splits into 9 tokens per ack, so the stream names are
        ``tokens[2::9]``, the delivery counts ``tokens[4::9]`` and so on; the consumer is
        looked up once and the numbers are converted with one ``map`` each. Anything else
        (v2 acks, several consumers, a bad number) takes the per-message path."""
        subjects, payloads = run.names, run.payloads
        k = len(subjects)
        if k > 1 and list(map(str.count, subjects, repeat(".", k))).count(8) == k:
            t = ".".join(subjects).split(".")
            streams, names = t[2::9], t[3::9]
            if streams.count(streams[0]) == k and names.count(names[0]) == k:
                s = self.account.streams.get(streams[0])
                o = s.consumers.get(names[0]) if s is not None else None
                if o is None:
                    return
                try:
                    dcs = list(map(int, t[4::9]))
                    sseqs = list(map(int, t[5::9]))
                    dseqs = list(map(int, t[6::9]))
                except ValueError:
                    pass
                else:
                    ack = o._process_ack_msg
                    for i in range(k):
                        body = payloads[i]
                        if o.closed:
                            return
                        if body == b"+ACK" or not body:
                            ack(sseqs[i], dseqs[i], dcs[i], True)
                        else:
                            o.process_ack(sseqs[i], dseqs[i], dcs[i], "", body)
                    return
        on_ack = self._on_ack
        for i in range(k):
            on_ack(subjects[i], "", None, payloads[i])

    def _on_fc(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        t = subject.split(".")
        if len(t) == 5:
            o = self._lookup(t[2], t[3])
        elif len(t) >= 7:
            o = self._lookup(t[4], t[5])
        else:
            return
        if o is not None:
            o.process_flow_control(subject, hdr)

    def track_push(self, o: Consumer, old_subject: str = "") -> None:
        if old_subject:
            lst = self.push.get(old_subject)
            if lst and o in lst:
                lst.remove(o)
        self.push.setdefault(o.cfg.deliver_subject, []).append(o)

    def untrack_push(self, o: Consumer) -> None:
        lst = self.push.get(o.cfg.deliver_subject)
        if lst and o in lst:
            lst.remove(o)
            if not lst:
                del self.push[o.cfg.deliver_subject]

    def _on_interest(self, subject: str, added: bool) -> None:
        lst = self.push.get(subject)
        if lst is not None:
            for o in list(lst):
                o.update_interest()
        elif "*" in subject or ">" in subject:
            for lst in list(self.push.values()):
                for o in list(lst):
                    if subject_matches(subject, o.cfg.deliver_subject):
                        o.update_interest()


def _num(tok: str) -> int:
    try:
        return int(tok)
    except ValueError:
        return 0


def _hub(account: Any) -> ConsumerHub:
    hub = getattr(account, "consumer_hub", None)
    if hub is None:
        hub = ConsumerHub(account)
        account.consumer_hub = hub
    return hub


def setup_account(js_account: "JsAccount") -> None:
    """Called once per JetStream account: ack/flow-control subscriptions, interest tracking and
    the consumer API handlers on the account's router."""
    _hub(js_account)
    from natsd.jetstream.api.consumers import register
    register(js_account.router)


def recover_consumers(stream: Any) -> None:
    """Re-create the consumers persisted with ``stream`` (after the stream was recovered)."""
    from natsd.jetstream.api.consumers import recover_consumer
    try:
        names = stream.store.consumer_names()
    except StoreError:
        return
    for name in names:
        try:
            recover_consumer(stream, name)
        except (ApiError, StoreError, ValueError, KeyError, TypeError):
            # A consumer whose config no longer loads is skipped, not fatal for the stream.
            continue

