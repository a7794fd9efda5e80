"""Differential test: atomic batch publish and message counters, the same raw-header publishes
(nats-py ``nc.request(..., headers=...)``, no client batch helpers) against nats-server and
natsd. PubAcks, errors and the stored messages (subject, headers, body) must match."""

from __future__ import annotations

import asyncio
import base64
import json

import nats
import pytest

from tests.helpers.inproc import side_by_side
from tests.helpers.servers import reference_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed"),
]

B, S, C, INCR = "Nats-Batch-Id", "Nats-Batch-Sequence", "Nats-Batch-Commit", "Nats-Incr"


async def _req(nc, subject: str, data: bytes = b"", headers: dict | None = None) -> str:
    try:
        m = await nc.request(subject, data, headers=headers, timeout=3)
    except nats.errors.NoRespondersError:
        return "<no responders>"
    except nats.errors.TimeoutError:
        return "<timeout>"
    return m.data.decode()


async def _api(nc, subject: str, body: dict) -> dict:
    return json.loads((await nc.request(subject, json.dumps(body).encode(), timeout=5)).data)


async def _stored(nc, stream: str) -> list:
    info = await _api(nc, f"$JS.API.STREAM.INFO.{stream}", {})
    st = info["state"]
    out = [("state", st["messages"], st["first_seq"], st["last_seq"])]
    for seq in range(st["first_seq"], st["last_seq"] + 1):
        r = await _api(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq})
        m = r.get("message")
        if m is None:
            out.append((seq, r["error"]["err_code"]))
            continue
        out.append((seq, m["subject"], base64.b64decode(m.get("hdrs", "")), base64.b64decode(m.get("data", ""))))
    return out


