"""S2 compression of leafnode links, against nats-server 2.15.1 on the other end (both roles).

Each case configures a mode on each side, checks the mode each side reports in ``/leafz`` (the
reference's negotiation: each side writes with its own mode, ``accept`` takes the other's,
``off`` on either side turns it off), and moves compressible and incompressible messages both
ways, so natsd's Snappy-framed writer is read by Go's ``s2.NewReader`` and Go's S2 writer (with
the repeat copies ``s2_fast``/``better``/``best`` emit) by natsd's reader.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request

import nats
import pytest

from natsd.config.leafnodes import LeafNodeOptions, RemoteLeafOptions
from natsd.config.options import ServerOptions
from tests.helpers.inproc import running_server
from tests.helpers.servers import free_port, reference_binary, start_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]

LEVELS = ("s2_uncompressed", "s2_fast", "s2_better", "s2_best")


def _leafz(port: int) -> list:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/leafz", timeout=5) as r:
        return json.loads(r.read())["leafs"]


async def _wait(pred, what: str, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def _linked(server) -> bool:
    return any(c.ready for c in server.leafnodes.connections.values())


async def _exchange(nc_a, nc_b) -> None:
    """Messages both ways (compressible, random, with headers, one of 300 KB) and request/reply."""
    payloads = [b"abcdefgh" * 500 + str(i).encode() for i in range(30)] + [os.urandom(2000), os.urandom(300_000)]
    for pub, sub_nc, subject in ((nc_a, nc_b, "a.to.b"), (nc_b, nc_a, "b.to.a")):
        sub = await sub_nc.subscribe(subject)
        await sub_nc.flush()
        # Interest crosses asynchronously: probe until the first message arrives.
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            await pub.publish(subject, b"probe")
            try:
                await sub.next_msg(timeout=0.2)
                break
            except nats.errors.TimeoutError:
                assert asyncio.get_running_loop().time() < deadline, "no interest crossed"
        await asyncio.sleep(0.2)
        while True:
            try:
                await sub.next_msg(timeout=0.1)
            except nats.errors.TimeoutError:
                break
        for p in payloads:
            await pub.publish(subject, p, headers={"K": "v" * 40})
        await pub.flush()
        got = [await sub.next_msg(timeout=5) for _ in payloads]
        assert [m.data for m in got] == payloads
        assert got[0].headers == {"K": "v" * 40}
        await sub.unsubscribe()

    async def svc(m):
        await m.respond(m.data[::-1] * 3)

    await nc_b.subscribe("svc", cb=svc)
    await nc_b.flush()
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        try:
            r = await nc_a.request("svc", b"0123456789" * 100, timeout=0.5)
            break
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            assert asyncio.get_running_loop().time() < deadline
    assert r.data == b"9876543210" * 300


def _hub_conf(tmp_path, leaf_port: int, http_port: int, mode: str | None, extra: str = "") -> str:
    p = tmp_path / f"hub-{leaf_port}.conf"
    comp = f"compression: {mode}" if mode else ""
    p.write_text(f"server_name: HUB\nhttp_port: {http_port}\nleafnodes {{\n port: {leaf_port}\n {comp}\n}}\n{extra}\n")
    return str(p)


# (hub mode, natsd leaf mode, what the hub reports, what natsd reports); None: the default (s2_auto)
LEAF_CASES = [
    ("s2_best", "s2_fast", "s2_best", "s2_fast"),
    ("s2_fast", "s2_better", "s2_fast", "s2_better"),
    ("accept", "s2_better", "s2_better", "s2_better"),
    ("s2_better", "accept", "s2_better", "s2_better"),
    (None, None, LEVELS, LEVELS),
    ("s2_best", "off", "off", "off"),
    ("off", None, "off", "off"),
    ("accept", "accept", "off", "off"),
]


@pytest.mark.parametrize("hub_mode,leaf_mode,hub_sees,leaf_sees", LEAF_CASES)
async def test_natsd_leaf_of_nats_server_hub(tmp_path, hub_mode, leaf_mode, hub_sees, leaf_sees):
    lp, hp = free_port(), free_port()
    hub = start_server("reference", tmp_path, config=_hub_conf(tmp_path, lp, hp, hub_mode), jetstream=False)
    o = ServerOptions(host="127.0.0.1", port=0, http_port=-1, server_name="EDGE")
    remote = RemoteLeafOptions(urls=[f"nats-leaf://127.0.0.1:{lp}"])
    if leaf_mode:
        remote.compression = leaf_mode
    o.leafnodes = LeafNodeOptions(reconnect_ns=100_000_000, remotes=[remote])
    try:
        async with running_server(options=o) as edge:
            await _wait(lambda: _linked(edge), "link")
            await _wait(lambda: len(_leafz(hp)) == 1, "hub's /leafz")
            mine = edge.leafnodes.leafz()["leafs"][0]["compression"]
            theirs = _leafz(hp)[0]["compression"]
            assert (mine in leaf_sees) if isinstance(leaf_sees, tuple) else mine == leaf_sees
            assert (theirs in hub_sees) if isinstance(hub_sees, tuple) else theirs == hub_sees
            a = await nats.connect(hub.url)
            b = await nats.connect(edge.client_url)
            try:
                await _exchange(a, b)
                await _exchange(b, a)
            finally:
                await a.close()
                await b.close()
            link = next(iter(edge.leafnodes.connections.values()))
            assert link.s2 == (leaf_sees != "off")
    finally:
        hub.stop()


# (natsd hub mode, nats-server leaf mode, what natsd reports, what the leaf reports)
HUB_CASES = [
    ("s2_fast", "s2_best", "s2_fast", "s2_best"),
    (None, "s2_better", LEVELS, "s2_better"),
    ("accept", "s2_fast", "s2_fast", "s2_fast"),
    ("off", "s2_best", "off", "off"),
    ("s2_best", "off", "off", "off"),
]


@pytest.mark.parametrize("hub_mode,leaf_mode,hub_sees,leaf_sees", HUB_CASES)
async def test_nats_server_leaf_of_natsd_hub(tmp_path, hub_mode, leaf_mode, hub_sees, leaf_sees):
    o = ServerOptions(host="127.0.0.1", port=0, http_port=-1, server_name="HUBD")
    o.leafnodes = LeafNodeOptions(host="127.0.0.1", port=-1)
    if hub_mode:
        o.leafnodes.compression = hub_mode
    async with running_server(options=o) as hubd:
        hp = free_port()
        conf = tmp_path / "leaf.conf"
        conf.write_text(
            f"server_name: LEAF\nhttp_port: {hp}\nleafnodes {{ remotes: [ {{ url: "
            f'"nats-leaf://127.0.0.1:{hubd.leafnodes.port}", compression: {leaf_mode} }} ] }}\n'
        )
        leaf = start_server("reference", tmp_path, config=str(conf), jetstream=False)
        try:
            await _wait(lambda: _linked(hubd), "link")
            await _wait(lambda: len(_leafz(hp)) == 1, "leaf's /leafz")
            mine = hubd.leafnodes.leafz()["leafs"][0]["compression"]
            theirs = _leafz(hp)[0]["compression"]
            assert (mine in hub_sees) if isinstance(hub_sees, tuple) else mine == hub_sees
            assert theirs == leaf_sees
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


async def test_natsd_on_both_ends_compressed(tmp_path):
    ho = ServerOptions(host="127.0.0.1", port=0, server_name="HUBD")
    ho.leafnodes = LeafNodeOptions(host="127.0.0.1", port=-1, compression="s2_best")
    async with running_server(options=ho) as hubd:
        eo = ServerOptions(host="127.0.0.1", port=0, server_name="EDGE")
        eo.leafnodes = LeafNodeOptions(
            reconnect_ns=100_000_000,
            remotes=[RemoteLeafOptions(urls=[f"nats-leaf://127.0.0.1:{hubd.leafnodes.port}"], compression="s2_fast")],
        )
        async with running_server(options=eo) as edge:
            await _wait(lambda: _linked(edge) and _linked(hubd), "link")
            assert hubd.leafnodes.leafz()["leafs"][0]["compression"] == "s2_best"
            assert edge.leafnodes.leafz()["leafs"][0]["compression"] == "s2_fast"
            a = await nats.connect(hubd.client_url)
            b = await nats.connect(edge.client_url)
            try:
                await _exchange(a, b)
            finally:
                await a.close()
                await b.close()


async def test_compressed_link_comes_back_after_hub_restart(tmp_path):
    """A new link negotiates again (a fresh stream, the identifier first)."""
    lp, hp = free_port(), free_port()
    conf = _hub_conf(tmp_path, lp, hp, "s2_best")
    hub = start_server("reference", tmp_path, config=conf, jetstream=False)
    o = ServerOptions(host="127.0.0.1", port=0, server_name="EDGE")
    o.leafnodes = LeafNodeOptions(
        reconnect_ns=100_000_000,
        remotes=[RemoteLeafOptions(urls=[f"nats-leaf://127.0.0.1:{lp}"], compression="s2_fast")],
    )
    try:
        async with running_server(options=o) as edge:
            await _wait(lambda: _linked(edge), "link")
            hub.stop()
            await _wait(lambda: not _linked(edge), "link down")
            hub = start_server("reference", tmp_path / "again", config=conf, jetstream=False, port=hub.port)
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
