"""JetStream streams, in parts (see :mod:`natsd.jetstream.stream.core` for the map).

The publish path (``ingest``), the per-turn flush (``turnflush``), atomic and fast batches
(``batch``, ``fastbatch``), counters, message schedules (``schedules``, ``schedule_state``),
expiry and delete markers (``expiry``) and mirrors/sources (``sourcing``) live here beside the
:class:`Stream` they serve. ``ingest`` and ``turnflush`` are functions the class takes as its
methods (the per-message path: see ``core.py`` for why); the other parts own their state and
see the stream through a protocol of their own (``BatchStream``, ``CounterStream``,
``ExpiringStream``, ``SourcedStream``) or through plain arguments (``Schedules``).
"""

from __future__ import annotations

from natsd.jetstream.stream.core import Stream, store_config_for

__all__ = ["Stream", "store_config_for"]
