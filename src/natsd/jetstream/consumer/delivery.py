"""The delivery pass: what a consumer sends next, to whom, and when.

A consumer never sleeps and never polls. :meth:`Delivery.kick` asks for one pass at the end of
the loop turn (``Clock.call_soon``; idempotent), and the stream (new messages), acks, pull
requests, flow-control replies and interest changes kick. A pass (:meth:`Delivery.run`) sends
up to :data:`TURN_BUDGET` messages and yields; what waits (replay pacing, rate limit, pause) is
one timer that kicks again.

Order of what goes out: redeliveries first (the redelivery queue, oldest first), then the
``last_per_subject`` start list, then new messages from the cursor (``sseq``). A push consumer
sends to its deliver subject while it has interest and its flow-control window allows; a pull
consumer to the head of its waiting queue (round-robin one message at a time, the queue pops).

Each message commits its consumer sequence, its pending entry (or the ack floor for ack none),
then goes out with its v1 ack subject as reply. Deliveries to one subject are collected and
handed to ``Ports.deliver_many`` in one call; the batch is sent before anything else can publish
(statuses, flow control, advisories), so the wire order is the one of the messages.

Two ways through the same rules:

* the **general loop** of :meth:`Delivery.run`, message by message, for every case;
* the **fast paths** for runs of new messages, when nothing makes messages differ (no
  redeliveries, no start list, no narrowing filter, no pacing, no headers_only):
  :meth:`Delivery.deliver_run` for one waiting pull request (no byte budget, not expired, inbox
  with interest) and :meth:`Delivery.push_run` for a push consumer (a replay, a KV watch; with
  flow control the run is cut where the loop would send a request or stop, found by bisection
  over the summed sizes). A run is read with one store ``load_run``, the consumer's state is
  updated once (:meth:`Delivery._commit_run`), and everything per message is C-level
  ``map``/``zip``: without headers the run goes out as a ``TemplatedRun``
  (``Ports.deliver_templated``: each ack reply is made inside its frame's single format), else
  as ``deliver_many`` items. The fast paths are taken only when the port can take a batch
  (``deliver_many``); with a port that delivers one message at a time the general loop serves
  the same consumers, which is how ``tests/unit/jetstream/test_delivery_fastpath.py`` checks
  that both give the same messages and the same state, pass for pass.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate, repeat
from operator import add
from typing import TYPE_CHECKING, Any

from natsd.jetstream.consumer import status as D
from natsd.jetstream.consumer.acks import UNACKED_LIMITS_REASON
from natsd.jetstream.consumer.pull import PullRequest
from natsd.jetstream.config.consumer_config import MS
from natsd.jetstream.ports import TemplatedRun
from natsd.store.base import MsgNotFound, StoreClosed, StoreEOF
from natsd.subjects.tokens import subset

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.consumer.core import Consumer
    from natsd.store.base import StoreMsg

__all__ = ["Delivery", "TURN_BUDGET"]

#: Deliveries per loop turn before yielding to the loop (keeps other clients responsive: a
#: pass of 512 is a few ms; 2048 held request/reply p99 at ~180 ms while delivering 1M).
TURN_BUDGET = 512


def _reply_len(fmt: bytes, bounds: tuple) -> int:
    """``len(fmt % row)`` for every row of columns of non-negative ints whose smallest and
    largest values are ``bounds`` (``(lo, hi)`` per column), when each column's numbers have
    one number of digits (its smallest and largest do); else -1."""
    n = len(fmt % ((0,) * len(bounds))) - len(bounds)
    for lo, hi in bounds:
        d = len(str(hi))
        if lo < 0 or len(str(lo)) != d:
            return -1
        n += d
    return n


class Delivery:
    """One consumer's delivery passes, their scheduling and their pacing."""

    __slots__ = ("o", "scheduled", "kick_timer", "replay", "replay_lseq", "lts", "rl_t", "checked", "run_filters")

    def __init__(self, o: "Consumer") -> None:
        self.o = o
        self.scheduled = False
        self.kick_timer: Any = None
        self.replay = o.cfg.replay_policy == "original"  # pacing as stored, until caught up
        self.replay_lseq = 0  # the stream's last sequence when replay started
        self.lts = 0  # stored time of the last message sent while replaying
        self.rl_t = 0  # rate limit virtual time (monotonic ns)
        self.checked: set[str] = set()  # this pass's inboxes seen with interest (for _peek)
        self.run_filters: list[str] | None = None  # this pass's narrowing filters (_load_run)

    # -- scheduling --------------------------------------------------------------------------------

    def kick(self) -> None:
        """Ask for a delivery pass at the end of this loop turn (idempotent)."""
        if not self.scheduled and not self.o.closed:
            self.scheduled = True
            self.o.clock.call_soon(self.run)

    def kick_later(self, delay: int) -> None:
        if self.kick_timer is not None:
            self.kick_timer.cancel()

        def fire() -> None:
            self.kick_timer = None
            self.kick()

        self.kick_timer = self.o.clock.call_later(delay, fire)

    def paused(self) -> bool:
        pu = self.o.cfg.pause_until
        return pu is not None and self.o.clock.time_ns() < pu

    def update_pause_timer(self) -> None:
        pu = self.o.cfg.pause_until
        if pu is None:
            return
        now = self.o.clock.time_ns()
        if now < pu:
            self.kick_later(pu - now)

    def cancel_kick_timer(self) -> None:
        if self.kick_timer is not None:
            self.kick_timer.cancel()
            self.kick_timer = None

    def _rate_delay(self, sz: int) -> int:
        """Token bucket on bytes (``rate_limit_bps`` / 8 per second); returns ns to wait."""
        rate = self.o.cfg.rate_limit_bps / 8.0
        now = self.o.clock.monotonic_ns()
        burst = int(1e9 * max(1.0, min(rate, 1 << 20) / rate)) if rate else 0
        t = max(self.rl_t, now - burst)
        delay = t - now
        if delay > 0:
            return delay
        self.rl_t = t + int(sz * 1e9 / rate)
        return 0

    # -- the pass ----------------------------------------------------------------------------------

    def run(self) -> None:
        """One delivery pass: up to TURN_BUDGET messages, then yield to the loop.

        Hot path: no per-message JSON, timers or objects beyond the ack subject string; one
        wall-clock read, one ack-timer check and one state write per pass."""
        self.scheduled = False
        o = self.o
        if o.closed:
            return
        if self.paused():
            self.update_pause_timer()
            return
        t = o.t
        push = o.push
        pull = o.pull
        waiting = pull.wq if pull is not None else None
        clock = o.clock
        ports = o.ports
        deliver = o.deliver_one
        publish = ports.publish
        cfg = o.cfg
        headers_only = cfg.headers_only
        ack_none = o.acks.ack_none
        pending = t.pending
        ack_fmt = o.ack_fmt
        deliver_subject = cfg.deliver_subject
        fc = push is not None and push.maxpb > 0
        pace = self.replay or cfg.rate_limit_bps > 0
        need_sz = fc or pace
        budget = TURN_BUDGET
        eos = True  # False when we stopped for max_ack_pending or a pacing delay
        now_w = clock.time_ns()
        now_m = clock.monotonic_ns()
        first_pending_seq = 0
        if push is not None:
            if not push.active:
                return
        elif not waiting:
            return
        o.settle_npc()
        retention_acks = ack_none and o.stream.config.retention != "limits"
        checked: set[str] = set()  # pull inboxes whose interest was verified this pass
        self.checked = checked
        # Fast path: nothing to redeliver, no last-per-subject list, no filter narrower than the
        # stream: read forward with one store iterator instead of a lookup per message (made
        # when first needed, and again after a run of deliver_run moved sseq past it).
        fast_it = None
        fast = not t.rdq and t.lss is None and self._covers_stream() and o.partitions is None
        # A narrowing filter (plgd.*.<event>) takes the run paths too: their runs are then read
        # with load_filtered_run (what _peek's load_next_msg would find, message after message).
        self.run_filters = None if fast or t.rdq or t.lss is not None or o.partitions is not None else o.filters
        runs_ok = fast or self.run_filters is not None
        maxp = t.maxp if not ack_none else 0
        # Deliveries to one subject are collected and handed over in one deliver_many call (one
        # subscription match, one buffer append per frame). The batch is sent before anything
        # else can publish (statuses, flow control, advisories), so wire order is unchanged.
        many: Any = o.deliver_many if not retention_acks else None
        # Pull fast path (deliver_run): whole runs of new messages to the head request.
        runs = runs_ok and many is not None and push is None and not pace and not headers_only
        # Push fast path (push_run): the same, to the deliver subject; flow control cuts the
        # runs (not under ack policy flow_control, whose requests also depend on max_ack_pending).
        pruns = (
            runs_ok
            and many is not None
            and push is not None
            and not pace
            and not headers_only
            and cfg.ack_policy != "flow_control"
        )
        # Priority groups: requests go through pull.next_waiting (or run_ok), except the pinned
        # client's own, and a pinned-client consumer's deliveries carry Nats-Pin-Id (priority.py).
        prio = pull is not None and cfg.priority_policy != "none"
        pin = pull.pin if pull is not None else None
        pin_hdr = pin.pin_header if prio and cfg.priority_policy == "pinned_client" else None  # type: ignore[union-attr]
        batch: list = []
        bsubj = ""
        # the waiting request being served: a PullRequest wherever it is used (the loop reads
        # waiting.live before head()), None between requests; Any so that this per-message
        # loop needs no runtime narrowing
        wr: Any
        try:
            while budget > 0:
                if push is not None:
                    if not push.active or (fc and push.pbytes > push.maxpb):
                        break
                    if pruns and not t.rdq:
                        # The common push case (a replay, a KV watch): whole runs of new
                        # messages to the deliver subject, cut where flow control acts.
                        n = budget
                        if maxp > 0 and maxp - len(pending) < n:
                            n = maxp - len(pending)
                            if n <= 0:
                                eos = False
                                break
                        bsubj = deliver_subject
                        k, first, eof = self.push_run(n, batch, now_w, fc)
                        fast_it = None
                        if k:
                            budget -= k
                            if not first_pending_seq and not ack_none:
                                first_pending_seq = first
                        if fc and not push.fcid and push.pbytes > push.maxpb // 2:
                            if batch:  # the request follows the messages it covers
                                many(bsubj, batch)
                                batch = []
                            push.send_flow_control()
                        if eof:
                            self._at_eof()
                            break
                        continue
                elif not waiting.live:  # type: ignore[union-attr]  # (the count: no __bool__ call)
                    break
                if runs and waiting.live == 1 and not t.rdq:  # type: ignore[union-attr]
                    # The common pull case: one waiting request with no byte budget, not
                    # expired, inbox with interest: its whole run at once (see deliver_run).
                    wr = waiting.head()  # type: ignore[union-attr]
                    n = wr.n if wr.n < budget else budget
                    if maxp > 0 and maxp - len(pending) < n:
                        n = maxp - len(pending)
                    if (
                        n > 0
                        and wr.b == 0
                        and (not wr.expires or now_m < wr.expires)
                        and (wr.reply in checked or pull.has_interest(wr.reply, checked))  # type: ignore[union-attr]
                        and (not prio or pull.pin.run_ok(wr))  # type: ignore[union-attr]
                    ):
                        if batch and bsubj != wr.reply:
                            many(bsubj, batch)
                            batch = []
                        bsubj = wr.reply
                        k, first = self.deliver_run(wr, n, batch, now_w)
                        fast_it = None
                        if k:
                            budget -= k
                            if not first_pending_seq and not ack_none:
                                first_pending_seq = first
                        if k < n:  # the stream has nothing more (as next() -> None below)
                            self._at_eof()
                            break
                        continue
                if fast and not t.rdq:
                    if maxp > 0 and len(pending) >= maxp:
                        eos = False
                        break
                    if fast_it is None:
                        fast_it = iter(o.stream.store.iter_msgs(t.sseq, 1 << 62))
                    sm = next(fast_it, None)
                    if sm is None:
                        self._at_eof()
                        break
                    kind, dc = "new", 1
                else:
                    if batch:
                        many(bsubj, batch)
                        batch = []
                    nxt = self._peek()
                    if nxt is None:
                        break
                    if nxt is False:
                        eos = False
                        break
                    kind, sm, dc = nxt
                seq = sm.seq
                hdr, msg = sm.hdr, sm.msg
                if headers_only:
                    hdr = D.headers_only(hdr, len(msg))
                    msg = b""
                dseq = t.dseq
                npc = o.npc
                if kind != "rd":
                    npc -= 1
                # v1 ack subject: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>
                reply = ack_fmt % (dc, seq, dseq, sm.ts, npc if npc > 0 else 0)
                # Size as the reference counts it (flow control, max_bytes, rate limit).
                sz = (len(sm.subject) + len(reply) + (len(hdr) if hdr else 0) + len(msg)) if need_sz else 0
                if push is not None:
                    dsubj = deliver_subject
                    wr = None
                else:
                    # Common case inline: the head request has no byte budget, has not expired
                    # and its inbox was seen with interest earlier in this pass.
                    wr = waiting.head()  # type: ignore[union-attr]
                    if (
                        wr.b == 0
                        and (not wr.expires or now_m < wr.expires)
                        and wr.reply in checked
                        and (
                            not prio
                            or (
                                pin_hdr is not None
                                and wr.pg is not None  # the pinned client
                                and pin.pin_id  # type: ignore[union-attr]
                                and wr.pg.id == pin.pin_id  # type: ignore[union-attr]
                            )
                        )
                    ):
                        waiting.pop()  # type: ignore[union-attr]
                    else:
                        if not sz:
                            sz = len(sm.subject) + len(reply) + (len(hdr) if hdr else 0) + len(msg)
                        if batch:
                            many(bsubj, batch)
                            batch = []
                        wr = pull.next_waiting(sz, checked, npc + 1)  # type: ignore[union-attr]
                        if wr is None:
                            break
                    dsubj = wr.reply
                    if pin_hdr is not None:
                        hdr = pin_hdr(hdr)
                if pace:
                    # Replay original: space messages as they were stored.
                    if self.replay:
                        if self.lts and sm.ts - self.lts > MS:
                            if wr is not None:
                                waiting.credit(wr)  # type: ignore[union-attr]
                            self.kick_later(sm.ts - self.lts)
                            self.lts = 0
                            eos = False
                            break
                        self.lts = sm.ts
                    if cfg.rate_limit_bps:
                        delay = self._rate_delay(sz)
                        if delay > 0:
                            if wr is not None:
                                waiting.credit(wr)  # type: ignore[union-attr]
                            self.kick_later(delay)
                            eos = False
                            break
                # Commit: the message is going out.
                if kind == "new":
                    t.sseq = seq + 1
                    o.npc = npc
                else:
                    self._commit(kind, seq, dc)
                t.dseq = dseq + 1
                if dc == 1 and kind != "ahead":  # (ahead of the cursor: natsd.partition_key)
                    t.dlv_sseq = seq
                if ack_none:
                    t.adflr = dseq
                    t.asflr = seq
                else:
                    p = pending.get(seq)
                    pending[seq] = (dseq if p is None else p[0], now_w)
                    if not first_pending_seq:
                        first_pending_seq = seq
                if many is not None:
                    if dsubj != bsubj:
                        if batch:
                            many(bsubj, batch)
                            batch = []
                        bsubj = dsubj
                    batch.append((sm.subject.encode(), reply.encode(), hdr, msg))
                elif deliver is not None:
                    deliver(dsubj, sm.subject, reply, hdr, msg)
                else:
                    publish(dsubj, reply, hdr, msg)
                budget -= 1
                if fc:
                    push.pbytes += sz  # type: ignore[union-attr]
                    if not push.fcid and (  # type: ignore[union-attr]
                        push.pbytes > push.maxpb // 2  # type: ignore[union-attr]
                        or (maxp > 0 and len(pending) >= maxp and cfg.ack_policy == "flow_control")
                    ):
                        if batch:  # the request follows the messages it covers
                            many(bsubj, batch)
                            batch = []
                        push.send_flow_control()  # type: ignore[union-attr]
                    elif push.fcid and push.pbytes - push.fcsz >= push.maxpb:  # type: ignore[union-attr]
                        push.fcsz += sz  # type: ignore[union-attr]
                if wr is not None:
                    if wr.n <= 0:
                        if wr.b > 0:
                            if batch:
                                many(bsubj, batch)
                                batch = []
                            publish(dsubj, "", D.pending_status(409, "Batch Completed", wr.n, wr.b), b"")
                    elif wr.hb:
                        wr.hbt = clock.monotonic_ns() + wr.hb
                if retention_acks:
                    o.stream.ack_processed(o, seq)
        except StoreClosed:
            # The stream is being stopped or deleted under us; it stops this consumer next.
            budget = TURN_BUDGET
        finally:
            if batch:
                many(bsubj, batch)
            if budget < TURN_BUDGET:
                o.ldt = now_w
                if push is not None:
                    push.last_sent = now_m
                elif o.dthresh:
                    waiting.last = now_m  # type: ignore[union-attr]  # deliveries count as pull activity
                if first_pending_seq and cfg.ack_wait:
                    o.acks.arm(o.acks.wait_for(first_pending_seq))
                o.writer.mark_dirty()
            if budget == 0:
                self.kick()
            else:
                if self.replay and t.sseq > self.replay_lseq and not t.rdq:
                    self.replay = False
                if pull is not None:
                    pull.end_of_pass(eos)

    def push_run(self, n: int, batch: list, now_w: int, fc: bool) -> tuple[int, int, bool]:
        """Deliver up to ``n`` new messages to the push consumer's deliver subject in one go;
        returns ``(delivered, first stream seq, at the stream's end)``.

        The push twin of :meth:`deliver_run`, under the same conditions (a push consumer with
        interest, nothing to redeliver, no last-per-subject list, no narrowing filter, no
        pacing, no headers_only, ``n`` within the turn budget and max_ack_pending), and giving
        what the general loop of :meth:`run` gives message for message. With flow control the
        run is cut where that loop would act: at the message that takes the bytes in flight past
        half the window when no request is out (the caller then sends it), or past the whole
        window when one is (the loop then stops). Sizes are counted as that loop counts them
        (subject, ack reply, headers, payload) and summed with ``accumulate``, so the cut is
        found by bisection rather than a Python step per message."""
        o = self.o
        t = o.t
        run = self._load_run(n)
        seqs = run.seqs
        got = len(seqs)
        if not got:
            return 0, 0, True
        dseq = t.dseq
        npc = o.npc
        npcs: Any = range(npc - 1, npc - 1 - got, -1)
        if npc < got:
            npcs = [x if x > 0 else 0 for x in npcs]
        subjects, hdrs, msgs = run.subjects, run.hdrs, run.msgs
        # v1 ack subject, bytes: $JS.ACK.<stream>.<consumer>.1.<sseq>.<dseq>.<ts>.<pending>
        cols = (seqs, range(dseq, dseq + got), run.tss, npcs)
        # Without headers the run goes out templated (the replies made inside the frames):
        # flow control then counts each reply by its length, the same for the whole run when
        # every column keeps one number of digits (else the replies are made here after all).
        rlen = -1
        if hdrs is None:
            # sequences ascend, pending counts descend: their ends are their bounds
            tss = run.tss
            rlen = _reply_len(
                o.ack_fmt1, ((seqs[0], seqs[-1]), (dseq, dseq + got - 1), (min(tss), max(tss)), (npcs[-1], npcs[0]))
            )
        replies: Any = None if rlen >= 0 else list(map(o.ack_fmt1.__mod__, zip(*cols)))
        k = got
        if fc:
            push = o.push
            assert push is not None
            sizes = list(map(add, map(len, subjects), map(len, msgs)))
            if replies is None:
                sizes = list(map(rlen.__add__, sizes))
            else:
                sizes = list(map(add, sizes, map(len, replies)))
            if hdrs is not None:
                sizes = list(map(add, sizes, [len(h) if h else 0 for h in hdrs]))
            # cum[i]: the bytes in flight once message i - 1 went out (cum[0]: before the run).
            cum = list(accumulate(sizes, initial=push.pbytes))
            maxpb = push.maxpb
            # The first cum[j] past the line: message j - 1 crosses it and ends the run.
            k = min(bisect_right(cum, maxpb if push.fcid else maxpb // 2, 1), got)
            push.pbytes = cum[k]
            if push.fcid:
                # As the loop: with a request out, past a whole window since it went out,
                # each message's size extends what its answer will cover.
                for i in range(bisect_left(cum, push.fcsz + maxpb, 1, k + 1), k + 1):
                    if cum[i] - push.fcsz >= maxpb:
                        push.fcsz += sizes[i - 1]
            if k < got:
                seqs, subjects, msgs = seqs[:k], subjects[:k], msgs[:k]
                cols = (seqs, cols[1][:k], cols[2][:k], cols[3][:k])
                if replies is not None:
                    replies = replies[:k]
                if hdrs is not None:
                    hdrs = hdrs[:k]
        if replies is None:
            self._send_templated(o.cfg.deliver_subject, batch, subjects, cols, msgs)
        else:
            batch += zip(subjects, replies, hdrs if hdrs is not None else repeat(None, k), msgs)
        self._commit_run(seqs, k, now_w)
        return k, seqs[0], k == got < n

    def _load_run(self, n: int) -> Any:
        """The next ``n`` new messages for this pass's run paths (filtered: ``run_filters``)."""
        o = self.o
        if self.run_filters:
            return o.stream.store.load_filtered_run(o.t.sseq, n, self.run_filters)
        return o.stream.store.load_run(o.t.sseq, n)

    def _send_templated(self, subject: str, batch: list, subjects: Any, cols: tuple, msgs: Any) -> None:
        """Send a run of header-less new messages to ``subject`` now, its ack replies made by
        the frames' own format (``Ports.deliver_templated``), after what ``batch`` holds for
        the same subject (sent first, and emptied: the wire order stays the loop's)."""
        o = self.o
        if batch:
            o.deliver_many(subject, batch)
            batch.clear()
        o.ports.deliver_templated(subject, TemplatedRun(subjects, o.ack_fmt1, cols, msgs))

    def _commit_run(self, seqs: Any, k: int, now_w: int) -> None:
        """The consumer's state after delivering the ``k`` new messages ``seqs`` (delivery count
        1) from its cursor: as the general loop leaves it after them, in one update."""
        o = self.o
        t = o.t
        dseq = t.dseq
        last = seqs[-1]
        if o.acks.ack_none:
            t.adflr = dseq + k - 1
            t.asflr = last
        else:
            # New messages are above every pending one (sseq only moves forward; a reset
            # clears pending), so these are all new entries.
            t.pending.update(dict(zip(seqs, zip(range(dseq, dseq + k), repeat(now_w, k)))))
        t.sseq = last + 1
        o.npc -= k
        t.dseq = dseq + k
        t.dlv_sseq = last

    def deliver_run(self, wr: PullRequest, n: int, batch: list, now_w: int) -> tuple[int, int]:
        """Deliver up to ``n`` new messages to pull request ``wr`` (the only waiting one) in one
        go; returns ``(delivered, first stream seq)``, fewer than ``n`` only at the stream's end.

        The caller checked what makes every message of the run take the same path in the
        general loop of :meth:`run`: a pull consumer, nothing to redeliver, no last-per-subject
        list, no narrowing filter, no pacing, no headers_only, the request has no byte budget,
        has not expired, its inbox has interest, and ``n`` fits the request, the turn budget and
        max_ack_pending. So the run gets exactly what that loop would give it, message for
        message: consumer sequences ``dseq ..``, the v1 ack subject with delivery count 1 and
        the pending count going down to 0, a pending entry stamped ``now_w`` per message (or
        the ack floor for ack none), and the frames appended to ``batch`` as
        ``(subject, reply, hdr, payload)`` bytes items for ``deliver_many``; but the store reads
        the run at once (``load_run``, one object per run) and everything per message is done
        by C-level ``map``/``zip``, with the consumer's state updated once."""
        o = self.o
        t = o.t
        run = self._load_run(n)
        seqs = run.seqs
        k = len(seqs)
        if not k:
            return 0, 0
        dseq = t.dseq
        npc = o.npc
        ds = range(dseq, dseq + k)
        # The pending count each ack subject carries: npc - 1, npc - 2, ... never below 0.
        npcs: Any = range(npc - 1, npc - 1 - k, -1)
        if npc < k:
            npcs = [x if x > 0 else 0 for x in npcs]
        # v1 ack subject, bytes: $JS.ACK.<stream>.<consumer>.1.<sseq>.<dseq>.<ts>.<pending>
        cols = (seqs, ds, run.tss, npcs)
        hdrs: Any = run.hdrs
        if o.cfg.priority_policy == "pinned_client":
            pin_hdr = o.pull.pin.pin_header  # type: ignore[union-attr]
            hdrs = map(pin_hdr, hdrs) if hdrs is not None else repeat(pin_hdr(None), k)
        if hdrs is None:
            self._send_templated(wr.reply, batch, run.subjects, cols, run.msgs)
        else:
            replies = map(o.ack_fmt1.__mod__, zip(*cols))
            batch += zip(run.subjects, replies, hdrs, run.msgs)
        self._commit_run(seqs, k, now_w)
        o.pull.wq.take_run(wr, k)  # type: ignore[union-attr]
        if wr.n > 0 and wr.hb:
            wr.hbt = o.clock.monotonic_ns() + wr.hb
        return k, seqs[0]

    def _peek(self) -> Any:
        """The next thing to deliver: ``(kind, StoreMsg, delivery count)``; ``None`` when there
        is nothing; ``False`` when new messages are held back by max_ack_pending."""
        o = self.o
        t = o.t
        store = o.stream.store
        sm: StoreMsg | None
        while t.rdq:
            seq = t.rdq[0]
            dc = t.rdc.get(seq, 0) + 1 + 1  # as incDeliveryCount: redelivery count + 1 more
            if t.maxdc and dc > t.maxdc:
                t.drop_redelivery(seq, dc)
                if dc == t.maxdc + 1:
                    o.notify_max_deliveries(seq, dc - 1)
                o.writer.mark_dirty()
                continue
            try:
                sm = store.load_msg(seq)
            except (MsgNotFound, StoreEOF):
                t.pop_rdq()
                p = t.pending.get(seq)
                if p is not None:
                    o.acks.term(seq, p[0], dc - 1, UNACKED_LIMITS_REASON)
                continue
            return ("rd", sm, dc)
        if t.maxp > 0 and len(t.pending) >= t.maxp:
            return False
        if t.lss is not None:
            if t.lss:
                seq = t.lss[0]
                try:
                    return ("lss", store.load_msg(seq), 1)
                except (MsgNotFound, StoreEOF):
                    # Removed since the list was made (limits): nats-server's getNextMsg drops
                    # the entry and ends the pass with the load error, not at the end of the
                    # stream, so the requests waiting now are served at the next kick (a new
                    # request or message); a pull that expires meanwhile gets its 408.
                    t.lss.pop(0)
                    if not t.lss:
                        t.sseq = t.lss_resume + 1
                        t.lss = None
                    o.recalc_pending()
                    return False
            t.sseq = t.lss_resume + 1
            t.lss = None
            o.recalc_pending()
        if o.partitions is not None:  # natsd.partition_key: the key decides (consumer/partition.py)
            return o.partitions.peek(self.checked)  # (it picks the request too)
        fl = o.filters
        try:
            if len(fl) <= 1:
                sm = store.load_next_msg(o.single_filter, t.sseq)
            else:
                sm = None
                for f in fl:
                    try:
                        cand = store.load_next_msg(f, t.sseq)
                    except StoreEOF:
                        continue
                    if sm is None or cand.seq < sm.seq:
                        sm = cand
                if sm is None:
                    raise StoreEOF()
        except StoreEOF:
            self._at_eof()
            return None
        return ("new", sm, 1)

    def _at_eof(self) -> None:
        """Nothing more to deliver: skip sseq past the stream's end (as the reference)."""
        o = self.o
        last = o.stream.store.state().last_seq
        if o.t.sseq <= last:
            o.t.sseq = last + 1
        o.npc = 0

    def _covers_stream(self) -> bool:
        """True when the filters let every stream subject through (a filter equal to the
        stream's subject is no filter, as nats-server's isFiltered)."""
        o = self.o
        fl = o.filters
        if not fl:
            return True
        subjects = o.stream.config.subjects or []
        if not subjects:
            return False
        for s in subjects:
            if not any(subset(s, f) for f in fl):
                return False
        return True

    def _commit(self, kind: str, seq: int, dc: int) -> None:
        o = self.o
        t = o.t
        if kind == "rd":
            t.pop_rdq()
            t.rdc[seq] = dc - 1
        elif kind == "ahead":  # (natsd.partition_key: delivered past a blocked key, cursor stays)
            o.npc -= 1
        elif kind == "lss":
            t.lss.pop(0)  # type: ignore[union-attr]
            if not t.lss:
                t.lss = None
                t.sseq = t.lss_resume + 1
            else:
                t.sseq = seq + 1
            o.npc -= 1
        else:
            t.sseq = seq + 1
            o.npc -= 1
