"""The pytest plugin (natsd.testing.pytest_plugin) as a user's suite sees it: a separate pytest run
in a temporary project, with ``-p natsd.testing.pytest_plugin``, against the in-process server and
then against the reference nats-server (``--nats-server=PATH``) (issue 26)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.servers import reference_binary

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]

USER_TESTS = r"""
import asyncio
import nats
import pytest
from nats.js.api import ConsumerConfig


async def test_async_fixtures_and_time_travel(natsd_server, natsd_js):
    await natsd_js.add_stream(name="ORDERS", subjects=["orders.>"])
    await natsd_js.add_consumer("ORDERS", ConsumerConfig(durable_name="W", ack_policy="explicit", ack_wait=30))
    await natsd_js.publish("orders.1", b"x")
    sub = await natsd_js.pull_subscribe_bind("W", stream="ORDERS")
    (m,) = await sub.fetch(1, timeout=2)
    await natsd_server.advance(31)
    (m,) = await sub.fetch(1, timeout=2)
    assert m.metadata.num_delivered == 2


async def test_clock_fixture(natsd_clock, natsd_server):
    before = natsd_clock.time_ns()
    natsd_clock.advance(3600)
    assert natsd_clock.time_ns() - before == 3600 * 10**9


@pytest.mark.natsd(max_payload=4096)
async def test_marker_options(natsd_client):
    assert natsd_client.max_payload == 4096


async def test_faults_fixture(natsd_faults, natsd_js):
    from nats.js.errors import APIError
    await natsd_js.add_stream(name="F", subjects=["f"])
    natsd_faults.disk_full()
    with pytest.raises(APIError):
        await natsd_js.publish("f", b"x", timeout=2)
    natsd_faults.disk_ok()
    assert (await natsd_js.publish("f", b"x")).seq == 1


def test_sync_test(natsd_sync_server):
    async def go():
        nc = await nats.connect(natsd_sync_server.url)
        await nc.jetstream().add_stream(name="S", subjects=["s"])
        await nc.close()
    asyncio.run(go())


def test_module_server_first(natsd_module_server):
    async def go():
        nc = await nats.connect(natsd_module_server.url)
        await nc.jetstream().add_stream(name="SHARED", subjects=["shared"])
        await nc.close()
    asyncio.run(go())


async def test_module_server_is_shared(natsd_module_server):
    nc = await nats.connect(natsd_module_server.url)
    info = await nc.jetstream().stream_info("SHARED")
    assert info.config.name == "SHARED"
    await nc.close()


def test_session_server(natsd_session_server):
    assert natsd_session_server.url.startswith("nats://127.0.0.1:")
"""

INI = """[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
filterwarnings = error
"""


def _run(tmp_path: Path, *extra: str, tests: str = USER_TESTS) -> subprocess.CompletedProcess:
    (tmp_path / "pytest.ini").write_text(INI)
    (tmp_path / "test_app.py").write_text(tests)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "natsd.testing.pytest_plugin",
            "-rs",
            *extra,
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=150,
    )


def test_fixtures_in_process(tmp_path):
    r = _run(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "8 passed" in r.stdout, r.stdout


def test_fixtures_with_pytest_asyncio_strict_mode(tmp_path):
    # Strict mode: async tests carry @pytest.mark.asyncio, and the plugin's async fixtures resolve.
    r = _run(
        tmp_path,
        "-o",
        "asyncio_mode=strict",
        tests=USER_TESTS.replace("\nasync def test_", "\n@pytest.mark.asyncio\nasync def test_"),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "8 passed" in r.stdout, r.stdout


def test_same_suite_against_nats_server(tmp_path):
    binary = reference_binary()
    if not binary:
        pytest.skip("no nats-server binary")
    r = _run(tmp_path, f"--nats-server={binary}")
    assert r.returncode == 0, r.stdout + r.stderr
    # Time control and faults cannot reach another process: those tests skip, with the reason.
    assert "5 passed, 3 skipped" in r.stdout, r.stdout
    assert "time control needs natsd in-process" in r.stdout
    assert "faults need natsd in-process" in r.stdout
