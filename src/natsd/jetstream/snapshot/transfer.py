"""Snapshot transfer: the chunk flow of ``$JS.API.STREAM.SNAPSHOT`` (reference ``streamSnapshot``).

After the snapshot reply, :class:`SnapshotSender` cuts the stream's archive
(:func:`natsd.jetstream.snapshot.archive.iter_archive`, Snappy-framed by
:func:`natsd.jetstream.snapshot.s2.frame_archive`) into chunks and publishes them to the
request's ``deliver_subject``::

    chunk 1..k      full chunks (``chunk_size`` bytes), reply ``$JS.SNAPSHOT.ACK.<stream>.<id>.<len>.<index>``
    last chunk      the short rest (if any), no reply
    status          header only, empty body: ``NATS/1.0 204`` (done), ``408 No Interest``,
                    ``408 No Flow Response`` or ``500 <error>``

Flow control: the window (``window_size``, clamped to 1 KiB..32 MiB and at least one chunk) is
``window_size // chunk_size`` slots; each full chunk takes one and any message on
``$JS.SNAPSHOT.ACK.<stream>.<id>.>`` frees one. No ack for 5 s ends the transfer with
``408 No Flow Response``. Sending starts when the deliver subject has interest, or after 2 s
(the receiver's subscription may trail the reply); interest lost later ends it with
``408 No Interest``. At most ``CHUNKS_PER_TURN`` chunks go out per loop turn. While a snapshot
runs nothing in the stream expires and STREAM.UPDATE is refused (``begin_snapshot``/
``end_snapshot``), so the archive is the state of the snapshot reply. The upload direction is
:mod:`natsd.jetstream.snapshot.restore`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from natsd.jetstream.errors import ApiError
from natsd.jetstream.config.models import SECOND
from natsd.jetstream.snapshot.archive import iter_archive
from natsd.jetstream.snapshot.s2 import frame_archive
from natsd.nuid import nuid

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.views import StreamView

__all__ = [
    "SnapshotSender",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_WINDOW_SIZE",
    "ACK_TIMEOUT_NS",
    "STATUS_DONE",
    "STATUS_NO_INTEREST",
    "STATUS_NO_FLOW",
    "nuid",
]

log = logging.getLogger("natsd.jetstream.snapshot")

DEFAULT_CHUNK_SIZE = 128 * 1024
DEFAULT_WINDOW_SIZE = 8 * 1024 * 1024
MIN_CHUNK, MAX_CHUNK = 1024, 1024 * 1024
MIN_WINDOW, MAX_WINDOW = 1024, 32 * 1024 * 1024
#: No chunk acknowledged for this long -> ``408 No Flow Response`` (the reference's 5 s).
ACK_TIMEOUT_NS = 5 * SECOND
#: How long a snapshot waits for interest on its deliver subject before starting (reference: 2 s).
INTEREST_WAIT_NS = 2 * SECOND
#: Chunks sent per loop turn at most, so one snapshot never holds the loop for long.
CHUNKS_PER_TURN = 32

# Final status messages of a snapshot (header only, empty body), exactly as the reference.
STATUS_DONE = b"NATS/1.0 204\r\n\r\n"
STATUS_NO_INTEREST = b"NATS/1.0 408 No Interest\r\n\r\n"
STATUS_NO_FLOW = b"NATS/1.0 408 No Flow Response\r\n\r\n"

#: Replies of the snapshot chunks: ``<prefix><stream>.<id>.<len>.<index>``.
SNAPSHOT_ACK_PREFIX = "$JS.SNAPSHOT.ACK."


class SnapshotSender:
    """Sends one snapshot of ``stream`` to ``deliver_subject`` (reference ``streamSnapshot``).

    Every full chunk goes out with reply ``$JS.SNAPSHOT.ACK.<stream>.<id>.<len>.<index>`` and
    takes one slot of the window (``window_size // chunk_size`` slots); any message on
    ``$JS.SNAPSHOT.ACK.<stream>.<id>.>`` frees a slot. The last, short chunk has no reply. Then
    a header-only ``NATS/1.0 204`` ends the transfer; ``408 No Interest`` when the receiver went
    away, ``408 No Flow Response`` after 5 s without an ack, ``500 <error>`` on a read error.
    """

    def __init__(
        self,
        stream: "StreamView",
        deliver_subject: str,
        chunk_size: int = 0,
        window_size: int = 0,
        include_consumers: bool = True,
        state_json: dict | None = None,
        on_done: Callable[[str], None] | None = None,
    ) -> None:
        self.stream = stream
        self.account = stream.account
        self.ports = stream.account.ports
        self.clock = stream.clock
        self.deliver = deliver_subject
        cs = chunk_size or DEFAULT_CHUNK_SIZE
        ws = window_size or DEFAULT_WINDOW_SIZE
        cs = min(max(MIN_CHUNK, cs), MAX_CHUNK)
        ws = min(max(MIN_WINDOW, ws), MAX_WINDOW)
        ws = max(ws, cs)
        self.chunk_size = cs
        self.slots = ws // cs
        self.index = 1
        self.bytes_sent = 0
        self.done = False
        self.error = ""
        self._on_done = on_done
        # Snappy-framed, as nats-server's (S2-framed) snapshots, so nats-server restores it.
        self._pieces = frame_archive(iter_archive(stream, include_consumers, state_json))
        self._buf = bytearray()
        self._eof = False
        self._ack_subject = f"{SNAPSHOT_ACK_PREFIX}{stream.name}.{nuid()}"
        self._ack_sub: Any = None
        self._interest_sub: Any = None
        self._ack_timer: Any = None
        self._wait_timer: Any = None
        self._scheduled = False
        self._frozen = False

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Begin (call after the snapshot reply was sent)."""
        if self.done:
            return  # cancelled before it started
        if self.stream.closed:
            self.done = True
            self.ports.publish(self.deliver, "", b"NATS/1.0 500 stream closed\r\n\r\n", b"")
            if self._on_done is not None:
                self._on_done("stream closed")
            return
        self._frozen = True
        self.stream.begin_snapshot()
        self._ack_sub = self.ports.subscribe(self._ack_subject + ".>", self._on_ack)
        self._interest_sub = self.ports.on_interest(self._on_interest)
        if self.ports.has_interest(self.deliver):
            self._schedule()
        else:
            # Allow a little time for the receiver's subscription to show up (reference: 2 s).
            self._wait_timer = self.clock.call_later(INTEREST_WAIT_NS, self._interest_wait_over)

    def _interest_wait_over(self) -> None:
        self._wait_timer = None
        if not self.done:
            self._schedule()

    def _on_interest(self, subject: str, added: bool) -> None:
        if self.done:
            return
        if added:
            if self._wait_timer is not None and self.ports.has_interest(self.deliver):
                self._wait_timer.cancel()
                self._wait_timer = None
                self._schedule()
        elif self._wait_timer is None and not self.ports.has_interest(self.deliver):
            self._finish(STATUS_NO_INTEREST, "no interest")

    def _on_ack(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        if self.done:
            return
        self.slots += 1
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled and not self.done:
            self._scheduled = True
            self.clock.call_soon(self._pump)

    def _arm_ack_timer(self) -> None:
        if self._ack_timer is not None:
            self._ack_timer.cancel()
        self._ack_timer = self.clock.call_later(ACK_TIMEOUT_NS, self._ack_timeout)

    def _ack_timeout(self) -> None:
        self._ack_timer = None
        if not self.done:
            self._finish(STATUS_NO_FLOW, "no flow response")

    # -- sending ---------------------------------------------------------------------------
    def _fill(self) -> None:
        buf = self._buf
        cs = self.chunk_size
        pieces = self._pieces
        while len(buf) < cs and not self._eof:
            try:
                buf += next(pieces)
            except StopIteration:
                self._eof = True

    def _pump(self) -> None:
        self._scheduled = False
        if self.done:
            return
        if self.stream.closed:
            self._finish(b"NATS/1.0 500 stream closed\r\n\r\n", "stream closed")
            return
        sent = 0
        cs = self.chunk_size
        publish = self.ports.publish
        try:
            while self.slots > 0 and sent < CHUNKS_PER_TURN:
                self._fill()
                buf = self._buf
                if len(buf) >= cs:
                    chunk = bytes(buf[:cs])
                    del buf[:cs]
                    # A full chunk always carries an ack reply, even the last one when the
                    # archive ends exactly on a chunk boundary (as the reference).
                    publish(self.deliver, f"{self._ack_subject}.{len(chunk)}.{self.index}", None, chunk)
                    self.index += 1
                    self.slots -= 1
                    self.bytes_sent += len(chunk)
                    sent += 1
                    continue
                # The archive is complete and what is left is shorter than a chunk.
                if buf:
                    publish(self.deliver, "", None, bytes(buf))
                    self.bytes_sent += len(buf)
                    buf.clear()
                self._finish(STATUS_DONE, "")
                return
        except ApiError as e:
            self._finish(f"NATS/1.0 500 {e.description}\r\n\r\n".encode(), e.description)
            return
        except Exception as e:  # a store read error ends the snapshot, not the server
            err = str(e) or type(e).__name__
            log.warning("Snapshot of stream '%s > %s' failed: %s", self.account.name, self.stream.name, err)
            self._finish(f"NATS/1.0 500 {err}\r\n\r\n".encode(), err)
            return
        if sent:
            self._arm_ack_timer()
        if self.slots > 0:
            self._schedule()  # more to send: continue next turn
        elif self._ack_timer is None:
            self._arm_ack_timer()

    def _finish(self, status: bytes, error: str) -> None:
        if self.done:
            return
        self.done = True
        self.error = error
        for t in (self._ack_timer, self._wait_timer):
            if t is not None:
                t.cancel()
        self._ack_timer = self._wait_timer = None
        for s in (self._ack_sub, self._interest_sub):
            if s is not None:
                try:
                    s.unsubscribe()
                except Exception:
                    pass
        self._ack_sub = self._interest_sub = None
        self._pieces.close()  # type: ignore[attr-defined]
        self._buf.clear()
        if self._frozen:
            self._frozen = False
            self.stream.end_snapshot()
        self.ports.publish(self.deliver, "", status, b"")
        if self._on_done is not None:
            self._on_done(error)

    def cancel(self, reason: str = "server shutdown") -> None:
        """Abort (server shutdown): the receiver gets ``500 <reason>``."""
        self._finish(f"NATS/1.0 500 {reason}\r\n\r\n".encode(), reason)
