"""The per-turn flushes of a server's client connections, in one loop callback.

Why: a ``call_soon`` per connection costs a loop handle each (~0.5 µs with uvloop, measured: it
copies the context), and one publisher's run round robin over 1,000 subscriber connections queues
to each of them every turn: that was a handle per one or two messages. :class:`FlushBatch` (one per
server) gathers the connections whose writer (:mod:`natsd.server.writer`) has output this turn and
flushes them all from one callback. The order of writes within a turn does not matter (each
connection's bytes stay in order), and each connection is still written once per turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from natsd.server.log import logger

__all__ = ["FlushBatch"]


class FlushBatch:
    """One per server: the connections with output queued this loop turn, flushed by one
    callback (:meth:`add` schedules it when the turn's first connection arrives); what runs
    for each is its writer's ``flush()``.

    A connection queued while the batch runs (a flush that closes a slow consumer can make
    others write) lands in the next batch, scheduled anew. The request path keeps its own
    ``call_soon(flush)`` (``ClientConnection.data_received``): it must run after callbacks
    that the read scheduled (a stream's per-turn PubAcks), which a batch scheduled earlier in
    the turn does not."""

    __slots__ = ("_conns", "_call_soon")

    def __init__(self, call_soon: Callable[..., Any]) -> None:
        self._conns: list = []
        self._call_soon = call_soon

    def add(self, conn: Any) -> None:
        """Flush ``conn`` at the end of this turn (the caller set its ``flush_pending``)."""
        conns = self._conns
        if not conns:
            self._call_soon(self._run)
        conns.append(conn)

    def _run(self) -> None:
        conns = self._conns
        self._conns = []
        for c in conns:
            try:
                c.flush()
            except Exception:  # one connection's failure must not leave the others unflushed
                logger.exception("%sflush failed", getattr(c, "prefix", ""))
