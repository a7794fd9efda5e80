"""Log files and syslog as nats-server writes them (natsd.server.logfile, natsd.server.log): backup
names, rotation and purge, syslog framing, UTC times, traced payloads."""

from __future__ import annotations

import logging
import os
import re
import time

import pytest

from natsd.server import logfile
from natsd.server.log import TRACE, NatsFormatter, go_quote
from natsd.server.logfile import RotatingLogFile, backup_name

pytestmark = pytest.mark.unit


def record(level: int, msg: str, created: float | None = None) -> logging.LogRecord:
    r = logging.LogRecord("natsd", level, __file__, 1, msg, (), None)
    if created is not None:
        r.created = created
    return r


def test_backup_name_is_local_time_with_nanoseconds(monkeypatch):
    monkeypatch.setattr(time, "localtime", time.gmtime)
    ns = 1_764_624_059_000_000_000 + 12_345  # 2025-12-01 21:20:59 UTC
    assert backup_name("/var/log/nats.log", ns) == "/var/log/nats.log.2025.12.01.21.20.59.000012345"


def test_rotation_renames_reopens_and_purges(tmp_path):
    path = tmp_path / "n.log"
    h = RotatingLogFile(str(path), size_limit=200, max_num=2)
    h.setFormatter(NatsFormatter())
    try:
        for i in range(40):
            h.handle(record(logging.INFO, f"line {i:03d} " + "x" * 40))
    finally:
        h.close()
    backups = sorted(p.name for p in tmp_path.iterdir() if p.name != "n.log")
    # max_num counts the live file: one backup is kept.
    assert len(backups) == 1
    assert re.fullmatch(r"n\.log\.\d{4}\.\d\d\.\d\d\.\d\d\.\d\d\.\d\d\.\d{9}", backups[0])
    live = path.read_bytes().decode()
    first, rest = live.split("\r\n", 1)
    assert re.fullmatch(
        rf'\[{os.getpid()}\] \S+ \S+ \[INF\] Rotated log, backup saved as "{re.escape(str(tmp_path))}'
        rf'/n\.log\.[0-9.]+"',
        first,
    )
    assert '[INF] Purged log file "n.log.' in rest and rest.count("\r\n") == 1  # the purge line, CRLF too
    # The write that crossed the limit ends the backup; the new file starts with the rotation line.
    assert (tmp_path / backups[0]).read_text().rstrip().endswith("line 039 " + "x" * 40)


def test_no_limit_never_rotates_and_foreign_files_survive_the_purge(tmp_path):
    (tmp_path / "n.log.old").write_text("keep")
    (tmp_path / "n.log.2020.01.01.00.00.00.000000001").write_text("purge me")
    h = RotatingLogFile(str(tmp_path / "n.log"))
    h.setFormatter(NatsFormatter())
    for i in range(50):
        h.handle(record(logging.INFO, "x" * 100))
    h.max_num, h.size_limit = 1, 10
    h.handle(record(logging.INFO, "rotate now"))
    h.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["n.log", "n.log.old"]  # max 1: no backup at all


def test_logtime_utc():
    utc = NatsFormatter(utc=True).format(record(logging.INFO, "x", created=0.5))
    assert utc.split(" ", 1)[1] == "1970/01/01 00:00:00.500000 [INF] x"


def test_go_quote_matches_go_percent_q():
    assert go_quote(b"hello") == "hello"
    assert go_quote(b'a"b\\c') == 'a\\"b\\\\c'
    assert go_quote(b"\x01\r\n\t\x7f") == "\\x01\\r\\n\\t\\x7f"
    assert go_quote("é✓".encode()) == "é✓"
    assert go_quote(b"\xff\xfe") == "\\xff\\xfe"
    assert go_quote("\u200b".encode()) == "\\u200b"


@pytest.mark.parametrize(
    "url,expected",
    [
        ("udp://127.0.0.1:514", (("127.0.0.1", 514), "dgram")),
        ("tcp://logs:601", (("logs", 601), "stream")),
        ("unix:///dev/log", ("/dev/log", "dgram")),
    ],
)
def test_remote_syslog_addresses(url, expected):
    address, kind = logfile._remote_address(url)
    assert (address, "dgram" if kind == logfile.socket.SOCK_DGRAM else "stream") == expected


@pytest.mark.parametrize("url,msg", [("127.0.0.1:514", "invalid network type"), ("udp://host", "invalid remote")])
def test_bad_remote_syslog_urls(url, msg):
    with pytest.raises(ValueError, match=msg):
        logfile._remote_address(url)


def test_syslog_lines_and_priorities(monkeypatch):
    monkeypatch.setattr(time, "localtime", time.gmtime)
    monkeypatch.setattr(time, "strftime", lambda f, t=None: time.asctime(t) and _strftime(f, t))
    f = logfile._GoSyslogFormatter(remote=True)
    line = f.format(record(logging.INFO, "Server is ready", created=0.0))
    assert line == f"1970-01-01T00:00:00Z {f.host} {f.tag}: Server is ready\n"
    local = logfile._GoSyslogFormatter(remote=False).format(record(logging.WARNING, "w", created=0.0))
    assert local == f"Jan  1 00:00:00 {f.tag}: w\n"
    h = logfile._GoSyslogHandler.__new__(logfile._GoSyslogHandler)
    h.facility = logfile.logging.handlers.SysLogHandler.LOG_KERN
    pri = {
        lvl: h.encodePriority(h.facility, h.mapPriority(logging.getLevelName(lvl)))
        for lvl in (TRACE, logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)
    }
    assert pri == {
        TRACE: 5,
        logging.DEBUG: 7,
        logging.INFO: 5,
        logging.WARNING: 4,
        logging.ERROR: 3,
        logging.CRITICAL: 2,
    }


_real_strftime = time.strftime


def _strftime(fmt: str, t=None) -> str:
    # The formatter asks for %z of a gmtime() tuple: UTC's offset.
    return "+0000" if fmt == "%z" else _real_strftime(fmt, t)
