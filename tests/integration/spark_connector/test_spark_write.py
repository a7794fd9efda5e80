"""Writes through real PySpark: acks, idempotence under a forced task failure, streaming replay."""

from __future__ import annotations

import os
import time

import pytest

from .conftest import make_stream, publish, stream_info

# Several Spark queries per test; a timeout inside a py4j call breaks the shared session for every
# later test, so the limit allows for a loaded machine.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

N = 4000
PAD = b"p" * 1000


@pytest.fixture(autouse=True)
def small_arrow_batches(spark):
    """Rows reach the writer in Arrow batches of this size; small batches let the forced failure
    strike after the writer has published part of its partition (as a real crash would)."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    spark.conf.set(key, "250")
    yield
    spark.conf.set(key, old)


def _flaky_rows(spark, n, fail_after, url=None, stream="SINK", subject="sink.rows"):
    """``n`` rows (id, subject, data) in 2 partitions; the first attempt of partition 0 raises
    after yielding ``fail_after`` rows, once the sink stream shows that the writer has stored
    some of them (so the failure provably strikes mid-write, as a real crash would)."""
    import pyarrow as pa

    def wait_for_progress():
        import time

        from natsd.spark.jsapi import stream_state
        from natsd.spark.wire import ConnectOptions, SyncConnection

        deadline = time.monotonic() + 30
        with SyncConnection(ConnectOptions(servers=url)).connect() as conn:
            while time.monotonic() < deadline and stream_state(conn, stream).messages < 500:
                time.sleep(0.05)

    def gen(batches):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        flaky = ctx.partitionId() == 0 and ctx.attemptNumber() == 0
        sent = 0
        for b in batches:
            ids = b.column(0).to_pylist()
            for i in range(0, len(ids), 250):
                chunk = ids[i : i + 250]
                if flaky and sent >= fail_after:
                    if url:
                        wait_for_progress()
                    raise RuntimeError("forced task failure (test)")
                sent += len(chunk)
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array([f"row-{x}" for x in chunk]),
                        pa.array([subject] * len(chunk)),
                        # ~1 KB rows: Spark's 64 KB stream buffers between Python workers then flush per
                        # batch, so the writer really receives rows before the failure.
                        pa.array([b"payload-%d-" % x + PAD for x in chunk], pa.binary()),
                    ],
                    names=["row_id", "subject", "data"],
                )

    return spark.range(0, n, 1, 2).mapInArrow(gen, "row_id string, subject string, data binary")


def _count(url, name):
    return stream_info(url, name).state.messages


# column:<name> ids are exercised end to end by the examples (re-runs and fresh checkpoints).
@pytest.mark.parametrize("idem", ["none", "positional"])
def test_batch_write_under_forced_task_failure(spark, js_server, idem):
    url = js_server.url
    # A stream (and subject) of its own per case: rows a failed attempt of one case published late must
    # not land in the other case's stream.
    stream, subject = f"SINK_{idem.upper()}", f"sink{idem}.rows"
    make_stream(url, stream, [f"sink{idem}.>"], duplicate_window=600)
    w = _flaky_rows(spark, N, fail_after=1500, url=url, stream=stream, subject=subject).write.format("jetstream")
    w = w.option("servers", url).option("idempotence", idem).option("msgIdPrefix", "job-42").option("maxInFlight", 64)
    w.mode("append").save()
    stored = _count(url, stream)
    if idem == "none":
        # At-least-once: the failed attempt's published rows are stored again by the retry. They may
        # be stored after the retried job has finished: Spark hands the failed attempt's writer (its
        # own Python worker) the rows the flaky generator had already yielded after the failure, as a
        # partition that ended normally, and that writer publishes them then (traced: its batches
        # arrive after the retry has started; the server stores them as they come, see
        # tests/integration/test_publisher_abrupt_close_reference.py). Wait for them.
        deadline = time.monotonic() + 60
        while stored <= N and time.monotonic() < deadline:
            time.sleep(0.2)
            stored = _count(url, stream)
        assert stored > N
    else:
        assert stored == N  # exactly-once: the retry's repeats were server-side duplicates
        # Running the same job again stores nothing new.
        _flaky_rows(spark, N, fail_after=10**9, subject=subject).write.format("jetstream").option(
            "servers", url
        ).option("idempotence", idem).option("msgIdPrefix", "job-42").mode("append").save()
        assert _count(url, stream) == N


def test_write_with_subject_option_and_string_data(spark, js_server):
    url = js_server.url
    make_stream(url, "PLAIN", ["plain.>"])
    df = spark.createDataFrame([("a",), ("b",), ("c",)], "data string")
    df.write.format("jetstream").option("servers", url).option("subject", "plain.x").mode("append").save()
    got = spark.read.format("jetstream").option("servers", url).option("stream", "PLAIN").load().collect()
    assert sorted((r.subject, bytes(r.data)) for r in got) == [("plain.x", b"a"), ("plain.x", b"b"), ("plain.x", b"c")]


def test_write_to_subject_without_stream_fails_clearly(spark, js_server):
    df = spark.createDataFrame([("x",)], "data string")
    # Option subject: refused on the driver, naming the option and the subject (not the reply inbox).
    with pytest.raises(Exception, match="option 'subject': no stream stores subject 'nowhere.x'"):
        df.write.format("jetstream").option("servers", js_server.url).option("subject", "nowhere.x").save()
    # Subject column: the task names the row's subject.
    rows = spark.createDataFrame([("nowhere.y", "x")], "subject string, data string")
    with pytest.raises(Exception, match=r"subject 'nowhere.y'.*no stream stores this subject"):
        rows.write.format("jetstream").option("servers", js_server.url).save()


def test_streaming_jetstream_to_jetstream_exactly_once_across_replay(spark, js_server, tmp_path):
    url = js_server.url
    make_stream(url, "IN", ["in.>"])
    make_stream(url, "OUT", ["out.>"], duplicate_window=600)
    publish(url, [("in.x", b"%d" % i) for i in range(1800)])
    ckpt = tmp_path / "ckpt"

    def run():
        src = (
            spark.readStream.format("jetstream")
            .option("servers", url)
            .option("stream", "IN")
            .option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", 500)
            .load()
        )
        q = (
            src.selectExpr("concat('out.', subject) AS subject", "data")
            .writeStream.format("jetstream")
            .option("servers", url)
            .option("idempotence", "positional")
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(90)
        if q.exception():
            raise q.exception()

    run()
    assert _count(url, "OUT") == 1800
    os.remove(ckpt / "commits" / "3")
    crc = ckpt / "commits" / ".3.crc"
    if crc.exists():
        os.remove(crc)
    run()  # batch 3 (300 rows) is re-run with the same offsets and the same ids
    assert _count(url, "OUT") == 1800
