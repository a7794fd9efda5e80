"""Snapshot/restore through real sockets: the raw protocol with nats-py, and a 100k-message stream with
consumers backed up with ``natsctl stream backup`` and restored with ``natsctl stream restore`` into a
second natsd."""

from __future__ import annotations

import asyncio
import json
import random

import nats
import pytest

import cramjam

from natsd.jetstream.snapshot import MAGIC, ArchiveReader
from tests.helpers.cli import run_cli
from tests.helpers.inproc import running_server

pytestmark = pytest.mark.integration


def _js_account(server, name: str = "$G"):
    acc = server.get_account(name).jetstream
    assert acc is not None
    return acc


async def _api(nc, subject: str, body: dict | bytes = b"", timeout: float = 5.0) -> dict:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    msg = await nc.request(subject, data, timeout=timeout)
    return json.loads(msg.data)


async def _raw_snapshot(nc, stream: str, chunk_size: int = 4096, **extra) -> tuple[dict, list, bytes]:
    inbox = nc.new_inbox()
    got: list = []
    done = asyncio.get_running_loop().create_future()

    async def on_msg(msg):
        got.append(msg)
        if msg.data:
            if msg.reply:
                await nc.publish(msg.reply, b"")
        elif not done.done():
            done.set_result(msg)

    sub = await nc.subscribe(inbox, cb=on_msg, pending_msgs_limit=-1, pending_bytes_limit=-1)
    reply = await _api(
        nc, f"$JS.API.STREAM.SNAPSHOT.{stream}", {"deliver_subject": inbox, "chunk_size": chunk_size, **extra}
    )
    await asyncio.wait_for(done, 20)
    await sub.unsubscribe()
    return reply, got, b"".join(m.data for m in got)


async def _raw_restore(nc, meta: dict, data: bytes, chunk: int = 64 * 1024) -> dict:
    name = meta["config"]["name"]
    out = await _api(nc, f"$JS.API.STREAM.RESTORE.{name}", {"config": meta["config"], "state": meta["state"]})
    assert out["type"] == "io.nats.jetstream.api.v1.stream_restore_response", out
    for i in range(0, len(data), chunk):
        ack = await nc.request(out["deliver_subject"], data[i : i + chunk], timeout=5)
        assert ack.data == b""
    final = await nc.request(out["deliver_subject"], b"", timeout=30)
    return json.loads(final.data)


async def test_snapshot_protocol_with_raw_nats_py_requests():
    async with running_server(jetstream=True) as server:
        _js_account(server)
        nc = await nats.connect(server.client_url)
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        noise = random.Random(7).randbytes  # incompressible, so the archive spans several chunks
        for i in range(300):
            await nc.publish(f"orders.{i % 7}", (f"order {i} " * 5).encode() + noise(64), headers={"X-Seq": str(i)})
        await nc.flush()
        await js.add_consumer("ORDERS", durable_name="NEW", ack_policy="explicit")
        reply, msgs, data = await _raw_snapshot(nc, "ORDERS", chunk_size=4096)
        assert reply["type"] == "io.nats.jetstream.api.v1.stream_snapshot_response"
        assert reply["state"]["messages"] == 300 and reply["state"]["consumer_count"] == 1
        chunks = [m for m in msgs if m.data]
        assert len(chunks) > 3
        for i, m in enumerate(chunks[:-1], 1):
            assert m.reply.startswith("$JS.SNAPSHOT.ACK.ORDERS.") and m.reply.endswith(f".4096.{i}")
        assert not chunks[-1].reply
        end = msgs[-1]
        assert end.data == b"" and end.headers == {"Status": "204"}, end.headers
        # Snappy-framed (what nats-server's S2 reader takes); inside, the NATSARC1 archive
        assert data.startswith(b"\xff\x06\x00\x00sNaPpY")
        archive = bytes(cramjam.snappy.decompress(data))
        assert archive.startswith(MAGIC)
        entries = ArchiveReader().feed(archive)
        assert [e.name for e in entries[:2]] == ["state.json", "consumers/NEW"]
        assert entries[2].name == "orders.0" and b"order 0 " * 5 in entries[2].payload
        assert b"X-Seq: 0" in entries[2].payload[: entries[2].hdr_size]

        # an unknown stream and a bad request, as the reference answers them
        err = await _api(nc, "$JS.API.STREAM.SNAPSHOT.NOPE", {"deliver_subject": "x.y"})
        assert err["error"]["err_code"] == 10059
        err = await _api(nc, "$JS.API.STREAM.RESTORE.ORDERS", {"config": reply["config"]})
        assert err["error"]["err_code"] == 10130

        # restore under the same name after deleting it: identical data
        await js.delete_stream("ORDERS")
        final = await _raw_restore(nc, reply, data, chunk=3000)
        assert final["type"] == "io.nats.jetstream.api.v1.stream_create_response", final
        assert final["state"]["messages"] == 300 and final["state"]["consumer_count"] == 1
        m = await js.get_msg("ORDERS", 5)
        assert m.subject == "orders.4" and m.headers == {"X-Seq": "4"}
        ci = await js.consumer_info("ORDERS", "NEW")
        assert ci.num_pending == 300
        await nc.close()


