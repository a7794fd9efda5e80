"""What a ``natsd`` start loads (issue 26: start-up time). natsd's real entry point (flags,
logging, ``Server.run``) runs in a child interpreter whose server, once it accepts clients, prints
``sys.modules`` and stops itself; modules of features the configuration does not use must be
absent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]

# The child: natsd's real entry point (flags, logging, Server.run) with a hook that, once the
# listener is up, prints the loaded modules and asks the server to stop.
CHILD = r"""
import os, signal, sys
import natsd.server.server as S

real_write_ports = S.Server._write_ports_file

def ready(self):
    real_write_ports(self)
    print("MODULES " + " ".join(sorted(sys.modules)), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)

S.Server._write_ports_file = ready
from natsd.server.main import main
sys.exit(main(sys.argv[1:]))
"""

# Loaded only by the configurations that use them.
NOT_FOR_A_BARE_START = (
    "natsd.jetstream",
    "natsd.store",
    "natsd.server.monitoring",
    "natsd.server.transport.websocket",
    "natsd.server.transport.wsclient",
    "natsd.server.leaf",
    "natsd.server.auth.trust",
    "natsd.server.mqtt",
    "natsd.spark",
    "natsd.cli",
    "natsd.testing",
    "nacl",
    "nkeys",
    "bcrypt",
    "croniter",
    "cramjam",
    "prometheus_client",
    "cryptography",
    "pyspark",
    "nats",
    "importlib.resources",
)

NOT_FOR_JETSTREAM = (
    "natsd.server.monitoring",
    "natsd.server.transport.websocket",
    "natsd.server.transport.wsclient",
    "natsd.server.leaf",
    "natsd.server.auth.trust",
    "natsd.server.mqtt",
    "natsd.spark",
    "natsd.cli",
    "natsd.testing",
    "nacl",
    "nkeys",
    "croniter",
    "cramjam",
    "prometheus_client",
    "pyspark",
    "nats",
)


def _modules(*args: str) -> set[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    r = subprocess.run(
        [sys.executable, "-c", CHILD, "-a", "127.0.0.1", "-p", "-1", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    line = next((x for x in r.stdout.splitlines() if x.startswith("MODULES ")), None)
    assert line is not None, r.stdout + r.stderr
    return set(line.split()[1:])


def _loaded(mods: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in mods if any(m == p or m.startswith(p + ".") for p in prefixes))


def test_bare_start_imports_only_the_core():
    mods = _modules()
    assert "natsd.server.connection" in mods  # (the check sees the server's own modules)
    assert _loaded(mods, NOT_FOR_A_BARE_START) == []


def test_jetstream_start_imports_no_unused_transport(tmp_path):
    mods = _modules("-js", "-sd", str(tmp_path))
    assert "natsd.jetstream.manager" in mods
    assert _loaded(mods, NOT_FOR_JETSTREAM) == []
