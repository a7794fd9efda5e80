"""When a consumer's durable state goes to its store.

Durable, file-backed consumers hand their state to the ConsumerStore once per loop turn with
activity, and the store writes it to the OS at most every :data:`STATE_WRITE_GAP` (the
reference's cadence): a crash of the process then loses at most that much ack progress.
Ephemeral and ``mem_storage`` consumers have no store and keep the state in memory only.

A small state is handed over whole; a large one (:data:`DELTA_MIN_ENTRIES` pending + redelivered
entries or more) as the delta of the entries touched since the last write
(``ConsumerStore.append_delta``), so the cost follows the changes, not the size.

The end of a turn with acks also stamps the consumer's last ack time (info ``ack_floor.
last_active``): once per turn, not per ack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from natsd.jetstream.config.consumer_config import MS
from natsd.store.base import ConsumerDelta, SequencePair, StoreError

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.consumer.core import Consumer

__all__ = ["StateWriter", "STATE_WRITE_GAP", "DELTA_MIN_ENTRIES"]

#: Minimum gap between two writes of a durable consumer's state file (nats-server: 100ms).
STATE_WRITE_GAP = 100 * MS
#: A durable state with at least this many pending + redelivered entries is written as deltas
#: (journal) instead of whole; below it a whole write costs about as little.
DELTA_MIN_ENTRIES = 2048


class StateWriter:
    """Schedules the writes of one consumer's state (see the module docstring)."""

    __slots__ = ("o", "dirty", "turn_acks", "scheduled", "last_disk", "timer")

    def __init__(self, o: "Consumer") -> None:
        self.o = o  # o.store: ConsumerStore or None (ephemeral / memory only)
        self.dirty = False  # the state changed since it was last handed over
        self.turn_acks = False  # acks arrived this loop turn (set by Acks.ack)
        self.scheduled = False  # end_turn is scheduled for this loop turn
        self.last_disk = 0  # monotonic ns of the last state write to the OS
        self.timer: Any = None  # the next write, when the last one was too recent

    def mark_dirty(self) -> None:
        """The durable state changed: write it once, at the end of this loop turn."""
        if self.o.store is None or self.dirty:
            return
        self.dirty = True
        self.end_turn_soon()

    def end_turn_soon(self) -> None:
        if not self.scheduled:
            self.scheduled = True
            self.o.clock.call_soon(self.end_turn)

    def end_turn(self) -> None:
        """Once per loop turn with activity: stamp the last ack time, write the state."""
        self.scheduled = False
        o = self.o
        if o.closed:
            return
        if self.turn_acks:
            self.turn_acks = False
            o.lat = o.clock.time_ns()
            if o.store is not None:
                self.dirty = True
        if not self.dirty or o.store is None or self.timer is not None:
            return
        now = o.clock.monotonic_ns()
        if now - self.last_disk >= STATE_WRITE_GAP:
            self._write()
        else:
            self.timer = o.clock.call_later(self.last_disk + STATE_WRITE_GAP - now, self._write)

    def _write(self) -> None:
        self.timer = None
        self.last_disk = self.o.clock.monotonic_ns()
        if self.o.store is None or self.o.closed or not self.dirty:
            return
        self.flush()

    def flush(self) -> None:
        """Hand over what changed and have the store write it (now)."""
        self.dirty = False
        store = self.o.store
        if store is None:  # (callers check: only a durable with a store writes state)
            return
        try:
            self._hand_state()
            store.flush()
        except StoreError:
            pass

    def _hand_state(self) -> None:
        """Give the store what changed since the last write: a delta of the touched entries
        for a large state, the whole state otherwise."""
        t = self.o.t
        pending, rdc = t.pending, t.rdc
        store = self.o.store
        if store is None:  # (callers check: only a durable with a store writes state)
            return
        if not pending.reset and not rdc.reset and len(pending) + len(rdc) >= DELTA_MIN_ENTRIES:
            # Lazy: the keys touched and the sequence pairs now; the store's worker thread
            # reads the entries' values (so this costs the loop nothing per entry).
            delta = ConsumerDelta(
                t.delivered(),
                SequencePair(*t.reported_floor()),
                pending.take_touched(),  # type: ignore[arg-type]
                None,  # type: ignore[arg-type]
                [],
                rdc.take_touched(),  # type: ignore[arg-type]
                None,  # type: ignore[arg-type]
                [],
            )
            store.append_delta(delta, t.live_state)
        else:
            pending.take_touched()
            rdc.take_touched()
            store.update(t.state())

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
