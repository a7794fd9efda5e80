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
    "natsd.config.mqtt",  # (issue 31: with an mqtt {} block only)
    "natsd.config.jwt",  # (issue 31: the typed claims, with trust keys or a JWT client only)
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
    # stdlib modules loaded with their first use (issue 31, ADR 0015): OpenSSL's digests (a config
    # file's digest, the first password, pinned certificates, the JetStream node name), secrets (the
    # first NUID), random (mappings, sampled traces, leaf links), datetime (a parsed or far time)
    "hashlib",
    "_hashlib",
    "hmac",
    "secrets",
    "random",
    "datetime",
)

NOT_FOR_JETSTREAM = (
    "natsd.server.monitoring",
    "natsd.server.transport.websocket",
    "natsd.server.transport.wsclient",
    "natsd.server.leaf",
    "natsd.server.auth.trust",
    "natsd.server.mqtt",
    "natsd.config.mqtt",
    "natsd.config.jwt",
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


def test_a_bare_start_makes_only_the_dataclass_methods_it_calls():
    """natsd.lazydataclass (ADR 0015): the records a bare start defines but never builds keep their
    stand-ins; the options it builds without arguments (``ServerOptions()``) keep theirs too, the
    defaults assigned without a generated ``__init__`` (issue 31)."""
    code = CHILD.replace(
        'print("MODULES "',
        "from natsd.config import options as O, tls as T\n"
        '    made = lambda c, m: not getattr(c.__dict__[m], "_lazydataclass_stand_in", False)\n'
        '    print("MADE", made(O.ServerOptions, "__init__"), made(O.ServerOptions, "__repr__"),'
        ' made(O.ServerOptions, "__eq__"), made(O.UserOptions, "__init__"), made(T.TLSOptions, "__init__"))\n'
        '    print("MODULES "',
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    r = subprocess.run(
        [sys.executable, "-c", code, "-a", "127.0.0.1", "-p", "-1"], capture_output=True, text=True, env=env, timeout=60
    )
    assert "MADE False False False False False" in r.stdout, r.stdout + r.stderr


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


# -- a restart with a stream that has no consumer (a KV bucket): issue 31 ----------------------

# natsd's entry point in a child that writes the loaded modules to DUMP each time TRIGGER appears
# (the test creates it after its requests were answered; the child removes it), and goes on serving.
DUMPING_CHILD = r"""
import os, sys, threading, time
trigger, dump = sys.argv[1], sys.argv[2]

def watch():
    while True:
        while not os.path.exists(trigger):
            time.sleep(0.005)
        os.unlink(trigger)  # (consumed: the next one the test makes is a new request)
        with open(dump + ".tmp", "w") as f:
            f.write(" ".join(sorted(sys.modules)))
        os.replace(dump + ".tmp", dump)

threading.Thread(target=watch, daemon=True).start()
from natsd.server.main import main
sys.exit(main(sys.argv[3:]))
"""

# What a restarted stream without consumers does not load to answer its STREAM.INFO and a
# direct get: the consumer layer (no consumer to recover, no consumer request) and the snapshot
# layer (no stale restore directory, no snapshot request).
NOT_FOR_A_KV_GET = (
    "natsd.jetstream.consumer_registry",
    "natsd.jetstream.consumer.core",
    "natsd.jetstream.consumer.pull",
    "natsd.jetstream.config.consumer_config",
    "natsd.jetstream.api.consumers",
    "natsd.jetstream.api.snapshot",
    "natsd.jetstream.snapshot",
    # the schedule layer (with datetime) and the stream side of message tracing: with the first stream
    # allowing schedules, the first schedule header, the first traced message (issue 31)
    "natsd.jetstream.stream.schedules",
    "natsd.jetstream.stream.schedule_state",
    "natsd.jetstream.stream.tracing",
    "datetime",
    "random",  # (with the first ephemeral consumer's name)
)

_KV = {
    "name": "KV_B",
    "subjects": ["$KV.B.>"],
    "storage": "file",
    "max_msgs_per_subject": 1,
    "allow_rollup_hdrs": True,
    "deny_delete": True,
    "allow_direct": True,
    "discard": "new",
}


def _reply(c: _Raw, subject: str, body: bytes = b"") -> tuple[bytes, bytes]:
    """(header block or b"", payload) of the one reply to a request (MSG or HMSG)."""
    c.sock.sendall(b"PUB %s _R.1 %d\r\n%s\r\n" % (subject.encode(), len(body), body))
    while True:
        line = c._line()
        if line.startswith(b"PING"):
            c.sock.sendall(b"PONG\r\n")
            continue
        if not line.startswith((b"MSG ", b"HMSG ")):
            continue
        parts = line.split()
        size = int(parts[-1])
        hsize = int(parts[-2]) if line.startswith(b"HMSG ") else 0
        while len(c.buf) < size + 2:
            c.buf += c.sock.recv(65536)
        data, c.buf = c.buf[:size], c.buf[size + 2 :]
        return data[:hsize], data[hsize:]


def _durable_first_msg(c: _Raw, stream: str, durable: str, pending: int) -> dict:
    """Create a durable pull consumer on ``stream`` (its ``num_pending`` must be ``pending``) and
    fetch one message: its JSON payload."""
    r = c.request(
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{durable}",
        {"stream_name": stream, "config": {"durable_name": durable, "ack_policy": "explicit"}},
    )
    assert r["num_pending"] == pending and "error" not in r, r
    _, payload = _reply(c, f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}", b'{"batch":1}')
    return json.loads(payload)


def _dumping_start(store: Path, trigger: Path, dump: Path) -> tuple[subprocess.Popen, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    args = ["-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store)]
    proc = subprocess.Popen(
        [sys.executable, "-c", DUMPING_CHILD, str(trigger), str(dump), *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, port


def _modules_now(trigger: Path, dump: Path) -> set[str]:
    trigger.touch()
    deadline = time.monotonic() + 30
    while not dump.exists():
        assert time.monotonic() < deadline, "the child did not write its modules"
        time.sleep(0.005)
    mods = set(dump.read_text().split())
    dump.unlink()
    return mods


def test_a_restarted_bucket_answers_without_the_consumer_and_snapshot_layers(tmp_path):
    store, trigger, dump = tmp_path / "store", tmp_path / "go", tmp_path / "modules"
    proc, port = _start(store)
    try:
        c = _Raw(proc, port)
        assert "error" not in c.request("$JS.API.STREAM.CREATE.KV_B", _KV)
        for i in range(50):
            assert "error" not in c.request(f"$KV.B.key{i}", {"v": i})
        c.close()
    finally:
        _stop(proc)
    proc, port = _dumping_start(store, trigger, dump)
    try:
        c = _Raw(proc, port)
        assert c.request("$JS.API.STREAM.INFO.KV_B")["state"]["messages"] == 50
        hdr, payload = _reply(c, "$JS.API.DIRECT.GET.KV_B.$KV.B.key49")
        assert json.loads(payload) == {"v": 49} and b"Nats-Subject: $KV.B.key49" in hdr
        mods = _modules_now(trigger, dump)
        assert "natsd.jetstream.stream.core" in mods  # (the check sees the woken stream's modules)
        assert _loaded(mods, NOT_FOR_A_KV_GET) == []
        # ... and both load, and work, when first asked for: a consumer on the restarted stream
        assert _durable_first_msg(c, "KV_B", "W", pending=50) == {"v": 0}
        assert "natsd.jetstream.consumer_registry" in _modules_now(trigger, dump)
        c.close()
    finally:
        _stop(proc)
    # the next restart recovers that consumer (the stream wakes with it) and serves its pulls
    proc, port = _start(store)
    try:
        c = _Raw(proc, port)
        r = c.request("$JS.API.CONSUMER.INFO.KV_B.W")
        assert r["config"]["durable_name"] == "W" and r["num_ack_pending"] == 1, r
        hdr, payload = _reply(c, "$JS.API.CONSUMER.MSG.NEXT.KV_B.W", b'{"batch":1}')
        assert json.loads(payload) in ({"v": 0}, {"v": 1})  # (the unacked one redelivered, or the next)
        c.close()
    finally:
        _stop(proc)


# -- the first plain STREAM.CREATE and durable consumer on a fresh server: issue 31 -------------

# What a plain file stream (no mirror, sources, atomic or fast batches, counters, schemas) and a
# plain durable pull consumer (no dead letters, partition key, inactivity threshold) load neither
# to be created nor to take a publish and deliver it: those features' layers load with the first
# stream or consumer that uses them.
NOT_FOR_A_PLAIN_STREAM = (
    "natsd.jetstream.stream.sourcing",
    "natsd.jetstream.stream.batch",
    "natsd.jetstream.stream.fastbatch",
    "natsd.jetstream.stream.counters",
    "natsd.jetstream.features.schemas",
    "natsd.jetstream.features.keyspec",
    "natsd.jetstream.stream.schedules",
    "natsd.jetstream.stream.tracing",
    "natsd.store.file.consumer_state",  # (with the stream's first consumer)
    # OpenSSL's digests: the node name, a template's checksum and the stream's meta.sum use the
    # interpreter's own SHA-256 and BLAKE2 modules
    "hashlib",
    "_hashlib",
)
NOT_FOR_A_PLAIN_CONSUMER = (
    "natsd.jetstream.consumer.deadletter",
    "natsd.jetstream.consumer.partition",
    "natsd.jetstream.features.keyspec",
    "natsd.jetstream.stream.sourcing",
    "natsd.jetstream.stream.batch",
    "natsd.jetstream.stream.counters",
    "natsd.jetstream.features.schemas",
    "random",
    "secrets",  # (the advisories' NUIDs draw from os.urandom)
    "hmac",
    "hashlib",
    "_hashlib",
)


def test_a_plain_stream_and_consumer_load_no_unused_feature(tmp_path):
    store, trigger, dump = tmp_path / "store", tmp_path / "go", tmp_path / "modules"
    proc, port = _dumping_start(store, trigger, dump)
    try:
        c = _Raw(proc, port)
        r = c.request("$JS.API.STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"], "storage": "file"})
        assert "error" not in r, r
        assert c.request("p.a", {"v": 1})["seq"] == 1
        mods = _modules_now(trigger, dump)
        assert "natsd.jetstream.stream.core" in mods  # (the check sees the stream layer)
        assert _loaded(mods, NOT_FOR_A_PLAIN_STREAM) == []
        assert _durable_first_msg(c, "P", "D", pending=1) == {"v": 1}
        mods = _modules_now(trigger, dump)
        assert "natsd.jetstream.consumer.core" in mods and "natsd.store.file.consumer_state" in mods
        assert _loaded(mods, NOT_FOR_A_PLAIN_CONSUMER) == []
        # ... and a stream that uses them loads them and works: a counter stream, a mirror of P
        r = c.request(
            "$JS.API.STREAM.CREATE.C", {"name": "C", "subjects": ["c.>"], "storage": "file", "allow_msg_counter": True}
        )
        assert "error" not in r, r
        hdr, payload = _reply(c, "c.x", b"")
        assert b"error" in payload  # (a counter stream refuses a message without Nats-Incr)
        c.sock.sendall(b"HPUB c.x _R.1 26 26\r\nNATS/1.0\r\nNats-Incr: 5\r\n\r\n\r\n")
        while True:
            line = c._line()
            if line.startswith(b"MSG "):
                break
        assert b'"val":"5"' in c._line()
        r = c.request("$JS.API.STREAM.CREATE.M", {"name": "M", "storage": "file", "mirror": {"name": "P"}})
        assert "error" not in r, r
        deadline = time.monotonic() + 20
        while c.request("$JS.API.STREAM.INFO.M")["state"]["messages"] != 1:
            assert time.monotonic() < deadline, "the mirror did not catch up"
            time.sleep(0.05)
        mods = _modules_now(trigger, dump)
        assert "natsd.jetstream.stream.sourcing" in mods  # (the counter's light path needed no module)
        c.close()
    finally:
        _stop(proc)
