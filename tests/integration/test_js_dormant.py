"""Streams that start asleep after a clean stop (natsd.jetstream.dormant): what a client sees
of a sleeping stream is what it saw before the restart, and every use wakes it first."""

from __future__ import annotations

import os

import pytest
from nats.errors import NoRespondersError
from nats.js.api import ConsumerConfig

from natsd.clock import ManualClock
from natsd.jetstream.dormant import RESTART_FILE, is_dormant
from tests.helpers.jsapi import js_api as api
from tests.helpers.inproc import running_server, server_and_client

SECOND = 10**9

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def stream(server, name: str):
    return server.jetstream.accounts["$G"].streams[name]


async def fill(tmp_path, **extra) -> tuple[dict, dict]:
    """Stream S (subjects s.>, 5 messages over 3 subjects, one deleted) with a durable pull
    consumer C that was handed 2 messages and acked 1; returns (STREAM.INFO, CONSUMER.INFO)."""
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"], **extra)
        for i in range(5):
            await js.publish(f"s.{i % 3}", f"m{i}".encode())
        await js.delete_msg("S", 2)
        await js.add_consumer("S", ConsumerConfig(durable_name="C", ack_policy="explicit"))
        sub = await js.pull_subscribe_bind("C", "S")
        msgs = await sub.fetch(2, timeout=2)
        await msgs[0].ack_sync()
        si = await api(nc, "$JS.API.STREAM.INFO.S")
        ci = await api(nc, "$JS.API.CONSUMER.INFO.S.C")
    assert os.path.isfile(tmp_path / "jetstream" / "$G" / RESTART_FILE)
    return si, ci


def comparable_consumer(ci: dict) -> dict:
    # (last_active is not persisted: a restart drops it, asleep or not)
    out = {k: v for k, v in ci.items() if k not in ("ts", "created")}
    for k in ("delivered", "ack_floor"):
        out[k] = {f: v for f, v in out[k].items() if f != "last_active"}
    return out


async def test_info_of_a_sleeping_stream_is_as_before_the_restart(tmp_path):
    si, ci = await fill(tmp_path)
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        assert not os.path.exists(tmp_path / "jetstream" / "$G" / RESTART_FILE)  # removed at start
        assert is_dormant(stream(server, "S"))
        after = await api(nc, "$JS.API.STREAM.INFO.S")
        assert after["state"] == si["state"] and after["config"] == si["config"]
        info = await api(nc, "$JS.API.INFO")
        assert (info["streams"], info["consumers"], info["storage"]) == (1, 1, si["state"]["bytes"])
        assert is_dormant(stream(server, "S"))  # nothing of that needed the store
        # The consumer is there (and wakes the stream): its state as it was.
        after_c = await api(nc, "$JS.API.CONSUMER.INFO.S.C")
        assert comparable_consumer(after_c) == comparable_consumer(ci)
        assert not is_dormant(stream(server, "S"))
        assert (await api(nc, "$JS.API.STREAM.INFO.S"))["state"] == si["state"]
        deleted = await api(nc, "$JS.API.STREAM.INFO.S", {"deleted_details": True})
        assert deleted["state"]["deleted"] == [2]


async def test_publish_into_a_sleeping_stream_wakes_it(tmp_path):
    await fill(tmp_path)
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        js = nc.jetstream()
        assert is_dormant(stream(server, "S"))
        ack = await js.publish("s.9", b"after")
        assert (ack.stream, ack.seq) == ("S", 6)
        assert not is_dormant(stream(server, "S"))
        assert (await js.get_msg("S", 6)).data == b"after"
        assert (await js.get_msg("S", 1)).data == b"m0"
        st = (await js.stream_info("S")).state
        assert (st.messages, st.first_seq, st.last_seq, st.consumer_count) == (5, 1, 6, 1)


async def test_get_and_direct_get_wake_a_sleeping_stream(tmp_path):
    await fill(tmp_path, allow_direct=True)
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        assert is_dormant(stream(server, "S"))
        m = await nc.request("$JS.API.DIRECT.GET.S", b'{"seq": 4}', timeout=5)
        assert m.data == b"m3" and m.headers["Nats-Sequence"] == "4"
        assert not is_dormant(stream(server, "S"))
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        assert is_dormant(stream(server, "S"))  # (stopped cleanly again: asleep again)
        r = await api(nc, "$JS.API.STREAM.MSG.GET.S", {"last_by_subj": "s.0"})
        assert r["message"]["seq"] == 4
        assert not is_dormant(stream(server, "S"))


