"""Dispatch of ``$JS.API`` requests to handlers, and the JSON envelope of every reply.

The API subjects are one table (:data:`natsd.jetstream.api.ROUTES`: pattern, response type,
handler), held in a :class:`natsd.subjects.sublist.Sublist` -- the same structure that routes
every message of the server, and what nats-server does with its ``apiSubs``. An account
subscribes the API subject families once through its Ports (:data:`API_SUBSCRIPTIONS`:
everything under ``$JS.API`` except DIRECT.GET and CONSUMER.MSG.NEXT) and hands every request to
:meth:`ApiDispatcher.dispatch`, which matches the subject in the table (the patterns never
overlap, so at most one route matches) and sends the reply:

* the handler returns a dict (built with :func:`~natsd.jetstream.wire.resp`, so it carries its
  ``"type"``) -> sent as JSON to the request's reply subject;
* the handler raises :class:`~natsd.jetstream.errors.ApiError` -> the reference envelope
  (:func:`~natsd.jetstream.wire.error_envelope`), so error replies match field by field;
* the handler returns ``None`` -> nothing is sent (MSG.NEXT and DIRECT.GET answer on their own).

* the handler returns a generator -> a *slow request* (a STREAM.CREATE with tens of thousands of
  subjects): the dispatcher drives it across loop turns, so no single request holds the event
  loop for long. The generator yields :class:`Offload` (run a pure computation off the event
  loop; its result is sent back into the generator) or ``None`` (let the loop run other work,
  continue on a later turn), and returns the response dict (or raises ``ApiError``). Requests of
  the same account that arrive meanwhile wait in order (at most :data:`MAX_PENDING_REQUESTS`,
  then they are dropped with a warning, as nats-server's bounded API queue), so a client that
  pipelines CREATE then INFO still sees them answered in order.

A subject no route matches gets no reply at all, as the reference (the client times out).
``$JS.API.DIRECT.GET.*`` and ``$JS.API.CONSUMER.MSG.NEXT.*.*`` are not dispatched here: the
stream / consumer subscribes those subjects itself (so that a missing stream gives no
responders), exactly as nats-server.

API statistics (``api.total`` / ``api.errors`` of ``$JS.API.INFO``) are counted per account in
its ``api_stats``.
"""

from __future__ import annotations

import gc
import json
import logging
from collections import deque
from dataclasses import field
from types import GeneratorType
from typing import TYPE_CHECKING, Any, Callable, Generator, Iterable

from natsd.lazydataclass import dataclass
from natsd.jetstream import gojson
from natsd.jetstream.errors import ApiError, ApiErrors
from natsd.jetstream.wire import dumps, error_envelope, required_level_too_high
from natsd.jetstream.api.subjects import API_SUBSCRIPTIONS, JS_API_PREFIX
from natsd.subjects.sublist import Sublist
from natsd.protocol.headers import get_header

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.gojson import GoStruct
    from natsd.jetstream.manager import JsAccount

__all__ = [
    "ApiRequest",
    "ApiDispatcher",
    "Route",
    "Handler",
    "Offload",
    "SlowRequest",
    "JS_API_PREFIX",
    "API_SUBSCRIPTIONS",
    "MAX_PENDING_REQUESTS",
    "run_inline",
    "WithHeader",
]

log = logging.getLogger("natsd.jetstream.api")

# A body whose fields nobody checks (handlers that take any JSON object).
_ANY_OBJECT = gojson.GoStruct("object", {}, open=True)


