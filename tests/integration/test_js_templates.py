"""Stream templates through a real server: the seeds' ``nats str template add CLIENTS`` tour with
natsctl, auto-creation on publish with nats-py, max_streams, delete cascade and restart."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.helpers.cli import run_cli
from tests.helpers.inproc import running_server

pytestmark = pytest.mark.integration


def _setup(server) -> None:
    acc = server.get_account("$G").jetstream
    assert acc is not None


async def _api(nc, subject: str, body: dict | bytes = b"") -> dict:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return json.loads((await nc.request(subject, data, timeout=5)).data)


async def test_seed_template_tour_with_natsctl(tmp_path):
    async with running_server(jetstream=True, store_dir=str(tmp_path / "js")) as server:
        _setup(server)
        url = server.client_url
        r = await asyncio.to_thread(
            run_cli,
            url,
            "stream",
            "template",
            "add",
            "CLIENTS",
            "--subjects",
            "CLIENT.*",
            "--ack",
            "--max-msgs=-1",
            "--max-bytes=-1",
            "--max-age=1y",
            "--storage",
            "file",
            "--retention",
            "limits",
            "--max-msg-size",
            "2048",
            "--max-streams",
            "1024",
            "--discard",
            "old",
        )
        assert r.rc == 0, r
        assert "Stream Template CLIENTS was created" in r.out
        r = await asyncio.to_thread(run_cli, url, "pub", "CLIENT.acme", "hello")
        assert r.rc == 0, r
        nc = await nats.connect(url)
        js = nc.jetstream()
        names = await js.streams_info()
        assert [s.config.name for s in names] == ["CLIENT_acme"]
        assert names[0].state.messages == 1
        info = await _api(nc, "$JS.API.STREAM.TEMPLATE.INFO.CLIENTS")
        assert info["streams"] == ["CLIENT_acme"]
        r = await asyncio.to_thread(run_cli, url, "stream", "template", "info", "CLIENTS", "-j")
        assert r.rc == 0 and r.json()["streams"] == ["CLIENT_acme"], r
        r = await asyncio.to_thread(run_cli, url, "stream", "template", "rm", "CLIENTS", "-f")
        assert r.rc == 0, r
        assert await js.streams_info() == []
        await nc.close()


async def test_templates_auto_create_cap_and_survive_restart(tmp_path):
    store = str(tmp_path / "js")
    async with running_server(jetstream=True, store_dir=store) as server:
        _setup(server)
        nc = await nats.connect(server.client_url)
        js = nc.jetstream()
        out = await _api(
            nc,
            "$JS.API.STREAM.TEMPLATE.CREATE.KV",
            {"name": "KV", "max_streams": 2, "config": {"subjects": ["kv.*"], "storage": "file", "max_msgs": 10}},
        )
        assert out["streams"] == [] and out["config"]["config"]["max_msgs"] == 10
        ack = await js.publish("kv.22", b"first")
        assert (ack.stream, ack.seq) == ("kv_22", 1)
        ack = await js.publish("kv.22", b"second")
        assert (ack.stream, ack.seq) == ("kv_22", 2)  # stored once each, no double delivery
        assert (await js.publish("kv.33", b"x")).stream == "kv_33"
        with pytest.raises(nats.errors.TimeoutError):  # at max_streams: dropped, no reply
            await nc.request("kv.44", b"x", timeout=0.3)
        si = await js.stream_info("kv_22")
        assert si.config.subjects == ["kv.22"] and si.config.max_msgs == 10 and si.state.messages == 2
        await nc.close()
    async with running_server(jetstream=True, store_dir=store) as server:
        _setup(server)
        nc = await nats.connect(server.client_url)
        js = nc.jetstream()
        info = await _api(nc, "$JS.API.STREAM.TEMPLATE.INFO.KV")
        assert sorted(info["streams"]) == ["kv_22", "kv_33"]
        assert (await js.publish("kv.22", b"third")).seq == 3
        with pytest.raises(nats.errors.TimeoutError):
            await nc.request("kv.44", b"x", timeout=0.3)
        names = await _api(nc, "$JS.API.STREAM.TEMPLATE.NAMES")
        assert names["streams"] == ["KV"] and names["total"] == 1
        out = await _api(nc, "$JS.API.STREAM.TEMPLATE.DELETE.KV")
        assert out["success"] is True
        assert await js.streams_info() == []
        await nc.close()
    async with running_server(jetstream=True, store_dir=store) as server:
        _setup(server)
        nc = await nats.connect(server.client_url)
        assert (await _api(nc, "$JS.API.STREAM.TEMPLATE.NAMES"))["total"] == 0
        assert await nc.jetstream().streams_info() == []
        await nc.close()
