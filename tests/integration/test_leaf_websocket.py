"""natsd soliciting a leafnode link over WebSocket (``ws://``/``wss://`` remotes) to a nats-server
hub's ``websocket {}`` port (natsd.server.transport.wsclient), with and without S2 compression (which
nats-server puts under the frames) and with permessage-deflate (then no S2)."""

from __future__ import annotations

import json
import urllib.request

import nats
import pytest

from natsd.config.leafnodes import LeafNodeOptions, RemoteLeafOptions
from natsd.config.options import ServerOptions
from natsd.config.tls import TLSOptions
from tests.helpers.certs import make_pki
from tests.helpers.inproc import running_server
from tests.helpers.servers import free_port, reference_binary, start_server
from tests.integration.test_leaf_compression import _exchange, _linked, _wait

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]


def _leafz(port: int) -> list:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/leafz", timeout=5) as r:
        return json.loads(r.read())["leafs"]


def _hub(tmp_path, *, ws_extra: str = "no_tls: true", leaf_port: bool = True, leaf_extra: str = ""):
    lp, hp, wp = free_port(), free_port(), free_port()
    conf = tmp_path / "hub.conf"
    leaf = f"leafnodes {{ port: {lp}\n {leaf_extra} }}" if leaf_port else ""
    conf.write_text(f"server_name: HUB\nhttp_port: {hp}\n{leaf}\nwebsocket {{ port: {wp}\n {ws_extra}\n }}\n")
    hub = start_server("reference", tmp_path, config=str(conf), jetstream=False)
    hub.http = hp
    hub.ws_port = wp
    return hub


def _edge(url: str, **remote) -> ServerOptions:
    o = ServerOptions(host="127.0.0.1", port=0, server_name="EDGE")
    o.leafnodes = LeafNodeOptions(reconnect_ns=100_000_000, remotes=[RemoteLeafOptions(urls=[url], **remote)])
    return o


@pytest.mark.parametrize(
    "remote,hub_leaf,expect",
    [
        ({}, "", None),  # default s2_auto: S2 under the frames
        ({"compression": "s2_fast"}, "compression: s2_best", ("s2_fast", "s2_best")),
        ({"compression": "off"}, "", ("off", "off")),
        ({"ws_compression": True}, "", ("off", "off")),  # permessage-deflate, no S2 on top
    ],
)
async def test_ws_remote_to_nats_server_hub(tmp_path, remote, hub_leaf, expect):
    hub = _hub(tmp_path, ws_extra="no_tls: true\n compression: true", leaf_extra=hub_leaf)
    try:
        async with running_server(options=_edge(f"ws://127.0.0.1:{hub.ws_port}", **remote)) as edge:
            await _wait(lambda: _linked(edge), "link over websocket")
            await _wait(lambda: len(_leafz(hub.http)) == 1, "hub /leafz")
            theirs = _leafz(hub.http)[0]
            mine = edge.leafnodes.leafz()["leafs"][0]
            assert theirs["name"] == "EDGE" and theirs["websocket"] is True
            assert mine["name"] == "HUB" and mine["websocket"] is True and mine["is_spoke"] is True
            if expect is not None:
                assert (mine["compression"], theirs["compression"]) == expect
            else:
                assert mine["compression"].startswith("s2_") and theirs["compression"].startswith("s2_")
            link = next(iter(edge.leafnodes.connections.values()))
            assert link.websocket and link.s2 == mine["compression"].startswith("s2_")
            assert link.transport.ws_compressed == bool(remote.get("ws_compression"))
            a = await nats.connect(hub.url)
            b = await nats.connect(edge.client_url)
            try:
                await _exchange(a, b)
                await _exchange(b, a)
            finally:
                await a.close()
                await b.close()
    finally:
        hub.stop()


async def test_wss_remote_with_path(tmp_path):
    pki = make_pki(tmp_path / "pki")
    hub = _hub(tmp_path, ws_extra=f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}" }}')
    try:
        opts = _edge(f"wss://localhost:{hub.ws_port}/some/path", tls=TLSOptions(ca_file=pki.ca_file))
        async with running_server(options=opts) as edge:
            await _wait(lambda: _linked(edge), "link over wss")
            a = await nats.connect(hub.url)
            b = await nats.connect(edge.client_url)
            try:
                await _exchange(b, a)
            finally:
                await a.close()
                await b.close()
    finally:
        hub.stop()


async def test_ws_upgrade_refused_is_retried(tmp_path, caplog):
    """An HTTP server that refuses the upgrade (the hub's monitoring port: 404), and a hub whose
    WebSocket port does not take leafs (no leafnodes port: it closes the link): natsd logs it,
    retries with backoff and keeps serving its own clients."""
    hub = _hub(tmp_path, leaf_port=False)
    try:
        o = _edge(f"ws://127.0.0.1:{hub.http}")
        o.leafnodes.remotes.append(RemoteLeafOptions(urls=[f"ws://127.0.0.1:{hub.ws_port}"]))
        async with running_server(options=o) as edge:
            await _wait(lambda: caplog.text.count("invalid websocket connection (status 404)") >= 2, "refused upgrades")
            await _wait(lambda: hub.log().count("Not configured to accept leaf node connections") >= 2, "closed links")
            assert not _linked(edge)
            nc = await nats.connect(edge.client_url)
            s = await nc.subscribe("local")
            await nc.publish("local", b"ok")
            assert (await s.next_msg(timeout=2)).data == b"ok"
            await nc.close()
    finally:
        hub.stop()


