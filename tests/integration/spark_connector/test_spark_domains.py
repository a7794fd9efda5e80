"""Reading and writing across JetStream domains (options ``domain`` / ``apiPrefix``), and the
connection credentials beside ``tlsCa`` / ``creds``: a client certificate (``tlsCert``/``tlsKey``)
and a bare nkey seed (``nkey``).

Set-up for the domains: a hub (domain HUB) and an edge leaf (domain EDGE); the Spark job connects
to the **hub** only and reads and writes the edge's stream through the leafnode link, as nats-py's
``jetstream(domain="EDGE")`` does. The hub is nats-server or natsd; the edge is natsd.
"""

from __future__ import annotations

import time

import pytest

from tests.helpers.servers import free_port, reference_binary, start_server

from .conftest import js_call, publish, stream_info

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]  # a timeout inside py4j breaks the shared session


@pytest.fixture(scope="module", params=[pytest.param("reference", marks=pytest.mark.reference), "natsd"])
def hub_and_edge(request, tmp_path_factory):
    kind = request.param
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server binary not installed")
    d = tmp_path_factory.mktemp(f"domains-{kind}")
    lp = free_port()
    (d / "hub.conf").write_text(f'jetstream {{ store_dir: "{d}/hub-js", domain: HUB }}\nleafnodes {{ port: {lp} }}\n')
    (d / "edge.conf").write_text(
        f'jetstream {{ store_dir: "{d}/edge-js", domain: EDGE }}\n'
        f'leafnodes {{ reconnect: "200ms", remotes: [ {{ url: "nats-leaf://127.0.0.1:{lp}" }} ] }}\n'
    )
    hub = start_server(kind, d / "hub", config=str(d / "hub.conf"), jetstream=False)
    edge = start_server("natsd", d / "edge", config=str(d / "edge.conf"), jetstream=False)
    try:

        async def edge_stream(nc, js):
            await js.add_stream(name="SENSORS", subjects=["sensors.>"])

        js_call(edge.url, edge_stream)
        publish(edge.url, [(f"sensors.s{i % 3}", str(i).encode()) for i in range(200)])

        async def hub_sees_edge(nc, js):
            deadline = time.monotonic() + 20
            while True:  # the hub must see the edge's API across the link first
                try:
                    await nc.request("$JS.EDGE.API.INFO", b"", timeout=0.5)
                    return
                except Exception:
                    if time.monotonic() > deadline:
                        raise

        js_call(hub.url, hub_sees_edge)
        yield hub.url, edge.url
    finally:
        edge.stop()
        hub.stop()


def test_batch_read_of_an_edge_stream_from_the_hub(spark, hub_and_edge):
    hub, _ = hub_and_edge
    df = (
        spark.read.format("jetstream")
        .option("servers", hub)
        .option("domain", "EDGE")
        .option("stream", "SENSORS")
        .option("endingOffsets", "201")
        .option("minPartitions", "2")
        .load()
    )
    rows = df.select("seq", "subject", "data").collect()
    assert sorted(r.seq for r in rows) == list(range(1, 201))
    by_seq = {r.seq: r for r in rows}
    assert by_seq[5].subject == "sensors.s1" and bytes(by_seq[5].data) == b"4"
    # Without the domain the hub's own JetStream answers, and it has no such stream.
    with pytest.raises(Exception, match="SENSORS"):
        spark.read.format("jetstream").option("servers", hub).option("stream", "SENSORS").load().count()


def test_write_to_an_edge_stream_from_the_hub_with_ids(spark, hub_and_edge):
    hub, edge = hub_and_edge
    before = stream_info(edge, "SENSORS").state.last_seq
    rows = [(f"w{i}", f"id-{i}") for i in range(50)]
    df = spark.createDataFrame(rows, "data STRING, id STRING")
    for _ in range(2):  # the second run is deduplicated by the edge stream
        (
            df.write.format("jetstream")
            .option("servers", hub)
            .option("apiPrefix", "$JS.EDGE.API")  # the same as domain=EDGE, spelled out
            .option("subject", "sensors.w")
            .option("idempotence", "column:id")
            .save()
        )
    assert stream_info(edge, "SENSORS").state.last_seq == before + 50


