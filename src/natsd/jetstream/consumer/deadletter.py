"""Dead-letter subject of a consumer (``natsd.dead_letter`` consumer metadata).

A message that reaches the consumer's ``max_deliver``, or that a client terminates (``+TERM``,
with its reason), is published once on the dead-letter subject; a stream capturing that subject
keeps it. The copy is the stored message with:

* its original headers, except the ones a JetStream publish acts on (``Nats-Msg-Id``, kept as
  ``Natsd-Dlq-Msg-Id``; ``Nats-Expected-*``, ``Nats-Rollup``, ``Nats-TTL``, ``Nats-Batch-*``,
  ``Nats-Incr``, ``Nats-Schedule*``, ``Nats-Required-Api-Level``, ``Nats-Stream-Source``), so the
  dead-letter stream stores it whatever its settings;
* ``Nats-Stream``, ``Nats-Subject``, ``Nats-Sequence`` (where the original is), ``Nats-Consumer``;
* ``Natsd-Dlq-Reason``: ``MaxDeliveries`` or ``Terminated``; ``Natsd-Dlq-Term-Reason``: the
  client's ``+TERM <text>`` (when given); ``Natsd-Dlq-Deliveries``: the delivery count;
  ``Natsd-Dlq-Last-Delivery``: RFC 3339 time of the last delivery;
* ``Nats-Msg-Id: natsd-dlq.<stream>.<consumer>.<sequence>``: publishing it twice (a crash, a
  retry) stores it once, within the dead-letter stream's duplicate window.

Exactly once on work-queue and interest streams: there the original is removed only after the
dead-letter stream's PubAck says the copy is stored (duplicate included). A ``+TERM`` is applied
(acked) then; a message past max_deliver loses its redelivery count then (what kept it needed).
A crash in between leaves the original in the stream with its state: the next start publishes
the copy again (:meth:`DeadLetters.recover`, for max deliveries; a terminated message is
redelivered and terminated again), and the Msg-Id makes that a duplicate, not a second copy.
On a limits stream the original stays as nats-server keeps it; the copy is sent without waiting.
The reference's ``MAX_DELIVERIES`` and ``MSG_TERMINATED`` advisories are sent as before.
"""

from __future__ import annotations

import json
import logging
import os
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from natsd.gotime import format_rfc3339
from natsd.jetstream.features.metadata import consumer_features
from natsd.nuid import nuid
from natsd.store.base import MsgNotFound, StoreEOF

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.consumer.core import Consumer

__all__ = [
    "H_DELIVERIES",
    "H_LAST_DELIVERY",
    "H_ORIGINAL_MSG_ID",
    "H_REASON",
    "H_TERM_REASON",
    "REASON_MAX_DELIVERIES",
    "REASON_TERMINATED",
    "REPLY_PREFIX",
    "DeadLetters",
    "attach",
]

log = logging.getLogger("natsd.jetstream.consumer.deadletter")

#: PubAcks of dead-letter copies come back on ``$NATSD.DLQ.<consumer nuid>.<stream seq>``.
REPLY_PREFIX = "$NATSD.DLQ."
H_REASON = "Natsd-Dlq-Reason"
H_TERM_REASON = "Natsd-Dlq-Term-Reason"
H_DELIVERIES = "Natsd-Dlq-Deliveries"
H_LAST_DELIVERY = "Natsd-Dlq-Last-Delivery"
H_ORIGINAL_MSG_ID = "Natsd-Dlq-Msg-Id"
REASON_MAX_DELIVERIES = "MaxDeliveries"
REASON_TERMINATED = "Terminated"
#: Header names of the original not carried over (a publish would act on them), lower case;
#: a name ending in "-" is a prefix.
_DROPPED = (
    "nats-msg-id",
    "nats-expected-",
    "nats-rollup",
    "nats-ttl",
    "nats-batch-",
    "nats-incr",
    "nats-schedule",
    "nats-required-api-level",
    "nats-stream-source",
    "nats-stream",
    "nats-subject",
    "nats-sequence",
    "nats-consumer",
    "natsd-dlq-",
)
#: Copies whose PubAck is awaited (work-queue / interest streams); a copy nobody answers (no
#: stream captures the subject) stays here until pushed out by newer ones.
INFLIGHT_MAX = 10_000
#: Test hook for the kill -9 acceptance test: exit abruptly once a copy is stored and before the
#: original is removed (the crash window this module must survive).
FAULT_ENV = "NATSD_FAULT_DLQ_EXIT_BEFORE_REMOVE"


def _header_lines(hdr: bytes | None) -> list[tuple[str, str]]:
    if not hdr:
        return []
    out = []
    for line in hdr.decode("utf-8", "replace").split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        if sep and name:
            out.append((name, value.strip()))
    return out


def _single_line(s: str) -> str:
    return " ".join(s.replace("\r", " ").replace("\n", " ").split())


