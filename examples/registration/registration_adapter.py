"""The registration adapter (Choria's JetStream adapter) as a Spark streaming job.

Raw registration messages land in an ingest stream (default ``REGISTRATION_INGEST``, subjects
``<ingest>.>``, e.g. ``choria.discovery.web1.ldn.example.net`` where the tokens after the ingest
prefix name the sender, or a ``Sender`` header does). Each one is re-published, untouched, inside
the JSON envelope::

    {"protocol": "choria:adapters:jetstream:output:1",
     "data": "...the data received exactly as it was received...",
     "sender": "web1.ldn.example.net",
     "time": "2018-03-03T14:49:17Z"}

to ``<prefix>.node_metadata.<sender>`` (default prefix ``choria``), stored by the
``CHORIA_REGISTRATION`` stream. The envelope's ``time`` is when the raw message was stored.
Each output carries ``Nats-Msg-Id`` = ``reg-<ingest stream>-<sequence>``, so restarts and replays
never publish a registration twice.

Run::

    python examples/registration/registration_adapter.py --servers nats://127.0.0.1:4222 setup
    (an existing stream is left alone; if it differs, setup says how and changes it only with --force)
    python examples/registration/registration_adapter.py --servers ... --checkpoint /tmp/reg-ckpt run
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

PROTOCOL = "choria:adapters:jetstream:output:1"


class SetupRefused(Exception):
    """An existing stream differs from what the adapter needs; nothing was changed (see ``--force``)."""


def _wanted(ingest_stream: str, ingest_subject: str, prefix: str) -> list[dict]:
    """The fields the adapter needs on each stream; an existing stream keeps every other setting."""
    return [
        {"name": ingest_stream, "subjects": [f"{ingest_subject}.>"]},
        {"name": "CHORIA_REGISTRATION", "subjects": [f"{prefix}.node_metadata.>"],
         "duplicate_window": 3600 * 10**9, "max_age": 7 * 24 * 3600 * 10**9},
    ]


async def _setup(servers: str, ingest_stream: str, ingest_subject: str, prefix: str, force: bool) -> list[str]:
    import json

    import nats

    nc = await nats.connect(servers.split(","))
    said: list[str] = []
    try:
        for want in _wanted(ingest_stream, ingest_subject, prefix):
            name = want["name"]
            reply = json.loads((await nc.request(f"$JS.API.STREAM.INFO.{name}", b"", timeout=5)).data)
            err = reply.get("error")
            if err and err.get("err_code") == 10059:  # stream not found: create it with what it needs
                created = json.loads((await nc.request(f"$JS.API.STREAM.CREATE.{name}",
                                                       json.dumps(want).encode(), timeout=5)).data)
                if "error" in created:
                    raise SetupRefused(f"stream {name}: {created['error'].get('description')}")
                said.append(f"stream {name}: created")
                continue
            if err:
                raise SetupRefused(f"stream {name}: {err.get('description')}")
            have = reply["config"]
            changes = [f"{k}: {have.get(k)!r} -> {v!r}" for k, v in want.items() if have.get(k) != v]
            if not changes:
                said.append(f"stream {name}: exists, left unchanged")
                continue
            if not force:
                raise SetupRefused(f"stream {name} exists with other settings; setup would change "
                                   + "; ".join(changes) + " (re-run with --force to apply, other settings are kept)")
            # Only the fields the adapter needs change; everything else (max_msgs_per_subject, ...) is kept.
            updated = json.loads((await nc.request(f"$JS.API.STREAM.UPDATE.{name}",
                                                   json.dumps({**have, **want}).encode(), timeout=5)).data)
            if "error" in updated:
                raise SetupRefused(f"stream {name}: {updated['error'].get('description')}")
            said.append(f"stream {name}: changed " + "; ".join(changes))
    finally:
        await nc.close()
    return said


def setup(servers: str, ingest_stream: str = "REGISTRATION_INGEST", ingest_subject: str = "choria.discovery",
          prefix: str = "choria", force: bool = False) -> list[str]:
    """Create the ingest stream and the ``CHORIA_REGISTRATION`` output stream (1 week, 1 h dedupe).

    An existing stream is left alone when it already has what the adapter needs; when it differs,
    nothing is changed and :class:`SetupRefused` names the differences, unless ``force``: then only
    those fields are changed (its other settings are kept). Returns what was done, one line a stream.
    """
    return asyncio.run(_setup(servers, ingest_stream, ingest_subject, prefix, force))


def envelope_frame(df, ingest_subject: str, prefix: str):
    """Raw registration rows (with headers) -> (subject, data, msg_id) rows in the envelope."""
    from pyspark.sql import functions as F

    header_sender = F.filter("headers", lambda h: h["key"] == "Sender")
    subject_sender = F.expr(f"substring(subject, {len(ingest_subject) + 2})")
    # Header values are BINARY, as Kafka's are.
    sender = F.coalesce(F.try_element_at(header_sender, F.lit(1))["value"].cast("string"), subject_sender)
    envelope = F.to_json(
        F.struct(
            F.lit(PROTOCOL).alias("protocol"),
            F.col("data").cast("string").alias("data"),
            sender.alias("sender"),
            F.date_format("timestamp", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("time"),
        )
    )
    return df.where(sender != "").select(
        F.concat(F.lit(f"{prefix}.node_metadata."), sender).alias("subject"),
        envelope.cast("binary").alias("data"),
        F.concat(F.lit("reg-"), F.col("stream"), F.lit("-"), F.col("seq").cast("string")).alias("msg_id"),
    )


def run(spark, servers: str, checkpoint: str, ingest_stream: str = "REGISTRATION_INGEST",
        ingest_subject: str = "choria.discovery", prefix: str = "choria", continuous: bool = False):
    """Start the adapter; with ``continuous=False`` it drains the backlog (AvailableNow) and returns."""
    raw = (
        spark.readStream.format("jetstream").option("servers", servers).option("stream", ingest_stream)
        .option("startingOffsets", "earliest").option("includeHeaders", "true").load()
    )
    w = (
        envelope_frame(raw, ingest_subject, prefix).writeStream.format("jetstream").option("servers", servers)
        .option("idempotence", "column:msg_id").option("checkpointLocation", checkpoint)
        .queryName("registration-adapter")
    )
    q = (w.trigger(processingTime="5 seconds") if continuous else w.trigger(availableNow=True)).start()
    if not continuous:
        q.awaitTermination()
        if q.exception():
            raise q.exception()
    return q


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Wrap raw registration messages in the JetStream adapter envelope")
    ap.add_argument("--servers", default="nats://127.0.0.1:4222")
    ap.add_argument("--checkpoint", default="/tmp/registration-checkpoint")
    ap.add_argument("--ingest-stream", default="REGISTRATION_INGEST")
    ap.add_argument("--ingest-subject", default="choria.discovery")
    ap.add_argument("--prefix", default="choria")
    ap.add_argument("--master", default=None)
    ap.add_argument("--continuous", action="store_true")
    ap.add_argument("--force", action="store_true",
                    help="setup: change an existing stream's subjects, duplicate window or max age to the adapter's")
    ap.add_argument("step", choices=["setup", "run"])
    a = ap.parse_args(argv)
    if a.step == "setup":
        try:
            for line in setup(a.servers, a.ingest_stream, a.ingest_subject, a.prefix, force=a.force):
                print(line)
        except SetupRefused as exc:
            print(f"registration_adapter: {exc}", file=sys.stderr)
            return 1
        return 0
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from natsd.spark import register

    b = SparkSession.builder.appName("registration-adapter")
    spark = (b.master(a.master) if a.master else b).getOrCreate()
    register(spark)  # checks the workers' Python, makes append the default save mode
    q = run(spark, a.servers, a.checkpoint, a.ingest_stream, a.ingest_subject, a.prefix, a.continuous)
    if a.continuous:
        q.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