def test_streaming_read_of_an_edge_stream_from_the_hub(spark, hub_and_edge, tmp_path):
    hub, _ = hub_and_edge
    q = (
        spark.readStream.format("jetstream")
        .option("servers", hub)
        .option("domain", "EDGE")
        .option("stream", "SENSORS")
        .option("startingOffsets", "earliest")
        .option("subjects", "sensors.s0")
        .load()
        .writeStream.format("memory")
        .queryName("edge_sensors")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    seqs = [r.seq for r in spark.sql("SELECT seq FROM edge_sensors").collect()]
    assert sorted(seqs) == [i + 1 for i in range(0, 200, 3)]


# ---------------------------------------------------------------------------- credentials
@pytest.fixture(scope="module", params=[pytest.param("reference", marks=pytest.mark.reference), "natsd"])
def secured_server(request, tmp_path_factory):
    """TLS with client certificates required, and one nkey user."""
    nkeys = pytest.importorskip("nkeys")
    from tests.helpers.certs import make_pki

    kind = request.param
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server binary not installed")
    d = tmp_path_factory.mktemp(f"secured-{kind}")
    pki = make_pki(d)
    import os

    kp = nkeys.from_seed(_USER_SEED)
    (d / "s.conf").write_text(
        f'jetstream {{ store_dir: "{d}/js" }}\n'
        f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", ca_file: "{pki.ca_file}", '
        "verify: true }\n"
        f'authorization {{ users: [ {{ nkey: "{kp.public_key.decode()}" }} ] }}\n'
    )
    srv = start_server(kind, d, config=str(d / "s.conf"), jetstream=False)
    assert os.path.exists(pki.client_cert)
    yield srv, pki
    srv.stop()


# A user nkey seed made for this test (nkeys.from_seed of a fixed, meaningless seed).
_USER_SEED = b"SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU"


def test_client_certificate_and_nkey_seed(secured_server, tmp_path):
    from natsd.spark.jsapi import stream_state
    from natsd.spark.options import connect_options
    from natsd.spark.planner import Planner
    from natsd.spark.reader import RangeSpec, read_range
    from natsd.spark.writer import Publisher
    from natsd.spark.wire import NatsError

    srv, pki = secured_server
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(_USER_SEED + b"\n")
    url = f"tls://127.0.0.1:{srv.port}"
    opts = {
        "servers": url,
        "tlsca": str(pki.ca_file),
        "tlscert": str(pki.client_cert),
        "tlskey": str(pki.client_key),
        "nkey": str(seed_file),
    }
    co = connect_options(opts)
    assert _USER_SEED.decode() not in repr(co)
    with Planner(co) as p:  # nats-py on the driver
        p.js_request("$JS.API.STREAM.CREATE.SEC", {"name": "SEC", "subjects": ["sec.>"]})
        assert stream_state(p, "SEC").messages == 0
    pub = Publisher(connect_options({**opts, "nkey": _USER_SEED.decode()}))  # the seed inline
    for i in range(20):
        pub.publish(f"sec.{i}", b"x%d" % i)
    assert pub.finish().published == 20
    batches = list(read_range(co, RangeSpec("SEC", 1, 20)))
    assert sum(b.num_rows for b in batches) == 20
    # Without the client certificate the TLS handshake is refused; without the seed, authorization.
    no_cert = connect_options({k: v for k, v in opts.items() if k not in ("tlscert", "tlskey")})
    with pytest.raises(NatsError):
        list(read_range(no_cert, RangeSpec("SEC", 1, 20)))
    no_seed = connect_options({k: v for k, v in opts.items() if k != "nkey"})
    with pytest.raises(NatsError) as ei:
        list(read_range(no_seed, RangeSpec("SEC", 1, 20)))
    assert "uthorization" in str(ei.value)
