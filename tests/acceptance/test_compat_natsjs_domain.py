"""nats.js (``jetstream(nc, {domain})``) through the JetStream domain prefix (issue 25 item 1): the
scenario ``tests/compat/js/domain.mjs`` against nats-server and natsd, each with
``jetstream { domain: D }``, and from a nats-server hub against natsd as its leaf (domain EDGE)."""

from __future__ import annotations

import asyncio
import time

import nats
import pytest

from tests.acceptance.test_compat_natsjs import JS_DIR, ensure_natsjs
from tests.compat.harness import ScenarioRunner
from tests.helpers.servers import free_port, reference_binary, start_server

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.reference,
    pytest.mark.timeout(240),
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]


@pytest.fixture(scope="module")
def natsjs(tmp_path_factory) -> ScenarioRunner:
    node = ensure_natsjs()
    return ScenarioRunner(
        command=lambda name: ([node, f"{name}.mjs"], JS_DIR), workdir=tmp_path_factory.mktemp("natsjs-domain")
    )


def _observed(res: dict) -> dict:
    assert res.get("ok"), res
    return {k: res[k] for k in ("accountDomain", "acks", "fetched", "next", "consumer", "direct")}


def test_natsjs_with_a_domain_as_on_nats_server(natsjs, tmp_path):
    results = {}
    for kind in ("reference", "natsd"):
        conf = tmp_path / f"{kind}.conf"
        conf.write_text(f'jetstream {{ store_dir: "{tmp_path / kind}-js", domain: D }}\n')
        srv = start_server(kind, tmp_path / kind, config=conf, jetstream=False)
        try:
            results[kind] = _observed(natsjs.run_against(srv, "domain", "D"))
        finally:
            srv.stop()
    assert results["reference"]["next"] == {"subject": "dom.2", "data": "m2"}
    assert results["natsd"] == results["reference"]


def test_natsjs_from_a_hub_reaches_a_natsd_leaf_by_domain(natsjs, tmp_path):
    lp = free_port()
    hub_conf = tmp_path / "hub.conf"
    hub_conf.write_text(
        f'server_name: HUB\njetstream {{ store_dir: "{tmp_path}/hub-js", domain: HUB }}\nleafnodes {{ port: {lp} }}\n'
    )
    hub = start_server("reference", tmp_path / "hub", config=hub_conf, jetstream=False)
    try:
        leaf_conf = tmp_path / "leaf.conf"
        leaf_conf.write_text(
            f'server_name: EDGE\njetstream {{ store_dir: "{tmp_path}/edge-js", domain: EDGE }}\n'
            f'leafnodes {{ remotes [ {{ url: "nats-leaf://127.0.0.1:{lp}" }} ] }}\n'
        )
        edge = start_server("natsd", tmp_path / "edge", config=leaf_conf, jetstream=False)
        try:
            asyncio.run(_wait_for_domain(hub.url, "EDGE"))
            res = _observed(natsjs.run_against(hub, "domain", "EDGE"))
        finally:
            edge.stop()
    finally:
        hub.stop()
    assert res["accountDomain"] == "EDGE"
    assert [a["domain"] for a in res["acks"]] == ["EDGE"] * 3
    assert [m["data"] for m in res["fetched"]] == ["m0", "m1"] and res["next"] == {"subject": "dom.2", "data": "m2"}
    assert res["consumer"] == {"ack_floor": 3, "num_pending": 0}
    assert res["direct"] == {"subject": "dom.1", "data": "m1", "seq": 2}


async def _wait_for_domain(url: str, domain: str, timeout: float = 20.0) -> None:
    """Until the leaf's $JS.<domain>.API interest has reached the hub."""
    nc = await nats.connect(url)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                await nc.request(f"$JS.{domain}.API.INFO", b"", timeout=1)
                return
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
    finally:
        await nc.close()
