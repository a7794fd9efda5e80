"""ManualClock: timers fire in order only when time is advanced; call_soon batching."""

from __future__ import annotations

import asyncio

from natsd.clock import ManualClock


def test_timers_fire_in_order_only_when_advanced():
    clock = ManualClock()
    fired: list[str] = []
    clock.call_later(2_000, lambda: fired.append("b"))
    clock.call_later(1_000, lambda: fired.append("a"))
    t = clock.call_later(3_000, lambda: fired.append("cancelled"))
    t.cancel()
    clock.advance(999)
    assert fired == []
    clock.advance(1)
    assert fired == ["a"]
    clock.advance(10_000)
    assert fired == ["a", "b"]
    assert clock.pending_timers() == 0


def test_timer_sees_its_own_due_time_and_can_reschedule():
    clock = ManualClock()
    seen: list[int] = []
    start = clock.monotonic_ns()

    def tick():
        seen.append(clock.monotonic_ns() - start)
        if len(seen) < 3:
            clock.call_later(100, tick)

    clock.call_later(100, tick)
    clock.advance(1_000)
    assert seen == [100, 200, 300]
    assert clock.monotonic_ns() - start == 1_000


def test_wall_time_moves_with_monotonic_and_can_jump():
    clock = ManualClock(start_time_ns=5_000)
    clock.advance(10)
    assert clock.time_ns() == 5_010
    clock.set_time_ns(1)
    assert clock.time_ns() == 1
    assert clock.monotonic_ns() > 0


def test_call_soon_runs_on_run_soon_and_advance():
    clock = ManualClock()
    ran: list[int] = []
    clock.call_soon(lambda: (ran.append(1), clock.call_soon(lambda: ran.append(2))))
    assert ran == []
    clock.run_soon()
    assert ran == [1, 2]
    clock.call_soon(lambda: ran.append(3))
    clock.advance(0)
    assert ran == [1, 2, 3]


def test_call_soon_on_loop_runs_without_advancing():
    async def main():
        clock = ManualClock(soon_on_loop=True)
        ran = asyncio.Event()
        clock.call_soon(ran.set)
        await asyncio.wait_for(ran.wait(), 1)
        return clock

    clock = asyncio.run(main())
    assert clock.pending_timers() == 0
