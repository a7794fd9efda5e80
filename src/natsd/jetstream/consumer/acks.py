"""Acknowledgements: the ack subject, the account's ack hub, and what each ack kind does.

Every delivery that wants an ack carries the v1 ack subject as its reply::

    $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>

(the v2 form ``$JS.ACK.<domain>.<acchash>.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>[...]``
is accepted, never sent). One account-wide subscription on ``$JS.ACK.>`` (:class:`ConsumerHub`)
parses the subject and hands ``(sseq, dseq, delivered)`` with the body to the consumer's
:class:`Acks`, which applies the body:

=========== ============================================================================
``+ACK``    (or empty, ``+OK``) acknowledged; answered with an empty ack-ack when a reply
            is given, unless nothing was pending for it
``+NXT``    ``+ACK`` and a pull request whose body follows (``+NXT {"batch":5}``)
``-NAK``    redeliver now, or after ``-NAK <go duration>`` / ``-NAK {"delay": ns}``
``+WPI``    work in progress: the ack wait starts again
``+TERM``   acknowledged, never redelivered; ``+TERM <reason>`` goes in the advisory
=========== ============================================================================

The bookkeeping itself (floors, pending, redelivery queue) is
:class:`~natsd.jetstream.consumer.tracking.Tracking`; :class:`Acks` adds what has effects outside
it: the ack timer that queues redeliveries, the stream's retention, sampling, advisories and
waking delivery. The same hub also takes flow-control replies (``$JS.FC.>``) and interest
changes for push consumers.
"""

from __future__ import annotations

import json
from itertools import repeat
from typing import TYPE_CHECKING, Any, cast

from natsd.jetstream.consumer.helpers import num, parse_go_duration
from natsd.jetstream.config.constants import MS  # (not consumer_config nor models: they load with the first stream)
from natsd.subjects.tokens import subject_matches

if TYPE_CHECKING:  # pragma: no cover
    from natsd.protocol.events import Run
    from natsd.jetstream.consumer.core import Consumer
    from natsd.jetstream.consumer.durable import StateWriter
    from natsd.jetstream.consumer.tracking import Tracking
    from natsd.jetstream.views import AccountView

__all__ = [
    "ACK_PREFIX",
    "FC_PREFIX",
    "ACK_WAIT_DELAY",
    "UNACKED_LIMITS_REASON",
    "Acks",
    "ConsumerHub",
    "parse_nak_delay",
]

ACK_PREFIX = "$JS.ACK."
FC_PREFIX = "$JS.FC."
#: Small delay added to the ack timer so bursts expire together (nats-server ackWaitDelay).
ACK_WAIT_DELAY = 1 * MS
#: Reason given in MSG_TERMINATED when a pending message vanished from the stream.
UNACKED_LIMITS_REASON = "Unacknowledged message was deleted"


def ack_templates(stream: str, consumer: str, v2: str = "") -> tuple[str, bytes]:
    """The consumer's ack subject as %-templates: ``(any delivery count, str)`` taking
    ``(dc, sseq, dseq, ts, pending)`` and ``(delivery count 1, bytes)`` taking ``(sseq, dseq,
    ts, pending)`` (for the pull fast path, which formats wire bytes directly;
    %-formatting with a per-consumer template is the cheapest way to build them). ``v2``:
    ``"<domain>.<account hash>."`` for the v2 form (feature flag ``js_ack_fc_v2``), else v1."""
    prefix = (ACK_PREFIX + v2 + stream + "." + consumer + ".").replace("%", "%%")
    return prefix + "%d.%d.%d.%d.%d", (prefix + "1.%d.%d.%d.%d").encode()


def parse_nak_delay(arg: bytes) -> int | None:
    """The delay of ``-NAK <arg>``: a Go duration or ``{"delay": ns}``; None when invalid."""
    if arg[:1] == b"{":
        try:
            d = json.loads(arg)
            v = d.get("delay", 0) if isinstance(d, dict) else None
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        except ValueError:
            return None
        return None
    return parse_go_duration(arg.decode("ascii", "replace"))


