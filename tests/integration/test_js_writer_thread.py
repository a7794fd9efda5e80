"""The publish path with the file store's writer thread (natsd.store.file.writer, issue 15): a
PubAck is sent only once its record is in the OS, replies keep their order across turns, and
consumers hear of a message only once it is written. The thread's pwrite is held on a
threading.Event, so "written yet?" is decided by the test, not by timing."""

from __future__ import annotations

import asyncio
import json
import os
import threading

import pytest

from natsd.store.file import block as block_mod
from natsd.store.file import writer as writer_mod
from tests.helpers.inproc import server_and_client

pytestmark = pytest.mark.integration


@pytest.fixture
def gate(monkeypatch):
    """Every turn goes to the writer thread, whose pwrite waits while the gate is closed."""
    monkeypatch.setattr(writer_mod, "THRESHOLD", 1)
    ev = threading.Event()
    ev.set()
    real = os.pwrite

    def pwrite(fd, data, off):
        assert ev.wait(10)
        return real(fd, data, off)

    monkeypatch.setattr(block_mod, "_pwrite", pwrite)
    yield ev
    ev.set()


async def test_pubacks_wait_for_the_write_and_keep_their_order(tmp_path, gate):
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        msg = await nc.request(
            "$JS.API.STREAM.CREATE.S", json.dumps({"name": "S", "subjects": ["s.>"]}).encode(), timeout=2
        )
        assert "error" not in json.loads(msg.data)
        js = nc.jetstream()
        sub = await js.pull_subscribe("s.>", durable="D", stream="S")
        gate.clear()
        first = [asyncio.ensure_future(nc.request("s.a", b"%d" % i, timeout=5)) for i in range(10)]
        await asyncio.sleep(0.2)
        second = [asyncio.ensure_future(nc.request("s.a", b"%d" % i, timeout=5)) for i in range(10, 20)]
        await asyncio.sleep(0.2)
        # Stored (sequences given) but not yet in the OS: no PubAck.
        assert not any(f.done() for f in first + second)
        gate.set()
        acks = [json.loads(m.data) for m in await asyncio.gather(*first, *second)]
        assert [a["seq"] for a in acks] == list(range(1, 21))
        got = await sub.fetch(20, timeout=2)
        assert [(g.metadata.sequence.stream, g.data) for g in got] == [(i + 1, b"%d" % i) for i in range(20)]
        assert writer_mod.shared_writer()._thread is not None  # the thread did write
