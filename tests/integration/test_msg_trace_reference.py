"""Message tracing (ADR-41, issue 29): the same configuration and client script against
nats-server and natsd; the trace events must have the same JSON shape (ids, timestamps and the
server's identity aside)."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest
from nats.js.api import StreamConfig, SubjectTransform

from natsd.server import msgtrace
from tests.helpers.inproc import side_by_side

pytestmark = [pytest.mark.integration, pytest.mark.reference, pytest.mark.timeout(60)]

CONFIG = """
mappings { "bar": "foo" }
accounts {
  A {
    users [{user: a, password: a, permissions: {publish: {deny: ["secret", "tr.denied"]}}}]
    jetstream: enabled
    mappings { "bar": "foo" }
    msg_trace { dest: "tr.sampled", sampling: 100 }
  }
}
"""

# Server fields that identify the instance, and event fields that are ids or times.
_SERVER_VOLATILE = {"name", "host", "id", "ver", "seq", "time", "feature_flags", "flags"}
_EVENT_VOLATILE = {"ts", "cid"}
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _shape(ev: dict) -> dict:
    ev = dict(ev)
    ev["server"] = {k: v for k, v in ev["server"].items() if k not in _SERVER_VOLATILE}
    events = [{k: v for k, v in e.items() if k not in _EVENT_VOLATILE} for e in ev["events"]]
    # Ingress and mapping come first; the order of the other events follows the order of the
    # matching subscriptions, which nats-server keeps in a Go map (random): compare them as a set.
    head = [e for e in events if e["type"] in ("in", "sm")]
    rest = sorted((e for e in events if e["type"] not in ("in", "sm")), key=lambda e: json.dumps(e, sort_keys=True))
    ev["events"] = head + rest
    return ev


async def _script(url: str) -> dict:
    host = url.split("//", 1)[1]
    nc = await nats.connect(f"nats://a:a@{host}", name="tracer")
    other = await nats.connect(f"nats://a:a@{host}", no_echo=True)
    try:
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["foo"])
        await js.add_stream(
            StreamConfig(name="T", subjects=["in.*"], subject_transform=SubjectTransform(src="in.*", dest="out.$1"))
        )
        traces: list[dict] = []
        delivered: list[tuple] = []

        async def on_trace(m):
            traces.append(json.loads(m.data))

        async def on_msg(m):
            delivered.append((m.subject, dict(m.headers or {})))

        await nc.subscribe("tr.>", cb=on_trace)
        await nc.subscribe("foo", cb=on_msg, queue="q")
        await other.subscribe("foo", cb=on_msg)
        await nc.flush()
        await other.flush()
        steps = [
            ("bar", {"Nats-Trace-Dest": "tr.1", "X": "1"}),  # mapped, captured, delivered
            ("bar", {"Nats-Trace-Dest": "tr.2", "Nats-Trace-Only": "true"}),  # traced, not delivered
            ("nothing", {"Nats-Trace-Dest": "tr.3"}),  # no receiver
            ("secret", {"Nats-Trace-Dest": "tr.4"}),  # publish denied
            ("foo", {"Nats-Trace-Dest": "tr.denied"}),  # destination denied: not delivered
            ("foo", {"traceparent": PARENT}),  # sampled by the account's msg_trace
            ("foo", {"traceparent": PARENT[:-2] + "00"}),  # not sampled (flags 00)
            ("in.x", {"Nats-Trace-Dest": "tr.5"}),  # stored under the stream's transformed subject
        ]
        for subject, headers in steps:
            await nc.publish(subject, b"hello", headers=headers)
            await nc.flush()
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        info = await js.stream_info("S")
        return {
            "traces": sorted((json.dumps(_shape(t), sort_keys=True) for t in traces)),
            "delivered": sorted(delivered, key=lambda d: json.dumps(d, sort_keys=True)),
            "stored": info.state.messages,
        }
    finally:
        await nc.close()
        await other.close()


async def test_trace_events_match_reference(tmp_path, monkeypatch):
    monkeypatch.setattr(msgtrace, "sample_rand", lambda n: 0)
    expected, got = await side_by_side(tmp_path, _script, config=CONFIG)
    assert len(expected["traces"]) == 6  # tr.1 to tr.5 and the sampled traceparent
    assert any('"subject": "out.x"' in t for t in expected["traces"])
    assert expected["stored"] == 3  # neither the trace-only nor the denied-destination message is stored
    for g, e in zip(got["traces"], expected["traces"]):
        assert json.loads(g) == json.loads(e)
    assert got == expected


async def _queue_script(url: str) -> list[bool]:
    """Traced messages to a queue group of two connections: does each egress name the member that
    got the message?"""
    host = url.split("//", 1)[1]
    pub = await nats.connect(f"nats://a:a@{host}", name="pub")
    members = [await nats.connect(f"nats://a:a@{host}", name=f"m{i}") for i in range(2)]
    try:
        traces: dict[str, dict] = {}
        got: dict[str, str] = {}

        async def on_trace(m):
            traces[m.subject] = json.loads(m.data)

        for i, nc in enumerate(members):

            async def on_msg(m, name=f"m{i}"):
                got[m.headers["Nats-Trace-Dest"]] = name

            await nc.subscribe("work", cb=on_msg, queue="q")
            await nc.flush()
        await pub.subscribe("tr.>", cb=on_trace)
        await pub.flush()
        for i in range(12):
            await pub.publish("work", b"x", headers={"Nats-Trace-Dest": f"tr.{i}"})
        await pub.flush()
        for _ in range(100):
            if len(traces) == 12 and len(got) == 12:
                break
            await asyncio.sleep(0.02)
        named = []
        for dest, ev in sorted(traces.items()):
            eg = [e for e in ev["events"] if e["type"] == "eg"]
            named.append(len(eg) == 1 and eg[0]["name"] == got.get(dest))
        return named
    finally:
        await pub.close()
        for nc in members:
            await nc.close()


async def test_queue_egress_names_the_receiving_member(tmp_path):
    expected, got = await side_by_side(tmp_path, _queue_script, config=CONFIG)
    assert expected == [True] * 12
    assert got == expected