async def _batches(url: str) -> list:
    nc = await nats.connect(url)
    out: list = []
    try:
        for cfg in (
            {"name": "A", "subjects": ["a.>"], "allow_atomic": True, "allow_rollup_hdrs": True},
            {
                "name": "D",
                "subjects": ["d.>"],
                "allow_atomic": True,
                "discard": "new",
                "max_msgs": 3,
                "storage": "memory",
            },
            {"name": "N", "subjects": ["n.>"]},
            {"name": "M", "mirror": {"name": "A"}, "allow_atomic": True},
            {"name": "M", "mirror": {"name": "A"}},
        ):
            r = await _api(nc, f"$JS.API.STREAM.CREATE.{cfg['name']}", cfg)
            out.append(("create", cfg["name"], r.get("error")))
        steps = [
            ("a.1", b"one", {B: "b1", S: "1"}),
            ("a.2", b"two", {B: "b1", S: "2"}),
            ("a.3", b"three", {B: "b1", S: "3", C: "1"}),
            ("a.1", b"x", {B: "b2", S: "1"}),
            ("a.1", b"eob", {B: "b2", S: "2", C: "eob"}),
            ("a.1", b"y", {B: "b3", S: "1", C: "eob"}),
            ("a.1", b"y", {B: "b4", S: "1", C: "1"}),
            ("a.1", b"y", {B: "b5", S: "2", C: "1"}),
            ("a.1", b"y", {B: "b6", S: "1"}),
            ("a.1", b"y", {B: "b6", S: "3"}),
            ("a.1", b"y", {B: "b6", S: "2", C: "1"}),
            ("a.1", b"y", {B: "b7"}),
            ("a.1", b"y", {B: "b7", S: "x"}),
            ("a.1", b"y", {B: "b7", S: "0"}),
            ("a.1", b"y", {B: "b8", S: "1", C: "yes"}),
            ("a.1", b"y", {C: "1"}),
            ("a.1", b"y", {B: "x" * 65, S: "1"}),
            ("a.1", b"y", {B: "b9", S: "1001", C: "1"}),
            ("a.1", b"y", {B: "b9", S: "1001", C: "eob"}),
            ("n.1", b"y", {B: "b9", S: "1"}),
            ("a.1", b"y", {B: "c1", S: "1", "Nats-Msg-Id": "m1"}),
            ("a.1", b"y", {B: "c1", S: "2", "Nats-Msg-Id": "m1", C: "1"}),
            ("a.1", b"y", {B: "c2", S: "1", "Nats-Expected-Last-Msg-Id": "m1", C: "1"}),
            ("a.1", b"y", {B: "c3", S: "1", "Nats-Expected-Last-Sequence": "5", C: "1"}),
            ("a.1", b"y", {B: "c4", S: "1"}),
            ("a.1", b"y", {B: "c4", S: "2", "Nats-Expected-Last-Sequence": "7", C: "1"}),
            ("a.1", b"y", {B: "c5", S: "1"}),
            ("a.1", b"y", {B: "c5", S: "2", "Nats-Expected-Last-Sequence": "6", C: "1"}),
            ("a.s", b"y", {B: "c6", S: "1"}),
            ("a.s", b"y", {B: "c6", S: "2", "Nats-Expected-Last-Subject-Sequence": "0", C: "1"}),
            ("a.t", b"y", {B: "c7", S: "1", "Nats-Expected-Last-Subject-Sequence": "0"}),
            ("a.u", b"y", {B: "c7", S: "2", "Nats-Expected-Last-Subject-Sequence": "0", C: "1"}),
            ("a.1", b"y", {B: "c8", S: "1", "Nats-Expected-Stream": "NOPE", C: "1"}),
            ("a.1", b"y", {B: "c9", S: "1", "Nats-TTL": "5s", C: "1"}),
            ("a.1", b"y", {B: "ca", S: "1", "Nats-Incr": "1", C: "1"}),
            ("a.1", b"y", {B: "cb", S: "1", "Nats-Stream-Source": "X 1 > > a.1", C: "1"}),
            ("a.x", b"1", {B: "r1", S: "1"}),
            ("a.y", b"2", {B: "r1", S: "2", "Nats-Rollup": "all", C: "1"}),
            ("a.x", b"1", {B: "r2", S: "1"}),
            ("a.x", b"2", {B: "r2", S: "2", "Nats-Rollup": "sub", C: "1"}),
            ("a.x", b"1", {B: "r3", S: "1"}),
            ("a.x", b"2", {B: "r3", S: "2", "Nats-Rollup": "bad", C: "1"}),
            ("a.z", b"3", {B: "r4", S: "1", "Nats-Rollup": "sub"}),
            ("a.z", b"4", {B: "r4", S: "2", C: "1"}),
            ("d.1", b"1", {}),
            ("d.1", b"y", {B: "d1", S: "1"}),
            ("d.1", b"y", {B: "d1", S: "2"}),
            ("d.1", b"y", {B: "d1", S: "3", C: "1"}),
            ("d.1", b"y", {B: "d2", S: "1"}),
            ("d.1", b"y", {B: "d2", S: "2", C: "1"}),
        ]
        for subject, data, headers in steps:
            out.append(("pub", subject, headers, await _req(nc, subject, data, headers)))
        # a batch published without reply subjects is answered at its commit only
        await nc.publish("a.1", b"q", headers={B: "e1", S: "1"})
        out.append(("no-reply commit", await _req(nc, "a.1", b"r", {B: "e1", S: "2", C: "1"})))
        out.append(("stored A", await _stored(nc, "A")))
        out.append(("stored D", await _stored(nc, "D")))
        # the mirror drops the batch headers (it is no batch there)
        for _ in range(100):
            if (await _api(nc, "$JS.API.STREAM.INFO.M", {}))["state"]["last_seq"] == out[-2][1][0][3]:
                break
            await asyncio.sleep(0.05)
        out.append(("stored M", await _stored(nc, "M")))
    finally:
        await nc.close()
    return out


