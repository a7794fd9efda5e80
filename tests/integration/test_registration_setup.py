"""examples/registration/registration_adapter.py setup leaves an existing stream alone, or says what it would
change and changes only that with --force (it used to reset max_msgs_per_subject 5 to -1 silently), against
nats-server and natsd."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import nats
import pytest

from tests.helpers.cli import module_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "registration" / "registration_adapter.py"

server = module_server("reg-setup")


def _setup(url: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "--servers", url, *extra, "setup"], capture_output=True, text=True, timeout=60
    )


async def _api(url: str, subject: str, body: dict | None = None) -> dict:
    nc = await nats.connect(url)
    try:
        msg = await nc.request(subject, json.dumps(body).encode() if body else b"", timeout=5)
        return json.loads(msg.data)
    finally:
        await nc.close()


def test_setup_keeps_an_existing_stream(server):
    url = server.url
    for name in ("REGISTRATION_INGEST", "CHORIA_REGISTRATION"):
        asyncio.run(_api(url, f"$JS.API.STREAM.DELETE.{name}"))
    created = asyncio.run(
        _api(
            url,
            "$JS.API.STREAM.CREATE.CHORIA_REGISTRATION",
            {
                "name": "CHORIA_REGISTRATION",
                "subjects": ["choria.node_metadata.>"],
                "max_msgs_per_subject": 5,
                "duplicate_window": 3600 * 10**9,
                "max_age": 7 * 24 * 3600 * 10**9,
            },
        )
    )
    assert "error" not in created, created
    r = _setup(url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "stream REGISTRATION_INGEST: created",
        "stream CHORIA_REGISTRATION: exists, left unchanged",
    ]
    cfg = asyncio.run(_api(url, "$JS.API.STREAM.INFO.CHORIA_REGISTRATION"))["config"]
    assert cfg["max_msgs_per_subject"] == 5

    # An operator shortened the retention: setup says so and changes nothing without --force.
    cfg["max_age"] = 24 * 3600 * 10**9
    assert "error" not in asyncio.run(_api(url, "$JS.API.STREAM.UPDATE.CHORIA_REGISTRATION", cfg))
    r = _setup(url)
    assert r.returncode == 1
    assert (
        "stream CHORIA_REGISTRATION exists with other settings; setup would change max_age: "
        "86400000000000 -> 604800000000000 (re-run with --force" in r.stderr
    )
    assert asyncio.run(_api(url, "$JS.API.STREAM.INFO.CHORIA_REGISTRATION"))["config"]["max_age"] == 24 * 3600 * 10**9
    r = _setup(url, "--force")
    assert r.returncode == 0, r.stderr
    assert "stream CHORIA_REGISTRATION: changed max_age: 86400000000000 -> 604800000000000" in r.stdout
    cfg = asyncio.run(_api(url, "$JS.API.STREAM.INFO.CHORIA_REGISTRATION"))["config"]
    assert cfg["max_age"] == 7 * 24 * 3600 * 10**9 and cfg["max_msgs_per_subject"] == 5