async def test_fetch_and_ack_from_a_sleeping_streams_consumer(tmp_path):
    await fill(tmp_path)
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        js = nc.jetstream()
        assert is_dormant(stream(server, "S"))
        sub = await js.pull_subscribe_bind("C", "S")
        msgs = await sub.fetch(3, timeout=2)
        # m1 was handed out before the restart and not acked: redelivered once its ack wait
        # ends; the next new ones are m3 and m4 (seq 2 was deleted).
        assert [m.metadata.sequence.stream for m in msgs][:2] == [4, 5]
        for m in msgs:
            await m.ack_sync()
        ci = await js.consumer_info("S", "C")
        assert ci.num_ack_pending == 1 and ci.delivered.stream_seq == 5


async def test_a_pull_request_to_a_missing_consumer_of_a_sleeping_stream_gets_no_responders(tmp_path):
    await fill(tmp_path)
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        with pytest.raises(NoRespondersError):  # (as for a missing consumer of an awake stream)
            await nc.request("$JS.API.CONSUMER.MSG.NEXT.S.NOPE", b'{"batch": 1}', timeout=5)
        assert not is_dormant(stream(server, "S"))
        with pytest.raises(NoRespondersError):
            await nc.request("$JS.API.CONSUMER.MSG.NEXT.S.NOPE", b'{"batch": 1}', timeout=5)


async def test_an_ack_after_the_restart_reaches_a_sleeping_streams_consumer(tmp_path):
    """An ack of a message handed out before the restart ($JS.ACK.S.C...) wakes the stream."""
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        await js.publish("s.1", b"one")
        await js.add_consumer("S", ConsumerConfig(durable_name="C", ack_policy="explicit", ack_wait=600))
        sub = await js.pull_subscribe_bind("C", "S")
        (msg,) = await sub.fetch(1, timeout=2)
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        assert is_dormant(stream(server, "S"))
        await nc.request(msg.reply, b"+ACK", timeout=5)  # (acks with a reply are confirmed)
        ci = await nc.jetstream().consumer_info("S", "C")
        assert (ci.num_ack_pending, ci.ack_floor.stream_seq) == (0, 1)


async def test_max_age_wakes_a_sleeping_stream_when_its_first_message_is_due(tmp_path):
    clock = ManualClock(soon_on_loop=True)
    async with server_and_client(store_dir=str(tmp_path), clock=clock) as (server, nc):
        js = nc.jetstream()
        await js.add_stream(name="AGE", subjects=["age.>"], max_age=60)
        await js.publish("age.1", b"old")
        clock.advance(30 * SECOND)
        await js.publish("age.2", b"newer")
    async with server_and_client(store_dir=str(tmp_path), clock=clock) as (server, nc):
        js = nc.jetstream()
        assert is_dormant(stream(server, "AGE"))
        clock.advance(29 * SECOND)
        assert is_dormant(stream(server, "AGE"))  # nothing is due yet
        clock.advance(2 * SECOND)  # the first message is 61 s old: woken, expired
        assert not is_dormant(stream(server, "AGE"))
        st = (await js.stream_info("AGE")).state
        assert (st.messages, st.first_seq, st.last_seq) == (1, 2, 2)
        clock.advance(30 * SECOND)  # and the expiry armed at the wake-up goes on
        st = (await js.stream_info("AGE")).state
        assert (st.messages, st.first_seq) == (0, 3)


