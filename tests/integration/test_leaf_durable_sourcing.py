"""natsd as the *sourcing* side of durable sourcing across a leaf link (API level 4): its stream
sources a work-queue stream on the other side of the link, which the link's abrupt cuts must not
make lose or duplicate anything. The origin is natsd (natsd on both ends) or nats-server 2.15.1
(natsd's edge sources the hub's work queue); either way the origin upgrades natsd's request to a
durable acked by natsd's flow-control replies."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.helpers.inproc import running_server
from tests.helpers.servers import free_port, start_server
from tests.integration.test_leafnodes import (
    cut_links,
    hub_config,
    hub_options,
    leaf_options,
    linked,
    propagated,
    wait_for,
)
from tests.helpers.servers import reference_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]

N = 6000


async def _move(origin_nc, target_nc, cut_server, api: str, origin_subject: str, target_server=None) -> None:
    """Source the origin's work-queue stream ``WQ`` into the target's ``MOVED`` through ``api``
    while publishing N messages at the origin and cutting ``cut_server``'s links three times
    (aborted, after a partition); then check exactly-once and an empty origin.

    ``target_server``: the in-process natsd holding ``MOVED`` when ``cut_server`` is not the
    origin's side. What such a cut loses is what the target did not read (nothing it wrote), so
    the proof that a cut fell while messages flowed is that natsd's link saw a gap in the
    deliveries and set its consumer up again."""
    from nats.js.api import ExternalStream, RetentionPolicy, StreamConfig, StreamSource

    ojs, tjs = origin_nc.jetstream(), target_nc.jetstream()
    await ojs.add_stream(name="WQ", subjects=[f"{origin_subject}.>"], retention=RetentionPolicy.WORK_QUEUE)
    await propagated(target_nc, f"{api}.INFO")
    await tjs.add_stream(
        StreamConfig(name="MOVED", sources=[StreamSource(name="WQ", external=ExternalStream(api=api))])
    )

    async def consumer_names():
        r = await origin_nc.request("$JS.API.CONSUMER.NAMES.WQ", b"", timeout=5)
        return json.loads(r.data).get("consumers") or []

    await wait_for(consumer_names, what="the sourcing consumer")
    (name,) = await consumer_names()
    gaps: list[int] = []
    if target_server is not None:
        link = target_server.jetstream.accounts["$G"].streams["MOVED"]._links[0]
        real_retry = link._retry

        def counted() -> None:
            gaps.append(link.dseq)
            real_retry()

        link._retry = counted
    info = json.loads((await origin_nc.request(f"$JS.API.CONSUMER.INFO.WQ.{name}", b"", timeout=5)).data)
    # natsd asked for a sourcing consumer under a stable name; the origin made it a durable
    # acked by flow control (raw API: nats-py has no ack policy "flow_control").
    assert name.startswith("JS_SRC_") and info["config"]["durable_name"] == name, info
    assert info["config"]["ack_policy"] == "flow_control" and info["config"].get("sourcing") is True

    cuts = {N // 4, N // 2, 3 * N // 4}
    cutting: list[asyncio.Task] = []
    for i in range(N):
        if i % 200 == 199:
            await ojs.publish(f"{origin_subject}.{i % 3}", str(i).encode())
            await asyncio.sleep(0.02)  # paced, so the cuts fall while messages flow
        else:
            await origin_nc.publish(f"{origin_subject}.{i % 3}", str(i).encode())
        if i in cuts:
            await wait_for(lambda: linked(cut_server), what="leaf link back")
            cutting.append(asyncio.create_task(cut_links(cut_server, graceful=False, partition_s=0.5)))
    lost = sum(await asyncio.gather(*cutting))
    if target_server is None:
        assert lost > 0, "no cut fell while messages were flowing: the test proves nothing"
    await ojs.publish(f"{origin_subject}.0", b"-1")

    async def drained():
        try:
            t = await tjs.stream_info("MOVED")
            o = await ojs.stream_info("WQ")
        except Exception:
            return False
        return o.state.messages == 0 and t.state.messages == N + 1

    await wait_for(drained, timeout=90, what="work queue moved")
    if target_server is not None:
        assert gaps, "no delivery was lost to a cut: the test proves nothing"
    assert await consumer_names() == [name]  # the same durable throughout
    sub = await tjs.subscribe(f"{origin_subject}.>", ordered_consumer=True, stream="MOVED")
    counts: dict[int, int] = {}
    for _ in range(N + 1):
        k = int((await sub.next_msg(timeout=10)).data)
        counts[k] = counts.get(k, 0) + 1
    assert sorted(counts) == [-1, *range(N)] and max(counts.values()) == 1


@pytest.mark.timeout(240)
async def test_natsd_hub_sources_natsd_edge_work_queue_across_aborted_cuts(tmp_path):
    async with running_server(options=hub_options(tmp_path)) as hubd:
        async with running_server(options=leaf_options(hubd.leafnodes.port, tmp_path)) as edge:
            await wait_for(lambda: linked(edge) and linked(hubd), what="natsd link")
            edge_nc = await nats.connect(edge.client_url)
            hub_nc = await nats.connect(hubd.client_url)
            try:
                await _move(edge_nc, hub_nc, edge, "$JS.EDGE.API", "wq")
            finally:
                await edge_nc.close()
                await hub_nc.close()


@pytest.mark.timeout(240)
async def test_natsd_edge_sources_nats_server_work_queue_across_aborted_cuts(tmp_path):
    """The other way round: the origin is a nats-server 2.15.1 hub's work queue, natsd's edge
    stream sources it (nats-server upgrades natsd's level-4 request as it does its own)."""
    lp = free_port()
    hub = start_server("reference", tmp_path, config=hub_config(tmp_path, lp, domain="HUB"), jetstream=False)
    try:
        async with running_server(options=leaf_options(lp, tmp_path)) as edge:
            await wait_for(lambda: linked(edge), what="leaf link")
            edge_nc = await nats.connect(edge.client_url)
            hub_nc = await nats.connect(hub.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
            try:
                await _move(hub_nc, edge_nc, edge, "$JS.HUB.API", "hq", target_server=edge)
            finally:
                await edge_nc.close()
                await hub_nc.close()
    finally:
        hub.stop()
