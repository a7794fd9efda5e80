"""The ``Nats-*`` header names, spelled once, exactly as nats-server spells them on the wire.

A top-level module (like :mod:`natsd.nuid`) so every package may import it: the server and
JetStream, and also the clients (``natsd.cli``, ``natsd.spark``), which the layering keeps away
from ``natsd.protocol``. Names are ``bytes`` (the header block is bytes on every hot path);
a caller that needs ``str`` decodes once at import time (``MSG_ID_STR = MSG_ID.decode()``).

Header lookups are case-sensitive, as nats-server's ``sliceHeader``/``getHeader``.
"""

from __future__ import annotations

__all__ = [
    "MSG_ID",
    "EXPECTED_STREAM",
    "EXPECTED_LAST_SEQ",
    "EXPECTED_LAST_SUBJ_SEQ",
    "EXPECTED_LAST_SUBJ_SEQ_SUBJ",
    "EXPECTED_LAST_MSG_ID",
    "EXPECTED_PREFIX",
    "ROLLUP",
    "TTL",
    "MARKER_REASON",
    "STREAM_SOURCE",
    "STREAM_IDENTITY",
    "SERVER_XKEY",
    "REQUIRED_API_LEVEL",
    "INCR",
    "COUNTER_SOURCES",
    "BATCH_ID",
    "BATCH_SEQ",
    "BATCH_COMMIT",
    "BATCH_PREFIX",
    "SCHEDULE",
    "SCHEDULE_TIME_ZONE",
    "SCHEDULE_TTL",
    "SCHEDULE_ROLLUP",
    "SCHEDULE_TARGET",
    "SCHEDULE_SOURCE",
    "SCHEDULER",
    "SCHEDULE_NEXT",
    "SCHEDULE_PREFIX",
    "STREAM",
    "SUBJECT",
    "SEQUENCE",
    "TIME_STAMP",
    "NUM_PENDING",
    "LAST_SEQUENCE",
    "LAST_CONSUMER",
    "LAST_STREAM",
    "CONSUMER_STALLED",
    "MSG_SIZE",
    "PENDING_MESSAGES",
    "PENDING_BYTES",
    "PIN_ID",
    "WRONG_PIN_ID",
    "RESPONSE_TYPE",
    "MSG_TRACE_DEST",
    "MSG_TRACE_ONLY",
    "MSG_TRACE_HOP",
    "MSG_TRACE_ORIGIN_ACCOUNT",
    "TRACEPARENT",
    "REQUEST_INFO",
]

# -- publish: checked and applied by the stream (nats-server stream.go processJetStreamMsg) ----------
MSG_ID = b"Nats-Msg-Id"
EXPECTED_STREAM = b"Nats-Expected-Stream"
EXPECTED_LAST_SEQ = b"Nats-Expected-Last-Sequence"
EXPECTED_LAST_SUBJ_SEQ = b"Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_SUBJ_SEQ_SUBJ = b"Nats-Expected-Last-Subject-Sequence-Subject"
EXPECTED_LAST_MSG_ID = b"Nats-Expected-Last-Msg-Id"
#: every ``Nats-Expected-*`` name starts so (sourcing and schedules drop them as a group)
EXPECTED_PREFIX = b"Nats-Expected-"
ROLLUP = b"Nats-Rollup"
TTL = b"Nats-TTL"
MARKER_REASON = b"Nats-Marker-Reason"
STREAM_SOURCE = b"Nats-Stream-Source"
# a stream's identity on sourcing consumer create/reset (API level 5, natsd.jetstream.identity)
STREAM_IDENTITY = b"Nats-Stream-Identity"
# the server's public xkey on an auth callout request (natsd.server.auth.callout)
SERVER_XKEY = b"Nats-Server-Xkey"
REQUIRED_API_LEVEL = b"Nats-Required-Api-Level"

# -- counters (allow_msg_counter) ------------------------------------------------------------------
INCR = b"Nats-Incr"
COUNTER_SOURCES = b"Nats-Counter-Sources"

# -- atomic and fast batches -------------------------------------------------------------------------
BATCH_ID = b"Nats-Batch-Id"
BATCH_SEQ = b"Nats-Batch-Sequence"
BATCH_COMMIT = b"Nats-Batch-Commit"
#: every ``Nats-Batch-*`` name starts so
BATCH_PREFIX = b"Nats-Batch-"

# -- message schedules (allow_msg_schedules) -------------------------------------------------------
SCHEDULE = b"Nats-Schedule"
SCHEDULE_TIME_ZONE = b"Nats-Schedule-Time-Zone"
SCHEDULE_TTL = b"Nats-Schedule-TTL"
SCHEDULE_ROLLUP = b"Nats-Schedule-Rollup"
SCHEDULE_TARGET = b"Nats-Schedule-Target"
SCHEDULE_SOURCE = b"Nats-Schedule-Source"
SCHEDULER = b"Nats-Scheduler"
SCHEDULE_NEXT = b"Nats-Schedule-Next"
#: every schedule header name starts so (``Nats-Schedule*``, ``Nats-Scheduler``)
SCHEDULE_PREFIX = b"Nats-Sched"

# -- direct get replies -----------------------------------------------------------------------------
STREAM = b"Nats-Stream"
SUBJECT = b"Nats-Subject"
SEQUENCE = b"Nats-Sequence"
TIME_STAMP = b"Nats-Time-Stamp"
NUM_PENDING = b"Nats-Num-Pending"
LAST_SEQUENCE = b"Nats-Last-Sequence"

# -- consumer status messages (heartbeats, flow control, pull statuses) ------------------------------
LAST_CONSUMER = b"Nats-Last-Consumer"
LAST_STREAM = b"Nats-Last-Stream"
CONSUMER_STALLED = b"Nats-Consumer-Stalled"
MSG_SIZE = b"Nats-Msg-Size"
PENDING_MESSAGES = b"Nats-Pending-Messages"
PENDING_BYTES = b"Nats-Pending-Bytes"
PIN_ID = b"Nats-Pin-Id"
WRONG_PIN_ID = b"Nats-Wrong-Pin-Id"

# -- API requests ----------------------------------------------------------------------------------------
RESPONSE_TYPE = b"Nats-Response-Type"

# -- message tracing (ADR-41; natsd.server.msgtrace) -------------------------------------------------
MSG_TRACE_DEST = b"Nats-Trace-Dest"
MSG_TRACE_ONLY = b"Nats-Trace-Only"
MSG_TRACE_HOP = b"Nats-Trace-Hop"
MSG_TRACE_ORIGIN_ACCOUNT = b"Nats-Trace-Origin-Account"
#: W3C trace context; matched case-insensitively (the W3C spelling is lower case)
TRACEPARENT = b"traceparent"

# -- service imports (natsd.server.auth.request_info) ------------------------------------------------
#: the requester's ClientInfo JSON on a request crossing a service import (nats-server's ClientInfoHdr)
REQUEST_INFO = b"Nats-Request-Info"
