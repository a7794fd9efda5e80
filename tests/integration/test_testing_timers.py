"""Each remaining timer family of the server, moved by ``InProcessServer.advance`` and observed
through nats-py (issue 26): idle heartbeats, pause deadlines, subject delete markers, message
schedules, pinned-client timeouts, client pings and lame duck. None of them sleeps."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import nats
import pytest
from nats.js.api import ConsumerConfig, StreamConfig

from natsd.testing import InProcessServer

pytestmark = pytest.mark.integration


async def _req(nc, subject: str, body: dict) -> dict:
    return json.loads((await nc.request(subject, json.dumps(body).encode(), timeout=2)).data)


def _rfc3339(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def test_idle_heartbeats_follow_the_server_clock():
    async with InProcessServer() as srv:
        nc = await nats.connect(srv.url)
        js = nc.jetstream()
        await js.add_stream(name="H", subjects=["h"])
        inbox = nc.new_inbox()
        beats: asyncio.Queue = asyncio.Queue()

        async def cb(msg):
            await beats.put(msg)

        await nc.subscribe(inbox, cb=cb)
        await js.add_consumer(
            "H", ConsumerConfig(durable_name="P", deliver_subject=inbox, idle_heartbeat=30, flow_control=True)
        )
        await nc.flush()
        await asyncio.sleep(0.05)
        assert beats.empty()
        await srv.advance(31)
        msg = await asyncio.wait_for(beats.get(), 2)
        assert msg.headers["Status"] == "100" and msg.headers["Description"] == "Idle Heartbeat"
        await nc.close()


async def test_paused_consumer_resumes_at_its_deadline():
    async with InProcessServer() as srv:
        nc = await nats.connect(srv.url)
        js = nc.jetstream()
        await js.add_stream(name="Q", subjects=["q"])
        until = _rfc3339(srv.clock.time_ns() + 60 * 10**9)
        r = await _req(
            nc,
            "$JS.API.CONSUMER.CREATE.Q.C",
            {"stream_name": "Q", "config": {"durable_name": "C", "ack_policy": "explicit", "pause_until": until}},
        )
        assert r["paused"] is True, r
        await js.publish("q", b"x")
        sub = await js.pull_subscribe_bind("C", stream="Q")
        with pytest.raises(nats.errors.TimeoutError):
            await sub.fetch(1, timeout=0.2)
        await srv.advance(61)
        assert srv.consumer_info("Q", "C").get("paused") is not True
        (m,) = await sub.fetch(1, timeout=2)
        assert m.data == b"x"
        await nc.close()


async def test_max_age_leaves_a_delete_marker_that_expires_in_turn():
    async with InProcessServer() as srv:
        nc = await nats.connect(srv.url)
        js = nc.jetstream()
        await js.add_stream(
            StreamConfig(
                name="K",
                subjects=["k.>"],
                max_age=60,
                allow_msg_ttl=True,
                subject_delete_marker_ttl=10,
                allow_rollup_hdrs=True,
            )
        )
        await js.publish("k.a", b"v")
        await srv.advance(61)
        st = srv.stream_info("K")
        assert st["msgs"] == 1 and st["last_seq"] == 2  # the marker replaced the message
        marker = await js.get_last_msg("K", "k.a")
        assert marker.headers.get("Nats-Marker-Reason") == "MaxAge"
        await srv.advance(11)
        assert srv.stream_info("K")["msgs"] == 0
        await nc.close()


async def test_scheduled_message_is_produced_when_its_time_comes():
    async with InProcessServer() as srv:
        nc = await nats.connect(srv.url)
        js = nc.jetstream()
        await _req(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"], "allow_msg_schedules": True})
        at = dt.datetime.fromtimestamp(srv.clock.time_ns() / 1e9 + 3600, dt.timezone.utc)
        ack = await js.publish(
            "s.sched",
            b"later",
            headers={"Nats-Schedule": "@at " + at.strftime("%Y-%m-%dT%H:%M:%SZ"), "Nats-Schedule-Target": "s.out"},
        )
        assert ack.seq == 1
        await srv.advance(3000)
        assert srv.stream_info("S")["msgs"] == 1
        await srv.advance(601)
        out = await js.get_last_msg("S", "s.out")
        assert out.data == b"later"
        await nc.close()


async def test_pinned_client_loses_its_pin_after_the_priority_timeout():
    async with InProcessServer() as srv:
        nc = await nats.connect(srv.url)
        js = nc.jetstream()
        await js.add_stream(name="PG", subjects=["pg"])
        r = await _req(
            nc,
            "$JS.API.CONSUMER.CREATE.PG.C",
            {
                "stream_name": "PG",
                "config": {
                    "durable_name": "C",
                    "ack_policy": "explicit",
                    "priority_policy": "pinned_client",
                    "priority_groups": ["g"],
                    "priority_timeout": 30 * 10**9,
                },
            },
        )
        assert "error" not in r, r
        await js.publish("pg", b"1")
        inbox = nc.new_inbox()
        got: asyncio.Queue = asyncio.Queue()

        async def cb(msg):
            await got.put(msg)

        await nc.subscribe(inbox, cb=cb)
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.PG.C", b'{"batch":1,"group":"g"}', reply=inbox)
        m = await asyncio.wait_for(got.get(), 2)
        pin = m.headers["Nats-Pin-Id"]
        assert srv.consumer_info("PG", "C")["priority_groups"][0]["pinned_client_id"] == pin
        await srv.advance(31)
        info = srv.consumer_info("PG", "C")
        assert not info["priority_groups"][0].get("pinned_client_id"), info["priority_groups"]
        assert srv.captured.advisories_of("consumer_group_unpinned")
        await nc.close()


async def test_stale_client_is_dropped_by_server_pings():
    async with InProcessServer(ping_interval="10s", ping_max=2) as srv:
        # A client that connects and then never answers PING (a raw socket: nats-py answers them).
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        await reader.readline()  # INFO
        writer.write(b'CONNECT {"verbose":false}\r\nPING\r\n')
        assert await reader.readline() == b"PONG\r\n"
        for _ in range(2):  # ping_max unanswered PINGs, then the next tick closes it
            await srv.advance(10)
            assert await reader.readline() == b"PING\r\n"
        await srv.advance(10)
        assert (await reader.read()).startswith(b"-ERR 'Stale Connection'")
        assert srv.server.stale_connections == 1
        writer.close()


async def test_lame_duck_closes_clients_on_the_clock():
    async with InProcessServer(lame_duck_duration="30s", lame_duck_grace_period="10s") as srv:
        ldm = asyncio.Event()
        nc = await nats.connect(srv.url, lame_duck_mode_cb=_set(ldm), allow_reconnect=False)
        task = asyncio.ensure_future(srv.lame_duck())
        await asyncio.wait_for(ldm.wait(), 2)
        await srv.advance(9)
        assert nc.is_connected
        await srv.advance(21)
        await asyncio.wait_for(task, 2)
        for _ in range(100):
            if nc.is_closed:
                break
            await asyncio.sleep(0.01)
        assert nc.is_closed
        assert srv.server is None  # the server shut itself down


def _set(ev: asyncio.Event):
    async def cb() -> None:
        ev.set()

    return cb