async def _counters(url: str) -> list:
    nc = await nats.connect(url)
    out: list = []
    try:
        for cfg in (
            {"name": "C", "subjects": ["c.>"], "allow_msg_counter": True},
            {"name": "C2", "subjects": ["c2.>"], "allow_msg_counter": True, "allow_atomic": True, "storage": "memory"},
            {"name": "X", "subjects": ["x.>"], "allow_msg_counter": True, "discard": "new"},
            {"name": "X", "subjects": ["x.>"], "allow_msg_counter": True, "allow_msg_ttl": True},
            {"name": "X", "subjects": ["x.>"], "allow_msg_counter": True, "retention": "workqueue"},
            {"name": "X", "mirror": {"name": "C"}, "allow_msg_counter": True},
            {"name": "P", "subjects": ["p.>"]},
        ):
            r = await _api(nc, f"$JS.API.STREAM.CREATE.{cfg['name']}", cfg)
            out.append(("create", cfg, r.get("error")))
        steps = [
            {INCR: "1"},
            {INCR: "+5"},
            {INCR: "-2"},
            {INCR: "99999999999999999999999999"},
            {INCR: "abc"},
            {INCR: ""},
            {INCR: "1.5"},
            {INCR: "0"},
            {INCR: " 3"},
            {INCR: "-0"},
            {INCR: "+-1"},
            {INCR: "0x10"},
            {INCR: "1_0"},
            {INCR: "--1"},
            {"Nats-Msg-Id": "q"},
            {INCR: "1", "Nats-Msg-Id": "q"},
            {INCR: "1", "Nats-Msg-Id": "q"},
            {INCR: "1", "Nats-Expected-Last-Sequence": "1"},
            {INCR: "1", "Nats-Rollup": "sub"},
            {INCR: "1", "Nats-Expected-Stream": "C"},
            {INCR: "1", "Nats-Expected-Last-Subject-Sequence": "1"},
            {INCR: "1", "Nats-Expected-Last-Msg-Id": "q"},
            {INCR: "1", "Nats-TTL": "5s"},
            {INCR: "1", "Nats-Stream-Source": "C 1 c.a > c.a"},
            {INCR: "1", "App": "kept"},
        ]
        for headers in steps:
            out.append(("pub", headers, await _req(nc, "c.a", b"", headers)))
        out.append(("payload", await _req(nc, "c.a", b"x", {INCR: "1"})))
        out.append(("no headers", await _req(nc, "c.a", b"x")))
        out.append(("no headers empty", await _req(nc, "c.a", b"")))
        out.append(("other subject", await _req(nc, "c.b", b"", {INCR: "7"})))
        out.append(("not a counter stream", await _req(nc, "p.a", b"", {INCR: "7"})))
        out.append(("not a counter stream, bad", await _req(nc, "p.a", b"", {INCR: "x"})))
        # a counter in an atomic batch: each staged increment sees the one before
        out.append(
            (
                "batch",
                [
                    await _req(nc, "c2.a", b"", {INCR: "2", B: "k", S: "1"}),
                    await _req(nc, "c2.a", b"", {INCR: "3", B: "k", S: "2"}),
                    await _req(nc, "c2.b", b"", {INCR: "3", B: "k", S: "3", C: "1"}),
                ],
            )
        )
        out.append(("after batch", await _req(nc, "c2.a", b"", {INCR: "10"})))
        out.append(
            (
                "batch without incr",
                [
                    await _req(nc, "c2.a", b"", {INCR: "2", B: "k2", S: "1"}),
                    await _req(nc, "c2.a", b"v", {B: "k2", S: "2", C: "1"}),
                ],
            )
        )
        # a counter whose last message is not a counter body is broken
        for body in ({"name": "C"}, {"name": "C", "subjects": ["c.>"]}):
            r = await _api(nc, "$JS.API.STREAM.UPDATE.C", body)
            out.append(("update", r.get("error")))
        out.append(("stored C", await _stored(nc, "C")))
        out.append(("stored C2", await _stored(nc, "C2")))
    finally:
        await nc.close()
    return out