async def _publish_many(nc, n: int) -> None:
    payload = b"0123456789abcdef"
    for i in range(n):
        await nc.publish(f"orders.{i % 100}", payload)
        if i % 10_000 == 9_999:
            await nc.flush()
    await nc.flush()


@pytest.mark.timeout(120)
async def test_backup_restore_100k_messages_with_consumers_into_second_server(tmp_path):
    n = 100_000
    async with running_server(jetstream=True) as src, running_server(jetstream=True) as dst:
        _js_account(src)
        _js_account(dst)
        nc = await nats.connect(src.client_url)
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        await _publish_many(nc, n)
        for _ in range(100):
            if (await js.stream_info("ORDERS")).state.messages == n:
                break
            await asyncio.sleep(0.05)
        # deleted ranges in the middle
        for seq in (10, 11, 12, 50_000):
            await js.delete_msg("ORDERS", seq)
        # consumers with state: one durable pull with acks and pending, one filtered push
        await js.add_consumer("ORDERS", durable_name="WORK", ack_policy="explicit")
        psub = await js.pull_subscribe_bind("WORK", "ORDERS")
        msgs = await psub.fetch(50, timeout=5)
        for m in msgs[:30]:
            await m.ack_sync()
        await js.add_consumer(
            "ORDERS", durable_name="MON", ack_policy="none", filter_subject="orders.7", deliver_subject="mon.inbox"
        )
        src_info = await js.stream_info("ORDERS")
        src_work = await js.consumer_info("ORDERS", "WORK")

        backup_dir = tmp_path / "bk"
        r = await asyncio.to_thread(
            run_cli, src.client_url, "stream", "backup", "ORDERS", str(backup_dir), "--no-progress"
        )
        assert r.rc == 0, r
        # Snappy-framed: the 16-byte payloads repeat, so the file is much smaller than the archive
        framed = (backup_dir / "stream.tar.s2").read_bytes()
        assert len(framed) < n * 16 < len(cramjam.snappy.decompress(framed))

        r = await asyncio.to_thread(
            run_cli, dst.client_url, "stream", "restore", str(backup_dir), "--no-progress", "-j"
        )
        assert r.rc == 0, r
        nc2 = await nats.connect(dst.client_url)
        js2 = nc2.jetstream()
        dst_info = await js2.stream_info("ORDERS")
        a, b = src_info.state, dst_info.state
        assert (b.messages, b.bytes, b.first_seq, b.last_seq, b.num_deleted, b.consumer_count) == (
            a.messages,
            a.bytes,
            a.first_seq,
            a.last_seq,
            a.num_deleted,
            2,
        )
        assert dst_info.config.subjects == ["orders.>"]
        for seq in (1, 9, 13, 49_999, 50_001, n):
            ma, mb = await js.get_msg("ORDERS", seq), await js2.get_msg("ORDERS", seq)
            assert (ma.subject, ma.data, ma.seq) == (mb.subject, mb.data, mb.seq)
        raw_a = await _api(nc, "$JS.API.STREAM.MSG.GET.ORDERS", {"seq": 777})
        raw_b = await _api(nc2, "$JS.API.STREAM.MSG.GET.ORDERS", {"seq": 777})
        assert raw_a["message"]["time"] == raw_b["message"]["time"]  # timestamps preserved
        with pytest.raises(nats.js.errors.NotFoundError):
            await js2.get_msg("ORDERS", 50_000)
        dst_work = await js2.consumer_info("ORDERS", "WORK")
        assert dst_work.delivered.stream_seq == src_work.delivered.stream_seq
        assert dst_work.ack_floor.stream_seq == src_work.ack_floor.stream_seq
        assert dst_work.num_ack_pending == src_work.num_ack_pending == 20
        mon = await js2.consumer_info("ORDERS", "MON")
        assert mon.config.filter_subject == "orders.7"
        # the restored pull consumer continues where it was: the 20 unacked ones come back later,
        # new deliveries continue after the last delivered sequence
        psub2 = await js2.pull_subscribe_bind("WORK", "ORDERS")
        nxt = await psub2.fetch(1, timeout=5)
        assert nxt[0].metadata.sequence.stream == src_work.delivered.stream_seq + 1
        await nc.close()
        await nc2.close()


