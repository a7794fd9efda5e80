"""nats-py's object store end to end: put/get of multi-MB objects (chunks replayed through an
ordered push consumer with flow control), info, list, delete, watch, links and seal."""

from __future__ import annotations

import asyncio
import hashlib
import os

import nats
import pytest
from nats.js.errors import NotFoundError, ObjectNotFoundError

from tests.helpers.inproc import running_server


@pytest.fixture
async def js():
    async with running_server(jetstream=True) as srv:
        nc = await nats.connect(srv.client_url, allow_reconnect=False)
        try:
            yield nc.jetstream()
        finally:
            await nc.close()


async def test_put_get_multi_mb(js) -> None:
    obs = await js.create_object_store("files")
    data = os.urandom(5 * 1024 * 1024 + 123)
    info = await obs.put("big.bin", data)
    assert info.size == len(data) and info.chunks == 41 and info.name == "big.bin"
    res = await obs.get("big.bin")
    assert hashlib.sha256(res.data).digest() == hashlib.sha256(data).digest()
    assert res.info.digest == info.digest
    # replace: old chunks are purged
    await obs.put("big.bin", b"small now")
    assert (await obs.get("big.bin")).data == b"small now"
    st = await js.stream_info("OBJ_files")
    assert st.state.messages == 2  # one chunk + one meta


async def test_info_list_delete_watch(js) -> None:
    obs = await js.create_object_store("docs")
    with pytest.raises(NotFoundError):
        await obs.list()
    await obs.put("a.txt", b"A" * 1000)
    await obs.put("b.txt", b"B" * 300_000)
    names = sorted(i.name for i in await obs.list())
    assert names == ["a.txt", "b.txt"]
    inf = await obs.get_info("b.txt")
    assert inf.size == 300_000 and inf.chunks == 3
    watcher = await obs.watch()
    seen = []
    while True:
        e = await watcher.updates(timeout=2)
        if e is None:
            break
        seen.append(e.name)
    assert sorted(seen) == ["a.txt", "b.txt"]
    await obs.delete("a.txt")
    e = await watcher.updates(timeout=2)
    assert e.name == "a.txt" and e.deleted
    await watcher.stop()
    with pytest.raises(ObjectNotFoundError):
        await obs.get("a.txt")
    assert [i.name for i in await obs.list(ignore_deletes=True)] == ["b.txt"]
    assert {i.name: i.deleted for i in await obs.list()} == {"a.txt": True, "b.txt": False}


async def test_concurrent_gets(js) -> None:
    obs = await js.create_object_store("par")
    blobs = {f"o{i}": os.urandom(400_000 + i) for i in range(4)}
    for k, v in blobs.items():
        await obs.put(k, v)
    results = await asyncio.gather(*(obs.get(k) for k in blobs))
    assert [r.data for r in results] == list(blobs.values())


async def test_seal_and_status(js) -> None:
    obs = await js.create_object_store("sealme")
    await obs.put("x", b"1")
    await obs.seal()
    st2 = await obs.status()
    assert st2.bucket == "sealme" and st2.sealed
