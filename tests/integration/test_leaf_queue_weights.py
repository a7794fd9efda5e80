"""Queue weights across leafnode links (``LS+ <subject> <queue> <weight>``), side by side with nats-server.

A hub with three nats-server leafs: L1 runs 3 members of queue group ``workers`` on ``jobs``, L2 runs 1, L3 none.
Messages published where no member is local (a hub client, a client of L3) go to one leaf per message, in
proportion to the weights the leafs announced, as nats-server does (its leafnode queue subscriptions count as
``weight`` members). The same script runs with nats-server and with natsd as the hub. natsd also passes the
summed weight on: L3's link is told ``workers`` has 4 members.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request

import nats
import pytest

from natsd.config.leafnodes import LeafNodeOptions
from natsd.config.options import ServerOptions
from tests.helpers.inproc import running_server
from tests.helpers.servers import free_port, reference_binary, start_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]

N = 4000


def _leafz(http: int) -> list:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/leafz", timeout=2) as r:
            return json.loads(r.read())["leafs"]
    except OSError:
        return []


async def _until(pred, what: str, timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await asyncio.to_thread(pred):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def _scenario(tmp_path, hub_url: str, leaf_port: int, http: int, on_linked=None) -> dict:
    leafs = []
    for name in ("L1", "L2", "L3"):
        cfg = tmp_path / f"{name}.conf"
        cfg.write_text(
            f'server_name: {name}\nleafnodes {{ remotes: [ {{ url: "nats-leaf://127.0.0.1:{leaf_port}" }} ] }}\n'
        )
        leafs.append(start_server("reference", tmp_path / name, config=str(cfg), jetstream=False))
    ncs = []
    try:
        await _until(lambda: len(_leafz(http)) == 3, "three leafs linked")
        got = {"L1": 0, "L2": 0}

        def counter(name):
            async def cb(_m):
                got[name] += 1

            return cb

        for name, leaf, members in (("L1", leafs[0], 3), ("L2", leafs[1], 1)):
            nc = await nats.connect(leaf.url)
            ncs.append(nc)
            for _ in range(members):
                await nc.subscribe("jobs", queue="workers", cb=counter(name))
            await nc.flush()
        hub_nc = await nats.connect(hub_url)
        l3_nc = await nats.connect(leafs[2].url)
        ncs += [hub_nc, l3_nc]
        # Interest has crossed when a probe from each publisher lands somewhere.
        for pub in (hub_nc, l3_nc):
            before = sum(got.values())
            while sum(got.values()) == before:
                await pub.publish("jobs", b"probe")
                await pub.flush()
                await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # the weight updates (LS+ ... 2, 3) follow the first LS+
        extra = on_linked() if on_linked else {}
        out = {}
        for label, pub in (("from_hub", hub_nc), ("from_leaf", l3_nc)):
            for k in got:
                got[k] = 0
            for i in range(N):
                await pub.publish("jobs", b"%d" % i)
            await pub.flush()
            deadline = asyncio.get_running_loop().time() + 20
            while sum(got.values()) < N and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)
            out[label] = dict(got)
        out.update(extra)
        return out
    finally:
        for nc in ncs:
            await nc.close()
        for leaf in leafs:
            leaf.stop()


@pytest.mark.timeout(120)
async def test_queue_members_across_links_are_picked_by_weight(tmp_path):
    # nats-server as the hub.
    lp, http = free_port(), free_port()
    cfg = tmp_path / "hub.conf"
    cfg.write_text(f"server_name: HUB\nhttp_port: {http}\nleafnodes {{ port: {lp} }}\n")
    (tmp_path / "ref").mkdir()
    hub = start_server("reference", tmp_path / "ref", config=str(cfg), jetstream=False)
    try:
        ref = await _scenario(tmp_path / "ref", hub.url, lp, http)
    finally:
        hub.stop()
    # natsd as the hub (in process: the weight it passes on to L3 is checked too).
    opts = ServerOptions(host="127.0.0.1", port=0, http_port=-1, server_name="HUB")
    opts.leafnodes = LeafNodeOptions(host="127.0.0.1", port=-1)
    (tmp_path / "natsd").mkdir()
    async with running_server(options=opts) as hubd:

        def announced():
            return {c.remote_name: c.smap.get(("jobs", "workers"), 0) for c in hubd.leafnodes.connections.values()}

        ours = await _scenario(
            tmp_path / "natsd",
            hubd.client_url,
            hubd.leafnodes.port,
            hubd.http_port,
            on_linked=lambda: {"announced": announced()},
        )
    for label in ("from_hub", "from_leaf"):
        for side, o in (("nats-server", ref), ("natsd", ours)):
            counts = o[label]
            assert sum(counts.values()) == N, (side, label, counts)
            share = counts["L1"] / N
            # 3 of the 4 members are behind L1's link: ~75% (binomial sd ~0.7% at N=4000).
            assert 0.70 < share < 0.80, (side, label, counts)
    # What each link is told: the members the others stand for (L3 sees 3 + 1; L1 sees L2's 1).
    assert ours["announced"] == {"L1": 1, "L2": 3, "L3": 4}, ours["announced"]