class Acks:
    """One consumer's ack handling and its ack (redelivery) timer."""

    __slots__ = ("o", "t", "w", "explicit", "ack_none", "flow_control", "sfreq", "retention", "timer", "timer_end")

    def __init__(self, o: "Consumer", t: "Tracking", w: "StateWriter") -> None:
        self.o = o
        self.t = t
        self.w = w
        self.timer: Any = None
        self.timer_end = 0
        #: Acks matter to the stream under interest/workqueue retention (a stream can switch
        #: between limits and interest; the consumer refreshes this when the stream wakes it).
        self.retention = o.stream.config.retention != "limits"
        self.configure()

    def configure(self) -> None:
        cfg = self.o.cfg
        self.explicit = cfg.ack_policy == "explicit"
        self.ack_none = cfg.ack_policy == "none"
        self.flow_control = cfg.flow_control
        self.sfreq = cfg.sample_percent()

    # -- one ack -----------------------------------------------------------------------------------

    def process(self, sseq: int, dseq: int, dc: int, reply: str, body: bytes) -> None:
        """Apply one ack message (``processAck``)."""
        o = self.o
        if o.closed:
            return
        skip_reply = sseq == 0
        if not body or body == b"+ACK" or body == b"+OK":
            if not self.ack(sseq, dseq, dc, True):
                skip_reply = True
        elif body.startswith(b"+NXT"):
            self.ack(sseq, dseq, dc, True)
            o.process_next_request(reply, body[4:])
            skip_reply = True
        elif body.startswith(b"-NAK"):
            self.nak(sseq, dseq, dc, body)
        elif body == b"+WPI":
            if self.t.progress(sseq, o.clock.time_ns()):
                o.writer.mark_dirty()
        elif body.startswith(b"+TERM"):
            reason = body[5:].strip().decode("utf-8", "replace")
            dl = o.dead_letters
            if dl is not None and dl.on_term(sseq, dseq, dc, reason):
                # natsd.dead_letter on a work-queue/interest stream: the ack waits for the
                # copy's PubAck (consumer/deadletter.py); the advisory goes now.
                self.advise_term(sseq, dseq, dc, reason)
            elif not self.term(sseq, dseq, dc, reason):
                skip_reply = True  # as for +ACK: a term of nothing pending gets no ack-ack
        if reply and not skip_reply:
            o.ports.publish(reply, "", None, b"")

    def ack(self, sseq: int, dseq: int, dc: int, sample: bool) -> bool:
        """Apply a positive ack; False when it is ignored without an ack-ack reply (an ack for
        a sequence not delivered yet, as the reference). The hot path of every ``+ACK``."""
        t = self.t
        if sseq >= t.sseq and t.lss is None and not self.flow_control:
            if self.o.partitions is None or sseq not in t.pending:
                return False
            # (natsd.partition_key: delivered ahead of the cursor, consumer/partition.py)
        o = self.o
        if self.explicit:
            p = t.ack(sseq)
            if p is not None and o.partitions is not None:
                o.partitions.fix_floor()  # (deliveries out of stream order: consumer/partition.py)
            if p is not None:
                if sample and self.sfreq > 0:
                    o._sample_ack(sseq, p[0], dc, p[1])
                maxp = t.maxp
                if (maxp > 0 and len(t.pending) + 1 >= maxp) or o.partitions is not None:
                    o.kick()  # it was at max_ack_pending (or its key was in flight): delivery can resume
                if not t.pending and self.timer is not None:
                    self.timer.cancel()
                    self.timer = None
                # After the redelivery count is gone: the stream's interest check asks
                # needs_ack, which counts a message with a redelivery count as still needed.
                if self.retention:
                    o.stream.ack_processed(o, sseq)
        elif not self.ack_none:  # all / flow_control
            maxp = t.maxp
            full = maxp > 0 and len(t.pending) >= maxp
            acked = t.ack_upto(dseq, sseq)
            if acked is None:
                return True
            if full:
                o.kick()
            if not t.pending and self.timer is not None:
                self.timer.cancel()
                self.timer = None
            if self.retention:
                for seq in acked:
                    o.stream.ack_processed(o, seq)
        else:
            # Ack none: nothing to track; the reference answers only on interest/workqueue streams.
            return o.stream.config.retention != "limits"
        # Once per loop turn with acks: the last ack time and a state write (StateWriter.acked,
        # inlined: this runs for every ack).
        w = self.w
        if not w.turn_acks:
            w.turn_acks = True
            w.end_turn_soon()
        return True

    def ack_run(self, sseqs: list[int]) -> None:
        """Reply-less ``+ACK`` s of ``sseqs``, in order, when each would take the common path of
        :meth:`ack` (the caller checked: ack policy explicit, no sampling, no retention hook,
        every sequence below the delivery cursor): the same effects, with the tracking done in
        one loop (:meth:`Tracking.ack_run`) and the once-per-run parts done once."""
        t = self.t
        maxp = t.maxp
        was_full = maxp > 0 and len(t.pending) >= maxp
        if not t.ack_run(sseqs):
            return
        if was_full or self.o.partitions is not None:
            self.o.kick()  # it was at max_ack_pending (or keys were in flight): delivery can resume
        if not t.pending and self.timer is not None:
            self.timer.cancel()
            self.timer = None
        w = self.w
        if not w.turn_acks:
            w.turn_acks = True
            w.end_turn_soon()

    def run_ok(self, sseqs: list[int]) -> bool:
        """True when :meth:`ack_run` may take these plain acks (see there)."""
        t = self.t
        return (
            self.explicit
            and self.sfreq <= 0
            and not self.retention
            and not self.o.closed
            and max(sseqs) < t.sseq
            and self.o.partitions is None
        )

    def nak(self, sseq: int, dseq: int, dc: int, body: bytes) -> None:
        t = self.t
        if dseq <= t.adflr or dseq > t.dseq or sseq not in t.pending:
            return
        o = self.o
        o._advisory(
            "MSG_NAKED",
            "nak",
            {"stream": o.stream_name, "consumer": o.name, "consumer_seq": dseq, "stream_seq": sseq, "deliveries": dc},
        )
        arg = body[4:].strip()
        if arg:
            delay = parse_nak_delay(arg)
            if delay is not None:
                t.nak_later(sseq, o.clock.time_ns() - o.cfg.ack_wait + delay)
                o.writer.mark_dirty()
                self.arm(10 * MS, force=True)
                return
        t.add_rdq([sseq])
        o.kick()

    def term(self, sseq: int, dseq: int, dc: int, reason: str) -> bool:
        """Terminate a delivery (acked, with an advisory); False when nothing was acked."""
        acked = self.ack(sseq, dseq, dc, False)
        self.advise_term(sseq, dseq, dc, reason)
        return acked

    def advise_term(self, sseq: int, dseq: int, dc: int, reason: str) -> None:
        o = self.o
        body: dict[str, Any] = {
            "stream": o.stream_name,
            "consumer": o.name,
            "consumer_seq": dseq,
            "stream_seq": sseq,
            "deliveries": dc,
        }
        if reason:
            body["reason"] = reason
        o._advisory("MSG_TERMINATED", "terminated", body)

    # -- the ack timer -----------------------------------------------------------------------------

    def wait_for(self, sseq: int) -> int:
        """The ack wait of a delivery of ``sseq`` (its backoff step when configured)."""
        cfg = self.o.cfg
        bo = cfg.backoff
        if bo:
            i = self.t.rdc.get(sseq, 0)
            i = 0 if i < 0 else min(i, len(bo) - 1)
            return bo[i] + ACK_WAIT_DELAY
        return cfg.ack_wait + ACK_WAIT_DELAY

    def arm(self, delay: int, force: bool = False) -> None:
        """Fire in ``delay`` ns, unless already armed sooner (``force``: re-arm anyway)."""
        o = self.o
        end = o.clock.monotonic_ns() + delay
        if self.timer is not None:
            if not force and self.timer_end <= end:
                return
            self.timer.cancel()
        self.timer_end = end
        self.timer = o.clock.call_later(delay, self._check_pending)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _check_pending(self) -> None:
        """The ack timer fired: queue expired messages for redelivery (``checkPending``)."""
        self.timer = None
        o = self.o
        cfg = o.cfg
        if o.closed or not cfg.ack_wait:
            return
        t = self.t
        ex = t.expire(o.clock.time_ns(), o.stream.store.state().first_seq, cfg.ack_wait, cfg.backoff, ACK_WAIT_DELAY)
        for seq, dc in ex.maxed:
            if dc == t.maxdc:
                o.notify_max_deliveries(seq, dc)
        if o.dead_letters is not None and ex.redeliver:
            o.dead_letters.exhausted(ex.redeliver)  # (natsd.dead_letter: no wait for a pull)
        if ex.was_full or ex.redeliver:
            o.kick()
        if ex.next_check >= 0:
            self.arm(ex.next_check, force=True)
        if ex.changed:
            o.writer.mark_dirty()