async def _sources(url: str) -> list:
    """A counter stream sourcing two counter streams holds their sum, with the per-origin
    totals in Nats-Counter-Sources (compared per subject: arrival order across two sources is
    not defined)."""
    nc = await nats.connect(url)
    out: list = []
    try:
        for cfg in (
            {"name": "C", "subjects": ["c.>"], "allow_msg_counter": True},
            {"name": "E", "subjects": ["e.>"], "allow_msg_counter": True},
            {
                "name": "S",
                "allow_msg_counter": True,
                "sources": [
                    {"name": "C", "subject_transforms": [{"src": "c.>", "dest": "t.>"}]},
                    {"name": "E", "subject_transforms": [{"src": "e.>", "dest": "t.>"}]},
                ],
            },
            {"name": "P", "sources": [{"name": "C"}]},
        ):
            r = await _api(nc, f"$JS.API.STREAM.CREATE.{cfg['name']}", cfg)
            out.append(("create", cfg["name"], r.get("error")))
        for subject, incr in (("c.a", "5"), ("e.a", "7"), ("c.a", "-1"), ("e.b", "2"), ("c.a", "10")):
            out.append(("pub", subject, await _req(nc, subject, b"", {INCR: incr})))
            await asyncio.sleep(0.3)  # each sourced message arrives before the next publish
        for _ in range(100):
            if (await _api(nc, "$JS.API.STREAM.INFO.S", {}))["state"]["messages"] == 5:
                break
            await asyncio.sleep(0.05)
        for subj in ("t.a", "t.b"):
            r = await _api(nc, "$JS.API.STREAM.MSG.GET.S", {"last_by_subj": subj})
            m = r["message"]
            hdrs = base64.b64decode(m["hdrs"]).decode().split("\r\n")
            keep = [h for h in hdrs if h.startswith(("Nats-Incr", "Nats-Counter-Sources"))]
            out.append(("S", subj, base64.b64decode(m["data"]), keep))
        out.append(("publish to the aggregate", await _req(nc, "t.a", b"", {INCR: "1"})))
        r = await _api(nc, "$JS.API.STREAM.MSG.GET.P", {"last_by_subj": "c.a"})
        out.append(("plain source keeps the body", base64.b64decode(r["message"]["data"])))
    finally:
        await nc.close()
    return out


