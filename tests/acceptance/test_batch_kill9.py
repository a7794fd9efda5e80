"""kill -9 against atomic batch publish, with natsd as a subprocess and real files.

Publishers keep sending atomic batches (staged messages, then a commit) while the server is
killed with SIGKILL. After the restart every acknowledged batch must be there whole, and no
batch may be there in part: a batch's stored messages are exactly its sequences 1..n, the last
one carrying ``Nats-Batch-Commit``. A second kill is followed by cutting the last block file
inside the last batch's records (what a write torn by the kill, or a power loss at the end of
the file, leaves): the restart must drop that whole batch, not keep its first messages."""

from __future__ import annotations

import asyncio
import json
import os
from collections import defaultdict
from pathlib import Path

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig

from tests.helpers.servers import start_server

pytestmark = pytest.mark.acceptance

BATCH = 40
BODY = b"b" * 600


async def _publisher(nc, prefix: str, acked: dict, stop: asyncio.Event) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        bid = f"{prefix}-{n}"
        try:
            for i in range(1, BATCH):
                await nc.publish("a.x", BODY, headers={"Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(i)})
            m = await nc.request(
                "a.x",
                BODY,
                timeout=5,
                headers={"Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(BATCH), "Nats-Batch-Commit": "1"},
            )
        except Exception:
            return  # the server is gone
        ack = json.loads(m.data)
        if "error" in ack:
            continue
        assert (ack["batch"], ack["count"]) == (bid, BATCH)
        acked[bid] = ack["seq"]


async def _publish_until_killed(url: str, srv, min_acked: int) -> dict:
    nc = await nats.connect(url, max_reconnect_attempts=0, allow_reconnect=False)
    r = await nc.request(
        "$JS.API.STREAM.CREATE.A",
        json.dumps({"name": "A", "subjects": ["a.>"], "allow_atomic": True, "storage": "file"}).encode(),
        timeout=5,
    )
    assert "error" not in json.loads(r.data) or json.loads(r.data)["error"]["err_code"] == 10058
    acked: dict = {}
    stop = asyncio.Event()
    tasks = [asyncio.create_task(_publisher(nc, f"p{k}", acked, stop)) for k in range(4)]
    while len(acked) < min_acked:
        await asyncio.sleep(0.02)
    srv.kill()  # kill -9 with batches staged and commits in flight
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    try:
        await nc.close()
    except Exception:
        pass
    return acked


async def _read_all(url: str) -> list[tuple[int, dict]]:
    nc = await nats.connect(url)
    try:
        info = json.loads((await nc.request("$JS.API.STREAM.INFO.A", b"", timeout=5)).data)
        total = info["state"]["messages"]
        js = nc.jetstream()
        sub = await js.pull_subscribe("a.>", durable=None, stream="A", config=ConsumerConfig(ack_policy=AckPolicy.NONE))
        out: list[tuple[int, dict]] = []
        while len(out) < total:
            for m in await sub.fetch(500, timeout=5):
                out.append((m.metadata.sequence.stream, dict(m.headers or {})))
        return out
    finally:
        await nc.close()


def _batches(msgs: list[tuple[int, dict]]) -> dict[str, list[tuple[int, int, bool]]]:
    by: dict[str, list[tuple[int, int, bool]]] = defaultdict(list)
    for seq, h in msgs:
        by[h["Nats-Batch-Id"]].append((seq, int(h["Nats-Batch-Sequence"]), "Nats-Batch-Commit" in h))
    return by


def _assert_whole(by: dict) -> None:
    for bid, parts in by.items():
        seqs = [p[0] for p in parts]
        assert [p[1] for p in parts] == list(range(1, BATCH + 1)), f"batch {bid} is partial: {parts[:3]}..."
        assert seqs == list(range(seqs[0], seqs[0] + BATCH)), f"batch {bid} is not contiguous"
        assert [p[2] for p in parts] == [False] * (BATCH - 1) + [True], f"batch {bid} commit marks"


def _last_block(store: Path) -> Path:
    msgs = store / "jetstream" / "$G" / "streams" / "A" / "msgs"
    blocks = sorted(msgs.glob("*.blk"), key=lambda p: int(p.stem))
    return blocks[-1]


@pytest.mark.timeout(180)
def test_kill9_mid_batches_leaves_nothing_partial(tmp_path):
    store = tmp_path / "store"
    srv = start_server("natsd", tmp_path, store_dir=store)
    acked = asyncio.run(_publish_until_killed(srv.url, srv, 60))

    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        by = _batches(asyncio.run(_read_all(srv.url)))
    finally:
        srv.kill()
    assert len(by) >= len(acked) >= 60
    _assert_whole(by)
    for bid, last_seq in acked.items():
        assert bid in by and by[bid][-1][0] == last_seq, f"acknowledged batch {bid} lost"

    # Cut the file inside the last batch: its first messages survive on disk, its commit not.
    blk = _last_block(store)
    size = blk.stat().st_size
    cut = BATCH * len(BODY) // 2
    assert size > cut
    os.truncate(blk, size - cut)
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        after = _batches(asyncio.run(_read_all(srv.url)))
    finally:
        srv.stop()
    _assert_whole(after)
    last = max(by, key=lambda b: by[b][-1][0])
    assert last not in after  # the torn batch went entirely
    assert set(after) == set(by) - {last}
