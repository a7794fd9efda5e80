"""JetStream consumers, in parts (see :mod:`natsd.jetstream.consumer.core` for the map).

This package keeps the names importers use: :class:`Consumer`, the account plumbing
(:class:`ConsumerHub`, one per account: ``JsAccount.consumer_hub``), ephemeral names and the
subject prefixes. Consumers are created, recovered, restored and deleted through
:mod:`natsd.jetstream.consumer_registry`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from natsd.jetstream.consumer.acks import ACK_PREFIX, FC_PREFIX, ConsumerHub
from natsd.jetstream.consumer.helpers import create_consumer_name

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.consumer.core import Consumer
    from natsd.jetstream.consumer.delivery import TURN_BUDGET
    from natsd.jetstream.consumer.durable import DELTA_MIN_ENTRIES, STATE_WRITE_GAP

# The consumer itself loads with the first consumer (created, recovered or restored), not with
# the account's ConsumerHub at JetStream's start (issue 26, start-up time): name -> part.
_LAZY = {"Consumer": "core", "TURN_BUDGET": "delivery", "DELTA_MIN_ENTRIES": "durable", "STATE_WRITE_GAP": "durable"}


def __getattr__(name: str) -> Any:
    part = _LAZY.get(name)
    if part is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{part}"), name)


__all__ = [
    "Consumer",
    "create_consumer_name",
    "ConsumerHub",
    "ACK_PREFIX",
    "FC_PREFIX",
    "TURN_BUDGET",
    "STATE_WRITE_GAP",
    "DELTA_MIN_ENTRIES",
]
