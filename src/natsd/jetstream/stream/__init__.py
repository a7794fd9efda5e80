"""JetStream streams, in parts (see :mod:`natsd.jetstream.stream.core` for the map).

The publish path (``ingest``), the per-turn flush (``turnflush``), atomic and fast batches
(``batch``, ``fastbatch``), counters, message schedules (``schedules``, ``schedule_state``) and
mirrors/sources (``sourcing``) live here beside the :class:`Stream` they serve.
"""

from __future__ import annotations

from natsd.jetstream.stream.core import Stream, store_config_for

__all__ = ["Stream", "store_config_for"]
