"""The orders service's test suite (docs/testing.md): time travel, a full disk, a crash with
restart and a cut connection, against natsd in-process through its pytest plugin.

Run: ``cd examples/testing_app && pytest`` (pytest.ini loads ``natsd.testing.pytest_plugin``).
With ``--nats-server=PATH`` the same suite runs against nats-server; the tests that need the
server's clock or its faults are then skipped.
"""

from __future__ import annotations

import asyncio
import json
import time

import nats
import pytest

import orders_app as app

# Server time follows the real clock and jumps on advance(): the worker's fetches time out
# client-side in real time, and their pull requests expire server-side at the same moment.
pytestmark = pytest.mark.natsd(clock="flowing")


async def eventually(check, timeout: float = 5.0):
    """Poll ``check()`` (real time: the client library's side of things) until it is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


@pytest.fixture
async def service(natsd_server, natsd_js):
    """The app as it runs in production: its own connections (named, reconnecting)."""
    await app.setup(natsd_js)
    failing: set[str] = set()
    handled: list[str] = []

    async def handle(order: dict) -> None:
        if order["id"] in failing:
            raise app.PoisonOrder(order["id"])
        handled.append(order["id"])

    opts = dict(max_reconnect_attempts=-1, reconnect_time_wait=0.05)
    worker_nc = await nats.connect(natsd_server.url, name="worker", **opts)
    dlq_nc = await nats.connect(natsd_server.url, name="dead-letters", **opts)
    worker = await app.Worker(worker_nc, handle).start()
    dead = await app.DeadLetters(dlq_nc).start()
    await dlq_nc.flush()
    yield worker, dead, failing, handled
    await worker.stop()
    await dead.stop()
    await worker_nc.close()
    await dlq_nc.close()


async def test_orders_are_processed(service, natsd_js):
    worker, _, _, handled = service
    for i in range(5):
        assert await app.submit_order(natsd_js, {"id": f"o{i}"})
    await eventually(lambda: len(handled) == 5)
    assert (await natsd_js.stream_info(app.ORDERS)).state.messages == 0  # work queue: acked = gone


async def test_poison_order_retried_with_backoff_then_dead_lettered(service, natsd_server, natsd_js):
    worker, dead, failing, _ = service
    failing.add("bad")
    await app.submit_order(natsd_js, {"id": "bad"})
    await eventually(lambda: worker.attempts.get("bad") == 1)
    # 9 s later nothing happened; at 10 s (backoff[0]) the second attempt.
    await natsd_server.advance(9)
    await asyncio.sleep(0.3)
    assert worker.attempts["bad"] == 1
    await natsd_server.advance(1.1)
    await eventually(lambda: worker.attempts.get("bad") == 2)
    await natsd_server.advance(60.1)
    await eventually(lambda: worker.attempts.get("bad") == 3)
    await natsd_server.advance(300.1)
    await eventually(lambda: worker.attempts.get("bad") == 4)
    # The fourth attempt's wait runs out too: the server gives up (advisory), the DLQ takes it.
    await natsd_server.advance(300.1)
    await eventually(lambda: dead.moved)
    dlq = await natsd_js.get_last_msg("DLQ", "dlq.orders")
    assert json.loads(dlq.data) == {"id": "bad"}
    assert dlq.headers["Dlq-Deliveries"] == "4"
    assert (await natsd_js.stream_info(app.ORDERS)).state.messages == 0
    (adv,) = natsd_server.captured.advisories_of("max_deliver")
    assert adv["consumer"] == app.DURABLE


async def test_kv_setting_pauses_and_resumes_the_worker(service, natsd_js):
    worker, _, _, handled = service
    kv = await natsd_js.key_value("settings")
    await kv.put("paused", b"true")
    await eventually(lambda: not worker.enabled.is_set())
    await app.submit_order(natsd_js, {"id": "while-paused"})
    await asyncio.sleep(0.3)
    assert handled == []
    await kv.put("paused", b"false")
    await eventually(lambda: handled == ["while-paused"])


async def test_full_disk_refuses_orders_until_space_is_back(service, natsd_faults, natsd_js):
    _, _, _, handled = service
    natsd_faults.disk_full()
    assert await app.submit_order(natsd_js, {"id": "refused"}) is False
    natsd_faults.disk_ok()
    assert await app.submit_order(natsd_js, {"id": "accepted"}) is True
    await eventually(lambda: handled == ["accepted"])


async def test_crash_and_restart_lose_no_accepted_order(service, natsd_server, natsd_js):
    worker, _, _, handled = service
    await worker.stop()  # orders pile up while the worker is away
    for i in range(20):
        assert await app.submit_order(natsd_js, {"id": f"c{i}"})
    await natsd_server.crash()  # kill -9: whatever was acknowledged had reached the OS
    await natsd_server.start()  # recovery from the store, same port: clients reconnect
    await eventually(lambda: _jetstream_ready(worker.nc), timeout=10)  # reconnected, store recovered
    await worker.start()
    await eventually(lambda: len(handled) >= 10)
    # A delivery can race with a fetch the client just gave up on (its timeout is the client
    # library's, in real time): that order comes again after the ack wait, which we jump over.
    await natsd_server.advance(app.BACKOFF[0])
    await eventually(lambda: set(handled) == {f"c{i}" for i in range(20)})


async def test_cut_connection_worker_reconnects_and_carries_on(service, natsd_server, natsd_faults, natsd_js):
    _, _, _, handled = service
    reconnected = asyncio.Event()
    worker_nc = service[0].nc
    worker_nc._reconnected_cb = _setter(reconnected)
    assert natsd_faults.cut_client("worker") == 1
    await asyncio.wait_for(reconnected.wait(), 5)
    assert await app.submit_order(natsd_js, {"id": "after-cut"})
    await eventually(lambda: "after-cut" in handled, timeout=10)


async def _jetstream_ready(nc) -> bool:
    try:
        reply = await nc.request("$JS.API.INFO", b"", timeout=0.5)
    except Exception:
        return False
    return b'"error"' not in reply.data


def _setter(ev: asyncio.Event):
    async def cb() -> None:
        ev.set()
    return cb