async def _fast(url: str) -> list:
    """Fast batch publish (allow_batched): the flow-control, gap, error and commit replies to
    ``<prefix>.<id>.<flow>.<gap>.<seq>.<op>.$FI`` reply subjects."""
    nc = await nats.connect(url)
    got: list = []
    out: list = []

    async def cb(m):
        got.append(m.data.decode())

    try:
        await nc.subscribe("fb.>", cb=cb)
        for cfg in (
            {"name": "F", "subjects": ["f.>"], "allow_batched": True},
            {"name": "N", "subjects": ["n.>"]},
            {"name": "M", "mirror": {"name": "F"}, "allow_batched": True},
        ):
            r = await _api(nc, f"$JS.API.STREAM.CREATE.{cfg['name']}", cfg)
            out.append(("create", cfg["name"], r.get("error")))

        async def pub(subject: str, reply: str, headers: dict | None = None, data: bytes = b"x") -> None:
            got.clear()
            await nc.publish(subject, data, reply=reply, headers=headers)
            # a request on the same connection after it: its reply usually comes after the server's
            # answers; nats-server answers a fast batch on another goroutine, so also give late ones
            # a moment (without it the reference's answer was sometimes counted for the next step)
            await _api(nc, "$JS.API.INFO", {})
            await nc.flush()
            await asyncio.sleep(0.05)
            out.append((reply, headers, list(got)))

        await pub("n.1", "fb.a.10.fail.1.0.$FI")
        for reply in (
            "fb.a.10.fail.2.0.$FI",
            "fb.a.10.fail.1.1.$FI",
            "fb.a.10.bad.1.0.$FI",
            "fb.a.10.fail.1.3.$FI",
            "fb.a.10.fail.1.5.$FI",
            "fb.b.10.fail.2.1.$FI",
            "fb." + "x" * 65 + ".10.fail.1.0.$FI",
        ):
            await pub("f.1", reply)
        for i in range(1, 6):
            await pub("f.1", f"fb.c.2.fail.{i}.{0 if i == 1 else 1}.$FI")
        await pub("f.1", "fb.c.2.fail.6.2.$FI")
        for reply in (
            "fb.d.10.fail.1.0.$FI",
            "fb.d.10.fail.2.3.$FI",
            "fb.e.10.fail.1.2.$FI",
            "fb.g.10.fail.1.0.$FI",
            "fb.g.10.fail.3.1.$FI",
            "fb.g.10.fail.4.1.$FI",
            "fb.h.10.ok.1.0.$FI",
            "fb.h.10.ok.3.1.$FI",
            "fb.h.10.ok.4.4.$FI",
            "fb.h.10.ok.9.4.$FI",
            "fb.h.10.ok.10.2.$FI",
        ):
            await pub("f.1", reply)
        await pub("f.1", "fb.i.10.fail.1.0.$FI", {"Nats-Msg-Id": "m1"})
        await pub("f.1", "fb.i.10.fail.2.1.$FI", {"Nats-Msg-Id": "m1"})
        await pub("f.1", "fb.i.10.fail.3.1.$FI", {"Nats-Expected-Last-Sequence": "1"})
        await pub("f.1", "fb.i.10.fail.4.2.$FI")
        await pub("f.1", "fb.j.10.fail.1.0.$FI", {"Nats-Msg-Id": "m1"})
        await pub("f.1", "fb.k.10.fail.1.0.$FI", {"Nats-Expected-Last-Sequence": "1"})
        await pub("f.1", "fb.l.10.ok.1.0.$FI")
        await pub("f.1", "fb.l.10.ok.2.1.$FI", {"Nats-Expected-Last-Sequence": "1"})
        await pub("f.1", "fb.l.10.ok.3.2.$FI")
        await pub("f.1", "fb.m.10.fail.1.0.$FI")
        await pub("f.1", "fb.m.10.fail.2.1.$FI", {"Nats-Msg-Id": "m1"})
        await pub("f.1", "fb.m.10.fail.3.2.$FI", {"Nats-Msg-Id": "m1"})
        await pub("f.1", "fb.o.0.fail.1.0.$FI")
        await pub("f.1", "fb.o.0.fail.2.2.$FI")
        await pub("f.1", "fb.p.x.fail.1.0.$FI")
        await pub("f.1", "fb.p.x.fail.1.2.$FI")
        # a longer batch once the others are gone: the pace ramps up to the client's flow
        for i in range(1, 80):
            await pub("f.2", f"fb.q.64.fail.{i}.{0 if i == 1 else 1}.$FI")
        await pub("f.2", "fb.q.64.fail.80.2.$FI")
        out.append(("stored F", await _stored(nc, "F")))
    finally:
        await nc.close()
    return out


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "script", [_batches, _counters, _sources, _fast], ids=["batches", "counters", "sources", "fast"]
)
async def test_batches_and_counters_match_reference(tmp_path, script):
    expected, got = await side_by_side(tmp_path, script)
    assert got == expected


