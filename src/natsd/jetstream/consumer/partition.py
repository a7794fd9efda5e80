"""Per-key ordered parallel pull consumers (``natsd.partition_key`` consumer metadata).

Pulsar's Key_Shared, Kafka's partitions, on one JetStream pull consumer: many clients pull, and

* at most **one message per key is in flight** (delivered, not yet acked, terminated or given
  up at max_deliver), so two clients never hold messages of one key at once;
* each key is delivered **in stream order**, across redeliveries and naks (the next message of a
  key waits until the one in flight is done; a nak'd or timed-out one is redelivered first);
* keys spread over every client that pulls: a blocked key does not hold up the others (the
  consumer looks past it, up to :data:`LOOKAHEAD` messages);
* a key **sticks to its client** while that client has a pull request waiting; when it has none
  (its requests expired, it went away, it is between fetches) the key goes to whoever pulls.
  The move never reorders a key: it only happens between two messages of the key.

The key (``natsd.partition_key``):

``{{wildcard(n)}}``  the subject token that the n-th ``*`` of the consumer's filter subject
                     matches (``orders.*.>`` and ``{{wildcard(1)}}``: ``orders.<key>...``);
``header:<Name>``    the value of that header (a message without it has no order constraint).

How it sits on the consumer: the delivery pass asks :meth:`Partitions.peek` for the next new
message instead of reading at the cursor (the fast paths are off for these consumers); the
redelivery queue goes first as for any consumer (a redelivered message is its key's one in
flight, so it never reorders the key). A message read past a blocked key waits in that key's
queue; others are delivered *ahead* of it, and the cursor (what a restart resumes from) stays
at the lowest message not delivered yet. Pending entries may sit above the delivered cursor.
After a restart the messages in flight are the pending ones; a message acked ahead of the
cursor on a limits or interest stream can be delivered once more (in key order), as any
JetStream consumer may redeliver after a crash; on a work queue acked messages are gone.
num_pending counts messages from the cursor, so it includes those delivered ahead of it.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from natsd.store.base import MsgNotFound, StoreEOF, StoreMsg
from natsd.jetstream.features.keyspec import KeySpec

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.consumer.core import Consumer
    from natsd.store.base import StreamStore

__all__ = ["LOOKAHEAD", "Partitions", "attach"]

#: How many messages may wait in key queues (read past the cursor, their key in flight); the
#: consumer reads no further until some go.
LOOKAHEAD = 20_000


class Partitions:
    """The per-key side of one pull consumer (``o.partitions``).

    Messages are read from the stream once, in order (``frontier``); one whose key is in flight
    (or has older messages waiting) joins its key's queue (``queued``). A pick takes the oldest
    queued message whose key is free, else reads on. The consumer's cursor (``t.sseq``, and the
    delivered pair a restart resumes from) is the lowest message not delivered yet."""

    def __init__(self, o: Consumer, spec: KeySpec) -> None:
        self.o = o
        self.spec = spec
        self.inflight: dict[str, int] = {}  # key -> the stream seq in flight (checked lazily)
        self.owner: dict[str, str] = {}  # key -> client (pull request reply subject)
        self.queued: dict[str, deque[int]] = {}  # key -> seqs read but not delivered, in order
        self.nqueued = 0
        self.frontier = 0  # next seq to read from the stream
        self._cur = -1  # t.sseq as last set here (else: re-read)

    # -- state ---------------------------------------------------------------------------------

    def _restart(self) -> None:
        """Start over from the cursor (first use, a restart, a reset or purge moved it): the keys
        in flight are those of the pending messages."""
        o = self.o
        t = o.t
        store = o.stream.store
        self.inflight.clear()
        self.queued.clear()
        self.nqueued = 0
        self.frontier = t.sseq
        self._cur = t.sseq
        for seq in sorted(t.pending):
            try:
                sm = store.load_msg(seq)
            except (MsgNotFound, StoreEOF):
                continue
            self.inflight[self.spec.key(sm)] = seq

    def _busy(self, key: str) -> bool:
        seq = self.inflight.get(key)
        if seq is None:
            return False
        if seq in self.o.t.pending:
            return True
        del self.inflight[key]  # acked, terminated, dropped at max_deliver, or gone
        return False

    def fix_floor(self) -> None:
        """After an ack: the ack floor as the tracking moves it assumes deliveries in stream
        order; here a later message may be delivered (and acked) before an earlier one, so the
        floor is what is really done: below the lowest pending message and the cursor."""
        t = self.o.t
        pending = t.pending
        if pending:
            low_s = min(pending)
            low_d = min(p[0] for p in pending.values())
            t.asflr = min(low_s, t.sseq) - 1
            t.adflr = low_d - 1
        else:
            t.asflr = t.sseq - 1
            t.adflr = t.dseq - 1
        t.rep_floor = None

    def _lowest_undelivered(self) -> int:
        low = self.frontier
        for q in self.queued.values():
            low = min(low, q[0])
        return low

    # -- the pick ------------------------------------------------------------------------------

    def peek(self, checked: set[str]) -> Any:
        """The next new message and the request that takes it: ``("ahead", sm, 1)`` (the cursor
        is kept here) with that request moved to the head of the wait queue; ``None`` when
        nothing can go now."""
        o = self.o
        t = o.t
        if t.sseq != self._cur:
            self._restart()
        pull = o.pull
        if pull is None:
            return None
        wq = pull.wq
        now = o.clock.monotonic_ns()
        # The live requests a message can go to (not expired, no byte budget to check, with
        # interest), in serving order.
        live: list[Any] = []
        clients: set[str] = set()
        for wr in wq.q:
            if wr.gone or (wr.expires and now >= wr.expires) or wr.b > 0:
                continue
            if wr.reply not in checked:
                if not o.ports.has_interest(wr.reply):
                    continue
                checked.add(wr.reply)
            live.append(wr)
            clients.add(wr.reply)
        if not live:
            return None
        store = o.stream.store
        sm = self._from_queues(store)
        if sm is None:
            sm = self._read_on(store)
            if sm is None:
                return None
        key = self.spec.key(sm)
        owner = self.owner.get(key)
        chosen = next((w for w in live if w.reply == owner), live[0]) if owner in clients else live[0]
        reply = chosen.reply
        while wq.head() is not chosen:  # the chosen request to the head, where the pass takes it
            wq.cycle()
        self.inflight[key] = sm.seq
        self.owner[key] = reply
        if len(self.owner) > 4 * LOOKAHEAD:
            self.owner.clear()  # (forget idle keys' owners; they stick again on delivery)
        low = self._lowest_undelivered()
        if low > t.sseq:  # everything below is delivered (or not for this consumer)
            t.sseq = low
            t.dlv_sseq = low - 1
        self._cur = t.sseq
        return ("ahead", sm, 1)

    def _from_queues(self, store: StreamStore) -> StoreMsg | None:
        """The oldest queued message whose key is free (None: none)."""
        best_key = ""
        best = 0
        for key, q in self.queued.items():
            if (not best or q[0] < best) and not self._busy(key):
                best, best_key = q[0], key
        while best:
            q = self.queued[best_key]
            q.popleft()
            self.nqueued -= 1
            if not q:
                del self.queued[best_key]
            try:
                return store.load_msg(best)
            except (MsgNotFound, StoreEOF):
                best = q[0] if q else 0  # removed meanwhile (limits, a delete): the next one
        return None

    def _read_on(self, store: StreamStore) -> StoreMsg | None:
        """Read from the frontier to the first message whose key is free and has nothing queued."""
        o = self.o
        t = o.t
        filters = o.filters
        fl = o.single_filter
        while self.nqueued < LOOKAHEAD:
            try:
                if len(filters) <= 1:
                    sm = store.load_next_msg(fl, self.frontier)
                else:
                    first = min(
                        (store.load_next_msg(f, self.frontier) for f in filters if _has_next(store, f, self.frontier)),
                        key=lambda m: m.seq,
                        default=None,
                    )
                    if first is None:
                        raise StoreEOF()
                    sm = first
            except StoreEOF:
                if not self.queued:
                    # Nothing waits: the cursor is at the end, as any consumer's.
                    last = store.state().last_seq
                    if t.sseq <= last:
                        t.sseq = last + 1
                        self._cur = t.sseq
                    self.frontier = max(self.frontier, t.sseq)
                return None
            self.frontier = sm.seq + 1
            if sm.seq in t.pending:  # in flight since before a restart
                continue
            key = self.spec.key(sm)
            if key in self.queued or self._busy(key):
                self.queued.setdefault(key, deque()).append(sm.seq)
                self.nqueued += 1
                continue
            return sm
        return None


def _has_next(store: StreamStore, f: str, seq: int) -> bool:
    try:
        store.load_next_msg(f, seq)
    except StoreEOF:
        return False
    return True


def attach(o: Consumer, spec: KeySpec | None) -> Partitions | None:
    return Partitions(o, spec) if spec is not None else None
