"""Ports outside 0-65535 stop the server at start, natsd and nats-server alike, with nats-server's
[FTL] line; natsd's config check (-t) also refuses config-file values, at file:line:column
(nats-server's -t says "valid" and the start then fails)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.servers import free_port, reference_binary

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(90)]

REPO = Path(__file__).resolve().parents[2]


def _run(binary: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if binary == "natsd":
        env["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        cmd = [sys.executable, "-m", "natsd", *args]
    else:
        cmd = [binary, *args]
    # Both must stop by themselves: a server that wrapped the port around would still be running.
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=20, cwd=cwd)


def _binaries() -> list[str]:
    out = ["natsd"]
    ref = reference_binary()
    if ref is not None:
        out.append(ref)
    return out


FLAG_CASES = [
    (["-p", "82000"], 'Error listening on port: 0.0.0.0:82000, "listen tcp: address 82000: invalid port"'),
    (
        ["-a", "127.0.0.1", "-p", "{free}", "-m", "99999"],
        "Can't start monitoring: can't listen to the monitor port: listen tcp: address 99999: invalid port",
    ),
    (["-a", "127.0.0.1", "-p", "-7"], 'Error listening on port: 127.0.0.1:-7, "listen tcp: address -7: invalid port"'),
]


@pytest.mark.parametrize("binary", _binaries())
@pytest.mark.parametrize("args,ftl", FLAG_CASES)
def test_flag_ports_out_of_range_are_fatal(binary, args, ftl, tmp_path):
    args = [a.replace("{free}", str(free_port())) for a in args]
    r = _run(binary, args, tmp_path)
    assert r.returncode == 1, r.stderr
    fatal = [ln.split("[FTL] ", 1)[1] for ln in r.stderr.splitlines() if "[FTL] " in ln]
    assert fatal == [ftl]


CONF_CASES = [
    ("listen: 127.0.0.1:99999\n", "1:1", 99999),
    ("port: {free}\nleafnodes {\n  port: 70000\n}\n", "3:3", 70000),
    ('port: {free}\nwebsocket {\n  listen: "127.0.0.1:70000"\n  no_tls: true\n}\n', "3:3", 70000),
]


@pytest.mark.parametrize("binary", _binaries())
@pytest.mark.parametrize("text,where,port", CONF_CASES)
def test_config_ports_out_of_range_stop_the_start(binary, text, where, port, tmp_path):
    (tmp_path / "p.conf").write_text(text.replace("{free}", str(free_port())))
    r = _run(binary, ["-c", "p.conf"], tmp_path)
    assert r.returncode == 1, r.stderr
    assert f"listen tcp: address {port}: invalid port" in r.stderr
    if binary == "natsd":  # better than the reference: where it is
        assert f"natsd: p.conf:{where}: invalid port {port}" in r.stderr


@pytest.mark.parametrize("text,where,port", CONF_CASES + [("port: {free}\nhttps: 70000\n", "2:1", 70000)])
def test_config_check_reports_out_of_range_ports(text, where, port, tmp_path):
    (tmp_path / "p.conf").write_text(text.replace("{free}", str(free_port())))
    r = _run("natsd", ["-t", "-c", "p.conf"], tmp_path)
    assert r.returncode == 1
    assert r.stderr.splitlines()[0] == (
        f"natsd: p.conf:{where}: invalid port {port} (ports are 0-65535, -1 for a random port): "
        f"listen tcp: address {port}: invalid port"
    )


@pytest.mark.parametrize("binary", _binaries())
def test_a_flag_port_wins_over_an_out_of_range_config_port(binary, tmp_path):
    from tests.helpers.servers import start_server

    (tmp_path / "p.conf").write_text("listen: 127.0.0.1:99999\n")
    kind = "natsd" if binary == "natsd" else "reference"
    srv = start_server(kind, tmp_path / kind, config=str(tmp_path / "p.conf"), jetstream=False)  # -p <free>
    try:
        assert srv.alive()
    finally:
        srv.stop()
