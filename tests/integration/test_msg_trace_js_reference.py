"""Message tracing into JetStream (ADR-41, issue 29): the ``js`` event reports what the stream did
with a traced message as nats-server's processJetStreamMsg does: the subject it is stored under,
``nointerest`` (an interest stream without a consumer for it: not stored), and the error of a
refusal (a check, or the store's own, e.g. discard new at max_msgs). A ``Nats-Trace-Only``
message runs the stream's checks but is not stored; a stored traced message keeps its headers
with ``Nats-Trace-Dest: trace disabled``. The same script against nats-server and natsd."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest
from nats.js.api import DiscardPolicy, RetentionPolicy, StreamConfig

from tests.helpers.inproc import side_by_side

pytestmark = [pytest.mark.integration, pytest.mark.reference, pytest.mark.timeout(60)]

_EVENT_VOLATILE = {"ts", "cid"}


def _js_events(ev: dict) -> list[dict]:
    return [{k: v for k, v in e.items() if k not in _EVENT_VOLATILE} for e in ev["events"] if e["type"] == "js"]


async def _script(url: str) -> dict:
    nc = await nats.connect(url, name="tracer")
    try:
        js = nc.jetstream()
        await js.add_stream(name="I", subjects=["int.*"], retention=RetentionPolicy.INTEREST)
        await js.add_stream(StreamConfig(name="L", subjects=["lim"], max_msgs=1, discard=DiscardPolicy.NEW))
        await js.add_stream(name="P", subjects=["plain"])
        await js.add_consumer("I", durable_name="c", filter_subject="int.b")
        traces: dict[str, dict] = {}

        async def on_trace(m):
            traces[m.subject] = json.loads(m.data)

        await nc.subscribe("tr.>", cb=on_trace)
        await nc.flush()
        steps = [
            ("int.a", {}),  # interest stream, nobody interested: nointerest, not stored
            ("int.b", {}),  # a consumer wants it: stored
            ("lim", {}),  # stored (the first of max_msgs 1)
            ("lim", {}),  # discard new: "maximum messages exceeded"
            ("plain", {"Nats-Expected-Last-Sequence": "7"}),  # a check refuses it
            ("plain", {"Nats-Trace-Only": "true", "Nats-Expected-Last-Sequence": "9"}),  # trace-only, refused
            ("plain", {"Nats-Trace-Only": "true"}),  # trace-only: checked, not stored
            ("int.a", {"Nats-Trace-Only": "true"}),  # trace-only still reports nointerest
            ("plain", {"Nats-Msg-Id": "m1"}),  # stored
            ("plain", {"Nats-Msg-Id": "m1"}),  # a duplicate
            ("plain", {"Nats-Expected-Last-Msg-Id": "zz"}),  # wrong last msg id
        ]
        acks = []
        for i, (subject, headers) in enumerate(steps):
            h = {"Nats-Trace-Dest": f"tr.{i}", **headers}
            try:
                resp = await nc.request(subject, b"hello", headers=h, timeout=0.5)
                acks.append(json.loads(resp.data))
            except nats.errors.TimeoutError:
                acks.append(None)  # (a trace-only message that passed is not acknowledged)
        await asyncio.sleep(0.3)
        stored = await js.get_msg("P", 1)
        return {
            "js": {k: _js_events(v) for k, v in sorted(traces.items())},
            "acks": [{k: v for k, v in a.items() if k != "domain"} if a else None for a in acks],
            "counts": [(await js.stream_info(s)).state.messages for s in ("I", "L", "P")],
            "stored_headers": dict(stored.headers or {}),
        }
    finally:
        await nc.close()


async def test_jetstream_event_fields_match_reference(tmp_path):
    expected, got = await side_by_side(tmp_path, _script, config="jetstream: enabled\n")
    ev = expected["js"]
    assert ev["tr.0"] == [{"type": "js", "stream": "I", "subject": "int.a", "nointerest": True}]
    assert ev["tr.3"][0]["error"] == "maximum messages exceeded"
    assert "subject" not in ev["tr.4"][0] and ev["tr.4"][0]["error"]
    assert expected["stored_headers"]["Nats-Trace-Dest"] == "trace disabled"
    assert expected["counts"] == [1, 1, 1]
    for k in ev:
        assert got["js"].get(k) == ev[k], k
    assert got == expected
