"""KV table <-> bucket stream transformations (pure Arrow)."""

from __future__ import annotations

import pyarrow as pa

from natsd.spark.kv import to_kv_rows, to_messages
from natsd.spark.reader import arrow_schema


def _read_batch(rows):
    cols = list(zip(*rows))
    schema = arrow_schema(True, True)
    arrays = [pa.array(c, f.type) for c, f in zip(cols, schema)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def test_reader_batches_become_table_rows():
    b = _read_batch(
        [
            ("$KV.CFG.a", b"1", [], "KV_CFG", 1, 1_000_000),
            ("$KV.CFG.b.c", b"", [("KV-Operation", "DEL")], "KV_CFG", 2, 2_000_000),
            ("$KV.CFG.d", b"", [("KV-Operation", "PURGE"), ("Nats-Rollup", "sub")], "KV_CFG", 3, 3_000_000),
        ]
    )
    log = to_kv_rows(b, "CFG", keep_deletes=True).to_pylist()
    assert [(r["key"], r["operation"], r["revision"]) for r in log] == [
        ("a", "PUT", 1),
        ("b.c", "DEL", 2),
        ("d", "PURGE", 3),
    ]
    now = to_kv_rows(b, "CFG", keep_deletes=False).to_pylist()
    assert [(r["key"], r["value"]) for r in now] == [("a", b"1")]


def test_rows_become_puts_with_expected_revisions():
    rows = pa.RecordBatch.from_pydict(
        {"key": ["a", "b"], "value": [b"x", b"y"], "expectedRevision": [None, 0], "id": ["i1", "i2"]}
    )
    m = to_messages(rows, "CFG").to_pydict()
    assert m["subject"] == ["$KV.CFG.a", "$KV.CFG.b"] and m["data"] == [b"x", b"y"] and m["id"] == ["i1", "i2"]
    assert m["headers"] == [[], [{"key": "Nats-Expected-Last-Subject-Sequence", "value": "0"}]]
