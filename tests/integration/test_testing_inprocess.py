"""natsd.testing.InProcessServer through real nats-py clients (issue 26): lifecycle and leaks,
options, time control of each timer family, faults, crash and restart, introspection."""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import threading
import time

import nats
import pytest
from nats.js.api import ConsumerConfig, StreamConfig
from nats.js.errors import APIError

from natsd.testing import InProcessServer, SyncServer

pytestmark = pytest.mark.integration


def _fds() -> set[str]:
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return out


async def test_starts_fast_and_leaves_nothing_behind():
    # Warm-up: the first start imports the server and JetStream (a once-per-process cost).
    async with InProcessServer() as srv:
        nc = await nats.connect(srv.url)
        await nc.jetstream().add_stream(name="W", subjects=["w"])
        await nc.close()
    gc.collect()
    tasks_before = set(asyncio.all_tasks())
    threads_before = {t.ident for t in threading.enumerate()}
    fds_before = _fds()
    times = []
    dirs = []
    for _ in range(15):
        srv = InProcessServer()
        t0 = time.perf_counter()
        await srv.start()
        times.append(time.perf_counter() - t0)
        dirs.append(srv.store_dir)
        nc = await nats.connect(srv.url)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s"])
        await js.publish("s", b"x")
        await nc.close()
        await srv.stop()
    gc.collect()
    await asyncio.sleep(0)
    # A bound on a loaded machine; bench/bench_testing.py reports the median (well under 10 ms).
    assert statistics.median(times) < 0.05, times
    assert set(asyncio.all_tasks()) == tasks_before
    # The store's writer threads are process-wide (started once, idle after); no server adds any.
    assert {t.ident for t in threading.enumerate()} <= threads_before | _process_threads()
    leaked = {p for p in _fds() - fds_before if "natsd-test-" in p or p.startswith("socket:")}
    assert not leaked, leaked
    assert not any(os.path.exists(d) for d in dirs)


def _process_threads() -> set:
    return {t.ident for t in threading.enumerate() if t.name.startswith(("natsd-block-writer", "natsd-consumer-state"))}


async def test_options_by_keyword_and_config_text():
    async with InProcessServer(max_payload=1024, config="server_name: unit-a\n") as srv:
        nc = await nats.connect(srv.url)
        assert nc.max_payload == 1024
        assert nc._server_info["server_name"] == "unit-a"
        assert nc._server_info["jetstream"] is True
        await nc.close()
    with pytest.raises(ValueError):
        InProcessServer(no_such_option=1)


async def test_redelivery_after_ack_wait_then_backoff_then_max_deliver_advisory():
    async with InProcessServer() as srv:
        nc = await nats.connect(srv.url)
        js = nc.jetstream()
        await js.add_stream(name="JOBS", subjects=["jobs"])
        await js.add_consumer(
            "JOBS",
            ConsumerConfig(durable_name="W", ack_policy="explicit", ack_wait=30, backoff=[60, 300], max_deliver=3),
        )
        sub = await js.pull_subscribe_bind("W", stream="JOBS")
        await js.publish("jobs", b"poison")
        t0 = time.perf_counter()
        (m,) = await sub.fetch(1, timeout=1)
        assert m.metadata.num_delivered == 1
        # Not yet: 59 s pass and nothing is redelivered (backoff[0] = 60 s overrides ack_wait).
        await srv.advance(59)
        assert srv.consumer_info("JOBS", "W")["num_redelivered"] == 0
        await srv.advance(2)  # (the server checks 1 ms past the deadline)
        (m,) = await sub.fetch(1, timeout=1)
        assert m.metadata.num_delivered == 2
        await srv.advance(298)
        assert srv.consumer_info("JOBS", "W")["num_redelivered"] == 1
        await srv.advance(3)
        (m,) = await sub.fetch(1, timeout=1)
        assert m.metadata.num_delivered == 3
        await srv.advance(301)
        # The server gives up on the message when a pull finds it past max_deliver.
        with pytest.raises(nats.errors.TimeoutError):
            await sub.fetch(1, timeout=0.2)
        for _ in range(50):
            if srv.captured.advisories_of("max_deliver"):
                break
            await asyncio.sleep(0.01)
        (adv,) = srv.captured.advisories_of("max_deliver")
        assert adv["stream"] == "JOBS" and adv["consumer"] == "W" and adv["deliveries"] == 3
        assert time.perf_counter() - t0 < 5  # 11 minutes of server time
        await nc.close()


async def test_max_age_and_per_message_ttl_expire_on_advance():
    async with InProcessServer() as srv:
        nc = await nats.connect(srv.url)
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="A", subjects=["a"], max_age=3600, allow_msg_ttl=True))
        await js.publish("a", b"old")
        await js.publish("a", b"short", headers={"Nats-TTL": "10s"})
        assert srv.stream_info("A")["msgs"] == 2
        await srv.advance(11)
        assert srv.stream_info("A")["msgs"] == 1
        await srv.advance(3600)
        assert srv.stream_info("A")["msgs"] == 0
        await nc.close()


