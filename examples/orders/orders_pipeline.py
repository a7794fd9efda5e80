"""The ORDERS workflow on Spark (the JetStream tech-preview scenario, without pull consumers).

Stream ``ORDERS`` stores ``ORDERS.*``. A new order arrives on ``ORDERS.received``; the **process**
step (a streaming job) reads those, validates and prices each order and publishes it to
``ORDERS.processed``; the **dispatch** step (a second streaming job) reads ``ORDERS.processed`` and
publishes ``ORDERS.completed``; the **monitor** step is a batch query counting messages per state.

Both streaming steps keep their position in a Spark checkpoint (stream sequences, no durable
consumer, no acks) and publish with ``Nats-Msg-Id`` = ``<step>-<order id>``, so a restart or a
replayed micro-batch never stores an order twice (within the stream's duplicate window, which
``setup`` sets to 1 hour).

Run (``--servers`` must be reachable from the executors)::

    python examples/orders/orders_pipeline.py --servers nats://127.0.0.1:4222 setup --orders 100
    python examples/orders/orders_pipeline.py --servers ... --checkpoints /tmp/orders-ckpt process
    python examples/orders/orders_pipeline.py --servers ... --checkpoints /tmp/orders-ckpt dispatch
    python examples/orders/orders_pipeline.py --servers ... monitor

``process``/``dispatch`` run with ``Trigger.AvailableNow`` (drain what is there, then stop); add
``--continuous`` to keep them running with a 5 s processing-time trigger.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

STREAM = "ORDERS"


def spark_session(app: str, master: str | None = None):
    """A SparkSession with the jetstream source registered (works under spark-submit too)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from natsd.spark import register

    b = SparkSession.builder.appName(app)
    if master:
        b = b.master(master)
    spark = b.getOrCreate()
    register(spark)  # checks the workers' Python, makes append the default save mode
    return spark


async def _setup(servers: str, orders: int) -> None:
    import nats
    from nats.js.api import StreamConfig

    nc = await nats.connect(servers.split(","))
    js = nc.jetstream()
    cfg = StreamConfig(name=STREAM, subjects=["ORDERS.*"], duplicate_window=3600.0)
    try:
        await js.add_stream(cfg)
    except Exception:
        await js.update_stream(cfg)
    acks = []
    for i in range(1, orders + 1):
        order = {"id": f"o-{i:05d}", "customer": f"c-{i % 7}", "items": [{"sku": f"s{i % 5}", "qty": 1 + i % 3, "price": 2.5}]}
        # The client's own id makes re-running setup idempotent too.
        acks.append(await js.publish_async("ORDERS.received", json.dumps(order).encode(), headers={"Nats-Msg-Id": f"new-{order['id']}"}))
    await asyncio.gather(*acks)
    await nc.close()


def setup(servers: str, orders: int) -> None:
    """Create the ORDERS stream (``ORDERS.*``, 1 h duplicate window) and publish ``orders`` orders."""
    asyncio.run(_setup(servers, orders))


def _orders_stream(spark, servers: str, subject: str, max_per_trigger: int):
    return (
        spark.readStream.format("jetstream")
        .option("servers", servers)
        .option("stream", STREAM)
        .option("subjects", subject)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", max_per_trigger)
        .load()
    )


ORDER_SCHEMA = "id STRING, customer STRING, items ARRAY<STRUCT<sku: STRING, qty: INT, price: DOUBLE>>"


def process_frame(df):
    """ORDERS.received rows -> ORDERS.processed rows (subject, data, msg_id)."""
    from pyspark.sql import functions as F

    o = F.from_json(F.col("data").cast("string"), ORDER_SCHEMA)
    parsed = df.select(o.alias("o"), "timestamp").where(F.col("o.id").isNotNull())
    total = F.aggregate("o.items", F.lit(0.0), lambda acc, it: acc + it["qty"] * it["price"])
    out = F.to_json(
        F.struct(
            F.col("o.id").alias("id"),
            F.col("o.customer").alias("customer"),
            total.alias("total"),
            F.lit("processed").alias("state"),
            F.date_format("timestamp", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("received"),
        )
    )
    return parsed.select(
        F.lit("ORDERS.processed").alias("subject"),
        out.cast("binary").alias("data"),
        F.concat(F.lit("processed-"), F.col("o.id")).alias("msg_id"),
    )


def dispatch_frame(df):
    """ORDERS.processed rows -> ORDERS.completed rows."""
    from pyspark.sql import functions as F

    o = F.from_json(F.col("data").cast("string"), "id STRING, customer STRING, total DOUBLE")
    parsed = df.select(o.alias("o")).where(F.col("o.id").isNotNull())
    out = F.to_json(F.struct("o.id", "o.customer", "o.total", F.lit("completed").alias("state")))
    return parsed.select(
        F.lit("ORDERS.completed").alias("subject"),
        out.cast("binary").alias("data"),
        F.concat(F.lit("completed-"), F.col("o.id")).alias("msg_id"),
    )


def run_step(spark, servers: str, checkpoints: str, step: str, continuous: bool = False, max_per_trigger: int = 10000):
    """Run the ``process`` or ``dispatch`` streaming step; returns the finished (or running) query."""
    source_subject, fn = {"process": ("ORDERS.received", process_frame), "dispatch": ("ORDERS.processed", dispatch_frame)}[step]
    out = fn(_orders_stream(spark, servers, source_subject, max_per_trigger))
    w = (
        out.writeStream.format("jetstream")
        .option("servers", servers)
        .option("idempotence", "column:msg_id")
        .option("checkpointLocation", os.path.join(checkpoints, step))
        .queryName(f"orders-{step}")
    )
    w = w.trigger(processingTime="5 seconds") if continuous else w.trigger(availableNow=True)
    q = w.start()
    if not continuous:
        q.awaitTermination()
        if q.exception():
            raise q.exception()
    return q


def monitor(spark, servers: str) -> dict[str, int]:
    """Batch query: how many messages are in each state (the subject's last token)."""
    from pyspark.sql import functions as F

    df = spark.read.format("jetstream").option("servers", servers).option("stream", STREAM).load()
    rows = df.groupBy(F.element_at(F.split("subject", r"\."), -1).alias("state")).count().collect()
    return {r["state"]: r["count"] for r in rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", default="nats://127.0.0.1:4222")
    ap.add_argument("--checkpoints", default="/tmp/orders-checkpoints")
    ap.add_argument("--master", default=None, help="Spark master (spark-submit passes its own)")
    ap.add_argument("--continuous", action="store_true")
    ap.add_argument("step", choices=["setup", "process", "dispatch", "monitor", "all"])
    ap.add_argument("--orders", type=int, default=100)
    a = ap.parse_args(argv)
    if a.step == "setup":
        setup(a.servers, a.orders)
        return 0
    spark = spark_session(f"orders-{a.step}", a.master)
    spark.sparkContext.setLogLevel("WARN")
    if a.step in ("process", "all"):
        run_step(spark, a.servers, a.checkpoints, "process", a.continuous)
    if a.step in ("dispatch", "all"):
        run_step(spark, a.servers, a.checkpoints, "dispatch", a.continuous)
    if a.continuous and a.step != "monitor":
        spark.streams.awaitAnyTermination()
    if a.step in ("monitor", "all"):
        print(json.dumps(monitor(spark, a.servers), sort_keys=True))
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
