"""Batch reads through real PySpark: ranges, partitions, filters, timestamps, headers."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from .conftest import make_stream, publish, stream_info

# Several Spark queries per test; a timeout inside a py4j call breaks the shared session for every
# later test, so the limit allows for a loaded machine.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def events(js_server):
    """Stream EV with 1000 messages alternating ev.a / ev.b, payload = the index as text."""
    url = js_server.url
    make_stream(url, "EV", ["ev.>"])
    publish(url, [("ev.a" if i % 2 == 0 else "ev.b", str(i).encode()) for i in range(1000)])
    return url


def _read(spark, url, **opts):
    r = spark.read.format("jetstream").option("servers", url)
    for k, v in opts.items():
        r = r.option(k, str(v))
    return r.load()


def test_batch_read_all_with_partitions(spark, events):
    df = _read(spark, events, stream="EV", minPartitions=4)
    assert df.schema.simpleString() == (
        "struct<subject:string,data:binary,stream:string,seq:bigint,timestamp:timestamp>"
    )
    assert df.rdd.getNumPartitions() == 4
    rows = df.select("seq", "subject", "data", "stream").collect()
    assert len(rows) == 1000
    assert sorted(r.seq for r in rows) == list(range(1, 1001))
    by_seq = {r.seq: r for r in rows}
    assert by_seq[1].subject == "ev.a" and bytes(by_seq[1].data) == b"0"
    assert by_seq[1000].subject == "ev.b" and bytes(by_seq[1000].data) == b"999"
    assert {r.stream for r in rows} == {"EV"}


def test_batch_read_sequence_range_ends_exclusive_like_kafka(spark, events):
    # startingOffsets is the first sequence read; endingOffsets the first one not read (Kafka's rule).
    df = _read(spark, events, stream="EV", startingOffsets=100, endingOffsets=200, minPartitions=3)
    seqs = [r.seq for r in df.select("seq").collect()]
    assert sorted(seqs) == list(range(100, 200))


def test_batch_read_json_offsets_and_subject_filter(spark, events):
    df = _read(
        spark,
        events,
        stream="EV",
        subjects="ev.b",
        startingOffsets='{"EV": {"seq": 11}}',
        endingOffsets='{"EV": 30}',
        minPartitions=2,
    )
    seqs = sorted(r.seq for r in df.select("seq").collect())
    assert seqs == list(range(12, 30, 2))  # ev.b has the even sequences; 30 is the exclusive end


def test_batch_read_by_time_range(spark, js_server):
    url = js_server.url
    make_stream(url, "TIMED", ["timed.>"])
    publish(url, [("timed.x", b"early-%d" % i) for i in range(5)])
    time.sleep(0.05)
    cut1 = datetime.now(timezone.utc)
    time.sleep(0.05)
    publish(url, [("timed.x", b"mid-%d" % i) for i in range(7)])
    time.sleep(0.05)
    cut2 = datetime.now(timezone.utc)
    time.sleep(0.05)
    publish(url, [("timed.x", b"late-%d" % i) for i in range(3)])
    df = _read(spark, url, stream="TIMED", startingTimestamp=cut1.isoformat(), endingTimestamp=cut2.isoformat())
    got = sorted(bytes(r.data) for r in df.collect())
    assert got == sorted(b"mid-%d" % i for i in range(7))
    # epoch milliseconds work too (Kafka's convention)
    df = _read(spark, url, stream="TIMED", startingTimestamp=int(cut2.timestamp() * 1000))
    assert sorted(bytes(r.data) for r in df.collect()) == sorted(b"late-%d" % i for i in range(3))


def test_headers_round_trip_through_write_and_read(spark, js_server):
    url = js_server.url
    make_stream(url, "HDR", ["hdr.>"])
    from pyspark.sql import Row

    rows = [
        Row(subject="hdr.one", data=b"p1", headers=[("Trace", "t1"), ("Multi", "a"), ("Multi", "b")]),
        Row(subject="hdr.two", data=b"p2", headers=[]),
    ]
    df = spark.createDataFrame(rows, "subject string, data binary, headers array<struct<key:string,value:string>>")
    df.write.format("jetstream").option("servers", url).mode("append").save()
    # Two partitions publish concurrently, so order by subject, not sequence.
    out = _read(spark, url, stream="HDR", includeHeaders="true").orderBy("subject").collect()
    assert [r.subject for r in out] == ["hdr.one", "hdr.two"]
    # Header values are BINARY, as Kafka's are; headerValueType=string gives the string view.
    assert [(h.key, bytes(h.value)) for h in out[0].headers] == [("Trace", b"t1"), ("Multi", b"a"), ("Multi", b"b")]
    assert out[1].headers == []
    text = _read(spark, url, stream="HDR", includeHeaders="true", headerValueType="string").orderBy("subject")
    assert [(h.key, h.value) for h in text.first().headers] == [("Trace", "t1"), ("Multi", "a"), ("Multi", "b")]
    assert "headers" not in _read(spark, url, stream="HDR").columns
    # Kafka-shaped headers (BINARY values) are accepted by the sink and read back the same.
    kdf = spark.createDataFrame(
        [("hdr.three", b"p3", [("Bin", bytearray(b"v1"))])],
        "subject string, data binary, headers array<struct<key:string,value:binary>>",
    )
    kdf.write.format("jetstream").option("servers", url).save()  # the default save mode appends
    got = _read(spark, url, stream="HDR", includeHeaders="true").where("subject = 'hdr.three'").first()
    assert [(h.key, bytes(h.value)) for h in got.headers] == [("Bin", b"v1")]


def test_stream_pattern_reads_several_streams(spark, js_server):
    url = js_server.url
    make_stream(url, "PART_0", ["part.0"])
    make_stream(url, "PART_1", ["part.1"])
    publish(url, [("part.0", b"x")] * 30 + [("part.1", b"y")] * 10)
    df = _read(spark, url, streamPattern="PART_[0-9]+", minPartitions=4)
    counts = {r["stream"]: r["count"] for r in df.groupBy("stream").count().collect()}
    assert counts == {"PART_0": 30, "PART_1": 10}
    assert df.rdd.getNumPartitions() == 4


def test_batch_read_below_first_sequence_fails_on_data_loss(spark, js_server):
    url = js_server.url
    make_stream(url, "LIM", ["lim.>"], max_msgs=10)
    publish(url, [("lim.x", b"%d" % i) for i in range(25)])
    assert stream_info(url, "LIM").state.first_seq == 16
    with pytest.raises(Exception, match="first available 16"):
        _read(spark, url, stream="LIM", startingOffsets=5).collect()
    df = _read(spark, url, stream="LIM", startingOffsets=5, failOnDataLoss="false")
    assert sorted(r.seq for r in df.collect()) == list(range(16, 26))
    assert _read(spark, url, stream="LIM").count() == 10
