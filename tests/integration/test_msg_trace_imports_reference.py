"""Message tracing across account imports (ADR-41, issue 29): a traced message crossing a service
import gives a ``si`` event, one crossing a stream import a ``se`` event per importing
subscription; tracing continues into the other account only when the export (service) or the
import (stream) says ``allow_trace``. The same operator-mode configuration and client script run
against nats-server and natsd, and the events must have the same JSON shape."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.helpers.identities import Identity, account_claims, operator_setup
from tests.helpers.inproc import side_by_side

pytestmark = [pytest.mark.integration, pytest.mark.reference, pytest.mark.timeout(60)]

_SERVER_VOLATILE = {"name", "host", "id", "ver", "seq", "time", "feature_flags", "flags", "jetstream"}
_EVENT_VOLATILE = {"ts", "cid"}


def _shape(ev: dict, names: dict[str, str]) -> dict:
    def fix(x):  # account public keys by name; _R_ subjects are ids
        if isinstance(x, str):
            for pub, name in names.items():
                x = x.replace(pub, name)
            return "_R_.*" if x.startswith("_R_.") else x
        return x

    events = [{k: fix(v) for k, v in e.items() if k not in _EVENT_VOLATILE} for e in ev["events"]]
    head = [e for e in events if e["type"] in ("in", "sm")]
    rest = sorted((e for e in events if e["type"] not in ("in", "sm")), key=lambda e: json.dumps(e, sort_keys=True))
    hdr = {k: [fix(x) for x in v] for k, v in ev["request"].get("header", {}).items()}
    out = {"request": {"header": hdr, "msgsize": ev["request"].get("msgsize")}, "events": head + rest}
    if "hops" in ev:
        out["hops"] = ev["hops"]
    return out


def _setup():
    setup = operator_setup()
    op = setup.operator
    a, b = Identity.new("account"), Identity.new("account")
    exports = [
        {"subject": "svc.t", "type": "service", "allow_trace": True},
        {"subject": "svc.n", "type": "service"},
        {"subject": "ev.>", "type": "stream"},
    ]
    imports = [
        {"subject": "svc.t", "account": a.public, "type": "service", "local_subject": "req.t"},
        {"subject": "svc.n", "account": a.public, "type": "service"},
        {"subject": "ev.t.*", "account": a.public, "type": "stream", "local_subject": "got.t.*", "allow_trace": True},
        {"subject": "ev.n", "account": a.public, "type": "stream"},
    ]
    setup.accounts = {
        "A": (a, op.sign(account_claims(a, "A", exports=exports))),
        "B": (b, op.sign(account_claims(b, "B", imports=imports))),
    }
    return setup, {a.public: "A", b.public: "B"}


async def test_import_trace_events_match_reference(tmp_path):
    setup, names = _setup()
    ca, cb = tmp_path / "a.creds", tmp_path / "b.creds"
    ca.write_text(setup.creds("A"))
    cb.write_text(setup.creds("B"))

    async def observe(url: str) -> dict:
        na = await nats.connect(url, user_credentials=str(ca), name="in-a")
        nb = await nats.connect(url, user_credentials=str(cb), name="in-b")
        try:
            traces: list[dict] = []
            delivered: list[tuple] = []

            async def on_trace(m):
                traces.append(json.loads(m.data))

            async def on_msg(m):
                # (Nats-Request-Info, the requester's account and RTT on a service import's
                # request, compared by its keys: natsd.server.auth.request_info)
                h = {
                    k: (sorted(json.loads(v)) if k == "Nats-Request-Info" else "_R_.*" if v.startswith("_R_.") else v)
                    for k, v in (m.headers or {}).items()
                }
                delivered.append((m.subject, h))
                if m.reply:
                    await m._client.publish(m.reply, b"ok")  # (respond() would echo the trace headers)

            for nc in (na, nb):
                await nc.subscribe("tr.>", cb=on_trace)
            await na.subscribe("svc.*", cb=on_msg)
            await nb.subscribe("got.t.*", cb=on_msg)
            await nb.subscribe("got.>", cb=on_msg, queue="q")
            await nb.subscribe("ev.n", cb=on_msg)
            await na.flush()
            await nb.flush()
            steps = [
                (nb, "req.t", {"Nats-Trace-Dest": "tr.1"}),  # service import, traced on into A
                (nb, "svc.n", {"Nats-Trace-Dest": "tr.2"}),  # service import, tracing stops there
                (nb, "req.t", {"Nats-Trace-Dest": "tr.3", "Nats-Trace-Only": "true"}),
                (nb, "svc.n", {"Nats-Trace-Dest": "tr.4", "Nats-Trace-Only": "true"}),
                (na, "ev.t.x", {"Nats-Trace-Dest": "tr.5"}),  # stream import with allow_trace
                (na, "ev.n", {"Nats-Trace-Dest": "tr.6"}),  # stream import without
                (na, "ev.t.y", {"Nats-Trace-Dest": "tr.7", "Nats-Trace-Only": "true"}),
                (na, "ev.n", {"Nats-Trace-Dest": "tr.8", "Nats-Trace-Only": "true"}),
            ]
            for nc, subject, headers in steps:
                reply = nc.new_inbox() if subject.startswith(("req", "svc")) else ""
                await nc.publish(subject, b"hello", reply=reply, headers=headers)
                await nc.flush()
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)
            return {
                "traces": sorted(json.dumps(_shape(t, names), sort_keys=True) for t in traces),
                "delivered": sorted(json.dumps(d, sort_keys=True) for d in delivered),
            }
        finally:
            await na.close()
            await nb.close()

    expected, got = await side_by_side(tmp_path, observe, config=setup.config())
    assert len(expected["traces"]) == 8
    assert any('"type": "si"' in t for t in expected["traces"])
    assert any('"type": "se"' in t for t in expected["traces"])
    for g, e in zip(got["traces"], expected["traces"]):
        assert json.loads(g) == json.loads(e)
    assert got == expected


async def test_import_into_a_stream_traces_its_capture(tmp_path):
    """A stream of the importing account capturing an imported message: ``se`` then the ``js``
    event (nats-server shadows JetStream's subscriptions too), only with ``allow_trace``."""
    setup = operator_setup()
    op = setup.operator
    a, b = Identity.new("account"), Identity.new("account")
    js = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}
    imports = [
        {"subject": "ev.t.*", "account": a.public, "type": "stream", "local_subject": "got.t.*", "allow_trace": True},
        {"subject": "ev.n", "account": a.public, "type": "stream"},
    ]
    setup.accounts = {
        "A": (a, op.sign(account_claims(a, "A", exports=[{"subject": "ev.>", "type": "stream"}]))),
        "B": (b, op.sign(account_claims(b, "B", imports=imports, jetstream=js))),
    }
    names = {a.public: "A", b.public: "B"}
    ca, cb = tmp_path / "a.creds", tmp_path / "b.creds"
    ca.write_text(setup.creds("A"))
    cb.write_text(setup.creds("B"))

    async def observe(url: str) -> list[str]:
        na = await nats.connect(url, user_credentials=str(ca))
        nb = await nats.connect(url, user_credentials=str(cb))
        try:
            await nb.jetstream().add_stream(name="GOT", subjects=["got.>", "ev.n"], storage="memory")
            traces: list[dict] = []

            async def on_trace(m):
                traces.append(json.loads(m.data))

            await na.subscribe("tr.>", cb=on_trace)
            await na.flush()
            await na.publish("ev.t.x", b"1", headers={"Nats-Trace-Dest": "tr.1"})
            await na.publish("ev.n", b"2", headers={"Nats-Trace-Dest": "tr.2"})
            await na.flush()
            for _ in range(100):
                if len(traces) >= 2:
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.2)
            info = await nb.jetstream().stream_info("GOT")
            return sorted(json.dumps(_shape(t, names), sort_keys=True) for t in traces) + [str(info.state.messages)]
        finally:
            await na.close()
            await nb.close()

    expected, got = await side_by_side(tmp_path, observe, config=setup.config(extra="jetstream: enabled"))
    assert any('"type": "js"' in t for t in expected) and expected[-1] == "2"
    assert got == expected


