"""Logging in nats-server's style.

Line format (what ``nats-server`` prints, and what tools that scrape its logs expect)::

    [<pid>] 2026/11/21 09:52:02.458908 [INF] Starting nats-server

Levels map onto :mod:`logging`: ``[TRC]`` = :data:`TRACE` (5, ``-V``), ``[DBG]`` = DEBUG
(``-D``), ``[INF]``, ``[WRN]``, ``[ERR]``, ``[FTL]``. Connection-scoped lines are prefixed with
``<ip>:<port> - cid:<n> - `` exactly as the reference does. The in-process server (tests) only
logs through the ``natsd`` logger; :func:`setup_logging` installs the handler for ``main``.

Destinations, in nats-server's order of precedence (server/log.go): ``logfile`` (with
``logfile_size_limit``/``logfile_max_num`` rotation, :mod:`natsd.server.logfile`), ``remote_syslog``,
``syslog``, stderr. ``logtime_utc`` prints the times in UTC.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from natsd.config.options import ServerOptions

__all__ = ["TRACE", "logger", "setup_logging", "setup_logging_from", "reopen_log_file", "NatsFormatter"]

TRACE = 5
logging.addLevelName(TRACE, "TRC")

logger = logging.getLogger("natsd")

_LEVEL_TAGS = {
    TRACE: "TRC",
    logging.DEBUG: "DBG",
    logging.INFO: "INF",
    logging.WARNING: "WRN",
    logging.ERROR: "ERR",
    logging.CRITICAL: "FTL",
}


class NatsFormatter(logging.Formatter):
    """``[pid] YYYY/MM/DD HH:MM:SS.ffffff [LVL] message`` (``logtime=False`` drops the time)."""

    def __init__(self, logtime: bool = True, utc: bool = False) -> None:
        super().__init__()
        self.logtime = logtime
        self.pid = os.getpid()
        self._clock = time.gmtime if utc else time.localtime

    def format(self, record: logging.LogRecord) -> str:
        tag = _LEVEL_TAGS.get(record.levelno, record.levelname[:3])
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        if not self.logtime:
            return f"[{self.pid}] [{tag}] {msg}"
        t = record.created
        us = int((t - int(t)) * 1_000_000)
        return f"[{self.pid}] {time.strftime('%Y/%m/%d %H:%M:%S', self._clock(t))}.{us:06d} [{tag}] {msg}"


def setup_logging(
    debug: bool = False,
    trace: bool = False,
    logtime: bool = True,
    log_file: str = "",
    *,
    logtime_utc: bool = False,
    log_size_limit: int = 0,
    log_max_num: int = 0,
    syslog: bool = False,
    remote_syslog: str = "",
) -> None:
    """Install the nats-style handler on the ``natsd`` logger (see the module's destinations).
    Raises OSError (file, syslog socket) or ValueError (a ``remote_syslog`` URL) when the
    destination cannot be opened."""
    handler: logging.Handler
    if log_file or remote_syslog or syslog:
        from natsd.server import logfile  # deferred (start-up time): most servers log to stderr

        if log_file:
            handler = logfile.RotatingLogFile(log_file, log_size_limit, log_max_num)
            handler.setFormatter(NatsFormatter(logtime, logtime_utc))
        else:
            handler = logfile.go_syslog_handler(remote_syslog)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(NatsFormatter(logtime, logtime_utc))
    for h in list(logger.handlers):
        logger.removeHandler(h)
        h.close()
    # NatsFormatter prints none of a record's process, thread or caller fields: not gathering them
    # (the logging HOWTO's "Optimization") saves a getpid() system call and a stack walk per line;
    # a restart logs three lines per stream (a fifth of a 10,000-stream restart's CPU, issue 31).
    logging.logProcesses = logging.logThreads = logging.logMultiprocessing = False
    logging._srcfile = None
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(TRACE if trace else logging.DEBUG if debug else logging.INFO)
    if log_file and 0 < log_size_limit < os.path.getsize(log_file):
        logger.info("Rotating logfile...")  # as the reference: this line triggers the rotation


def setup_logging_from(o: ServerOptions) -> None:
    """:func:`setup_logging` with a server's options."""
    setup_logging(
        debug=o.debug,
        trace=o.trace,
        logtime=o.logtime,
        log_file=o.log_file,
        logtime_utc=o.logtime_utc,
        log_size_limit=o.log_size_limit,
        log_max_num=o.log_max_num,
        syslog=o.syslog,
        remote_syslog=o.remote_syslog,
    )


def reopen_log_file() -> bool:
    """Reopen the log file (SIGUSR1, as nats-server: logrotate moves the file away and signals,
    the server then writes to a new file at the configured path). Returns False, and logs as the
    reference does, when the log goes to stderr."""
    files = [h for h in logger.handlers if isinstance(h, logging.FileHandler)]
    if not files:
        logger.info("File log re-open ignored, not a file logger")
        return False
    for h in files:
        h.acquire()
        try:
            old = h.stream
            # Open the new file before closing the old one, so a failure (directory gone,
            # permission) keeps logging to the old file instead of losing lines.
            try:
                h.stream = h._open()
            except OSError as e:
                h.release()
                logger.error("Error re-opening log file %s: %s", h.baseFilename, e)
                h.acquire()
                continue
            if old is not None:
                old.close()
        finally:
            h.release()
    logger.info("File log re-opened")
    return True


_GO_ESCAPES = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v", 34: '\\"', 92: "\\\\"}


def go_quote(data: bytes) -> str:
    """``data`` as Go's ``%q`` prints bytes (``strconv.Quote``), without the surrounding quotes:
    UTF-8 text kept where printable, Go's short escapes, ``\\xNN`` for bytes that are not UTF-8."""
    out: list[str] = []
    text = data.decode("utf-8", errors="surrogateescape")
    for ch in text:
        o = ord(ch)
        esc = _GO_ESCAPES.get(o)
        if esc is not None:
            out.append(esc)
        elif 0xDC80 <= o <= 0xDCFF:  # an undecodable byte
            out.append(f"\\x{o - 0xDC00:02x}")
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    return "".join(out)


def trace_payload(prefix: str, data: bytes, max_len: int) -> None:
    """The reference's ``<<- MSG_PAYLOAD: [...]`` trace line (headers included), cut to
    ``max_traced_msg_len`` bytes with ``...`` when that is set; nothing for an empty payload."""
    if not data:
        return
    if 0 < max_len < len(data):
        logger.log(TRACE, '%s<<- MSG_PAYLOAD: ["%s..."]', prefix, go_quote(data[:max_len]))
    else:
        logger.log(TRACE, '%s<<- MSG_PAYLOAD: ["%s"]', prefix, go_quote(data))
