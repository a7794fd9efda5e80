"""JetStream consumers, in parts (see :mod:`natsd.jetstream.consumer.core` for the map).

This package keeps the names importers use: :class:`Consumer`, the account plumbing
(:func:`setup_account`, :func:`recover_consumers`, :class:`ConsumerHub`), ephemeral names and
the subject prefixes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from natsd.jetstream.api.errors import ApiError
from natsd.jetstream.consumer.acks import ACK_PREFIX, FC_PREFIX, ConsumerHub, hub
from natsd.jetstream.consumer.core import Consumer
from natsd.jetstream.consumer.delivery import TURN_BUDGET
from natsd.jetstream.consumer.durable import DELTA_MIN_ENTRIES, STATE_WRITE_GAP
from natsd.jetstream.consumer.helpers import create_consumer_name
from natsd.store.base import StoreError

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.manager import JsAccount

__all__ = [
    "Consumer", "setup_account", "recover_consumers", "create_consumer_name", "ConsumerHub",
    "ACK_PREFIX", "FC_PREFIX", "TURN_BUDGET", "STATE_WRITE_GAP", "DELTA_MIN_ENTRIES",
]


def setup_account(js_account: "JsAccount") -> None:
    """Called once per JetStream account: ack/flow-control subscriptions, interest tracking and
    the consumer API handlers on the account's router."""
    hub(js_account)
    from natsd.jetstream.api.consumers import register
    register(js_account.router)


def recover_consumers(stream: Any) -> None:
    """Re-create the consumers persisted with ``stream`` (after the stream was recovered)."""
    from natsd.jetstream.api.consumers import recover_consumer
    try:
        names = stream.store.consumer_names()
    except StoreError:
        return
    for name in names:
        try:
            recover_consumer(stream, name)
        except (ApiError, StoreError, ValueError, KeyError, TypeError):
            # A consumer whose config no longer loads is skipped, not fatal for the stream.
            continue
