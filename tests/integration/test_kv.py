"""nats-py's Key-Value store end to end against the in-process server: put, get, create,
update, delete, purge, history, keys, watch (ordered push consumers with flow control and
heartbeats), TTL and purge_deletes."""

from __future__ import annotations

import asyncio

import nats
import pytest
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NoKeysError

from tests.helpers.inproc import running_server


@pytest.fixture
async def js():
    async with running_server(jetstream=True) as srv:
        nc = await nats.connect(srv.client_url, allow_reconnect=False)
        try:
            yield nc.jetstream()
        finally:
            await nc.close()


@pytest.mark.parametrize("direct", [False, True])
async def test_put_get_create_update_delete_purge(js, direct: bool) -> None:
    kv = await js.create_key_value(bucket="cfg", history=5, direct=direct)
    r1 = await kv.put("a", b"1")
    e = await kv.get("a")
    assert (e.key, e.value, e.revision) == ("a", b"1", r1)
    r2 = await kv.update("a", b"2", last=r1)
    with pytest.raises(KeyWrongLastSequenceError):
        await kv.update("a", b"3", last=r1)
    assert (await kv.get("a")).value == b"2"
    assert (await kv.get("a", revision=r1)).value == b"1"
    await kv.create("b", b"B")
    with pytest.raises(KeyWrongLastSequenceError):
        await kv.create("b", b"again")
    await kv.delete("b")
    with pytest.raises(KeyNotFoundError) as ei:  # nats-py reports a delete marker as not found
        await kv.get("b")
    assert ei.value.op == "DEL"
    # create over a delete marker is allowed
    await kv.create("b", b"reborn")
    assert (await kv.get("b")).value == b"reborn"
    await kv.purge("a")
    with pytest.raises(KeyNotFoundError) as ei:
        await kv.get("a")
    assert ei.value.op == "PURGE"
    with pytest.raises(KeyNotFoundError):
        await kv.get("never")
    st = await kv.status()
    assert st.bucket == "cfg" and st.history == 5
    assert r2 > r1


async def test_history_keys_and_watch(js) -> None:
    kv = await js.create_key_value(bucket="w", history=10)
    with pytest.raises(NoKeysError):
        await kv.keys()
    for i in range(3):
        await kv.put("k1", b"v%d" % i)
    await kv.put("k2", b"x")
    assert sorted(await kv.keys()) == ["k1", "k2"]
    hist = await kv.history("k1")
    assert [h.value for h in hist] == [b"v0", b"v1", b"v2"]
    w = await kv.watchall()
    initial = []
    async for e in w:
        if e is None:
            break
        initial.append((e.key, e.value))
    assert initial == [("k1", b"v2"), ("k2", b"x")]
    await kv.put("k3", b"new")
    await kv.delete("k1")
    upd = await w.updates(timeout=2)
    assert (upd.key, upd.value) == ("k3", b"new")
    d = await w.updates(timeout=2)
    assert d.key == "k1" and d.operation == "DEL"
    await w.stop()
    # a watch on one key with meta_only gets headers only
    w2 = await kv.watch("k2", meta_only=True)
    e = await w2.updates(timeout=2)
    assert e.key == "k2" and e.value == b""
    await w2.stop()


async def test_purge_deletes(js) -> None:
    kv = await js.create_key_value(bucket="pd", history=3)
    await kv.put("a", b"1")
    await kv.put("b", b"2")
    await kv.delete("a")
    await kv.purge_deletes(olderthan=-1)
    assert await kv.keys() == ["b"]


async def test_ttl_expires_keys() -> None:
    async with running_server(jetstream=True) as srv:
        nc = await nats.connect(srv.client_url, allow_reconnect=False)
        js = nc.jetstream()
        kv = await js.create_key_value(bucket="ttl", ttl=0.3)
        await kv.put("a", b"1")
        assert (await kv.get("a")).value == b"1"
        for _ in range(40):
            await asyncio.sleep(0.05)
            try:
                await kv.get("a")
            except KeyNotFoundError:
                break
        else:
            pytest.fail("key did not expire")
        await nc.close()


async def test_many_watchers_and_keys(js) -> None:
    kv = await js.create_key_value(bucket="many", history=1)
    for i in range(200):
        await kv.put(f"k{i:03d}", b"%d" % i)
    keys = await kv.keys()
    assert len(keys) == 200 and keys[0] == "k000"
    watchers = [await kv.watchall() for _ in range(5)]
    for w in watchers:
        n = 0
        async for e in w:
            if e is None:
                break
            n += 1
        assert n == 200
        await w.stop()
