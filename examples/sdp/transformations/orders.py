"""SDP definitions: the JetStream stream ORDERS as a streaming table, plus a per-state view.

``spark-pipelines`` imports this file with ``spark`` injected. The connector is registered here
(``natsd.spark.register`` calls ``spark.dataSource.register``, which definition files may do) and must be installed in the
Python that runs the pipeline's Spark Connect server (``pip install`` the project there; SDP cannot
see files added with ``spark.addArtifacts``). ``NATS_URL`` names the server (reachable from the
executors) and ``ORDERS_STREAM`` the stream (default ``ORDERS``).
"""

import os

from pyspark import pipelines as dp
from pyspark.sql import functions as F

from natsd.spark import register

register(spark)  # noqa: F821 - `spark` is injected by spark-pipelines

SERVERS = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
STREAM = os.environ.get("ORDERS_STREAM", "ORDERS")


@dp.table(comment="Every message of the JetStream stream, appended incrementally by sequence")
def orders_raw():
    return (
        spark.readStream.format("jetstream")  # noqa: F821
        .option("servers", SERVERS)
        .option("stream", STREAM)
        .option("startingOffsets", "earliest")
        .load()
        .select("subject", F.col("data").cast("string").alias("body"), "seq", "timestamp")
    )


@dp.materialized_view(comment="Messages per order state (last subject token)")
def orders_by_state():
    return (
        spark.read.table("orders_raw")  # noqa: F821
        .groupBy(F.element_at(F.split("subject", r"\."), -1).alias("state"))
        .count()
    )
