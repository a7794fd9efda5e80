"""Damaged consumer state (issue 14 item 3): flipped bytes in, or an empty, ``o.dat`` must not
delete the durable consumer. Its config lives apart (``meta.inf``); nats-server keeps the
consumer with its state reset, which only causes redelivery. The same script runs against
both servers: stop, damage the file, restart, and every message not acknowledged before is
delivered again (acknowledged ones may come again too: redelivery rather than loss)."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.helpers.servers import reference_binary, start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(120)]


def _skip(kind: str) -> None:
    if kind == "reference" and reference_binary() is None:
        pytest.skip("nats-server binary not available")


async def _req(nc, subj: str, body: dict | None = None) -> dict:
    msg = await nc.request(subj, json.dumps(body).encode() if body is not None else b"", timeout=5)
    return json.loads(msg.data)


async def _fetch(nc, n: int, timeout: float = 2.0) -> list:
    """Pull up to ``n`` messages of D (one request, expires ``timeout``); returns the messages."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    body = json.dumps({"batch": n, "expires": int(timeout * 1e9)}).encode()
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S.D", body, reply=inbox)
    got = []
    try:
        while len(got) < n:
            m = await sub.next_msg(timeout=timeout + 1)
            if m.reply and m.reply.startswith("$JS.ACK."):
                got.append(m)
            elif m.headers and m.headers.get("Status") in ("408", "404"):
                break
            elif not m.data and m.headers is None:
                break
    except (asyncio.TimeoutError, nats.errors.TimeoutError):
        pass
    await sub.unsubscribe()
    return got


async def _prepare(url: str) -> set[bytes]:
    nc = await nats.connect(url)
    try:
        r = await _req(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"], "storage": "file"})
        assert "error" not in r, r
        js = nc.jetstream()
        for i in range(10):
            await js.publish(f"s.{i}", b"m%d" % i)
        r = await _req(
            nc,
            "$JS.API.CONSUMER.CREATE.S.D",
            {"stream_name": "S", "config": {"durable_name": "D", "ack_policy": "explicit", "ack_wait": 30 * 10**9}},
        )
        assert "error" not in r, r
        first = await _fetch(nc, 6)
        assert len(first) == 6
        for m in first[:4]:  # 4 acked, 2 delivered but pending
            await nc.request(m.reply, b"+ACK", timeout=5)
        await nc.flush()
        info = await _req(nc, "$JS.API.CONSUMER.INFO.S.D")
        assert info["ack_floor"]["stream_seq"] == 4 and info["num_ack_pending"] == 2, info
        return {m.data for m in first[:4]}
    finally:
        await nc.close()


async def _after(url: str) -> tuple[dict, set[bytes]]:
    nc = await nats.connect(url)
    try:
        info = await _req(nc, "$JS.API.CONSUMER.INFO.S.D")
        if "error" in info:
            return info, set()
        got = await _fetch(nc, 20, timeout=1.5)
        for m in got:
            await nc.publish(m.reply, b"+ACK")
        await nc.flush()
        return info, {m.data for m in got}
    finally:
        await nc.close()


def _damage(store, how: str) -> None:
    paths = [p for p in store.rglob("o.dat") if p.parent.name == "D"]
    assert len(paths) == 1, paths
    p = paths[0]
    data = bytearray(p.read_bytes())
    assert data, "the state was written before the stop"
    if how == "empty":
        data = bytearray()
    else:
        for i in range(2, len(data), 3):  # flip bits all over the file, header kept
            data[i] ^= 0x5A
    p.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["flipped", "empty"])
@pytest.mark.parametrize("kind", ["natsd", "reference"])
def test_damaged_consumer_state_keeps_the_consumer_and_redelivers(kind, how, tmp_path):
    _skip(kind)
    store = tmp_path / "store"
    srv = start_server(kind, tmp_path, store_dir=store)
    try:
        acked = asyncio.run(_prepare(srv.url))
    finally:
        srv.stop()
    _damage(store, how)
    srv = start_server(kind, tmp_path, store_dir=store)
    try:
        info, got = asyncio.run(_after(srv.url))
        log = srv.log()
    finally:
        srv.stop()
    assert "error" not in info, (info, log[-2000:])
    assert info["config"]["durable_name"] == "D"
    assert info["config"]["ack_policy"] == "explicit"
    # Nothing lost: every message not acknowledged before comes (again).
    unacked = {b"m%d" % i for i in range(10)} - acked
    assert unacked <= got, (sorted(got), info)
    if kind == "natsd":
        assert "o.dat" in log and "D" in log, log[-2000:]
