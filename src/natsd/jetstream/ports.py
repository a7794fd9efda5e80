"""The narrow seam between the JetStream engine and whatever carries messages.

The engine (streams, consumers, the ``$JS.API``) never touches sockets. It reaches the network
only through a :class:`Ports` object bound to one account: ``natsd.server`` implements it over
its own routing, and tests implement it in memory. The same seam would let the engine run as a
client of another NATS server.

Messages cross the seam as four plain values, exactly as they travel on the wire:
``subject`` (str), ``reply`` (str, ``""`` when absent), ``hdr`` (the raw header block
``b"NATS/1.0\\r\\n...\\r\\n\\r\\n"`` or ``None``), ``payload`` (bytes). No per-message objects.
"""

from __future__ import annotations

from itertools import repeat
from typing import TYPE_CHECKING, Any, Callable, Sequence

from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.protocol.events import Run

__all__ = [
    "MsgHandler",
    "RunHandler",
    "ReplyRunHandler",
    "InterestHandler",
    "DeliverItem",
    "TemplatedRun",
    "Subscription",
    "Ports",
]

# handler(subject, reply, hdr, payload); called synchronously on the loop, in publish order.
# It must not block; heavy work is deferred with Clock.call_soon. A handler that returns False
# (exactly ``False``: other results, ``None`` included, accept) declines the message: it had no
# receiver here (one wildcard subscription serving many would-be subscriptions, like the
# $JS.ACK.> hub for consumers that do not exist), so a request whose only taker declined gets
# "no responders", as if nothing were subscribed.
MsgHandler = Callable[[str, str, "bytes | None", bytes], object]

# run_handler(run): an optional companion of a MsgHandler for a run of reply-less, header-less
# messages, in publish order: a natsd.protocol.events.Run, read through ``run.names`` (str
# subjects) and ``run.payloads`` (bytes); implementations without runs call the MsgHandler per
# message instead.
RunHandler = Callable[["Run"], None]

# reply_run_handler(subject, run): an optional companion of a MsgHandler for a run of messages
# to one subject (``str``) with a reply each (``run.replies``, bytes), in publish order; the
# message i is (subject, run.replies[i], run.payloads[i][:run.hdr_len] or None,
# run.payloads[i][run.hdr_len:]). Implementations without runs call the MsgHandler per message.
# ``subject`` None: each message to its own subject, ``run.names[i]`` (header-less, the subjects
# all captured by this subscription).
ReplyRunHandler = Callable[[str | None, "Run"], None]

# interest_handler(subject, added): a client subscription (not an internal one) on ``subject``
# was added (True) or removed (False) in this account. Push consumers use it to wait for
# interest on their deliver subject without polling.
InterestHandler = Callable[[str, bool], None]

# One message of ``deliver_many``: (subject, reply, hdr, payload) with ``subject`` and ``reply``
# as the wire bytes (``reply`` ``b""`` when none).
DeliverItem = tuple[bytes, bytes, "bytes | None", bytes]


class TemplatedRun:
    """A run of ``deliver_many`` items without headers whose replies are one ``%``-template
    over columns: item ``i`` is ``(subjects[i], reply_fmt % (cols[0][i], cols[1][i], ...),
    None, payloads[i])``. A consumer's run of new messages is one (the v1 ack subject from
    stream sequence, consumer sequence, time and pending count): the server frames it without
    making a reply per message first (``Ports.deliver_templated``)."""

    __slots__ = ("subjects", "reply_fmt", "cols", "payloads")

    def __init__(
        self, subjects: Sequence[bytes], reply_fmt: bytes, cols: tuple[Sequence[int], ...], payloads: Sequence[bytes]
    ) -> None:
        self.subjects = subjects
        self.reply_fmt = reply_fmt
        self.cols = cols
        self.payloads = payloads

    def items(self) -> list[DeliverItem]:
        return list(zip(self.subjects, map(self.reply_fmt.__mod__, zip(*self.cols)), repeat(None), self.payloads))


class Subscription(Protocol):
    def unsubscribe(self) -> None: ...


class Ports(Protocol):
    """What the engine needs from whatever carries its messages; every member is required.

    ``publish`` and ``deliver`` may return something (the server returns its receiver count);
    the engine never looks at it, hence ``object``."""

    account: str

    def subscribe(
        self,
        subject: str,
        handler: MsgHandler,
        queue: str | None = None,
        many: RunHandler | None = None,
        rrun: ReplyRunHandler | None = None,
        stream: str = "",
    ) -> Subscription:
        """Internal subscription: messages matching ``subject`` in this account call ``handler``
        (or ``many`` for a run of reply-less messages, ``rrun`` for a run to one subject with a
        reply each, where the implementation batches). ``stream``: the stream this subscription
        captures for (message traces name it)."""
        ...

    def publish(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> object:
        """Publish from inside the server into this account (delivery is queued, never blocks)."""
        ...

    # Consumers deliver a stored message *routed* on the deliver subject / pull inbox but
    # *showing* its original subject, as nats-server does: the client sees
    # ``MSG orders.1 <sid> $JS.ACK...`` on a subscription to ``_INBOX.x`` (nats-py's KV watch
    # reads the key from that subject).
    def deliver(self, route_subject: str, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> object:
        """Deliver to subscribers of ``route_subject`` a message whose subject reads ``subject``."""
        ...

    def publish_many(self, subjects: list[str], payloads: list[bytes]) -> None:
        """``publish(subjects[i], "", None, payloads[i])`` for each i, in order (a stream's
        PubAcks of one loop turn)."""
        ...

    def deliver_many(self, route_subject: str, items: list[DeliverItem]) -> None:
        """``deliver(route_subject, subject, reply, hdr, payload)`` for each item of ``items``,
        in order; one subscription match for the run. Unlike ``deliver``, an item's ``subject``
        and ``reply`` are the wire ``bytes`` (``reply`` ``b""`` when none), so a consumer's
        batch is framed without encoding per message."""
        ...

    def deliver_templated(self, route_subject: str, run: TemplatedRun) -> None:
        """``deliver_many(route_subject, run.items())``; an implementation may frame the run
        without making the items (the server does, for one plain client subscription)."""
        ...

    def has_interest(self, subject: str) -> bool:
        """True when any subscription (client or internal) in this account matches ``subject``."""
        ...

    def on_interest(self, handler: InterestHandler) -> Subscription:
        """Be told about client subscriptions coming and going in this account."""
        ...

    def offload(self, fn: Callable[[], Any], done: Callable[[Any, BaseException | None], None]) -> None:
        """Run ``fn()`` away from the event loop (the server: a worker thread, so the loop keeps
        serving while a large request is validated), then call ``done(result, None)`` -- or
        ``done(None, exc)`` if it raised -- back on the loop. ``fn`` must not touch the engine's
        state: it computes on data it was given."""
        ...