async def _limits(url: str) -> list:
    """``jetstream { limits { batch { max_msgs: 3, max_inflight_per_stream: 2, timeout: "1s" } } }``:
    too many open batches, a batch over the size, a batch abandoned by the timeout (advisory)."""
    nc = await nats.connect(url)
    out: list = []
    try:
        adv = await nc.subscribe("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.>")
        r = await _api(nc, "$JS.API.STREAM.CREATE.A", {"name": "A", "subjects": ["a.>"], "allow_atomic": True})
        out.append(("create", r.get("error")))
        for bid, seq, commit in (
            ("b1", 1, None),
            ("b2", 1, None),
            ("b3", 1, None),
            ("b1", 2, None),
            ("b1", 3, None),
            ("b1", 4, "1"),
        ):
            h = {B: bid, S: str(seq)}
            if commit:
                h[C] = commit
            out.append((bid, seq, await _req(nc, "a.1", b"x", h)))
        await asyncio.sleep(1.6)  # b2 idles past the timeout
        out.append(("after timeout", await _req(nc, "a.1", b"x", {B: "b2", S: "2", C: "1"})))
        out.append(("new", await _req(nc, "a.1", b"x", {B: "b4", S: "1"})))
        out.append(("new commit", await _req(nc, "a.1", b"x", {B: "b4", S: "2", C: "1"})))
        events = []
        while True:
            try:
                m = await adv.next_msg(timeout=0.5)
            except nats.errors.TimeoutError:
                break
            e = json.loads(m.data)
            events.append((m.subject, e["type"], e["stream"], e["batch"], e["reason"]))
        out.append(("advisories", sorted(events)))
    finally:
        await nc.close()
    return out


@pytest.mark.timeout(120)
def test_batch_limits_from_config_match_reference(tmp_path):
    from tests.helpers.servers import start_server

    conf = tmp_path / "js.conf"
    conf.write_text('jetstream { limits { batch { max_msgs: 3, max_inflight_per_stream: 2, timeout: "1s" } } }\n')
    results = {}
    for kind in ("reference", "natsd"):
        srv = start_server(kind, tmp_path / kind, config=conf)
        try:
            results[kind] = asyncio.run(_limits(srv.url))
        finally:
            srv.stop()
    # the limits did apply: too many inflight, and the idle batch was abandoned by the timeout
    assert any("10210" in str(step) for step in results["reference"])
    assert "'timeout')" in str(results["reference"][-1])
    assert results["natsd"] == results["reference"]


async def _counter_sizes(url: str) -> list:
    """The stored counter message (the publisher's headers + ``{"val":"<total>"}``) must fit the
    stream's ``max_msg_size`` or, without one, the server's ``max_payload`` (300 here), although
    the increment itself fits: the reference answers 10054 and stores nothing."""
    out: list = []
    nc = await nats.connect(url)
    try:
        for cfg in (
            {"name": "C", "subjects": ["c.>"], "allow_msg_counter": True},
            {"name": "M", "subjects": ["m.>"], "allow_msg_counter": True, "max_msg_size": 40},
        ):
            out.append(
                ("create", cfg["name"], (await _api(nc, f"$JS.API.STREAM.CREATE.{cfg['name']}", cfg)).get("error"))
            )
        # header block "NATS/1.0\r\nNats-Incr: 1\r\nApp: <n x>\r\n\r\n" = 33 + n bytes: the
        # stored message crosses 300 bytes between n = 254 and n = 257 (the total grows too)
        for n in (200, 254, 255, 256, 257, 260, 266):
            out.append(("c.a", n, await _req(nc, "c.a", b"", {INCR: "1", "App": "x" * n})))
        out.append(("c.b big total", await _req(nc, "c.b", b"", {INCR: "9" * 250})))
        for incr in ("1", "5", "1000000", "-1000000"):
            out.append(("m.a", incr, await _req(nc, "m.a", b"", {INCR: incr})))
        out.append(("stored C", await _stored(nc, "C")))
        out.append(("stored M", await _stored(nc, "M")))
    finally:
        await nc.close()
    return out


@pytest.mark.timeout(120)
def test_counter_message_size_limits_match_reference(tmp_path):
    from tests.helpers.servers import start_server

    conf = tmp_path / "mp.conf"
    conf.write_text("max_payload: 300\n")
    results = {}
    for kind in ("reference", "natsd"):
        srv = start_server(kind, tmp_path / kind, config=conf)
        try:
            results[kind] = asyncio.run(_counter_sizes(srv.url))
        finally:
            srv.stop()
    ref = results["reference"]
    assert "10054" in str(ref) and '"val":"' in str(ref)  # both outcomes occur
    assert results["natsd"] == ref
