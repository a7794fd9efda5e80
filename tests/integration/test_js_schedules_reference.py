"""Message schedules side by side with nats-server 2.15: the errors for bad schedules (nothing
stored), the stored schedule message (``Nats-Rollup: sub`` added), cancelling, and the headers
and payload of produced messages for ``@at`` in the past (with ``Nats-Schedule-Source`` and
``-Rollup``) and ``@every 1s`` (the only part that needs real time: ~2.5 s per server)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from datetime import datetime, timedelta, timezone

import nats
import pytest

from tests.helpers.inproc import side_by_side
from tests.helpers.servers import reference_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed"),
]

FUT = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
T = {"Nats-Schedule-Target": "s.target"}
AT = {"Nats-Schedule": "@at " + FUT}
BAD = [
    ("bogus", {"Nats-Schedule": "bogus", **T}),
    ("every500ms", {"Nats-Schedule": "@every 500ms", **T}),
    ("cron5", {"Nats-Schedule": "* * * * *", **T}),
    ("feb30", {"Nats-Schedule": "0 0 0 30 2 *", **T}),
    ("sec61", {"Nats-Schedule": "61 * * * * *", **T}),
    ("dow7", {"Nats-Schedule": "0 0 0 * * 7", **T}),
    ("L", {"Nats-Schedule": "0 0 0 L * *", **T}),
    ("neg", {"Nats-Schedule": "0 0 0 * * -1", **T}),
    ("notarget", AT),
    ("selftarget", {**AT, "Nats-Schedule-Target": "s.sched"}),
    ("outside", {**AT, "Nats-Schedule-Target": "x.y"}),
    ("wild", {**AT, "Nats-Schedule-Target": "s.*"}),
    ("badttl", {**AT, **T, "Nats-Schedule-TTL": "bad"}),
    ("srollall", {**AT, **T, "Nats-Schedule-Rollup": "all"}),
    ("rollall", {**AT, **T, "Nats-Rollup": "all"}),
    ("src=tgt", {**AT, **T, "Nats-Schedule-Source": "s.target"}),
    ("srcout", {**AT, **T, "Nats-Schedule-Source": "x.y"}),
    ("tzbad", {"Nats-Schedule": "0 0 0 * * *", **T, "Nats-Schedule-Time-Zone": "Mars/Olympus"}),
    ("tzempty", {"Nats-Schedule": "0 0 0 * * *", **T, "Nats-Schedule-Time-Zone": ""}),
    ("tzat", {**AT, **T, "Nats-Schedule-Time-Zone": "Europe/Paris"}),
    ("tzonly", {"Nats-Schedule-Time-Zone": "Europe/Paris"}),
    ("scheduleronly", {"Nats-Scheduler": "s.sched"}),
    ("nextx", {"Nats-Schedule-Next": "x", "Nats-Scheduler": "s.other"}),
    ("nextpurge-nosched", {"Nats-Schedule-Next": "purge"}),
    ("badat", {"Nats-Schedule": "@at tomorrow", **T}),
    ("emptysched", {"Nats-Schedule": "", **T}),
]
_TIME = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")


async def _scenario(url: str) -> list:
    nc = await nats.connect(url)
    out: list = []

    async def api(subj: str, body: dict) -> dict:
        return json.loads((await nc.request(subj, json.dumps(body).encode(), timeout=5)).data)

    async def pub(subj: str, hdrs: dict, data: bytes = b"x") -> dict:
        return json.loads((await nc.request(subj, data, headers=hdrs, timeout=5)).data)

    async def last(subj: str) -> tuple | None:
        r = await api("$JS.API.STREAM.MSG.GET.S", {"last_by_subj": subj})
        if "message" not in r:
            return None
        m = r["message"]
        return (_TIME.sub(b"<time>", base64.b64decode(m.get("hdrs", ""))), base64.b64decode(m.get("data", "")))

    async def subjects() -> dict:
        return (await api("$JS.API.STREAM.INFO.S", {"subjects_filter": ">"}))["state"].get("subjects")

    try:
        r = await api(
            "$JS.API.STREAM.CREATE.S",
            {"name": "S", "subjects": ["s.>"], "allow_msg_schedules": True, "allow_msg_ttl": True},
        )
        out.append({k: r["config"].get(k) for k in ("allow_rollup_hdrs", "deny_purge", "allow_msg_schedules")})
        await api("$JS.API.STREAM.CREATE.N", {"name": "N", "subjects": ["n.>"]})
        # aggregates sourcing S: with roll-ups a sourced "Nats-Schedule-Next: purge" purges there too
        await api("$JS.API.STREAM.CREATE.AGG1", {"name": "AGG1", "sources": [{"name": "S"}], "allow_rollup_hdrs": True})
        await api("$JS.API.STREAM.CREATE.AGG2", {"name": "AGG2", "sources": [{"name": "S"}]})
        for name, h in BAD:
            out.append((name, await pub("s.sched", h)))
        out.append(await pub("n.sched", {**AT, "Nats-Schedule-Target": "n.t"}))
        out.append(await pub("n.sched", {"Nats-Schedule": "bogus"}))
        out.append(await pub("n.sched", {"Nats-Scheduler": "n.x"}))
        out.append(await pub("n.sched", {**AT, "Nats-Schedule-Target": "n.t", "Nats-Schedule-TTL": "5m"}))
        out.append((await api("$JS.API.STREAM.INFO.S", {}))["state"]["messages"])
        # a pending schedule as stored, and cancelling it
        out.append(await pub("s.fut", {**AT, **T, "Foo": "bar"}))
        out.append(await last("s.fut"))
        await pub("s.plain", {"Foo": "x"})
        for _ in range(50):  # the aggregates have the schedule before it is cancelled
            r = [await api(f"$JS.API.STREAM.MSG.GET.{agg}", {"last_by_subj": "s.plain"}) for agg in ("AGG1", "AGG2")]
            if all("message" in x for x in r):
                break
            await asyncio.sleep(0.1)
        out.append(await pub("s.c", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "s.plain"}))
        out.append(await pub("s.c", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "s.fut"}))
        out.append(await subjects())
        # @at in the past: produced at once (after the reference's minimum delay)
        await pub("s.src", {"Src": "1", "Nats-Msg-Id": "m1"}, b"from-source")
        out.append(
            await pub(
                "s.past",
                {
                    "Nats-Schedule": "@at 2020-01-01T00:00:00Z",
                    **T,
                    "Foo": "bar",
                    "Nats-Schedule-TTL": "5m",
                    "Nats-Expected-Stream": "S",
                    "Nats-Msg-Id": "id1",
                },
                b"hello",
            )
        )
        out.append(
            await pub(
                "s.past2",
                {
                    "Nats-Schedule": "@at 2020-01-01T00:00:00Z",
                    "Nats-Schedule-Target": "s.target2",
                    "Nats-Schedule-Source": "s.src",
                    "Nats-Schedule-Rollup": "sub",
                },
                b"own",
            )
        )
        for _ in range(50):
            await asyncio.sleep(0.1)
            if await last("s.target2") is not None and await last("s.target") is not None:
                break
        out.append(await last("s.target"))
        out.append(await last("s.target2"))
        out.append(await subjects())
        # @every 1s: repeats with Nats-Schedule-Next set to the next time
        out.append(await pub("s.every", {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "s.etarget"}))
        await asyncio.sleep(2.5)
        out.append(await last("s.etarget"))
        ack = await pub("s.c", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "s.every"})
        # (its seq counts the @every firings so far, which real time decides: 2 or 3 in 2.5 s)
        out.append({k: v for k, v in ack.items() if k != "seq"} if isinstance(ack, dict) else ack)
        subj = await subjects()
        out.append(("every gone", "s.every" not in subj, subj.get("s.etarget", 0) >= 2))
        await asyncio.sleep(1.0)
        for agg in ("AGG1", "AGG2"):
            r = await api(f"$JS.API.STREAM.INFO.{agg}", {"subjects_filter": ">"})
            out.append((agg, r["state"].get("subjects")))
        r = await api("$JS.API.STREAM.UPDATE.S", {"name": "S", "subjects": ["s.>"], "allow_msg_ttl": True})
        out.append(r.get("error"))
        r = await api("$JS.API.STREAM.CREATE.M", {"name": "M", "mirror": {"name": "S"}, "allow_msg_schedules": True})
        out.append(r.get("error"))
        r = await api("$JS.API.STREAM.CREATE.D", {"name": "D", "discard": "new", "allow_msg_schedules": True})
        out.append(r.get("error"))
    finally:
        await nc.close()
    return out


async def test_schedules_match_reference(tmp_path):
    expected, got = await side_by_side(tmp_path, _scenario)
    # sanity: the reference produced the messages this compares
    assert expected[-8] is not None and b"Nats-Scheduler: s.every" in expected[-8][0]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g == e
