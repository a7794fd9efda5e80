"""Log destinations beyond stderr, as nats-server writes them (its ``logger/log.go`` and
``logger/syslog.go``), with the standard library's handlers underneath.

**Size rotation** (``logfile_size_limit``, ``logfile_max_num``): once a write takes the file past
the limit, the file is renamed to ``<logfile>.YYYY.MM.DD.hh.mm.ss.nnnnnnnnn`` (local time,
nanoseconds), a new file is opened at the configured path, and its first line says
``Rotated log, backup saved as "<backup>"``. With a maximum number of files, backups beyond
``max - 1`` (the live file counts) are removed oldest first, each with a ``Purged log file``
line. Those two lines are written straight to the file, as the reference does, so they end
with ``\\r\\n`` and always carry a local time.

**Syslog**: lines carry the message alone (no pid, time or level tag: syslog has its own). The
priority is the reference's: ``[INF]`` and ``[TRC]`` are *notice*, ``[WRN]`` *warning*, ``[ERR]``
*err*, ``[FTL]`` *crit*, ``[DBG]`` *debug*; the facility is *daemon* for the local syslog and 0
(*kern*) for ``remote_syslog``, because the reference dials it with the bare ``LOG_DEBUG``
priority. Each datagram is Go's ``log/syslog`` framing::

    remote: <5>2026-12-01T21:30:00Z myhost natsd[4242]: Server is ready\\n
    local:  <29>Dec  1 21:30:00 natsd[4242]: Server is ready\\n

``remote_syslog`` is ``udp://host:port``, ``tcp://host:port`` or ``unix:///path``.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
import socket
import sys
import time
from urllib.parse import urlsplit

__all__ = ["RotatingLogFile", "backup_name", "go_syslog_handler", "SYSLOG_PATHS"]

# Where Go's log/syslog looks for the local syslog daemon, in order.
SYSLOG_PATHS = ("/dev/log", "/var/run/syslog", "/var/run/log")

# A backup's suffix, as the reference's purge recognises it (Go parses it as a time with an
# optional fraction).
_BACKUP_STAMP = re.compile(r"\d{4}\.\d{2}\.\d{2}\.\d{2}\.\d{2}\.\d{2}(\.\d{1,9})?")


def backup_name(path: str, now_ns: int) -> str:
    """``<path>.YYYY.MM.DD.hh.mm.ss.nnnnnnnnn`` in local time, as nats-server names a backup."""
    t = time.localtime(now_ns // 1_000_000_000)
    return (
        f"{path}.{t.tm_year:04d}.{t.tm_mon:02d}.{t.tm_mday:02d}.{t.tm_hour:02d}.{t.tm_min:02d}."
        f"{t.tm_sec:02d}.{now_ns % 1_000_000_000:09d}"
    )


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class RotatingLogFile(logging.FileHandler):
    """A log file that rotates by size as nats-server's file logger does (see the module)."""

    def __init__(self, path: str, size_limit: int = 0, max_num: int = 0) -> None:
        super().__init__(path, mode="a", encoding="utf-8")
        self.size_limit = size_limit
        self.max_num = max_num

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        if self.size_limit <= 0 or self.stream is None:
            return
        try:
            if self.stream.tell() > self.size_limit:
                self._rotate()
        except OSError:
            self.handleError(record)

    def _direct(self, tag: str, msg: str) -> None:
        # The reference writes its rotation lines past its logger: local time, CRLF.
        t = time.time()
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t))
        assert self.stream is not None  # opened by _rotate() just before
        self.stream.write(f"[{os.getpid()}] {stamp}.{int((t % 1) * 1_000_000):06d} [{tag}] {msg}\r\n")
        self.stream.flush()

    def _rotate(self) -> None:
        assert self.stream is not None  # emit() checked
        self.stream.close()
        backup = backup_name(self.baseFilename, time.time_ns())
        os.rename(self.baseFilename, backup)
        self.stream = self._open()
        self._direct("INF", f"Rotated log, backup saved as {_go_quote(backup)}")
        if self.max_num > 0:
            self._purge()

    def _purge(self) -> None:
        folder, base = os.path.split(self.baseFilename)
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError as e:
            self._direct(
                "ERR",
                f"Unable to read directory {_go_quote(folder)} for log purge ({e.strerror}), "
                "will attempt next rotation",
            )
            return
        backups = [
            n
            for n in names
            if n.startswith(base + ".")
            and _BACKUP_STAMP.fullmatch(n[len(base) + 1 :])
            and not os.path.isdir(os.path.join(folder, n))
        ]
        # Lexical order of the stamps is their age order: remove the oldest.
        for name in backups[: max(0, len(backups) - (self.max_num - 1))]:
            try:
                os.remove(os.path.join(folder, name))
            except OSError as e:
                self._direct(
                    "ERR",
                    f"Unable to remove backup log file {_go_quote(name)} ({e.strerror}), will attempt next rotation",
                )
                return
            self._direct("INF", f"Purged log file {_go_quote(name)}")


