"""Flow-control stalls under the test's clock (issue 26): a push consumer with ``flow_control``
whose client does not answer the ``100 FlowControl Request`` stops delivering at its window, and
the server's next move is timer-driven, as nats-server's (``consumer.go``): every idle heartbeat
while the request is unanswered carries ``Nats-Consumer-Stalled: <the request's reply subject>``,
which a client answers to get delivery going again (nats-py does, as nats.go does).

The window starts at 1/16 of nats-server's 32 MiB cap: a request goes out past half of it (1 MiB
delivered), delivery stops past all of it (2 MiB) until the reply comes, and each reply doubles it.
"""

from __future__ import annotations

import asyncio

import nats
import pytest
from nats.js.api import ConsumerConfig

from natsd.testing import InProcessServer
from tests.helpers.inproc import side_by_side

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

N = 48  # messages of 64 KiB: 3 MiB, past the first 2 MiB window
BODY = b"x" * (64 * 1024)


class _Wire:
    """A plain subscriber on a deliver subject: sorts what arrives, never answers by itself."""

    def __init__(self) -> None:
        self.data: list[int] = []  # stream sequences delivered
        self.fc: list[str] = []  # flow-control requests' reply subjects
        self.hb: list[dict] = []  # idle heartbeats' headers
        self.changed = asyncio.Event()

    async def on_msg(self, msg) -> None:
        h = msg.headers or {}
        if h.get("Status") == "100" and h.get("Description") == "FlowControl Request":
            self.fc.append(msg.reply)
        elif h.get("Status") == "100" and h.get("Description") == "Idle Heartbeat":
            self.hb.append(dict(h))
        else:
            self.data.append(msg.metadata.sequence.stream)
        self.changed.set()

    async def settle(self, quiet: float = 0.15, limit: float = 10.0) -> None:
        """Until nothing arrived for ``quiet`` seconds (real time): delivery ran as far as it goes."""
        loop = asyncio.get_running_loop()
        end = loop.time() + limit
        while loop.time() < end:
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), quiet)
            except asyncio.TimeoutError:
                return
        raise AssertionError("delivery did not settle")


async def _fill(nc) -> None:
    js = nc.jetstream()
    await js.add_stream(name="FC", subjects=["fc.>"])
    for i in range(N):
        await js.publish(f"fc.{i}", BODY)


async def test_an_unanswered_flow_control_request_stalls_delivery_until_the_clock_moves():
    async with InProcessServer() as srv:
        nc = await nats.connect(srv.url)
        await _fill(nc)
        wire = _Wire()
        await nc.subscribe("deliver.fc", cb=wire.on_msg)
        await nc.jetstream().add_consumer(
            "FC", ConsumerConfig(durable_name="C", deliver_subject="deliver.fc", flow_control=True, idle_heartbeat=5)
        )
        await wire.settle()

        # Stalled: one request out, unanswered; delivery stopped at the 2 MiB window, short of N.
        assert len(wire.fc) == 1 and wire.fc[0].startswith("$JS.FC.FC.C."), wire.fc
        stalled_at = len(wire.data)
        assert 0 < stalled_at < N and wire.data == list(range(1, stalled_at + 1))
        info = srv.consumer_info("FC", "C")
        assert info["delivered"]["consumer_seq"] == stalled_at and info["num_pending"] == N - stalled_at
        assert wire.hb == []  # nothing more without the clock: no timer ran

        # The idle heartbeat interval passes on the server's clock: a heartbeat saying where
        # delivery stands and which request it waits for; delivery stays stalled.
        await srv.advance(5)
        await wire.settle()
        assert len(wire.hb) == 1, wire.hb
        hb = wire.hb[0]
        assert hb["Nats-Consumer-Stalled"] == wire.fc[0]
        assert hb["Nats-Last-Consumer"] == str(stalled_at) and hb["Nats-Last-Stream"] == str(stalled_at)
        assert len(wire.data) == stalled_at
        await srv.advance(5)  # and again at every interval while the request is unanswered
        await wire.settle()
        assert [h.get("Nats-Consumer-Stalled") for h in wire.hb] == [wire.fc[0]] * 2
        assert len(wire.data) == stalled_at

        # Answering the request the heartbeat names (what a client library does) lets the rest through.
        await nc.publish(wire.hb[-1]["Nats-Consumer-Stalled"], b"")
        await wire.settle()
        assert wire.data == list(range(1, N + 1))
        # Later heartbeats are not stalled (any new request of the doubled window is answered first).
        for fc in wire.fc[1:]:
            await nc.publish(fc, b"")
        await nc.flush()
        await srv.advance(5)
        await wire.settle()
        assert "Nats-Consumer-Stalled" not in wire.hb[-1], wire.hb[-1]
        assert wire.hb[-1]["Nats-Last-Consumer"] == str(N)
        await nc.close()


async def test_nats_py_answers_the_stalled_heartbeat_that_the_clock_brings():
    """nats-py's push subscription holds its flow-control reply until the application has taken
    the messages before the request; an application that takes none leaves the server stalled,
    and the next idle heartbeat (moved by ``advance``) carries the reply nats-py then sends."""
    async with InProcessServer() as srv:
        nc = await nats.connect(srv.url)
        await _fill(nc)
        js = nc.jetstream()
        sub = await js.subscribe("fc.>", stream="FC", durable="P", flow_control=True, idle_heartbeat=5, manual_ack=True)

        async def delivered() -> int:
            prev = -1
            while True:  # settle: the count holds still for a while (real time)
                await asyncio.sleep(0.3)
                n = srv.consumer_info("FC", "P")["delivered"]["consumer_seq"]
                if n == prev:
                    return n
                prev = n

        stalled_at = await delivered()
        assert 0 < stalled_at < N
        assert sub.pending_msgs == stalled_at  # all of it waits in nats-py, none taken by the app

        await srv.advance(5)  # the stalled heartbeat: nats-py answers it, the server goes on
        assert await delivered() == N
        assert sub.pending_msgs == N
        await nc.close()


@pytest.mark.reference
async def test_stall_and_stalled_heartbeat_match_nats_server(tmp_path):
    """The same stall against nats-server (its heartbeats on its own clock, so a short interval):
    where delivery stops, that the heartbeat names the unanswered request, that its answer lets
    the rest through."""

    async def observe(url: str) -> dict:
        nc = await nats.connect(url)
        await _fill(nc)
        wire = _Wire()
        await nc.subscribe("deliver.fc", cb=wire.on_msg)
        await nc.jetstream().add_consumer(
            "FC", ConsumerConfig(durable_name="C", deliver_subject="deliver.fc", flow_control=True, idle_heartbeat=0.4)
        )
        loop = asyncio.get_running_loop()
        end = loop.time() + 10
        while not wire.hb and loop.time() < end:
            await asyncio.sleep(0.05)
        out = {
            "requests_before_stall": len(wire.fc),
            "stalled_at": len(wire.data),
            "heartbeat_names_the_request": bool(wire.hb) and wire.hb[0].get("Nats-Consumer-Stalled") == wire.fc[-1],
            "last_consumer": wire.hb[0].get("Nats-Last-Consumer") if wire.hb else None,
        }
        await nc.publish(wire.fc[-1], b"")
        while len(wire.data) < N and loop.time() < end:
            await asyncio.sleep(0.05)
        out["delivered_after_answer"] = len(wire.data)
        await nc.close()
        return out

    expected, got = await side_by_side(tmp_path, observe)
    assert expected["heartbeat_names_the_request"] and expected["delivered_after_answer"] == N
    assert got == expected