@dataclass(slots=True)
class ApiRequest:
    """One API request as handlers see it."""

    subject: str
    tokens: list[str]
    reply: str
    hdr: bytes | None
    payload: bytes
    account: "JsAccount"
    _json: Any = field(default=None, repr=False)

    def json(self, struct: "GoStruct | None" = None) -> dict:
        """The body decoded as nats-server decodes it into the Go request ``struct``
        (:mod:`~natsd.jetstream.gojson`): ``{}`` when empty, canonical field names, no ``null``
        fields; INVALID_JSON (10025) with Go's text for bad JSON, unknown fields and wrong types.
        Without a struct the body must be a JSON object; its fields are not checked."""
        if self._json is None:
            try:
                self._json = gojson.decode(self.payload, struct or _ANY_OBJECT)
            except gojson.GoError as e:
                raise ApiErrors.INVALID_JSON(err=str(e)) from None
        return self._json

    @property
    def is_empty(self) -> bool:
        """The reference's isEmptyRequest: no bytes, or a JSON object with no fields (``{}``)."""
        body = self.payload
        if not body or body == b"{}":
            return True
        try:
            val = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return False
        return isinstance(val, dict) and not val

    def header(self, name: str) -> str | None:
        """Value of request header ``name`` (case-sensitive, as nats-server reads it), or None."""
        if not self.hdr:
            return None
        return get_header(self.hdr, name)


Handler = Callable[[ApiRequest], "dict | None"]


@dataclass(frozen=True, slots=True)
class Route:
    """One row of the API table: requests on ``pattern`` go to ``handler``; an error reply is
    typed ``io.nats.jetstream.api.v1.<response_type>``. ``handler`` None: the subject is known
    (it has a response type, answered in an account without JetStream) but nobody answers it
    here (the consumer's own subscription does, or the feature is not implemented).
    ``when_disabled``: answered with 503/10039 in an account without JetStream."""

    pattern: str
    response_type: str
    handler: Handler | None
    when_disabled: bool = True


