"""The server's implementation of :class:`natsd.jetstream.ports.Ports`, one per account.

Callback contract (what an engine may rely on and must respect):

* ``subscribe(subject, handler, queue=None)`` inserts an *internal* subscription into the
  account's Sublist. It counts as interest like any client subscription: a request to
  ``$JS.API.>`` is delivered to it and never answered with no-responders, and queue groups mix
  internal and client members. ``handler(subject, reply, hdr, payload)`` is called
  **synchronously, on the event loop, in publish order**, while the publisher's message is being
  routed. It must not block or await; long work is deferred with ``Clock.call_soon``. Values:
  ``subject``/``reply`` are ``str`` (``reply`` is ``""`` when absent), ``hdr`` is the raw
  ``NATS/1.0...\\r\\n\\r\\n`` block or ``None``, ``payload`` is ``bytes``. An exception raised by
  a handler is logged; it does not affect the publisher.
* ``subscribe(..., many=run_handler)`` also accepts runs: when a client sends several
  reply-less, header-less messages in a row that all go to this subscription alone (acks,
  fire-and-forget publishes to a stream), ``run_handler(run)`` is called once for them instead
  of ``handler`` per message, in the same order and at the same point of the stream. ``run`` is
  the parser's :class:`natsd.protocol.events.Run`: ``run.names`` (``str`` subjects) and
  ``run.payloads`` (``bytes``), one per message; the handler must not keep or change it.
  The run was matched before it is handed over, as nats-server queues acks before it
  processes them.
* ``subscribe(..., rrun=reply_run_handler)``: likewise for a run of messages to one subject
  with a reply each (an asynchronous JetStream publisher's burst) that all go to this
  subscription alone: ``reply_run_handler(subject, run)`` with ``subject`` the ``str`` subject
  and ``run`` the parser's :class:`~natsd.protocol.events.Run` (``run.replies``: ``bytes``,
  ``run.hdr_len``, ``run.payloads``: header block + payload). Same rules as ``many``.
* ``publish(subject, reply, hdr, payload)`` routes exactly like a client publish in this
  account (client subscriptions, queue groups, other internal subscriptions), synchronously:
  bytes land in each receiver's output buffer and are written at the end of the loop turn, so
  it never blocks. It returns the number of receivers (0 = no interest); the ``Ports`` protocol
  declares ``None``, callers may ignore it.
* ``deliver(route_subject, subject, reply, hdr, payload)``: as ``publish`` but matched on
  ``route_subject`` while receivers see ``subject`` (JetStream consumer deliveries).
* ``publish_many(subjects, payloads)``: ``publish(subjects[i], "", None, payloads[i])`` for
  each i, in order (a stream's PubAcks of one loop turn).
* ``deliver_many(route_subject, items)``: ``deliver(route_subject, *item)`` for each
  ``(subject, reply, hdr, payload)`` item, in order, with one match for the whole run; the
  item's ``subject`` and ``reply`` are the wire ``bytes`` (``reply`` ``b""`` when none).
* ``deliver_templated(route_subject, run)``: ``deliver_many(route_subject, run.items())``
  for a consumer's run of header-less messages whose replies are one template over columns,
  framed in one go when the receiver is one plain client subscription.
* ``has_interest(subject)``: any client or internal subscription matches.
* ``on_interest(handler)``: ``handler(subject, added)`` is called synchronously whenever a
  *client* subscription is added (True) or removed (False) in this account (SUB, UNSUB,
  auto-unsubscribe, client disconnect). Internal subscriptions do not notify.

Everything returned by ``subscribe``/``on_interest`` has an idempotent ``unsubscribe()``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable

from natsd.server.router import deliver_many, deliver_templated, publish_many, route
from natsd.server.subscription import Subscription

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.ports import (
        DeliverItem,
        InterestHandler,
        MsgHandler,
        ReplyRunHandler,
        RunHandler,
        TemplatedRun,
    )
    from natsd.server.account import Account

__all__ = ["ServerPorts"]


class _InterestRegistration:
    __slots__ = ("_account", "_handler")

    def __init__(self, account: "Account", handler: "InterestHandler") -> None:
        self._account = account
        self._handler = handler

    def unsubscribe(self) -> None:
        try:
            self._account.interest_handlers.remove(self._handler)
        except ValueError:
            pass


class ServerPorts:
    """``Ports`` bound to one :class:`~natsd.server.account.Account` of a running server.

    It implements the protocol structurally; ``tests/unit/server/test_ports.py`` and mypy (every
    ``enable_account(name, ServerPorts(acc), ...)`` call) check that it does."""

    def __init__(self, account: "Account") -> None:
        self._account = account
        self.account = account.name

    def subscribe(
        self,
        subject: str,
        handler: "MsgHandler",
        queue: str | None = None,
        many: "RunHandler | None" = None,
        rrun: "ReplyRunHandler | None" = None,
        stream: str = "",
    ) -> Subscription:
        acc = self._account
        sub = Subscription(None, b"", subject, queue or None, cb=handler, account=acc, many=many, rrun=rrun)
        sub.stream = stream
        acc.sublist.insert(subject, sub, queue or None)
        return sub

    def publish(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> int:
        if hdr:
            data = hdr + payload
            hdr_len = len(hdr)
        else:
            data = payload
            hdr_len = 0
        return route(self._account, subject, subject.encode(), reply.encode() if reply else b"", hdr_len, data, None)

    def deliver(self, route_subject: str, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> int:
        """Route on ``route_subject`` but show ``subject`` in the MSG line (consumer delivery:
        the client subscribed to the deliver subject sees the stored message's subject)."""
        if hdr:
            data = hdr + payload
            hdr_len = len(hdr)
        else:
            data = payload
            hdr_len = 0
        return route(
            self._account,
            route_subject,
            subject.encode(),
            reply.encode() if reply else b"",
            hdr_len,
            data,
            None,
            subject,
        )

    def publish_many(self, subjects: list[str], payloads: list[bytes]) -> None:
        """``publish(subjects[i], "", None, payloads[i])`` for each i, in order (see
        :func:`router.publish_many`)."""
        publish_many(self._account, subjects, payloads)

    def deliver_many(self, route_subject: str, items: "list[DeliverItem]") -> None:
        """``deliver(route_subject, *item)`` for each ``(subject, reply, hdr, payload)`` of
        ``items``, in order, with one match for the run (see :func:`router.deliver_many`).
        ``subject`` and ``reply`` are ``bytes`` here (``b""``: no reply), the wire forms."""
        deliver_many(self._account, route_subject, items)

    def deliver_templated(self, route_subject: str, run: "TemplatedRun") -> None:
        """``deliver_many(route_subject, run.items())``, framed in one go for one plain client
        subscription (see :func:`router.deliver_templated`)."""
        deliver_templated(self._account, route_subject, run)

    def has_interest(self, subject: str) -> bool:
        return self._account.sublist.has_interest(subject)

    def on_interest(self, handler: "InterestHandler") -> _InterestRegistration:
        self._account.interest_handlers.append(handler)
        return _InterestRegistration(self._account, handler)

    def offload(self, fn: Callable[[], Any], done: Callable[[Any, BaseException | None], None]) -> None:
        """``fn`` in the loop's default executor (a worker thread); ``done`` back on the loop.

        Pure-Python work in a thread still takes the GIL, but the interpreter hands it back to
        the loop's thread every switch interval (5 ms), so clients keep being served while a
        1 MB STREAM.CREATE is validated, instead of waiting for all of it."""
        fut = asyncio.get_running_loop().run_in_executor(None, fn)

        def finished(f: "asyncio.Future[Any]") -> None:
            exc = f.exception()
            done(None, exc) if exc is not None else done(f.result(), None)

        fut.add_done_callback(finished)
