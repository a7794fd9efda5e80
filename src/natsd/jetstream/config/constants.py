"""Numbers the JetStream start needs without the config models (issue 26, start-up time):
:mod:`~natsd.jetstream.config.models` re-exports them, so a -js start that has no stream yet
loads neither the models nor their enums and dataclasses."""

from __future__ import annotations

__all__ = ["MS", "SECOND", "JS_API_LEVEL", "RESTORE_DIR_PREFIX", "FAST_BATCH_SUFFIX"]

MS = 1_000_000
SECOND = 1_000_000_000

#: The $JS.API level we implement, that of nats-server 2.14 (the version natsd advertises): 1 per-message
#: TTL and delete markers, 2 counters, atomic batch, schedules and async persist, 3 snapshot
#: ``window_size``, 4 fast batch publish and ``ack_policy: flow_control`` consumers, 5 (2.15) the
#: stream identity of sourcing consumers (``natsd.jetstream.identity``).
JS_API_LEVEL = 5

#: Hidden upload directory of a file-storage restore, under ``<account>/streams/``
#: (natsd.jetstream.snapshot.restore; here so that a start can look for stale ones cheaply).
RESTORE_DIR_PREFIX = ".restore."

#: The end of a fast batch publish's reply subject (``<prefix>...<operation>.$FI``,
#: natsd.jetstream.stream.fastbatch); here so that ingest can tell such a publish without loading
#: the batch layers.
FAST_BATCH_SUFFIX = ".$FI"
