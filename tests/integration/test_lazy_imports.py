"""croniter and cramjam are imported only when a stream needs them (issue 12: they had grown an
idle server's RSS by ~3 MB). A fresh interpreter runs an in-process server with JetStream, as
``python -m natsd`` would, and checks ``sys.modules`` as streams start using them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import asyncio, json, sys
from datetime import datetime, timedelta, timezone
import nats
from tests.helpers.inproc import running_server

LAZY = ("croniter", "cramjam")

def loaded():
    return [m for m in LAZY if m in sys.modules]

async def main():
    assert loaded() == [], loaded()
    async with running_server(jetstream=True) as srv:
        nc = await nats.connect(srv.client_url)
        async def req(subj, body=b"", headers=None):
            return json.loads((await nc.request(subj, body, headers=headers, timeout=10)).data)
        r = await req("$JS.API.STREAM.CREATE.P", json.dumps({"name": "P", "subjects": ["p"]}).encode())
        assert "error" not in r, r
        assert "error" not in await req("p", b"x")
        r = await req("$JS.API.STREAM.CREATE.S", json.dumps(
            {"name": "S", "subjects": ["s.>"], "allow_msg_schedules": True}).encode())
        assert "error" not in r, r
        at = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        ack = await req("s.once", b"x", {"Nats-Schedule": "@at " + at, "Nats-Schedule-Target": "s.t"})
        assert "error" not in ack, ack
        ack = await req("s.every", b"x", {"Nats-Schedule": "@every 1h", "Nats-Schedule-Target": "s.t"})
        assert "error" not in ack, ack
        assert loaded() == [], loaded()  # a server, a stream, @at and @every schedules: neither
        ack = await req("s.cron", b"x", {"Nats-Schedule": "0 0 * * * *", "Nats-Schedule-Target": "s.t"})
        assert "error" not in ack, ack
        assert loaded() == ["croniter"], loaded()
        await nc.close()
    print("ok")

asyncio.run(main())
"""


def test_croniter_and_cramjam_are_imported_on_first_use():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH")) if p)
    r = subprocess.run(
        [sys.executable, "-W", "error", "-c", SCRIPT], capture_output=True, text=True, timeout=100, env=env, cwd=ROOT
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
