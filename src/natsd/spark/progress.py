"""Optional progress records of a streaming read (``progressBucket``), for monitoring only.

Spark keeps a query's offsets in its checkpoint and gives Python sources no metrics hook, so
people watching the server cannot see how far a job is behind. With ``progressBucket``, each
committed micro-batch's end offsets and lag are put into a KV bucket (created on first use with
one value per key), under ``progressKey`` (default: the stream's name)::

    $KV.<bucket>.<key>  {"offsets": {"ORDERS": 1200}, "lag": {"ORDERS": 34},
                         "committed_at": "2026-12-01T21:40:00.123456Z"}

``natsctl kv get <bucket> <key>`` (or any KV client) reads it. Spark calls ``commit`` for a
micro-batch when it plans the next one, so the record can be one micro-batch behind. As with the RabbitMQ streams
connector's ``storeBrokerOffsets``, the record is never read back: a restarted query resumes
from its checkpoint only. A failed put is logged and ignored (monitoring must not stop a query).
"""

from __future__ import annotations

import logging
import time

from natsd import gotime
from natsd.spark.options import kv_prefix, kv_stream
from natsd.spark.wire import JSApiError, NatsError

__all__ = ["record_progress", "bucket_config"]

log = logging.getLogger("natsd.spark")
_STREAM_EXISTS = 10058  # JSStreamNameExistErr: another query created the bucket meanwhile


def bucket_config(bucket: str) -> dict:
    """A KV bucket as the NATS clients create it (history 1, rollups, no deletes of messages)."""
    return {
        "name": kv_stream(bucket),
        "subjects": [kv_prefix(bucket) + ">"],
        "max_msgs_per_subject": 1,
        "discard": "new",
        "allow_rollup_hdrs": True,
        "deny_delete": True,
        "allow_direct": True,
        "num_replicas": 1,
        "storage": "file",
    }


def record_progress(conn, bucket: str, key: str, end: dict, latest: dict | None) -> dict | None:
    """Put the committed ``end`` offsets and the lag against ``latest`` under ``key``; returns the
    record, or None when the put failed (logged)."""
    offsets = {s: int(e["seq"]) for s, e in sorted(end.items())}
    lag = {s: max(0, int((latest or {}).get(s, {}).get("seq", v)) - v) for s, v in offsets.items()}
    doc = {"offsets": offsets, "lag": lag, "committed_at": gotime.format_rfc3339(time.time_ns())}
    subject = kv_prefix(bucket) + key
    try:
        try:
            conn.js_request(subject, doc)
        except NatsError as exc:
            if isinstance(exc, JSApiError):
                raise
            # No stream stores the subject yet (no responders): create the bucket once, retry.
            api = conn.opts.api_prefix
            try:
                conn.js_request(f"{api}.STREAM.CREATE.{kv_stream(bucket)}", bucket_config(bucket))
            except JSApiError as create_err:
                if create_err.err_code != _STREAM_EXISTS:
                    raise
            conn.js_request(subject, doc)
    except (NatsError, OSError, TimeoutError) as exc:
        log.warning("jetstream source: could not record progress in bucket %s: %s", bucket, exc)
        return None
    return doc
