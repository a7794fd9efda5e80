"""Archive a stream to Parquet by time range (batch), then an analytics query over the archive.

``archive`` reads every message of ``--stream`` stored in ``[--since, --until)`` (RFC 3339 or epoch
milliseconds) with ``minPartitions`` parallel sequence-range tasks and appends them to a Parquet
dataset partitioned by day. Archiving the same window twice is harmless for the query (it reports
distinct sequences); archive disjoint windows to build history.

``report`` runs the analytics query: per subject and hour, the message count, bytes and the
first/last sequence.

Run::

    python examples/archive/archive_to_parquet.py --servers nats://127.0.0.1:4222 --stream ORDERS \\
        --since 2026-11-01T00:00:00Z --until 2026-11-02T00:00:00Z --out /data/archive/orders archive
    python examples/archive/archive_to_parquet.py --out /data/archive/orders report
"""

from __future__ import annotations

import argparse
import os
import sys


def archive(spark, servers: str, stream: str, out: str, since: str | None = None, until: str | None = None,
            partitions: int = 4) -> int:
    """Copy ``stream``'s messages in ``[since, until)`` to Parquet under ``out``; returns the row count."""
    from pyspark.sql import functions as F

    r = spark.read.format("jetstream").option("servers", servers).option("stream", stream)
    r = r.option("minPartitions", partitions).option("includeHeaders", "true")
    if since:
        r = r.option("startingTimestamp", since)
    if until:
        r = r.option("endingTimestamp", until)
    df = r.load().withColumn("day", F.date_format("timestamp", "yyyy-MM-dd"))
    df.cache()
    n = df.count()
    df.write.mode("append").partitionBy("day").parquet(out)
    df.unpersist()
    return n


def report(spark, out: str):
    """Per subject and hour: messages, bytes, first and last sequence (distinct sequences only)."""
    spark.read.parquet(out).createOrReplaceTempView("archive")
    return spark.sql(
        """
        SELECT subject,
               date_trunc('hour', timestamp) AS hour,
               count(DISTINCT stream, seq)   AS messages,
               sum(length(data))             AS bytes,
               min(seq)                      AS first_seq,
               max(seq)                      AS last_seq
        FROM (SELECT DISTINCT stream, seq, subject, timestamp, data FROM archive)
        GROUP BY subject, date_trunc('hour', timestamp)
        ORDER BY hour, subject
        """
    ).collect()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Archive a JetStream stream to Parquet and query it")
    ap.add_argument("--servers", default="nats://127.0.0.1:4222")
    ap.add_argument("--stream", default="ORDERS")
    ap.add_argument("--since")
    ap.add_argument("--until")
    ap.add_argument("--out", required=True)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--master", default=None)
    ap.add_argument("step", choices=["archive", "report", "all"])
    a = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from natsd.spark import register

    b = SparkSession.builder.appName("jetstream-archive")
    spark = (b.master(a.master) if a.master else b).getOrCreate()
    register(spark)  # checks the workers' Python, makes append the default save mode
    if a.step in ("archive", "all"):
        print(f"archived {archive(spark, a.servers, a.stream, a.out, a.since, a.until, a.partitions)} messages")
    if a.step in ("report", "all"):
        for row in report(spark, a.out):
            print(row.subject, row.hour, row.messages, row.bytes, row.first_seq, row.last_seq)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