class ConsumerHub:
    """Per-account consumer plumbing: the single ``$JS.ACK.>`` and ``$JS.FC.>`` subscriptions
    and the deliver-subject -> push consumers index used for interest changes."""

    def __init__(self, account: "AccountView") -> None:
        self.account = account
        self.push: dict[str, list[Consumer]] = {}
        ports = account.ports
        self.subs = [
            ports.subscribe(ACK_PREFIX + ">", self._on_ack, many=self._on_acks),
            ports.subscribe(FC_PREFIX + ">", self._on_fc),
        ]
        self.subs.append(ports.on_interest(self._on_interest))

    def _lookup(self, stream: str, name: str) -> "Consumer | None":
        s = self.account.streams.get(stream)
        if s is None:
            return None
        # every entry of a stream's consumers is a Consumer (consumer_registry makes them)
        return cast("Consumer | None", s.consumer(name))

    def _on_ack(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> bool | None:
        # $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>     (v1, 9 tokens)
        # $JS.ACK.<domain>.<acchash>.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>[...] (v2)
        t = subject.split(".")
        n = len(t)
        if n == 9:
            stream, name, i = t[2], t[3], 4
        elif n >= 11:
            stream, name, i = t[4], t[5], 6
        else:
            return False
        s = self.account.streams.get(stream)
        if s is None:
            return False
        o = s.consumers.get(name)
        if o is None:
            o = s.consumer(name)  # (a woken stream's consumer not recovered yet)
        if o is None or o.cfg.ack_policy == "none":
            # The reference subscribes ack subjects per consumer taking acks: anything else has
            # no receiver, and an ack sent as a request gets "no responders" (not a timeout).
            return False
        try:
            dc, sseq, dseq = int(t[i]), int(t[i + 1]), int(t[i + 2])
        except ValueError:  # a bad token counts as 0, as the reference
            dc, sseq, dseq = num(t[i]), num(t[i + 1]), num(t[i + 2])
        o.acks.process(sseq, dseq, dc, reply, payload)
        return None

    def _on_acks(self, run: "Run") -> None:
        """A run of reply-less acks (``Ports.subscribe(many=...)``, a ``natsd.protocol.events.Run``):
        ``_on_ack`` for each, in order (a client acking one message at a time sends thousands of
        these per read).

        The usual run is v1 acks to one consumer. Then the subjects are split all at once:
        joined with ``.``, the run splits into 9 tokens per ack, so the stream names are
        ``tokens[2::9]``, the delivery counts ``tokens[4::9]`` and so on; the consumer is
        looked up once and the numbers are converted with one ``map`` each. Anything else
        (v2 acks, several consumers, a bad number) takes the per-message path."""
        subjects, payloads = run.names, run.payloads
        # the router fills ``names`` in before a run is matched, so a subscriber always sees them
        assert subjects is not None
        k = len(subjects)
        if k > 1 and list(map(str.count, subjects, repeat(".", k))).count(8) == k:
            t = ".".join(subjects).split(".")
            streams, names = t[2::9], t[3::9]
            if streams.count(streams[0]) == k and names.count(names[0]) == k:
                s = self.account.streams.get(streams[0])
                o = s.consumer(names[0]) if s is not None else None
                if o is None:
                    return
                try:
                    dcs = list(map(int, t[4::9]))
                    sseqs = list(map(int, t[5::9]))
                    dseqs = list(map(int, t[6::9]))
                except ValueError:
                    pass
                else:
                    acks = o.acks
                    if payloads.count(b"+ACK") == k and acks.run_ok(sseqs):
                        acks.ack_run(sseqs)
                        return
                    ack, process = acks.ack, acks.process
                    for sseq, dseq, dc, body in zip(sseqs, dseqs, dcs, payloads):
                        if o.closed:
                            return
                        if body == b"+ACK" or not body:
                            ack(sseq, dseq, dc, True)
                        else:
                            process(sseq, dseq, dc, "", body)
                    return
        on_ack = self._on_ack
        for i in range(k):
            on_ack(subjects[i], "", None, payloads[i])

    def _on_fc(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        t = subject.split(".")
        if len(t) == 5:
            o = self._lookup(t[2], t[3])
        elif len(t) >= 7:
            o = self._lookup(t[4], t[5])
        else:
            return
        if o is not None:
            o.process_flow_control(subject, hdr)

    def track_push(self, o: "Consumer", old_subject: str = "") -> None:
        if old_subject:
            lst = self.push.get(old_subject)
            if lst and o in lst:
                lst.remove(o)
        self.push.setdefault(o.cfg.deliver_subject, []).append(o)

    def untrack_push(self, o: "Consumer") -> None:
        lst = self.push.get(o.cfg.deliver_subject)
        if lst and o in lst:
            lst.remove(o)
            if not lst:
                del self.push[o.cfg.deliver_subject]

    def _on_interest(self, subject: str, added: bool) -> None:
        lst = self.push.get(subject)
        if lst is not None:
            for o in list(lst):
                o.update_interest()
        elif "*" in subject or ">" in subject:
            for lst in list(self.push.values()):
                for o in list(lst):
                    if subject_matches(subject, o.cfg.deliver_subject):
                        o.update_interest()


def hub(account: Any) -> ConsumerHub:
    """The account's hub (made with the account: ``JsAccount.__init__``)."""
    return account.consumer_hub
