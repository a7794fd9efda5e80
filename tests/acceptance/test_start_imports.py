"""What a ``natsd`` start loads (issue 26: start-up time). natsd's real entry point (flags,
logging, ``Server.run``) runs in a child interpreter whose server, once it accepts clients, prints
``sys.modules`` and stops itself; modules of features the configuration does not use must be
absent."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
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

# What a JetStream start with an empty store leaves for first use: the API's handler table and
# handlers (first $JS.API request), the stream, consumer and snapshot layers and the file store's
# blocks (first stream created or recovered), the feature list (first /jsz); and (issue 26, second
# step) the API's dispatcher, error table and request decoder (first $JS.API request), the config
# models and their checks, the store's seam types and memory store (first stream), the
# temporary-directory module (only a start without -sd) and shutil behind it.
JETSTREAM_ON_FIRST_USE = (
    "natsd.jetstream.api.router",
    "natsd.jetstream.errors",
    "natsd.jetstream.gojson",
    "natsd.jetstream.advisories",
    "natsd.jetstream.config.models",
    "natsd.jetstream.config.stream_checks",
    "natsd.store.base",
    "natsd.store.memory",
    "natsd.store.seqindex",
    "tempfile",
    "shutil",
    "natsd.jetstream.api.routes",
    "natsd.jetstream.api.streams",
    "natsd.jetstream.api.consumers",
    "natsd.jetstream.api.snapshot",
    "natsd.jetstream.api.direct",
    "natsd.jetstream.stream",
    "natsd.jetstream.consumer.core",
    "natsd.jetstream.config.consumer_config",
    "natsd.jetstream.snapshot",
    "natsd.jetstream.features.metadata",
    "natsd.store.file",
    "pathlib",
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


def test_jetstream_start_with_an_empty_store_defers_the_api_and_stream_layers(tmp_path):
    mods = _modules("-js", "-sd", str(tmp_path))
    assert "natsd.jetstream.api.subjects" in mods  # (the API subjects are subscribed at start)
    assert _loaded(mods, JETSTREAM_ON_FIRST_USE) == []


# -- what the deferred parts must not change: answers from the first moment, recovery first ------


def _start(store: Path) -> tuple[subprocess.Popen, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "natsd", "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, port


class _Raw:
    """A client on a plain socket that connects the moment the port opens (no client library
    between the listener and the first request)."""

    def __init__(self, proc: subprocess.Popen, port: int) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "natsd did not open its port"
                time.sleep(0.0005)
        self.buf = b""
        assert self._line().startswith(b"INFO ")
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nSUB _R.> 1\r\n')

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            assert chunk, "connection closed"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def request(self, subject: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else b""
        self.sock.sendall(b"PUB %s _R.1 %d\r\n%s\r\n" % (subject.encode(), len(data), data))
        while True:
            line = self._line()
            if line.startswith(b"PING"):
                self.sock.sendall(b"PONG\r\n")
            elif line.startswith(b"MSG "):
                size = int(line.split()[-1])
                while len(self.buf) < size + 2:
                    self.buf += self.sock.recv(65536)
                payload, self.buf = self.buf[:size], self.buf[size + 2 :]
                return json.loads(payload)

    def close(self) -> None:
        self.sock.close()


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_a_request_sent_the_moment_the_port_opens_is_answered(tmp_path):
    proc, port = _start(tmp_path)
    try:
        c = _Raw(proc, port)
        info = c.request("$JS.API.INFO")
        assert info["type"] == "io.nats.jetstream.api.v1.account_info_response", info
        assert info["streams"] == 0 and "error" not in info
        created = c.request("$JS.API.STREAM.CREATE.S1", {"name": "S1", "subjects": ["s1.>"], "storage": "file"})
        assert created["config"]["name"] == "S1" and "error" not in created, created
        c.close()
    finally:
        _stop(proc)


def test_an_existing_store_is_recovered_before_clients_are_accepted(tmp_path):
    proc, port = _start(tmp_path)
    try:
        c = _Raw(proc, port)
        for i in range(3):
            r = c.request(f"$JS.API.STREAM.CREATE.R{i}", {"name": f"R{i}", "subjects": [f"r{i}.>"], "storage": "file"})
            assert "error" not in r, r
            c.sock.sendall(b"PUB r%d.x _R.1 5\r\nhello\r\n" % i)
            c._line()  # (the publish ack's MSG line)
            c._line()
        c.close()
    finally:
        _stop(proc)
    proc, port = _start(tmp_path)
    try:
        c = _Raw(proc, port)  # the first connection: every stream is back already, as nats-server has it
        names = c.request("$JS.API.STREAM.NAMES")
        assert names["streams"] == ["R0", "R1", "R2"], names
        assert c.request("$JS.API.STREAM.INFO.R1")["state"]["messages"] == 1
        c.close()
    finally:
        _stop(proc)


def test_the_command_line_answers_without_loading_the_server():
    """``natsd -v`` (and -h, -t): the entry point's module no longer drags the server in."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    code = (
        "import sys\nfrom natsd.server.main import main\nrc = main(['-v'])\n"
        "print('LOADED', 'natsd.server.server' in sys.modules, 'natsd.jetstream' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.stdout.startswith("natsd: v") and "LOADED False False" in r.stdout, r.stdout + r.stderr
