"""A pending message schedule survives a restart: natsd runs as a subprocess, a client stores
an ``@at`` schedule 2 s ahead and an ``@every 1s`` one, the server is killed with SIGKILL,
restarted on the same store, and both fire afterwards (the schedules are rebuilt from the
stored schedule messages, or from the ``schedules.db`` a clean stop wrote)."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone

import nats
import pytest

from tests.helpers.servers import start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(120)]


async def _req(nc, subject: str, body: bytes = b"", headers: dict | None = None) -> dict:
    return json.loads((await nc.request(subject, body, headers=headers, timeout=10)).data)


async def _subjects(url: str) -> dict:
    nc = await nats.connect(url)
    try:
        r = await _req(nc, "$JS.API.STREAM.INFO.S", json.dumps({"subjects_filter": ">"}).encode())
        return r["state"].get("subjects") or {}
    finally:
        await nc.close()


def test_pending_schedule_fires_after_kill9_restart(tmp_path):
    store = tmp_path / "store"
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:

        async def setup() -> None:
            nc = await nats.connect(srv.url)
            try:
                r = await _req(
                    nc,
                    "$JS.API.STREAM.CREATE.S",
                    json.dumps({"name": "S", "subjects": ["s.>"], "allow_msg_schedules": True}).encode(),
                )
                assert "error" not in r, r
                at = (datetime.now(timezone.utc) + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
                for subj, hdrs in (
                    ("s.once", {"Nats-Schedule": "@at " + at, "Nats-Schedule-Target": "s.t1"}),
                    ("s.every", {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "s.t2"}),
                ):
                    ack = await _req(nc, subj, b"payload", hdrs)
                    assert "error" not in ack, ack
            finally:
                await nc.close()

        asyncio.run(setup())
    finally:
        srv.kill()
    # nothing could fire before the kill
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:

        async def wait_fired() -> dict:
            subj: dict = {}
            for _ in range(100):
                subj = await _subjects(srv.url)
                if subj.get("s.t1") and subj.get("s.t2", 0) >= 2:
                    break
                await asyncio.sleep(0.1)
            return subj

        subj = asyncio.run(wait_fired())
        assert subj.get("s.t1") == 1 and "s.once" not in subj, subj  # the one-shot fired and was purged
        assert subj.get("s.t2", 0) >= 2 and subj.get("s.every") == 1, subj  # the repeating one keeps going
    finally:
        srv.stop()


def test_clean_stop_then_kill9_every_schedule_fires_exactly_once(tmp_path):
    """A clean stop leaves ``schedules.db`` (the next start uses it and removes it); a run that
    adds schedules and is then killed leaves none, so its restart rebuilds from the messages:
    every one-shot fires exactly once, none is lost, and the schedule subjects are purged."""
    store = tmp_path / "store"
    state = store / "jetstream" / "$G" / "streams" / "S" / "schedules.db"
    at = (datetime.now(timezone.utc) + timedelta(seconds=8)).strftime("%Y-%m-%dT%H:%M:%SZ")

    async def publish(url: str, first: int, n: int, create: bool) -> None:
        nc = await nats.connect(url)
        try:
            if create:
                r = await _req(
                    nc,
                    "$JS.API.STREAM.CREATE.S",
                    json.dumps({"name": "S", "subjects": ["s.>"], "allow_msg_schedules": True}).encode(),
                )
                assert "error" not in r, r
            for i in range(first, first + n):
                ack = await _req(
                    nc, f"s.once.{i}", b"p%d" % i, {"Nats-Schedule": "@at " + at, "Nats-Schedule-Target": "s.t"}
                )
                assert "error" not in ack, ack
        finally:
            await nc.close()

    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        asyncio.run(publish(srv.url, 0, 100, True))
    finally:
        assert srv.stop() == 0
    assert state.exists()
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:
        assert not state.exists()  # read once
        asyncio.run(publish(srv.url, 100, 100, False))
    finally:
        srv.kill()
    srv = start_server("natsd", tmp_path, store_dir=store)
    try:

        async def wait_fired() -> dict:
            subj: dict = {}
            for _ in range(300):
                subj = await _subjects(srv.url)
                if subj.get("s.t", 0) >= 200 and not any(k.startswith("s.once.") for k in subj):
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)  # anything fired twice would show now
            return await _subjects(srv.url)

        subj = asyncio.run(wait_fired())
        assert subj == {"s.t": 200}, subj
    finally:
        srv.stop()
