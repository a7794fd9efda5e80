"""A created stream or consumer survives a kill -9 that comes right after its reply: natsd runs as
a subprocess, streams and durable consumers are created (pipelined, as a provisioning script
does), acks are sent (and given the 100 ms within which ack progress reaches the OS), the
server is killed with SIGKILL as soon as the last create's reply arrives, and the restart has
every stream with its config, every consumer, and the acked state; a stream that never stored a
message has no ``msgs/``, and a kill -9 right after its first message keeps it. (nats-server
makes the same promise for a kill: its meta.inf is written, not fsynced, before the reply.)"""

from __future__ import annotations

import asyncio
import json
import os

import nats
import pytest

from tests.helpers.servers import start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(180)]

STREAMS = 120


async def _api(nc, subject: str, body: dict | None = None) -> dict:
    msg = await nc.request(subject, json.dumps(body).encode() if body is not None else b"", timeout=30)
    return json.loads(msg.data)


def _stream(i: int) -> dict:
    return {"name": f"S{i}", "subjects": [f"s.{i}.>"], "storage": "file", "max_bytes": 1_000_000 + i}


async def _fill(url: str) -> None:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        # the first streams get a message each and a durable that acks some of them
        for i in range(3):
            assert "error" not in await _api(nc, f"$JS.API.STREAM.CREATE.S{i}", _stream(i))
            for k in range(5):
                await js.publish(f"s.{i}.m", f"m{k}".encode())
            cfg = {"durable_name": f"D{i}", "ack_policy": "explicit"}
            assert "error" not in await _api(
                nc, f"$JS.API.CONSUMER.DURABLE.CREATE.S{i}.D{i}", {"stream_name": f"S{i}", "config": cfg}
            )
            sub = await js.pull_subscribe_bind(f"D{i}", f"S{i}")
            for m in await sub.fetch(3, timeout=5):
                await m.ack_sync()
        # Ack progress reaches the OS within STATE_WRITE_GAP (100 ms, nats-server's cadence), not
        # at the ack's reply: past it, a kill must not lose it (the creates below: at their replies).
        await asyncio.sleep(0.5)
        rs = await asyncio.gather(*(_api(nc, f"$JS.API.STREAM.CREATE.S{i}", _stream(i)) for i in range(3, STREAMS)))
        assert all("error" not in r for r in rs), rs[0]
        cfg = {"durable_name": "LAST", "ack_policy": "explicit"}
        r = await _api(
            nc,
            f"$JS.API.CONSUMER.DURABLE.CREATE.S{STREAMS - 1}.LAST",
            {"stream_name": f"S{STREAMS - 1}", "config": cfg},
        )
        assert "error" not in r, r
    finally:
        await nc.close()


async def _check(url: str) -> None:
    nc = await nats.connect(url)
    try:
        names = await _api(nc, "$JS.API.STREAM.NAMES")
        assert sorted(names["streams"]) == sorted(f"S{i}" for i in range(STREAMS))
        info = await _api(nc, "$JS.API.INFO")
        assert info["streams"] == STREAMS and info["consumers"] == 4
        assert info["reserved_storage"] == sum(1_000_000 + i for i in range(STREAMS))
        for i in (0, 5, STREAMS - 1):
            r = await _api(nc, f"$JS.API.STREAM.INFO.S{i}")
            assert r["config"]["subjects"] == [f"s.{i}.>"] and r["config"]["max_bytes"] == 1_000_000 + i, r
        for i in range(3):
            r = await _api(nc, f"$JS.API.CONSUMER.INFO.S{i}.D{i}")
            assert r["ack_floor"]["stream_seq"] == 3 and r["num_pending"] == 2, r
        assert "error" not in await _api(nc, f"$JS.API.CONSUMER.INFO.S{STREAMS - 1}.LAST")
        # the streams take messages after the restart
        ack = await nc.jetstream().publish(f"s.{STREAMS - 1}.x", b"after")
        assert ack.stream == f"S{STREAMS - 1}" and ack.seq == 1
    finally:
        await nc.close()


def test_streams_and_consumers_survive_a_kill_9_right_after_their_replies(tmp_path):
    store = tmp_path / "store"
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        asyncio.run(_fill(srv.url))
        srv.kill()  # (no clean stop: nothing written after the replies)
    finally:
        if srv.alive():
            srv.kill()
    srv2 = start_server("natsd", tmp_path, store_dir=store)
    try:
        asyncio.run(_check(srv2.url))
        srv2.kill()  # right after the first message of a stream that had none
    finally:
        if srv2.alive():
            srv2.kill()
    streams = next(store.rglob("streams"))
    # A stream that never stored a message has no msgs/ (its first write makes it).
    assert sorted(os.listdir(streams / "S5")) == ["meta.inf", "meta.sum"]
    assert os.listdir(streams / f"S{STREAMS - 1}" / "msgs") == ["1.blk"]
    srv3 = start_server("natsd", tmp_path, store_dir=store)
    try:
        asyncio.run(_check_after_first(srv3.url))
    finally:
        srv3.stop()


async def _check_after_first(url: str) -> None:
    nc = await nats.connect(url)
    try:
        r = await _api(nc, f"$JS.API.STREAM.INFO.S{STREAMS - 1}")
        assert (r["state"]["messages"], r["state"]["first_seq"], r["state"]["last_seq"]) == (1, 1, 1), r
        m = await _api(nc, f"$JS.API.STREAM.MSG.GET.S{STREAMS - 1}", {"seq": 1})
        assert m["message"]["subject"] == f"s.{STREAMS - 1}.x", m
        r = await _api(nc, "$JS.API.STREAM.INFO.S5")
        assert (r["state"]["messages"], r["state"]["last_seq"]) == (0, 0), r
        ack = await nc.jetstream().publish("s.5.x", b"first")
        assert ack.stream == "S5" and ack.seq == 1
    finally:
        await nc.close()
