"""What a Spark user coming from the Kafka connector expects: save modes, Kafka column names,
early and named option errors (issue 17)."""

from __future__ import annotations

import pytest

from .conftest import make_stream, publish, stream_info

# Several Spark queries per test; a timeout inside a py4j call breaks the shared session for every
# later test, so the limit allows for a loaded machine.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def _rows(url, name):
    return stream_info(url, name).state.messages


def test_default_and_error_save_modes_append_overwrite_is_refused(spark, js_server):
    url = js_server.url
    make_stream(url, "MODES", ["modes.>"])
    df = spark.createDataFrame([("a",), ("b",)], "data string")
    w = lambda: df.write.format("jetstream").option("servers", url).option("subject", "modes.x")  # noqa: E731
    w().save()  # no mode: appends, as Kafka's sink does with the default ErrorIfExists
    w().mode("error").save()
    w().mode("errorifexists").save()
    df.write.mode("error").format("jetstream").option("servers", url).option("subject", "modes.x").save()
    df.write.save(format="jetstream", servers=url, subject="modes.x")
    assert _rows(url, "MODES") == 10
    with pytest.raises(Exception, match="save mode 'overwrite' is not supported"):
        w().mode("overwrite").save()
    assert _rows(url, "MODES") == 10


def test_kafka_column_names_in_the_sink(spark, js_server):
    url = js_server.url
    make_stream(url, "KAF", ["kaf.>"], duplicate_window=600)
    df = spark.createDataFrame([("kaf.a", "v1", "k1"), ("kaf.b", "v2", "k2")], "topic string, value string, key string")
    # A 'key' column has no JetStream meaning: refused with what to do instead...
    with pytest.raises(Exception, match="JetStream messages have no key"):
        df.write.format("jetstream").option("servers", url).save()
    # ...unless it is the message id (the recommended column:<name> idempotence).
    for _ in range(2):  # the retried job is deduplicated by the key
        df.write.format("jetstream").option("servers", url).option("idempotence", "column:key").save()
    got = spark.read.format("jetstream").option("servers", url).option("stream", "KAF").load()
    assert sorted((r.subject, bytes(r.data)) for r in got.collect()) == [("kaf.a", b"v1"), ("kaf.b", b"v2")]
    # The Kafka option name 'topic' works like 'subject'.
    spark.createDataFrame([("v3",)], "value string").write.format("jetstream").option("servers", url).option(
        "topic", "kaf.c"
    ).save()
    assert _rows(url, "KAF") == 3


def test_bad_options_fail_when_the_dataframe_is_defined_naming_option_value_and_accepted(spark, js_server):
    url = js_server.url
    r = spark.read.format("jetstream").option("servers", url).option("stream", "ANY")
    with pytest.raises(Exception, match=r"option 'fetchTimeout': invalid value 'soon'.*accepted: seconds"):
        r.option("fetchTimeout", "soon").load()  # load(), before any query runs
    with pytest.raises(Exception, match=r"option 'minPartitions': invalid value 'x'"):
        spark.readStream.format("jetstream").option("servers", url).option("stream", "ANY").option(
            "minPartitions", "x"
        ).load()
    with pytest.raises(Exception, match=r"option 'startingOffsets': invalid value 'first'"):
        r.option("startingOffsets", "first").load()
    df = spark.createDataFrame([("a",)], "data string")
    with pytest.raises(Exception, match=r"option 'minDuplicateWindow': invalid value 'soon'"):
        df.write.format("jetstream").option("servers", url).option("subject", "x.y").option(
            "minDuplicateWindow", "soon"
        ).save()
    # A missing stream is named.
    with pytest.raises(Exception, match=r"stream 'NOSUCH' not found"):
        spark.read.format("jetstream").option("servers", url).option("stream", "NOSUCH").load().collect()


def test_a_streaming_query_with_a_batch_only_option_fails_with_that_options_name(spark, js_server, tmp_path):
    """schema() cannot tell batch from streaming, so endingOffsets is refused when the query starts:
    with the option's message as the query's error, not PySpark's follow-on UnboundLocalError."""
    url = js_server.url
    make_stream(url, "SBATCH", ["sbatch.>"])
    for i, (opts, pattern) in enumerate(
        (
            ({"stream": "SBATCH", "endingOffsets": "5"}, r"option 'endingOffsets' is for batch reads only"),
            ({"stream": "SBATCH", "endingTimestamp": "0"}, r"option 'endingTimestamp' is for batch reads only"),
            ({}, r"exactly one of the options 'stream' or 'streamPattern' is required"),
        )
    ):
        df = spark.readStream.format("jetstream").option("servers", url).options(**opts).load()
        q = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / f"ckpt{i}")).start()
        with pytest.raises(Exception, match=pattern) as err:
            q.awaitTermination(120)
        assert "UnboundLocalError" not in str(err.value)


def _readme_spark_example() -> str:
    """The README's Spark code block, as a user copies it."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    intro = text.index("Reading and writing a stream from Spark")
    start = text.index("```python\n", intro) + len("```python\n")
    return text[start : text.index("```", start)]


def test_the_readme_example_runs_as_written(spark, js_server):
    """Issue 17 item 1: the README's read + write example, verbatim but for the server URL, against
    the README's ORDERS stream; run twice, the second run stores nothing (column:id idempotence)."""
    url = js_server.url
    code = _readme_spark_example()
    assert ".save()" in code and ".mode(" not in code  # the default save mode, as written
    make_stream(url, "ORDERS", ["ORDERS.*"])
    publish(url, [("ORDERS.received", b"order %d" % i) for i in range(20)])
    for _ in range(2):
        exec(code.replace("nats://127.0.0.1:4222", url), {"spark": spark})  # the README's code
        assert _rows(url, "ORDERS") == 40
    got = (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", "ORDERS")
        .option("subjects", "ORDERS.archived")
        .load()
    )
    assert sorted(bytes(r.data) for r in got.collect()) == sorted(b"order %d" % i for i in range(20))


def test_ending_offsets_and_ending_timestamp_are_both_exclusive(spark, js_server):
    """Issue 17 item 4: a message's own sequence / stored time as the end leaves it out; as the
    start, takes it in (Kafka's rule for endingOffsets and endingTimestamp)."""
    import time
    from datetime import datetime, timedelta, timezone

    url = js_server.url
    make_stream(url, "ENDS", ["ends.>"])
    for i in range(5):
        publish(url, [("ends.x", b"m%d" % i)])
        time.sleep(0.01)  # distinct stored times (Spark keeps microseconds)

    def r():  # a DataFrameReader keeps its options: a fresh one per read
        return spark.read.format("jetstream").option("servers", url).option("stream", "ENDS")

    micros = dict(r().load().selectExpr("seq", "unix_micros(timestamp) AS us").collect())

    def iso(seq):  # the message's stored time, truncated to microseconds as Spark shows it
        return (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=micros[seq])).isoformat()

    def seqs(**opts):
        return sorted(row.seq for row in r().options(**opts).load().select("seq").collect())

    assert seqs(startingOffsets=2, endingOffsets=4) == [2, 3]
    assert seqs(startingTimestamp=iso(2), endingTimestamp=iso(4)) == [2, 3]
    assert seqs(startingOffsets=2, endingTimestamp=iso(4)) == seqs(startingTimestamp=iso(2), endingOffsets=4) == [2, 3]
