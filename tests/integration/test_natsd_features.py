"""natsd's own features (issue 27) from clients that know nothing of natsd: nats-py and natsctl's
plain flags write ``metadata``; a natsd backup restored into nats-server keeps its data there,
with the features simply off."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    KeyValueConfig,
    RetentionPolicy,
    StreamConfig,
)
from nats.js.errors import APIError

from tests.helpers.cli import ok, run_cli, start_kind

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ORDER = {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}


@pytest.fixture(scope="module")
def natsd(tmp_path_factory):
    srv = start_kind("natsd", tmp_path_factory.mktemp("features-natsd"))
    yield srv
    srv.stop()


def test_natsctl_flags_write_the_metadata(natsd) -> None:
    u = natsd.url
    run_cli(u, "stream", "rm", "ORD", "-f")
    ok(
        u,
        "stream",
        "add",
        "ORD",
        "--subjects",
        "orders.*",
        "--defaults",
        "--max-age",
        "1h",
        "--keep-last-under-max-age",
        "--schema",
        "orders.*=" + json.dumps(ORDER),
        "--metadata",
        "owner=team-a",
    )
    md = ok(u, "stream", "info", "ORD", "-j").json()["config"]["metadata"]
    assert md["natsd.keep_last_under_max_age"] == "true" and md["owner"] == "team-a"
    assert json.loads(md["natsd.schema.orders.*"]) == ORDER
    r = run_cli(u, "pub", "orders.new", "not json", "--jetstream")
    assert r.rc != 0 and "does not match schema inline:orders.*: payload is not JSON" in r.err, r
    ok(u, "pub", "orders.new", '{"id": "a"}', "--jetstream")
    # A bad setting is the server's 19001 error, shown by natsctl.
    r = run_cli(u, "stream", "edit", "ORD", "-f", "--schema", 'orders.*={"type": 3}')
    assert r.rc != 0 and "natsd metadata natsd.schema.orders.*: invalid JSON Schema" in r.err, r
    ok(u, "stream", "edit", "ORD", "-f", "--no-keep-last-under-max-age", "--schema", "orders.*=")
    md = ok(u, "stream", "info", "ORD", "-j").json()["config"]["metadata"]
    assert "natsd.keep_last_under_max_age" not in md and "natsd.schema.orders.*" not in md
    ok(
        u,
        "consumer",
        "add",
        "ORD",
        "C",
        "--pull",
        "--ack",
        "explicit",
        "--deliver",
        "all",
        "--defaults",
        "--max-deliver",
        "3",
        "--dead-letter",
        "dlq.orders",
    )
    cmd = ok(u, "consumer", "info", "ORD", "C", "-j").json()["config"]["metadata"]
    assert cmd["natsd.dead_letter"] == "dlq.orders"
    r = run_cli(u, "consumer", "add", "ORD", "D", "--pull", "--ack", "explicit", "--defaults", "--dead-letter", "dlq.*")
    assert r.rc != 0 and "is not a literal subject" in r.err, r
    ok(
        u,
        "consumer",
        "add",
        "ORD",
        "K",
        "--pull",
        "--ack",
        "explicit",
        "--deliver",
        "all",
        "--defaults",
        "--filter",
        "orders.*",
        "--partition-key",
        "{{wildcard(1)}}",
    )
    kmd = ok(u, "consumer", "info", "ORD", "K", "-j").json()["config"]["metadata"]
    assert kmd["natsd.partition_key"] == "{{wildcard(1)}}"
    r = run_cli(
        u,
        "consumer",
        "add",
        "ORD",
        "L",
        "--pull",
        "--ack",
        "explicit",
        "--defaults",
        "--filter",
        "orders.new",
        "--partition-key",
        "{{wildcard(1)}}",
    )
    assert r.rc != 0 and "has no wildcard 1" in r.err, r


async def _nats_py_scenario(url: str) -> dict:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: dict = {}
    for s in ("WQ", "DLQ", "ORD", "KV_cfg"):
        try:
            await js.delete_stream(s)
        except Exception:
            pass
    # dead letters: a terminated message (with the client's reason) and one past max_deliver
    await js.add_stream(StreamConfig(name="WQ", subjects=["wq.>"], retention=RetentionPolicy.WORK_QUEUE))
    await js.add_stream(StreamConfig(name="DLQ", subjects=["dlq.>"]))
    await js.add_consumer(
        "WQ",
        ConsumerConfig(
            durable_name="W",
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=0.3,
            max_deliver=2,
            metadata={"natsd.dead_letter": "dlq.wq"},
        ),
    )
    await js.publish("wq.a", b"A", headers={"X-Id": "a"})
    await js.publish("wq.b", b"B", headers={"X-Id": "b"})
    sub = await js.pull_subscribe_bind("W", stream="WQ")
    first = await sub.fetch(2, timeout=2)
    await nc.publish(first[0].reply, b"+TERM cannot parse")  # msg.term() with a reason, on the wire
    await asyncio.sleep(0.5)
    again = await sub.fetch(1, timeout=2)  # the second delivery of wq.b, not acked either
    out["redelivered"] = again[0].metadata.num_delivered
    await asyncio.sleep(0.8)
    dsub = await js.pull_subscribe("dlq.wq", durable=None, stream="DLQ")
    dl = await dsub.fetch(2, timeout=3)
    out["dlq"] = sorted(
        (
            m.headers["X-Id"],
            m.headers["Natsd-Dlq-Reason"],
            m.headers.get("Natsd-Dlq-Term-Reason"),
            m.headers["Natsd-Dlq-Deliveries"],
            m.headers["Nats-Stream"],
            m.headers["Nats-Consumer"],
        )
        for m in dl
    )
    out["wq_left"] = (await js.stream_info("WQ")).state.messages
    # schemas
    await js.add_stream(
        StreamConfig(name="ORD", subjects=["orders.>"], metadata={"natsd.schema.orders.*": json.dumps(ORDER)})
    )
    out["good"] = (await js.publish("orders.new", b'{"id": "x"}')).seq
    try:
        await js.publish("orders.new", b'{"id": 5}')
        out["bad"] = None
    except APIError as e:
        out["bad"] = (e.err_code, e.description)
    # keep the last value of each key under max_age (KV with a ttl)
    kv = await js.create_key_value(KeyValueConfig(bucket="cfg", ttl=0.5, history=2))
    si = await js.stream_info("KV_cfg")
    si.config.metadata = {**(si.config.metadata or {}), "natsd.keep_last_under_max_age": "true"}
    await js.update_stream(si.config)
    await kv.put("a", b"1")
    await kv.put("a", b"2")
    await kv.put("b", b"x")
    await asyncio.sleep(1.2)
    out["kv"] = ((await kv.get("a")).value, (await kv.get("b")).value, (await js.stream_info("KV_cfg")).state.messages)
    await nc.close()
    return out


def test_nats_py_uses_the_features_unchanged(natsd) -> None:
    out = asyncio.run(_nats_py_scenario(natsd.url))
    assert out["redelivered"] == 2
    assert out["dlq"] == [
        ("a", "Terminated", "cannot parse", "1", "WQ", "W"),
        ("b", "MaxDeliveries", None, "2", "WQ", "W"),
    ]
    assert out["wq_left"] == 0
    assert out["good"] == 1
    code, desc = out["bad"]
    assert code == 19010 and desc.startswith("message on orders.new does not match schema inline:orders.*: ")
    assert out["kv"] == (b"2", b"x", 2)


@pytest.mark.reference
def test_backup_restored_into_nats_server_keeps_data_features_off(natsd, tmp_path) -> None:
    ref = start_kind("reference", tmp_path / "ref")
    try:
        u = natsd.url
        run_cli(u, "stream", "rm", "FEAT", "-f")
        ok(
            u,
            "stream",
            "add",
            "FEAT",
            "--subjects",
            "feat.*",
            "--defaults",
            "--max-age",
            "1h",
            "--keep-last-under-max-age",
            "--schema",
            "feat.*=" + json.dumps(ORDER),
        )
        ok(u, "pub", "feat.x", '{"id": "{{Count}}"}', "--count", "20", "--wait", "-q")
        ok(
            u,
            "consumer",
            "add",
            "FEAT",
            "C",
            "--pull",
            "--ack",
            "explicit",
            "--deliver",
            "all",
            "--defaults",
            "--dead-letter",
            "dlq.feat",
        )
        d = tmp_path / "backup"
        ok(u, "stream", "backup", "FEAT", str(d), "--no-progress")
        ok(ref.url, "stream", "restore", str(d), "--no-progress")
        info = ok(ref.url, "stream", "info", "FEAT", "-j").json()
        assert info["state"]["messages"] == 20
        md = info["config"]["metadata"]
        assert md["natsd.keep_last_under_max_age"] == "true" and "natsd.schema.feat.*" in md  # kept, unused
        for seq in (1, 20):
            a = ok(u, "stream", "get", "FEAT", str(seq), "-j").json()
            b = ok(ref.url, "stream", "get", "FEAT", str(seq), "-j").json()
            assert (a["subject"], a["data"], a["time"]) == (b["subject"], b["data"], b["time"])
        cmd = ok(ref.url, "consumer", "info", "FEAT", "C", "-j").json()["config"]["metadata"]
        assert cmd["natsd.dead_letter"] == "dlq.feat"
        ok(ref.url, "pub", "feat.x", "not json at all")  # the schema is off on nats-server
        assert ok(ref.url, "stream", "info", "FEAT", "-j").json()["state"]["messages"] == 21
    finally:
        ref.stop()
