"""The job ``test_spark_local_cluster.py`` runs in its own process (a second SparkSession cannot
share the test session's JVM): Spark's ``local-cluster[2,1,1024]`` master (two workers, each with
one executor JVM) reads and writes across both executors, then a streaming query copies a stream
with message ids while one executor is killed with SIGKILL mid-query.

    python local_cluster_job.py <server url> <messages>

Prints one JSON line with what it observed; the test checks the server side itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time


def _executor_pids(app_id: str) -> list[int]:
    """The executor JVMs of this application (started by this job's workers)."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [
        int(line.split(None, 1)[0])
        for line in out.splitlines()[1:]
        if "CoarseGrainedExecutorBackend" in line and app_id in line
    ]


def _copy(spark, url: str, n: int, ck: str):
    """Stream CL into CLS with ids ``s-<seq>`` (AvailableNow, about 12 micro-batches)."""
    return (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", "CL")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max(1, n // 12)))
        .option("minPartitions", 2)
        .load()
        .selectExpr("concat('cls.', subject) AS subject", "data", "concat('s-', seq) AS id")
        .writeStream.format("jetstream")
        .option("servers", url)
        .option("idempotence", "column:id")
        .option("checkpointLocation", ck)
        .trigger(availableNow=True)
        .start()
    )


def main(url: str, n: int) -> dict:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from natsd.spark import register

    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.task.maxFailures", "8")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark, check=False)
    sc = spark.sparkContext
    seen: dict = {"executors": sorted(int(x) for x in str(sc._jsc.sc().getExecutorIds())[5:-1].split(", "))}
    src = spark.read.format("jetstream").option("servers", url).option("stream", "CL").option("minPartitions", 4)
    seen["batch_count"] = src.load().count()
    pids = src.load().rdd.mapPartitions(lambda _: [os.getpid()]).distinct().collect()
    seen["reader_processes"] = len(pids)
    (
        src.load()
        .selectExpr("concat('clb.', subject) AS subject", "data", "concat('b-', seq) AS id")
        .repartition(4)
        .write.format("jetstream")
        .option("servers", url)
        .option("idempotence", "column:id")
        .save()
    )
    ck = tempfile.mkdtemp(prefix="lc-ck-")
    q = _copy(spark, url, n, ck)
    deadline = time.monotonic() + 300
    while not q.recentProgress and q.isActive and time.monotonic() < deadline:
        time.sleep(0.2)
    victims = _executor_pids(sc.applicationId)[:1]
    for pid in victims:
        os.kill(pid, signal.SIGKILL)  # an executor JVM this job's worker started
    seen["killed_executor"] = bool(victims)
    seen["killed_after_batches"] = len(q.recentProgress)
    # Then stop the query while it runs and restart it from its checkpoint.
    while len(q.recentProgress) < seen["killed_after_batches"] + 2 and q.isActive and time.monotonic() < deadline:
        time.sleep(0.2)
    seen["stopped_while_active"] = q.isActive
    q.stop()
    seen["first_run_error"] = str(q.exception()) if q.exception() else None
    seen["batches_before_stop"] = len(q.recentProgress)
    q = _copy(spark, url, n, ck)
    q.awaitTermination(600)
    seen["stream_error"] = str(q.exception()) if q.exception() else None
    seen["batches_after_restart"] = len(q.recentProgress)
    spark.stop()
    return seen


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]))), flush=True)
