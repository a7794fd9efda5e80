"""What natsd advertises is true: nats-server 2.15.1 and JetStream API level 5, and every feature
clients gate on that version or level works, step by step the same as on nats-server 2.15.1.

Clients switch features on by the INFO ``version`` (nats.js: consumer reset from 2.14.0, priority
groups and batch direct get from 2.11.0; nats-py: consumer names from 2.9) or by the JetStream API
level (``api.level`` in ACCOUNT INFO, ``_nats.level`` metadata; natscli gates priority groups,
batch publish and counters on it). Each level's features are exercised here through raw requests
(what those clients send), on both servers, and the outcomes compared."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import nats
import pytest

from natsd.gohash import get_hash
from tests.helpers.servers import reference_binary, start_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed"),
]


async def _req(nc, subject: str, body=b"", headers=None) -> dict:
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    m = await nc.request(subject, body, headers=headers, timeout=5)
    return json.loads(m.data) if m.data else {"status": m.headers and m.headers.get("Status")}


def _err(r: dict):
    e = r.get("error")
    return (e.get("code"), e.get("err_code")) if e else None


async def _script(url: str) -> dict:
    nc = await nats.connect(url)
    out: dict = {}
    try:
        out["version"] = nc._server_info["version"]
        acc = await _req(nc, "$JS.API.INFO")
        out["api_level"] = acc["api"]["level"]

        # Level 1: per-message TTL, delete markers, consumer pause, priority groups.
        r = await _req(
            nc,
            "$JS.API.STREAM.CREATE.TTL",
            {
                "name": "TTL",
                "subjects": ["ttl.>"],
                "allow_msg_ttl": True,
                "subject_delete_marker_ttl": 1_000_000_000,
                "allow_rollup_hdrs": True,
            },
        )
        out["ttl_create"] = _err(r)
        a = await _req(nc, "ttl.a", b"x", headers={"Nats-TTL": "30s"})
        out["ttl_pub"] = (a.get("seq"), _err(a))
        r = await _req(nc, "$JS.API.STREAM.CREATE.PG", {"name": "PG", "subjects": ["pg.>"]})
        until = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)).isoformat().replace("+00:00", "Z")
        r = await _req(
            nc,
            "$JS.API.CONSUMER.CREATE.PG.PAUSED",
            {"stream_name": "PG", "config": {"durable_name": "PAUSED", "ack_policy": "explicit", "pause_until": until}},
        )
        out["pause"] = (_err(r), r.get("paused"))
        r = await _req(
            nc,
            "$JS.API.CONSUMER.CREATE.PG.PIN",
            {
                "stream_name": "PG",
                "config": {
                    "durable_name": "PIN",
                    "ack_policy": "explicit",
                    "priority_groups": ["g"],
                    "priority_policy": "pinned_client",
                    "priority_timeout": 60_000_000_000,
                },
            },
        )
        out["pin_create"] = _err(r)
        await _req(nc, "pg.a", b"one")
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish(
            "$JS.API.CONSUMER.MSG.NEXT.PG.PIN",
            json.dumps({"batch": 1, "expires": 2_000_000_000, "group": "g"}).encode(),
            reply=inbox,
        )
        m = await sub.next_msg(timeout=3)
        out["pin_fetch"] = (m.data, bool(m.headers and m.headers.get("Nats-Pin-Id")))
        await sub.unsubscribe()

        # Level 2: counters, atomic batch publish, schedules, async persist.
        r = await _req(
            nc,
            "$JS.API.STREAM.CREATE.CNT",
            {"name": "CNT", "subjects": ["cnt.>"], "allow_msg_counter": True, "allow_direct": True},
        )
        out["counter_create"] = _err(r)
        a1 = await _req(nc, "cnt.a", b"", headers={"Nats-Incr": "5"})
        a2 = await _req(nc, "cnt.a", b"", headers={"Nats-Incr": "-2"})
        out["counter"] = (a1.get("val"), a2.get("val"))
        r = await _req(nc, "$JS.API.STREAM.CREATE.ATM", {"name": "ATM", "subjects": ["atm.>"], "allow_atomic": True})
        out["atomic_create"] = _err(r)
        for i in (1, 2):
            await nc.publish("atm.a", b"m%d" % i, headers={"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": str(i)})
        a = await _req(
            nc, "atm.a", b"m3", headers={"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "3", "Nats-Batch-Commit": "1"}
        )
        out["atomic"] = (a.get("seq"), a.get("batch"), a.get("count"), _err(a))
        r = await _req(
            nc, "$JS.API.STREAM.CREATE.SCH", {"name": "SCH", "subjects": ["sch.>"], "allow_msg_schedules": True}
        )
        out["schedule_create"] = _err(r)
        at = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        a = await _req(nc, "sch.s1", b"later", headers={"Nats-Schedule": f"@at {at}", "Nats-Schedule-Target": "sch.t1"})
        out["schedule_pub"] = _err(a)
        got = None
        for _ in range(40):
            await asyncio.sleep(0.1)
            g = await _req(nc, "$JS.API.STREAM.MSG.GET.SCH", {"last_by_subj": "sch.t1"})
            if "message" in g:
                got = g["message"]["subject"]
                break
        out["schedule_fired"] = got
        r = await _req(nc, "$JS.API.STREAM.CREATE.ASY", {"name": "ASY", "subjects": ["asy.>"], "persist_mode": "async"})
        out["async_create"] = (_err(r), r.get("config", {}).get("persist_mode"))
        a = await _req(nc, "asy.a", b"x")
        out["async_pub"] = (a.get("seq"), _err(a))

        # Level 4: consumers acked by flow control, consumer reset.
        r = await _req(
            nc,
            "$JS.API.CONSUMER.CREATE.PG.FC",
            {
                "stream_name": "PG",
                "config": {
                    "durable_name": "FC",
                    "deliver_subject": "fc.deliver",
                    "ack_policy": "flow_control",
                    "flow_control": True,
                    "idle_heartbeat": 1_000_000_000,
                },
            },
        )
        out["flow_control_ack"] = (_err(r), r.get("config", {}).get("ack_policy"))
        r = await _req(
            nc,
            "$JS.API.CONSUMER.CREATE.PG.R",
            {"stream_name": "PG", "config": {"durable_name": "R", "ack_policy": "explicit"}},
        )
        r = await _req(nc, "$JS.API.CONSUMER.RESET.PG.R", {"seq": 1})
        out["reset"] = (_err(r), r.get("type"))

        # Level 5: stream identity (a hash of the stream's creation time) on sourcing consumers.
        info = await _req(nc, "$JS.API.STREAM.INFO.PG")
        ident = get_hash(info["created"])
        sourcing = {
            "stream_name": "PG",
            "config": {
                "name": "JS_SRC_x",
                "deliver_subject": "src.deliver",
                "ack_policy": "none",
                "max_deliver": 1,
                "idle_heartbeat": 1_000_000_000,
                "flow_control": True,
                "direct": True,
                "sourcing": True,
                "inactive_threshold": 10_000_000_000,
                "deliver_policy": "all",
            },
        }
        lvl5 = {"Nats-Required-Api-Level": "5"}
        m = await nc.request(
            "$JS.API.CONSUMER.CREATE.PG.JS_SRC_x",
            json.dumps(sourcing).encode(),
            timeout=5,
            headers={**lvl5, "Nats-Stream-Identity": ident},
        )
        out["identity_create"] = (
            _err(json.loads(m.data)),
            m.headers and m.headers.get("Nats-Stream-Identity") == ident,
        )
        r = await _req(
            nc, "$JS.API.CONSUMER.CREATE.PG.JS_SRC_x", sourcing, headers={**lvl5, "Nats-Stream-Identity": "x"}
        )
        out["identity_mismatch"] = (
            _err(r),
            r.get("error", {}).get("description") == f"consumer's stream identity does not match: {ident}",
        )
        m = await nc.request(
            "$JS.API.CONSUMER.CREATE.PG.PLAIN",
            json.dumps({"stream_name": "PG", "config": {"durable_name": "PLAIN"}}).encode(),
            timeout=5,
            headers={**lvl5, "Nats-Stream-Identity": "x"},
        )
        out["identity_plain"] = (_err(json.loads(m.data)), m.headers)
        m = await nc.request(
            "$JS.API.CONSUMER.RESET.PG.R",
            b'{"seq": 1}',
            timeout=5,
            headers={**lvl5, "Nats-Stream-Identity": "whatever"},
        )
        out["identity_reset"] = (_err(json.loads(m.data)), m.headers and m.headers.get("Nats-Stream-Identity") == ident)
        r = await _req(nc, "$JS.API.CONSUMER.RESET.PG.R", {"seq": 1}, headers={"Nats-Required-Api-Level": "6"})
        out["level_6"] = _err(r)
    finally:
        await nc.close()
    return out


def test_api_level_features_match_reference(tmp_path):
    results = {}
    for kind in ("reference", "natsd"):
        srv = start_server(kind, tmp_path / kind)
        try:
            results[kind] = asyncio.run(_script(srv.url))
        finally:
            srv.stop()
    ref, ours = results["reference"], results["natsd"]
    # What natsd claims: what the reference it is compared with claims.
    assert ours.pop("version") == ref.pop("version") == "2.15.1"
    assert ours.pop("api_level") == ref.pop("api_level") == 5
    assert ref["identity_create"] == (None, True) and ref["identity_mismatch"] == ((400, 10225), True)
    # Sanity: the script exercised working features on the reference.
    assert ref["counter"] == ("5", "3") and ref["atomic"][2] == 3 and ref["schedule_fired"] == "sch.t1"
    assert ours == ref
