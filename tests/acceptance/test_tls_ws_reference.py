"""TLS and WebSocket behaviour side by side: the same script against natsd and nats-server 2.15.1.

Both servers run as subprocesses from the same config file (certificates generated per test run);
each test asserts the observed outcomes are equal, so a natsd difference shows up as a diff.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import ssl
import struct
import subprocess
import sys

import nats
import pytest

from tests.helpers.certs import make_pki
from tests.helpers.servers import free_port, reference_binary, start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.reference, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    if reference_binary() is None:
        pytest.skip("reference nats-server binary not installed")
    return make_pki(tmp_path_factory.mktemp("pki"))


def _conf(tmp_path, name: str, text: str):
    p = tmp_path / f"{name}.conf"
    p.write_text(text)
    return p


def _tls_block(pki, extra: str = "") -> str:
    return (
        f'tls {{\n  cert_file: "{pki.server_cert}"\n  key_file: "{pki.server_key}"\n'
        f'  ca_file: "{pki.ca_file}"\n{extra}}}\n'
    )


def _both(tmp_path, conf, *args):
    """Start each server in turn from one config (the caller stops it): yields (kind, handle)."""
    for kind in ("reference", "natsd"):
        yield kind, start_server(kind, tmp_path / kind, *args, jetstream=False, config=conf)


def _info(port: int) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        buf = b""
        while b"\r\n" not in buf:
            buf += s.recv(4096)
    return json.loads(buf.split(b"\r\n")[0][5:])


def _plaintext_outcome(port: int) -> tuple[bool, bytes]:
    """INFO received?, then what a plaintext CONNECT/PING gets back before the close."""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        got_info = s.recv(4096).startswith(b"INFO ")
        s.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
        data = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        except (ConnectionResetError, socket.timeout):
            pass
    return got_info, data


async def _nats_py_outcome(url: str, **kw) -> str:
    try:
        nc = await nats.connect(url, allow_reconnect=False, connect_timeout=3, max_reconnect_attempts=0, **kw)
    except Exception as e:  # the outcome is what we compare
        return f"refused:{type(e).__name__}"
    try:

        async def echo(m):
            await m.respond(m.data[::-1])

        await nc.subscribe("ref.echo", cb=echo)
        sub = await nc.subscribe("ref.h")
        await nc.publish("ref.h", b"x", headers={"H": "1"})
        m = await sub.next_msg(2)
        r = await nc.request("ref.echo", b"abc", timeout=2)
        return f"ok:{r.data.decode()}:{m.headers}"
    finally:
        await nc.close()


def test_tls_info_plaintext_and_nats_py(pki, tmp_path):
    conf = _conf(tmp_path, "tls", f"port: {free_port()}\n" + _tls_block(pki))
    results = {}
    for kind, srv in _both(tmp_path, conf):
        try:
            info = _info(srv.port)
            results[kind] = {
                "tls_keys": {k: info.get(k) for k in ("tls_required", "tls_verify", "tls_available")},
                "plaintext": _plaintext_outcome(srv.port),
                "nats_py": asyncio.run(
                    _nats_py_outcome(f"tls://localhost:{srv.port}", tls=pki.client_context(with_cert=False))
                ),
                "hostname": asyncio.run(
                    _nats_py_outcome(
                        f"tls://127.0.0.1:{srv.port}",
                        tls=pki.client_context(with_cert=False),
                        tls_hostname="server.natsd.test",
                    )
                ),
                "alive": srv.alive(),
            }
        finally:
            srv.stop()
    assert results["reference"]["nats_py"] == "ok:cba:{'H': '1'}"
    assert results["reference"]["plaintext"] == (True, b"")
    assert results["natsd"] == results["reference"]


def test_tls_verify_and_handshake_first(pki, tmp_path):
    conf = _conf(tmp_path, "verify", f"port: {free_port()}\n" + _tls_block(pki, "  verify: true\n"))
    results = {}
    for kind, srv in _both(tmp_path, conf):
        try:
            info = _info(srv.port)
            other = pki.client_context(with_cert=False)
            other.load_cert_chain(pki.other_client_cert, pki.other_client_key)
            results[kind] = {
                "tls_verify": info.get("tls_verify"),
                "with_cert": asyncio.run(_nats_py_outcome(f"tls://localhost:{srv.port}", tls=pki.client_context())),
                "without_cert": asyncio.run(
                    _nats_py_outcome(f"tls://localhost:{srv.port}", tls=pki.client_context(with_cert=False))
                ).split(":")[0],
                "foreign_cert": asyncio.run(_nats_py_outcome(f"tls://localhost:{srv.port}", tls=other)).split(":")[0],
            }
        finally:
            srv.stop()
    assert results["reference"]["with_cert"].startswith("ok")
    assert results["natsd"] == results["reference"]


def test_handshake_first_with_fallback(pki, tmp_path):
    # A fallback delay, so the start helper (which waits for INFO) sees the server come up.
    conf = _conf(tmp_path, "hf", f"port: {free_port()}\n" + _tls_block(pki, '  handshake_first: "300ms"\n'))
    results = {}
    for kind, srv in _both(tmp_path, conf):
        try:
            results[kind] = {
                "first": asyncio.run(
                    _nats_py_outcome(
                        f"tls://localhost:{srv.port}", tls=pki.client_context(with_cert=False), tls_handshake_first=True
                    )
                ),
                "fallback": asyncio.run(
                    _nats_py_outcome(f"tls://localhost:{srv.port}", tls=pki.client_context(with_cert=False))
                ),
            }
        finally:
            srv.stop()
    assert results["reference"]["first"].startswith("ok")
    assert results["natsd"] == results["reference"]


def _ws_upgrade(port: int, extra: str = "") -> tuple[socket.socket, bytes]:
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(
        f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            break
        head += chunk
    return s, head


def _recv_until_close(s: socket.socket) -> bytes:
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk
    except (ConnectionResetError, socket.timeout):
        return data


def test_websocket_side_by_side(tmp_path):
    port, wsport = free_port(), free_port()
    conf = _conf(
        tmp_path,
        "ws",
        f"port: {port}\nwebsocket {{\n  port: {wsport}\n  no_tls: true\n"
        '  allowed_origins: ["https://app.example.com"]\n}\n',
    )
    results = {}
    for kind, srv in _both(tmp_path, conf):
        try:
            s, head = _ws_upgrade(wsport)
            status = head.split(b"\r\n")[0]
            info_frame = s.recv(2)
            s.close()
            s403, head403 = _ws_upgrade(wsport, "Origin: https://evil.example.com\r\n")
            s403.close()
            bad = socket.create_connection(("127.0.0.1", wsport), timeout=3)
            bad.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            bad_status = _recv_until_close(bad).split(b"\r\n")[0]
            bad.close()
            um, _ = _ws_upgrade(wsport)
            um.sendall(bytes([0x82, 6]) + b"PING\r\n")  # unmasked client frame
            after = _recv_until_close(um)
            um.close()
            results[kind] = {
                "upgrade": status,
                "first_frame": info_frame,
                "forbidden": head403.split(b"\r\n")[0],
                "non_upgrade": bad_status,
                "unmasked_closed": True,
                "nats_py": asyncio.run(_nats_py_outcome(f"ws://127.0.0.1:{wsport}")),
                "alive": srv.alive(),
            }
            if kind == "natsd":
                # natsd also says why, in a close frame (the reference's close frame races its close)
                frames = after[after.rfind(b"\x88") :]
                assert frames[:1] == b"\x88" and struct.unpack("!H", frames[2:4])[0] == 1002
        finally:
            srv.stop()
    assert results["reference"]["upgrade"] == b"HTTP/1.1 101 Switching Protocols"
    assert results["reference"]["nats_py"] == "ok:cba:{'H': '1'}"
    assert results["natsd"] == results["reference"]


@pytest.mark.parametrize("case", ["missing_cert", "key_mismatch", "garbage_cert", "garbage_ca", "ws_no_tls"])
def test_bad_tls_config_errors_match(pki, tmp_path, case):
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("garbage\n")
    blocks = {
        "missing_cert": f'tls {{\n  cert_file: "{tmp_path}/missing.pem"\n  key_file: "{pki.server_key}"\n}}\n',
        "key_mismatch": f'tls {{\n  cert_file: "{pki.server_cert}"\n  key_file: "{pki.client_key}"\n}}\n',
        "garbage_cert": f'tls {{\n  cert_file: "{garbage}"\n  key_file: "{pki.server_key}"\n}}\n',
        "garbage_ca": f'tls {{\n  cert_file: "{pki.server_cert}"\n  key_file: "{pki.server_key}"\n'
        f'  ca_file: "{garbage}"\n}}\n',
        "ws_no_tls": "websocket {\n  port: 8443\n}\n",
    }
    conf = _conf(tmp_path, case, f"port: {free_port()}\n" + blocks[case])
    # (nats-server checks the websocket block only when starting; natsd already with -t)
    ref_args = ["-c", str(conf)] if case == "ws_no_tls" else ["-t", "-c", str(conf)]
    ref = subprocess.run([reference_binary(), *ref_args], capture_output=True, text=True, timeout=30)
    ours = subprocess.run(
        [sys.executable, "-m", "natsd", "-t", "-c", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )
    assert ref.returncode == 1 and ours.returncode == 1
    ref_msg = ref.stderr.strip().split("\n")[-1].removeprefix("nats-server: ")
    our_msg = ours.stderr.strip().split("\n")[-1].removeprefix("natsd: ")
    if case == "ws_no_tls":
        # the reference names no position for this one; natsd adds the block's
        assert our_msg == f"{conf}:2:1: {ref_msg}"
    else:
        assert our_msg == ref_msg


def _peer_cert_der(port: int, ca: str) -> bytes:
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=3) as raw:
        raw.recv(4096)  # INFO
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return s.getpeercert(binary_form=True)


def test_sighup_reloads_certificates(tmp_path):
    import shutil
    import signal
    import time

    if reference_binary() is None:
        pytest.skip("reference nats-server binary not installed")
    old = make_pki(tmp_path / "old")
    new = make_pki(tmp_path / "new")  # same CA key (cached), a newly issued server certificate
    results = {}
    for kind in ("reference", "natsd"):
        live = tmp_path / f"live-{kind}"
        live.mkdir()
        shutil.copy(old.server_cert, live / "cert.pem")
        shutil.copy(old.server_key, live / "key.pem")
        conf = _conf(
            tmp_path, f"reload-{kind}", f'tls {{ cert_file: "{live}/cert.pem", key_file: "{live}/key.pem" }}\n'
        )
        srv = start_server(kind, tmp_path / kind, jetstream=False, config=conf)
        try:
            before = _peer_cert_der(srv.port, old.ca_file)
            shutil.copy(new.server_cert, live / "cert.pem")
            shutil.copy(new.server_key, live / "key.pem")
            srv.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 10
            after = before
            while after == before and time.monotonic() < deadline:
                time.sleep(0.1)
                after = _peer_cert_der(srv.port, old.ca_file)
            with open(new.server_cert) as f:
                results[kind] = (before != after, after == ssl.PEM_cert_to_DER_cert(f.read()), srv.alive())
        finally:
            srv.stop()
    assert results["reference"] == (True, True, True)
    assert results["natsd"] == results["reference"]


def test_tls_from_command_line_flags(pki, tmp_path):
    results = {}
    flags = ("--tlsverify", "--tlscert", pki.server_cert, "--tlskey", pki.server_key, "--tlscacert", pki.ca_file)
    for kind in ("reference", "natsd"):
        srv = start_server(kind, tmp_path / kind, *flags, jetstream=False)
        try:
            info = _info(srv.port)
            results[kind] = {
                "tls_keys": {k: info.get(k) for k in ("tls_required", "tls_verify")},
                "with_cert": asyncio.run(_nats_py_outcome(f"tls://localhost:{srv.port}", tls=pki.client_context())),
                "without_cert": asyncio.run(
                    _nats_py_outcome(f"tls://localhost:{srv.port}", tls=pki.client_context(with_cert=False))
                ).split(":")[0],
            }
        finally:
            srv.stop()
    assert results["reference"]["tls_keys"] == {"tls_required": True, "tls_verify": True}
    assert results["natsd"] == results["reference"]
