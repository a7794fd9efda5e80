"""kill -9 after streams started asleep (natsd.jetstream.dormant): a stream woken by publishes
and then killed mid-stream keeps every acknowledged message, and a stream that slept through
the run comes back as the clean stop before left it. The restart file is removed at start, so
the start after the crash recovers every stream from its files."""

from __future__ import annotations

import asyncio

import nats
import pytest

from tests.helpers.jsapi import js_api as _api
from tests.helpers.servers import start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(180)]

RESTART_FILE = "natsd-restart.json"


async def _fill(url: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    for name in ("HOT", "COLD"):
        r = await _api(nc, f"$JS.API.STREAM.CREATE.{name}", {"name": name, "subjects": [f"{name.lower()}.>"]})
        assert "error" not in r, r
        for i in range(50):
            await js.publish(f"{name.lower()}.{i % 4}", b"before-%d" % i)
        r = await _api(
            nc,
            f"$JS.API.CONSUMER.DURABLE.CREATE.{name}.C",
            {"stream_name": name, "config": {"durable_name": "C", "ack_policy": "explicit"}},
        )
        assert "error" not in r, r
    await nc.close()


async def _publish_until_killed(srv) -> dict[int, bytes]:
    """Publish into HOT (asleep at first) with acks; kill -9 the server mid-stream."""
    acked: dict[int, bytes] = {}
    nc = await nats.connect(srv.url, allow_reconnect=False)
    js = nc.jetstream()
    try:
        i = 0
        while len(acked) < 2000:
            batch = [
                (b"after-%d" % (i + k), await js.publish_async(f"hot.{k % 4}", b"after-%d" % (i + k)))
                for k in range(50)
            ]
            i += 50
            for data, fut in batch:
                ack = await asyncio.wait_for(fut, 10)
                acked[ack.seq] = data
        # one more batch in flight while the server dies
        for k in range(50):
            await js.publish_async("hot.x", b"unacked")
        srv.kill()
    finally:
        try:
            await nc.close()
        except Exception:
            pass
    return acked


def test_kill_9_after_a_sleeping_stream_woke(tmp_path):
    store = tmp_path / "store"
    account_dir = store / "jetstream" / "$G"
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        asyncio.run(_fill(srv.url))
    finally:
        srv.stop()
    assert (account_dir / RESTART_FILE).is_file()

    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        assert not (account_dir / RESTART_FILE).exists()  # removed before anything can change
        acked = asyncio.run(_publish_until_killed(srv))
    finally:
        if srv.alive():
            srv.kill()
    assert not (account_dir / RESTART_FILE).exists()

    srv = start_server("natsd", tmp_path, store_dir=store)
    try:

        async def check() -> None:
            nc = await nats.connect(srv.url)
            js = nc.jetstream()
            hot = (await js.stream_info("HOT")).state
            assert hot.last_seq >= max(acked) and hot.consumer_count == 1
            for seq in (1, 50, *sorted(acked)[:: max(1, len(acked) // 200)], max(acked)):
                got = await js.get_msg("HOT", seq)
                assert got.data == (acked[seq] if seq in acked else b"before-%d" % (seq - 1)), seq
            cold = (await js.stream_info("COLD")).state
            assert (cold.messages, cold.first_seq, cold.last_seq, cold.consumer_count) == (50, 1, 50, 1)
            assert (await js.get_msg("COLD", 50)).data == b"before-49"
            await nc.close()

        asyncio.run(check())
        log = srv.log()
    finally:
        srv.stop()
    # Recovered at start (no restart file after the crash): the reference's per-stream lines.
    assert "Restored 50 messages for stream '$G > COLD'" in log
    assert "Recovering 1 consumers for stream - '$G > HOT'" in log
