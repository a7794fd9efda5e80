"""The publish path through the in-process server with nats-py: PubAcks byte for byte, the
publish headers, limits, no_ack, pipelined async publishing."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest
from nats.js.errors import APIError

from tests.helpers.faketransport import BufferTransport as _Transport
from tests.helpers.inproc import server_and_client

pytestmark = pytest.mark.integration


async def create(nc, name: str, **cfg) -> dict:
    cfg.setdefault("subjects", [name.lower() + ".>"])
    msg = await nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps({"name": name, **cfg}).encode(), timeout=2)
    out = json.loads(msg.data)
    assert "error" not in out, out
    return out


async def raw(nc, subject: str, data: bytes = b"x", headers: dict | None = None) -> bytes:
    msg = await nc.request(subject, data, timeout=2, headers=headers)
    return msg.data


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_pubacks_and_headers(tmp_path, storage):
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        await create(nc, "ORDERS", storage=storage, allow_msg_ttl=True)
        assert await raw(nc, "orders.1") == b'{"stream":"ORDERS","seq":1}'
        assert await raw(nc, "orders.1", headers={"Nats-Msg-Id": "abc"}) == b'{"stream":"ORDERS","seq":2}'
        assert (
            await raw(nc, "orders.1", headers={"Nats-Msg-Id": "abc"})
            == b'{"stream":"ORDERS","seq":2,"duplicate": true}'
        )
        assert (
            await raw(nc, "orders.1", headers={"Nats-Expected-Last-Sequence": "1"})
            == b'{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 2"},'
            b'"stream":"ORDERS","seq":0}'
        )
        assert (
            await raw(nc, "orders.1", headers={"Nats-Rollup": "sub"})
            == b'{"error":{"code":500,"err_code":10111,"description":"rollup not permitted"},'
            b'"stream":"ORDERS","seq":0}'
        )
        assert json.loads(await raw(nc, "orders.2", headers={"Nats-TTL": "1ms"}))["error"]["err_code"] == 10165
        assert json.loads(await raw(nc, "orders.2", headers={"Nats-TTL": "10s"}))["seq"] == 3
        js = nc.jetstream()
        ack = await js.publish("orders.9", b"x", headers={"Nats-Expected-Last-Subject-Sequence": "0"})
        assert ack.seq == 4
        with pytest.raises(APIError) as ei:
            await js.publish("orders.9", b"x", headers={"Nats-Expected-Last-Subject-Sequence": "0"})
        assert ei.value.err_code == 10071
        with pytest.raises(APIError) as ei:
            await js.publish("orders.9", b"x", stream="OTHER")
        assert ei.value.err_code == 10060


async def test_limits_and_discard_new(tmp_path):
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        await create(nc, "L", max_msgs=2, discard="new", max_msg_size=16)
        await raw(nc, "l.a")
        await raw(nc, "l.a")
        assert json.loads(await raw(nc, "l.a")) == {
            "error": {"code": 503, "err_code": 10077, "description": "maximum messages exceeded"},
            "stream": "L",
            "seq": 0,
        }
        assert json.loads(await raw(nc, "l.b", b"x" * 17))["error"]["err_code"] == 10054
        await create(nc, "OLD", max_msgs_per_subject=1)
        for i in range(3):
            await raw(nc, "old.k", str(i).encode())
        msg = await nc.request("$JS.API.STREAM.INFO.OLD", b"", timeout=2)
        st = json.loads(msg.data)["state"]
        assert (st["messages"], st["first_seq"], st["last_seq"]) == (1, 3, 3)


async def test_no_ack_stream_never_replies(tmp_path):
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        await create(nc, "NA", no_ack=True)
        with pytest.raises(nats.errors.TimeoutError):
            await nc.request("na.x", b"x", timeout=0.3)
        msg = await nc.request("$JS.API.STREAM.INFO.NA", b"", timeout=2)
        assert json.loads(msg.data)["state"]["messages"] == 1


async def test_pipelined_async_publish_keeps_order_and_acks_everything(tmp_path):
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        await create(nc, "FAST")
        js = nc.jetstream()
        futs = [await js.publish_async(f"fast.{i % 7}", b"p" * 64) for i in range(2000)]
        acks = await asyncio.gather(*futs)
        assert [a.seq for a in acks] == list(range(1, 2001))
        si = await js.stream_info("FAST")
        assert si.state.messages == 2000 and si.state.last_seq == 2000


@pytest.mark.parametrize("hdr", [b"", b"NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n"])
async def test_puback_is_written_in_the_loop_pass_of_the_stream_flush(tmp_path, hdr):
    """A read that ends with a request schedules the connection's write after the callbacks it
    queued (the stream's per-turn flush): one loop pass after the read writes the record and then
    the PubAck, instead of leaving the PubAck for the next pass (one more epoll per publish)."""
    from natsd.server.connection import ClientConnection
    from tests.helpers.inproc import running_server

    async with running_server(jetstream=True, store_dir=str(tmp_path)) as server:
        t = _Transport()
        c = ClientConnection(server)
        c.connection_made(t)
        c.data_received(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\nSUB _R.> 1\r\n')
        cfg = b'{"name":"S","subjects":["s.>"]}'
        c.data_received(b"PUB $JS.API.STREAM.CREATE.S _R.api %d\r\n%s\r\n" % (len(cfg), cfg))
        for _ in range(100):
            if b"MSG _R.api 1" in t.buf:
                break
            await asyncio.sleep(0.01)
        assert b"MSG _R.api 1" in t.buf and b'"error"' not in t.buf
        t.buf.clear()
        if hdr:
            c.data_received(b"HPUB s.1 _R.1 %d %d\r\n%s\r\n" % (len(hdr), len(hdr), hdr))
        else:
            c.data_received(b"PUB s.1 _R.1 0\r\n\r\n")
        # One loop pass: the callbacks the read queued run, then this task (queued after them).
        await asyncio.sleep(0)
        assert bytes(t.buf) == b'MSG _R.1 1 22\r\n{"stream":"S","seq":1}\r\n'
        c.close()
