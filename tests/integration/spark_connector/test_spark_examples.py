"""The examples end to end (ORDERS workflow, registration adapter, archive + analytics)."""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from .conftest import js_call, make_stream, publish

# Each test runs several streaming and batch queries (~1 min on an idle 2-core machine): a timeout
# that strikes inside a py4j call breaks the shared session for every later test, so allow for load.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(420)]

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
for sub in ("orders", "registration", "archive"):
    if str(EXAMPLES / sub) not in sys.path:
        sys.path.insert(0, str(EXAMPLES / sub))


def _read_stream(spark, url, stream):
    return spark.read.format("jetstream").option("servers", url).option("stream", stream).load()


def test_orders_workflow(spark, js_server, tmp_path):
    import orders_pipeline as op

    url = js_server.url
    op.setup(url, 40)
    op.setup(url, 40)  # re-running setup is idempotent (client-side Nats-Msg-Id)
    op.run_step(spark, url, str(tmp_path), "process")
    op.run_step(spark, url, str(tmp_path), "dispatch")
    assert op.monitor(spark, url) == {"received": 40, "processed": 40, "completed": 40}

    # New orders arrive; the process step resumes from its checkpoint and handles only those.
    op.setup(url, 55)
    op.run_step(spark, url, str(tmp_path), "process")
    assert op.monitor(spark, url) == {"received": 55, "processed": 55, "completed": 40}
    op.run_step(spark, url, str(tmp_path), "dispatch")

    assert op.monitor(spark, url) == {"received": 55, "processed": 55, "completed": 55}
    done = [
        json.loads(bytes(r.data))
        for r in _read_stream(spark, url, "ORDERS").where("subject = 'ORDERS.completed'").collect()
    ]
    assert sorted(d["id"] for d in done) == [f"o-{i:05d}" for i in range(1, 56)]
    first = next(d for d in done if d["id"] == "o-00001")
    assert first == {"id": "o-00001", "customer": "c-1", "total": 5.0, "state": "completed"}


def test_registration_adapter(spark, js_server, tmp_path):
    import registration_adapter as ra

    url = js_server.url
    ra.setup(url)

    async def send(nc, js):
        await js.publish("choria.discovery.web1.ldn.example.net", b'{"facts":{"os":"linux"}}')
        await js.publish(
            "choria.discovery.anything", b"raw bytes as received", headers={"Sender": "db2.nyc.example.net"}
        )
        await js.publish("choria.discovery.web1.ldn.example.net", b'{"facts":{"os":"bsd"}}')

    js_call(url, send)
    ra.run(spark, url, str(tmp_path / "ckpt"))
    ra.run(spark, url, str(tmp_path / "ckpt"))  # a restart publishes nothing again
    out = _read_stream(spark, url, "CHORIA_REGISTRATION").orderBy("seq").collect()
    assert [r.subject for r in out] == [
        "choria.node_metadata.web1.ldn.example.net",
        "choria.node_metadata.db2.nyc.example.net",
        "choria.node_metadata.web1.ldn.example.net",
    ]
    env = [json.loads(bytes(r.data)) for r in out]
    assert [set(e) for e in env] == [{"protocol", "data", "sender", "time"}] * 3
    assert env[0]["protocol"] == "choria:adapters:jetstream:output:1"
    assert env[0]["data"] == '{"facts":{"os":"linux"}}' and env[1]["data"] == "raw bytes as received"
    assert env[1]["sender"] == "db2.nyc.example.net"
    assert datetime.strptime(env[2]["time"], "%Y-%m-%dT%H:%M:%SZ")

    # A replayed run from scratch (new checkpoint) is absorbed by the duplicate window.
    ra.run(spark, url, str(tmp_path / "ckpt2"))
    assert _read_stream(spark, url, "CHORIA_REGISTRATION").count() == 3


def test_archive_by_time_range_and_report(spark, js_server, tmp_path):
    import archive_to_parquet as ar

    url = js_server.url
    make_stream(url, "METRICS", ["metrics.>"])
    publish(url, [("metrics.cpu", b"old")] * 10)
    time.sleep(0.05)
    since = datetime.now(timezone.utc).isoformat()
    publish(url, [("metrics.cpu", b"12345")] * 30 + [("metrics.mem", b"123")] * 20)
    time.sleep(0.05)
    until = datetime.now(timezone.utc).isoformat()
    publish(url, [("metrics.cpu", b"late")] * 5)

    out = str(tmp_path / "archive")
    assert ar.archive(spark, url, "METRICS", out, since, until, partitions=3) == 50
    ar.archive(spark, url, "METRICS", out, since, until, partitions=3)  # archiving again is harmless
    rows = ar.report(spark, out)
    got = {r.subject: (r.messages, r.bytes, r.first_seq, r.last_seq) for r in rows}
    assert got == {"metrics.cpu": (30, 150, 11, 40), "metrics.mem": (20, 60, 41, 60)}
