"""A pull consumer's queue of waiting requests, with every operation O(1) or O(log n) amortised.

nats-server keeps waiting requests in a ring and rescans it to expire requests, send idle
heartbeats, drop requests whose requester went away and sum the batch still wanted; natsd did the
same on every delivery pass, so 100,000 queued requests cost O(n) per request (43 s where the
reference needs 1.3 s). Here:

* requests are served from the head in arrival order, round-robin one message at a time (a
  request that still wants more moves to the tail), as the reference's ``waitQueue.pop``;
  the queue owns this popping (:meth:`pop`, :meth:`take_run`, :meth:`credit`);
* a request removed out of order (expired, heartbeat found no interest, answered at the end of
  the stream) is only marked ``gone`` and counted out; the deque drops it when it reaches the
  head (lazy deletion), so no removal scans the deque;
* expiry and heartbeat times sit in a heap: the next timer is its top (:meth:`next_deadline`),
  and only requests whose time has come are looked at (:meth:`due`). A heartbeat time pushed
  later by a delivery is re-queued when its old heap entry surfaces;
* ``want`` is the batch still wanted by the live requests (the reference's ``brp``), kept as
  requests are added, served and removed;
* no_wait requests to answer when the stream runs dry are kept in their own list
  (:meth:`take_eos`), so the end of a pass does not scan the queue for them.

The full scan (:meth:`live_requests` / :meth:`replace`) remains for what the reference does
rarely: consumer info, a full queue, inactivity, deletion.

Priority groups add three operations (``priority.py`` decides when): :meth:`cycle` moves the
head to the tail without serving it (a request passed over: not pinned, below its overflow
threshold); for the ``prioritized`` policy :meth:`add_sorted` inserts by ``priority`` (lower
first, FIFO among equals) and :meth:`pop_requeue` puts a request that still wants more back
behind its equals instead of at the tail. Those two scan the deque (O(n)), as the reference's
sorted list does.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.consumer.pull import PullRequest

__all__ = ["WaitQueue"]

_NO_PRIORITY = 2147483647  # a request without a priority part sorts last (math.MaxInt32)


def _priority(wr: "PullRequest") -> int:
    pg = wr.pg
    return pg.priority if pg is not None else _NO_PRIORITY


class WaitQueue:
    """Bounded queue of :class:`~natsd.jetstream.consumer.pull.PullRequest` (see the module docstring)."""

    __slots__ = ("max", "q", "last", "live", "want", "_heap", "_tick", "_eos")

    def __init__(self, max_waiting: int) -> None:
        self.max = max_waiting
        self.q: deque = deque()  # live requests in serving order, plus gone ones not yet dropped
        self.last = 0  # monotonic time of the last request received (pull activity)
        self.live = 0  # requests queued and not gone
        self.want = 0  # sum of ``n`` over live requests
        self._heap: list = []  # (time, tick, request): expiry and heartbeat times
        self._tick = 0
        self._eos: list = []  # no_wait requests to answer at the end of the stream

    def __len__(self) -> int:
        return self.live

    def __bool__(self) -> bool:
        return self.live > 0

    def is_full(self) -> bool:
        return self.live >= self.max

    # -- adding ------------------------------------------------------------------------------------
    def add(self, wr: "PullRequest") -> bool:
        """Append; False when full (the caller answers ``409 Exceeded MaxWaiting``)."""
        if self.live >= self.max:
            return False
        self.q.append(wr)
        self._added(wr)
        return True

    def add_sorted(self, wr: "PullRequest") -> bool:
        """Insert by priority (``prioritized`` policy): before the first live request of a
        higher number, so equals stay in arrival order. False when full."""
        if self.live >= self.max:
            return False
        self.q.insert(self._sorted_index(wr), wr)
        self._added(wr)
        return True

    def _added(self, wr: "PullRequest") -> None:
        wr.gone = False
        self.live += 1
        if wr.n > 0:
            self.want += wr.n
        self.last = wr.received
        if wr.expires:
            self._push(wr.expires, wr)
        if wr.hbt:
            self._push(wr.hbt, wr)
        if wr.no_wait and not wr.expires:
            self._eos.append(wr)
        if len(self._heap) > 4 * self.live + 64:
            self._rebuild_heap()

    def _sorted_index(self, wr: "PullRequest") -> int:
        p = _priority(wr)
        for i, cur in enumerate(self.q):
            if not cur.gone and cur is not wr and _priority(cur) > p:
                return i
        return len(self.q)

    def _push(self, t: int, wr: "PullRequest") -> None:
        self._tick += 1
        heapq.heappush(self._heap, (t, self._tick, wr))

    def _rebuild_heap(self) -> None:
        h = []
        for wr in self.q:
            if not wr.gone:
                for t in (wr.expires, wr.hbt):
                    if t:
                        self._tick += 1
                        h.append((t, self._tick, wr))
        heapq.heapify(h)
        self._heap = h

    # -- the head ----------------------------------------------------------------------------------
    def head(self) -> "PullRequest | None":
        """The first live request (None when there is none); drops gone ones on the way."""
        q = self.q
        while q:
            wr = q[0]
            if not wr.gone:
                return wr
            q.popleft()
        return None

    def pop(self, prioritized: bool = False) -> "PullRequest":
        """Take one message's worth from the head (which the caller got from :meth:`head`): its
        batch goes down by one and it moves to the tail when it still wants more, so requests
        share messages round-robin. ``prioritized`` (the ``prioritized`` policy): it goes back
        behind the last live request of its priority instead. Returns the request."""
        q = self.q
        wr = q[0]
        wr.d += 1
        if wr.n > 0:
            self.want -= 1
        wr.n -= 1
        if wr.n <= 0:
            q.popleft()
            self._finish(wr)
        elif prioritized:
            if self.live > 1:
                q.popleft()
                q.insert(self._sorted_index(wr), wr)
        elif len(q) > 1:
            q.popleft()
            q.append(wr)
        if wr.no_wait and wr.expires and wr.d == 1:
            self._eos.append(wr)  # it got something: answered when the stream runs dry
        return wr

    def pop_requeue(self) -> "PullRequest":
        """:meth:`pop` for the ``prioritized`` policy."""
        return self.pop(True)

    def cycle(self) -> None:
        """Move the head (live, from :meth:`head`) to the tail without serving it."""
        q = self.q
        if len(q) > 1:
            q.append(q.popleft())

    def take_run(self, wr: "PullRequest", k: int) -> None:
        """``k`` messages went to the head request ``wr`` at once (no rotation: it is alone)."""
        wr.d += k
        if wr.n > 0:
            self.want -= k if k < wr.n else wr.n
        wr.n -= k
        if wr.n <= 0:
            self.q.popleft()
            self._finish(wr)
        if wr.no_wait and wr.expires and wr.d == k:
            self._eos.append(wr)

    def set_want(self, wr: "PullRequest", n: int) -> None:
        """Change a live request's remaining batch (its byte budget ran out: one more message)."""
        if not wr.gone:
            self.want += max(n, 0) - max(wr.n, 0)
        wr.n = n

    def credit(self, wr: "PullRequest") -> None:
        """Give back a message's worth taken by :meth:`pop` that could not be used yet; a request
        the pop completed goes back to the head."""
        wr.n += 1
        wr.d -= 1
        if wr.gone:
            wr.gone = False
            self.live += 1
            self.q.appendleft(wr)
            if wr.n > 0:
                self.want += wr.n
        elif wr.n > 0:
            self.want += 1

    def _finish(self, wr: "PullRequest") -> None:
        wr.gone = True
        self.live -= 1
        if wr.n > 0:
            self.want -= wr.n

    # -- removal -----------------------------------------------------------------------------------
    def remove_head(self) -> "PullRequest":
        """Drop the head request (the caller answered it or its requester went away)."""
        wr = self.q.popleft()
        self._finish(wr)
        return wr

    def discard(self, wr: "PullRequest") -> None:
        """Drop a live request wherever it is (lazily: the deque forgets it at the head)."""
        if not wr.gone:
            self._finish(wr)

    # -- timers ------------------------------------------------------------------------------------
    def next_deadline(self) -> int:
        """The earliest expiry or heartbeat time of a live request (0 = none)."""
        h = self._heap
        while h:
            t, _, wr = h[0]
            if wr.gone or (t != wr.expires and t != wr.hbt):
                heapq.heappop(h)
                if not wr.gone and wr.hbt and wr.hbt > t and (not wr.expires or wr.hbt < wr.expires):
                    self._push(wr.hbt, wr)  # a delivery moved the heartbeat later
                continue
            return t
        return 0

    def due(self, now: int) -> "list[PullRequest]":
        """Live requests with an expiry or heartbeat time at or before ``now`` (each once)."""
        out = []
        seen = set()
        h = self._heap
        while h:
            t = self.next_deadline()
            if not t or t > now:
                break
            _, _, wr = heapq.heappop(h)
            if id(wr) not in seen:
                seen.add(id(wr))
                out.append(wr)
        return out

    def reschedule_hb(self, wr: "PullRequest") -> None:
        """``wr.hbt`` was set again after a heartbeat went out: queue its new time."""
        if wr.hbt and not wr.gone:
            self._push(wr.hbt, wr)

    def take_eos(self) -> "list[PullRequest]":
        """The live no_wait requests to answer now that the stream ran dry (and forget them)."""
        if not self._eos:
            return []
        out = [wr for wr in self._eos if not wr.gone]
        self._eos = []
        return out

    # -- full scans (rare) -------------------------------------------------------------------------
    def live_requests(self) -> Iterator:
        return (wr for wr in self.q if not wr.gone)

    def replace(self, keep: list) -> None:
        """Keep only ``keep`` (live requests, in order); the rest are dropped."""
        for wr in self.q:
            wr.gone = True
        for wr in keep:
            wr.gone = False
        self.q = deque(keep)
        self.live = len(keep)
        self.want = sum(wr.n for wr in keep if wr.n > 0)
        self._eos = [wr for wr in self._eos if not wr.gone]
        self._rebuild_heap()

    def clear(self) -> None:
        self.replace([])

    def pending_batch(self) -> int:
        return self.want