async def test_duplicate_window_and_inactive_threshold():
    async with InProcessServer() as srv:
        nc = await nats.connect(srv.url)
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="D", subjects=["d"], duplicate_window=60))
        a1 = await js.publish("d", b"1", headers={"Nats-Msg-Id": "x"})
        a2 = await js.publish("d", b"1", headers={"Nats-Msg-Id": "x"})
        assert a2.duplicate and a2.seq == a1.seq
        await srv.advance(61)
        a3 = await js.publish("d", b"1", headers={"Nats-Msg-Id": "x"})
        assert not a3.duplicate and a3.seq == a1.seq + 1
        await js.add_consumer("D", ConsumerConfig(name="EPH", inactive_threshold=5))
        assert srv.stream_info("D")["consumer_count"] == 1
        await srv.advance(6)
        assert srv.stream_info("D")["consumer_count"] == 0
        await nc.close()


async def test_pull_request_expiry_is_on_the_server_clock():
    async with InProcessServer() as srv:
        nc = await nats.connect(srv.url)
        js = nc.jetstream()
        await js.add_stream(name="P", subjects=["p"])
        await js.add_consumer("P", ConsumerConfig(durable_name="C", ack_policy="explicit"))
        inbox = nc.new_inbox()
        got: asyncio.Queue = asyncio.Queue()

        async def cb(msg):
            await got.put(msg)

        await nc.subscribe(inbox, cb=cb)
        # A pull request that expires in 30 s of server time.
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.P.C", b'{"batch":1,"expires":30000000000}', reply=inbox)
        await nc.flush()
        await asyncio.sleep(0.05)
        assert got.empty()
        assert srv.consumer_info("P", "C")["num_waiting"] == 1
        await srv.advance(31)
        msg = await asyncio.wait_for(got.get(), 2)
        assert msg.headers and msg.headers.get("Status") == "408"
        await nc.close()


async def test_disk_full_then_space_back():
    async with InProcessServer() as srv:
        nc = await nats.connect(srv.url)
        js = nc.jetstream()
        await js.add_stream(name="F", subjects=["f"])
        await js.publish("f", b"1")
        srv.faults.disk_full()
        with pytest.raises(APIError) as e:
            await js.publish("f", b"2", timeout=2)
        assert e.value.err_code == 10023  # insufficient resources, as on a real full disk
        srv.faults.disk_ok()
        ack = await js.publish("f", b"3")
        assert ack.seq == 2
        assert srv.stream_info("F")["msgs"] == 2
        await nc.close()


async def test_crash_loses_nothing_acknowledged_and_restart_recovers():
    async with InProcessServer() as srv:
        nc = await nats.connect(srv.url, max_reconnect_attempts=-1, reconnect_time_wait=0.05)
        js = nc.jetstream()
        await js.add_stream(name="C", subjects=["c"])
        await js.add_consumer("C", ConsumerConfig(durable_name="D", ack_policy="explicit"))
        for i in range(20):
            await js.publish("c", b"%d" % i)
        sub = await js.pull_subscribe_bind("D", stream="C")
        for m in await sub.fetch(5, timeout=1):
            await m.ack_sync()
        await srv.restart()  # clean: consumer state written
        assert srv.consumer_info("C", "D")["ack_floor"]["stream_seq"] == 5
        for m in await sub.fetch(5, timeout=5):
            await m.ack_sync()
        assert srv.consumer_info("C", "D")["ack_floor"]["stream_seq"] == 10
        port = srv.port
        await srv.crash()
        assert srv.server is None
        await srv.start()
        assert srv.port == port
        # Every published message was acknowledged once it had reached the OS: all are back.
        assert srv.stream_info("C")["msgs"] == 20
        # The consumer's last acks were still in memory (state is flushed on the sync timer, which
        # did not run): they are lost as in a real kill -9, and those messages come again.
        assert srv.consumer_info("C", "D")["ack_floor"]["stream_seq"] == 5
        # The client reconnects to the same port by itself.
        ack = await js.publish("c", b"after", timeout=5)
        assert ack.seq == 21
        # 6-10 were delivered before the crash: they come again once their ack wait passes.
        fresh = await sub.fetch(5, timeout=5)
        assert [m.metadata.sequence.stream for m in fresh] == [11, 12, 13, 14, 15]
        for m in fresh:
            await m.ack_sync()
        await srv.advance(31)
        again = await sub.fetch(5, timeout=5)
        assert [m.metadata.sequence.stream for m in again] == [6, 7, 8, 9, 10]
        assert all(m.metadata.num_delivered == 2 for m in again)
        await nc.close()


