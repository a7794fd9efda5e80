"""Pull requests (``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``) and the consumer's queue of
waiting requests.

A request body is empty (batch 1, no expiry), a bare integer (the batch size) or the JSON
``{"batch", "expires", "no_wait", "max_bytes", "idle_heartbeat", ...}`` (JSApiConsumerGetNextRequest,
durations in ns). :func:`parse_next_request` turns it into a :class:`PullRequest`;
:class:`~natsd.jetstream.waitqueue.WaitQueue` keeps them, bounded by ``max_waiting``, and hands
messages out round-robin one at a time, as nats-server's ``waitQueue.pop``.
"""

from __future__ import annotations

from natsd.jetstream import gojson
from natsd.jetstream.requests import CONSUMER_GET_NEXT_REQUEST
from natsd.jetstream.waitqueue import WaitQueue

__all__ = ["PullRequest", "WaitQueue", "parse_next_request", "BadRequest"]


class BadRequest(ValueError):
    """The body is not a valid request; the text goes after ``400 Bad Request - ``."""


class PullRequest:
    """One waiting pull request. Times are monotonic ns (0 = none)."""

    __slots__ = ("reply", "n", "d", "b", "expires", "hb", "hbt", "no_wait", "received", "gone")

    def __init__(self, reply: str, batch: int, max_bytes: int, expires: int, hb: int,
                 no_wait: bool, now: int) -> None:
        self.reply = reply
        self.n = batch          # messages still wanted
        self.d = 0              # messages delivered so far
        self.b = max_bytes      # byte budget left (0 = unlimited)
        self.expires = expires  # monotonic deadline, 0 = never
        self.hb = hb            # idle heartbeat interval (ns), 0 = none
        self.hbt = now + hb if hb else 0
        self.no_wait = no_wait
        self.received = now
        self.gone = True        # not (or no longer) in a WaitQueue

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"PullRequest({self.reply!r}, n={self.n}, d={self.d}, b={self.b}, exp={self.expires})"


def parse_next_request(body: bytes) -> tuple[int, int, int, bool, int]:
    """``(batch, expires_ns, max_bytes, no_wait, idle_heartbeat_ns)`` of a MSG.NEXT body.

    Raises :class:`BadRequest` for invalid JSON or a heartbeat larger than half the expiry
    (the reference's "heartbeat value too large"). Anything that is neither JSON nor an integer
    counts as batch 1, as the reference."""
    req = body.strip()
    if not req:
        return 1, 0, 0, False, 0
    if req[:1] == b"{":
        try:
            cr = gojson.decode(req, CONSUMER_GET_NEXT_REQUEST, strict=False)
        except gojson.GoError as e:
            raise BadRequest(str(e)) from None
        batch = cr.get("batch", 0)
        expires = cr.get("expires", 0)
        max_bytes = cr.get("max_bytes", 0)
        hb = cr.get("idle_heartbeat", 0)
        no_wait = cr.get("no_wait", False)
        if hb > 0 and hb * 2 > expires:
            raise BadRequest("heartbeat value too large")
        return batch, expires, max_bytes, no_wait, hb
    try:
        return int(req), 0, 0, False, 0
    except ValueError:
        return 1, 0, 0, False, 0
