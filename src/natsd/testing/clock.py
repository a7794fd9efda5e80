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

import datetime as _dt
import time
from typing import Callable

from natsd.clock import Clock, ManualClock, Timer

__all__ = ["TestClock", "ClockScope"]


def _ns(seconds: float | _dt.timedelta) -> int:
    if isinstance(seconds, _dt.timedelta):
        return (seconds.days * 86400 + seconds.seconds) * 10**9 + seconds.microseconds * 1000
    if seconds < 0:
        raise ValueError("time only moves forward")
    return round(seconds * 1e9)


class TestClock:
    """Manual time for a test server. ``advance(30)`` moves 30 s forward, firing every timer due
    on the way in order (each with the clock reading its own deadline).

    ``advance`` is synchronous and runs the callbacks on the calling thread, which must be the
    server's loop thread; :meth:`InProcessServer.advance` also yields to the loop afterwards so
    what the timers sent reaches the clients.
    """

    __test__ = False  # not a pytest test class despite its name

    def __init__(self, start_time_ns: int | None = None) -> None:
        self._manual = ManualClock(start_time_ns=time.time_ns() if start_time_ns is None else start_time_ns,
                                   soon_on_loop=True)

    # -- the Clock protocol --------------------------------------------------------------------
    def time_ns(self) -> int:
        return self._manual.time_ns()

    def monotonic_ns(self) -> int:
        return self._manual.monotonic_ns()

    def call_later(self, delay_ns: int, callback: Callable[[], None]) -> Timer:
        return self._manual.call_later(delay_ns, callback)

    def call_at(self, when_monotonic_ns: int, callback: Callable[[], None]) -> Timer:
        return self._manual.call_at(when_monotonic_ns, callback)

    def call_soon(self, callback: Callable[[], None]) -> None:
        self._manual.call_soon(callback)

    def threadsafe_soon(self) -> Callable[..., object] | None:
        return self._manual.threadsafe_soon()

    # -- control ---------------------------------------------------------------------------------
    def advance(self, seconds: float | _dt.timedelta) -> None:
        """Move time forward by ``seconds`` (a number or a ``timedelta``)."""
        self._manual.advance(_ns(seconds))

    def pending_timers(self) -> int:
        """How many timers are armed and not cancelled (for assertions such as "nothing left")."""
        return self._manual.pending_timers()

    def set_wall_time(self, when: float | _dt.datetime) -> None:
        """Jump the wall clock (message timestamps, RFC 3339 times) without moving deadlines."""
        if isinstance(when, _dt.datetime):
            when = when.timestamp()
        self._manual.set_time_ns(round(when * 1e9))


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
