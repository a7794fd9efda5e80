"""Log files, rotation, syslog and trace options (issue 29 item 5): one script against nats-server
and natsd with the same configuration, comparing file names and line shapes."""

from __future__ import annotations

import datetime
import re
import socket
import time

import pytest

from tests.helpers.servers import reference_binary, start_server

pytestmark = pytest.mark.acceptance

KINDS = ["natsd", "reference"]
STAMP = r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6}"


def _skip(kind: str) -> None:
    if kind == "reference" and reference_binary() is None:
        pytest.skip("nats-server binary not available")


def _wait_for(pred, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def _read(path) -> str:
    try:
        return path.read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _publish(port: int, frames: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.settimeout(5)
        s.recv(4096)
        s.sendall(b'CONNECT {"verbose":false,"headers":true}\r\n' + frames + b"PING\r\n")
        buf = b""
        while b"PONG" not in buf:
            chunk = s.recv(4096)
            assert chunk, buf
            buf += chunk


@pytest.mark.parametrize("kind", KINDS)
def test_size_rotation_names_backups_and_purges(kind, tmp_path):
    _skip(kind)
    log = tmp_path / "srv.log"
    conf = tmp_path / "srv.conf"
    conf.write_text(f'logfile: "{log}"\nlogfile_size_limit: 1500\nlogfile_max_num: 3\ntrace: true\n')
    srv = start_server(kind, tmp_path, config=conf, jetstream=False)
    try:
        for i in range(12):  # separate connections: each adds connect/close lines whatever the batching
            _publish(srv.port, b"PUB rot.%d 5\r\nhello\r\n" % i)
        # A third rotation purges the oldest backup (the live file and two backups make three).
        assert _wait_for(lambda: any("Purged log file" in _read(p) for p in tmp_path.glob("srv.log*"))), srv.log()
    finally:
        srv.stop()
    backups = sorted(p.name for p in tmp_path.glob("srv.log.*"))
    assert len(backups) == 2  # logfile_max_num counts the live file
    assert all(re.fullmatch(r"srv\.log\.\d{4}\.\d\d\.\d\d\.\d\d\.\d\d\.\d\d\.\d{9}", b) for b in backups), backups
    texts = [_read(tmp_path / b) for b in backups] + [_read(log)]
    rotated = [t for t in texts if "Rotated log" in t]
    assert rotated
    for text in rotated:
        first = text.split("\r\n", 1)[0]
        assert re.fullmatch(
            rf'\[\d+\] {STAMP} \[INF\] Rotated log, backup saved as "{re.escape(str(log))}'
            rf'\.[0-9.]+"',
            first,
        ), first
    purged = re.findall(r'\[INF\] Purged log file "(srv\.log\.[0-9.]+)"\r\n', "".join(texts))
    assert purged and not any((tmp_path / name).exists() for name in purged)


@pytest.mark.parametrize("kind", KINDS)
def test_logtime_utc_and_max_traced_msg_len(kind, tmp_path):
    _skip(kind)
    log = tmp_path / "srv.log"
    conf = tmp_path / "srv.conf"
    conf.write_text(f'logfile: "{log}"\nlogtime_utc: true\nmax_traced_msg_len: 4\ntrace: true\n')
    # A zone far from UTC, so local times would show.
    srv = start_server(kind, tmp_path, config=conf, jetstream=False, env={"TZ": "Asia/Tokyo"})
    try:
        _publish(srv.port, b"PUB trc 9\r\nhello\x01wor\r\nPUB trc 2\r\nab\r\nHPUB trc 12 14\r\nNATS/1.0\r\n\r\nhi\r\n")
        assert _wait_for(lambda: _read(log).count("MSG_PAYLOAD") >= 3), _read(log)
    finally:
        srv.stop()
    text = _read(log)
    assert '<<- MSG_PAYLOAD: ["hell..."]' in text
    assert '<<- MSG_PAYLOAD: ["ab"]' in text
    assert '<<- MSG_PAYLOAD: ["NATS..."]' in text
    assert "<<- [HPUB trc 12 14]" in text
    ready = re.search(rf"\] ({STAMP}) \[INF\] Server is ready", text)
    assert ready, text
    shown = datetime.datetime.strptime(ready.group(1), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=datetime.UTC)
    assert abs((datetime.datetime.now(datetime.UTC) - shown).total_seconds()) < 120


@pytest.mark.parametrize("kind", KINDS)
def test_remote_syslog_over_udp(kind, tmp_path):
    _skip(kind)
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(15)
    conf = tmp_path / "srv.conf"
    conf.write_text(f'remote_syslog: "udp://127.0.0.1:{listener.getsockname()[1]}"\ndebug: true\n')
    try:
        srv = start_server(kind, tmp_path, config=conf, jetstream=False)
        try:
            lines = []
            while not any(b"Server is ready" in d for d in lines):
                lines.append(listener.recvfrom(65536)[0])
        finally:
            srv.stop()
    finally:
        listener.close()
    ready = next(d for d in lines if b"Server is ready" in d).decode()
    tag = "nats-server" if kind == "reference" else "natsd"
    host = re.escape(socket.gethostname())
    # Go's log/syslog framing: <priority>RFC 3339 time, host, tag[pid]: message, newline. Notice, facility 0.
    assert re.fullmatch(
        rf"<5>\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d) {host} {tag}\[{srv.pid}\]: "
        rf"Server is ready\n",
        ready,
    ), ready
    assert lines[0].decode().endswith(": Starting nats-server\n")
    assert not any(b"[INF]" in d for d in lines)
