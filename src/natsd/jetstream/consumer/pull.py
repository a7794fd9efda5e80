"""Pull requests (``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``) and how a pull consumer
serves them.

A request body is empty (batch 1, no expiry), a bare integer (the batch size) or the JSON
``{"batch", "expires", "no_wait", "max_bytes", "idle_heartbeat", ...}`` (JSApiConsumerGetNextRequest,
durations in ns). :func:`parse_next_request` turns it into a :class:`PullRequest`;
:class:`~natsd.jetstream.consumer.waitqueue.WaitQueue` keeps them, bounded by ``max_waiting``, and
hands messages out round-robin one at a time, as nats-server's ``waitQueue.pop``.

:class:`Pull` is a pull consumer's side of it: admitting a request (or answering it at once with
a status), choosing the request that gets the next message, expiring requests and sending their
idle heartbeats on one timer (the queue's next deadline), answering no_wait requests when the
stream runs dry. The status lines are nats-server's (``status.py``). Priority groups (the
request's ``group``, ``min_pending``, ``min_ack_pending``, ``id``, ``priority``) are checked and
applied through :mod:`~natsd.jetstream.consumer.priority`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from natsd.gotime import format_duration
from natsd.jetstream import gojson
from natsd.jetstream.consumer import helpers, status as D
from natsd.jetstream.consumer.priority import (
    DROP,
    NONE,
    PINNED,
    PRIORITIZED,
    SKIP,
    PinState,
    PullPriority,
    check_request,
)
from natsd.jetstream.consumer.waitqueue import WaitQueue
from natsd.jetstream.config.requests import CONSUMER_GET_NEXT_REQUEST

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.consumer.core import Consumer

__all__ = ["PullRequest", "WaitQueue", "parse_next_request", "BadRequest", "Pull", "MSG_NEXT_PREFIX"]

# (spelled in helpers: a sleeping stream subscribes it without loading the pull machinery)
MSG_NEXT_PREFIX = helpers.MSG_NEXT_PREFIX
# A request finding the wait queue full sweeps it at most this often (nats-server: once a second).
FULL_SWEEP_INTERVAL_NS = 1_000_000_000


class BadRequest(ValueError):
    """The body is not a valid request; the text goes after ``400 Bad Request - ``."""


class PullRequest:
    """One waiting pull request. Times are monotonic ns (0 = none)."""

    __slots__ = ("reply", "n", "d", "b", "expires", "hb", "hbt", "no_wait", "received", "gone", "pg")

    def __init__(
        self,
        reply: str,
        batch: int,
        max_bytes: int,
        expires: int,
        hb: int,
        no_wait: bool,
        now: int,
        pg: PullPriority | None = None,
    ) -> None:
        self.reply = reply
        self.n = batch  # messages still wanted
        self.d = 0  # messages delivered so far
        self.b = max_bytes  # byte budget left (0 = unlimited)
        self.expires = expires  # monotonic deadline, 0 = never
        self.hb = hb  # idle heartbeat interval (ns), 0 = none
        self.hbt = now + hb if hb else 0
        self.no_wait = no_wait
        self.received = now
        self.gone = True  # not (or no longer) in a WaitQueue
        self.pg = pg  # priority part of a JSON request (None for an empty/integer body)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"PullRequest({self.reply!r}, n={self.n}, d={self.d}, b={self.b}, exp={self.expires})"


# Decoded MSG.NEXT bodies (read only), by body: a pull client repeats one body, and decoding it
# with Go's rules was most of what a request cost (60% in a flood of 100k requests).
_DECODED: dict[bytes, dict] = {}
_DECODED_MAX = 256
_DECODED_MAX_BODY = 512


def parse_next_request(body: bytes) -> tuple[int, int, int, bool, int, PullPriority | None]:
    """``(batch, expires_ns, max_bytes, no_wait, idle_heartbeat_ns, priority)`` of a MSG.NEXT
    body; ``priority`` is the request's priority-group part, present for every JSON body and
    None for an empty or integer one (as the reference's ``nextReqFromMsg``).

    Raises :class:`BadRequest` for invalid JSON or a heartbeat larger than half the expiry
    (the reference's "heartbeat value too large"). Anything that is neither JSON nor an integer
    counts as batch 1, as the reference."""
    req = body.strip()
    if not req:
        return 1, 0, 0, False, 0, None
    if req[:1] == b"{":
        cr = _DECODED.get(req)
        if cr is None:
            try:
                cr = gojson.decode(req, CONSUMER_GET_NEXT_REQUEST, strict=False)
            except gojson.GoError as e:
                raise BadRequest(str(e)) from None
            if len(req) <= _DECODED_MAX_BODY:
                if len(_DECODED) >= _DECODED_MAX:
                    _DECODED.clear()
                _DECODED[req] = cr
        batch = cr.get("batch", 0)
        expires = cr.get("expires", 0)
        max_bytes = cr.get("max_bytes", 0)
        hb = cr.get("idle_heartbeat", 0)
        no_wait = cr.get("no_wait", False)
        if hb > 0 and hb * 2 > expires:
            raise BadRequest("heartbeat value too large")
        return batch, expires, max_bytes, no_wait, hb, PullPriority.from_request(cr)
    try:
        return int(req), 0, 0, False, 0, None
    except ValueError:
        return 1, 0, 0, False, 0, None


class Pull:
    """A pull consumer's waiting requests: admission, serving order, expiry and heartbeats."""

    __slots__ = ("o", "wq", "timer", "timer_at", "pin", "full_swept_at")

    def __init__(self, o: "Consumer", max_waiting: int) -> None:
        self.o = o
        self.wq = WaitQueue(max_waiting)
        self.timer: Any = None
        self.timer_at = 0
        # When a request last found the queue full and swept it (nats-server's lwqic): at most
        # one such sweep a second, or a flood of requests on a full queue (each sweep checks the
        # interest of max_waiting inboxes) holds the loop for minutes instead of being refused.
        self.full_swept_at = -FULL_SWEEP_INTERVAL_NS
        self.pin = PinState(o)  # priority groups: the pin and the serving rules

    def request(self, reply: str, body: bytes) -> None:
        """Handle a MSG.NEXT request (or the tail of ``+NXT``) whose inbox is ``reply``."""
        o = self.o
        publish = o.ports.publish
        try:
            batch, expires, max_bytes, no_wait, hb, pg = parse_next_request(body)
        except BadRequest as e:
            publish(reply, "", D.status(400, "Bad Request - " + str(e)), b"")
            return
        cfg = o.cfg
        if cfg.max_batch > 0 and batch > cfg.max_batch:
            publish(reply, "", D.status(409, f"Exceeded MaxRequestBatch of {cfg.max_batch}"), b"")
            return
        if expires and cfg.max_expires > 0 and expires > cfg.max_expires:
            publish(reply, "", D.status(409, f"Exceeded MaxRequestExpires of {format_duration(cfg.max_expires)}"), b"")
            return
        if max_bytes > 0 and cfg.max_bytes > 0 and max_bytes > cfg.max_bytes:
            publish(reply, "", D.status(409, f"Exceeded MaxRequestMaxBytes of {cfg.max_bytes}"), b"")
            return
        if pg is not None:
            refused = check_request(o, pg)
            if refused is not None:
                publish(reply, "", refused, b"")
                return
        now = o.clock.monotonic_ns()
        wq = self.wq
        if wq.is_full() and now - self.full_swept_at > FULL_SWEEP_INTERVAL_NS:
            self.full_swept_at = now
            self.sweep(False)
        if no_wait:
            msgs_pending = o.num_pending() + len(o.t.rdq)
            if msgs_pending == 0 and not expires:
                wq.last = now
                publish(reply, "", D.NO_MESSAGES, b"")
                return
            if msgs_pending > 0:
                # The batch the queue still wants bounds the exact figure (which leaves out
                # requesters that went away): scan only when the bound says "too many".
                brp = wq.want
                if msgs_pending < brp:
                    brp = self.sweep(False)
                if msgs_pending < brp:
                    wq.last = now
                    publish(reply, "", D.REQUESTS_PENDING, b"")
                    return
        wr = PullRequest(reply, batch, max_bytes, now + expires if expires else 0, hb, no_wait, now, pg)
        if not (wq.add_sorted(wr) if cfg.priority_policy == PRIORITIZED else wq.add(wr)):
            if not hb:
                publish(reply, "", D.EXCEEDED_MAX_WAITING, b"")
            return
        self.arm()
        o.stream.wake_on_new(o)
        o.kick()

    def next_waiting(self, sz: int, checked: set[str] | None = None, npc1: int = -1) -> PullRequest | None:
        """The request that gets the next message of size ``sz`` (``nextWaiting``), popped.
        ``checked`` caches inboxes already known to have interest during this pass.
        ``npc1``: num pending counting this message (the overflow policy's ``min_pending``)."""
        wq = self.wq
        o = self.o
        now = o.clock.monotonic_ns()
        publish = o.ports.publish
        policy = o.cfg.priority_policy
        prio = policy != NONE
        if prio and npc1 < 0:
            npc1 = o.npc
        cycled = 0
        while True:
            wr = wq.head()
            if wr is None:
                break
            if wr.expires and now >= wr.expires:
                publish(wr.reply, "", D.pending_status(408, "Request Timeout", wr.n, wr.b), b"")
                wq.remove_head()
                continue
            pinned = False
            if prio:
                verdict = self.pin.select(wr, npc1)
                if verdict == SKIP:
                    wq.cycle()
                    cycled += 1
                    if cycled >= wq.live:
                        return None
                    continue
                if verdict == DROP:
                    wq.remove_head()
                    continue
                pinned = verdict == PINNED
            if wr.b > 0:
                if sz <= wr.b:
                    wr.b -= sz
                    if wr.b == 0:
                        wq.set_want(wr, 1)
                else:
                    publish(wr.reply, "", D.pending_status(409, "Message Size Exceeds MaxBytes", wr.n, wr.b), b"")
                    if pinned:
                        self.pin.clear()  # it took the pin but cannot take the message
                    wq.remove_head()
                    continue
            if checked is not None and wr.reply in checked:
                return wq.pop_requeue() if policy == PRIORITIZED else wq.pop()
            if o.ports.has_interest(wr.reply):
                if checked is not None:
                    checked.add(wr.reply)
                return wq.pop_requeue() if policy == PRIORITIZED else wq.pop()
            wq.remove_head()  # requester went away
        return None

    def has_interest(self, inbox: str, checked: set[str]) -> bool:
        """True (and ``inbox`` noted in ``checked``) when a pull request's inbox has interest."""
        if self.o.ports.has_interest(inbox):
            checked.add(inbox)
            return True
        return False

    def sweep(self, eos: bool) -> int:
        """The full scan (``processWaiting``), for what is rare: info, a full queue, the exact
        batch still wanted, inactivity. Expires requests, answers finished no_wait ones (at the
        end of the stream), drops those whose requester went away, sends due heartbeats;
        returns the batch still wanted by what is left."""
        wq = self.wq
        if not wq:
            return 0
        o = self.o
        now = o.clock.monotonic_ns()
        publish = o.ports.publish
        has_interest = o.ports.has_interest
        brp = 0
        keep = []
        changed = False
        for wr in wq.live_requests():
            expired = wr.expires and now >= wr.expires
            if (eos and wr.no_wait) or expired:
                if expired:
                    publish(wr.reply, "", D.pending_status(408, "Request Timeout", wr.n, wr.b), b"")
                    changed = True
                    continue
                if not wr.expires or wr.d > 0:
                    publish(wr.reply, "", D.NO_MESSAGES, b"")
                    changed = True
                    continue
            if not has_interest(wr.reply):
                changed = True
                continue
            brp += wr.n
            if wr.hbt and now >= wr.hbt:
                t = o.t
                publish(wr.reply, "", D.idle_heartbeat(t.dseq - 1, t.sseq - 1), b"")
                wr.hbt = now + wr.hb
                wq.reschedule_hb(wr)
            keep.append(wr)
        if changed:
            wq.replace(keep)
        self.arm()
        return brp

    def end_of_pass(self, eos: bool) -> None:
        """After a delivery pass: at the end of the stream, answer the no_wait requests that are
        done (without looking at the others); re-arm the timer for the next expiry/heartbeat."""
        wq = self.wq
        if eos and wq:
            o = self.o
            for wr in wq.take_eos():
                wq.discard(wr)
                if wr.expires and o.clock.monotonic_ns() >= wr.expires:
                    o.ports.publish(wr.reply, "", D.pending_status(408, "Request Timeout", wr.n, wr.b), b"")
                else:
                    o.ports.publish(wr.reply, "", D.NO_MESSAGES, b"")
        self.arm()

    def _process_due(self) -> None:
        """Requests whose expiry or heartbeat time has come (the heap's top, nothing else):
        408 for the expired, a heartbeat for the others (dropped when nobody listens)."""
        wq = self.wq
        o = self.o
        now = o.clock.monotonic_ns()
        publish = o.ports.publish
        for wr in wq.due(now):
            if wr.expires and now >= wr.expires:
                wq.discard(wr)
                publish(wr.reply, "", D.pending_status(408, "Request Timeout", wr.n, wr.b), b"")
            elif wr.hbt and now >= wr.hbt:
                if not o.ports.has_interest(wr.reply):
                    wq.discard(wr)
                    continue
                publish(wr.reply, "", D.idle_heartbeat(o.t.dseq - 1, o.t.sseq - 1), b"")
                wr.hbt = now + wr.hb
                wq.reschedule_hb(wr)
            else:
                wq.reschedule_hb(wr)  # its heartbeat moved later since it was queued

    def arm(self) -> None:
        """The timer at the queue's next expiry or heartbeat (none when nothing waits)."""
        fexp = self.wq.next_deadline() if self.wq else 0
        if not fexp:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            return
        if self.timer is not None:
            if self.timer_at == fexp:
                return
            self.timer.cancel()
        self.timer_at = fexp
        self.timer = self.o.clock.call_at(fexp, self._on_timer)

    def _on_timer(self) -> None:
        self.timer = None
        o = self.o
        if o.closed:
            return
        self._process_due()
        self.end_of_pass(True)
        o.kick()

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.pin.clear()  # the pin is not kept (nor persisted) when the consumer stops

    def priority_info(self) -> list[dict] | None:
        """CONSUMER.INFO's ``priority_groups`` (None: the consumer has none)."""
        return self.pin.info()

    def answer_deleted(self) -> None:
        """The consumer is deleted: every waiting request gets ``409 Consumer Deleted``."""
        wq = self.wq
        if wq:
            publish = self.o.ports.publish
            for wr in list(wq.live_requests()):
                publish(wr.reply, "", D.CONSUMER_DELETED, b"")
            wq.clear()
