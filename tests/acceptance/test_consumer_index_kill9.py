"""kill -9 and obs.idx (natsd.store.file.consumer_index): a restart takes the facts of each
consumer's meta.inf from the stream's obs.idx only while that very meta.inf is in place. Here a
consumer is paused (its meta.inf rewritten, then its record appended), the server killed, and
obs.idx put back as it was before the pause: exactly what a kill -9 between the meta write and
the record leaves. The restart must see the pause (a paused consumer keeps its stream awake: its
resume is a timer), not sleep on the stale record; and then write obs.idx again."""

from __future__ import annotations

import asyncio
import shutil

import nats
import pytest

from tests.helpers.jsapi import js_api as _api
from tests.helpers.servers import start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(180)]

FAR = "2099-01-01T00:00:00Z"


async def _fill(url: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    r = await _api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]})
    assert "error" not in r, r
    for i in range(10):
        await js.publish(f"s.{i % 2}", b"m-%d" % i)
    for name in ("A", "B"):
        r = await _api(
            nc,
            f"$JS.API.CONSUMER.DURABLE.CREATE.S.{name}",
            {"stream_name": "S", "config": {"durable_name": name, "ack_policy": "explicit"}},
        )
        assert "error" not in r, r
    await nc.close()


async def _pause(url: str) -> None:
    nc = await nats.connect(url)
    r = await _api(nc, "$JS.API.CONSUMER.PAUSE.S.B", {"pause_until": FAR})
    assert r.get("paused") is True, r
    await nc.close()


async def _check(url: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    st = (await js.stream_info("S")).state
    assert (st.messages, st.last_seq, st.consumer_count) == (10, 10, 2)
    b = await _api(nc, "$JS.API.CONSUMER.INFO.S.B")
    assert b.get("paused") is True and b["config"]["pause_until"].startswith("2099-01-01"), b
    sub = await js.pull_subscribe_bind("A", "S")
    assert [m.data for m in await sub.fetch(2, timeout=5)] == [b"m-0", b"m-1"]
    await nc.close()


def test_a_stale_obs_idx_is_not_trusted_after_a_kill(tmp_path):
    store = tmp_path / "store"
    sdir = store / "jetstream" / "$G" / "streams" / "S"
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        asyncio.run(_fill(srv.url))
    finally:
        srv.stop()  # (clean: index.db current, so the start after the kill may peek)
    before = tmp_path / "obs.idx.before"
    shutil.copy(sdir / "obs.idx", before)
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        asyncio.run(_pause(srv.url))
    finally:
        srv.kill()
    assert (sdir / "obs.idx").read_bytes() != before.read_bytes()  # (the pause's record)
    shutil.copy(before, sdir / "obs.idx")  # (the crash point: meta.inf written, no record yet)

    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        started = srv.log()
        asyncio.run(_check(srv.url))
        log = srv.log()
    finally:
        srv.kill()
    # B's meta.inf was read (paused: the stream started awake), and obs.idx rewritten with it.
    assert "Restored 10 messages for stream '$G > S'" in started
    assert "on first use after an unclean stop" not in log
    assert b'"pause_until":"2099-01-01' in (sdir / "obs.idx").read_bytes()

    # Unpaused and killed again: now the records match, the stream sleeps until first used.
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:

        async def resume() -> None:
            nc = await nats.connect(srv.url)
            r = await _api(nc, "$JS.API.CONSUMER.PAUSE.S.B", {})
            assert r.get("paused") is False, r
            await nc.close()

        asyncio.run(resume())
    finally:
        srv.kill()
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:

        async def touch() -> None:
            nc = await nats.connect(srv.url)
            b = await _api(nc, "$JS.API.CONSUMER.INFO.S.B")
            assert "error" not in b and not b.get("paused"), b
            await nc.close()

        asyncio.run(touch())
        log = srv.log()
    finally:
        srv.stop()
    assert "Recovered stream '$G > S' on first use after an unclean stop: 10 messages, 2 consumers" in log
