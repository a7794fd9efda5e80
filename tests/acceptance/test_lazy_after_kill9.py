"""kill -9, then a restart where streams whose files are exactly as their index.db recorded start
asleep (natsd.store.file.peek, natsd.jetstream.dormant.peek_asleep) while a stream with a torn
tail is recovered at start (cut, reported). The sleeping stream, touched later, is recovered
then: every message and its consumer's acks as before the crash, and the log says what was
restored when."""

from __future__ import annotations

import asyncio

import nats
import pytest

from tests.helpers.jsapi import js_api as _api
from tests.helpers.servers import start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(180)]


async def _fill(url: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    for name in ("IDLE", "TORN"):
        r = await _api(nc, f"$JS.API.STREAM.CREATE.{name}", {"name": name, "subjects": [f"{name.lower()}.>"]})
        assert "error" not in r, r
        for i in range(30):
            await js.publish(f"{name.lower()}.{i % 3}", b"m-%d" % i)
        r = await _api(
            nc,
            f"$JS.API.CONSUMER.DURABLE.CREATE.{name}.C",
            {"stream_name": name, "config": {"durable_name": "C", "ack_policy": "explicit"}},
        )
        assert "error" not in r, r
    sub = await js.pull_subscribe_bind("C", "IDLE")
    for m in await sub.fetch(5, timeout=5):
        await m.ack_sync()
    await nc.close()


async def _publish_then_kill(srv) -> None:
    nc = await nats.connect(srv.url, allow_reconnect=False)
    js = nc.jetstream()
    for i in range(10):
        await js.publish("torn.x", b"late-%d" % i)  # (after TORN's index.db: a recovery replays them)
    srv.kill()
    try:
        await nc.close()
    except Exception:
        pass


def test_a_stream_asleep_after_a_kill_is_recovered_on_first_use(tmp_path):
    store = tmp_path / "store"
    streams = store / "jetstream" / "$G" / "streams"
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        asyncio.run(_fill(srv.url))
    finally:
        srv.stop()
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        asyncio.run(_publish_then_kill(srv))
    finally:
        if srv.alive():
            srv.kill()
    # A write the crash cut: bytes that are no record at the end of TORN's last block.
    last = max((streams / "TORN" / "msgs").glob("*.blk"), key=lambda p: int(p.stem))
    with open(last, "ab") as f:
        f.write(b"\x09" * 11)

    srv = start_server("natsd", tmp_path, store_dir=store)
    try:

        async def check() -> str:
            nc = await nats.connect(srv.url)
            js = nc.jetstream()
            torn = (await js.stream_info("TORN")).state
            assert (torn.messages, torn.last_seq) == (40, 40)
            assert (await js.get_msg("TORN", 40)).data == b"late-9"
            idle = (await js.stream_info("IDLE")).state
            assert (idle.messages, idle.first_seq, idle.last_seq, idle.consumer_count) == (30, 1, 30, 1)
            before_touch = srv.log()
            assert (await js.get_msg("IDLE", 30)).data == b"m-29"
            ci = await _api(nc, "$JS.API.CONSUMER.INFO.IDLE.C")
            assert (ci["ack_floor"]["stream_seq"], ci["num_pending"]) == (5, 25)
            sub = await js.pull_subscribe_bind("C", "IDLE")
            assert [m.data for m in await sub.fetch(1, timeout=5)] == [b"m-5"]
            await nc.close()
            return before_touch

        before_touch = asyncio.run(check())
        log = srv.log()
    finally:
        srv.stop()
    # TORN at start, with what was cut; IDLE's restore line at start (its counters from index.db),
    # its recovery when first used.
    assert "lost 0 messages (11 bytes) at recovery" in before_touch and "'$G > TORN'" in before_touch
    assert "Restored 30 messages for stream '$G > IDLE'" in before_touch
    woke = "Recovered stream '$G > IDLE' on first use after an unclean stop: 30 messages, 1 consumers"
    assert woke not in before_touch and woke in log
    assert "Recovered stream '$G > TORN'" not in log
