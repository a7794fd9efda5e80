"""What a consumer has delivered and what is still owed an ack: a pure object, no I/O.

:class:`Tracking` holds the delivery cursor and the ack bookkeeping of one consumer, under
nats-server's names (``consumer.go``):

* ``sseq`` the next stream sequence to look at, ``dseq`` the next consumer sequence,
  ``dlv_sseq`` the stream sequence of the last first-time delivery (info ``delivered``);
* ``adflr``/``asflr`` the ack floor (consumer/stream sequence at or below which everything is
  acknowledged);
* ``pending`` stream seq -> ``(consumer seq, delivery wall ns)``, ``rdc`` stream seq ->
  redelivery count, ``rdq`` the redelivery queue (sent before new messages);
* ``lss`` the start list of a ``last_per_subject`` consumer.

It never reads a clock (callers pass ``now``), never publishes, never touches the store (the
one question it needs answered about the stream, "is this message still there", is passed in as
a function): so every rule about floors, redelivery and max_deliver is testable on its own
(``tests/unit/jetstream/test_consumer_tracking.py``). Whatever must happen on the outside after a
change (an advisory, a wake-up, a timer) is told back in the return value.

The delivery pass writes the cursor fields directly (it is the hot path: one attribute store
per field and message, no call).
"""

from __future__ import annotations

from collections import deque
from itertools import islice, repeat
from operator import itemgetter, lt
from typing import Any, Callable

from natsd.store.base import ConsumerState, Pending, SequencePair

__all__ = ["Tracking", "TrackedMap", "Expiry"]


