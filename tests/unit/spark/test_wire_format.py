"""Byte formats the connector writes and parses (no sockets)."""

from __future__ import annotations

from natsd.spark.jsapi import rfc3339_to_ns
from natsd.spark.reader import _Batcher, arrow_schema
from natsd.spark.wire import encode_headers, encode_pub, parse_headers


def test_pub_and_hpub_encoding():
    assert encode_pub("a.b", b"hello", "_INBOX.x.1") == b"PUB a.b _INBOX.x.1 5\r\nhello\r\n"
    assert encode_pub("a.b", b"") == b"PUB a.b 0\r\n\r\n"
    hdr = encode_headers([("Nats-Msg-Id", "job-0-1"), ("X", "1"), ("X", "2")])
    assert hdr == b"NATS/1.0\r\nNats-Msg-Id: job-0-1\r\nX: 1\r\nX: 2\r\n\r\n"
    msg = encode_pub("a.b", b"hi", "r", hdr)
    assert msg == b"HPUB a.b r %d %d\r\n" % (len(hdr), len(hdr) + 2) + hdr + b"hi\r\n"


def test_parse_headers_status_and_multi_values():
    assert parse_headers(b"NATS/1.0 100 FlowControl Request\r\n\r\n") == (100, "FlowControl Request", [])
    status, desc, pairs = parse_headers(
        b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 7\r\nNats-Last-Stream: 9\r\n\r\n"
    )
    assert (status, pairs) == (100, [("Nats-Last-Consumer", "7"), ("Nats-Last-Stream", "9")])
    assert parse_headers(b"NATS/1.0\r\nA: 1\r\nA: 2\r\nB:  x y \r\n\r\n") == (
        0,
        "",
        [("A", "1"), ("A", "2"), ("B", "x y")],
    )
    assert parse_headers(b"NATS/1.0 503\r\n\r\n")[0] == 503


def test_rfc3339_any_fraction():
    assert rfc3339_to_ns("1970-01-01T00:00:01Z") == 1_000_000_000
    assert rfc3339_to_ns("1970-01-01T00:00:01.5Z") == 1_500_000_000
    assert rfc3339_to_ns("1970-01-01T00:00:01.123456789Z") == 1_123_456_789
    assert rfc3339_to_ns("1970-01-01T02:00:01.000000001+02:00") == 1_000_000_001


def test_batcher_builds_the_spark_arrow_layout():
    schema = arrow_schema(include_headers=True)
    b = _Batcher(schema, "ORDERS", with_headers=True)
    for i, (subj, data, hdrs) in enumerate([(b"o.a", b"x", []), (b"o.bb", b"", [("K", b"v")])]):
        b.sub_buf += subj
        b.sub_off.append(len(b.sub_buf))
        b.data_buf += data
        b.data_off.append(len(b.data_buf))
        b.seqs.append(10 + i)
        b.tss.append(1_700_000_000_123_456_789 + i)
        b.hdrs.append(hdrs)
        b.n += 1
    batch = b.build()
    assert batch.schema.equals(schema)
    rows = batch.to_pylist()
    assert [(r["subject"], r["data"], r["stream"], r["seq"]) for r in rows] == [
        ("o.a", b"x", "ORDERS", 10),
        ("o.bb", b"", "ORDERS", 11),
    ]
    assert rows[1]["headers"] == [{"key": "K", "value": b"v"}]  # BINARY values, as Kafka's headers
    # nanoseconds are truncated to Spark's microseconds
    assert batch.column("timestamp").cast("int64").to_pylist() == [1_700_000_000_123_456, 1_700_000_000_123_456]
    assert b.n == 0  # reset for the next batch
    assert arrow_schema(False).names == ["subject", "data", "stream", "seq", "timestamp"]


def test_header_values_are_binary_like_kafka_or_a_string_view():
    from natsd.spark.wire import header_pairs_raw, parse_headers

    block = b"NATS/1.0\r\nTrace: t1\r\nMulti: a\r\nMulti: b\xff\r\n\r\n"
    assert header_pairs_raw(block) == [("Trace", b"t1"), ("Multi", b"a"), ("Multi", b"b\xff")]
    assert parse_headers(block)[2][:2] == [("Trace", "t1"), ("Multi", "a")]
    kv = arrow_schema(True, headers_as_strings=True).field("headers").type.value_type
    assert str(kv) == "struct<key: string, value: string>"
    assert str(arrow_schema(True).field("headers").type.value_type) == "struct<key: string, value: binary>"
