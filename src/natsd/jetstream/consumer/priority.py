"""Priority groups of a pull consumer (``priority_groups`` + ``priority_policy``), as
nats-server 2.14/2.15 serves them.

A pull request of a consumer with a policy other than ``none`` names one of the consumer's
groups (``{"group": "A", ...}`` in the MSG.NEXT body); what else it carries depends on the policy:

``overflow``
    ``min_pending`` / ``min_ack_pending``: the request is only served while the consumer's
    num pending (counting the message being handed out) is at least ``min_pending``, or its ack
    pending count at least ``min_ack_pending``; otherwise it is passed over (moved to the back of
    the queue) and the message goes to another request. Without either it is always served.
``pinned_client``
    The first request served while nobody is pinned gets a new pin id (a nuid); every message
    delivered by the consumer then carries ``Nats-Pin-Id: <id>``. Requests without an id are
    passed over while a pin is held; a request naming another id is refused at once with
    ``423 Nats-Pin-Id mismatch``, and a queued request whose id is no longer the pin (the pin
    expired or was unpinned while it waited) gets ``423 Nats-Wrong-Pin-Id`` with the pending
    counts when its turn comes. The pin lapses ``priority_timeout`` after the pinned client's
    last pull request (each request carrying the pin id restarts the timer; deliveries do not),
    or on ``$JS.API.CONSUMER.UNPIN`` (:func:`unpin`). One pin per consumer, whichever group
    (the reference keeps one ``currentPinId`` and reports it under the first group in
    CONSUMER.INFO).
``prioritized``
    ``priority`` 0-9: lower numbers are served first; the queue is kept sorted (stable, FIFO
    within a priority) and a request that still wants more goes back behind its equals.

Validation of a request (:func:`check_request`), in the reference's order: ``min_pending``/
``min_ack_pending`` need ``overflow``; ``id`` needs ``pinned_client``; ``priority`` must be
0-9; then, for a policy other than none, the group must be given and be one of the consumer's.
Those checks only apply to JSON bodies (an empty or integer body has no priority part and is
served as a request without group, as the reference does).

Advisories ``$JS.EVENT.ADVISORY.CONSUMER.PINNED.<stream>.<consumer>`` (``consumer_group_pinned``,
with ``pinned_id``) and ``...UNPINNED...`` (``consumer_group_unpinned``, ``reason`` ``timeout`` or
``admin``) go out as the pin changes. The pin lives in memory only: nats-server persists nothing
of it, so a restarted durable consumer starts unpinned and pins the next request it serves.

Timers run on the consumer's injected clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from natsd import nats_headers as NH
from natsd.gotime import GO_ZERO_TIME, format_rfc3339
from natsd.jetstream.consumer import status as D
from natsd.jetstream.consumer.helpers import nuid
from natsd.jetstream.errors import ApiErrors
from natsd.jetstream.config.models import PriorityPolicy

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.consumer.core import Consumer
    from natsd.jetstream.consumer.pull import PullRequest

__all__ = [
    "PullPriority",
    "PinState",
    "check_request",
    "unpin",
    "SERVE",
    "PINNED",
    "SKIP",
    "DROP",
    "PIN_ID_HEADER",
    "PIN_MISMATCH",
]

PIN_ID_HEADER = NH.PIN_ID.decode()
_PIN_PREFIX = NH.PIN_ID + b": "
_WRONG_PIN_ID = NH.WRONG_PIN_ID.decode()

NONE = PriorityPolicy.NONE
OVERFLOW = PriorityPolicy.OVERFLOW
PINNED_CLIENT = PriorityPolicy.PINNED_CLIENT
PRIORITIZED = PriorityPolicy.PRIORITIZED

#: :meth:`PinState.select` verdicts for the request at the head of the queue.
SERVE = 0  # serve it
PINNED = 1  # serve it; it was just pinned (a 409 max-bytes refusal gives the pin back)
SKIP = 2  # pass it over (move it to the back)
DROP = 3  # it was answered (423 Nats-Wrong-Pin-Id): remove it


class PullPriority:
    """The priority part of a JSON pull request (the reference's ``PriorityGroup``)."""

    __slots__ = ("group", "min_pending", "min_ack_pending", "id", "priority")

    def __init__(
        self, group: str = "", min_pending: int = 0, min_ack_pending: int = 0, id: str = "", priority: int = 0
    ) -> None:
        self.group = group
        self.min_pending = min_pending
        self.min_ack_pending = min_ack_pending
        self.id = id
        self.priority = priority

    @classmethod
    def from_request(cls, cr: dict) -> "PullPriority":
        return cls(
            cr.get("group", ""),
            cr.get("min_pending", 0),
            cr.get("min_ack_pending", 0),
            cr.get("id", ""),
            cr.get("priority", 0),
        )


#: A request naming another id than the current pin's (refused at once).
PIN_MISMATCH = D.status(423, "Nats-Pin-Id mismatch")


def _bad(text: str) -> bytes:
    return D.status(400, "Bad Request - " + text)


def check_request(o: "Consumer", pg: PullPriority | None) -> bytes | None:
    """The status refusing pull request priority part ``pg`` (None when it is admitted). A
    request presenting the current pin id restarts the pin timer, as the reference does here."""
    if pg is None:
        return None
    cfg = o.cfg
    policy = cfg.priority_policy
    if (pg.min_pending or pg.min_ack_pending) and policy != OVERFLOW:
        return _bad("Not a Overflow Priority consumer")
    if pg.id and policy != PINNED_CLIENT:
        return _bad("Not a Pinned Client Priority consumer")
    if pg.priority < 0 or pg.priority > 9:
        return _bad("Priority must be between 0 and 9")
    if policy == NONE:
        return None  # a group sent to a consumer without groups is ignored, as the reference
    if not pg.group:
        return _bad("Priority Group missing")
    if pg.group not in cfg.priority_groups:
        return _bad("Invalid Priority Group")
    pin = o.pull.pin if o.pull is not None else None
    if pin is not None and pin.pin_id:
        if pg.id == pin.pin_id:
            pin.touch(pg.group)
        elif pg.id:
            return PIN_MISMATCH
    return None


class PinState:
    """The pin of a ``pinned_client`` consumer (and the serving rules of the other policies
    that need the consumer's state): one per pull consumer, whatever its policy, so that a
    policy changed by a consumer update takes effect on the next request."""

    __slots__ = ("o", "pin_id", "pinned_ns", "timer", "_line", "_only")

    def __init__(self, o: "Consumer") -> None:
        self.o = o
        self.pin_id = ""
        self.pinned_ns = 0  # wall time of the pin (0 = not pinned)
        self.timer: Any = None  # (clock timer, group it was started for) while pinned
        self._line = _PIN_PREFIX + b"\r\n\r\n"
        self._only = D.HDR_LINE + self._line

    # -- the head of the queue ---------------------------------------------------------------------
    def select(self, wr: "PullRequest", npc1: int) -> int:
        """What to do with head request ``wr`` when a message is to be handed out (the
        reference's checks in ``nextWaiting``). ``npc1`` is num pending counting the message
        being handed out."""
        o = self.o
        policy = o.cfg.priority_policy
        pg = wr.pg
        verdict = SERVE
        if policy == PINNED_CLIENT:
            if not self.pin_id:
                if pg is None or not pg.id:
                    if pg is not None and pg.group:
                        self._assign(wr)
                    verdict = PINNED
                else:
                    self._wrong_pin(wr)
                    return DROP
            elif pg is None or not pg.id:
                return SKIP
            elif pg.id != self.pin_id:
                self._wrong_pin(wr)
                return DROP
        elif policy == OVERFLOW and pg is not None and (pg.min_pending > 0 or pg.min_ack_pending > 0):
            if not (
                (pg.min_pending > 0 and pg.min_pending <= npc1)
                or (pg.min_ack_pending > 0 and pg.min_ack_pending <= len(o.t.pending))
            ):
                return SKIP
        return verdict

    def run_ok(self, wr: "PullRequest") -> bool:
        """May the pull fast path hand a whole run to ``wr``, the only waiting request? (Each
        message of the run would get ``SERVE`` from :meth:`select`.) A pinned-client request
        that would get the pin takes it here; the caller checked a message is there to send."""
        o = self.o
        policy = o.cfg.priority_policy
        pg = wr.pg
        if policy == PINNED_CLIENT:
            if self.pin_id:
                return pg is not None and pg.id == self.pin_id
            if pg is not None and pg.id:
                return False  # the general loop answers it (423)
            if o.npc <= 0:
                return False
            if pg is not None and pg.group:
                self._assign(wr)
            return True
        if policy == OVERFLOW:
            return pg is None or (pg.min_pending <= 0 and pg.min_ack_pending <= 0)
        return True

    def _wrong_pin(self, wr: "PullRequest") -> None:
        self.o.ports.publish(wr.reply, "", D.pending_status(423, _WRONG_PIN_ID, wr.n, wr.b), b"")

    # -- the pin -----------------------------------------------------------------------------------
    def pin_header(self, hdr: bytes | None) -> bytes:
        """``hdr`` with ``Nats-Pin-Id: <current pin>`` appended (a header block of its own when
        the message has none), as every delivery of a pinned-client consumer carries it."""
        if hdr and len(hdr) > 2:
            return hdr[:-2] + self._line
        return self._only

    def _set(self, pin_id: str, pinned_ns: int) -> None:
        self.pin_id = pin_id
        self.pinned_ns = pinned_ns
        self._line = _PIN_PREFIX + pin_id.encode() + b"\r\n\r\n"
        self._only = D.HDR_LINE + self._line

    def _assign(self, wr: "PullRequest") -> None:
        o = self.o
        pg = wr.pg
        assert pg is not None  # (both callers checked that the request names a group)
        self._set(nuid(), o.clock.time_ns())
        pg.id = self.pin_id
        self.touch(pg.group)
        self._advise("PINNED", "consumer_group_pinned", pg.group, pinned_id=self.pin_id)

    def touch(self, group: str) -> None:
        """(Re)start the pin's timer: ``priority_timeout`` from now. The timer keeps the group it
        was started for (the unpinned advisory names it), as the reference's."""
        o = self.o
        ttl = o.cfg.priority_timeout
        if self.timer is not None:
            grp = self.timer[1]
            self.timer[0].cancel()
        else:
            grp = group
        self.timer = (o.clock.call_later(ttl, lambda: self._expire(grp)), grp) if ttl > 0 else None

    def _expire(self, group: str) -> None:
        self.timer = None
        if not self.pin_id or self.o.closed:
            return
        self.clear()
        self._advise("UNPINNED", "consumer_group_unpinned", group, reason="timeout")
        self.o.kick()

    def clear(self) -> None:
        """Forget the pin (no advisory): unpin, timeout, consumer stopped."""
        self._set("", 0)
        if self.timer is not None:
            self.timer[0].cancel()
            self.timer = None

    def _advise(self, kind: str, type_suffix: str, group: str, **extra: str) -> None:
        o = self.o
        body: dict[str, Any] = {}
        acc = o.account.name
        if acc:
            body["account"] = acc
        body["stream"] = o.stream_name
        body["consumer"] = o.name
        domain = o.account.engine.domain
        if domain:
            body["domain"] = domain
        body["group"] = group
        body.update(extra)
        o._advisory(kind, type_suffix, body)

    # -- CONSUMER.INFO -----------------------------------------------------------------------------
    def info(self) -> list[dict] | None:
        """``priority_groups`` of CONSUMER.INFO: the first group with the pin (None when the
        consumer has no groups). ``pinned_ts`` is written even when zero (a Go time.Time)."""
        groups = self.o.cfg.priority_groups
        if not groups:
            return None
        st: dict[str, Any] = {"group": groups[0]}
        if self.pin_id:
            st["pinned_client_id"] = self.pin_id
        st["pinned_ts"] = format_rfc3339(self.pinned_ns) if self.pinned_ns else GO_ZERO_TIME
        return [st]


def unpin(o: "Consumer", group: str) -> None:
    """``$JS.API.CONSUMER.UNPIN``: drop the pin (whether or not there is one) and send the
    unpinned advisory with reason ``admin``. Raises 10160 when ``group`` is not one of the
    consumer's priority groups (a consumer without groups included)."""
    if group not in o.cfg.priority_groups or o.pull is None:
        raise ApiErrors.CONSUMER_INVALID_PRIORITY_GROUP()
    pin = o.pull.pin
    pin.clear()
    pin._advise("UNPINNED", "consumer_group_unpinned", group, reason="admin")
    o.kick()
