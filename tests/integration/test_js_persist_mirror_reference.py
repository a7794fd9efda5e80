"""Side by side with nats-server 2.15: ``persist_mode: async`` (accepted on file streams, its
restrictions and update rule, publishing works) and mirror promotion (a STREAM.UPDATE without
``mirror`` turns the mirror into a normal stream: stored messages stay, sourcing stops,
publishing works; changing the mirror or adding subjects to a mirror is refused)."""

from __future__ import annotations

import asyncio
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

KEYS = (
    "subjects",
    "mirror",
    "duplicate_window",
    "persist_mode",
    "allow_rollup_hdrs",
    "mirror_direct",
    "allow_direct",
    "max_msgs",
)


async def _scenario(url: str) -> list:
    nc = await nats.connect(url)
    out: list = []

    async def api(subj: str, body: dict) -> dict:
        return json.loads((await nc.request(subj, json.dumps(body).encode(), timeout=5)).data)

    def cfg(r: dict, keys=KEYS) -> dict:
        return r["error"] if "error" in r else {k: r["config"].get(k) for k in keys}

    async def state(name: str) -> tuple:
        st = (await api(f"$JS.API.STREAM.INFO.{name}", {}))["state"]
        return st["messages"], st["first_seq"], st["last_seq"]

    try:
        # -- mirror promotion
        await api("$JS.API.STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"], "allow_direct": True})
        for i in range(3):
            await nc.request("o.x", b"m%d" % i, timeout=5)
        r = await api("$JS.API.STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}})
        out.append(cfg(r))
        for _ in range(50):
            if (await state("M"))[0] == 3:
                break
            await asyncio.sleep(0.1)
        out.append(await state("M"))
        base = (await api("$JS.API.STREAM.INFO.M", {}))["config"]
        out.append(
            (await api("$JS.API.STREAM.UPDATE.M", {**base, "mirror": {"name": "O", "filter_subject": "o.y"}})).get(
                "error"
            )
        )
        out.append((await api("$JS.API.STREAM.UPDATE.M", {**base, "subjects": ["m.>"]})).get("error"))
        promoted = {k: v for k, v in base.items() if k != "mirror"}
        r = await api("$JS.API.STREAM.UPDATE.M", {**promoted, "subjects": ["m.>"], "max_msgs": 100})
        out.append((cfg(r), "mirror" in r, r["state"]["messages"]))
        r = await api("$JS.API.STREAM.INFO.M", {})
        out.append((cfg(r), "mirror" in r))
        out.append(json.loads((await nc.request("m.x", b"new", timeout=5)).data))
        await nc.request("o.x", b"later", timeout=5)
        await asyncio.sleep(1.0)  # a mirror would have copied it by now
        out.append(await state("M"))
        out.append(await state("O"))
        r = await api("$JS.API.STREAM.UPDATE.M", {**promoted, "subjects": ["m.>"], "mirror": {"name": "O"}})
        out.append(r.get("error"))
        r = await api("$JS.API.STREAM.CREATE.M2", {"name": "M2", "mirror": {"name": "O"}})
        for _ in range(50):  # caught up first (the reference sets its mirror consumer up later)
            if (await state("M2"))[0] == 4:
                break
            await asyncio.sleep(0.1)
        r = await api("$JS.API.STREAM.UPDATE.M2", {k: v for k, v in r["config"].items() if k != "mirror"})
        out.append(cfg(r))
        out.append(json.loads((await nc.request("M2", b"x", timeout=5)).data))
        # -- persist_mode: async
        for body in (
            {"name": "A1", "persist_mode": "async"},
            {"name": "A2", "persist_mode": "async", "storage": "memory"},
            {"name": "A3", "persist_mode": "async", "num_replicas": 3},
            {"name": "A4", "persist_mode": "async", "allow_atomic": True},
            {"name": "A5", "persist_mode": "default"},
        ):
            out.append(cfg(await api("$JS.API.STREAM.CREATE." + body["name"], body), ("persist_mode",)))
        acks = [json.loads((await nc.request("A1", b"x%d" % i, timeout=5)).data) for i in range(5)]
        out.append(acks)
        r = await api("$JS.API.STREAM.MSG.GET.A1", {"seq": 5})
        out.append(r["message"]["data"])
        out.append(await state("A1"))
        out.append((await api("$JS.API.STREAM.UPDATE.A1", {"name": "A1"})).get("error"))
        out.append(
            (await api("$JS.API.STREAM.UPDATE.A1", {"name": "A1", "persist_mode": "async", "max_msgs": 3})).get("error")
        )
        out.append(await state("A1"))
        out.append((await api("$JS.API.STREAM.UPDATE.A5", {"name": "A5", "persist_mode": "async"})).get("error"))
    finally:
        await nc.close()
    return out


async def test_mirror_promotion_and_async_persist_match_reference(tmp_path):
    expected, got = await side_by_side(tmp_path, _scenario)
    assert expected[1] == (3, 1, 3)  # sanity: the mirror had caught up on the reference
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g == e