class Offload:
    """Yielded by a slow request: run ``fn()`` (pure: no store, no ports, no shared state it does
    not own) off the event loop; its return value (or exception) goes back into the request."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn


#: A slow request: yields Offload or None, returns the response dict.
SlowRequest = Generator["Offload | None", Any, "dict | None"]


def run_inline(gen: SlowRequest) -> "dict | None":
    """Drive a slow request's generator to its end right here (a request small enough not to
    need the loop turns): Offload runs in place, a yielded None is ignored. One code path serves
    both sizes of the same request."""
    value: Any = None
    exc: BaseException | None = None
    while True:
        try:
            item = gen.throw(exc) if exc is not None else gen.send(value)
        except StopIteration as stop:
            return stop.value
        value, exc = None, None
        if isinstance(item, Offload):
            try:
                value = item.fn()
            except Exception as e:  # thrown back into the request, as offload does
                exc = e


#: Requests of one account waiting behind a slow one (nats-server bounds its API queue too).
MAX_PENDING_REQUESTS = 10_000


# Slow requests of all accounts running now, and whether the collector was on before the first
# (accounts' slow requests may overlap; the collector comes back when the last one ends).
_gc_pause = [0, False]


def _pause_gc() -> None:
    if _gc_pause[0] == 0:
        _gc_pause[1] = gc.isenabled()
        gc.disable()
    _gc_pause[0] += 1


def _resume_gc() -> None:
    _gc_pause[0] -= 1
    if _gc_pause[0] == 0 and _gc_pause[1]:
        gc.enable()


class WithHeader(dict):
    """A reply that also carries a header block (``Nats-Stream-Identity`` of a sourcing consumer
    create, nats-server's sendAPIHdrResponse)."""

    def __init__(self, body: dict, hdr: bytes) -> None:
        super().__init__(body)
        self.hdr = hdr


class ApiDispatcher:
    """The routes of one account, matched through a :class:`~natsd.subjects.sublist.Sublist`.

    ``on_response(req, data)`` is called after every reply sent (the audit advisory)."""

    __slots__ = ("_table", "on_response", "_busy", "_waiting")

    def __init__(self, routes: Iterable[Route], on_response: Callable[[ApiRequest, bytes], None] | None = None) -> None:
        self._table: Sublist[Route] = Sublist()
        for r in routes:
            if r.handler is not None:
                self._table.insert(r.pattern, r)
        self.on_response = on_response
        self._busy = False  # a slow request is in progress
        self._waiting: deque[tuple[Any, str, str, bytes | None, bytes]] = deque()

    def lookup(self, subject: str) -> Route | None:
        """The route whose pattern matches ``subject``, or None."""
        found = self._table.match(subject).psubs
        return found[0] if found else None

    def dispatch(
        self, account: "JsAccount", subject: str, reply: str, hdr: bytes | None, payload: bytes
    ) -> bytes | None:
        """Handle one request; returns the reply bytes sent (None when nothing was sent yet)."""
        found = self._table.match(subject).psubs
        if not found:
            return None  # unknown API subject: no reply, as the reference
        if self._busy:
            if len(self._waiting) >= MAX_PENDING_REQUESTS:
                log.warning("JetStream API queue limit reached, dropping 1 requests")
                return None
            self._waiting.append((account, subject, reply, hdr, payload))
            return None
        route: Route = found[0]
        req = ApiRequest(subject, subject.split("."), reply, hdr, payload, account)
        try:
            if hdr and required_level_too_high(hdr):
                raise ApiErrors.REQUIRED_API_LEVEL()
            result = route.handler(req)  # type: ignore[misc]  # only routes with a handler are inserted
        except ApiError as err:
            account.api_stats.errors += 1
            result = error_envelope(route.response_type, err)
        except Exception as e:  # a bug must cost this request only, not the connection
            log.exception("JetStream API handler for %s failed", subject)
            account.api_stats.errors += 1
            result = error_envelope(route.response_type, ApiErrors.STREAM_GENERAL_ERROR(err=str(e) or type(e).__name__))
        if isinstance(result, GeneratorType):
            self._busy = True
            # No automatic collection while it runs: building tens of thousands of long-lived
            # objects (trie nodes, subscriptions) makes the collector scan the whole heap again
            # each time the old generation grows by a quarter -- pauses of 40 to 170 ms that
            # find nothing (measured with bench_dos.py overlap), longer than any loop turn the
            # slices leave. The garbage made meanwhile is acyclic and freed as it goes.
            _pause_gc()
            self._step(account, req, route, result, None, None)
            return None
        return self._finish(account, req, result)

    def _finish(self, account: "JsAccount", req: ApiRequest, result: dict | None) -> bytes | None:
        # Counted once handled, as the reference: $JS.API.INFO's "total" leaves itself out.
        account.api_stats.total += 1
        if result is None:
            return None
        data = dumps(result)
        if req.reply:
            account.ports.publish(req.reply, "", result.hdr if isinstance(result, WithHeader) else None, data)
        if self.on_response is not None:
            self.on_response(req, data)
        return data

    def _step(
        self,
        account: "JsAccount",
        req: ApiRequest,
        route: Route,
        gen: SlowRequest,
        value: Any,
        exc: BaseException | None,
    ) -> None:
        """Run the slow request ``gen`` to its next yield (or its end)."""
        try:
            item = gen.throw(exc) if exc is not None else gen.send(value)
        except StopIteration as stop:
            result = stop.value
        except ApiError as err:
            account.api_stats.errors += 1
            result = error_envelope(route.response_type, err)
        except Exception as e:  # as dispatch: this request only
            log.exception("JetStream API handler for %s failed", req.subject)
            account.api_stats.errors += 1
            result = error_envelope(route.response_type, ApiErrors.STREAM_GENERAL_ERROR(err=str(e) or type(e).__name__))
        else:
            if isinstance(item, Offload):
                account.ports.offload(item.fn, lambda v, e: self._step(account, req, route, gen, v, e))
            else:
                account.clock.call_soon(lambda: self._step(account, req, route, gen, None, None))
            return
        self._busy = False
        _resume_gc()
        self._finish(account, req, result)
        # Then the requests that waited, in order, until one of them is slow in turn.
        waiting = self._waiting
        while waiting and not self._busy:
            self.dispatch(*waiting.popleft())
