"""The output side of a client connection: the one place bytes are queued for its socket.

:class:`Writer` is a base of :class:`natsd.server.connection.ClientConnection` (which owns the slots
named here), like nats-server's ``queueOutbound`` + ``flushSignal``. Every producer — the router's
fan-out, JetStream deliveries and PubAcks (through ``natsd.server.ports``), the connection's own
``+OK``/``PONG``/``-ERR``/``INFO``, system publishes — goes through one of these methods:

* :meth:`Writer.enqueue` ``(data, msgs, nbytes, src)``: bytes already framed (a control line, one
  MSG, a consumer's batch of frames);
* :meth:`Writer.enqueue_msg` ``(sub, head, mid, data, size, src)``: one MSG/HMSG from the pieces the router
  shares between receivers (:func:`natsd.protocol.encoder.msg_parts`), appended in place with no
  per-receiver allocation;
* :meth:`Writer.enqueue_run` ``(prefix, payloads, nbytes, src)``: a run of messages with one control
  line (:func:`natsd.protocol.encoder.append_run`);
* :meth:`Writer.enqueue_msgs` ``(sid, items, src)``: a consumer's batch to one subscription
  (:func:`natsd.protocol.encoder.append_msgs`).

Each of them does the same four things, and nothing else in the server does them:

1. append to ``out`` (a ``bytearray``; the framing is :mod:`natsd.protocol.encoder`'s);
2. account: ``out_msgs``/``out_bytes`` as ``/connz`` and ``/varz`` show them (``nbytes`` counts
   payload bytes, headers included, as nats-server's ``outbound bytes``); control lines count
   nothing;
3. schedule one :meth:`flush` per connection per loop turn (``flush_pending``): a burst of
   deliveries costs one ``transport.write``. The connections are handed to the server's
   :class:`natsd.server.transport.flushbatch.FlushBatch` (``_flush_soon``), which flushes all
   of a turn's in one callback: a publisher fanning out to many connections schedules one loop
   callback, not one each;
4. apply the slow-consumer and stall policy to messages: ``out`` above ``max_pending`` closes the
   connection as a slow consumer (no ``-ERR``: the client is not reading, as the reference); a
   *congested* receiver (its transport above the high-water mark, see ``pause_writing``) stalls
   the publishing connection ``src`` (see :meth:`stall`). Control lines are not checked (the
   reference's ``+OK``/``PONG`` never cut a client off; :meth:`flush` still does when the
   transport's own buffer passes ``max_pending``).

Steps 2–4 are :meth:`Writer._queued`; :meth:`Writer.enqueue_msg` repeats them inline on purpose:
it runs once per receiver per message, where a helper call costs more than the repetition
(measured with ``bench/bench_writer.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from natsd.protocol.encoder import append_msgs, append_run, append_templated
from natsd.server.log import logger

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Timer
    from natsd.server.context import ServerContext

__all__ = ["Writer", "STALL_MAX_NS", "WRITE_HIGH_WATER", "REASON_SLOW_CONSUMER", "REASON_SLOW_CONSUMER_WD"]

_EMPTY = bytearray()

# A congested receiver stalls its producers for at most this long per stall.
STALL_MAX_NS = 50_000_000
# Transport buffer size above which a receiver counts as congested.
WRITE_HIGH_WATER = 1024 * 1024

# Close reasons, spelled as nats-server's /connz "reason".
REASON_SLOW_CONSUMER = "Slow Consumer (Pending Bytes)"
REASON_SLOW_CONSUMER_WD = "Slow Consumer (Write Deadline)"


class Writer:
    """Appending, accounting, flush scheduling and the slow-consumer/stall policy of one connection.

    Needs from its class: ``out`` (bytearray), ``flush_pending``, ``closed``, ``out_msgs``,
    ``out_bytes``, ``max_pending``, ``congested``, ``stalled``, ``stalled_producers``,
    ``_stall_timer``, ``_wd_timer``, ``_stash``, ``_backlog``, ``_call_soon``, ``_flush_soon``, ``transport``,
    ``server``, ``prefix`` and ``_close(reason, err, graceful)``.
    """

    if TYPE_CHECKING:  # what the writer uses of its connection (ClientConnection owns the slots)
        server: ServerContext
        transport: Any  # an asyncio transport (or natsd.server.transport.layer's), set from connection_made()
        prefix: str
        out: bytearray
        flush_pending: bool
        closed: bool
        out_msgs: int
        out_bytes: int
        max_pending: int
        congested: bool
        stalled: bool
        stalled_producers: set
        _stall_timer: Timer | None
        _wd_timer: Timer | None
        _stash: list | None
        _backlog: tuple | None
        _call_soon: Callable[..., Any]
        _flush_soon: Callable[[Any], Any]  # the server's FlushBatch.add

        def _close(self, reason: str, err: str | None, graceful: bool = True, log: str = "") -> None: ...
    else:
        # No slots of its own (the connection's other bases have theirs: two bases with slots
        # cannot be combined); declared empty so instances still have no __dict__.
        __slots__ = ()

    # -- queueing ------------------------------------------------------------------------------------

    def enqueue(self, data, msgs: int = 0, nbytes: int = 0, src=None) -> None:
        """Queue framed bytes; ``msgs``/``nbytes`` are the messages and payload bytes they hold
        (0 for control lines); ``src`` is the publishing connection, stalled when we are congested."""
        if self.closed:
            return
        self.out += data
        if msgs:
            self._queued(msgs, nbytes, src)
        elif not self.flush_pending:
            self.flush_pending = True
            self._flush_soon(self)

    def _queued(self, msgs: int, nbytes: int, src) -> None:
        """Steps 2-4 of the module docstring for ``msgs`` messages just appended."""
        self.out_msgs += msgs
        self.out_bytes += nbytes
        if not self.flush_pending:
            self.flush_pending = True
            self._flush_soon(self)
        if len(self.out) > self.max_pending:
            self.slow_consumer()
        elif self.congested and src is not None:
            src.stall(self)

    def enqueue_msg(self, sub, head: bytes, mid: bytes, data: bytes, size: int, src=None) -> None:
        """Queue one message to subscription ``sub`` framed as ``head + sid + mid + data + CRLF``
        (see :func:`natsd.protocol.encoder.msg_parts`; ``size`` is ``len(data)``) and count it as
        delivered to ``sub``. The caller checked ``closed``.

        The router's fan-out calls this once per receiver: :meth:`_queued` is inlined here."""
        out = self.out
        out += head
        out += sub.sid
        out += mid
        out += data
        out += b"\r\n"
        sub.delivered += 1
        self.out_msgs += 1
        self.out_bytes += size
        if not self.flush_pending:
            self.flush_pending = True
            self._flush_soon(self)
        if len(out) > self.max_pending:
            self.slow_consumer()
        elif self.congested and src is not None:
            src.stall(self)

    def enqueue_frames(self, frames, msgs: int, nbytes: int, src=None) -> None:
        """Queue complete frames (an iterable of ``bytes``) holding ``msgs`` messages: the router's
        gathered messages of a run (:func:`natsd.server.router.route_run`). Into an empty buffer
        they are joined as the buffer itself (one copy, not a join and an append)."""
        if self.closed:
            return
        if self.out:
            self.out += b"".join(frames)
        else:
            self.out = _EMPTY.join(frames)
        self._queued(msgs, nbytes, src)

    def enqueue_run(self, prefix: bytes, payloads: list, nbytes: int, src=None) -> None:
        """Queue ``len(payloads)`` messages that share one control line ``prefix``
        (:func:`natsd.protocol.encoder.append_run`)."""
        if self.closed:
            return
        append_run(self.out, prefix, payloads)
        self._queued(len(payloads), nbytes, src)

    def enqueue_msgs(self, sid: bytes, items: list, src=None) -> None:
        """Queue a consumer's batch to subscription ``sid``: ``(subject, reply, hdr, payload)``
        items (:func:`natsd.protocol.encoder.append_msgs`)."""
        if self.closed:
            return
        nbytes = append_msgs(self.out, sid, items)
        self._queued(len(items), nbytes, src)

    def enqueue_templated(self, sid: bytes, run) -> None:
        """Queue a consumer's run of header-less messages with templated replies to
        subscription ``sid`` (a ``natsd.jetstream.ports.TemplatedRun``:
        :func:`natsd.protocol.encoder.append_templated`)."""
        if self.closed:
            return
        nbytes = append_templated(self.out, sid, run.subjects, run.reply_fmt, run.cols, run.payloads)
        self._queued(len(run.payloads), nbytes, None)

    def send_raw(self, data: bytes) -> None:
        """Queue a control line (``+OK``, ``PONG``, ``-ERR``, ``INFO``): not a message."""
        self.enqueue(data)

    def flush(self) -> None:
        """Write everything queued this turn in one ``transport.write``."""
        self.flush_pending = False
        out = self.out
        if self.closed or not out:
            return
        # Hand the buffer over instead of copying it: the transport may keep a reference.
        self.out = bytearray()
        t = self.transport
        if t.is_closing():  # the peer went away; connection_lost will clean up
            return
        t.write(out)
        if t.get_write_buffer_size() > self.max_pending:
            self.slow_consumer()

    def _close_output(self, graceful: bool) -> None:
        """The connection is closing: write what is queued and close the transport (graceful),
        or drop it and abort. Nothing is queued after this (``closed`` is set)."""
        t = self.transport
        if t is not None:
            if graceful:
                if self.out and not t.is_closing():
                    t.write(self.out)
                t.close()
            else:
                t.abort()
        self.out = bytearray()

    def slow_consumer(self, reason: str = REASON_SLOW_CONSUMER) -> None:
        """Cut the connection off: it does not read what it is sent (no ``-ERR``, as the reference)."""
        if self.closed:
            return
        if reason == REASON_SLOW_CONSUMER:
            logger.info("%sSlow Consumer Detected: MaxPending of %d Exceeded", self.prefix, self.max_pending)
        else:
            logger.info(
                "%sSlow Consumer Detected: WriteDeadline of %s Exceeded",
                self.prefix,
                _fmt_dur(self.server.options.write_deadline_ns),
            )
        self.server.slow_consumers += 1
        self.out = bytearray()
        self._close(reason, None, graceful=False)

    # -- congestion (asyncio flow control) --------------------------------------------------------------

    def pause_writing(self) -> None:
        # Our transport holds more than the high-water mark: this client is not keeping up.
        # Publishers that feed it are stalled (see stall()) and it must drain within
        # write_deadline or be cut off as a slow consumer.
        self.congested = True
        wd = self.server.options.write_deadline_ns
        if wd > 0 and self._wd_timer is None:
            self._wd_timer = self.server.clock.call_later(wd, self._write_deadline)

    def resume_writing(self) -> None:
        self.congested = False
        if self._wd_timer is not None:
            self._wd_timer.cancel()
            self._wd_timer = None
        self._release_producers()

    def _write_deadline(self) -> None:
        self._wd_timer = None
        self.slow_consumer(REASON_SLOW_CONSUMER_WD)

    def _release_producers(self) -> None:
        producers = self.stalled_producers
        if producers:
            self.stalled_producers = set()
            for p in producers:
                p.unstall()

    # -- producer stalls (backpressure) ------------------------------------------------------------
    #
    # Like nats-server's "stalled producer": when a delivery lands on a congested connection, the
    # publishing connection stops being read until that receiver drains below the low-water mark
    # (resume_writing) or STALL_MAX_NS passes, whichever comes first. The cap keeps two clients
    # that publish to each other from waiting on each other forever; a receiver that never drains
    # is cut off by the write deadline or max_pending, and its producers are released then.

    def stall(self, consumer) -> None:
        if self.stalled or self.closed or consumer is self or self._stash is not None:
            return
        self.stalled = True
        self.server.stalled_clients += 1
        consumer.stalled_producers.add(self)
        try:
            self.transport.pause_reading()
        except Exception:  # pragma: no cover - transport already closing
            pass
        self._stall_timer = self.server.clock.call_later(STALL_MAX_NS, self.unstall)

    def unstall(self) -> None:
        if not self.stalled:
            return
        self.stalled = False
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        if not self.closed and self._stash is None and self._backlog is None:
            try:
                self.transport.resume_reading()
            except Exception:  # pragma: no cover - transport already closing
                pass


def _fmt_dur(ns: int) -> str:
    return f"{ns / 1e9:g}s"