class DeadLetters:
    """The dead-letter side of one consumer (``o.dead_letters``; ``None`` without the key)."""

    def __init__(self, o: Consumer, subject: str) -> None:
        self.o = o
        self.subject = subject
        self._id = nuid()
        self._sub: Any = None
        # stream seq -> what to do once the copy is stored: ("term", dseq, dc) / ("max", 0, dc)
        self._inflight: OrderedDict[int, tuple[str, int, int]] = OrderedDict()

    @property
    def _defer(self) -> bool:
        """Work-queue / interest: the original goes only after the copy is stored."""
        return self.o.stream.config.retention != "limits"

    # -- hooks called by the consumer ----------------------------------------------------------

    def on_term(self, sseq: int, dseq: int, dc: int, reason: str) -> bool:
        """A client sent ``+TERM [reason]`` for a pending delivery. Publishes the copy; True when
        the ack itself waits for the copy's PubAck (the caller then only sends the advisory)."""
        t = self.o.t
        p = t.pending.get(sseq)
        if p is None or dseq <= t.adflr:
            return False  # nothing pending: the plain +TERM path answers as the reference
        sent = self._publish(sseq, dc, p[1], REASON_TERMINATED, reason, ("term", dseq, dc))
        return sent and self._defer

    def on_max_deliveries(self, sseq: int, dc: int, last_ts: int) -> None:
        """``sseq`` was delivered ``max_deliver`` times without an ack (the MAX_DELIVERIES advisory)."""
        self._publish(sseq, dc, last_ts, REASON_MAX_DELIVERIES, "", ("max", 0, dc))

    def exhausted(self, redeliver: list[int]) -> None:
        """The ack timer queued ``redeliver``: those already delivered max_deliver times would
        only be dropped (and advised) when a pull next asks for a message, as the reference
        does; with a dead-letter subject they go now, so the copy does not wait for a client."""
        o = self.o
        t = o.t
        if not t.maxdc:
            return
        for seq in redeliver:
            dc = t.rdc.get(seq, 0) + 1  # deliveries so far
            if dc < t.maxdc:
                continue
            t.remove_rdq(seq)
            p = t.pending.pop(seq, None)
            t.dropped_ts = p[1] if p is not None else 0
            if p is not None:
                t.max_deliver_floor(p[0], seq)
            t.rdc[seq] = dc
            o.writer.mark_dirty()
            o.notify_max_deliveries(seq, dc)

    def recover(self) -> None:
        """At start (work-queue / interest): messages that reached max_deliver and are still in
        the stream may have had their copy published and the crash came before the removal, or
        not published at all: publish again (a duplicate for the dead-letter stream if stored)."""
        o = self.o
        if o.closed or not self._defer or not o.t.maxdc:
            return
        t = o.t
        for seq, dc in sorted(t.rdc.items()):
            if dc >= t.maxdc and seq not in t.pending:
                self.on_max_deliveries(seq, dc, 0)

    def stop(self) -> None:
        if self._sub is not None:
            self._sub.unsubscribe()
            self._sub = None
        self._inflight.clear()

    # -- the copy ------------------------------------------------------------------------------

    def _publish(self, sseq: int, dc: int, last_ts: int, why: str, text: str, then: tuple[str, int, int]) -> bool:
        o = self.o
        try:
            sm = o.stream.store.load_msg(sseq)
        except (MsgNotFound, StoreEOF):
            return False  # gone meanwhile (limits, a delete): nothing to dead-letter
        lines = [
            (n, v)
            for n, v in _header_lines(sm.hdr)
            if not any(n.lower() == d or (d.endswith("-") and n.lower().startswith(d)) for d in _DROPPED)
        ]
        for n, v in _header_lines(sm.hdr):
            if n.lower() == "nats-msg-id":
                lines.append((H_ORIGINAL_MSG_ID, v))
        lines += [
            ("Nats-Stream", o.stream_name),
            ("Nats-Subject", sm.subject),
            ("Nats-Sequence", str(sseq)),
            ("Nats-Consumer", o.name),
            (H_REASON, why),
        ]
        if text:
            lines.append((H_TERM_REASON, _single_line(text)))
        lines.append((H_DELIVERIES, str(dc)))
        if last_ts > 0:
            lines.append((H_LAST_DELIVERY, format_rfc3339(last_ts)))
        lines.append(("Nats-Msg-Id", f"natsd-dlq.{o.stream_name}.{o.name}.{sseq}"))
        hdr = ("NATS/1.0\r\n" + "".join(f"{n}: {v}\r\n" for n, v in lines) + "\r\n").encode()
        reply = ""
        if self._defer:
            if self._sub is None:
                self._sub = o.ports.subscribe(REPLY_PREFIX + self._id + ".*", self._on_puback)
            reply = f"{REPLY_PREFIX}{self._id}.{sseq}"
            self._inflight[sseq] = then
            self._inflight.move_to_end(sseq)
            while len(self._inflight) > INFLIGHT_MAX:
                self._inflight.popitem(last=False)
        o.ports.publish(self.subject, reply, hdr, sm.msg)
        return True

    def _on_puback(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        try:
            sseq = int(subject.rsplit(".", 1)[1])
            ack = json.loads(payload) if payload else {}
        except ValueError:
            return
        then = self._inflight.pop(sseq, None)
        o = self.o
        if then is None or o.closed:
            return
        if not isinstance(ack, dict) or "error" in ack or "seq" not in ack:
            # Not stored (a full or sealed dead-letter stream...): the original stays.
            log.warning(
                "dead-letter copy of %s seq %d on %s not stored: %s",
                o.stream_name,
                sseq,
                self.subject,
                ack.get("error") if isinstance(ack, dict) else ack,
            )
            return
        if os.environ.get(FAULT_ENV):
            os._exit(137)
        kind, dseq, dc = then
        if kind == "term":
            o.acks.ack(sseq, dseq, dc, False)
        else:
            # Its redelivery count was what kept it needed; the stream may now remove it.
            o.t.rdc.pop(sseq, None)
            o.writer.mark_dirty()
            o.stream.ack_processed(o, sseq)


def attach(o: Consumer, cur: DeadLetters | None) -> DeadLetters | None:
    """The consumer's DeadLetters for its config (``None`` when it names no dead-letter subject);
    the current one (``cur``) is kept when the subject did not change."""
    subject = consumer_features(o.cfg.metadata, o.cfg.filters()).dead_letter
    if cur is not None and cur.subject == subject:
        return cur
    if cur is not None:
        cur.stop()
    return DeadLetters(o, subject) if subject else None
