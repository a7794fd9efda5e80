"""An in-memory :class:`natsd.jetstream.ports.Ports` for socket-free JetStream tests.

Subscriptions live in a :class:`natsd.subjects.sublist.Sublist`; ``publish`` delivers
synchronously to every matching internal subscription (queue groups: the first member) and
records the message in ``published`` -- a list of :class:`Msg` in publish order -- so tests can
assert on what the engine sent. ``client_subscribe`` adds a *client* interest (it fires the
``on_interest`` handlers and makes ``has_interest`` true) whose messages are also recorded.

Delivery is synchronous, but a publish made while another delivery is running is queued and
delivered after it (like a real server's queue), so handlers never re-enter each other.

Typical use::

    ports = FakePorts()
    inbox = ports.client_subscribe("_INBOX.>")
    ports.request("$JS.API.INFO", b"")        # publish with a fresh reply subject
    clock.run_soon()                           # let per-turn batching run
    reply = inbox.last_json()
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from natsd.subjects.sublist import Sublist

__all__ = ["FakePorts", "Msg", "ClientSub"]


@dataclass(slots=True)
class Msg:
    """A recorded message. ``subject`` is the subject it was routed on; for consumer deliveries
    (``deliver``) ``shown`` is the stored message's own subject (what a NATS client would see
    in the MSG line)."""

    subject: str
    reply: str
    hdr: bytes | None
    payload: bytes
    shown: str = ""

    def json(self) -> dict:
        return json.loads(self.payload)

    @property
    def status(self) -> str | None:
        """The status code of a ``NATS/1.0 <code> ...`` header block, or None."""
        if not self.hdr:
            return None
        first = self.hdr.split(b"\r\n", 1)[0].decode()
        parts = first.split(" ", 2)
        return parts[1] if len(parts) > 1 else None

    def header(self, name: str) -> str | None:
        if not self.hdr:
            return None
        for line in self.hdr.split(b"\r\n")[1:]:
            k, sep, v = line.partition(b":")
            if sep and k.decode().strip().lower() == name.lower():
                return v.decode().strip()
        return None


class _Sub:
    __slots__ = ("ports", "subject", "handler", "queue", "closed")

    def __init__(self, ports: "FakePorts", subject: str, handler: Callable, queue: str | None) -> None:
        self.ports = ports
        self.subject = subject
        self.handler = handler
        self.queue = queue
        self.closed = False

    def unsubscribe(self) -> None:
        if not self.closed:
            self.closed = True
            self.ports._sl.remove(self.subject, self, self.queue)


@dataclass
class ClientSub:
    """A client subscription: records what it receives."""

    ports: "FakePorts"
    subject: str
    queue: str | None = None
    msgs: list[Msg] = field(default_factory=list)
    closed: bool = False

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def handler(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        self.msgs.append(Msg(subject, reply, hdr, payload))

    def record(self, route: str, shown: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        # recorded under the routed subject (inbox, deliver subject), original in ``shown``
        self.msgs.append(Msg(route, reply, hdr, payload, shown if shown != route else ""))

    def last(self) -> Msg:
        return self.msgs[-1]

    def last_json(self) -> dict:
        return self.msgs[-1].json()

    def jsons(self) -> list[dict]:
        return [m.json() for m in self.msgs]

    def unsubscribe(self) -> None:
        if not self.closed:
            self.closed = True
            self.ports._client_sl.remove(self.subject, self, self.queue)
            for h in list(self.ports._interest_handlers):
                h(self.subject, False)


class _InterestSub:
    __slots__ = ("ports", "handler")

    def __init__(self, ports: "FakePorts", handler: Callable) -> None:
        self.ports = ports
        self.handler = handler

    def unsubscribe(self) -> None:
        try:
            self.ports._interest_handlers.remove(self.handler)
        except ValueError:
            pass


class FakePorts:
    """Ports over a Sublist, synchronous, recording every publish."""

    def __init__(self, account: str = "$G") -> None:
        self.account = account
        self._sl: Sublist = Sublist()
        self._client_sl: Sublist = Sublist()
        self._interest_handlers: list[Callable[[str, bool], None]] = []
        self.published: list[Msg] = []
        self._queue: deque[tuple[str, str, str, bytes | None, bytes]] = deque()
        self._delivering = False
        self._inbox_ids = itertools.count(1)
        self.defer_offload = False
        self.offloaded: list[tuple[Callable[[], Any], Callable[[Any, BaseException | None], None]]] = []

    # -- Ports protocol ----------------------------------------------------------------------
    def subscribe(
        self,
        subject: str,
        handler: Callable,
        queue: str | None = None,
        many: Callable | None = None,
        rrun: Callable | None = None,
        stream: str = "",
    ) -> _Sub:
        # ``many``/``rrun`` (run handlers) are optional in the Ports contract: here every
        # message goes through ``handler``, one at a time.
        sub = _Sub(self, subject, handler, queue)
        self._sl.insert(subject, sub, queue)
        return sub

    def publish(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        self.published.append(Msg(subject, reply, hdr, bytes(payload)))
        self._enqueue(subject, subject, reply, hdr, bytes(payload))

    def deliver(self, route_subject: str, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        """Like ``publish`` on ``route_subject``, but receivers see ``subject`` (as natsd.server
        does for consumer deliveries). Recorded in ``published`` under ``route_subject``."""
        self.published.append(Msg(route_subject, reply, hdr, bytes(payload)))
        self._enqueue(route_subject, subject, reply, hdr, bytes(payload))

    def publish_many(self, subjects: list, payloads: list) -> None:
        """``publish(subjects[i], "", None, payloads[i])`` for each i, in order."""
        for i in range(len(subjects)):
            self.publish(subjects[i], "", None, payloads[i])

    def deliver_many(self, route_subject: str, items: list) -> None:
        """``deliver`` for each ``(subject, reply, hdr, payload)`` item, in order; ``subject`` and
        ``reply`` are bytes, as natsd.server takes them (decoded here for ``deliver``)."""
        for subject, reply, hdr, payload in items:
            self.deliver(route_subject, subject.decode(), reply.decode(), hdr, payload)

    def deliver_templated(self, route_subject: str, run) -> None:
        """``deliver_many`` of the run's items (a ``natsd.jetstream.ports.TemplatedRun``)."""
        self.deliver_many(route_subject, run.items())

    def _enqueue(self, route: str, shown: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        self._queue.append((route, shown, reply, hdr, payload))
        if self._delivering:
            return
        self._delivering = True
        try:
            while self._queue:
                self._deliver(*self._queue.popleft())
        finally:
            self._delivering = False

    def has_interest(self, subject: str) -> bool:
        return self._sl.has_interest(subject) or self._client_sl.has_interest(subject)

    def on_interest(self, handler: Callable[[str, bool], None]) -> _InterestSub:
        self._interest_handlers.append(handler)
        return _InterestSub(self, handler)

    def offload(self, fn: Callable[[], Any], done: Callable[[Any, BaseException | None], None]) -> None:
        """Run ``fn`` now (no threads in unit tests), or, with ``defer_offload`` set, keep it in
        ``offloaded`` until :meth:`run_offloaded` (to see what happens meanwhile)."""
        self.offloaded.append((fn, done))
        if not self.defer_offload:
            self.run_offloaded()

    def run_offloaded(self) -> int:
        """Run the offloaded calls waiting now (not those their completions offload next)."""
        batch, self.offloaded = self.offloaded, []
        n = 0
        for fn, done in batch:
            n += 1
            try:
                v = fn()
            except Exception as e:  # handed to the caller, as the server does
                done(None, e)
            else:
                done(v, None)
        return n

    # -- test helpers --------------------------------------------------------------------------
    def _deliver(self, route: str, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        # internal subscriptions see the shown subject (as natsd.server), client subscriptions
        # record both
        r = self._sl.match(route)
        for sub in r.psubs:
            if not sub.closed:
                sub.handler(subject, reply, hdr, payload)
        for members in r.qsubs:
            for sub in members:
                if not sub.closed:
                    sub.handler(subject, reply, hdr, payload)
                    break
        r = self._client_sl.match(route)
        for sub in r.psubs:
            if not sub.closed:
                sub.record(route, subject, reply, hdr, payload)
        for members in r.qsubs:
            for sub in members:
                if not sub.closed:
                    sub.record(route, subject, reply, hdr, payload)
                    break

    def client_subscribe(self, subject: str, queue: str | None = None) -> ClientSub:
        """A client subscription that records what it receives (fires interest handlers)."""
        sub = ClientSub(self, subject, queue)
        self._client_sl.insert(subject, sub, queue)
        for h in list(self._interest_handlers):
            h(subject, True)
        return sub

    def new_inbox(self) -> str:
        return f"_INBOX.fake.{next(self._inbox_ids)}"

    def request(
        self, subject: str, payload: bytes | str | dict = b"", hdr: bytes | None = None, reply: str | None = None
    ) -> str:
        """Publish with a (new) reply subject; returns the reply subject. Dicts are JSON-encoded."""
        if isinstance(payload, dict):
            payload = json.dumps(payload).encode()
        elif isinstance(payload, str):
            payload = payload.encode()
        reply = reply or self.new_inbox()
        self.publish(subject, reply, hdr, payload)
        return reply

    def sent_to(self, subject: str) -> list[Msg]:
        """Every recorded message published to exactly ``subject``."""
        return [m for m in self.published if m.subject == subject]

    def would_have_responders(self, subject: str) -> bool:
        """True when a request to ``subject`` would reach some subscription (no 503)."""
        return self.has_interest(subject)


class JsEnv:
    """A JetStream engine on FakePorts + ManualClock for socket-free tests.

    ``env.api(subject, body)`` sends an API request and returns the parsed reply (None when
    nothing came back); ``env.pub(subject, data, headers)`` publishes with a reply subject and
    returns the parsed PubAck (None when no reply). Both run the clock's per-turn callbacks
    first, so PubAcks (sent once per loop turn) have arrived.
    """

    def __init__(self, store_dir: str, account_limits=None, **js_options) -> None:
        from natsd.clock import ManualClock
        from natsd.config.options import ServerOptions
        from natsd.jetstream.api import JetStreamApi
        from natsd.jetstream.manager import JetStreamEngine

        opts = ServerOptions()
        opts.jetstream.enabled = True
        opts.jetstream.store_dir = store_dir
        opts.jetstream.max_memory_store = js_options.pop("max_memory_store", 1 << 30)
        opts.jetstream.max_file_store = js_options.pop("max_file_store", 1 << 34)
        for k, v in js_options.items():
            setattr(opts.jetstream, k, v)
        self.options = opts
        self.clock = ManualClock()
        self.ports = FakePorts()
        self.engine = JetStreamEngine(opts, self.clock, server_id="NTESTSERVER", api=JetStreamApi())
        self.account = self.engine.enable_account("$G", self.ports, account_limits)
        self.engine.start()
        self.inbox = self.ports.client_subscribe("_INBOX.>")

    def replies(self, reply: str) -> list[Msg]:
        return [m for m in self.inbox.msgs if m.subject == reply]

    def api(self, subject: str, body: bytes | str | dict = b"", hdr: bytes | None = None) -> dict | None:
        reply = self.ports.request(subject, body, hdr)
        self.clock.run_soon()
        got = self.replies(reply)
        return got[-1].json() if got else None

    def pub(self, subject: str, data: bytes = b"x", headers: dict[str, str] | None = None) -> dict | None:
        hdr = None
        if headers:
            hdr = ("NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode()
        reply = self.ports.request(subject, data, hdr)
        self.clock.run_soon()
        got = self.replies(reply)
        return got[-1].json() if got else None

    def raw_pub_reply(self, subject: str, data: bytes = b"x", hdr: bytes | None = None) -> bytes | None:
        reply = self.ports.request(subject, data, hdr)
        self.clock.run_soon()
        got = self.replies(reply)
        return got[-1].payload if got else None

    def request_msgs(self, subject: str, body: bytes | str | dict = b"") -> list[Msg]:
        reply = self.ports.request(subject, body)
        self.clock.run_soon()
        return self.replies(reply)

    def create(self, name: str, **cfg) -> dict:
        cfg.setdefault("subjects", [name.lower() + ".>"])
        out = self.api(f"$JS.API.STREAM.CREATE.{name}", {"name": name, **cfg})
        assert out is not None and "error" not in out, out
        return out

    def restart(self) -> None:
        """Stop the engine and start a new one on the same store directory."""
        from natsd.jetstream.api import JetStreamApi
        from natsd.jetstream.manager import JetStreamEngine

        self.engine.stop()
        self.ports = FakePorts()
        self.engine = JetStreamEngine(self.options, self.clock, server_id="NTESTSERVER", api=JetStreamApi())
        self.account = self.engine.enable_account("$G", self.ports, self.account.limits)
        self.engine.start()
        self.inbox = self.ports.client_subscribe("_INBOX.>")

    def stop(self) -> None:
        self.engine.stop()
