"""natsd.testing.clock: the frozen and the flowing TestClock, and the crash scope (issue 26)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import pytest

from natsd.testing.clock import ClockScope, TestClock


async def test_frozen_clock_fires_in_deadline_order_with_time_pinned():
    c = TestClock()
    seen = []
    c.call_later(30 * 10**9, lambda: seen.append(("b", c.monotonic_ns())))
    c.call_later(10 * 10**9, lambda: seen.append(("a", c.monotonic_ns())))
    t0 = c.monotonic_ns()
    await asyncio.sleep(0.01)
    assert seen == [] and c.monotonic_ns() == t0  # frozen between advances
    c.advance(dt.timedelta(seconds=29))
    assert seen == [("a", t0 + 10 * 10**9)]
    c.advance(1)
    assert [s[0] for s in seen] == ["a", "b"] and seen[1][1] == t0 + 30 * 10**9
    assert abs(c.time_ns() - time.time_ns()) > 29 * 10**9  # wall time moved with it
    with pytest.raises(ValueError):
        c.advance(-1)


async def test_flowing_clock_follows_real_time_and_jumps():
    c = TestClock(flowing=True)
    fired = asyncio.Event()
    order = []
    c.call_later(20_000_000, lambda: (order.append("real"), fired.set()))  # 20 ms of real time
    c.call_later(3600 * 10**9, lambda: order.append("hour"))
    t0 = c.monotonic_ns()
    await asyncio.wait_for(fired.wait(), 2)  # fired by the loop, nobody advanced
    assert c.monotonic_ns() - t0 >= 20_000_000
    pinned = []
    before = c.monotonic_ns()
    c.call_later(1800 * 10**9, lambda: pinned.append(c.monotonic_ns()))
    c.advance(3600)
    assert order == ["real", "hour"]
    assert before + 1800 * 10**9 <= pinned[0] < before + 1801 * 10**9  # the clock read its deadline
    assert c.monotonic_ns() >= before + 3600 * 10**9
    assert c.pending_timers() == 0


async def test_dropped_scope_silences_its_timers():
    c = TestClock()
    scope = ClockScope(c)
    hits = []
    scope.call_later(10**9, lambda: hits.append("old server"))
    c.call_later(10**9, lambda: hits.append("test"))
    scope.drop()
    c.advance(2)
    assert hits == ["test"]
