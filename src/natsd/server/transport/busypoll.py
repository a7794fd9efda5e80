"""Busy polling after a request: keep the loop awake for a short window so the next request of a
synchronous client is read as soon as it lands, instead of after a wake-up from ``epoll_wait``.

Why: a synchronous client (``js.publish``, ``kv.put``, a request/reply caller) sends its next
request a few tens of microseconds after it reads our answer. An event loop blocked in
``epoll_wait`` then pays the kernel's wake-up of an idle thread on every request (on this project's
2-core machines that was ~25 µs of a ~125 µs round trip, measured with ``bench/run.py kvput``).
nats-server does not pay it: the Go scheduler spins its idle threads for a while before parking
them. Doing the same here, for a bounded window after each request, turned ``kvput`` from 0.93x
nats-server into ~1.3x, at the cost of CPU time while the window runs (the spin is on our own
core; it is what nats-server's CPU figure for the same workload already contains).

Only while it pays: a request read while the window is open is a hit (the spin saved a wake-up)
and earns credit; a window that runs out without one is a miss and costs more than a hit earns.
Without credit a request opens no window, so requests farther apart than the window (an
occasional ``kv.put``, a quiet service) cost no spinning after the first miss; requests that
follow each other within a window earn the credit back even while nothing spins.

How: :meth:`BusyPoll.arm` (called by a client connection when a read ended with a request, i.e. a
PUB/HPUB with a reply subject) opens a window of ``window_ns``. While it is open a callback
re-schedules itself with ``call_soon``, so every loop pass has something ready and the loop polls
the sockets with a zero timeout instead of blocking; incoming data is handled within the same
pass. Timers and every other callback run as usual in between. When the window ends without a new
``arm`` the callback stops and the loop blocks again: an idle server costs nothing.

Off (``window_ns`` 0) with ``busy_poll: false`` in the configuration file, and by default when the
process may use less than two CPUs (its CPU affinity, or a container's CPU quota): there the spin
would take the CPU time the clients need to answer.
``now_ns`` is injected (a monotonic clock in the server; a fake in tests): the window is about real
CPU wake-ups, so it never follows a test's manual protocol clock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

__all__ = ["BusyPoll", "DEFAULT_WINDOW_NS", "cpu_quota", "default_window_ns"]

#: The window after each request. A synchronous client turns around in ~50-100 µs on the
#: reference machine; 200 µs covers it with margin (100 µs caught fewer: bench/README.md).
DEFAULT_WINDOW_NS = 200_000


#: Hits count +1 up to CREDIT_MAX; a window that runs out costs MISS_COST (so after a long run of
#: hits a few misses in a row stop the spinning).
CREDIT_MAX = 8
MISS_COST = 3


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def cpu_quota(cgroup_root: str = "/sys/fs/cgroup") -> float | None:
    """The CPUs' worth of time this container may use (a cgroup CPU quota: ``docker --cpus``,
    a Kubernetes limit), or None without one. cgroup v2 ``cpu.max`` ("50000 100000"), else v1
    ``cpu/cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (-1: none)."""
    v2 = _read(os.path.join(cgroup_root, "cpu.max")).split()
    if len(v2) == 2:
        quota, period = v2
    else:
        quota = _read(os.path.join(cgroup_root, "cpu", "cpu.cfs_quota_us"))
        period = _read(os.path.join(cgroup_root, "cpu", "cpu.cfs_period_us"))
    try:
        q, p = int(quota), int(period)
    except ValueError:  # "max", or no such files
        return None
    return q / p if q > 0 and p > 0 else None


def default_window_ns(cgroup_root: str = "/sys/fs/cgroup") -> int:
    """``DEFAULT_WINDOW_NS`` when this process may run on two CPUs or more (its affinity, and a
    container's CPU quota), else 0: off, as the spin would take the CPU its clients need."""
    try:
        ncpu: float = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        ncpu = os.cpu_count() or 1
    quota = cpu_quota(cgroup_root)
    if quota is not None:
        ncpu = min(ncpu, quota)
    return DEFAULT_WINDOW_NS if ncpu >= 2 else 0


class BusyPoll:
    """One per server: a window of busy polling that each request re-opens (see the module)."""

    __slots__ = ("window_ns", "_until", "_running", "_now", "_soon", "_last", "credit", "passes", "hits", "misses")

    def __init__(
        self, window_ns: int, call_soon: Callable[..., Any], now_ns: Callable[[], int] = time.monotonic_ns
    ) -> None:
        self.window_ns = max(window_ns, 0)
        self._until = 0
        self._running = False
        self._now = now_ns
        self._soon = call_soon
        self._last = 0  # when the last request was read
        self.credit = 1  # > 0: a request opens the window (the first one does)
        # figures for tests and benches: loop passes kept awake, requests read while spinning,
        # windows that ran out
        self.passes = self.hits = self.misses = 0

    @property
    def running(self) -> bool:
        return self._running

    def arm(self) -> None:
        """A request was read: keep polling until ``window_ns`` from now."""
        w = self.window_ns
        if not w:
            return
        now = self._now()
        if self._running:
            self.hits += 1
            if self.credit < CREDIT_MAX:
                self.credit += 1
        elif now - self._last <= w and self.credit < CREDIT_MAX:
            self.credit += 1  # (not spinning, but a window would have caught this one)
        self._last = now
        if self.credit > 0:
            self._until = now + w
            if not self._running:
                self._running = True
                self._soon(self._tick)

    def stop(self) -> None:
        """Close the window (server shutdown): the pending pass, if any, is the last."""
        self._until = 0

    def _tick(self) -> None:
        if self._now() < self._until:
            self.passes += 1
            self._soon(self._tick)
        else:
            self._running = False
            if self._until:  # (not a stop())
                self.misses += 1
                self.credit -= MISS_COST