async def test_cut_client_and_memory_pressure():
    async with InProcessServer() as srv:
        disconnected = asyncio.Event()

        async def on_disc():
            disconnected.set()

        nc = await nats.connect(srv.url, name="victim", disconnected_cb=on_disc, reconnect_time_wait=0.05)
        other = await nats.connect(srv.url, name="bystander")
        assert srv.faults.cut_client("victim") == 1
        await asyncio.wait_for(disconnected.wait(), 2)
        await other.flush()  # unharmed
        js = other.jetstream()
        await js.add_stream(StreamConfig(name="M", subjects=["m"], storage="memory"))
        await js.publish("m", b"x" * 100)
        srv.faults.memory_pressure(headroom=50)
        await js.publish("m", b"x" * 100)  # the one that goes over (checked before storing)
        with pytest.raises(APIError) as e:
            await js.publish("m", b"x" * 100)
        assert e.value.err_code == 10023
        srv.faults.memory_ok()
        await js.publish("m", b"x" * 100)
        await other.close()
        await nc.close()


async def test_log_lines_captured_per_server():
    async with InProcessServer() as srv:
        assert any("Server is ready" in line for line in srv.captured.logs)


def test_sync_server_from_plain_code():
    threads_before = {t.ident for t in threading.enumerate()}
    with SyncServer() as srv:

        async def scenario():
            nc = await nats.connect(srv.url)
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s"])
            await js.add_consumer("S", ConsumerConfig(durable_name="D", ack_policy="explicit", ack_wait=10))
            await js.publish("s", b"x")
            sub = await js.pull_subscribe_bind("D", stream="S")
            await sub.fetch(1, timeout=1)
            srv.advance(11)  # on the server's own loop thread; this loop is the client's
            (m,) = await sub.fetch(1, timeout=2)
            await nc.close()
            return m.metadata.num_delivered

        assert asyncio.run(scenario()) == 2
        assert srv.stream_info("S")["msgs"] == 1
    # Its loop thread is gone (the store's process-wide writer threads may have started).
    assert {t.ident for t in threading.enumerate()} <= threads_before | _process_threads()


async def test_slow_fsync_slows_synced_publishes():
    async with InProcessServer(jetstream={"sync_interval": "always"}) as srv:
        nc = await nats.connect(srv.url)
        js = nc.jetstream()
        await js.add_stream(name="Y", subjects=["y"])
        await js.publish("y", b"warm")
        srv.faults.slow_fsync(0.3)
        t0 = time.perf_counter()
        await js.publish("y", b"slow", timeout=5)
        assert time.perf_counter() - t0 >= 0.3  # the PubAck waited for the (slow) fsync
        srv.faults.slow_fsync(0)
        t0 = time.perf_counter()
        await js.publish("y", b"fast")
        assert time.perf_counter() - t0 < 0.3
        await nc.close()


async def test_cut_leafnode_link_reconnects():
    async with InProcessServer(leafnodes={"port": -1}) as hub:
        hub_leaf_port = hub.server.leafnodes.port
        async with InProcessServer(
            jetstream=False,
            clock="real",
            leafnodes={"remotes": [{"url": f"nats://127.0.0.1:{hub_leaf_port}"}], "reconnect": "50ms"},
        ) as leaf:

            async def links(srv) -> int:
                return sum(len(v) for v in srv.server.leafnodes.links.values())

            for _ in range(200):
                if await links(hub) and await links(leaf):
                    break
                await asyncio.sleep(0.01)
            assert await links(hub) == 1
            (first,) = [c for v in hub.server.leafnodes.links.values() for c in v]
            assert hub.faults.cut_leaf() == 1
            # The leaf solicits again by itself (its reconnect delay, real time here): a new link.
            for _ in range(300):
                now = [c for v in hub.server.leafnodes.links.values() for c in v]
                if now and now[0] is not first and await links(leaf) == 1:
                    break
                await asyncio.sleep(0.01)
            (second,) = [c for v in hub.server.leafnodes.links.values() for c in v]
            assert second is not first


async def test_slow_consumer_fault_closes_that_client_only():
    async with InProcessServer() as srv:
        errors: list = []

        async def on_err(e):
            errors.append(e)

        slow = await nats.connect(srv.url, name="slow", error_cb=on_err, allow_reconnect=False)
        fine = await nats.connect(srv.url, name="fine")
        got: list = []

        async def cb(msg):
            got.append(msg)

        await slow.subscribe("burst", cb=cb)
        await fine.subscribe("burst", cb=cb)
        await slow.flush()
        await fine.flush()
        assert srv.faults.slow_consumer("slow", max_pending=64) == 1
        pub = await nats.connect(srv.url)
        for _ in range(50):
            await pub.publish("burst", b"x" * 100)
        await pub.flush()
        for _ in range(200):
            if slow.is_closed:
                break
            await asyncio.sleep(0.01)
        assert slow.is_closed
        assert srv.server.slow_consumers == 1
        assert fine.is_connected
        await fine.close()
        await pub.close()
