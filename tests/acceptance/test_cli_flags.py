"""The `natsd` command line as a subprocess: help, version, bad flags, and a server configured
only by nats-server's flags (which override a config file)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from natsd import __version__
from tests.helpers.rawclient import RawClient
from tests.helpers.servers import free_port, reference_binary, start_server

REPO = Path(__file__).resolve().parents[2]


def run_natsd(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "natsd", *args], capture_output=True, text=True, env=env, timeout=30)


@pytest.mark.parametrize("flag", ["-h", "--help", "-help", "help"])
def test_help(flag):
    r = run_natsd(flag)
    assert r.returncode == 0
    assert r.stdout.startswith("\nUsage: natsd [options]\n")
    assert "-sd, --store_dir <dir>" in r.stdout


@pytest.mark.parametrize("flag", ["-v", "--version", "version"])
def test_version(flag):
    r = run_natsd(flag)
    assert r.returncode == 0
    assert r.stdout == f"natsd: v{__version__}\n"


@pytest.mark.reference
def test_version_format_matches_reference():
    binary = reference_binary()
    if binary is None:
        pytest.skip("reference nats-server not installed")
    ref = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=30).stdout
    ours = run_natsd("-v").stdout
    assert ref.split(": v")[0] == "nats-server" and ours.split(": v")[0] == "natsd"
    assert ref.count("\n") == ours.count("\n") == 1


def test_bad_flag():
    r = run_natsd("--no_such_flag")
    assert r.returncode == 2
    assert r.stderr.startswith("flag provided but not defined: -no_such_flag\n")
    assert "Usage: natsd [options]" in r.stderr


def test_unrecognized_command():
    r = run_natsd("-p", "1", "serve")
    assert r.returncode == 2 and 'unrecognized command: "serve"' in r.stderr


async def _connect_and_roundtrip(url: str, **kw) -> bytes:
    import nats

    nc = await nats.connect(url, connect_timeout=5, max_reconnect_attempts=0, allow_reconnect=False, **kw)
    try:
        sub = await nc.subscribe("flags.x")
        await nc.publish("flags.x", b"ok")
        return (await sub.next_msg(timeout=5)).data
    finally:
        await nc.close()


async def _auth_error(port: int, **creds) -> str:
    """CONNECT with ``creds`` on a raw socket; returns the server's -ERR text (lowercased).

    (A nats-py connect that fails authentication leaks its transport, which warnings-as-errors
    would turn into a failure, so failed logins use a raw socket.)
    """
    async with RawClient.connect(port) as c:
        await c.send(b"CONNECT " + json.dumps({"verbose": False, **creds}).encode() + b"\r\nPING\r\n")
        m = await c.expect(rb"-ERR '([^']*)'\r\n")
        await c.expect_closed()
        return m.group(1).decode().lower()


def test_server_from_flags_overriding_a_config_file(tmp_path):
    conf = tmp_path / "base.conf"
    conf.write_text(
        'server_name: "from-file"\nauthorization { user: fileuser, password: filepass }\nmax_payload: 2KB\n'
    )
    http = free_port()
    srv = start_server(
        "natsd",
        tmp_path,
        "-c",
        str(conf),
        "-n",
        "from-flags",
        "--user",
        "u",
        "--pass=p",
        "-m",
        str(http),
        "-DV",
        jetstream=False,
    )
    try:
        ok = asyncio.run(_connect_and_roundtrip(f"nats://u:p@127.0.0.1:{srv.port}"))
        assert ok == b"ok"
        # The file's password was overridden by --pass; its user by --user.
        err = asyncio.run(_auth_error(srv.port, user="fileuser", **{"pass": "filepass"}))
        assert err == "authorization violation"
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/varz", timeout=5) as resp:
            varz = json.loads(resp.read())
        assert varz["server_name"] == "from-flags"
        assert varz["max_payload"] == 2048  # from the file: no flag overrides it
        assert "[DBG]" in srv.log() or "[TRC]" in srv.log()  # -DV took effect
    finally:
        assert srv.stop() == 0, srv.log()


def test_token_flag(tmp_path):
    srv = start_server("natsd", tmp_path, "--auth", "s3cret", jetstream=False)
    try:
        assert asyncio.run(_connect_and_roundtrip(f"nats://127.0.0.1:{srv.port}", token="s3cret")) == b"ok"
        assert asyncio.run(_auth_error(srv.port, auth_token="wrong")) == "authorization violation"
    finally:
        srv.stop()
