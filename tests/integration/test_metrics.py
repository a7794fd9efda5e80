"""``/metrics``: the Prometheus text format under prometheus-nats-exporter's metric names and labels."""

from __future__ import annotations

import asyncio

import nats
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.inproc import running_server


async def fetch(port: int, *paths: str) -> list[tuple[int, dict[str, str], bytes]]:
    """GET each path on one keep-alive connection, all requests written at once (pipelined)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"".join(f"GET {p} HTTP/1.1\r\nHost: x\r\n\r\n".encode() for p in paths))
        await writer.drain()
        out = []
        for _ in paths:
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            lines = head.split("\r\n")
            headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
            body = await reader.readexactly(int(headers["content-length"]))
            out.append((int(lines[0].split()[1]), headers, body))
        return out
    finally:
        writer.close()
        await writer.wait_closed()


def samples(text: str) -> dict[str, list]:
    by_name: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            by_name.setdefault(s.name, []).append(s)
    return by_name


async def test_metrics_names_labels_and_values():
    async with running_server(http_port=-1, jetstream=True, server_name="n1") as server:
        nc = await nats.connect(server.client_url)
        try:
            js = nc.jetstream()
            await js.add_stream(name="ORDERS", subjects=["orders.*"], max_msgs=1000)
            for i in range(5):
                await js.publish(f"orders.{i % 2}", b"x" * 10)
            await js.add_consumer("ORDERS", durable_name="NEW", ack_policy="explicit", description="new orders")
            psub = await js.pull_subscribe_bind("NEW", stream="ORDERS")
            msgs = await psub.fetch(2, timeout=2)
            await msgs[0].ack_sync()
            (status, headers, body), (hstatus, _, hbody) = await fetch(server.http_port, "/metrics", "/healthz")
        finally:
            await nc.close()
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    assert hstatus == 200 and b'"ok"' in hbody  # a pipelined request after /metrics is answered, in order
    m = samples(body.decode())
    sid = server.server_id

    def one(name: str, **labels: str) -> float:
        found = [s for s in m[name] if all(s.labels.get(k) == v for k, v in labels.items())]
        assert len(found) == 1, (name, labels, m.get(name))
        return found[0].value

    # /varz, flattened as the exporter does, labelled by server_id
    assert one("gnatsd_varz_connections", server_id=sid) >= 1
    assert one("gnatsd_varz_in_msgs", server_id=sid) >= 5
    assert one("gnatsd_varz_max_payload", server_id=sid) == 1024 * 1024
    assert one("gnatsd_varz_jetstream_stats_api_total", server_id=sid) >= 1
    assert one("gnatsd_varz_server_name", server_id=sid, value="n1") == 1
    assert one("gnatsd_varz_start", server_id=sid) > 1.7e9  # a time: Unix seconds
    # /connz totals
    assert one("gnatsd_connz_num_connections", server_id=sid) >= 1
    assert one("gnatsd_connz_in_msgs", server_id=sid) >= 5
    # JetStream: server, account, stream and consumer with the exporter's labels
    srv = dict(server_id=sid, server_name="n1", is_meta_leader="true")
    assert one("jetstream_server_total_streams", **srv) == 1
    assert one("jetstream_server_total_consumers", **srv) == 1
    assert one("jetstream_server_total_messages", **srv) == 5
    assert one("jetstream_server_jetstream_disabled", **srv) == 0
    assert one("jetstream_account_storage_used", account="$G", account_name="$G") > 0
    st = dict(account="$G", stream_name="ORDERS", stream_leader="n1", is_stream_leader="true")
    assert one("jetstream_stream_total_messages", **st) == 5
    assert one("jetstream_stream_last_seq", **st) == 5
    assert one("jetstream_stream_subject_count", **st) == 2
    assert one("jetstream_stream_limit_messages", **st) == 1000
    assert one("jetstream_stream_limit_bytes", **st) == -1
    co = dict(st, consumer_name="NEW", consumer_desc="new orders", is_consumer_leader="true")
    assert one("jetstream_consumer_num_pending", **co) == 3
    assert one("jetstream_consumer_num_ack_pending", **co) == 1
    assert one("jetstream_consumer_delivered_stream_seq", **co) == 2
    assert one("jetstream_consumer_ack_floor_stream_seq", **co) == 1
    assert 0 <= one("jetstream_consumer_last_delivery_seconds", **co) < 60
    assert set(m["jetstream_consumer_num_pending"][0].labels) == {
        "server_id",
        "server_name",
        "cluster",
        "domain",
        "meta_leader",
        "is_meta_leader",
        "account",
        "account_name",
        "account_id",
        "stream_name",
        "stream_leader",
        "is_stream_leader",
        "stream_raft_group",
        "consumer_name",
        "consumer_leader",
        "is_consumer_leader",
        "consumer_desc",
    }


async def test_metrics_without_jetstream_and_scrape_keeps_serving_clients():
    async with running_server(http_port=-1) as server:
        nc = await nats.connect(server.client_url)
        try:
            ((status, _, body),) = await fetch(server.http_port, "/metrics")
            m = samples(body.decode())
            assert m["jetstream_server_jetstream_disabled"][0].value == 1
            assert "jetstream_stream_total_messages" not in m
            # clients are served while scrapes run back to back
            scrapes = asyncio.ensure_future(fetch(server.http_port, *["/metrics"] * 5))
            for _ in range(20):
                await nc.flush(timeout=2)
            assert all(s == 200 for s, _, _ in await scrapes)
        finally:
            await nc.close()
    assert status == 200


#: The series the community Grafana dashboards query, with the labels their queries, variables and legends use
#: (read from prometheus-nats-exporter's walkthrough/grafana-nats-dash.json and grafana-jetstream-dash.json:
#: ``sum(jetstream_consumer_num_pending{server_id=~"$server",stream_name=~"$stream",consumer_name=~"$consumer"})
#: by (consumer_name)``, ``label_values(jetstream_server_total_streams, server_id)``, ``{{server_id}}`` ...).
GRAFANA_NATS = {
    f"gnatsd_varz_{n}": ("server_id",)
    for n in (
        "connections",
        "cpu",
        "mem",
        "in_msgs",
        "out_msgs",
        "in_bytes",
        "out_bytes",
        "slow_consumers",
        "subscriptions",
    )
}
GRAFANA_JETSTREAM = {
    **{
        f"gnatsd_varz_{n}": ("server_id",)
        for n in (
            "connections",
            "jetstream_config_max_memory",
            "jetstream_config_max_storage",
            "jetstream_stats_memory",
            "jetstream_stats_storage",
        )
    },
    "jetstream_server_total_streams": ("server_id",),
    "jetstream_server_total_consumers": ("server_id",),
    **{f"jetstream_stream_{n}": ("server_id", "stream_name") for n in ("last_seq", "total_bytes", "total_messages")},
    **{
        f"jetstream_consumer_{n}": ("server_id", "stream_name", "consumer_name")
        for n in ("delivered_consumer_seq", "num_ack_pending", "num_pending")
    },
}


async def test_the_names_the_community_grafana_dashboards_query():
    async with running_server(http_port=-1, jetstream=True, server_name="g1") as server:
        nc = await nats.connect(server.client_url)
        try:
            js = nc.jetstream()
            await js.add_stream(name="G", subjects=["g.>"])
            for _ in range(3):
                await js.publish("g.x", b"payload")
            await js.add_consumer("G", durable_name="GC", ack_policy="explicit")
            psub = await js.pull_subscribe_bind("GC", stream="G")
            await psub.fetch(1, timeout=2)
            ((status, _, body),) = await fetch(server.http_port, "/metrics")
        finally:
            await nc.close()
    assert status == 200
    m = samples(body.decode())
    wanted = {"stream_name": "G", "consumer_name": "GC", "server_id": server.server_id}
    missing = []
    for name, labels in {**GRAFANA_NATS, **GRAFANA_JETSTREAM}.items():
        if not any(all(s.labels.get(k) == wanted[k] for k in labels) for s in m.get(name, [])):
            missing.append(name)
    assert missing == []
    # the values the JetStream dashboard plots for this stream and consumer
    by = {
        name: next(s.value for s in m[name] if s.labels.get("stream_name") == "G")
        for name in (
            "jetstream_stream_total_messages",
            "jetstream_stream_last_seq",
            "jetstream_consumer_num_pending",
            "jetstream_consumer_num_ack_pending",
            "jetstream_consumer_delivered_consumer_seq",
        )
    }
    assert by == {
        "jetstream_stream_total_messages": 3,
        "jetstream_stream_last_seq": 3,
        "jetstream_consumer_num_pending": 2,
        "jetstream_consumer_num_ack_pending": 1,
        "jetstream_consumer_delivered_consumer_seq": 1,
    }
    assert m["gnatsd_varz_jetstream_config_max_storage"][0].value > 0
    assert m["gnatsd_varz_mem"][0].value > 0
