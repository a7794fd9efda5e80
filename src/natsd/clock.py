"""Time, injected.

Everything in natsd that waits (ack_wait, backoff, heartbeats, pull expiry, max_age,
inactive_threshold, ping intervals) asks a :class:`Clock` instead of calling ``time`` or
``asyncio`` directly, so tests drive time with :class:`ManualClock` and never sleep.

A clock answers three questions: what wall-clock time is it (``time_ns``, for message
timestamps), what monotonic time is it (``monotonic_ns``, for deadlines), and "call this later"
(``call_later``/``call_at``/``call_soon``). Timers are one heap per clock (asyncio's own heap for
:class:`SystemClock`), never one task per timer, so 10,000 idle consumers cost no CPU.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Callable

from natsd.protocolbase import Protocol

__all__ = ["Clock", "Timer", "SystemClock", "ManualClock"]


class Timer(Protocol):
    """A scheduled callback; ``cancel()`` is idempotent and safe after it fired."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    def time_ns(self) -> int:
        """Wall-clock time, Unix epoch nanoseconds (message timestamps, RFC 3339 times)."""

    def monotonic_ns(self) -> int:
        """Monotonic nanoseconds (deadlines; never jumps)."""

    def call_later(self, delay_ns: int, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` once, ``delay_ns`` from now (monotonic)."""

    def call_at(self, when_monotonic_ns: int, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` once at monotonic time ``when_monotonic_ns``."""

    def call_soon(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` at the end of this loop turn (used to batch work per turn)."""

    def threadsafe_soon(self) -> Callable[..., object] | None:
        """A function another thread may call as ``f(callback, *args)`` to run ``callback`` on
        this clock's loop soon (the store's writer thread reports back with it), or None when
        there is no running loop to call back (then work stays on the caller's thread)."""


class SystemClock:
    """The real clock, scheduling on the running asyncio loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def time_ns(self) -> int:
        return time.time_ns()

    def monotonic_ns(self) -> int:
        return time.monotonic_ns()

    def call_later(self, delay_ns: int, callback: Callable[[], None]) -> Timer:
        return self.loop.call_later(max(delay_ns, 0) / 1e9, callback)

    def call_at(self, when_monotonic_ns: int, callback: Callable[[], None]) -> Timer:
        return self.call_later(when_monotonic_ns - time.monotonic_ns(), callback)

    def call_soon(self, callback: Callable[[], None]) -> None:
        self.loop.call_soon(callback)

    def threadsafe_soon(self) -> Callable[..., object] | None:
        loop = asyncio._get_running_loop()
        return loop.call_soon_threadsafe if loop is not None else None


class _ManualTimer:
    __slots__ = ("when", "callback", "cancelled")

    def __init__(self, when: int, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that only moves when told to: ``advance(ns)`` fires due timers in order.

    ``call_soon`` callbacks run on ``run_soon()`` and at the start of every ``advance``.
    Wall time starts at ``start_time_ns`` and moves with monotonic time.

    ``soon_on_loop=True`` hands ``call_soon`` to the running asyncio loop instead: a whole
    in-process server can then run on manual time (its per-turn batching still happens every
    loop turn) while only the timers wait for ``advance``.
    """

    def __init__(
        self, start_time_ns: int = 1_700_000_000 * 10**9, start_monotonic_ns: int = 10**12, soon_on_loop: bool = False
    ) -> None:
        self._mono = start_monotonic_ns
        self._wall_offset = start_time_ns - start_monotonic_ns
        self._heap: list[tuple[int, int, _ManualTimer]] = []
        self._seq = itertools.count()
        self._soon: list[Callable[[], None]] = []
        self._soon_on_loop = soon_on_loop

    def time_ns(self) -> int:
        return self._mono + self._wall_offset

    def monotonic_ns(self) -> int:
        return self._mono

    def call_later(self, delay_ns: int, callback: Callable[[], None]) -> Timer:
        return self.call_at(self._mono + max(delay_ns, 0), callback)

    def call_at(self, when_monotonic_ns: int, callback: Callable[[], None]) -> Timer:
        t = _ManualTimer(when_monotonic_ns, callback)
        heapq.heappush(self._heap, (when_monotonic_ns, next(self._seq), t))
        return t

    def call_soon(self, callback: Callable[[], None]) -> None:
        if self._soon_on_loop:
            asyncio.get_running_loop().call_soon(callback)
        else:
            self._soon.append(callback)

    def threadsafe_soon(self) -> Callable[..., object] | None:
        # Only with soon_on_loop: a manual clock's own queue runs when a test says so, which a
        # thread could not wait for.
        loop = asyncio._get_running_loop() if self._soon_on_loop else None
        return loop.call_soon_threadsafe if loop is not None else None

    def run_soon(self) -> None:
        """Run queued ``call_soon`` callbacks (and any they queue) until none remain."""
        while self._soon:
            batch, self._soon = self._soon, []
            for cb in batch:
                cb()

    def pending_timers(self) -> int:
        return sum(1 for _, _, t in self._heap if not t.cancelled)

    def advance(self, delta_ns: int) -> None:
        """Move time forward by ``delta_ns``, firing every timer due on the way, in order."""
        target = self._mono + delta_ns
        self.run_soon()
        while self._heap and self._heap[0][0] <= target:
            when, _, t = heapq.heappop(self._heap)
            if t.cancelled:
                continue
            self._mono = max(self._mono, when)
            t.cancelled = True
            t.callback()
            self.run_soon()
        self._mono = target
        self.run_soon()

    def set_time_ns(self, wall_ns: int) -> None:
        """Jump the wall clock without moving monotonic time (clock-skew tests)."""
        self._wall_offset = wall_ns - self._mono
