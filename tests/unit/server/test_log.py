"""nats-server style log lines."""

from __future__ import annotations

import logging
import os
import re

from natsd.server.log import TRACE, NatsFormatter


def record(level: int, msg: str) -> logging.LogRecord:
    return logging.LogRecord("natsd", level, __file__, 1, msg, (), None)


def test_line_format_and_level_tags():
    f = NatsFormatter()
    line = f.format(record(logging.INFO, "Server is ready"))
    assert re.fullmatch(rf"\[{os.getpid()}\] \d{{4}}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{{6}} \[INF\] Server is ready", line)
    tags = {
        lvl: f.format(record(lvl, "x")).split(" ")[3]
        for lvl in (TRACE, logging.DEBUG, logging.WARNING, logging.ERROR, logging.CRITICAL)
    }
    assert tags == {
        TRACE: "[TRC]",
        logging.DEBUG: "[DBG]",
        logging.WARNING: "[WRN]",
        logging.ERROR: "[ERR]",
        logging.CRITICAL: "[FTL]",
    }
    assert NatsFormatter(logtime=False).format(record(logging.INFO, "x")) == f"[{os.getpid()}] [INF] x"
