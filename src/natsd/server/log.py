"""Logging in nats-server's style.

Line format (what ``nats-server`` prints, and what tools that scrape its logs expect)::

    [<pid>] 2026/11/21 09:52:02.458908 [INF] Starting nats-server

Levels map onto :mod:`logging`: ``[TRC]`` = :data:`TRACE` (5, ``-V``), ``[DBG]`` = DEBUG
(``-D``), ``[INF]``, ``[WRN]``, ``[ERR]``, ``[FTL]``. Connection-scoped lines are prefixed with
``<ip>:<port> - cid:<n> - `` exactly as the reference does. The in-process server (tests) only
logs through the ``natsd`` logger; :func:`setup_logging` installs the handler for ``main``.
"""

from __future__ import annotations

import logging
import os
import sys
import time

__all__ = ["TRACE", "logger", "setup_logging", "reopen_log_file", "NatsFormatter"]

TRACE = 5
logging.addLevelName(TRACE, "TRC")

logger = logging.getLogger("natsd")

_LEVEL_TAGS = {TRACE: "TRC", logging.DEBUG: "DBG", logging.INFO: "INF", logging.WARNING: "WRN",
               logging.ERROR: "ERR", logging.CRITICAL: "FTL"}


class NatsFormatter(logging.Formatter):
    """``[pid] YYYY/MM/DD HH:MM:SS.ffffff [LVL] message`` (``logtime=False`` drops the time)."""

    def __init__(self, logtime: bool = True) -> None:
        super().__init__()
        self.logtime = logtime
        self.pid = os.getpid()

    def format(self, record: logging.LogRecord) -> str:
        tag = _LEVEL_TAGS.get(record.levelno, record.levelname[:3])
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        if not self.logtime:
            return f"[{self.pid}] [{tag}] {msg}"
        t = record.created
        us = int((t - int(t)) * 1_000_000)
        return f"[{self.pid}] {time.strftime('%Y/%m/%d %H:%M:%S', time.localtime(t))}.{us:06d} [{tag}] {msg}"


def setup_logging(debug: bool = False, trace: bool = False, logtime: bool = True, log_file: str = "") -> None:
    """Install the nats-style handler on the ``natsd`` logger (stderr or ``log_file``)."""
    handler: logging.Handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(NatsFormatter(logtime))
    for h in list(logger.handlers):
        logger.removeHandler(h)
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(TRACE if trace else logging.DEBUG if debug else logging.INFO)


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
