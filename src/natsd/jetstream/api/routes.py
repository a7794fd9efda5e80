"""The one table of ``$JS.API`` subjects (:data:`ROUTES`): pattern, response type (the ``type`` of
the reply, errors included) and handler, in the reference's order (``jetstream_api.go``).

A module of its own so that the handler modules (and the stream, consumer and snapshot layers
they use) load with the first API request rather than at start-up (issue 26):
:class:`natsd.jetstream.api.JetStreamApi` imports it on first use. The consumer and snapshot
handlers (with the consumer and snapshot layers) load with the first request of theirs: a
restarted KV bucket's first STREAM.INFO does not pay for them (issue 31, restart time).
"""

from __future__ import annotations

from types import ModuleType
from typing import Callable

from natsd.jetstream.api import account, streams, templates
from natsd.jetstream.api.router import ApiRequest, Handler, Route

__all__ = ["ROUTES"]


def _consumers() -> ModuleType:
    from natsd.jetstream.api import consumers  # (the consumer layer: with the first consumer request)

    return consumers


def _snapshot() -> ModuleType:
    from natsd.jetstream.api import snapshot  # (the snapshot layer: with the first snapshot or restore)

    return snapshot


class _OnFirstUse:
    """Stands for the handler ``name`` of the module ``module()`` imports (looked up at each
    request: an import of a loaded module is a dict lookup)."""

    __slots__ = ("module", "name")

    def __init__(self, module: Callable[[], ModuleType], name: str) -> None:
        self.module = module
        self.name = name

    def resolve(self) -> Handler:
        handler: Handler = getattr(self.module(), self.name)
        return handler

    def __call__(self, req: ApiRequest) -> "dict | None":
        return self.resolve()(req)


def _on_first_use(module: Callable[[], ModuleType], name: str) -> Handler:
    return _OnFirstUse(module, name)


# (lower case: read as the modules they stand for in the table below)
class consumers:
    create = _on_first_use(_consumers, "create")
    names = _on_first_use(_consumers, "names")
    list_ = _on_first_use(_consumers, "list_")
    info = _on_first_use(_consumers, "info")
    delete = _on_first_use(_consumers, "delete")
    pause = _on_first_use(_consumers, "pause")
    unpin = _on_first_use(_consumers, "unpin")


class snapshot:
    snapshot_request = _on_first_use(_snapshot, "snapshot_request")
    restore_request = _on_first_use(_snapshot, "restore_request")


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
