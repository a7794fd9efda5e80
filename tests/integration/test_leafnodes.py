"""natsd as a leafnode of a real nats-server hub (and as the hub of a nats-server leaf).

Every test starts the reference binary (``nats-server``) as a subprocess with a ``leafnodes``
block, and an in-process natsd whose ``leafnodes`` options point at it (or the other way round),
then checks with nats-py clients on both sides.
"""

from __future__ import annotations

import asyncio
import os
import json
import urllib.request
from pathlib import Path

import nats
import pytest

from natsd.config.leafnodes import LeafNodeOptions, LeafUser, RemoteLeafOptions
from natsd.config.options import JetStreamOptions, ServerOptions
from tests.helpers.inproc import running_server
from tests.helpers.servers import free_port, reference_binary, start_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]


def hub_config(tmp_path, leaf_port: int, *, domain: str = "HUB", auth: str = "", extra: str = "") -> str:
    p = tmp_path / f"hub-{leaf_port}.conf"
    js = f'jetstream {{ store_dir: "{tmp_path}/hub-js", domain: {domain} }}' if domain else ""
    p.write_text(f"""
server_name: HUB
{js}
leafnodes {{
  port: {leaf_port}
  {auth}
}}
{extra}
""")
    return str(p)


def leaf_options(
    hub_leaf_port: int, tmp_path, *, domain: str = "EDGE", url: str = "", jetstream: bool = True, **remote
) -> ServerOptions:
    o = ServerOptions(host="127.0.0.1", port=0, http_port=-1, server_name="EDGE-natsd")
    if jetstream:
        o.jetstream = JetStreamOptions(enabled=True, store_dir=str(tmp_path / "edge-js"), domain=domain)
    o.leafnodes = LeafNodeOptions(
        reconnect_ns=100_000_000,
        remotes=[RemoteLeafOptions(urls=[url or f"nats-leaf://127.0.0.1:{hub_leaf_port}"], **remote)],
    )
    return o


