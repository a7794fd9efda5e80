"""``hub: true`` on a remote (nats-server's ``Hub``): the soliciting side takes the hub role of the
link and the accepting side the spoke role (told by CONNECT's ``is_hub``). The role decides what
crosses: a spoke passes on only the interest of its local clients and of links where it is the
hub, so a natsd with two ordinary remotes does not bridge its two hubs, while with ``hub: true`` on
one of them it does (as nats-server)."""

from __future__ import annotations

import json
import urllib.request

import nats
import pytest

from natsd.config.leafnodes import LeafNodeOptions, RemoteLeafOptions
from natsd.config.options import ServerOptions
from tests.helpers.inproc import running_server
from tests.helpers.servers import free_port, reference_binary, start_server
from tests.integration.test_leaf_compression import _wait

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]


def _leafz(port: int) -> list:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/leafz", timeout=5) as r:
        return json.loads(r.read())["leafs"]


def _go(tmp_path, name: str, body: str):
    hp = free_port()
    conf = tmp_path / f"{name}.conf"
    conf.write_text(f"server_name: {name}\nhttp_port: {hp}\n{body}\n")
    srv = start_server("reference", tmp_path / name, config=str(conf), jetstream=False)
    srv.http = hp
    return srv


async def _answers(nc, subject: str, want: bytes, timeout: float) -> bool:
    import asyncio

    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        try:
            return (await nc.request(subject, b"?", timeout=0.3)).data == want
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            await asyncio.sleep(0.1)
    return False


@pytest.mark.parametrize("hub_flag", [True, False])
async def test_hub_remote_bridges_two_nats_servers(tmp_path, hub_flag):
    la, lb = free_port(), free_port()
    a = _go(tmp_path, "A", f"leafnodes {{ port: {la} }}")
    b = _go(tmp_path, "B", f"leafnodes {{ port: {lb} }}")
    try:
        o = ServerOptions(host="127.0.0.1", port=0, server_name="EDGE")
        o.leafnodes = LeafNodeOptions(
            reconnect_ns=100_000_000,
            remotes=[
                RemoteLeafOptions(urls=[f"nats-leaf://127.0.0.1:{la}"]),
                RemoteLeafOptions(urls=[f"nats-leaf://127.0.0.1:{lb}"], hub=hub_flag),
            ],
        )
        async with running_server(options=o) as edge:
            await _wait(lambda: sum(c.ready for c in edge.leafnodes.connections.values()) == 2, "two links")
            await _wait(lambda: len(_leafz(a.http)) == 1 and len(_leafz(b.http)) == 1, "links in /leafz")
            mine = {lf["name"]: lf["is_spoke"] for lf in edge.leafnodes.leafz()["leafs"]}
            assert mine == {"A": True, "B": not hub_flag}
            assert _leafz(a.http)[0]["is_spoke"] is False
            assert _leafz(b.http)[0]["is_spoke"] is hub_flag  # B took the spoke role

            na, nb, ne = (await nats.connect(a.url), await nats.connect(b.url), await nats.connect(edge.client_url))
            try:

                async def on_a(m):
                    await m.respond(b"from A")

                async def on_b(m):
                    await m.respond(b"from B")

                await na.subscribe("svc.a", cb=on_a)
                await nb.subscribe("svc.b", cb=on_b)
                await na.flush()
                await nb.flush()
                # natsd's own clients reach both sides either way.
                assert await _answers(ne, "svc.a", b"from A", 10)
                assert await _answers(ne, "svc.b", b"from B", 10)
                # Through natsd from one hub to the other: only when natsd is B's hub.
                assert await _answers(nb, "svc.a", b"from A", 10 if hub_flag else 1.5) is hub_flag
                assert await _answers(na, "svc.b", b"from B", 10 if hub_flag else 1.5) is hub_flag
            finally:
                for nc in (na, nb, ne):
                    await nc.close()
    finally:
        a.stop()
        b.stop()


async def test_nats_server_remote_declaring_itself_hub(tmp_path):
    """A nats-server leaf with ``hub: true`` connecting to natsd: natsd's accepted link is the
    spoke (is_spoke in its /leafz), the nats-server side the hub; messages flow."""
    o = ServerOptions(host="127.0.0.1", port=0, server_name="HUBD")
    o.leafnodes = LeafNodeOptions(host="127.0.0.1", port=-1)
    async with running_server(options=o) as hubd:
        leaf = _go(
            tmp_path,
            "LEAF",
            f'leafnodes {{ remotes: [ {{ url: "nats-leaf://127.0.0.1:{hubd.leafnodes.port}", hub: true }} ] }}',
        )
        try:
            await _wait(lambda: any(c.ready for c in hubd.leafnodes.connections.values()), "link")
            await _wait(lambda: len(_leafz(leaf.http)) == 1, "leaf /leafz")
            assert hubd.leafnodes.leafz()["leafs"][0]["is_spoke"] is True
            assert _leafz(leaf.http)[0]["is_spoke"] is False
            nl, nh = await nats.connect(leaf.url), await nats.connect(hubd.client_url)
            try:

                async def svc(m):
                    await m.respond(b"leaf")

                await nl.subscribe("svc", cb=svc)
                await nl.flush()
                assert await _answers(nh, "svc", b"leaf", 10)
            finally:
                await nl.close()
                await nh.close()
        finally:
            leaf.stop()
