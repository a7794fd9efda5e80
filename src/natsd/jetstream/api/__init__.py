"""The ``$JS.API`` layer: parses requests, calls the domain (:mod:`natsd.jetstream`), renders
replies. Nothing in the domain imports this package; the server hands a :class:`JetStreamApi`
to the engine (``JetStreamEngine(..., api=JetStreamApi())``), which installs it on every
JetStream account.

:data:`ROUTES` (:mod:`.routes`) is the one table of API subjects: pattern, response type (the
``type`` of the reply, errors included) and handler, in the reference's order
(``jetstream_api.go``). It is matched through a :class:`natsd.subjects.sublist.Sublist`
(:class:`~.router.ApiDispatcher`). The table and its handler modules (with the stream, consumer
and snapshot layers behind them) load with the first ``$JS.API`` request, not at start-up
(issue 26): the API subjects are subscribed at once, so a request arriving the moment the port
opens is answered as any other.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from natsd.jetstream.api.subjects import API_SUBSCRIPTIONS
from natsd.subjects.tokens import subject_matches

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.api.router import ApiDispatcher, ApiRequest, Route
    from natsd.jetstream.manager import ApiStats, JsAccount
    from natsd.jetstream.ports import MsgHandler, Ports, Subscription
    from natsd.jetstream.views import StreamView

__all__ = ["ROUTES", "JetStreamApi"]

_META_PREFIXES = ("$JS.API.SERVER.", "$JS.API.META.", "$JS.API.ACCOUNT.STREAM.", "$JS.API.ACCOUNT.PURGE.")


def _not_enabled(req: ApiRequest) -> dict:
    from natsd.jetstream.errors import ApiErrors  # loaded by the router already (the first request)

    raise ApiErrors.NOT_ENABLED_FOR_ACCOUNT()


_T = TypeVar("_T")


def _collector_paused(load: Callable[[], _T]) -> _T:
    """``load()`` (the first request's imports) with the cyclic collector paused: the modules make
    objects by the thousand and none is garbage, so a collection meanwhile only walks the heap
    (main() and Server.run pause it for the start's imports the same way; issue 26)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return load()
    finally:
        if collecting:
            gc.enable()


def _dispatcher(routes: tuple[Route, ...], audit: Callable[[ApiRequest, bytes], None] | None = None) -> ApiDispatcher:
    """A dispatcher over ``routes``. The router, the error table and the request decoder load
    with the first request, not at JetStream's start (issue 26, start-up time)."""
    from natsd.jetstream.api.router import ApiDispatcher

    return ApiDispatcher(routes, audit)


class JetStreamApi:
    """The API as the engine sees it (:class:`natsd.jetstream.manager.ApiSurface`).

    ``routes`` defaults to :data:`ROUTES`, imported with the first request that needs it (the
    subscriptions are made at once; only the dispatch tables wait)."""

    def __init__(self, routes: tuple[Route, ...] | None = None) -> None:
        self._routes = routes
        self._not_enabled_routes: tuple[Route, ...] | None = None

    @property
    def routes(self) -> tuple[Route, ...]:
        if self._routes is None:
            from natsd.jetstream.api.routes import (
                ROUTES,
            )  # the handler modules load on first use (issue 26, start-up time)

            self._routes = ROUTES
        return self._routes

    def not_enabled_routes(self) -> tuple[Route, ...]:
        """For accounts without JetStream, as a standalone nats-server 2.15.1 answers them: the
        stream/consumer cluster-only requests 503/10010 (clustering required) all the same, the
        meta ones (server remove/evacuate, meta rescue/stepdown, account purge and stream moves)
        nothing, and every other known subject 503/10039."""
        if self._not_enabled_routes is None:
            from natsd.jetstream.api.router import Route
            from natsd.jetstream.api.streams import cluster_only  # loaded with the routes (issue 26, start-up time)

            self._not_enabled_routes = tuple(
                Route(r.pattern, r.response_type, r.handler if r.handler is cluster_only else _not_enabled)
                for r in self.routes
                if r.when_disabled and not r.pattern.startswith(_META_PREFIXES)
            )
        return self._not_enabled_routes

    def install(self, js_account: "JsAccount") -> list["Subscription"]:
        """Subscribe the API subjects of ``js_account``. Returns the subscriptions."""
        dispatcher: list[ApiDispatcher] = []  # made by the first request: the routes (and handlers) load then
        ports = js_account.ports

        def on_api(subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
            if not dispatcher:
                dispatcher.append(_collector_paused(lambda: self._audited_dispatcher(js_account)))
            dispatcher[0].dispatch(js_account, subject, reply, hdr, payload)

        # The $JS.<domain>.API. prefix is a subject mapping onto these (natsd.jetstream.domain_mappings).
        subs = [ports.subscribe(p, on_api) for p in API_SUBSCRIPTIONS]
        return subs

    def _audited_dispatcher(self, js_account: "JsAccount") -> ApiDispatcher:
        """The account's dispatcher over every route, each request audited (its advisory)."""
        from natsd.jetstream.advisories import api_audit  # (with the first request: issue 26)

        return _dispatcher(self.routes, lambda req, data: api_audit(js_account, req, data))

    def answer_not_enabled(self, ports: "Ports", stats: "ApiStats", system: bool = False) -> list["Subscription"]:
        """For an account *without* JetStream on a JetStream server: answer every ``$JS.API``
        request with 503/10039 "JetStream not enabled for account" (the reference does this
        through its API import). The system account (``system``) answers as a standalone
        nats-server 2.15.1 answers there: INFO as elsewhere, the meta requests nothing, and
        every other subject, known or not, 10039 typed ``system_response``. Returns the
        subscriptions (unsubscribe to undo)."""
        tables: list[Any] = []  # [dispatcher, generic, meta patterns], built by the first request

        class _Unenabled:  # what ApiDispatcher.dispatch needs from an account
            api_stats = stats

        _Unenabled.ports = ports  # type: ignore[attr-defined]

        def on_api(subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
            if not tables:
                from natsd.jetstream.api.router import Route

                tables.extend(
                    (
                        _dispatcher(self.not_enabled_routes()),
                        _dispatcher((Route("$JS.API.>", "system_response", _not_enabled),)),
                        [r.pattern for r in self.routes if r.pattern.startswith(_META_PREFIXES)],
                    )
                )
            dispatcher, generic, meta = tables
            if system and subject != "$JS.API.INFO":
                if not any(subject_matches(p, subject) for p in meta):
                    generic.dispatch(_Unenabled, subject, reply, hdr, payload)
                return
            dispatcher.dispatch(_Unenabled, subject, reply, hdr, payload)

        return [ports.subscribe(p, on_api) for p in API_SUBSCRIPTIONS]

    def direct_get_handlers(self, stream: "StreamView") -> tuple["MsgHandler", "MsgHandler"]:
        """(handler for DIRECT.GET.<s>, handler for DIRECT.GET.<s>.<subject...>); the stream
        subscribes them itself when ``allow_direct`` is set."""
        from natsd.jetstream.api import direct  # loaded with the first stream that allows direct gets (issue 26)

        return direct.direct_get_handlers(stream)


def __getattr__(name: str) -> Any:
    # ``ROUTES`` for readers of the table (tests, docs), imported on first use like the handlers.
    if name == "ROUTES":
        from natsd.jetstream.api.routes import ROUTES  # the handler modules load on first use (issue 26)

        return ROUTES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
