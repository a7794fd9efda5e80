"""The test server's clock: manual time the test moves with ``advance(seconds)``.

:class:`TestClock` is the :class:`~natsd.clock.Clock` every timer of an in-process server is
scheduled on (ack wait, backoff, max_age, TTLs, heartbeats, pull expiry, the duplicate window,
schedules, pin timeouts, pause deadlines, lame duck pacing, client pings). It wraps
:class:`~natsd.clock.ManualClock` with ``soon_on_loop=True``: work the server batches per loop turn
still runs every turn, only timers wait for :meth:`advance`. Wall time starts at the real time, so
message timestamps look current to clients, and both move together.

Each server incarnation sees the clock through a :class:`ClockScope`: a crash drops the scope,
so the timers the dead server had armed never fire into the one recovered after it (as a killed
process takes its timers with it), while the test keeps one clock across restarts.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import heapq
import itertools
import time
from typing import Callable

from natsd.clock import Clock, ManualClock, Timer, _ManualTimer

__all__ = ["TestClock", "ClockScope"]


def _ns(seconds: float | _dt.timedelta) -> int:
    if isinstance(seconds, _dt.timedelta):
        return (seconds.days * 86400 + seconds.seconds) * 10**9 + seconds.microseconds * 1000
    if seconds < 0:
        raise ValueError("time only moves forward")
    return round(seconds * 1e9)


class _FlowingClock:
    """Real time plus an offset that only grows: timers fire as real time reaches them (on the
    loop), and :meth:`advance` jumps, firing what falls due on the way in deadline order with the
    clock pinned to each deadline while its callback runs (as :class:`ManualClock` does)."""

    def __init__(self) -> None:
        self._offset = 0
        self._wall_minus_mono = time.time_ns() - time.monotonic_ns()
        self._heap: list[tuple[int, int, _ManualTimer]] = []
        self._seq = itertools.count()
        self._pinned: int | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def monotonic_ns(self) -> int:
        return self._pinned if self._pinned is not None else time.monotonic_ns() + self._offset

    def time_ns(self) -> int:
        return self.monotonic_ns() + self._wall_minus_mono

    def call_later(self, delay_ns: int, callback: Callable[[], None]) -> Timer:
        return self.call_at(self.monotonic_ns() + max(delay_ns, 0), callback)

    def call_at(self, when_monotonic_ns: int, callback: Callable[[], None]) -> Timer:
        t = _ManualTimer(when_monotonic_ns, callback)
        heapq.heappush(self._heap, (when_monotonic_ns, next(self._seq), t))
        if self._armed_for is None or when_monotonic_ns < self._armed_for:
            self._arm()
        return t

    def call_soon(self, callback: Callable[[], None]) -> None:
        asyncio.get_running_loop().call_soon(callback)

    def threadsafe_soon(self) -> Callable[..., object] | None:
        loop = asyncio._get_running_loop()
        return loop.call_soon_threadsafe if loop is not None else None

    def _arm(self) -> None:
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
            self._armed_for = None
        if not heap:
            return
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        when = heap[0][0]
        delay = (when - self.monotonic_ns()) / 1e9
        self._handle = self._loop.call_later(max(delay, 0.0), self._fire_due)
        self._armed_for = when

    def _fire_due(self) -> None:
        self._handle = None
        self._armed_for = None
        self._run_until(self.monotonic_ns())
        self._arm()

    def _run_until(self, target: int) -> None:
        heap = self._heap
        while heap and heap[0][0] <= target:
            when, _, t = heapq.heappop(heap)
            if t.cancelled:
                continue
            t.cancelled = True
            self._pinned = max(when, self._pinned or 0)
            try:
                t.callback()
            finally:
                self._pinned = None

    def advance(self, delta_ns: int) -> None:
        target = self.monotonic_ns() + delta_ns
        self._run_until(target)
        self._offset = target - time.monotonic_ns()
        self._arm()

    def pending_timers(self) -> int:
        return sum(1 for _, _, t in self._heap if not t.cancelled)

    def set_time_ns(self, wall_ns: int) -> None:
        self._wall_minus_mono = wall_ns - self.monotonic_ns()


class TestClock:
    """Time for a test server, moved by ``advance(30)`` (30 s forward, firing every timer due on
    the way in order, each with the clock reading its own deadline).

    * ``TestClock()`` (frozen): time stands still between ``advance`` calls. Fully deterministic;
      but the client library's own timers still run in real time (see docs/testing.md), e.g. a
      fetch that gave up client-side is still a waiting pull request for the server until time
      is advanced past its ``expires``.
    * ``TestClock(flowing=True)``: time flows with the real clock and ``advance`` jumps ahead; the
      client's timers and the server's then agree, and a test jumps only over the long waits.

    ``advance`` is synchronous and runs the callbacks on the calling thread, which must be the
    server's loop thread; :meth:`InProcessServer.advance` also yields to the loop afterwards so
    what the timers sent reaches the clients.
    """

    __test__ = False  # not a pytest test class despite its name

    def __init__(self, start_time_ns: int | None = None, *, flowing: bool = False) -> None:
        self.flowing = flowing
        self._impl: ManualClock | _FlowingClock
        if flowing:
            self._impl = _FlowingClock()
            if start_time_ns is not None:
                self._impl.set_time_ns(start_time_ns)
        else:
            self._impl = ManualClock(
                start_time_ns=time.time_ns() if start_time_ns is None else start_time_ns, soon_on_loop=True
            )

    # -- the Clock protocol --------------------------------------------------------------------
    def time_ns(self) -> int:
        return self._impl.time_ns()

    def monotonic_ns(self) -> int:
        return self._impl.monotonic_ns()

    def call_later(self, delay_ns: int, callback: Callable[[], None]) -> Timer:
        return self._impl.call_later(delay_ns, callback)

    def call_at(self, when_monotonic_ns: int, callback: Callable[[], None]) -> Timer:
        return self._impl.call_at(when_monotonic_ns, callback)

    def call_soon(self, callback: Callable[[], None]) -> None:
        self._impl.call_soon(callback)

    def threadsafe_soon(self) -> Callable[..., object] | None:
        return self._impl.threadsafe_soon()

    # -- control ---------------------------------------------------------------------------------
    def advance(self, seconds: float | _dt.timedelta) -> None:
        """Move time forward by ``seconds`` (a number or a ``timedelta``)."""
        self._impl.advance(_ns(seconds))

    def pending_timers(self) -> int:
        """How many timers are armed and not cancelled (for assertions such as "nothing left")."""
        return self._impl.pending_timers()

    def set_wall_time(self, when: float | _dt.datetime) -> None:
        """Jump the wall clock (message timestamps, RFC 3339 times) without moving deadlines."""
        if isinstance(when, _dt.datetime):
            when = when.timestamp()
        self._impl.set_time_ns(round(when * 1e9))


class _ScopedTimer:
    __slots__ = ("inner",)

    def __init__(self, inner: Timer) -> None:
        self.inner = inner

    def cancel(self) -> None:
        self.inner.cancel()


class ClockScope:
    """One server incarnation's view of a clock: :meth:`drop` makes every timer and per-turn
    callback it scheduled a no-op (a crashed server's timers die with it)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.alive = True

    def _guard(self, callback: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            if self.alive:
                callback()

        return run

    def time_ns(self) -> int:
        return self.clock.time_ns()

    def monotonic_ns(self) -> int:
        return self.clock.monotonic_ns()

    def call_later(self, delay_ns: int, callback: Callable[[], None]) -> Timer:
        return self.clock.call_later(delay_ns, self._guard(callback))

    def call_at(self, when_monotonic_ns: int, callback: Callable[[], None]) -> Timer:
        return self.clock.call_at(when_monotonic_ns, self._guard(callback))

    def call_soon(self, callback: Callable[[], None]) -> None:
        self.clock.call_soon(self._guard(callback))

    def threadsafe_soon(self) -> Callable[..., object] | None:
        post = self.clock.threadsafe_soon()
        if post is None:
            return None

        def guarded(callback: Callable[..., object], *args: object) -> object:
            def run() -> None:
                if self.alive:
                    callback(*args)

            return post(run)

        return guarded

    def drop(self) -> None:
        self.alive = False
