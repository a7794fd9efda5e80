"""natsd.spark: a pure-Python PySpark (>= 4.2) data source for JetStream streams.

Works against any JetStream server (natsd or nats-server); it is a client only.

Usage::

    import natsd.spark
    natsd.spark.register(spark)     # checks Spark's worker Python; auto-registered when installed
    df = (spark.read.format("jetstream")
          .option("servers", "nats://host:4222").option("stream", "ORDERS")
          .option("startingOffsets", "earliest").option("minPartitions", 4).load())
    df.write.format("jetstream").option("servers", "...").option("subject", "out.x") \\
        .option("idempotence", "column:id").save()          # append is the default save mode

The reference — every option (generated from :data:`natsd.spark.options.OPTIONS`), the schema
``subject STRING, data BINARY, [headers ARRAY<STRUCT<key STRING, value BINARY>>], stream STRING,
seq BIGINT, timestamp TIMESTAMP``, offsets (start inclusive, end exclusive, as Kafka's) and the
guarantees (exactly-once replay on read; at-least-once writes, exactly-once with deterministic
``Nats-Msg-Id`` s within the stream's ``duplicate_window``) — is ``docs/spark.md``.
"""

from natsd.spark.datasource import JetStreamDataSource, source_schema
from natsd.spark.session import install_default_save_mode, register

# The name PySpark's static registration looks for in a ``pyspark_*`` module.
DefaultSource = JetStreamDataSource

# format("jetstream") appends when no save mode is given, as Kafka's sink (see natsd.spark.session).
install_default_save_mode()

__all__ = ["JetStreamDataSource", "DefaultSource", "source_schema", "register"]