async def wait_for(pred, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        r = pred()
        if asyncio.iscoroutine(r):
            r = await r
        if r:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def leafz(http_port: int, query: str = "") -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/leafz{query}", timeout=5) as r:
        return json.loads(r.read())


def linked(server) -> bool:
    return server.leafnodes is not None and any(c.ready for c in server.leafnodes.connections.values())


async def propagated(pub_nc, subject: str, timeout: float = 10.0) -> None:
    """Wait until a request on ``subject`` from ``pub_nc`` gets an answer (interest crossed)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await pub_nc.request(subject, b"probe", timeout=0.3)
            return
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.05)


async def reaches(pub_nc, subject: str, subs, timeout: float = 10.0) -> None:
    """Publish probes on ``subject`` until one of ``subs`` gets one; then drain them all."""
    deadline = asyncio.get_running_loop().time() + timeout
    got = False
    while not got:
        await pub_nc.publish(subject, b"-1")
        await pub_nc.flush()
        for sub in subs:
            try:
                await sub.next_msg(timeout=0.1)
                got = True
            except nats.errors.TimeoutError:
                pass
        if not got and asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no interest in {subject} crossed the link")
    await asyncio.sleep(0.2)
    for sub in subs:
        while True:
            try:
                await sub.next_msg(timeout=0.1)
            except nats.errors.TimeoutError:
                break


@pytest.fixture
def hub(tmp_path):
    lp = free_port()
    srv = start_server("reference", tmp_path, config=hub_config(tmp_path, lp), jetstream=False)
    srv.leaf_port = lp
    try:
        yield srv
    finally:
        srv.stop()


async def test_pubsub_and_request_reply_both_ways(hub, tmp_path):
    async with running_server(options=leaf_options(hub.leaf_port, tmp_path)) as edge:
        await wait_for(lambda: linked(edge), what="leaf link")
        hub_nc = await nats.connect(hub.url)
        edge_nc = await nats.connect(edge.client_url)
        try:
            # edge -> hub
            sub_h = await hub_nc.subscribe("to.hub")
            await hub_nc.flush()

            async def svc_h(m):
                await m.respond(b"hub:" + m.data)

            await hub_nc.subscribe("svc.hub", cb=svc_h)
            await hub_nc.flush()
            await propagated(edge_nc, "svc.hub")
            await edge_nc.publish("to.hub", b"hello", headers={"X-A": "1"})
            m = await sub_h.next_msg(timeout=5)
            assert m.data == b"hello" and m.headers["X-A"] == "1"
            r = await edge_nc.request("svc.hub", b"q", timeout=5)
            assert r.data == b"hub:q"

            # hub -> edge
            sub_e = await edge_nc.subscribe("to.edge.*")

            async def svc_e(m):
                await m.respond(b"edge:" + m.data)

            await edge_nc.subscribe("svc.edge", cb=svc_e)
            await edge_nc.flush()
            await propagated(hub_nc, "svc.edge")
            await hub_nc.publish("to.edge.x", b"world")
            m = await sub_e.next_msg(timeout=5)
            assert m.subject == "to.edge.x" and m.data == b"world"
            assert (await hub_nc.request("svc.edge", b"q", timeout=5)).data == b"edge:q"

            # Unsubscribe on the edge: the hub's publisher no longer reaches it (no responders).
            await sub_e.unsubscribe()
            await edge_nc.flush()

            async def gone():
                try:
                    await hub_nc.request("to.edge.y", b"", timeout=0.3)
                except nats.errors.NoRespondersError:
                    return True
                except nats.errors.TimeoutError:
                    return False
                return False

            await wait_for(gone, what="interest removed at the hub")
            await sub_h.unsubscribe()

            lz = await asyncio.to_thread(leafz, edge.http_port)
            assert lz["leafnodes"] == 1
            link = lz["leafs"][0]
            assert link["name"] == "HUB" and link["is_spoke"] is True and link["account"] == "$G"
            assert link["in_msgs"] >= 2 and link["out_msgs"] >= 2
        finally:
            await hub_nc.close()
            await edge_nc.close()


async def test_queue_group_spans_both_sides(hub, tmp_path):
    async with running_server(options=leaf_options(hub.leaf_port, tmp_path)) as edge:
        await wait_for(lambda: linked(edge), what="leaf link")
        hub_nc = await nats.connect(hub.url)
        edge_nc = await nats.connect(edge.client_url)
        try:
            # Only the edge has members: the hub's publisher reaches them through the link.
            qe = await edge_nc.subscribe("work", queue="workers")
            qe2 = await edge_nc.subscribe("work", queue="workers")
            await edge_nc.flush()
            await reaches(hub_nc, "work", [qe, qe2])
            # A plain subscriber on the edge too: it must get each message once, not once per group.
            plain = await edge_nc.subscribe("work")
            qh = await hub_nc.subscribe("work", queue="workers")
            await hub_nc.flush()
            await edge_nc.flush()
            await asyncio.sleep(0.3)
            n = 200
            for i in range(n):
                await hub_nc.publish("work", str(i).encode())
            for i in range(n):
                await edge_nc.publish("work", str(n + i).encode())
            await hub_nc.flush()
            await edge_nc.flush()
            seen: list[int] = []
            where: dict[int, str] = {}
            for name, sub in (("edge", qe), ("edge", qe2), ("hub", qh)):
                while True:
                    try:
                        m = await sub.next_msg(timeout=0.5)
                    except nats.errors.TimeoutError:
                        break
                    seen.append(int(m.data))
                    where[int(m.data)] = name
            # Every message went to exactly one member of the group, and, as with nats-server,
            # to a member on the publisher's side while there is one.
            assert sorted(seen) == list(range(2 * n))
            assert {where[i] for i in range(n)} == {"hub"}
            assert {where[i] for i in range(n, 2 * n)} == {"edge"}
            plain_seen = []
            while True:
                try:
                    m = await plain.next_msg(timeout=0.5)
                except nats.errors.TimeoutError:
                    break
                plain_seen.append(int(m.data))
            assert sorted(plain_seen) == list(range(2 * n))
            # Without local members the link takes them.
            await qe.unsubscribe()
            await qe2.unsubscribe()
            await edge_nc.flush()
            await edge_nc.publish("work", b"999")
            await edge_nc.flush()
            assert (await qh.next_msg(timeout=5)).data == b"999"
        finally:
            await hub_nc.close()
            await edge_nc.close()


async def test_hub_killed_and_restarted_link_comes_back(tmp_path):
    lp = free_port()
    cfg = hub_config(tmp_path, lp)
    hub = start_server("reference", tmp_path, config=cfg, jetstream=False)
    try:
        async with running_server(options=leaf_options(lp, tmp_path)) as edge:
            await wait_for(lambda: linked(edge), what="leaf link")
            edge_nc = await nats.connect(edge.client_url)

            async def svc(m):
                await m.respond(b"edge:" + m.data)

            await edge_nc.subscribe("svc.edge", cb=svc)
            await edge_nc.flush()
            hub_nc = await nats.connect(hub.url, allow_reconnect=False)
            await propagated(hub_nc, "svc.edge")
            await hub_nc.close()

            hub.kill()  # kill -9
            await wait_for(lambda: not any(c.ready for c in edge.leafnodes.connections.values()), what="link down")
            # The edge keeps serving its own clients meanwhile.
            assert (await edge_nc.request("svc.edge", b"local", timeout=2)).data == b"edge:local"

            hub2 = start_server("reference", tmp_path, config=cfg, jetstream=False, port=hub.port)
            try:
                await wait_for(lambda: linked(edge), timeout=20, what="link back")
                hub_nc = await nats.connect(hub2.url)
                await propagated(hub_nc, "svc.edge")  # interest restored
                assert (await hub_nc.request("svc.edge", b"again", timeout=5)).data == b"edge:again"
                await hub_nc.close()
            finally:
                hub2.stop()
            await edge_nc.close()
    finally:
        hub.stop()


@pytest.fixture
def js_hub(tmp_path):
    lp = free_port()
    srv = start_server("reference", tmp_path, config=hub_config(tmp_path, lp, domain="HUB"), jetstream=False)
    srv.leaf_port = lp
    try:
        yield srv
    finally:
        srv.stop()


async def test_jetstream_domains_are_isolated_and_reachable(js_hub, tmp_path):
    async with running_server(options=leaf_options(js_hub.leaf_port, tmp_path)) as edge:
        await wait_for(lambda: linked(edge), what="leaf link")
        hub_nc = await nats.connect(js_hub.url)
        edge_nc = await nats.connect(edge.client_url)
        try:
            edge_js = edge_nc.jetstream()
            hub_js = hub_nc.jetstream()
            await edge_js.add_stream(name="EDGE_ONLY", subjects=["edge.data"])
            await hub_js.add_stream(name="HUB_ONLY", subjects=["hub.data"])
            ack = await edge_js.publish("edge.data", b"1")
            assert ack.stream == "EDGE_ONLY" and ack.domain == "EDGE"  # PubAck names the domain

            # INFO over the plain API: each side answers for itself.
            info = json.loads((await edge_nc.request("$JS.API.INFO", b"", timeout=5)).data)
            assert info["domain"] == "EDGE"
            info = json.loads((await hub_nc.request("$JS.API.INFO", b"", timeout=5)).data)
            assert info["domain"] == "HUB"

            # The hub reaches the edge's JetStream with domain=EDGE, and sees only the edge's streams.
            await propagated(hub_nc, "$JS.EDGE.API.INFO")
            via_hub = hub_nc.jetstream(domain="EDGE")
            names = [s.config.name async for s in _streams(via_hub)]
            assert names == ["EDGE_ONLY"]
            assert [s.config.name async for s in _streams(hub_js)] == ["HUB_ONLY"]
            ack = await via_hub.publish("edge.data", b"2")
            assert ack.domain == "EDGE" and ack.seq == 2
            info = await via_hub.stream_info("EDGE_ONLY")
            assert info.state.messages == 2

            # ... and the edge reaches the hub's with domain=HUB.
            await propagated(edge_nc, "$JS.HUB.API.INFO")
            via_edge = edge_nc.jetstream(domain="HUB")
            assert [s.config.name async for s in _streams(via_edge)] == ["HUB_ONLY"]
            assert [s.config.name async for s in _streams(edge_js)] == ["EDGE_ONLY"]

            # A $JS.API request crosses no link: with JetStream off on one side nobody answers there
            # from the other side (checked on the edge by counting API requests it served).
            before = edge.jetstream.jsz({})["api"]["total"]
            await hub_js.account_info()
            await asyncio.sleep(0.2)
            assert edge.jetstream.jsz({})["api"]["total"] == before
        finally:
            await hub_nc.close()
            await edge_nc.close()


async def _streams(js):
    for info in await js.streams_info():
        yield info


def hub_options(tmp_path, *, users=None, domain: str = "HUBD") -> ServerOptions:
    o = ServerOptions(host="127.0.0.1", port=0, http_port=-1, server_name="HUB-natsd")
    o.jetstream = JetStreamOptions(enabled=True, store_dir=str(tmp_path / "hubd-js"), domain=domain)
    o.leafnodes = LeafNodeOptions(host="127.0.0.1", port=-1, users=users or [])
    return o


async def test_nats_server_leaf_of_natsd_with_auth(tmp_path):
    users = [LeafUser(user="leaf", password="s3cret")]
    async with running_server(options=hub_options(tmp_path, users=users)) as hubd:
        lport = hubd.leafnodes.port
        bad = tmp_path / "bad.conf"
        bad.write_text(f'leafnodes {{ remotes: [ {{ url: "nats-leaf://leaf:wrong@127.0.0.1:{lport}" }} ] }}\n')
        good = tmp_path / "good.conf"
        good.write_text(
            f'server_name: LEAF\njetstream {{ store_dir: "{tmp_path}/leaf-js", domain: LEAFD }}\n'
            f'leafnodes {{ remotes: [ {{ url: "nats-leaf://leaf:s3cret@127.0.0.1:{lport}" }} ] }}\n'
        )
        rejected = start_server("reference", tmp_path / "bad", config=str(bad), jetstream=False)
        try:
            await wait_for(lambda: "Authorization Violation" in rejected.log(), what="rejected leaf")
            assert not linked(hubd)
        finally:
            rejected.stop()
        leaf = start_server("reference", tmp_path / "good", config=str(good), jetstream=False)
        try:
            await wait_for(lambda: linked(hubd), what="nats-server leaf connected")
            leaf_nc = await nats.connect(leaf.url)
            hub_nc = await nats.connect(hubd.client_url)
            try:

                async def svc(m):
                    await m.respond(b"leaf:" + m.data)

                await leaf_nc.subscribe("svc.leaf", cb=svc)

                async def hsvc(m):
                    await m.respond(b"hub:" + m.data)

                await hub_nc.subscribe("svc.hub", cb=hsvc)
                await leaf_nc.flush()
                await hub_nc.flush()
                await propagated(hub_nc, "svc.leaf")
                await propagated(leaf_nc, "svc.hub")
                assert (await hub_nc.request("svc.leaf", b"a", timeout=5)).data == b"leaf:a"
                assert (await leaf_nc.request("svc.hub", b"b", timeout=5)).data == b"hub:b"
                # Queue group across: every message once.
                q1 = await leaf_nc.subscribe("jobs", queue="q")
                q2 = await hub_nc.subscribe("jobs", queue="q")
                await leaf_nc.flush()
                await hub_nc.flush()
                await reaches(hub_nc, "jobs", [q1, q2])
                await reaches(leaf_nc, "jobs", [q1, q2])
                for i in range(100):
                    await (hub_nc if i % 2 else leaf_nc).publish("jobs", str(i).encode())
                await hub_nc.flush()
                await leaf_nc.flush()
                seen = []
                for sub in (q1, q2):
                    while True:
                        try:
                            seen.append(int((await sub.next_msg(timeout=0.5)).data))
                        except nats.errors.TimeoutError:
                            break
                assert sorted(seen) == list(range(100))
                # Domains: the hub reaches the leaf's JetStream and the other way round.
                await propagated(hub_nc, "$JS.LEAFD.API.INFO")
                info = await hub_nc.jetstream(domain="LEAFD").account_info()
                assert info.domain == "LEAFD"
                await propagated(leaf_nc, "$JS.HUBD.API.INFO")
                info = await leaf_nc.jetstream(domain="HUBD").account_info()
                assert info.domain == "HUBD"
                lz = await asyncio.to_thread(leafz, hubd.http_port)
                assert lz["leafnodes"] == 1 and lz["leafs"][0]["name"] == "LEAF"
                assert lz["leafs"][0]["is_spoke"] is False
            finally:
                await leaf_nc.close()
                await hub_nc.close()
        finally:
            leaf.stop()


async def test_natsd_on_both_ends_and_loop_detection(tmp_path, caplog):
    async with running_server(options=hub_options(tmp_path)) as hubd:
        opts = leaf_options(hubd.leafnodes.port, tmp_path)
        async with running_server(options=opts) as edge:
            await wait_for(lambda: linked(edge) and linked(hubd), what="natsd link")
            hub_nc = await nats.connect(hubd.client_url)
            edge_nc = await nats.connect(edge.client_url)
            try:

                async def svc(m):
                    await m.respond(b"edge:" + m.data)

                await edge_nc.subscribe("svc.edge", cb=svc)
                got = await hub_nc.subscribe("to.hub")
                await edge_nc.flush()
                await hub_nc.flush()
                await propagated(hub_nc, "svc.edge")
                assert (await hub_nc.request("svc.edge", b"x", timeout=5)).data == b"edge:x"
                await reaches(edge_nc, "to.hub", [got])
                await edge_nc.publish("to.hub", b"payload", headers={"H": "v"})
                m = await got.next_msg(timeout=5)
                assert m.data == b"payload" and m.headers == {"H": "v"}
                ack = await hub_nc.jetstream(domain="EDGE").add_stream(name="VIA", subjects=["via"])
                assert ack.config.name == "VIA"
                assert [s async for s in _streams(edge_nc.jetstream())][0].config.name == "VIA"
            finally:
                await hub_nc.close()
                await edge_nc.close()

            # A second link from the hub back to the edge closes a cycle: both ends notice it.
            eo = ServerOptions(host="127.0.0.1", port=0, server_name="LOOPER")
            eo.leafnodes = LeafNodeOptions(host="127.0.0.1", port=-1, reconnect_ns=100_000_000)
            async with running_server(options=eo) as middle:
                middle.leafnodes.options.remotes.append(
                    RemoteLeafOptions(urls=[f"nats-leaf://127.0.0.1:{hubd.leafnodes.port}"])
                )
                edge.leafnodes.options.remotes.append(
                    RemoteLeafOptions(urls=[f"nats-leaf://127.0.0.1:{middle.leafnodes.port}"])
                )
                from natsd.server.leaf.manager import _Remote

                for srv in (middle, edge):
                    r = _Remote(srv.leafnodes, srv.leafnodes.options.remotes[-1])
                    srv.leafnodes.remotes.append(r)
                    r.start()
                await wait_for(lambda: "Loop detected" in caplog.text, what="loop detected")
                # The servers keep serving their own clients.
                nc = await nats.connect(edge.client_url)
                s = await nc.subscribe("local")
                await nc.publish("local", b"ok")
                assert (await s.next_msg(timeout=2)).data == b"ok"
                await nc.close()


async def test_edge_mirrors_and_sources_hub_streams(js_hub, tmp_path):
    async with running_server(options=leaf_options(js_hub.leaf_port, tmp_path)) as edge:
        await wait_for(lambda: linked(edge), what="leaf link")
        hub_nc = await nats.connect(js_hub.url)
        edge_nc = await nats.connect(edge.client_url)
        try:
            hub_js = hub_nc.jetstream()
            await hub_js.add_stream(name="ORDERS", subjects=["orders.>"])
            for i in range(50):
                await hub_js.publish(f"orders.{i % 5}", str(i).encode(), headers={"K": str(i)})
            await propagated(edge_nc, "$JS.HUB.API.INFO")
            edge_js = edge_nc.jetstream()
            from nats.js.api import ExternalStream, StreamSource

            ext = ExternalStream(api="$JS.HUB.API", deliver="")
            await edge_js.add_stream(name="MIRROR", mirror=StreamSource(name="ORDERS", external=ext))
            await edge_js.add_stream(
                name="SOURCED", sources=[StreamSource(name="ORDERS", filter_subject="orders.1", external=ext)]
            )

            async def caught_up():
                m = await edge_js.stream_info("MIRROR")
                s = await edge_js.stream_info("SOURCED")
                return m.state.messages == 50 and s.state.messages == 10

            await wait_for(caught_up, timeout=20, what="mirror and source caught up")
            msg = await edge_js.get_msg("MIRROR", 7)
            assert msg.subject == "orders.1" and msg.data == b"6" and msg.headers["K"] == "6"
            msg = await edge_js.get_msg("SOURCED", 1)
            assert msg.subject == "orders.1" and msg.data == b"1"
            # The reference's name for an external origin: <name>:<hash of the API prefix>.
            from natsd.jetstream.stream.sourcing import api_hash

            assert msg.headers["Nats-Stream-Source"].startswith(f"ORDERS:{api_hash('$JS.HUB.API')} 2 ")
            # More data keeps flowing.
            await hub_js.publish("orders.1", b"late")
            await wait_for(lambda: _count(edge_js, "SOURCED", 11), what="live sourcing")
        finally:
            await hub_nc.close()
            await edge_nc.close()


async def _count(js, stream: str, n: int) -> bool:
    return (await js.stream_info(stream)).state.messages == n


MOVE_N = int(os.environ.get("NATSD_MOVE_N", "100000"))


def _durable_sourcing_level() -> int:
    from natsd.jetstream.config import models

    return models.JS_API_LEVEL


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    "graceful",
    [
        pytest.param(True, id="closed"),
        pytest.param(
            False,
            id="aborted",
            marks=pytest.mark.skipif(
                _durable_sourcing_level() < 4,
                reason="natsd advertises JetStream API level < 4: a 2.15 hub then falls back to an ack-none "
                "sourcing consumer, which loses what is in flight when the link is aborted "
                "(docs/edge-to-hub-move.md); runs once JS_API_LEVEL is 4",
            ),
        ),
    ],
)
async def test_hub_sources_edge_work_queue_across_link_cuts(tmp_path, graceful):
    """The edge->hub "move": a work-queue stream at the edge, sourced by a hub stream; the edge
    cuts the link three times while it publishes. Every message arrives once at the hub and
    the edge stream empties.

    ``closed``: the link is closed (what was written still reaches the hub), which any origin
    survives. ``aborted``: the socket is aborted, as a network failure does; the messages in the
    link's buffers are gone. That needs durable sourcing: the hub's level-4 request makes natsd
    upgrade the sourcing consumer to a durable acked by flow control, which delivers the
    unconfirmed messages again to the consumer the hub sets up after the cut."""
    await _move_across_cuts(tmp_path, MOVE_N, graceful)


class _Partitioned:
    """A transport whose writes vanish (and which reads nothing): a network partition, before
    either side's TCP notices it."""

    def __init__(self, t) -> None:
        self._t = t
        self.lost = 0  # bytes written into the partition
        t.pause_reading()

    def write(self, data) -> None:
        self.lost += len(data)

    def writelines(self, data) -> None:
        self.lost += sum(len(d) for d in data)

    def resume_reading(self) -> None:
        pass

    def __getattr__(self, name):
        return getattr(self._t, name)


async def cut_links(server, graceful: bool, partition_s: float = 1.0) -> int:
    """Cut every leaf link of ``server``. ``graceful``: the connection is closed (what was
    written still reaches the other side), then stays down ``partition_s``. Otherwise as a
    network failure: for ``partition_s`` everything written to the link vanishes (and nothing
    is read), then the socket is aborted. Returns the bytes lost that way."""
    conns = list(server.leafnodes.connections.values())
    parts: list[_Partitioned] = []
    if graceful:
        for c in conns:
            c.close("Client Closed")
    else:
        for c in conns:
            if c.transport is not None:
                c.transport = _Partitioned(c.transport)
                parts.append(c.transport)
    await asyncio.sleep(partition_s)
    if not graceful:
        for c in conns:
            c.close("Stale Connection", graceful=False)
    return sum(p.lost for p in parts)


def patch_js_api_level(monkeypatch, level: int) -> None:
    """Advertise and accept JetStream API level ``level`` in this (in-process) server: every
    module that bound the constant at import."""
    from natsd.jetstream import manager, wire
    from natsd.jetstream.config import consumer_config
    from natsd.jetstream.config import models

    for mod in (models, wire, manager):  # (DIRECT.GET checks the level through wire)
        monkeypatch.setattr(mod, "JS_API_LEVEL", level)
    monkeypatch.setattr(consumer_config, "API_LEVEL", level)


@pytest.mark.timeout(300)
async def test_hub_durable_sourcing_survives_aborted_link_cuts(tmp_path, monkeypatch):
    """With natsd at API level 5 (stream identity, as the hub), a 2.15.1 hub's
    sourcing consumer on the edge's work-queue stream is a durable acked by flow control, and
    three aborted links while publishing lose and duplicate nothing."""
    await _move_across_cuts(tmp_path, 20_000, graceful=False, check_durable=True)


async def _move_across_cuts(tmp_path, n: int, graceful: bool, check_durable: bool = False) -> None:
    from nats.js.api import ExternalStream, RetentionPolicy, StreamConfig, StreamSource

    lp = free_port()
    cfg = hub_config(tmp_path, lp, domain="HUB")
    hub = start_server("reference", tmp_path, config=cfg, jetstream=False)
    try:
        async with running_server(options=leaf_options(lp, tmp_path)) as edge:
            await wait_for(lambda: linked(edge), what="leaf link")
            edge_nc = await nats.connect(edge.client_url)
            hub_nc = await nats.connect(hub.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
            try:
                edge_js = edge_nc.jetstream()
                hub_js = hub_nc.jetstream()
                await edge_js.add_stream(name="EQ", subjects=["eq.>"], retention=RetentionPolicy.WORK_QUEUE)
                await propagated(hub_nc, "$JS.EDGE.API.INFO")
                await hub_js.add_stream(
                    StreamConfig(
                        name="HQ", sources=[StreamSource(name="EQ", external=ExternalStream(api="$JS.EDGE.API"))]
                    )
                )

                async def sourcing():
                    r = await edge_nc.request("$JS.API.CONSUMER.NAMES.EQ", b"", timeout=5)
                    return bool(json.loads(r.data).get("consumers"))

                await wait_for(sourcing, what="the hub's sourcing consumer")
                cuts = {n // 4, n // 2, 3 * n // 4}
                cutting: list[asyncio.Task] = []
                for i in range(n):
                    if i % 500 == 499:
                        # Paced (a PubAck and a pause every 500) so the cuts fall while messages
                        # are flowing to the hub.
                        await edge_js.publish(f"eq.{i % 3}", str(i).encode())
                        await asyncio.sleep(0.02)
                    else:
                        await edge_nc.publish(f"eq.{i % 3}", str(i).encode())
                    if i in cuts:  # publishing goes on while the link is down
                        await wait_for(lambda: linked(edge), what="leaf link back")
                        cutting.append(asyncio.create_task(cut_links(edge, graceful)))
                lost = sum(await asyncio.gather(*cutting))
                print(f"bytes lost in the partitions: {lost}")
                if not graceful:
                    assert lost > 0, "no cut fell while messages were flowing: the test proves nothing"
                await edge_js.publish("eq.0", b"-1")  # everything before it is stored

                async def drained():
                    try:
                        h = await hub_js.stream_info("HQ")
                    except Exception:
                        return False
                    e = await edge_js.stream_info("EQ")
                    return e.state.messages == 0 and h.state.messages == n + 1

                await wait_for(drained, timeout=60 + n / 500, what="edge stream moved to the hub")
                if check_durable:
                    # (raw API: nats-py has no ack policy "flow_control")
                    r = await edge_nc.request("$JS.API.CONSUMER.NAMES.EQ", b"", timeout=5)
                    names = json.loads(r.data)["consumers"]
                    assert len(names) == 1 and names[0].startswith("JS_SRC_"), names
                    r = await edge_nc.request(f"$JS.API.CONSUMER.INFO.EQ.{names[0]}", b"", timeout=5)
                    ccfg = json.loads(r.data)["config"]
                    assert ccfg["durable_name"] == names[0] and ccfg["ack_policy"] == "flow_control"
                sub = await hub_js.subscribe("eq.>", ordered_consumer=True, stream="HQ")
                counts: dict[int, int] = {}
                for _ in range(n + 1):
                    m = await sub.next_msg(timeout=10)
                    k = int(m.data)
                    counts[k] = counts.get(k, 0) + 1
                assert sorted(counts) == [-1, *range(n)]
                assert max(counts.values()) == 1
            finally:
                await edge_nc.close()
                await hub_nc.close()
    finally:
        hub.stop()


async def test_remote_with_credentials_file(tmp_path):
    """An operator-mode hub: the remote's .creds JWT is sent and the hub's nonce signed."""
    from tests.helpers.jwtgen import operator_setup

    ids = operator_setup(tmp_path)
    lp = free_port()
    cfg = tmp_path / "op-hub.conf"
    cfg.write_text(f"""
operator: "{ids["operator_jwt_path"]}"
resolver: MEMORY
resolver_preload: {{ {ids["account_pub"]}: "{ids["account_jwt"]}" }}
leafnodes {{ port: {lp} }}
""")
    hub = start_server("reference", tmp_path, config=str(cfg), jetstream=False)
    try:
        async with running_server(options=leaf_options(lp, tmp_path, credentials=ids["creds_path"])) as edge:
            await wait_for(lambda: linked(edge), what="leaf link with credentials")
            edge_nc = await nats.connect(edge.client_url)
            from natsd.server.leaf.node import read_creds, sign_nonce

            jwt, seed = read_creds(ids["creds_path"])
            # (callbacks rather than user_credentials=: nats-py leaves that file open)
            hub_nc = await nats.connect(
                hub.url,
                user_jwt_cb=lambda: jwt.encode(),
                signature_cb=lambda nonce: sign_nonce(seed, nonce)[0].encode(),
            )
            try:

                async def svc(m):
                    await m.respond(b"edge:" + m.data)

                await edge_nc.subscribe("svc.edge", cb=svc)
                await edge_nc.flush()
                # The hub's clients of that account reach the edge's services.
                await propagated(hub_nc, "svc.edge")
                assert (await hub_nc.request("svc.edge", b"c", timeout=5)).data == b"edge:c"
            finally:
                await edge_nc.close()
                await hub_nc.close()
        # A wrong seed is refused: clear log line on the hub, the edge keeps retrying.
        bad = tmp_path / "bad.creds"
        text = Path(ids["creds_path"]).read_text().splitlines()
        seed_line = next(i for i, ln in enumerate(text) if ln.startswith("SU"))
        from tests.helpers.jwtgen import new_key
        import nkeys

        text[seed_line] = new_key(nkeys.PREFIX_BYTE_USER)[1].decode()
        bad.write_text("\n".join(text) + "\n")
        async with running_server(options=leaf_options(lp, tmp_path / "b", credentials=str(bad))) as edge:
            await wait_for(
                lambda: "Authorization Violation" in hub.log() or "authentication error" in hub.log(),
                what="hub refuses the forged signature",
            )
            assert not linked(edge)
    finally:
        hub.stop()


async def test_unreachable_and_garbage_hubs_are_retried_with_backoff(tmp_path, caplog):
    """Bad hubs: clear log lines, retries, and the edge keeps serving its clients and JetStream."""
    import logging

    async def garbage(reader, writer):
        writer.write(b"HELLO I AM NOT NATS\r\n")
        await writer.drain()
        writer.close()

    g = await asyncio.start_server(garbage, "127.0.0.1", 0)
    gport = g.sockets[0].getsockname()[1]
    dead = free_port()
    opts = leaf_options(dead, tmp_path)
    opts.leafnodes.remotes.append(RemoteLeafOptions(urls=[f"nats-leaf://127.0.0.1:{gport}"]))
    caplog.set_level(logging.INFO, logger="natsd")
    try:
        async with running_server(options=opts) as edge:
            await wait_for(
                lambda: caplog.text.count("Error trying to connect as leafnode") >= 2, what="connect errors logged"
            )
            await wait_for(lambda: "Leafnode protocol error" in caplog.text, what="garbage logged")
            # Backoff: attempts to the dead hub get further apart.
            r = edge.leafnodes.remotes[0]
            assert r.failures >= 2
            nc = await nats.connect(edge.client_url)
            try:
                ack = await nc.jetstream().add_stream(name="LOCAL", subjects=["local"])
                assert ack.config.name == "LOCAL"
                assert (await nc.jetstream().publish("local", b"x")).seq == 1
            finally:
                await nc.close()
    finally:
        g.close()
        await g.wait_closed()


async def test_key_value_across_domains(js_hub, tmp_path):
    """$KV.> never crosses the link; a hub client uses the edge's bucket with domain=EDGE."""
    async with running_server(options=leaf_options(js_hub.leaf_port, tmp_path)) as edge:
        await wait_for(lambda: linked(edge), what="leaf link")
        hub_nc = await nats.connect(js_hub.url)
        edge_nc = await nats.connect(edge.client_url)
        try:
            kv_local = await edge_nc.jetstream().create_key_value(bucket="cfg")
            await kv_local.put("a", b"1")
            await propagated(hub_nc, "$JS.EDGE.API.INFO")
            kv_remote = await hub_nc.jetstream(domain="EDGE").key_value("cfg")
            assert (await kv_remote.get("a")).value == b"1"
            # A put "in domain EDGE" is published under the domain's API prefix (nats.go does this;
            # nats-py's KV puts always use $KV.<bucket>, which stays on the hub's side).
            ack = json.loads((await hub_nc.request("$JS.EDGE.API.$KV.cfg.b", b"2", timeout=5)).data)
            assert ack == {"stream": "KV_cfg", "domain": "EDGE", "seq": 2}
            assert (await kv_local.get("b")).value == b"2"
            # The hub has no bucket of that name: nothing leaked into its own domain.
            with pytest.raises(Exception):
                await hub_nc.jetstream().key_value("cfg")
        finally:
            await hub_nc.close()
            await edge_nc.close()


async def test_remote_over_tls(tmp_path):
    """A TLS hub (INFO in plaintext, then the handshake, as nats-server's leafnode port does):
    the remote's tls {} goes through natsd's shared TLS options; without tls {} the remote is
    refused with the reference's mismatch message."""
    tls_mod = pytest.importorskip("natsd.config.tls", reason="natsd's TLS plumbing is not on this branch")
    certs = pytest.importorskip("tests.helpers.certs", reason="the certificate helper is not on this branch")
    import logging

    pki = certs.make_pki(tmp_path / "pki")
    lp = free_port()
    cfg = tmp_path / "tls-hub.conf"
    cfg.write_text(
        f'server_name: TLSHUB\nleafnodes {{ port: {lp}, tls {{ cert_file: "{pki.server_cert}", '
        f'key_file: "{pki.server_key}" }} }}\n'
    )
    hub = start_server("reference", tmp_path, config=str(cfg), jetstream=False)
    try:
        tls = tls_mod.TLSOptions(ca_file=pki.ca_file)
        opts = leaf_options(lp, tmp_path, jetstream=False, url=f"nats-leaf://localhost:{lp}", tls=tls)
        async with running_server(options=opts) as edge:
            await wait_for(lambda: linked(edge), what="TLS leaf link")
            edge_nc = await nats.connect(edge.client_url)
            hub_nc = await nats.connect(hub.url)
            try:

                async def svc(m):
                    await m.respond(b"tls:" + m.data)

                await edge_nc.subscribe("svc.tls", cb=svc)
                await edge_nc.flush()
                await propagated(hub_nc, "svc.tls")
                assert (await hub_nc.request("svc.tls", b"x", timeout=5)).data == b"tls:x"
            finally:
                await edge_nc.close()
                await hub_nc.close()
        caplog_logger = logging.getLogger("natsd")
        records: list[str] = []
        h = logging.Handler()
        h.emit = lambda r: records.append(r.getMessage())
        caplog_logger.addHandler(h)
        try:
            async with running_server(options=leaf_options(lp, tmp_path / "p", jetstream=False)) as edge:
                await wait_for(
                    lambda: any("TLS configuration mismatch" in r for r in records), what="plaintext remote refused"
                )
                assert not linked(edge)
        finally:
            caplog_logger.removeHandler(h)
    finally:
        hub.stop()


async def test_natsd_hub_sources_natsd_edge_work_queue(tmp_path):
    """natsd on both ends: the hub's stream sources the edge's work queue across a link cut."""
    from nats.js.api import ExternalStream, RetentionPolicy, StreamConfig, StreamSource

    async with running_server(options=hub_options(tmp_path)) as hubd:
        async with running_server(options=leaf_options(hubd.leafnodes.port, tmp_path)) as edge:
            await wait_for(lambda: linked(edge) and linked(hubd), what="natsd link")
            edge_nc = await nats.connect(edge.client_url)
            hub_nc = await nats.connect(hubd.client_url)
            try:
                edge_js = edge_nc.jetstream()
                hub_js = hub_nc.jetstream()
                await edge_js.add_stream(name="WQ", subjects=["wq.>"], retention=RetentionPolicy.WORK_QUEUE)
                await propagated(hub_nc, "$JS.EDGE.API.INFO")
                await hub_js.add_stream(
                    StreamConfig(
                        name="MOVED", sources=[StreamSource(name="WQ", external=ExternalStream(api="$JS.EDGE.API"))]
                    )
                )
                n = 3000
                for i in range(n):
                    await edge_nc.publish("wq.x", str(i).encode())
                    if i == n // 2:
                        for c in list(edge.leafnodes.connections.values()):
                            c.close("Client Closed")
                await edge_js.publish("wq.x", b"-1")

                async def moved():
                    h = await hub_js.stream_info("MOVED")
                    e = await edge_js.stream_info("WQ")
                    return h.state.messages == n + 1 and e.state.messages == 0

                await wait_for(moved, timeout=60, what="work queue moved to the natsd hub")
                sub = await hub_js.subscribe("wq.>", ordered_consumer=True, stream="MOVED")
                got = [int((await sub.next_msg(timeout=5)).data) for _ in range(n + 1)]
                assert sorted(got) == [-1, *range(n)]
            finally:
                await edge_nc.close()
                await hub_nc.close()


@pytest.mark.timeout(120)
async def test_hub_mirrors_and_sources_edge_limits_stream_at_level_4(tmp_path, monkeypatch):
    """With natsd at API level 5 (unpatched), a 2.15.1 hub's mirror and source of an edge *limits*
    stream get ephemeral consumers with a random suffix on their stable names (no upgrade), and
    both copies fill."""
    from nats.js.api import ExternalStream, StreamConfig, StreamSource

    lp = free_port()
    hub = start_server("reference", tmp_path, config=hub_config(tmp_path, lp, domain="HUB"), jetstream=False)
    try:
        async with running_server(options=leaf_options(lp, tmp_path)) as edge:
            await wait_for(lambda: linked(edge), what="leaf link")
            edge_nc = await nats.connect(edge.client_url)
            hub_nc = await nats.connect(hub.url)
            try:
                edge_js = edge_nc.jetstream()
                hub_js = hub_nc.jetstream()
                await edge_js.add_stream(name="EL", subjects=["el.>"])
                for i in range(50):
                    await edge_js.publish(f"el.{i % 2}", str(i).encode())
                await propagated(hub_nc, "$JS.EDGE.API.INFO")
                ext = ExternalStream(api="$JS.EDGE.API")
                await hub_js.add_stream(StreamConfig(name="HM", mirror=StreamSource(name="EL", external=ext)))
                await hub_js.add_stream(StreamConfig(name="HS", sources=[StreamSource(name="EL", external=ext)]))
                for i in range(50, 100):
                    await edge_js.publish(f"el.{i % 2}", str(i).encode())
                await wait_for(lambda: _count(hub_js, "HM", 100), timeout=30, what="mirror filled")
                await wait_for(lambda: _count(hub_js, "HS", 100), timeout=30, what="source filled")
                r = await edge_nc.request("$JS.API.CONSUMER.NAMES.EL", b"", timeout=5)
                names = sorted(json.loads(r.data)["consumers"])
                assert len(names) == 2, names
                assert names[0].startswith("JS_MIRROR_") and names[1].startswith("JS_SRC_")
                assert all(len(n.rsplit("-", 1)[1]) == 8 for n in names), names
            finally:
                await edge_nc.close()
                await hub_nc.close()
    finally:
        hub.stop()


@pytest.mark.timeout(150)
async def test_hub_source_notices_a_recreated_edge_stream_by_its_identity(tmp_path):
    """API level 5: a 2.15.1 hub sourcing an edge stream sends the identity it saw
    (``Nats-Stream-Identity``); when the edge stream is deleted and created again, natsd refuses
    the hub's next consumer create with 10225, and the hub starts over on the new stream (at
    level 4 it asked for the old next sequence and missed the new stream's first messages)."""
    from nats.js.api import ExternalStream, StreamConfig, StreamSource

    lp = free_port()
    hub = start_server("reference", tmp_path, config=hub_config(tmp_path, lp, domain="HUB"), jetstream=False)
    try:
        async with running_server(options=leaf_options(lp, tmp_path)) as edge:
            await wait_for(lambda: linked(edge), what="leaf link")
            edge_nc = await nats.connect(edge.client_url)
            hub_nc = await nats.connect(hub.url)
            try:
                edge_js = edge_nc.jetstream()
                hub_js = hub_nc.jetstream()
                await edge_js.add_stream(name="ER", subjects=["er.>"])
                for i in range(10):
                    await edge_js.publish("er.x", b"old%d" % i)
                await propagated(hub_nc, "$JS.EDGE.API.INFO")
                ext = ExternalStream(api="$JS.EDGE.API")
                await hub_js.add_stream(StreamConfig(name="HS", sources=[StreamSource(name="ER", external=ext)]))
                await wait_for(lambda: _count(hub_js, "HS", 10), timeout=30, what="source filled")
                await edge_js.delete_stream("ER")
                await edge_js.add_stream(name="ER", subjects=["er.>"])
                for i in range(5):
                    await edge_js.publish("er.x", b"new%d" % i)
                await wait_for(lambda: _count(hub_js, "HS", 15), timeout=90, what="the recreated stream sourced")
                last = await hub_js.get_last_msg("HS", "er.x")
                assert last.data == b"new4"
            finally:
                await edge_nc.close()
                await hub_nc.close()
    finally:
        hub.stop()
