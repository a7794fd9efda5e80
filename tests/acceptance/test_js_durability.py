"""Nothing acknowledged is lost: natsd runs as a subprocess, clients publish with acks, the
server is killed with SIGKILL mid-stream, restarted on the same store, and every acknowledged
message is found byte for byte (the default sync_interval: acked = written to the OS)."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.helpers.servers import start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(180)]


def _payload(i: int, big: bool = False) -> bytes:
    # distinct, checkable bytes of varying size (includes non-ASCII and CRLF)
    p = f"msg-{i}-".encode() + bytes((i * 7 + k) % 256 for k in range(i % 97)) + b"\r\n"
    # big: ~16 KB, so one loop turn of three publishers holds megabytes and the file store
    # writes it in pieces before the turn's flush (EAGER_WRITE_BYTES)
    return p + bytes(range(256)) * 64 if big else p


async def _publisher(url: str, name: str, acked: dict[int, tuple[str, bytes]], stop: asyncio.Event, big: bool) -> None:
    nc = await nats.connect(url, max_reconnect_attempts=0, allow_reconnect=False)
    js = nc.jetstream()
    i = 0
    try:
        while not stop.is_set():
            batch = []
            for _ in range(50):
                subj = f"dur.{name}.{i % 5}"
                data = _payload(i, big)
                batch.append((subj, data, await js.publish_async(subj, data)))
                i += 1
            for subj, data, fut in batch:
                try:
                    ack = await asyncio.wait_for(fut, 5)
                except Exception:
                    return  # the server died: later acks will never come
                acked[ack.seq] = (subj, data)
    except Exception:
        return
    finally:
        try:
            await nc.close()
        except Exception:
            pass


async def _run(tmp_path, big: bool, cipher: str = "") -> None:
    store = tmp_path / "store"
    conf = None
    if cipher:  # encrypted at rest (jetstream { cipher, key }): the same guarantees
        conf = tmp_path / "enc.conf"
        conf.write_text(f'jetstream {{ cipher: {cipher}, key: "durability-key" }}\n')
    srv = start_server("natsd", tmp_path, store_dir=store, config=conf)
    acked: dict[int, tuple[str, bytes]] = {}
    try:
        nc = await nats.connect(srv.url)
        msg = await nc.request(
            "$JS.API.STREAM.CREATE.DUR", json.dumps({"name": "DUR", "subjects": ["dur.>"]}).encode(), timeout=5
        )
        assert "error" not in json.loads(msg.data)
        await nc.close()
        stop = asyncio.Event()
        pubs = [asyncio.create_task(_publisher(srv.url, f"p{k}", acked, stop, big)) for k in range(3)]
        # let a few thousand messages through, then kill -9 while they are still publishing
        for _ in range(200):
            await asyncio.sleep(0.05)
            if len(acked) >= (1500 if big else 3000):
                break
        srv.kill()
        stop.set()
        await asyncio.gather(*pubs, return_exceptions=True)
    finally:
        if srv.alive():
            srv.kill()
    assert len(acked) > 100, "publishers made no progress before the kill"

    srv2 = start_server("natsd", tmp_path, store_dir=store, config=conf)
    try:
        nc = await nats.connect(srv2.url)
        js = nc.jetstream()
        info = await js.stream_info("DUR")
        assert info.state.last_seq >= max(acked)
        for seq, (subj, data) in sorted(acked.items()):
            got = await js.get_msg("DUR", seq)
            assert got.subject == subj and got.data == data, seq
        await nc.close()
    finally:
        srv2.stop()


@pytest.mark.parametrize("big", [False, True], ids=["small", "16k"])
def test_acked_messages_survive_kill_9(tmp_path, big):
    asyncio.run(_run(tmp_path, big))


def test_acked_messages_survive_kill_9_encrypted(tmp_path):
    asyncio.run(_run(tmp_path, True, cipher="chachapoly"))
    assert list((tmp_path / "store").rglob("meta.key"))