@pytest.mark.reference
async def test_reference_server_snapshot_restores_into_natsd(tmp_path):
    """A nats-server 2.15 backup (S2-framed NATSARC1) restores into natsd with data and consumers."""
    from tests.helpers.servers import reference_binary, start_server

    if reference_binary() is None:
        pytest.skip("reference nats-server binary not installed")
    ref = await asyncio.to_thread(start_server, "reference", tmp_path)
    try:
        nc = await nats.connect(ref.url)
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        for i in range(500):
            await js.publish(f"orders.{i % 3}", (f"order {i} " * 20).encode(), headers={"X-I": str(i)})
        await js.delete_msg("ORDERS", 7)
        await js.add_consumer("ORDERS", durable_name="NEW", ack_policy="explicit")
        psub = await js.pull_subscribe_bind("NEW", "ORDERS")
        for m in await psub.fetch(10, timeout=5):
            await m.ack_sync()
        reply, _, data = await _raw_snapshot(nc, "ORDERS", chunk_size=8192)
        assert data.startswith(b"\xff\x06\x00\x00S2sTwO")
        ref_info = await js.stream_info("ORDERS")
        ref_ci = await js.consumer_info("ORDERS", "NEW")
        await nc.close()
    finally:
        await asyncio.to_thread(ref.stop)
    async with running_server(jetstream=True) as server:
        _js_account(server)
        nc = await nats.connect(server.client_url)
        js = nc.jetstream()
        final = await _raw_restore(nc, reply, data, chunk=5000)
        assert "error" not in final, final
        info = await js.stream_info("ORDERS")
        assert (info.state.messages, info.state.first_seq, info.state.last_seq, info.state.num_deleted) == (
            ref_info.state.messages,
            ref_info.state.first_seq,
            ref_info.state.last_seq,
            ref_info.state.num_deleted,
        )
        m = await js.get_msg("ORDERS", 100)
        assert m.subject == "orders.0" and m.data == b"order 99 " * 20 and m.headers == {"X-I": "99"}
        ci = await js.consumer_info("ORDERS", "NEW")
        assert ci.ack_floor.stream_seq == ref_ci.ack_floor.stream_seq == 11
        assert ci.delivered.stream_seq == ref_ci.delivered.stream_seq
        await nc.close()


async def test_natsctl_account_backup_with_data_restores_into_second_server(tmp_path):
    """``natsctl backup DIR --data`` then ``natsctl restore DIR`` against natsd: data and consumers."""
    async with running_server(jetstream=True) as src, running_server(jetstream=True) as dst:
        _js_account(src)
        _js_account(dst)
        nc = await nats.connect(src.client_url)
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["ORDERS.*"])
        await js.add_stream(name="LOGS", subjects=["logs.>"], storage="memory")
        for i in range(50):
            await js.publish("ORDERS.received", f"o{i}".encode())
            await js.publish("logs.app", f"l{i}".encode())
        await js.add_consumer("ORDERS", durable_name="NEW", filter_subject="ORDERS.received", ack_policy="explicit")
        psub = await js.pull_subscribe_bind("NEW", "ORDERS")
        for m in await psub.fetch(5, timeout=5):
            await m.ack_sync()
        await nc.close()
        r = await asyncio.to_thread(run_cli, src.client_url, "backup", str(tmp_path / "all"), "--data")
        assert r.rc == 0, r
        r = await asyncio.to_thread(run_cli, dst.client_url, "restore", str(tmp_path / "all"))
        assert r.rc == 0, r
        nc = await nats.connect(dst.client_url)
        js = nc.jetstream()
        assert (await js.stream_info("ORDERS")).state.messages == 50
        assert (await js.stream_info("LOGS")).state.messages == 50
        ci = await js.consumer_info("ORDERS", "NEW")
        assert ci.ack_floor.stream_seq == 5 and ci.num_pending == 45
        await nc.close()