async def test_streams_with_timers_or_push_consumers_start_awake(tmp_path):
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        js = nc.jetstream()
        await js.add_stream(name="AGE", subjects=["age.>"], max_age=3600)
        await js.add_stream(name="TTL", subjects=["ttl.>"], allow_msg_ttl=True)
        await js.add_stream(name="PUSH", subjects=["push.>"])
        await js.add_stream(name="PLAIN", subjects=["plain.>"])
        for s in ("age", "push", "plain"):
            await js.publish(f"{s}.x", b"x")
        await js.add_consumer("PUSH", ConsumerConfig(durable_name="P", deliver_subject="deliver.p"))
        await js.add_consumer("PLAIN", ConsumerConfig(durable_name="Q", inactive_threshold=3600))
    async with running_server(store_dir=str(tmp_path)) as server:
        assert is_dormant(stream(server, "AGE"))  # (max_age: asleep until its first message is due)
        assert stream(server, "AGE").store.timer is not None
        assert not is_dormant(stream(server, "TTL"))  # (per-message TTLs: its own expiry timers)
        assert not is_dormant(stream(server, "PUSH"))
        assert not is_dormant(stream(server, "PLAIN"))  # (a consumer with an inactive threshold)
        assert set(stream(server, "PUSH").consumers) == {"P"}


async def test_a_changed_stream_directory_is_recovered_at_start(tmp_path):
    """Files that differ from what the clean stop recorded (another server ran on the
    directory, here a block grew): the stream is recovered at start, never trusted; the bytes
    that are no record are cut and reported."""
    await fill(tmp_path)
    blk = tmp_path / "jetstream" / "$G" / "streams" / "S" / "msgs" / "1.blk"
    with open(blk, "ab") as f:
        f.write(b"\x07" * 5)
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        assert not is_dormant(stream(server, "S"))
        assert set(stream(server, "S").consumers) == {"C"}
        assert stream(server, "S").store.state().lost_bytes == 5


async def test_a_touched_but_unchanged_stream_directory_still_sleeps(tmp_path):
    """Only an mtime differs from the clean stop's fingerprint: the restart file's entry is not
    trusted, but the stream's own files show exactly what a recovery would find (index.db
    current, every block as it recorded: natsd.store.file.peek), so it sleeps all the same."""
    si, _ = await fill(tmp_path)
    blk = tmp_path / "jetstream" / "$G" / "streams" / "S" / "msgs" / "1.blk"
    os.utime(blk, ns=(0, 0))
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        assert is_dormant(stream(server, "S"))
        after = await api(nc, "$JS.API.STREAM.INFO.S")
        assert after["state"] == si["state"]
        assert is_dormant(stream(server, "S"))
        assert (await nc.jetstream().get_msg("S", 5)).data == b"m4"  # (wakes it)
        assert not is_dormant(stream(server, "S"))


async def test_sleeping_stream_delete_and_purge(tmp_path):
    await fill(tmp_path)
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        js = nc.jetstream()
        assert await js.purge_stream("S")
        st = (await js.stream_info("S")).state
        assert (st.messages, st.first_seq) == (0, 6)
        assert await js.delete_stream("S")
        assert "S" not in server.jetstream.accounts["$G"].streams
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        assert "S" not in server.jetstream.accounts["$G"].streams


async def test_a_restart_file_is_used_once(tmp_path):
    """Start removes the restart file, so a crash after a stream woke and changed finds none
    and recovers every stream (kill -9 itself: tests/acceptance/test_store_kill9.py)."""
    await fill(tmp_path)
    path = tmp_path / "jetstream" / "$G" / RESTART_FILE
    saved = path.read_bytes()
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        assert not path.exists()
        await nc.jetstream().publish("s.1", b"new")
    # Put the old file back as a crash would have left things (the file of the earlier stop,
    # files changed since): the fingerprints no longer match, so its counters are not used; the
    # stream's own files (index.db current since the last stop) tell its state.
    path.write_bytes(saved)
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        assert (await nc.jetstream().stream_info("S")).state.last_seq == 6
        assert (await nc.jetstream().get_msg("S", 6)).data == b"new"


async def test_a_stream_asleep_through_a_run_sleeps_again_with_the_same_config(tmp_path):
    si, _ = await fill(tmp_path, max_msgs=1000, description="kept")
    for _ in range(2):
        async with running_server(store_dir=str(tmp_path)) as server:
            assert is_dormant(stream(server, "S"))  # (never touched: its entry is carried over)
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        assert is_dormant(stream(server, "S"))
        after = await api(nc, "$JS.API.STREAM.INFO.S")
        assert after["config"] == si["config"] and after["state"] == si["state"]
        assert after["created"] == si["created"]
