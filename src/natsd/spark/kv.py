"""A JetStream KV bucket as a table (option ``kvBucket``): pure Arrow transformations between the
bucket's stream and the table's rows (no Spark, no sockets).

A bucket ``B`` is the stream ``KV_B`` storing subjects ``$KV.B.<key>``; a delete or purge is a
message with header ``KV-Operation: DEL`` / ``PURGE`` (the convention every NATS client's KV uses),
a put has none. The table's columns are ``key``, ``value``, ``revision`` (the stream sequence),
``created`` (the store time) and ``operation`` (``PUT``, ``DEL``, ``PURGE``):

* a batch read is the bucket now: one row per key with its latest value, deleted and purged keys
  left out (read through a ``last_per_subject`` consumer, so only those messages travel);
* a streaming read is the change log: every put, delete and purge in revision order;
* a write puts ``key`` / ``value`` rows; an optional ``expectedRevision`` column makes a row a
  compare-and-set (``Nats-Expected-Last-Subject-Sequence``; 0 = the key must not exist), and a
  stale revision fails the task with the server's error.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from natsd import nats_headers as NH
from natsd.spark.options import kv_prefix, kv_stream

__all__ = ["kv_stream", "kv_prefix", "kv_arrow_schema", "to_kv_rows", "to_messages"]

_OPERATION = "KV-Operation"
_EXPECTED = NH.EXPECTED_LAST_SUBJ_SEQ.decode()


def kv_arrow_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("key", pa.string()),
            pa.field("value", pa.binary()),
            pa.field("revision", pa.int64()),
            pa.field("created", pa.timestamp("us", tz="UTC")),
            pa.field("operation", pa.string()),
        ]
    )


def _operations(headers: pa.Array) -> pa.Array:
    """``PUT`` / ``DEL`` / ``PURGE`` per row from the read's ``headers`` column (string values)."""
    ops = []
    for pairs in headers.to_pylist():
        op = "PUT"
        for kv in pairs or ():  # Arrow hands list<struct> rows as {"key": ..., "value": ...}
            if kv["key"] == _OPERATION:
                op = kv["value"].strip().upper()
        ops.append(op)
    return pa.array(ops, pa.string())


def to_kv_rows(batch: pa.RecordBatch, bucket: str, keep_deletes: bool) -> pa.RecordBatch:
    """A batch of the reader (``subject, data, headers, stream, seq, timestamp``) as table rows;
    without ``keep_deletes`` (a batch read) deleted and purged keys are left out."""
    cut = len(kv_prefix(bucket))
    ops = _operations(batch.column("headers"))
    cols = [
        pc.utf8_slice_codeunits(batch.column("subject"), cut),
        batch.column("data"),
        batch.column("seq"),
        batch.column("timestamp"),
        ops,
    ]
    out = pa.RecordBatch.from_arrays(cols, schema=kv_arrow_schema())
    return out if keep_deletes else out.filter(pc.equal(ops, "PUT"))


def to_messages(batch: pa.RecordBatch, bucket: str) -> pa.RecordBatch:
    """Rows ``key, value[, expectedRevision]`` as the sink's ``subject, data[, headers]``."""
    names = batch.schema.names
    missing = [c for c in ("key", "value") if c not in names]
    if missing:
        raise ValueError(f"writing to kvBucket {bucket!r} needs 'key' and 'value' columns; columns: {names}")
    keys = batch.column("key")
    if keys.null_count:
        raise ValueError(f"writing to kvBucket {bucket!r}: a row has a null key")
    subjects = pc.binary_join_element_wise(pa.scalar(kv_prefix(bucket)), pc.cast(keys, pa.string()), "")
    cols, out_names = [subjects, batch.column("value")], ["subject", "data"]
    for c in names:  # e.g. the idempotence column
        if c not in ("key", "value", "expectedRevision", "subject", "data", "headers"):
            cols.append(batch.column(c))
            out_names.append(c)
    if "expectedRevision" in names:
        revs = batch.column("expectedRevision").to_pylist()
        hdr = [[(_EXPECTED, str(int(r)))] if r is not None else [] for r in revs]
        kv = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.string())])
        cols.append(pa.array(hdr, pa.list_(kv)))
        out_names.append("headers")
    return pa.RecordBatch.from_arrays(cols, names=out_names)
