"""A KV bucket as a table (option ``kvBucket``): batch read = each key's latest value without
deleted or purged keys; streaming read = the change log with ``operation``; write = puts, with
``expectedRevision`` as compare-and-set. Buckets are made and checked with nats-py's KV."""

from __future__ import annotations

import pytest

from .conftest import js_call

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]  # a timeout inside py4j breaks the shared session


@pytest.fixture(scope="module")
def bucket(js_server):
    async def go(nc, js):
        try:
            await js.delete_key_value("CFG")
        except Exception:
            pass
        kv = await js.create_key_value(bucket="CFG", history=5)
        await kv.put("a", b"1")
        await kv.put("b", b"1")
        await kv.put("a", b"2")  # revision 3: a's latest
        await kv.put("c", b"1")
        await kv.delete("b")  # revision 5
        await kv.put("d.x", b"1")
        await kv.purge("c")  # revision 7

    js_call(js_server.url, go)
    return js_server.url


def test_batch_read_is_the_bucket_now(spark, bucket):
    df = spark.read.format("jetstream").option("servers", bucket).option("kvBucket", "CFG").load()
    assert df.columns == ["key", "value", "revision", "created", "operation"]
    rows = sorted((r.key, bytes(r.value), r.revision, r.operation) for r in df.collect())
    assert rows == [("a", b"2", 3, "PUT"), ("d.x", b"1", 6, "PUT")]
    assert df.where("key = 'a'").first().created is not None


def test_streaming_read_is_the_change_log(spark, bucket, tmp_path):
    q = (
        spark.readStream.format("jetstream")
        .option("servers", bucket)
        .option("kvBucket", "CFG")
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("memory")
        .queryName("cfg_log")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    log = [(r.revision, r.key, r.operation) for r in spark.sql("SELECT * FROM cfg_log ORDER BY revision").collect()]
    # history=5 keeps every revision; the purge removed c's earlier put (revision 4).
    assert log == [
        (1, "a", "PUT"),
        (2, "b", "PUT"),
        (3, "a", "PUT"),
        (5, "b", "DEL"),
        (6, "d.x", "PUT"),
        (7, "c", "PURGE"),
    ]


def test_write_puts_keys_with_compare_and_set(spark, bucket):
    url = bucket
    df = spark.createDataFrame([("e", "v1", None), ("a", "v3", 3)], "key STRING, value STRING, expectedRevision LONG")
    df.write.format("jetstream").option("servers", url).option("kvBucket", "CFG").save()

    async def read(nc, js):
        kv = await js.key_value("CFG")
        return {k: (await kv.get(k)) for k in ("a", "e")}

    got = js_call(url, read)
    assert got["a"].value == b"v3" and got["a"].revision > 7 and got["e"].value == b"v1"
    stale = spark.createDataFrame([("a", "v4", 3)], "key STRING, value STRING, expectedRevision LONG")
    with pytest.raises(Exception, match="wrong last sequence"):
        stale.write.format("jetstream").option("servers", url).option("kvBucket", "CFG").save()
    assert js_call(url, read)["a"].value == b"v3"
