"""A natsd edge mirrors a stream of its nats-server hub across a leafnode link (external mirror,
JetStream domains); a Spark batch read of the edge's mirror sees the hub's data."""

from __future__ import annotations

import time

import pytest

from tests.helpers.servers import free_port, reference_binary, start_server

from .conftest import js_call, publish, stream_info

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]  # a timeout inside py4j breaks the shared session


@pytest.fixture(scope="module")
def edge_mirror(tmp_path_factory):
    if reference_binary() is None:
        pytest.skip("reference nats-server binary not installed")
    d = tmp_path_factory.mktemp("leaf-spark")
    lp = free_port()
    (d / "hub.conf").write_text(f'jetstream {{ store_dir: "{d}/hub-js", domain: HUB }}\nleafnodes {{ port: {lp} }}\n')
    (d / "edge.conf").write_text(
        f'jetstream {{ store_dir: "{d}/edge-js", domain: EDGE }}\n'
        f'leafnodes {{ reconnect: "200ms", remotes: [ {{ url: "nats-leaf://127.0.0.1:{lp}" }} ] }}\n'
    )
    hub = start_server("reference", d / "hub", config=str(d / "hub.conf"), jetstream=False)
    edge = start_server("natsd", d / "edge", config=str(d / "edge.conf"), jetstream=False)
    try:

        async def hub_stream(nc, js):
            await js.add_stream(name="READINGS", subjects=["readings.>"])

        js_call(hub.url, hub_stream)
        publish(hub.url, [(f"readings.s{i % 4}", str(i).encode()) for i in range(300)])

        async def edge_mirror_stream(nc, js):
            from nats.js.api import ExternalStream, StreamSource

            deadline = time.monotonic() + 20
            while True:  # the edge must see the hub's API across the link first
                try:
                    await nc.request("$JS.HUB.API.INFO", b"", timeout=0.5)
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
            await js.add_stream(
                name="EDGE_READINGS", mirror=StreamSource(name="READINGS", external=ExternalStream(api="$JS.HUB.API"))
            )

        js_call(edge.url, edge_mirror_stream)
        deadline = time.monotonic() + 30
        while stream_info(edge.url, "EDGE_READINGS").state.messages < 300:
            assert time.monotonic() < deadline, "mirror did not catch up"
            time.sleep(0.2)
        yield edge.url
    finally:
        edge.stop()
        hub.stop()


def test_spark_reads_the_edge_mirror_of_a_hub_stream(spark, edge_mirror):
    df = (
        spark.read.format("jetstream")
        .option("servers", edge_mirror)
        .option("stream", "EDGE_READINGS")
        .option("minPartitions", "2")
        .load()
    )
    rows = df.select("seq", "subject", "data").collect()
    assert sorted(r.seq for r in rows) == list(range(1, 301))
    by_seq = {r.seq: r for r in rows}
    assert by_seq[1].subject == "readings.s0" and bytes(by_seq[1].data) == b"0"
    assert by_seq[300].subject == "readings.s3" and bytes(by_seq[300].data) == b"299"