class TrackedMap(dict):
    """The ``pending`` / ``rdc`` maps: a dict that notes the keys it changes, so a large durable
    state is written as the delta of those keys (``ConsumerStore.append_delta``) instead of
    whole. ``clear()`` asks for a whole write.

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


class Expiry:
    """What :meth:`Tracking.expire` found: ``redeliver`` (sequences queued again, oldest first),
    ``next_check`` (ns until the ack timer should fire again; -1 when nothing is pending),
    ``changed`` (the durable state changed), ``maxed`` (``(seq, delivery count)`` of messages
    that reached max_deliver now, for the MAX_DELIVERIES advisory), ``was_full`` (pending was at
    max_ack_pending before a max_deliver drop: delivery can resume)."""

    __slots__ = ("redeliver", "next_check", "changed", "maxed", "was_full")

    def __init__(self) -> None:
        self.redeliver: list[int] = []
        self.next_check = -1
        self.changed = False
        self.maxed: list[tuple[int, int]] = []
        self.was_full = False


class Tracking:
    """Delivery cursor, pending acks, redeliveries and the ack floor of one consumer."""

    __slots__ = (
        "sseq",
        "dseq",
        "adflr",
        "asflr",
        "dlv_sseq",
        "pending",
        "rdc",
        "rdq",
        "rdq_set",
        "rep_floor",
        "lss",
        "lss_resume",
        "explicit",
        "maxdc",
        "maxp",
        "dropped_ts",
    )

    def __init__(self, explicit: bool, max_deliver: int, max_ack_pending: int) -> None:
        self.sseq = 1
        self.dseq = 1
        self.adflr = 0
        self.asflr = 0
        self.dlv_sseq = 0
        self.pending: TrackedMap = TrackedMap()  # sseq -> (dseq, ts_ns)
        self.rdc: TrackedMap = TrackedMap()  # sseq -> redelivery count
        self.rdq: list[int] = []
        self.rdq_set: set[int] = set()
        #: The floor INFO shows and the state persists when it differs from (adflr, asflr);
        #: see :meth:`reported_floor`.
        self.rep_floor: tuple[int, int] | None = None
        self.lss: list[int] | None = None  # last_per_subject start list
        self.lss_resume = 0
        self.explicit = explicit
        self.maxdc = max(max_deliver, 0)
        self.maxp = max_ack_pending
        #: Delivery time (wall ns) of the last message dropped at max_deliver (0: unknown): the
        #: dead-letter copy's Natsd-Dlq-Last-Delivery (natsd.jetstream.consumer.deadletter).
        self.dropped_ts = 0

    def configure(self, explicit: bool, max_deliver: int, max_ack_pending: int) -> None:
        self.explicit = explicit
        self.maxdc = max(max_deliver, 0)
        self.maxp = max_ack_pending

    # -- positions ---------------------------------------------------------------------------------

    def start_at(self, sseq: int) -> None:
        """A new consumer (or one restarted after damage) starts delivering at ``sseq``."""
        self.sseq = sseq
        self.dseq = 1
        self.adflr = 0
        self.asflr = sseq - 1
        self.dlv_sseq = sseq - 1

    def load(self, state: ConsumerState) -> None:
        """Continue from a recovered durable state (nothing touched: the store has all of it)."""
        self.dseq = state.delivered.consumer_seq + 1
        self.sseq = state.delivered.stream_seq + 1
        self.dlv_sseq = state.delivered.stream_seq
        self.adflr = state.ack_floor.consumer_seq
        self.asflr = state.ack_floor.stream_seq
        self.pending = TrackedMap({s: (p.sequence, p.timestamp) for s, p in state.pending.items()})
        self.rdc = TrackedMap(state.redelivered)

    def clamp(self, first: int) -> None:
        """Messages below the stream's first sequence are gone (purged or expired while the
        server was down): start no lower than it."""
        if self.sseq < first:
            self.sseq = first
            if self.asflr < first - 1 and not self.pending:
                self.asflr = first - 1

    def reset(self, seq: int) -> None:
        """Restart delivery at ``seq`` with nothing pending (CONSUMER.RESET)."""
        self.pending.clear()
        self.rdc.clear()
        self.rdq.clear()
        self.rdq_set.clear()
        self.lss = None
        self.sseq, self.dseq = seq, 1
        self.adflr, self.asflr = 0, seq - 1
        self.rep_floor = None
        self.dlv_sseq = seq - 1

    def purge(self, first_seq: int, exists: Callable[[int], bool]) -> bool:
        """Everything below ``first_seq`` is gone, and pending messages for which ``exists`` is
        False too: they count as acknowledged. True when a pending entry was dropped."""
        if self.sseq < first_seq:
            self.sseq = first_seq
        if self.dlv_sseq < self.sseq - 1:
            # The reference writes its position as delivered on a purge (the next sequence it
            # would look at, which the purge may move and a search that found nothing has moved).
            self.dlv_sseq = self.sseq - 1
        if self.lss is not None:
            self.lss = [s for s in self.lss if s >= first_seq and exists(s)] or None
        dropped: list[tuple[int, int]] = []  # (delivery seq, stream seq) of the entries dropped
        before, floor = set(self.pending), self.reported_floor()
        # As the reference, pending entries are looked at only when the purge reaches the floor.
        if self.asflr < first_seq:
            self.asflr = first_seq - 1
            for seq in list(self.pending):
                if seq <= self.asflr or not exists(seq):
                    p = self.pending.pop(seq)
                    if p[0] > self.adflr:
                        self.adflr = p[0]
                    self.rdc.pop(seq, None)
                    dropped.append((p[0], seq))
        store_floor = self._store_floor_after(floor, dropped, before) if dropped else None
        if not self.pending:
            self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
        self.rep_floor = None
        if store_floor is not None and store_floor[1] > self.asflr:
            # The purge's own write of its in-memory floor is refused by the reference's store as
            # outdated (a lower stream floor): the store's floor is what INFO shows.
            self.rep_floor = store_floor
        if self.rdq:
            # As the reference, the redelivery queue keeps only sequences at or past the next one
            # to deliver: a NAKed message below it stays pending and comes back at its ack wait.
            self.rdq = [s for s in self.rdq if s in self.pending and s >= self.sseq]
            self.rdq_set = set(self.rdq)
        return bool(dropped)

    def _store_floor_after(
        self, floor: tuple[int, int], dropped: list[tuple[int, int]], pending: set[int]
    ) -> tuple[int, int]:
        """The floor nats-server's consumer store reaches when a purge hands it each dropped
        entry as an ack (its UpdateAcks): AckAll moves the floor to the entry; AckExplicit only
        when the entry is the next one above the floor (then up to the next pending one), or to
        the delivered position once nothing is pending."""
        fc, fs = floor
        for dseq, sseq in sorted(dropped):
            pending.discard(sseq)
            if dseq <= fc:
                continue
            if not self.explicit:
                fc, fs = dseq, sseq
            elif not pending:
                fc, fs = self.dseq - 1, self.dlv_sseq
            elif dseq == fc + 1:
                fc, fs = dseq, sseq
                nxt = min((s for s in pending if s > sseq), default=None)
                if nxt is not None and self.dseq - 1 > dseq:
                    p = self.pending.get(nxt)
                    if p is not None and p[0] > 0:
                        fc, fs = p[0] - 1, nxt - 1
        return fc, fs

    def forget_redelivered_below(self, first: int) -> None:
        """Redelivery counts of messages no longer in the stream (at start-up)."""
        for seq in [s for s in self.rdc if s < first]:
            del self.rdc[seq]

    # -- questions ---------------------------------------------------------------------------------

    def needs_ack(self, sseq: int) -> bool:
        """True while the consumer still needs stream message ``sseq`` (``needAck``; the filter
        is the caller's business). Messages past max_deliver stay needed."""
        if self.explicit:
            need = sseq > self.asflr and (sseq >= self.sseq or sseq in self.pending)
        else:
            need = sseq > self.asflr
        return need or sseq in self.rdc

    def reported_floor(self) -> tuple[int, int]:
        """The ack floor INFO shows and the state persists: nats-server's consumer store floor.
        It differs from the in-memory (adflr, asflr) after a max_deliver drop (see
        :meth:`max_deliver_floor`) and when the last ack of a filtered consumer found sseq past
        the last delivered message (see :meth:`ack`); the next ack brings them together."""
        rep = self.rep_floor
        return rep if rep is not None else (self.adflr, self.asflr)

    def delivered(self) -> SequencePair:
        return SequencePair(self.dseq - 1, self.dlv_sseq)

    def state(self) -> ConsumerState:
        """The durable state (store.base.ConsumerState)."""
        return ConsumerState(
            delivered=self.delivered(),
            ack_floor=SequencePair(*self.reported_floor()),
            pending={s: Pending(p[0], p[1]) for s, p in self.pending.items()},
            redelivered=dict(self.rdc),
        )

    def live_state(self) -> tuple:
        """For a store checkpoint: the live maps (read, never changed, by the store's worker
        thread) and the sequence pairs now."""
        return (self.pending, self.rdc, self.delivered(), SequencePair(*self.reported_floor()))

    # -- redelivery queue --------------------------------------------------------------------------

    def pop_rdq(self) -> None:
        seq = self.rdq.pop(0)
        self.rdq_set.discard(seq)

    def add_rdq(self, seqs: list[int]) -> None:
        for s in seqs:
            if s not in self.rdq_set:
                self.rdq.append(s)
                self.rdq_set.add(s)

    def remove_rdq(self, seq: int) -> None:
        if seq in self.rdq_set:
            self.rdq_set.discard(seq)
            self.rdq.remove(seq)

    # -- acks --------------------------------------------------------------------------------------

    def ack(self, sseq: int) -> tuple[int, int] | None:
        """An explicit ack of ``sseq``: its pending entry (returned, None when it was not
        pending) goes, the ack floor moves when it was the lowest, the redelivery count and
        queue entry go."""
        pending = self.pending
        p = pending.pop(sseq, None)
        if p is not None:
            self.rep_floor = None
            if not pending or p[0] == self.adflr + 1:
                self._move_floor(sseq, p[0])
        if self.rdc:
            self.rdc.pop(sseq, None)
        if self.rdq_set:
            self.remove_rdq(sseq)
        return p

    def ack_run(self, sseqs: list[int]) -> list[int]:
        """Explicit acks of ``sseqs``, in order: what :meth:`ack` does for each, in one loop
        (a client acking a fetched batch sends them one by one, thousands per read). Returns
        the sequences that were pending (acked)."""
        pending = self.pending
        pop = dict.pop  # TrackedMap.pop notes the key: done once for the run below
        k = len(sseqs)
        s0 = sseqs[0]
        span = sseqs[-1] - s0 + 1
        if k > 1 and span < 16 * k and s0 in pending:
            # The usual run: a fetched batch acked in order, each ack the lowest pending
            # entry (consecutive consumer sequences from the floor up; consecutive stream
            # sequences too, or for a filtered consumer ascending ones with no other entry
            # pending between them). One by one, each would move the floor onto the next;
            # only the last move is left standing.
            a = self.adflr
            if pending[s0][0] == a + 1 and (
                sseqs == list(range(s0, s0 + k))
                if span == k
                else all(map(lt, sseqs, islice(sseqs, 1, None)))
                and sum(map(pending.__contains__, range(s0, s0 + span))) == k
            ):
                try:
                    ds = list(map(itemgetter(0), map(pending.__getitem__, sseqs)))
                except KeyError:
                    ds = None
                if ds is not None and ds == list(range(a + 1, a + 1 + k)):
                    deque(map(pop, repeat(pending, k), sseqs), 0)
                    pending.touched.update(sseqs)
                    self.rep_floor = None
                    self._move_floor(sseqs[-1], a + k)
                    self._forget_redeliveries(sseqs)
                    return sseqs
        move = self._move_floor
        acked: list[int] = []
        for sseq in sseqs:
            p = pop(pending, sseq, None)
            if p is not None:
                acked.append(sseq)
                self.rep_floor = None
                if not pending or p[0] == self.adflr + 1:
                    move(sseq, p[0])
        pending.touched.update(sseqs)  # as TrackedMap.pop: every key asked for, pending or not
        self._forget_redeliveries(sseqs)
        return acked

    def _forget_redeliveries(self, sseqs: list[int]) -> None:
        rdc = self.rdc
        if rdc:
            for sseq in sseqs:
                if not rdc:
                    break
                rdc.pop(sseq, None)
        if self.rdq_set:
            for sseq in sseqs:
                self.remove_rdq(sseq)

    def _move_floor(self, sseq: int, pdseq: int) -> None:
        """The ack floor after acking ``sseq`` (consumer seq ``pdseq``), when that was the
        lowest pending entry or the last one (moveAckFloor: it moves only then)."""
        pending = self.pending
        if not pending:
            self.adflr = self.dseq - 1
            if self.lss is None:
                self.asflr = self.sseq - 1
                if self.dlv_sseq != self.asflr:
                    # sseq ran past the last delivered message (a filtered consumer looked
                    # ahead and found nothing). The reference keeps that in memory (ack
                    # floor, reset, needAck) but reports and persists its consumer store's
                    # floor, which on an empty pending list is the store's delivered pair:
                    # the last message actually delivered.
                    self.rep_floor = (self.adflr, self.dlv_sseq)
            else:
                self.asflr = max(self.asflr, sseq)
        else:
            self.adflr, self.asflr = pdseq, sseq
            for ss in range(sseq + 1, self.sseq):
                q = pending.get(ss)
                if q is not None:
                    if q[0] > 0:
                        self.adflr, self.asflr = q[0] - 1, ss - 1
                    break

    def ack_upto(self, dseq: int, sseq: int) -> list[int] | None:
        """Ack policy all / flow_control: everything up to ``sseq`` is acknowledged. Returns the
        stream sequences acked (``sseq`` included), None when the ack is below the floor."""
        if dseq <= self.adflr or sseq <= self.asflr:
            return None
        self.rep_floor = None
        self.adflr, self.asflr = dseq, sseq
        pending = self.pending
        acked: list[int] = []
        for seq in [s for s in pending if s <= sseq]:
            del pending[seq]
            self.rdc.pop(seq, None)
            self.remove_rdq(seq)
            acked.append(seq)
        for seq in [s for s in self.rdc if s <= sseq]:
            del self.rdc[seq]
        if sseq not in acked:
            acked.append(sseq)
        return acked

    def progress(self, sseq: int, now: int) -> bool:
        """``+WPI``: the ack wait of a pending message starts again at ``now``."""
        p = self.pending.get(sseq)
        if p is None:
            return False
        self.pending[sseq] = (p[0], now)
        return True

    def nak_later(self, sseq: int, due: int) -> bool:
        """``-NAK <delay>``: redeliver ``sseq`` when its ack wait runs out, counted as if it
        had been delivered at ``due`` (now - ack_wait + delay)."""
        p = self.pending.get(sseq)
        if p is None:
            return False
        self.remove_rdq(sseq)
        self.pending[sseq] = (p[0], due)
        return True

    def max_deliver_floor(self, dseq: int, sseq: int) -> None:
        """A message left pending because it hit max_deliver. The floor moves in memory, but
        nats-server reports (and persists) the floor its store last saw from an ack, so the
        reported floor stays where it was until the next ack (quirk kept on purpose)."""
        if self.rep_floor is None:
            self.rep_floor = (self.adflr, self.asflr)
        self.move_ack_floor(dseq, sseq)

    def move_ack_floor(self, dseq: int, sseq: int) -> None:
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

    # -- redelivery --------------------------------------------------------------------------------

    def drop_redelivery(self, seq: int, dc: int) -> None:
        """The head of the redelivery queue would be delivered a ``dc``-th time, past
        max_deliver: it leaves the queue and pending, keeping its count."""
        self.pop_rdq()
        self.rdc[seq] = dc - 1
        p = self.pending.pop(seq, None)
        self.dropped_ts = p[1] if p is not None else 0
        if p is not None:
            self.max_deliver_floor(p[0], seq)

    def max_delivered(self, seq: int) -> int:
        """When ``seq`` was delivered max_deliver times: drop it from pending (floor as
        :meth:`max_deliver_floor`) and return its delivery count; 0 otherwise."""
        if not self.maxdc:
            return 0
        dc = self.rdc.get(seq, 0)
        if dc < 1:
            dc = 1
        if dc < self.maxdc:
            return 0
        p = self.pending.pop(seq, None)
        self.dropped_ts = p[1] if p is not None else 0
        if p is not None:
            self.max_deliver_floor(p[0], seq)
        self.rdc[seq] = dc
        return dc

    def expire(self, now: int, first: int, ack_wait: int, backoff: list[int] | None, extra: int) -> Expiry:
        """The ack timer fired at wall time ``now`` (``checkPending``): pending messages whose
        ack wait (or backoff step) ran out are queued for redelivery, and their wait restarts
        from the oldest one's deadline; those at max_deliver are dropped instead; entries below
        the stream's ``first`` sequence or the floor are forgotten. ``extra`` is added to the
        next check's delay (the timer's grouping delay)."""
        out = Expiry()
        bo = backoff
        ttl = ack_wait
        nxt = bo[-1] if bo else ttl + extra
        pending = self.pending
        expired = out.redeliver
        maxp = self.maxp
        for seq, p in list(pending.items()):
            if seq < first or seq <= self.asflr:
                del pending[seq]
                self.rdc.pop(seq, None)
                self.remove_rdq(seq)
                if seq > self.asflr:
                    self.asflr = seq
                if p[0] > self.adflr:
                    self.adflr = p[0]
                out.changed = True
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
                if seq not in self.rdq_set:
                    full = maxp > 0 and len(pending) >= maxp
                    dc = self.max_delivered(seq)
                    if dc:
                        out.maxed.append((seq, dc))
                        out.was_full = out.was_full or full
                    else:
                        expired.append(seq)
                out.changed = True
            elif deadline - elapsed < nxt:
                nxt = deadline - elapsed
        if expired:
            expired.sort()
            self.add_rdq(expired)
            off = now - pending[expired[0]][1]
            for seq in expired:
                p = pending.get(seq)
                if p is not None:
                    pending[seq] = (p[0], p[1] + off)
        if pending:
            out.next_check = max(nxt, 0) + extra
        else:
            self.rdq.clear()
            self.rdq_set.clear()
            self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
        return out
