"""JetStream consumers, in parts (see :mod:`natsd.jetstream.consumer.core` for the map).

This package keeps the names importers use: :class:`Consumer`, the account plumbing
(:class:`ConsumerHub`, one per account: ``JsAccount.consumer_hub``), ephemeral names and the
subject prefixes. Consumers are created, recovered, restored and deleted through
:mod:`natsd.jetstream.consumer_registry`.
"""

from __future__ import annotations

from natsd.jetstream.consumer.acks import ACK_PREFIX, FC_PREFIX, ConsumerHub
from natsd.jetstream.consumer.core import Consumer
from natsd.jetstream.consumer.delivery import TURN_BUDGET
from natsd.jetstream.consumer.durable import DELTA_MIN_ENTRIES, STATE_WRITE_GAP
from natsd.jetstream.consumer.helpers import create_consumer_name

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
