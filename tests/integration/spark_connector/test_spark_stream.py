"""Streaming reads through real PySpark: checkpoints, restarts, exact replay, limits, data loss."""

from __future__ import annotations

import json
import os

import pytest

from .conftest import make_stream, publish

# Several Spark queries per test; a timeout inside a py4j call breaks the shared session for every
# later test, so the limit allows for a loaded machine.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def _stream(spark, url, **opts):
    r = spark.readStream.format("jetstream").option("servers", url)
    for k, v in opts.items():
        r = r.option(k, str(v))
    return r.load()


def _run_available_now(df, out, ckpt, fmt="parquet"):
    q = (
        df.writeStream.format(fmt)
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(90)
    if q.exception():
        raise q.exception()
    return [p for p in q.recentProgress if p["numInputRows"] or p["sources"]]


def _input_rows(progress):
    return [p["numInputRows"] for p in progress if p["numInputRows"]]


def test_checkpointed_restart_replay_and_admission_control(spark, js_server, tmp_path):
    url = js_server.url
    make_stream(url, "EVS", ["evs.>"])
    publish(url, [("evs.k", b"%d" % i) for i in range(1000)])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    df = _stream(spark, url, stream="EVS", startingOffsets="earliest", maxMessagesPerTrigger=400)

    prog = _run_available_now(df, out, ckpt)
    assert _input_rows(prog) == [400, 400, 200]
    # The checkpoint holds our offsets: last sequence handed to Spark per stream.
    last = json.loads((ckpt / "offsets" / "2").read_text().splitlines()[-1])
    assert last["EVS"]["seq"] == 1000 and last["EVS"]["created"]
    # Lag: the latest offset seen is reported in the progress.
    assert json.loads(prog[-1]["sources"][0]["latestOffset"])["EVS"]["seq"] == 1000

    # Restart after more data arrives: continues at 1001, nothing twice.
    publish(url, [("evs.k", b"%d" % i) for i in range(1000, 1500)])
    prog = _run_available_now(df, out, ckpt)
    assert _input_rows(prog) == [400, 100]

    # Forced replay: forget that batch 4 committed; the restart re-runs it with the same offsets.
    os.remove(ckpt / "commits" / "4")
    crc = ckpt / "commits" / ".4.crc"
    if crc.exists():
        os.remove(crc)
    _run_available_now(df, out, ckpt)
    res = spark.read.parquet(str(out))
    agg = res.selectExpr("count(*) c", "count(distinct seq) d", "min(seq) lo", "max(seq) hi").first()
    assert (agg.c, agg.d, agg.lo, agg.hi) == (1500, 1500, 1, 1500)
    assert sorted(int(bytes(r.data)) for r in res.select("data").collect()) == list(range(1500))


def test_streaming_subject_filter_and_latest_start(spark, js_server, tmp_path):
    url = js_server.url
    make_stream(url, "FILT", ["filt.>"])
    publish(url, [("filt.a" if i % 3 == 0 else "filt.b", b"%d" % i) for i in range(30)])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    # startingOffsets=latest: only what arrives after the query's first offset.
    df = _stream(spark, url, stream="FILT", subjects="filt.a")
    _run_available_now(df, out, ckpt)
    publish(url, [("filt.a" if i % 3 == 0 else "filt.b", b"%d" % i) for i in range(30, 60)])
    _run_available_now(df, out, ckpt)
    got = sorted(int(bytes(r.data)) for r in spark.read.parquet(str(out)).collect())
    assert got == [i for i in range(30, 60) if i % 3 == 0]


def test_fail_on_data_loss_when_limits_remove_unread_messages(spark, js_server, tmp_path):
    url = js_server.url
    make_stream(url, "LOSSY", ["lossy.>"], max_msgs=100)
    publish(url, [("lossy.x", b"%d" % i) for i in range(50)])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    df = _stream(spark, url, stream="LOSSY", startingOffsets="earliest")
    _run_available_now(df, out, ckpt)  # consumed 1..50
    publish(url, [("lossy.x", b"%d" % i) for i in range(50, 250)])  # first_seq becomes 151
    with pytest.raises(Exception, match="next sequence 51 < first available 151"):
        _run_available_now(df, out, ckpt)
    # failOnDataLoss=false skips ahead to what is still there.
    df2 = _stream(spark, url, stream="LOSSY", startingOffsets="earliest", failOnDataLoss="false")
    _run_available_now(df2, out, ckpt)
    seqs = sorted(r.seq for r in spark.read.parquet(str(out)).collect())
    assert seqs == list(range(1, 51)) + list(range(151, 251))


def test_fail_on_data_loss_detects_recreated_stream(spark, js_server, tmp_path):
    url = js_server.url
    make_stream(url, "AGAIN", ["again.>"])
    publish(url, [("again.x", b"old")] * 20)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    df = _stream(spark, url, stream="AGAIN", startingOffsets="earliest")
    _run_available_now(df, out, ckpt)
    make_stream(url, "AGAIN", ["again.>"])  # same name, new stream, sequences restart
    publish(url, [("again.x", b"new")] * 30)
    with pytest.raises(Exception, match="re-created"):
        _run_available_now(df, out, ckpt)
    df2 = _stream(spark, url, stream="AGAIN", startingOffsets="earliest", failOnDataLoss="false")
    _run_available_now(df2, out, ckpt)
    datas = [bytes(r.data) for r in spark.read.parquet(str(out)).collect()]
    assert datas.count(b"old") == 20 and datas.count(b"new") == 30
