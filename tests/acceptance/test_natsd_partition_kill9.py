"""Per-key ordered parallel pull consumers (natsd.partition_key) with nats-py clients that know
nothing of natsd: several clients pull one durable on a work queue, one of them goes away, the
server is killed with kill -9 and restarted; each key's messages are acked in stream order, each
exactly once (a work queue removes what is acked), none lost."""

from __future__ import annotations

import asyncio
import random

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StreamConfig

from tests.helpers.servers import start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(180)]

KEYS = 40
N = 600


async def _client(
    url: str, name: str, acks: list, stop: asyncio.Event, rng: random.Random, quit_after: int = 0
) -> None:
    nc = await nats.connect(url, allow_reconnect=False)
    js = nc.jetstream()
    sub = await js.pull_subscribe_bind("P", stream="ORD")
    done = 0
    try:
        while not stop.is_set():
            try:
                msgs = await sub.fetch(rng.randrange(1, 10), timeout=0.5)
            except nats.errors.TimeoutError:
                continue
            for m in msgs:
                if rng.random() < 0.1:
                    await m.nak()  # redelivered later: must still come before the key's next
                    continue
                await asyncio.sleep(rng.random() * 0.002)
                await m.ack_sync()
                acks.append((name, m.subject.split(".")[1], m.metadata.sequence.stream))
                done += 1
                if quit_after and done >= quit_after:
                    return  # this client goes away (its keys move to the others)
    except Exception:
        return
    finally:
        try:
            await nc.close()
        except Exception:
            pass


async def _phase(url: str, acks: list, until: int, seed: int, setup: bool) -> None:
    if setup:
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="ORD", subjects=["ord.>"], retention=RetentionPolicy.WORK_QUEUE))
        await js.add_consumer(
            "ORD",
            ConsumerConfig(
                durable_name="P",
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=2,
                filter_subject="ord.*",
                metadata={"natsd.partition_key": "{{wildcard(1)}}"},
            ),
        )
        rng = random.Random(seed)
        for _ in range(N):
            await js.publish(f"ord.k{rng.randrange(KEYS)}", b"x")
        await nc.close()
    stop = asyncio.Event()
    rngs = [random.Random(seed * 10 + i) for i in range(4)]
    tasks = [
        asyncio.create_task(_client(url, f"c{i}", acks, stop, rngs[i], quit_after=60 if i == 0 else 0))
        for i in range(4)
    ]
    while len(acks) < until and not all(t.done() for t in tasks):
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.gather(*tasks)
    # (a client gives up on an error, e.g. an ack_sync timing out on a loaded machine: fail saying
    # so instead of waiting for the test's timeout)
    assert len(acks) >= until, f"every client stopped after {len(acks)} of {until} acks"


def _check(acks: list) -> None:
    last: dict[str, int] = {}
    for _client, key, seq in acks:
        assert last.get(key, 0) < seq, f"key {key}: {seq} acked after {last.get(key)}"
        last[key] = seq
    seqs = [s for _c, _k, s in acks]
    assert len(seqs) == len(set(seqs)), "a message was acked twice"


def test_partitioned_consumer_survives_client_churn_and_kill9(tmp_path) -> None:
    store = tmp_path / "store"
    srv = start_server("natsd", tmp_path, store_dir=store)
    acks: list = []
    try:
        asyncio.run(_phase(srv.url, acks, N // 2, 1, True))
        assert len({c for c, _k, _s in acks}) >= 3  # keys were spread over the clients
        srv.kill()  # kill -9 with messages in flight
    finally:
        srv.kill()
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        asyncio.run(_phase(srv.url, acks, N, 2, False))
    finally:
        srv.stop()
    _check(acks)
    assert sorted(s for _c, _k, s in acks) == list(range(1, N + 1))  # none lost
