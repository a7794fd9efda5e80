"""SIGUSR1 reopens the log file (logrotate's postrotate hook), as nats-server does; it must not
kill the server (issue 14 item 5). The same script runs against both servers."""

from __future__ import annotations

import signal
import socket
import time

import pytest

from tests.helpers.servers import reference_binary, start_server

pytestmark = pytest.mark.acceptance

KINDS = ["natsd", "reference"]


def _skip(kind: str) -> None:
    if kind == "reference" and reference_binary() is None:
        pytest.skip("nats-server binary not available")


def _wait_for(pred, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def _read(path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _ping(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.settimeout(5)
        s.recv(4096)
        s.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
        buf = b""
        while b"PONG" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                return False
            buf += chunk
    return True


@pytest.mark.parametrize("kind", KINDS)
def test_sigusr1_reopens_the_log_file(kind, tmp_path):
    _skip(kind)
    log = tmp_path / "server.log"
    srv = start_server(kind, tmp_path, "-l", str(log))
    try:
        assert _wait_for(lambda: "Server is ready" in _read(log))
        rotated = tmp_path / "server.log.1"
        log.rename(rotated)  # what logrotate does before its postrotate hook
        srv.proc.send_signal(signal.SIGUSR1)
        assert _wait_for(lambda: "File log re-opened" in _read(log)), srv.log()
        assert srv.alive()
        assert _ping(srv.port)
        srv.proc.send_signal(signal.SIGUSR1)  # twice in a row is fine too
        assert _wait_for(lambda: _read(log).count("File log re-opened") == 2)
        assert srv.alive()
        assert "Server is ready" in _read(rotated) and "re-opened" not in _read(rotated)
    finally:
        srv.stop()
    # Shutdown lines go to the new file.
    assert "Server Exiting" in _read(log) or "Initiating Shutdown" in _read(log)


@pytest.mark.parametrize("kind", KINDS)
def test_sigusr1_without_a_log_file_is_ignored(kind, tmp_path):
    _skip(kind)
    srv = start_server(kind, tmp_path)
    try:
        assert _wait_for(lambda: "Server is ready" in srv.log())
        srv.proc.send_signal(signal.SIGUSR1)
        assert _wait_for(lambda: "File log re-open ignored, not a file logger" in srv.log()), srv.log()
        assert srv.alive()
        assert _ping(srv.port)
    finally:
        srv.stop()
