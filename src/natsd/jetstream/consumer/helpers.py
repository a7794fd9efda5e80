"""Small helpers of the consumer: random names for ephemerals, lenient integers of ack tokens,
the API level check, and the consumer's view of the shared helpers (nuids from
:mod:`natsd.nuid`, Go durations from :mod:`natsd.gotime`, header lookup from
:mod:`natsd.protocol.headers`, case-sensitive as nats-server's ``sliceHeader``).
"""

from __future__ import annotations

from natsd.gotime import parse_duration
from natsd.nuid import nuid
from natsd.protocol.headers import get_header as find_header

__all__ = ["create_consumer_name", "rand4", "nuid", "parse_go_duration", "num", "find_header", "MSG_NEXT_PREFIX"]

#: Pull requests go to <prefix><stream>.<consumer> (re-exported by consumer.pull).
MSG_NEXT_PREFIX = "$JS.API.CONSUMER.MSG.NEXT."

_NAME_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def create_consumer_name() -> str:
    """An 8-character random name for legacy ephemerals (as the reference's)."""
    import random  # (with the first ephemeral: a restart's first request does not load it, issue 31)

    return "".join(random.choice(_NAME_ALPHABET) for _ in range(8))


def rand4() -> str:
    import random  # (as above)

    return "".join(random.choice(_NAME_ALPHABET) for _ in range(4))


def parse_go_duration(s: str) -> int | None:
    """Go's time.ParseDuration for the ``-NAK 2s`` form (:func:`natsd.gotime.parse_duration`);
    None when invalid."""
    try:
        return parse_duration(s.strip())
    except ValueError:
        return None


def num(tok: str) -> int:
    """An ack subject's number token; a bad one counts as 0, as the reference."""
    try:
        return int(tok)
    except ValueError:
        return 0
