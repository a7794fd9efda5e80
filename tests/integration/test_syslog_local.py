"""The local syslog destination (``syslog: true``) over a Unix datagram socket standing in for
/dev/log, and the start-up rotation of a log file already past its limit (natsd.server.logfile,
natsd.server.log)."""

from __future__ import annotations

import os
import re
import socket

import pytest

from natsd.server import log as natsd_log
from natsd.server import logfile

pytestmark = pytest.mark.integration


@pytest.fixture
def restore_logger():
    handlers, level, propagate = list(natsd_log.logger.handlers), natsd_log.logger.level, natsd_log.logger.propagate
    yield natsd_log.logger
    for h in list(natsd_log.logger.handlers):
        natsd_log.logger.removeHandler(h)
        h.close()
    for h in handlers:
        natsd_log.logger.addHandler(h)
    natsd_log.logger.setLevel(level)
    natsd_log.logger.propagate = propagate


def test_local_syslog_datagrams(tmp_path, monkeypatch, restore_logger):
    path = str(tmp_path / "log.sock")
    daemon = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    daemon.bind(path)
    daemon.settimeout(5)
    monkeypatch.setattr(logfile, "SYSLOG_PATHS", ("/nonexistent/log", path))
    try:
        natsd_log.setup_logging(syslog=True, debug=True)
        restore_logger.info("Server is ready")
        restore_logger.warning("careful")
        restore_logger.debug("details")
        got = [daemon.recv(4096).decode() for _ in range(3)]
    finally:
        daemon.close()
    tag = rf"{re.escape(logfile._tag())}\[{os.getpid()}\]"
    # Go's local framing: <facility daemon (3) * 8 + severity>, time.Stamp, tag[pid]: message
    assert re.fullmatch(rf"<29>[A-Z][a-z]{{2}} [ \d]\d \d\d:\d\d:\d\d {tag}: Server is ready\n", got[0]), got[0]
    assert got[1].startswith("<28>") and got[1].endswith(": careful\n")
    assert got[2].startswith("<31>") and got[2].endswith(": details\n")


def test_no_local_syslog_is_an_error(monkeypatch, restore_logger):
    monkeypatch.setattr(logfile, "SYSLOG_PATHS", ("/nonexistent/log",))
    with pytest.raises(OSError, match="error connecting to syslog"):
        natsd_log.setup_logging(syslog=True)


def test_a_log_file_past_its_limit_rotates_at_start(tmp_path, restore_logger):
    log = tmp_path / "n.log"
    log.write_text("old line\n" * 100)
    natsd_log.setup_logging(log_file=str(log), log_size_limit=500)
    restore_logger.info("after start")
    backups = [p.name for p in tmp_path.iterdir() if p.name != "n.log"]
    assert len(backups) == 1 and "old line" in (tmp_path / backups[0]).read_text()
    assert "Rotating logfile..." in (tmp_path / backups[0]).read_text()
    text = log.read_text()
    assert "Rotated log, backup saved as" in text and "after start" in text