# Go's SysLogger methods -> syslog severities (INF and TRC are both Notice in the reference).
_SEVERITY = {
    "TRC": "notice",
    "DEBUG": "debug",
    "INFO": "notice",
    "WARNING": "warning",
    "ERROR": "err",
    "CRITICAL": "crit",
}


def _tag() -> str:
    """The program's name, as Go's syslog tag (``os.Args[0]``'s base name)."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "natsd" if not name or name.endswith(".py") or name == "-c" else name


class _GoSyslogFormatter(logging.Formatter):
    def __init__(self, remote: bool) -> None:
        super().__init__()
        self.remote = remote
        self.host = socket.gethostname()
        self.tag = f"{_tag()}[{os.getpid()}]"

    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        if not msg.endswith("\n"):
            msg += "\n"
        if self.remote:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(record.created))
            off = time.strftime("%z", time.localtime(record.created))
            off = "Z" if off in ("+0000", "-0000") else f"{off[:3]}:{off[3:]}"
            return f"{stamp}{off} {self.host} {self.tag}: {msg}"
        t = time.localtime(record.created)
        return f"{time.strftime('%b', t)} {t.tm_mday:2d} {time.strftime('%H:%M:%S', t)} {self.tag}: {msg}"


class _GoSyslogHandler(logging.handlers.SysLogHandler):
    def mapPriority(self, levelName: str) -> str:  # the stdlib names it so
        return _SEVERITY.get(levelName, "notice")


def _remote_address(url: str) -> tuple[tuple[str, int] | str, socket.SocketKind]:
    parts = urlsplit(url)
    if parts.scheme in ("udp", "tcp"):
        if not parts.hostname or parts.port is None:
            raise ValueError(f"error invalid remote_syslog address: {url!r}")
        kind = socket.SOCK_DGRAM if parts.scheme == "udp" else socket.SOCK_STREAM
        return (parts.hostname, parts.port), kind
    if parts.scheme == "unix":
        return parts.path, socket.SOCK_DGRAM
    raise ValueError(f"error invalid network type: {parts.scheme!r}")


def go_syslog_handler(remote: str = "") -> logging.Handler:
    """The local syslog (``remote`` empty) or ``remote_syslog``'s, framed as Go's ``log/syslog``."""
    if remote:
        address, kind = _remote_address(remote)
        handler = _GoSyslogHandler(address, logging.handlers.SysLogHandler.LOG_KERN, kind)
    else:
        path = next((p for p in SYSLOG_PATHS if os.path.exists(p)), None)
        if path is None:
            raise OSError("error connecting to syslog: Unix syslog delivery error")
        handler = _GoSyslogHandler(path, logging.handlers.SysLogHandler.LOG_DAEMON)
    handler.append_nul = False  # Go ends a line with "\n", never NUL
    handler.setFormatter(_GoSyslogFormatter(remote=bool(remote)))
    return handler
