"""The publish path when the store cannot write, and the server-wide storage limits, through the
in-process server with nats-py (issue 14, items 1 and 2).

Disk-full is injected through the file store's system-call names
(``natsd.store.file.block._pwrite``): no root, no tmpfs. The acceptance test
(tests/acceptance/test_disk_full.py) does the same on a real full file system."""

from __future__ import annotations

import asyncio
import errno
import json
import os

import nats
import pytest
from nats.js.errors import APIError

from natsd.config.options import JetStreamOptions, ServerOptions
from natsd.store.file import block as block_mod
from natsd.store.file import writer as writer_mod
from tests.helpers.inproc import server_and_client

pytestmark = pytest.mark.integration

INSUFFICIENT = b'{"error":{"code":503,"err_code":10023,"description":"insufficient resources"},"stream":"S","seq":0}'


class Disk:
    def __init__(self, monkeypatch) -> None:
        self.full = False
        self.err = errno.ENOSPC
        real = os.pwrite

        def pwrite(fd, data, off):
            if self.full:
                raise OSError(self.err, os.strerror(self.err))
            return real(fd, data, off)

        monkeypatch.setattr(block_mod, "_pwrite", pwrite)


@pytest.fixture(params=["inline", "writer-thread"])
def disk(request, monkeypatch):
    """Both write paths: inline on the loop, and the writer thread (natsd.store.file.writer;
    threshold 1 so that every turn goes there)."""
    if request.param == "writer-thread":
        monkeypatch.setattr(writer_mod, "THRESHOLD", 1)
    return Disk(monkeypatch)


async def create(nc, name: str, **cfg) -> dict:
    cfg.setdefault("subjects", [name.lower() + ".>"])
    msg = await nc.request(f"$JS.API.STREAM.CREATE.{name}", json.dumps({"name": name, **cfg}).encode(), timeout=2)
    out = json.loads(msg.data)
    assert "error" not in out, out
    return out


async def test_full_disk_answers_every_publish_and_recovers_by_itself(tmp_path, disk):
    async with server_and_client(store_dir=str(tmp_path)) as (server, nc):
        await create(nc, "S", subjects=["s.>"])
        js = nc.jetstream()
        await js.add_consumer("S", durable_name="D", ack_policy="explicit")
        for i in range(5):
            assert (await js.publish("s.a", b"%d" % i)).seq == i + 1
        disk.full = True
        # A pipelined burst (one loop turn): every publish is answered, none with a PubAck.
        futs = [nc.request("s.a", b"lost", timeout=2) for _ in range(20)]
        answers = await asyncio.gather(*futs)
        assert [m.data for m in answers] == [INSUFFICIENT] * 20
        # Headers path, a msg id: the id must not count as a duplicate later.
        m = await nc.request("s.a", b"lost", headers={"Nats-Msg-Id": "id-1"}, timeout=2)
        assert m.data == INSUFFICIENT
        info = await js.stream_info("S")
        assert (info.state.messages, info.state.last_seq) == (5, 5)
        # The consumer sees only what was written.
        sub = await js.pull_subscribe("s.>", durable="D", stream="S")
        got = await sub.fetch(10, timeout=1)
        assert [g.metadata.sequence.stream for g in got] == [1, 2, 3, 4, 5]
        for g in got:
            await g.ack_sync()
        # Another I/O error: 10077 with the OS error.
        disk.err = errno.EIO
        m = await nc.request("s.a", b"lost", timeout=2)
        err = json.loads(m.data)["error"]
        assert (err["code"], err["err_code"]) == (503, 10077) and "Input/output error" in err["description"]
        # Space returns: no purge, no restart.
        disk.full = False
        ack = await js.publish("s.a", b"back", headers={"Nats-Msg-Id": "id-1"})
        assert (ack.seq, ack.duplicate) == (6, None)
        got = await sub.fetch(10, timeout=1)
        assert [(g.metadata.sequence.stream, g.data) for g in got] == [(6, b"back")]
        await got[0].ack_sync()


async def test_full_disk_then_restart_delivers_everything_acknowledged(tmp_path, disk):
    """The issue's case: a durable consumer at the ack floor, a full disk, a restart; every
    acknowledged message is delivered and no sequence is reused below the ack floor."""
    d = str(tmp_path)
    async with server_and_client(store_dir=d) as (server, nc):
        await create(nc, "S", subjects=["s.>"])
        js = nc.jetstream()
        sub = await js.pull_subscribe("s.>", durable="D", stream="S")
        for i in range(10):
            await js.publish("s.a", b"%d" % i)
        for g in await sub.fetch(10, timeout=1):
            await g.ack_sync()
        disk.full = True
        for _ in range(5):
            with pytest.raises(APIError) as ei:
                await js.publish("s.a", b"lost")
            assert ei.value.err_code == 10023
        with pytest.raises(nats.errors.TimeoutError):
            await sub.fetch(1, timeout=0.3)
        disk.full = False
    async with server_and_client(store_dir=d) as (server, nc):
        js = nc.jetstream()
        acked = [(await js.publish("s.a", b"new%d" % i)).seq for i in range(10)]
        assert acked == list(range(11, 21))
        sub = await js.pull_subscribe("s.>", durable="D", stream="S")
        got = await sub.fetch(20, timeout=1)
        assert [g.metadata.sequence.stream for g in got] == acked


def _opts(**js) -> ServerOptions:
    o = ServerOptions(host="127.0.0.1", port=0)
    o.jetstream = JetStreamOptions(**js)
    return o


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_server_wide_limit_answers_10023(tmp_path, storage):
    """jetstream { max_file_store / max_memory_store: 1MB }: 4 KB publishes are refused with 10023
    once the bytes stored exceed the limit (254 stored for a file stream, as nats-server)."""
    key = "max_file_store" if storage == "file" else "max_memory_store"
    async with server_and_client(options=_opts(**{key: 1 << 20}), store_dir=str(tmp_path)) as (server, nc):
        await create(nc, "S", subjects=["s.>"], storage=storage)
        payload = b"x" * 4096
        answers = await asyncio.gather(*[nc.request("s.x", payload, timeout=5) for _ in range(300)])
        ok = [a for a in answers if not a.data.startswith(b'{"error"')]
        assert all(a.data == INSUFFICIENT for a in answers[len(ok) :])
        per_msg = (30 if storage == "file" else 16) + 3 + 4096
        assert len(ok) == (1 << 20) // per_msg + 1  # the check is "already over", as the reference
        # Freeing space (a purge) lets publishes in again, with no restart.
        r = json.loads((await nc.request("$JS.API.STREAM.PURGE.S", b"", timeout=2)).data)
        assert r["success"]
        assert (await nc.jetstream().publish("s.x", payload)).seq == len(ok) + 1