async def test_queue_members_behind_imports_are_named_as_receivers(tmp_path):
    """Queue groups on the far side of a service import (responders) and of a stream import:
    every egress names the member that got the message."""
    setup, _names = _setup()
    ca, cb = tmp_path / "a.creds", tmp_path / "b.creds"
    ca.write_text(setup.creds("A"))
    cb.write_text(setup.creds("B"))

    async def observe(url: str) -> list[bool]:
        na = await nats.connect(url, user_credentials=str(ca), name="pub-a")
        nb = await nats.connect(url, user_credentials=str(cb), name="pub-b")
        members = [await nats.connect(url, user_credentials=str(ca if i < 2 else cb), name=f"m{i}") for i in range(4)]
        try:
            traces: dict[str, dict] = {}
            got: dict[str, str] = {}

            async def on_trace(m):
                traces[m.subject] = json.loads(m.data)

            for i, nc in enumerate(members):

                async def on_msg(m, name=f"m{i}"):
                    got[m.headers["X-Id"]] = name

                await nc.subscribe("svc.t" if i < 2 else "got.t.*", cb=on_msg, queue="q")
                await nc.flush()
            for nc in (na, nb):
                await nc.subscribe("tr.>", cb=on_trace)
                await nc.flush()
            for i in range(8):
                # (untraced messages in between move the groups' rotation on, whatever the server's)
                for _ in range(i % 3):
                    await nb.publish("req.t", b"x", headers={"X-Id": "untraced"})
                    await na.publish("ev.t.x", b"x", headers={"X-Id": "untraced"})
                await nb.publish("req.t", b"x", headers={"Nats-Trace-Dest": f"tr.s{i}", "X-Id": f"tr.s{i}"})
                await na.publish("ev.t.x", b"x", headers={"Nats-Trace-Dest": f"tr.e{i}", "X-Id": f"tr.e{i}"})
            for nc in (na, nb):
                await nc.flush()
            for _ in range(100):
                if len(traces) == 16 and len(got) == 17:
                    break
                await asyncio.sleep(0.02)
            named = []
            for dest, ev in sorted(traces.items()):
                eg = [e for e in ev["events"] if e["type"] == "eg"]
                named.append(len(eg) == 1 and eg[0]["name"] == got.get(dest))
            return named
        finally:
            for nc in (na, nb, *members):
                await nc.close()

    expected, got = await side_by_side(tmp_path, observe, config=setup.config())
    assert expected == [True] * 16
    assert got == expected
