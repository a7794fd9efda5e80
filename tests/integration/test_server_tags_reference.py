"""server_tags and server_metadata (issue 29): shown in /varz and in $SYS answers (statsz) as
nats-server shows them, from the same configuration file."""

from __future__ import annotations

import json

import nats
import pytest

from tests.helpers.inproc import side_by_side

pytestmark = [pytest.mark.integration, pytest.mark.reference, pytest.mark.timeout(60)]

CONFIG = """
server_tags: ["Region:EU", " az:1 ", "region:eu"]
server_metadata { env: prod, Team: "Core" }
system_account: SYS
accounts { SYS { users [{user: sys, password: sys}] }, A { users [{user: a, password: a}] } }
"""


async def _observe(url: str) -> dict:
    host = url.split("//", 1)[1]
    nc = await nats.connect(f"nats://sys:sys@{host}")
    try:
        out = {}
        for kind in ("STATSZ", "VARZ"):
            r = json.loads((await nc.request(f"$SYS.REQ.SERVER.PING.{kind}", b"", timeout=2)).data)
            out[kind] = {"server": {k: r["server"].get(k) for k in ("tags", "metadata")}}
            if kind == "VARZ":
                out[kind]["data"] = {k: r["data"].get(k) for k in ("tags", "metadata")}
        return out
    finally:
        await nc.close()


async def test_tags_and_metadata_match_reference(tmp_path):
    expected, got = await side_by_side(tmp_path, _observe, config=CONFIG)
    assert expected["VARZ"]["data"] == {"tags": ["region:eu", "az:1"], "metadata": {"env": "prod", "Team": "Core"}}
    assert got == expected


async def test_absent_when_not_configured(tmp_path):
    config = "system_account: SYS\naccounts { SYS { users [{user: sys, password: sys}] } }\n"
    expected, got = await side_by_side(tmp_path, _observe, config=config)
    assert expected["VARZ"]["data"] == {"tags": None, "metadata": None}
    assert got == expected


async def _filtered(url: str) -> list:
    host = url.split("//", 1)[1]
    nc = await nats.connect(f"nats://sys:sys@{host}")
    try:
        out = []
        for tags in (["region:eu"], ["REGION:EU", "az:1"], ["region:us"]):
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            await nc.publish("$SYS.REQ.SERVER.PING.STATSZ", json.dumps({"tags": tags}).encode(), reply=inbox)
            await nc.flush()
            n = 0
            try:
                while True:
                    await sub.next_msg(timeout=0.5)
                    n += 1
            except nats.errors.TimeoutError:
                pass
            out.append(n)
        return out
    finally:
        await nc.close()


async def test_ping_filters_on_tags(tmp_path):
    expected, got = await side_by_side(tmp_path, _filtered, config=CONFIG)
    assert expected == [1, 1, 0]
    assert got == expected
