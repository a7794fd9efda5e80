"""The consumer a 2.14+ hub asks an origin for when it sources one of its streams (``direct`` +
``sourcing``, a stable name, ``Nats-Required-Api-Level: 4``), side by side with nats-server
2.15.1: the upgrade to a durable ``flow_control`` consumer on a work-queue stream, the random
suffix on a limits stream, and the re-create after a link drop that resumes from the ack floor.
natsd's advertised API level is patched to 4 here (it says 1 until the lead raises it)."""

from __future__ import annotations

import asyncio
import json
import re

import nats
import pytest

from tests.helpers.inproc import side_by_side
from tests.helpers.servers import reference_binary
from tests.integration.test_leafnodes import patch_js_api_level

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]

SEC = 1_000_000_000
NAME = "JS_SRC_abcdefgh"
LEVEL4 = {"Nats-Required-Api-Level": "4"}


def src_config(deliver: str, start_seq: int = 0) -> dict:
    cfg = {
        "name": NAME,
        "deliver_subject": deliver,
        "ack_policy": "none",
        "ack_wait": 22 * 3600 * SEC,
        "max_deliver": 1,
        "idle_heartbeat": SEC,
        "flow_control": True,
        "direct": True,
        "sourcing": True,
        "inactive_threshold": 10 * SEC,
        "metadata": {"_nats.src.stream": "HQ", "_nats.src.acc": "$G"},
    }
    if start_seq:
        cfg.update(deliver_policy="by_start_sequence", opt_start_seq=start_seq)
    return cfg


def shape(reply: dict) -> dict:
    """A create reply without what differs between servers or runs."""
    r = dict(reply)
    for k in ("created", "ts", "cluster"):
        r.pop(k, None)
    if "name" in r:
        r["name"] = re.sub(r"-[A-Za-z0-9]{8}$", "-<rand>", r["name"])
    cfg = dict(r.get("config", {}))
    if "name" in cfg:
        cfg["name"] = re.sub(r"-[A-Za-z0-9]{8}$", "-<rand>", cfg["name"])
    md = {k: v for k, v in (cfg.get("metadata") or {}).items() if k not in ("_nats.ver", "_nats.level")}
    cfg["metadata"] = md
    r["config"] = cfg
    return r


async def observe(url: str) -> dict:
    nc = await nats.connect(url)
    out: dict = {}
    try:

        async def api(subject: str, body: dict, hdr: dict | None = None) -> dict:
            m = await nc.request(subject, json.dumps(body).encode(), timeout=5, headers=hdr)
            return json.loads(m.data)

        for name, retention in (("WQ", "workqueue"), ("LIM", "limits")):
            r = await api(
                f"$JS.API.STREAM.CREATE.{name}",
                {"name": name, "subjects": [f"{name.lower()}.>"], "retention": retention, "storage": "memory"},
            )
            assert "error" not in r, r
        # limits: an ephemeral of its own per setup
        r = await api(
            f"$JS.API.CONSUMER.CREATE.LIM.{NAME}", {"stream_name": "LIM", "config": src_config("src.lim")}, LEVEL4
        )
        out["limits"] = shape(r)

        for i in range(5):
            await nc.request(f"wq.{i}", str(i).encode(), timeout=5)
        got1: list = []

        async def on1(m) -> None:
            got1.append(m)

        sub1 = await nc.subscribe("src.d1", cb=on1)
        await nc.flush()
        r = await api(
            f"$JS.API.CONSUMER.CREATE.WQ.{NAME}", {"stream_name": "WQ", "config": src_config("src.d1")}, LEVEL4
        )
        out["created"] = shape(r)
        for _ in range(50):
            if len([m for m in got1 if m.data]) >= 5:
                break
            await asyncio.sleep(0.05)
        out["first"] = [(m.subject, m.reply.split(".")[4:7]) for m in got1 if m.data]
        await sub1.unsubscribe()  # the link dropped: nothing was confirmed
        await nc.flush()
        await asyncio.sleep(0.2)
        got2: list = []

        async def on2(m) -> None:
            got2.append(m)

        await nc.subscribe("src.d2", cb=on2)
        await nc.flush()
        r = await api(
            f"$JS.API.CONSUMER.CREATE.WQ.{NAME}",
            {"stream_name": "WQ", "config": src_config("src.d2", start_seq=6)},
            LEVEL4,
        )
        # (push_bound: the reference learns of the new deliver subject's interest asynchronously
        # and answers an update before it; natsd looks it up. Not compared.)
        r.pop("push_bound", None)
        out["recreated"] = shape(r)
        for _ in range(50):
            if len([m for m in got2 if m.data]) >= 5:
                break
            await asyncio.sleep(0.05)
        # stream seq, consumer seq, delivery count: all again, consumer sequences from 1, dc 1
        out["again"] = [(m.subject, m.reply.split(".")[4:7]) for m in got2 if m.data]
        r = await api("$JS.API.STREAM.INFO.WQ", {})
        out["wq_msgs"] = r["state"]["messages"]
    finally:
        await nc.close()
    return out


async def test_sourcing_consumer_upgrade_and_recreate_match_reference(tmp_path, monkeypatch):
    patch_js_api_level(monkeypatch, 4)
    expected, got = await side_by_side(tmp_path, observe)
    assert expected["created"]["config"]["ack_policy"] == "flow_control"  # the reference did upgrade
    assert len(expected["again"]) == 5
    assert got == expected