async def test_ws_link_comes_back_after_hub_restart(tmp_path):
    hub = _hub(tmp_path)
    try:
        async with running_server(options=_edge(f"ws://127.0.0.1:{hub.ws_port}")) as edge:
            await _wait(lambda: _linked(edge), "link")
            conf = hub.argv[hub.argv.index("-c") + 1] if "-c" in hub.argv else None
            port, ws_port, http = hub.port, hub.ws_port, hub.http
            hub.stop()
            await _wait(lambda: not _linked(edge), "link down")
            hub = start_server("reference", tmp_path / "again", config=conf, jetstream=False, port=port)
            hub.ws_port, hub.http = ws_port, http
            await _wait(lambda: _linked(edge), "link back", timeout=20)
            a = await nats.connect(hub.url)
            b = await nats.connect(edge.client_url)
            try:
                await _exchange(a, b)
            finally:
                await a.close()
                await b.close()
    finally:
        hub.stop()


def _ws_hub_options(**ws) -> ServerOptions:
    from natsd.config.tls import WebsocketOptions

    o = ServerOptions(host="127.0.0.1", port=0, server_name="HUBD")
    o.websocket = WebsocketOptions(host="127.0.0.1", port=-1, no_tls=True, **ws)
    o.leafnodes = LeafNodeOptions(host="127.0.0.1", port=-1)
    return o


@pytest.mark.parametrize("remote", [{}, {"compression": "s2_best"}, {"ws_compression": True}, {"compression": "off"}])
async def test_natsd_on_both_ends_over_websocket(remote):
    async with running_server(options=_ws_hub_options(compression=True)) as hubd:
        url = f"ws://127.0.0.1:{hubd.websocket_port}"
        async with running_server(options=_edge(url, **remote)) as edge:
            await _wait(lambda: _linked(edge) and _linked(hubd), "natsd link over websocket")
            theirs = hubd.leafnodes.leafz()["leafs"][0]
            mine = edge.leafnodes.leafz()["leafs"][0]
            assert theirs["websocket"] and mine["websocket"] and theirs["is_spoke"] is False
            want_s2 = not remote.get("ws_compression") and remote.get("compression") != "off"
            assert mine["compression"].startswith("s2_") is want_s2
            assert theirs["compression"].startswith("s2_") is want_s2
            a = await nats.connect(hubd.client_url)
            b = await nats.connect(edge.client_url)
            try:
                await _exchange(a, b)
                await _exchange(b, a)
            finally:
                await a.close()
                await b.close()


async def test_nats_server_leaf_over_websocket_to_natsd(tmp_path):
    async with running_server(options=_ws_hub_options()) as hubd:
        hp = free_port()
        conf = tmp_path / "leaf.conf"
        conf.write_text(
            f"server_name: LEAF\nhttp_port: {hp}\nleafnodes {{ remotes: [ {{ url: "
            f'"ws://127.0.0.1:{hubd.websocket_port}", compression: s2_fast }} ] }}\n'
        )
        leaf = start_server("reference", tmp_path, config=str(conf), jetstream=False)
        try:
            await _wait(lambda: _linked(hubd), "nats-server leaf over websocket")
            await _wait(lambda: len(_leafz(hp)) == 1, "leaf /leafz")
            assert _leafz(hp)[0]["compression"] == "s2_fast" and _leafz(hp)[0]["websocket"] is True
            assert hubd.leafnodes.leafz()["leafs"][0]["compression"].startswith("s2_")
            a = await nats.connect(leaf.url)
            b = await nats.connect(hubd.client_url)
            try:
                await _exchange(a, b)
                await _exchange(b, a)
            finally:
                await a.close()
                await b.close()
        finally:
            leaf.stop()


async def test_websocket_leaf_refused_without_leafnodes_port(caplog):
    from natsd.config.tls import WebsocketOptions

    o = ServerOptions(host="127.0.0.1", port=0, server_name="HUBD")
    o.websocket = WebsocketOptions(host="127.0.0.1", port=-1, no_tls=True)
    o.leafnodes = LeafNodeOptions(host="127.0.0.1", port=0)  # remotes only: no accepting port
    async with running_server(options=o) as hubd:
        async with running_server(options=_edge(f"ws://127.0.0.1:{hubd.websocket_port}")) as edge:
            await _wait(lambda: caplog.text.count("Not configured to accept leaf node connections") >= 2, "refusals")
            assert not _linked(edge) and not _linked(hubd)
