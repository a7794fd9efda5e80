"""The consumer's own copies of helpers that exist elsewhere in natsd too: random names and
nuids, Go duration parsing (the ``-NAK 2s`` form), lenient integers of ack tokens, header
lookup (``find_header``: :func:`natsd.protocol.headers.get_header`, case-sensitive as nats-server).

They are kept together here, unchanged, so that replacing them by the shared helpers (issue 11,
item 4) is an edit of this one module and its importers' import lines.
"""

from __future__ import annotations

import random
import re

from natsd.jetstream.consumer_config import MS
from natsd.jetstream.models import JS_API_LEVEL
from natsd.protocol.headers import get_header as find_header

__all__ = ["create_consumer_name", "rand4", "nuid", "parse_go_duration", "num", "find_header",
           "required_level_too_high"]

_NAME_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def create_consumer_name() -> str:
    """An 8-character random name for legacy ephemerals (as the reference's)."""
    return "".join(random.choice(_NAME_ALPHABET) for _ in range(8))


def rand4() -> str:
    return "".join(random.choice(_NAME_ALPHABET) for _ in range(4))


def nuid() -> str:
    return "".join(random.choice(_NAME_ALPHABET) for _ in range(22))


_UNITS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": MS, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(s: str) -> int | None:
    """Go's time.ParseDuration for the ``-NAK 2s`` form; None when invalid."""
    s = s.strip()
    if not s:
        return None
    sign = 1
    if s[0] in "+-":
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return 0
    total = 0.0
    pos = 0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        return None
    return sign * int(total)


def num(tok: str) -> int:
    """An ack subject's number token; a bad one counts as 0, as the reference."""
    try:
        return int(tok)
    except ValueError:
        return 0


def required_level_too_high(hdr: bytes) -> bool:
    """``Nats-Required-Api-Level: N`` above the level we implement (the reference answers 412)."""
    v = find_header(hdr, "Nats-Required-Api-Level")
    if v is None:
        return False
    try:
        return int(v) > JS_API_LEVEL
    except ValueError:
        return True
