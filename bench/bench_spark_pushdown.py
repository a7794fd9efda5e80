"""A point query with and without filter pushdown (Spark 4.1+ ``pushFilters``), natsd vs nats-server.

The stream holds ``--n`` messages of 128 bytes over ``--subjects`` subjects (``pd.0`` ..), stored in
``--slices`` equal time slices (a short pause between them stands for the days of a real stream:
the server stamps the store time, so a bench cannot back-date messages). The query asks for one
subject in one slice, the shape of "one device, one day":

    SELECT count(*) FROM jetstream WHERE subject = 'pd.7' AND timestamp >= T5 AND timestamp < T6

Without pushdown every message is read and Spark filters; with it the planner turns the time
bounds into a sequence range (two by-start-time consumer probes) and the subject into the read
consumers' filter, so the server sends only the matching messages.

    .venv/bin/python bench/bench_spark_pushdown.py                       # both servers, 200k
    .venv/bin/python bench/bench_spark_pushdown.py --n 1000000 --servers natsd

``--split N`` measures instead what ``maxRecordsPerPartition=N`` costs: one task reading the whole
stream against the same sequences read as ranges of N (one after the other, each with its own
connection and consumer, as the extra tasks would), without Spark.

Nothing is asserted beyond both answers being equal; the figures go in docs/spark.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_spark import Server, _make_stream  # noqa: E402

from natsd.spark.wire import ConnectOptions  # noqa: E402
from natsd.spark.writer import Publisher  # noqa: E402


def fill(url: str, n: int, subjects: int, slices: int) -> list[datetime]:
    """Publish ``n`` messages in ``slices`` time slices; returns the slice boundaries (UTC)."""
    asyncio.run(_make_stream(url, "PD", ["pd.>"]))
    bounds = [datetime.now(timezone.utc)]
    per = n // slices
    payload = b"x" * 128
    names = [f"pd.{i}" for i in range(subjects)]
    for s in range(slices):
        pub = Publisher(ConnectOptions(servers=url))
        for i in range(s * per, (s + 1) * per):
            pub.publish(names[i % subjects], payload)
        pub.finish()
        time.sleep(0.02)
        bounds.append(datetime.now(timezone.utc))
        time.sleep(0.02)
    return bounds


def session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import warnings

    warnings.simplefilter("ignore", FutureWarning)
    from pyspark.sql import SparkSession

    from natsd.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def point_query(spark, url: str, bounds: list[datetime], pushdown: bool) -> tuple[float, int]:
    spark.conf.set("spark.sql.python.filterPushdown.enabled", str(pushdown).lower())
    mid = len(bounds) // 2
    where = (
        f"subject = 'pd.7' AND timestamp >= '{bounds[mid].isoformat()}' AND timestamp < '{bounds[mid + 1].isoformat()}'"
    )
    df = spark.read.format("jetstream").option("servers", url).option("stream", "PD").option("minPartitions", 2)
    df.load().where(where).count()  # warm-up (workers, imports, server caches)
    t = time.perf_counter()
    rows = df.load().where(where).count()
    return time.perf_counter() - t, rows


def split_cost(url: str, n: int, per: int) -> str:
    from natsd.spark.planning import split_range
    from natsd.spark.reader import RangeSpec, read_range

    asyncio.run(_make_stream(url, "SPL", ["spl.>"]))
    pub = Publisher(ConnectOptions(servers=url))
    for _ in range(n):
        pub.publish("spl.x", b"x" * 128)
    pub.finish()
    co = ConnectOptions(servers=url)
    t = time.perf_counter()
    whole = sum(b.num_rows for b in read_range(co, RangeSpec("SPL", 1, n)))
    one = time.perf_counter() - t
    ranges = split_range(1, n, -(-n // per))
    t = time.perf_counter()
    parts = sum(b.num_rows for lo, hi in ranges for b in read_range(co, RangeSpec("SPL", lo, hi)))
    many = time.perf_counter() - t
    assert whole == parts == n
    extra_ms = (many - one) / max(1, len(ranges) - 1) * 1000
    return (
        f"one task {n / one:,.0f} rows/s; {len(ranges)} ranges of {per}: {n / many:,.0f} rows/s "
        f"({extra_ms:.1f} ms per extra task)"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--subjects", type=int, default=100)
    ap.add_argument("--slices", type=int, default=10)
    ap.add_argument("--servers", default="reference,natsd")
    ap.add_argument("--split", type=int, default=0, help="measure maxRecordsPerPartition=N splitting instead")
    a = ap.parse_args()
    if a.split:
        for kind in a.servers.split(","):
            srv = Server(kind)
            try:
                print(f"{kind}: {split_cost(srv.url, a.n, a.split)}", flush=True)
            finally:
                srv.stop()
        return 0
    spark = session()
    try:
        for kind in a.servers.split(","):
            srv = Server(kind)
            try:
                t = time.perf_counter()
                bounds = fill(srv.url, a.n, a.subjects, a.slices)
                print(f"{kind}: filled {a.n} messages in {time.perf_counter() - t:.1f}s", flush=True)
                off, rows_off = point_query(spark, srv.url, bounds, False)
                on, rows_on = point_query(spark, srv.url, bounds, True)
                assert rows_off == rows_on, (rows_off, rows_on)
                print(
                    f"{kind}: point query over {a.n}: {rows_on} rows; without pushdown {off:.2f}s, "
                    f"with pushdown {on:.2f}s, speed-up {off / on:.1f}x",
                    flush=True,
                )
            finally:
                srv.stop()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
