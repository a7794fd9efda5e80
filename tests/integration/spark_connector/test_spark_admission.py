"""Admission control as Kafka has it, on the readers' planning methods against a real server
(no Spark session needed: these run on the driver): ``minOffsetsPerTrigger`` + ``maxTriggerDelay``,
``maxBytesPerTrigger``, ``maxRecordsPerPartition``, ``startingOffsetsByTimestamp`` /
``endingOffsetsByTimestamp`` and ``startingOffsetsByTimestampStrategy``."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows, ReadMinRows

from natsd.spark.datasource import JetStreamBatchReader, JetStreamStreamReader
from natsd.spark.options import OptionError, ReadOptions

from .conftest import make_stream, publish

pytestmark = [pytest.mark.spark, pytest.mark.timeout(120)]


def _stream_reader(url, **opts):
    o = {"servers": url, "stream": "ADM", "startingoffsets": "earliest", **{k.lower(): str(v) for k, v in opts.items()}}
    return JetStreamStreamReader(ReadOptions.parse(o, streaming=True))


def _batch_reader(url, **opts):
    o = {"servers": url, "stream": "ADM", **{k.lower(): str(v) for k, v in opts.items()}}
    return JetStreamBatchReader(ReadOptions.parse(o, streaming=False))


@pytest.fixture
def adm(js_server):
    make_stream(js_server.url, "ADM", ["adm.>"])
    return js_server.url


def test_min_offsets_per_trigger_waits_for_enough_or_for_the_delay(adm):
    publish(adm, [("adm.x", b"a" * 10)] * 5)
    r = _stream_reader(adm, minOffsetsPerTrigger=10, maxTriggerDelay="60s")
    now = [1000.0]
    r.clock = lambda: now[0]
    try:
        assert r.getDefaultReadLimit() == ReadMinRows(10)
        start = r.initialOffset()
        assert r.latestOffset(start, ReadMinRows(10))["ADM"]["seq"] == 0  # 5 < 10: no batch
        publish(adm, [("adm.x", b"b" * 10)] * 6)
        end = r.latestOffset(start, ReadMinRows(10))
        assert end["ADM"]["seq"] == 11  # 11 >= 10: one batch with everything
        publish(adm, [("adm.x", b"c" * 10)] * 3)
        now[0] += 30
        assert r.latestOffset(end, ReadMinRows(10))["ADM"]["seq"] == 11  # 3 < 10 and 30 s < 60 s
        now[0] += 31
        assert r.latestOffset(end, ReadMinRows(10))["ADM"]["seq"] == 14  # the delay has passed
        r.prepareForTriggerAvailableNow()  # AvailableNow never waits
        assert (
            r.latestOffset({"ADM": {"seq": 13, "created": end["ADM"]["created"]}}, ReadMinRows(10))["ADM"]["seq"] == 14
        )
    finally:
        r.stop()


def test_max_bytes_per_trigger_converts_to_sequences_by_average_size(adm):
    publish(adm, [("adm.y", b"z" * 1000)] * 40)
    r = _stream_reader(adm, maxBytesPerTrigger="10k", maxOffsetsPerTrigger=100)
    try:
        assert r.getDefaultReadLimit() == ReadMaxRows(100)
        start = r.initialOffset()
        first = r.latestOffset(start, ReadMaxRows(100))["ADM"]["seq"]
        assert 5 <= first <= 10  # 10 KiB of ~1 KB messages (plus per-message overhead)
        r2 = _stream_reader(adm, maxBytesPerTrigger="1m", maxOffsetsPerTrigger=7)
        assert r2.latestOffset(r2.initialOffset(), ReadMaxRows(7))["ADM"]["seq"] == 7  # the smaller wins
        r2.stop()
    finally:
        r.stop()


def test_max_records_per_partition_splits_tasks(adm):
    publish(adm, [("adm.p", b"p")] * 20)
    parts = _batch_reader(adm, maxRecordsPerPartition=7).partitions()
    assert [(p.spec.lo, p.spec.hi) for p in parts] == [(1, 7), (8, 14), (15, 20)]
    r = _stream_reader(adm, maxRecordsPerPartition=8, minPartitions=2)
    try:
        parts = r.partitions({"ADM": {"seq": 0, "created": ""}}, {"ADM": {"seq": 20, "created": ""}})
        assert [(p.spec.lo, p.spec.hi) for p in parts] == [(1, 5), (6, 10), (11, 15), (16, 20)]
    finally:
        r.stop()


def test_offsets_by_timestamp_per_stream_and_the_strategy(adm):
    publish(adm, [("adm.t", b"early")] * 4)
    time.sleep(0.05)
    cut = datetime.now(timezone.utc)
    time.sleep(0.05)
    publish(adm, [("adm.t", b"late")] * 3)
    by = json.dumps({"ADM": int(cut.timestamp() * 1000) + 1})
    (part,) = _batch_reader(adm, startingOffsetsByTimestamp=by).partitions()
    assert (part.spec.lo, part.spec.hi) == (5, 7)
    (part,) = _batch_reader(adm, endingOffsetsByTimestamp=json.dumps({"ADM": cut.isoformat()})).partitions()
    assert (part.spec.lo, part.spec.hi) == (1, 4)
    future = json.dumps({"ADM": (cut + timedelta(days=1)).isoformat()})
    with pytest.raises(OptionError, match="startingOffsetsByTimestampStrategy=latest"):
        _batch_reader(adm, startingOffsetsByTimestamp=future).partitions()
    with pytest.raises(OptionError, match="no message stored at or after"):  # Kafka's default: error
        _stream_reader(adm, startingTimestamp=int((cut + timedelta(days=1)).timestamp() * 1000)).initialOffset()
    r = _stream_reader(adm, startingOffsetsByTimestamp=future, startingOffsetsByTimestampStrategy="latest")
    try:
        assert r.initialOffset()["ADM"]["seq"] == 7
    finally:
        r.stop()
    (part,) = _batch_reader(
        adm, startingOffsetsByTimestamp=future, startingOffsetsByTimestampStrategy="latest"
    ).partitions()
    assert part.spec.hi < part.spec.lo  # nothing to read


def test_progress_bucket_records_committed_offsets_and_lag(adm, caplog):
    import logging

    from .conftest import js_call

    publish(adm, [("adm.g", b"g")] * 12)
    r = _stream_reader(adm, maxOffsetsPerTrigger=5, progressBucket="SPARK_PROGRESS", progressKey="jobs.adm")
    try:
        start = r.initialOffset()
        with caplog.at_level(logging.INFO, logger="natsd.spark"):
            end = r.latestOffset(start, ReadMaxRows(5))
        assert "stream ADM lag 7 messages" in caplog.text  # logged at each trigger
        r.commit(end)
    finally:
        r.stop()

    async def get(nc, js):
        kv = await js.key_value("SPARK_PROGRESS")
        return json.loads((await kv.get("jobs.adm")).value)

    doc = js_call(adm, get)
    assert doc["offsets"] == {"ADM": 5} and doc["lag"] == {"ADM": 7} and doc["committed_at"].endswith("Z")


def test_a_real_streaming_query_with_every_admission_option(spark, adm, tmp_path):
    """Spark itself accepts the limits (ReadMinRows as the default read limit), maxBytesPerTrigger
    cuts the backlog into several micro-batches, and their progress lands in the bucket (Spark
    tells a source that a batch is committed when it plans the next one, so the record may be one
    micro-batch behind at the end)."""
    from .conftest import js_call

    publish(adm, [(f"adm.q.{i % 3}", b"q" * 100) for i in range(40)])
    q = (
        spark.readStream.format("jetstream")
        .option("servers", adm)
        .option("stream", "ADM")
        .option("startingOffsets", "earliest")
        .option("minOffsetsPerTrigger", 10)
        .option("maxTriggerDelay", "1s")
        .option("maxBytesPerTrigger", "2k")
        .option("maxRecordsPerPartition", 15)
        .option("progressBucket", "SPARK_PROGRESS")
        .option("progressKey", "real")
        .load()
        .writeStream.format("memory")
        .queryName("adm_all")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None and len(q.recentProgress) >= 3
    assert sorted(r.seq for r in spark.sql("SELECT seq FROM adm_all").collect()) == list(range(1, 41))

    async def get(nc, js):
        kv = await js.key_value("SPARK_PROGRESS")
        return json.loads((await kv.get("real")).value)

    doc = js_call(adm, get)
    assert 10 <= doc["offsets"]["ADM"] <= 40 and doc["lag"]["ADM"] == 40 - doc["offsets"]["ADM"]
