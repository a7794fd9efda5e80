"""natsd's own features (issue 27) survive kill -9, with natsd as a subprocess and real files.

* dead-letter on a work-queue stream: a crash between storing the dead-letter copy and removing
  the original loses nothing and duplicates nothing (the copy's Nats-Msg-Id, the dedupe window);
* keep_last_under_max_age: after a kill -9 and max_age passing, every key's last value is there.
All through nats-py, which knows nothing of natsd (the features are metadata keys)."""

from __future__ import annotations

import asyncio
import time

import nats
import pytest
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    KeyValueConfig,
    RetentionPolicy,
    StreamConfig,
)

from tests.helpers.servers import start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(120)]

N = 60


async def _setup_dlq(url: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="JOBS", subjects=["jobs.>"], retention=RetentionPolicy.WORK_QUEUE))
    await js.add_stream(StreamConfig(name="DLQ", subjects=["dlq.>"]))
    await js.add_consumer(
        "JOBS",
        ConsumerConfig(
            durable_name="W",
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=0.3,
            max_deliver=1,
            metadata={"natsd.dead_letter": "dlq.jobs"},
        ),
    )
    for i in range(N):
        await js.publish(f"jobs.{i}", f"job {i}".encode(), headers={"X-Job": str(i)})
    sub = await js.pull_subscribe_bind("W", stream="JOBS")
    got = 0
    while got < N:
        got += len(await sub.fetch(N - got, timeout=5))  # never acked: each reaches max_deliver
    await nc.close()


async def _both(url: str) -> tuple[list[int], list[tuple[int, str]]]:
    """(stream seqs still in JOBS, (Nats-Sequence, X-Job) of every DLQ copy)."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    jobs, dlq = [], []
    for name, out in (("JOBS", jobs), ("DLQ", dlq)):
        info = await js.stream_info(name)
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                m = await js.get_msg(name, seq)
            except nats.js.errors.NotFoundError:
                continue
            if name == "JOBS":
                out.append(seq)
            else:
                out.append((int(m.headers["Nats-Sequence"]), m.headers["X-Job"]))
    await nc.close()
    return jobs, dlq


async def _settled(url: str, deadline: float) -> tuple[list[int], list[tuple[int, str]]]:
    while True:
        jobs, dlq = await _both(url)
        if len(jobs) + len(dlq) >= N and (not jobs or time.monotonic() > deadline):
            return jobs, dlq
        if time.monotonic() > deadline:
            return jobs, dlq
        await asyncio.sleep(0.2)


def _check_exactly_once(jobs: list[int], dlq: list[tuple[int, str]]) -> None:
    seqs = [s for s, _ in dlq]
    assert len(seqs) == len(set(seqs)), f"duplicate dead-letter copies: {sorted(seqs)}"
    assert not set(seqs) & set(jobs), "a message is both in the work queue and dead-lettered"
    assert sorted(seqs + jobs) == list(range(1, N + 1)), "a message was lost"
    assert all(job == str(s - 1) for s, job in dlq)  # the original headers came along


def test_dead_letter_crash_between_copy_and_removal(tmp_path) -> None:
    """The server exits abruptly (the test hook, at the worst moment: the first copy's PubAck
    is in, its original not removed) and restarts: every job ends up dead-lettered exactly once."""
    store = tmp_path / "store"
    srv = start_server("natsd", tmp_path, store_dir=store, env={"NATSD_FAULT_DLQ_EXIT_BEFORE_REMOVE": "1"})
    try:
        try:
            asyncio.run(_setup_dlq(srv.url))
        except Exception:
            pass
        srv.proc.wait(30)
        assert srv.proc.returncode == 137  # died in the window, before any original was removed
    finally:
        srv.kill()
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        jobs, dlq = asyncio.run(_settled(srv.url, time.monotonic() + 20))
        _check_exactly_once(jobs, dlq)
        assert jobs == [] and len(dlq) == N
    finally:
        srv.stop()


def test_dead_letter_kill9_while_dead_lettering(tmp_path) -> None:
    """kill -9 at a random moment while copies are being made: after the restart each job is
    either still in the work queue or dead-lettered, never both, never twice, never lost."""
    store = tmp_path / "store"
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        asyncio.run(_setup_dlq(srv.url))
        time.sleep(0.35)  # the ack wait runs out about now: dead-lettering is under way
        srv.kill()
    finally:
        srv.kill()
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        jobs, dlq = asyncio.run(_settled(srv.url, time.monotonic() + 20))
        _check_exactly_once(jobs, dlq)
    finally:
        srv.stop()


async def _kv_phase(url: str, phase: int) -> dict:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: dict = {}
    if phase == 1:
        kv = await js.create_key_value(KeyValueConfig(bucket="cfg", history=3, ttl=1.0))
        # Switch the feature on the bucket's stream with a plain stream update (metadata).
        si = await js.stream_info("KV_cfg")
        cfg = si.config
        cfg.metadata = {**(cfg.metadata or {}), "natsd.keep_last_under_max_age": "true"}
        await js.update_stream(cfg)
        for i in range(20):
            await kv.put(f"k{i}", f"v{i}-old".encode())
            await kv.put(f"k{i}", f"v{i}".encode())
    else:
        kv = await js.key_value("cfg")
        for i in range(20):
            e = await kv.get(f"k{i}")
            out[f"k{i}"] = e.value.decode()
        out["msgs"] = (await js.stream_info("KV_cfg")).state.messages
    await nc.close()
    return out


def test_keep_last_under_max_age_kv_survives_kill9(tmp_path) -> None:
    store = tmp_path / "store"
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        asyncio.run(_kv_phase(srv.url, 1))
        srv.kill()
    finally:
        srv.kill()
    time.sleep(1.2)  # max_age (the bucket's ttl) passes while the server is down
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        time.sleep(0.3)
        out = asyncio.run(_kv_phase(srv.url, 2))
        assert {k: v for k, v in out.items() if k != "msgs"} == {f"k{i}": f"v{i}" for i in range(20)}
        assert out["msgs"] == 20  # the older revisions expired, the last of each key stayed
    finally:
        srv.stop()
