"""natsd.server.transport.busypoll: the window each request opens, driven by a fake clock and a list for
the loop's ready queue (no sockets, no loop)."""

from __future__ import annotations

import os

import pytest

from natsd.server.transport import busypoll
from natsd.server.transport.busypoll import DEFAULT_WINDOW_NS, BusyPoll


class Loop:
    """A fake clock and ready queue: ``run_pass`` runs what the last pass scheduled."""

    def __init__(self) -> None:
        self.now = 1_000_000
        self.ready: list = []

    def call_soon(self, cb) -> None:
        self.ready.append(cb)

    def run_pass(self, advance_ns: int) -> int:
        self.now += advance_ns
        todo, self.ready = self.ready, []
        for cb in todo:
            cb()
        return len(todo)


def make(window_ns: int = 200_000) -> tuple[Loop, BusyPoll]:
    lp = Loop()
    return lp, BusyPoll(window_ns, lp.call_soon, now_ns=lambda: lp.now)


def test_a_request_keeps_the_loop_polling_for_the_window_then_it_stops():
    lp, bp = make(200_000)
    assert not bp.running and lp.ready == []
    bp.arm()
    assert bp.running and len(lp.ready) == 1
    # Passes of 30 µs each: still inside the window until 200 µs have gone by.
    passes = 0
    while lp.ready:
        lp.run_pass(30_000)
        passes += 1
    assert passes == 7  # 30..180 µs re-schedule (6 passes), the one at 210 µs stops
    assert bp.passes == 6
    assert not bp.running
    # Idle now: nothing scheduled, nothing runs.
    assert lp.run_pass(10**9) == 0


def test_each_request_reopens_the_window_and_one_callback_runs_at_a_time():
    lp, bp = make(100_000)
    bp.arm()
    lp.run_pass(60_000)
    bp.arm()  # a second request at 60 µs: the window now ends at 160 µs
    bp.arm()
    assert len(lp.ready) == 1  # never two spinning callbacks
    lp.run_pass(90_000)  # 150 µs: still open
    assert bp.running and len(lp.ready) == 1
    lp.run_pass(20_000)  # 170 µs: closed
    assert not bp.running and lp.ready == [] and bp.misses == 1


def test_a_zero_window_never_schedules_anything():
    lp, bp = make(0)
    bp.arm()
    assert lp.ready == [] and not bp.running
    lp2 = Loop()
    assert BusyPoll(-5, lp2.call_soon).window_ns == 0


def test_stop_ends_the_window_at_the_next_pass():
    lp, bp = make(10**9)
    bp.arm()
    lp.run_pass(1)
    bp.stop()
    lp.run_pass(1)
    assert not bp.running and lp.ready == []


@pytest.mark.parametrize("cpus,window", [({0}, 0), ({0, 1}, DEFAULT_WINDOW_NS), ({0, 1, 2, 3}, DEFAULT_WINDOW_NS)])
def test_the_default_is_off_on_a_single_cpu(monkeypatch, tmp_path, cpus, window):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: cpus)
    assert busypoll.default_window_ns(str(tmp_path)) == window  # (no cgroup files: no quota)


@pytest.mark.parametrize(
    "files,quota,window",
    [
        ({"cpu.max": "max 100000\n"}, None, DEFAULT_WINDOW_NS),
        ({"cpu.max": "150000 100000\n"}, 1.5, 0),  # docker --cpus 1.5 (cgroup v2)
        ({"cpu.max": "400000 100000\n"}, 4.0, DEFAULT_WINDOW_NS),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None, DEFAULT_WINDOW_NS),
        ({"cpu/cpu.cfs_quota_us": "50000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 0.5, 0),  # (v1)
        ({"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 2.0, DEFAULT_WINDOW_NS),
    ],
)
def test_a_container_cpu_quota_under_two_cpus_turns_it_off(monkeypatch, tmp_path, files, quota, window):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert busypoll.cpu_quota(str(tmp_path)) == quota
    assert busypoll.default_window_ns(str(tmp_path)) == window


def test_sparse_requests_stop_spinning_after_the_first_miss():
    lp, bp = make(100_000)
    bp.arm()  # the first request spins (credit 1)
    while lp.ready:
        lp.run_pass(30_000)
    assert bp.misses == 1 and bp.credit <= 0
    # Requests a millisecond apart: a window would never catch them, so none opens.
    for _ in range(20):
        lp.now += 1_000_000
        bp.arm()
        assert lp.ready == [] and not bp.running
    assert bp.passes == 3 and bp.misses == 1


def test_requests_within_a_window_of_each_other_earn_the_spinning_back():
    lp, bp = make(100_000)
    bp.arm()
    while lp.ready:
        lp.run_pass(30_000)
    assert bp.credit == 1 - busypoll.MISS_COST
    # A client that became busy: requests 50 µs apart, read with the loop blocked (no spin).
    armed_at = None
    for i in range(10):
        lp.now += 50_000
        bp.arm()
        if bp.running:
            armed_at = i
            break
    # the first comes 170 µs after the last request (no credit), then -2 -> -1 -> 0 -> 1
    assert armed_at == 3
    # From now on every request lands inside the window: hits, credit up to CREDIT_MAX.
    for _ in range(20):
        lp.run_pass(50_000)
        bp.arm()
    assert bp.hits == 20 and bp.credit == busypoll.CREDIT_MAX and bp.running


def test_a_mostly_hitting_client_keeps_spinning_a_mostly_missing_one_does_not():
    lp, bp = make(100_000)

    def request_after(gap_ns):
        # the loop passes until the request: 25 µs each while spinning, else one jump
        end = lp.now + gap_ns
        while lp.ready and lp.now + 25_000 <= end:
            lp.run_pass(25_000)
        if lp.ready and lp.now < end:
            lp.run_pass(end - lp.now)
        lp.now = max(lp.now, end)
        bp.arm()

    for i in range(200):  # one in ten requests comes late (500 µs)
        request_after(500_000 if i % 10 == 9 else 60_000)
    assert bp.running and bp.credit > 0 and bp.misses == 20
    for _ in range(20):  # then every other request comes late
        request_after(60_000)
        request_after(500_000)
    assert not bp.running or bp.credit <= 0
    spun = bp.passes
    for _ in range(20):
        request_after(500_000)
    assert bp.passes - spun <= 4  # at most the window the credit had left
