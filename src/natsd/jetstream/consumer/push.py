"""A push consumer's side of delivery: interest in the deliver subject, flow control and idle
heartbeats.

* **Interest.** A push consumer delivers only while its deliver subject has a subscriber
  (``active``; nats-server's push binding). The account's hub calls :meth:`Push.update_interest`
  when subscriptions come and go; a consumer left without interest is deleted after its
  inactive threshold.
* **Flow control** (``flow_control: true``). Bytes delivered count against a window that starts
  at 1/16 of :data:`FC_MAX_PENDING` and doubles with each answered request up to it. Past half
  the window a ``100 FlowControl Request`` goes to the deliver subject with reply
  ``$JS.FC.<stream>.<consumer>.<rand4>``; delivery stops at the window until the client answers
  it (:meth:`Push.process_flow_control`). Under ack policy ``flow_control`` the answer's
  ``Nats-Last-Consumer`` / ``Nats-Last-Stream`` headers also ack everything up to them.
* **Idle heartbeats** (``idle_heartbeat``). When nothing was sent for that long,
  ``100 Idle Heartbeat`` with the last sequences (and ``Nats-Consumer-Stalled`` while a flow
  control request is unanswered). One timer, re-armed for the rest of the interval when data
  went out in between.

Pacing (rate limit, replay original) is part of the delivery pass (``delivery.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from natsd.jetstream.consumer import status as D
from natsd.jetstream.consumer.acks import FC_PREFIX, hub
from natsd.jetstream.consumer.helpers import find_header, num, rand4

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.consumer.core import Consumer

__all__ = ["Push", "FC_MAX_PENDING"]

#: Flow control: window cap (the starting window is 1/16 of it; it doubles on each reply).
FC_MAX_PENDING = 32 * 1024 * 1024


class Push:
    """Interest, flow-control window and heartbeat timer of one push consumer."""

    __slots__ = ("o", "active", "pbytes", "pblimit", "maxpb", "fcid", "fcsz", "last_sent", "hb_timer")

    def __init__(self, o: "Consumer") -> None:
        self.o = o
        fc = o.cfg.flow_control
        self.active = False
        self.pbytes = 0  # bytes delivered and not yet covered by an FC reply
        self.pblimit = FC_MAX_PENDING if fc else 0
        self.maxpb = self.pblimit // 16 if fc else 0  # the window now (0: no flow control)
        self.fcid = ""  # reply subject of the unanswered FC request
        self.fcsz = 0  # pbytes when that request went out
        self.last_sent = 0  # monotonic ns of the last data/heartbeat sent
        self.hb_timer: Any = None

    def start(self) -> None:
        o = self.o
        hub(o.account).track_push(o)
        self.active = bool(o.ports.has_interest(o.cfg.deliver_subject))
        if not self.active and o.dthresh > 0:
            o._arm_delete_timer(o.dthresh)
        if o.cfg.idle_heartbeat:
            self.last_sent = o.clock.monotonic_ns()
            self._arm_hb(o.cfg.idle_heartbeat)

    def deliver_subject_changed(self, old_subject: str) -> None:
        o = self.o
        self.active = bool(o.ports.has_interest(o.cfg.deliver_subject))
        hub(o.account).track_push(o, old_subject)

    def update_interest(self) -> None:
        """Re-check interest on the deliver subject (called by the account's interest hook)."""
        o = self.o
        if o.closed:
            return
        interest = bool(o.ports.has_interest(o.cfg.deliver_subject))
        was = self.active
        self.active = interest
        if interest and not was:
            o.kick()
            if o.cfg.idle_heartbeat:
                self._arm_hb(o.cfg.idle_heartbeat)
        if interest:
            o._cancel_delete_timer()
        elif o.dthresh > 0 and o._dtmr is None:
            o._arm_delete_timer(o.dthresh)

    def send_flow_control(self) -> None:
        o = self.o
        rply = FC_PREFIX + o.v2_token() + o.stream_name + "." + o.name + "." + rand4()
        self.fcsz, self.fcid = self.pbytes, rply
        o.ports.publish(o.cfg.deliver_subject, rply, D.FC_REQUEST, b"")

    def reset_flow_control(self) -> None:
        """Forget the bytes in flight and any unanswered request (a sourcing consumer set up
        again: its deliveries start over, and the old request's reply will never come). The
        window keeps the size it grew to."""
        self.pbytes, self.fcid, self.fcsz = 0, "", 0

    def process_flow_control(self, subject: str, hdr: bytes | None = None) -> None:
        """A reply to our flow-control request arrived on ``subject``."""
        if subject != self.fcid:
            return
        if self.maxpb < self.pblimit:
            self.maxpb = min(self.maxpb * 2, self.pblimit)
        self.pbytes = max(self.pbytes - self.fcsz, 0)
        self.fcid, self.fcsz = "", 0
        o = self.o
        o.kick()
        if o.cfg.ack_policy == "flow_control" and hdr:
            ls, ld = num(find_header(hdr, D.LAST_STREAM) or ""), num(find_header(hdr, D.LAST_CONSUMER) or "")
            if ls > 0:
                o.acks.ack(ls, max(ld, 0), 1, False)

    def _arm_hb(self, delay: int) -> None:
        if self.hb_timer is not None:
            self.hb_timer.cancel()
        self.hb_timer = self.o.clock.call_later(delay, self._on_hb)

    def _on_hb(self) -> None:
        self.hb_timer = None
        o = self.o
        if o.closed:
            return
        hb = o.cfg.idle_heartbeat
        now = o.clock.monotonic_ns()
        idle = now - self.last_sent
        if idle >= hb:
            if self.active:
                t = o.t
                o.ports.publish(o.cfg.deliver_subject, "", D.idle_heartbeat(t.dseq - 1, t.sseq - 1, self.fcid), b"")
                # Ack policy flow_control: ask for the acks of what is outstanding.
                if o.cfg.ack_policy == "flow_control" and t.pending and not self.fcid:
                    self.send_flow_control()
            self.last_sent = now
            self._arm_hb(hb)
        else:
            self._arm_hb(hb - idle)

    def stop(self) -> None:
        if self.hb_timer is not None:
            self.hb_timer.cancel()
            self.hb_timer = None
        hub(self.o.account).untrack_push(self.o)
