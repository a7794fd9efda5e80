"""The ``$JS.API`` layer: parses requests, calls the domain (:mod:`natsd.jetstream`), renders
replies. Nothing in the domain imports this package; the server hands a :class:`JetStreamApi`
to the engine (``JetStreamEngine(..., api=JetStreamApi())``), which installs it on every
JetStream account.

:data:`ROUTES` is the one table of API subjects: pattern, response type (the ``type`` of the
reply, errors included) and handler, in the reference's order (``jetstream_api.go``). It is
matched through a :class:`natsd.subjects.sublist.Sublist` (:class:`~.router.ApiDispatcher`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from natsd.jetstream.advisories import api_audit
from natsd.jetstream.api import account, consumers, direct, snapshot, streams, templates
from natsd.jetstream.api.router import API_SUBSCRIPTIONS, ApiDispatcher, ApiRequest, Route
from natsd.jetstream.errors import ApiErrors
from natsd.subjects.tokens import subject_matches

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.manager import ApiStats, JsAccount
    from natsd.jetstream.ports import MsgHandler, Ports, Subscription
    from natsd.jetstream.views import StreamView

__all__ = ["ROUTES", "JetStreamApi"]

ROUTES: tuple[Route, ...] = (
    Route("$JS.API.INFO", "account_info_response", account.account_info),
    Route("$JS.API.STREAM.CREATE.*", "stream_create_response", streams.stream_create),
    Route("$JS.API.STREAM.UPDATE.*", "stream_update_response", streams.stream_update),
    Route("$JS.API.STREAM.NAMES", "stream_names_response", streams.stream_names),
    Route("$JS.API.STREAM.LIST", "stream_list_response", streams.stream_list),
    Route("$JS.API.STREAM.INFO.*", "stream_info_response", streams.stream_info),
    Route("$JS.API.STREAM.DELETE.*", "stream_delete_response", streams.stream_delete),
    Route("$JS.API.STREAM.PURGE.*", "stream_purge_response", streams.stream_purge),
    Route("$JS.API.STREAM.MSG.GET.*", "stream_msg_get_response", streams.msg_get),
    Route("$JS.API.STREAM.MSG.DELETE.*", "stream_msg_delete_response", streams.msg_delete),
    Route("$JS.API.STREAM.SNAPSHOT.*", "stream_snapshot_response", snapshot.snapshot_request),
    Route("$JS.API.STREAM.RESTORE.*", "stream_restore_response", snapshot.restore_request),
    Route("$JS.API.STREAM.LEADER.STEPDOWN.*", "stream_leader_stepdown_response", streams.cluster_only),
    Route("$JS.API.STREAM.PEER.REMOVE.*", "stream_remove_peer_response", streams.cluster_only),
    Route("$JS.API.STREAM.PEER.EVACUATE.*", "stream_evacuate_peer_response", streams.cluster_only),
    Route("$JS.API.STREAM.CANCEL_MOVE.*", "stream_cancel_move_response", streams.cluster_only),
    Route("$JS.API.CONSUMER.CREATE.*", "consumer_create_response", consumers.create),
    Route("$JS.API.CONSUMER.CREATE.*.>", "consumer_create_response", consumers.create),
    Route("$JS.API.CONSUMER.DURABLE.CREATE.*.*", "consumer_create_response", consumers.create),
    Route("$JS.API.CONSUMER.NAMES.*", "consumer_names_response", consumers.names),
    Route("$JS.API.CONSUMER.LIST.*", "consumer_list_response", consumers.list_),
    Route("$JS.API.CONSUMER.INFO.*.*", "consumer_info_response", consumers.info),
    Route("$JS.API.CONSUMER.DELETE.*.*", "consumer_delete_response", consumers.delete),
    Route("$JS.API.CONSUMER.PAUSE.*.*", "consumer_pause_response", consumers.pause),
    Route("$JS.API.CONSUMER.UNPIN.*.*", "consumer_unpin_response", consumers.unpin),
    # Answered by each consumer's own subscription (no responders for a missing consumer).
    Route("$JS.API.CONSUMER.RESET.*.*", "consumer_reset_response", None),
    # nats-server 2.15 answers it on a standalone server with 10010 (it had no reply before).
    Route("$JS.API.CONSUMER.LEADER.STEPDOWN.*.*", "consumer_leader_stepdown_response", streams.cluster_only),
    # The meta leader's requests are answered only in the system account of a cluster (an
    # account purge in a standalone server's system account too): silence here, as nats-server
    # gives a standalone server's accounts.
    Route("$JS.API.META.LEADER.STEPDOWN", "meta_leader_stepdown_response", None),
    Route("$JS.API.META.RESCUE", "meta_rescue_response", None),
    Route("$JS.API.SERVER.REMOVE", "meta_server_remove_response", None),
    Route("$JS.API.SERVER.EVACUATE", "meta_server_remove_response", None),
    Route("$JS.API.ACCOUNT.PURGE.*", "account_purge_response", None),
    Route("$JS.API.ACCOUNT.STREAM.MOVE.*.*", "stream_update_response", None),
    Route("$JS.API.ACCOUNT.STREAM.CANCEL_MOVE.*.*", "stream_update_response", None),
    # Stream templates (removed from nats-server 2.12; answered as 2.11 did). An account without
    # JetStream gives them no reply.
    Route("$JS.API.STREAM.TEMPLATE.CREATE.*", templates.CREATE_T, templates.template_create, False),
    Route("$JS.API.STREAM.TEMPLATE.INFO.*", templates.INFO_T, templates.template_info, False),
    Route("$JS.API.STREAM.TEMPLATE.DELETE.*", templates.DELETE_T, templates.template_delete, False),
    Route("$JS.API.STREAM.TEMPLATE.NAMES", templates.NAMES_T, templates.template_names, False),
)


_META_PREFIXES = ("$JS.API.SERVER.", "$JS.API.META.", "$JS.API.ACCOUNT.STREAM.", "$JS.API.ACCOUNT.PURGE.")


def _not_enabled(req: ApiRequest) -> dict:
    raise ApiErrors.NOT_ENABLED_FOR_ACCOUNT()


class JetStreamApi:
    """The API as the engine sees it (:class:`natsd.jetstream.manager.ApiSurface`)."""

    def __init__(self, routes: tuple[Route, ...] = ROUTES) -> None:
        self.routes = routes
        # For accounts without JetStream, as a standalone nats-server 2.15.1 answers them: the
        # stream/consumer cluster-only requests 503/10010 (clustering required) all the same, the
        # meta ones (server remove/evacuate, meta rescue/stepdown, account purge and stream moves)
        # nothing, and every other known subject 503/10039.
        self._not_enabled_routes = tuple(
            Route(r.pattern, r.response_type, r.handler if r.handler is streams.cluster_only else _not_enabled)
            for r in routes
            if r.when_disabled and not r.pattern.startswith(_META_PREFIXES)
        )

    def install(self, js_account: "JsAccount") -> list["Subscription"]:
        """Subscribe the API subjects of ``js_account``. Returns the subscriptions."""
        dispatcher = ApiDispatcher(self.routes, lambda req, data: api_audit(js_account, req, data))
        dispatch = dispatcher.dispatch
        ports = js_account.ports

        def on_api(subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
            dispatch(js_account, subject, reply, hdr, payload)

        # The $JS.<domain>.API. prefix is a subject mapping onto these (natsd.jetstream.domain_mappings).
        subs = [ports.subscribe(p, on_api) for p in API_SUBSCRIPTIONS]
        return subs

    def answer_not_enabled(self, ports: "Ports", stats: "ApiStats", system: bool = False) -> list["Subscription"]:
        """For an account *without* JetStream on a JetStream server: answer every ``$JS.API``
        request with 503/10039 "JetStream not enabled for account" (the reference does this
        through its API import). The system account (``system``) answers as a standalone
        nats-server 2.15.1 answers there: INFO as elsewhere, the meta requests nothing, and
        every other subject, known or not, 10039 typed ``system_response``. Returns the
        subscriptions (unsubscribe to undo)."""
        dispatcher = ApiDispatcher(self._not_enabled_routes)
        generic = ApiDispatcher((Route("$JS.API.>", "system_response", _not_enabled),))
        meta = [r.pattern for r in self.routes if r.pattern.startswith(_META_PREFIXES)]

        class _Unenabled:  # what ApiDispatcher.dispatch needs from an account
            api_stats = stats

        _Unenabled.ports = ports  # type: ignore[attr-defined]

        def on_api(subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
            if system and subject != "$JS.API.INFO":
                if not any(subject_matches(p, subject) for p in meta):
                    generic.dispatch(_Unenabled, subject, reply, hdr, payload)  # type: ignore[arg-type]
                return
            dispatcher.dispatch(_Unenabled, subject, reply, hdr, payload)  # type: ignore[arg-type]

        return [ports.subscribe(p, on_api) for p in API_SUBSCRIPTIONS]

    def direct_get_handlers(self, stream: "StreamView") -> tuple["MsgHandler", "MsgHandler"]:
        """(handler for DIRECT.GET.<s>, handler for DIRECT.GET.<s>.<subject...>); the stream
        subscribes them itself when ``allow_direct`` is set."""
        return direct.direct_get_handlers(stream)
