"""Subscriptions as stored in an account's Sublist.

One class serves both kinds so the routing loop stays a single flat loop:

* a *client* subscription has ``client`` (its :class:`~natsd.server.connection.ClientConnection`)
  and ``sid`` (the client's id, ``bytes``, echoed verbatim in MSG lines);
* an *internal* subscription (JetStream, via :mod:`natsd.server.ports`) has ``client=None`` and
  ``cb``, called synchronously on the event loop as ``cb(subject, reply, hdr, payload)``, and
  optionally ``many``, called as ``many(run)`` for a run of reply-less, header-less messages
  (a :class:`natsd.protocol.events.Run`; see :func:`natsd.server.router.route_run`), and
  ``rrun``, called as ``rrun(subject, run)`` for a run of messages to one subject with a reply
  each (``run.replies``; see :func:`natsd.server.router.route_rrun`).

``max`` > 0 means auto-unsubscribe after that many deliveries (``UNSUB <sid> <max>``).
Items are hashed by identity (the Sublist stores them as dict keys).
"""

from __future__ import annotations

from typing import Callable

__all__ = ["Subscription"]


class Subscription:
    __slots__ = (
        "client",
        "sid",
        "subject",
        "queue",
        "max",
        "delivered",
        "cb",
        "many",
        "rrun",
        "account",
        "closed",
        "created_ns",
        "stream",
        "with_src",
    )

    def __init__(
        self,
        client,
        sid: bytes,
        subject: str,
        queue: str | None,
        cb: Callable | None = None,
        account=None,
        many: Callable | None = None,
        rrun: Callable | None = None,
    ) -> None:
        self.client = client
        self.sid = sid
        self.subject = subject
        self.queue = queue
        self.max = 0
        self.delivered = 0
        self.cb = cb
        self.many = many
        self.rrun = rrun
        self.account = account
        self.closed = False
        self.created_ns = 0
        self.stream = ""  # an internal subscription capturing for this stream (message traces)
        self.with_src = False  # an internal subscription whose cb also takes the publisher (router)

    def unsubscribe(self) -> None:
        """Remove this subscription (internal subscriptions: the ``Ports`` contract)."""
        if self.closed:
            return
        if self.client is not None:
            self.client.remove_sub(self)
        elif self.account is not None:
            self.closed = True
            self.account.sublist.remove(self.subject, self, self.queue)

    def __repr__(self) -> str:
        who = f"cid:{self.client.cid}" if self.client is not None else "internal"
        return f"<Subscription {who} sid={self.sid!r} {self.subject!r} q={self.queue!r}>"
