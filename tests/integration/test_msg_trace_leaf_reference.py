"""Message tracing over leafnode links (ADR-41, issue 29): a traced message that leaves over a
leafnode link gets an egress event of kind 4 (LEAF) naming the hop, the copy on the link carries
``Nats-Trace-Hop``, and the server on the other side publishes its own trace event (ingress of kind
LEAF, the hop in the request headers). The same two-server script runs on nats-server on both ends
(the expected events), on natsd on both ends, and on each mix."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from pathlib import Path

import nats
import pytest

from natsd.config.options import options_from_file
from tests.helpers.inproc import running_server
from tests.helpers.servers import free_port, reference_binary, start_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.timeout(90),
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]

_SERVER_KEEP = {"name"}
_EVENT_VOLATILE = {"ts", "cid"}


def _shape(ev: dict) -> dict:
    events = [{k: v for k, v in e.items() if k not in _EVENT_VOLATILE} for e in ev["events"]]
    head = [e for e in events if e["type"] in ("in", "sm")]
    rest = sorted((e for e in events if e["type"] not in ("in", "sm")), key=lambda e: json.dumps(e, sort_keys=True))
    out = {
        "server": {k: v for k, v in ev["server"].items() if k in _SERVER_KEEP},
        "request": ev["request"],
        "events": head + rest,
    }
    if "hops" in ev:
        out["hops"] = ev["hops"]
    return out


@contextlib.asynccontextmanager
async def _server(kind: str, tmp: Path, name: str, text: str):
    tmp.mkdir(parents=True, exist_ok=True)
    conf = tmp / f"{name}.conf"
    conf.write_text(text)
    if kind == "reference":
        srv = start_server("reference", tmp, config=conf, jetstream=False)
        try:
            yield srv.url
        finally:
            srv.stop()
    else:
        opts = options_from_file(str(conf))
        opts.host, opts.port, opts.http_port = "127.0.0.1", 0, 0
        async with running_server(options=opts) as s:
            yield s.client_url


async def _until(cond, what: str, poke=None) -> None:
    for _ in range(250):
        if cond():
            return
        if poke is not None:
            await poke()
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def _script(hub_url: str, leaf_url: str) -> list[str]:
    pub = await nats.connect(leaf_url, name="pub")
    lsub = await nats.connect(leaf_url, name="lsub")
    hsub = await nats.connect(hub_url, name="hsub")
    try:
        traces: list[dict] = []
        got: dict[str, list[str]] = {"h": [], "l": []}

        async def on_trace(m):
            if m.subject != "tr.probe":
                traces.append(json.loads(m.data))

        await pub.subscribe("tr.>", cb=on_trace)
        await hsub.subscribe("work", cb=functools.partial(_note, got["h"]))
        await lsub.subscribe("work", cb=functools.partial(_note, got["l"]))
        probe = await pub.subscribe("tr.probe")
        for nc in (pub, lsub, hsub):
            await nc.flush()
        # Interest has crossed both ways when an untraced message does.
        await _until(lambda: len(got["h"]) > 0, "hub interest", lambda: pub.publish("work", b"probe"))
        await _until(lambda: probe.pending_msgs > 0, "leaf interest", lambda: hsub.publish("tr.probe", b""))
        got["h"].clear()
        got["l"].clear()
        await pub.publish("work", b"hello", headers={"Nats-Trace-Dest": "tr.1"})
        await pub.publish("work", b"hello", headers={"Nats-Trace-Dest": "tr.2", "Nats-Trace-Only": "true"})
        await hsub.publish("work", b"hello", headers={"Nats-Trace-Dest": "tr.3"})
        for nc in (pub, hsub):
            await nc.flush()
        await _until(lambda: len(traces) >= 6, "six trace events")
        await asyncio.sleep(0.2)
        return sorted(json.dumps(_shape(t), sort_keys=True) for t in traces) + [
            json.dumps({k: sorted(v) for k, v in got.items()}, sort_keys=True)
        ]
    finally:
        for nc in (pub, lsub, hsub):
            await nc.close()


async def _note(into: list, m) -> None:
    h = m.headers or {}
    into.append(f"{h.get('Nats-Trace-Dest', '-')}/{h.get('Nats-Trace-Hop', '-')}")


async def _run(tmp: Path, hub_kind: str, leaf_kind: str) -> list[str]:
    lp = free_port()
    hub_conf = f"server_name: HUB\nleafnodes {{ listen: 127.0.0.1:{lp} }}\n"
    leaf_conf = f'server_name: LEAF\nleafnodes {{ remotes: [ {{ url: "nats-leaf://127.0.0.1:{lp}" }} ] }}\n'
    async with _server(hub_kind, tmp / f"hub-{hub_kind}", "hub", hub_conf) as hub_url:
        async with _server(leaf_kind, tmp / f"leaf-{leaf_kind}", "leaf", leaf_conf) as leaf_url:
            return await _script(hub_url, leaf_url)


@pytest.mark.parametrize("hub_kind,leaf_kind", [("natsd", "natsd"), ("reference", "natsd"), ("natsd", "reference")])
async def test_leaf_hops_match_reference(tmp_path, hub_kind, leaf_kind):
    expected = await _run(tmp_path / "ref", "reference", "reference")
    assert sum('"kind": 4' in t for t in expected) >= 3
    got = await _run(tmp_path / "ours", hub_kind, leaf_kind)
    for g, e in zip(got, expected):
        assert json.loads(g) == json.loads(e)
    assert got == expected


async def _script3(hub_url: str, leaf1_url: str, leaf2_url: str) -> list[str]:
    """Published on one leaf, received on the other: two hops (``1`` then ``1.1``)."""
    pub = await nats.connect(leaf1_url, name="pub")
    sub = await nats.connect(leaf2_url, name="far")
    try:
        traces: list[dict] = []
        got: list[str] = []

        async def on_trace(m):
            if m.subject != "tr.probe":
                traces.append(json.loads(m.data))

        await pub.subscribe("tr.>", cb=on_trace)
        await sub.subscribe("work", cb=functools.partial(_note, got))
        probe = await pub.subscribe("tr.probe")
        for nc in (pub, sub):
            await nc.flush()
        await _until(lambda: len(got) > 0, "interest leaf2 -> leaf1", lambda: pub.publish("work", b"probe"))
        await _until(lambda: probe.pending_msgs > 0, "interest leaf1 -> leaf2", lambda: sub.publish("tr.probe", b""))
        got.clear()
        await pub.publish("work", b"hello", headers={"Nats-Trace-Dest": "tr.1"})
        await pub.flush()
        await _until(lambda: len(traces) >= 3, "three trace events")
        await asyncio.sleep(0.2)
        return sorted(json.dumps(_shape(t), sort_keys=True) for t in traces) + [json.dumps(sorted(got))]
    finally:
        await pub.close()
        await sub.close()


async def _run3(tmp: Path, hub_kind: str, leaf_kind: str) -> list[str]:
    lp = free_port()
    hub_conf = f"server_name: HUB\nleafnodes {{ listen: 127.0.0.1:{lp} }}\n"

    def leaf_conf(name: str) -> str:
        return f'server_name: {name}\nleafnodes {{ remotes: [ {{ url: "nats-leaf://127.0.0.1:{lp}" }} ] }}\n'

    async with _server(hub_kind, tmp / "hub", "hub", hub_conf) as hub_url:
        async with _server(leaf_kind, tmp / "l1", "l1", leaf_conf("L1")) as l1:
            async with _server(leaf_kind, tmp / "l2", "l2", leaf_conf("L2")) as l2:
                return await _script3(hub_url, l1, l2)


@pytest.mark.parametrize("hub_kind,leaf_kind", [("natsd", "natsd"), ("natsd", "reference"), ("reference", "natsd")])
async def test_two_hops_are_numbered_as_the_reference(tmp_path, hub_kind, leaf_kind):
    expected = await _run3(tmp_path / "ref", "reference", "reference")
    assert any('"hop": "1.1"' in t for t in expected)
    got = await _run3(tmp_path / "ours", hub_kind, leaf_kind)
    for g, e in zip(got, expected):
        assert json.loads(g) == json.loads(e)
    assert got == expected


async def _script_perms(hub_url: str, leaf_url: str) -> dict:
    """Traced messages whose destination the link's permissions refuse are not delivered on the
    far side (nats-server's leafSendAllowed on the hub, leafReceiveAllowed on the leaf)."""
    host = hub_url.split("//", 1)[1]
    hub = await nats.connect(f"nats://c:c@{host}", name="hub")
    leaf = await nats.connect(leaf_url, name="leaf")
    got: dict[str, list[str]] = {"h": [], "l": [], "trace": []}
    try:

        async def on_trace(m):
            got["trace"].append(f"{m.subject} from {json.loads(m.data)['server']['name']}")

        async def on_up(m):
            await _note(got["h"], m)

        async def on_down(m):
            await _note(got["l"], m)

        await hub.subscribe("up", cb=on_up)
        await leaf.subscribe("down", cb=on_down)
        for nc in (hub, leaf):
            await nc.subscribe("tr.>", cb=on_trace)
            await nc.flush()
        await _until(lambda: got["h"], "hub interest", lambda: leaf.publish("up", b"probe"))
        await _until(lambda: got["l"], "leaf interest", lambda: hub.publish("down", b"probe"))
        await asyncio.sleep(0.2)
        for v in got.values():
            v.clear()
        await leaf.publish("up", b"x", headers={"Nats-Trace-Dest": "tr.pub.denied"})  # the hub refuses
        await leaf.publish("up", b"x", headers={"Nats-Trace-Dest": "tr.ok"})
        await hub.publish("down", b"x", headers={"Nats-Trace-Dest": "tr.sub.denied"})  # the leaf refuses
        await hub.publish("down", b"x", headers={"Nats-Trace-Dest": "tr.ok2"})
        for nc in (hub, leaf):
            await nc.flush()
        await asyncio.sleep(0.6)
        return {k: sorted(v) for k, v in got.items()}
    finally:
        for nc in (hub, leaf):
            await nc.close()


async def _run_perms(tmp: Path, hub_kind: str, leaf_kind: str) -> dict:
    lp = free_port()
    hub_conf = (
        "server_name: HUB\nauthorization { users: [\n"
        '  { user: leaf, password: leaf, permissions: { publish: { deny: ["tr.pub.denied"] }, '
        'subscribe: { deny: ["tr.sub.denied"] } } }\n  { user: c, password: c }\n] }\n'
        f"leafnodes {{ listen: 127.0.0.1:{lp} }}\n"
    )
    leaf_conf = f'server_name: LEAF\nleafnodes {{ remotes: [ {{ url: "nats-leaf://leaf:leaf@127.0.0.1:{lp}" }} ] }}\n'
    async with _server(hub_kind, tmp / f"hub-{hub_kind}", "hub", hub_conf) as hub_url:
        async with _server(leaf_kind, tmp / f"leaf-{leaf_kind}", "leaf", leaf_conf) as leaf_url:
            return await _script_perms(hub_url, leaf_url)


@pytest.mark.parametrize("hub_kind,leaf_kind", [("natsd", "natsd"), ("reference", "natsd"), ("natsd", "reference")])
async def test_trace_destination_refused_by_the_link(tmp_path, hub_kind, leaf_kind):
    expected = await _run_perms(tmp_path / "ref", "reference", "reference")
    assert expected["h"] == ["tr.ok/1"] and expected["l"] == ["tr.ok2/1"]
    got = await _run_perms(tmp_path / "ours", hub_kind, leaf_kind)
    assert got == expected
