"""natsd.spark: a pure-Python PySpark (>= 4.0) data source for JetStream streams.

Works against any JetStream server (natsd or nats-server); it is a client only.

Usage::

    from natsd.spark import JetStreamDataSource
    spark.dataSource.register(JetStreamDataSource)      # optional: auto-registered when installed
    df = (spark.read.format("jetstream")
          .option("servers", "nats://host:4222").option("stream", "ORDERS")
          .option("startingOffsets", "earliest").option("minPartitions", 4).load())
    df.write.format("jetstream").option("servers", "...").option("subject", "out.x") \\
        .option("idempotence", "column:id").mode("append").save()

Read options (Kafka connector names where the meaning is the same): ``servers``, ``user``,
``password``, ``token``, ``creds``, ``stream`` | ``streamPattern`` (full-match regex over stream
names), ``subjects`` (comma list, NATS wildcards), ``startingOffsets`` / ``endingOffsets``
(``earliest`` | ``latest`` | first/last sequence inclusive | ``{"STREAM": {"seq": N}}``),
``startingTimestamp`` / ``endingTimestamp`` (epoch ms or ISO 8601; the end is exclusive),
``maxMessagesPerTrigger``, ``minPartitions``, ``includeHeaders``, ``failOnDataLoss``,
``fetchTimeout`` (s), ``batchRows``.

Write options: ``servers`` and credentials, ``subject`` (or a ``subject`` column), columns
``data`` (required), optional ``headers``; ``idempotence`` = ``none`` | ``positional`` |
``column:<name>``, ``msgIdPrefix``, ``maxInFlight`` (PubAck window), ``minDuplicateWindow`` (s,
below which a warning is logged).

Schema: ``subject STRING, data BINARY, [headers ARRAY<STRUCT<key STRING, value STRING>>],
stream STRING, seq BIGINT, timestamp TIMESTAMP``.

Guarantees: reads are exactly-once replays (offsets are stream sequences in Spark's
checkpoint; no durable consumer, no acks). Writes are at-least-once, and exactly-once within the
target stream's ``duplicate_window`` when ``idempotence`` gives each row a deterministic
``Nats-Msg-Id``.
"""

from natsd.spark.datasource import JetStreamDataSource, source_schema
from natsd.spark.session import install_default_save_mode, register

# The name PySpark's static registration looks for in a ``pyspark_*`` module.
DefaultSource = JetStreamDataSource

# format("jetstream") appends when no save mode is given, as Kafka's sink (see natsd.spark.session).
install_default_save_mode()

__all__ = ["JetStreamDataSource", "DefaultSource", "source_schema", "register"]
