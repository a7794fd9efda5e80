"""Protocol errors and the exact ``-ERR`` texts nats-server 2.15.1 sends.

Every text below was observed by sending raw bytes to the reference binary (see
``tests/integration/test_raw_protocol.py``, which checks ours byte for byte). The reference is
not consistent about capitalisation ("Maximum Payload Violation" but "maximum control line
exceeded"); we copy it exactly because clients match on these strings (nats-py lowercases and
looks for "stale connection", "authorization violation", "permissions violation").

Two families, as in h11: :class:`RemoteProtocolError` means the peer sent something illegal
(raised by the parser); :class:`LocalProtocolError` means *we* were asked to encode something
illegal (a bug on our side). A protocol error that carries ``err=None`` closes the connection
without an ``-ERR`` line: the reference does that for malformed argument lists (``PUB foo``,
``PUB foo -1``, ``CONNECT {bad json``), so we do too.
"""

from __future__ import annotations

__all__ = [
    "ProtocolError",
    "RemoteProtocolError",
    "LocalProtocolError",
    "ERR_UNKNOWN_PROTOCOL",
    "ERR_MAX_CONTROL_LINE",
    "ERR_MAX_PAYLOAD",
    "ERR_INVALID_SUBJECT",
    "ERR_INVALID_PUBLISH_SUBJECT",
    "ERR_AUTH_VIOLATION",
    "ERR_AUTH_TIMEOUT",
    "ERR_STALE_CONNECTION",
    "ERR_MAX_CONNECTIONS",
    "ERR_MAX_SUBSCRIPTIONS",
    "ERR_NO_RESPONDERS_REQUIRES_HEADERS",
    "ERR_INVALID_CLIENT_PROTOCOL",
    "ERR_SLOW_CONSUMER",
    "permissions_publish",
    "permissions_subscribe",
]

# --- texts sent inside -ERR '...' (verified against nats-server 2.15.1) -------------------------
ERR_UNKNOWN_PROTOCOL = "Unknown Protocol Operation"  # garbage op, "PUB\r\n", payload not ended by CRLF
ERR_MAX_CONTROL_LINE = "maximum control line exceeded"  # lowercase in the reference
ERR_MAX_PAYLOAD = "Maximum Payload Violation"
ERR_INVALID_SUBJECT = "Invalid Subject"  # SUB with a malformed subject; connection stays open
ERR_INVALID_PUBLISH_SUBJECT = "Invalid Publish Subject"  # PUB, pedantic only; connection stays open
ERR_AUTH_VIOLATION = "Authorization Violation"
ERR_AUTH_TIMEOUT = "Authentication Timeout"
ERR_STALE_CONNECTION = "Stale Connection"
ERR_MAX_CONNECTIONS = "maximum connections exceeded"
ERR_MAX_SUBSCRIPTIONS = "maximum subscriptions exceeded"  # connection stays open
ERR_NO_RESPONDERS_REQUIRES_HEADERS = "no responders requires headers support"
ERR_INVALID_CLIENT_PROTOCOL = "invalid client protocol"
# The reference closes a slow consumer *without* an -ERR (its buffer is already full); the text
# is kept for logs only.
ERR_SLOW_CONSUMER = "Slow Consumer"


def permissions_publish(subject: str) -> str:
    """``Permissions Violation for Publish to "<subject>"`` (connection stays open)."""
    return f'Permissions Violation for Publish to "{subject}"'


def permissions_subscribe(subject: str, queue: str | None = None) -> str:
    """``Permissions Violation for Subscription to "<subject>"`` (+ ``using queue "<q>"``)."""
    if queue:
        return f'Permissions Violation for Subscription to "{subject}" using queue "{queue}"'
    return f'Permissions Violation for Subscription to "{subject}"'


class ProtocolError(Exception):
    """A protocol-level failure.

    ``err`` is the text to send as ``-ERR '<err>'`` before closing, or ``None`` to close
    silently (as the reference does for malformed argument lists). ``detail`` is for logs.
    """

    def __init__(self, err: str | None, detail: str = "") -> None:
        super().__init__(detail or err or "protocol error")
        self.err = err
        self.detail = detail
        # Events parsed before the failure (set by the parser), to be processed before closing.
        self.events: list = []


class RemoteProtocolError(ProtocolError):
    """The peer violated the protocol; the connection must be closed."""


class LocalProtocolError(ProtocolError):
    """We were asked to produce something the protocol does not allow (a bug here)."""
