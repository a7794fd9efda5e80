"""Server-to-client protocol lines, byte for byte as nats-server writes them.

Layouts (``\\r\\n`` = CRLF; ``[reply ]`` present only when the message has a reply subject)::

    INFO <json>\\r\\n                      compact JSON, no spaces (Go's encoding/json style)
    MSG <subject> <sid> [reply ]<size>\\r\\n<payload>\\r\\n
    HMSG <subject> <sid> [reply ]<hdr_size> <total_size>\\r\\n<headers><payload>\\r\\n
    +OK\\r\\n
    -ERR '<text>'\\r\\n                    always single-quoted: nats-py only parses the quoted form
    PING\\r\\n / PONG\\r\\n

The server's hot path builds MSG/HMSG heads itself from pre-computed pieces (see
``natsd.server.router``) to avoid per-subscriber allocations; these functions are the
reference encoding it must agree with (the unit tests check both against the parser).
"""

from __future__ import annotations

import json

from natsd.protocol.errors import LocalProtocolError

__all__ = ["OK", "PING", "PONG", "CRLF", "encode_info", "encode_err", "encode_msg", "encode_hmsg",
           "msg_head", "hmsg_head"]

OK = b"+OK\r\n"
PING = b"PING\r\n"
PONG = b"PONG\r\n"
CRLF = b"\r\n"


def encode_info(info: dict) -> bytes:
    """``INFO {json}\\r\\n`` with compact separators; ``>``/``<``/``&`` escaped like Go does."""
    body = json.dumps(info, separators=(",", ":"))
    # Go's encoding/json escapes these three for HTML safety; keep INFO byte-compatible.
    body = body.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return b"INFO " + body.encode() + b" \r\n"


def encode_err(text: str) -> bytes:
    """``-ERR '<text>'\\r\\n``; the text must fit on one line."""
    if "\r" in text or "\n" in text:
        raise LocalProtocolError(None, "-ERR text must be a single line")
    return b"-ERR '" + text.encode() + b"'\r\n"


def msg_head(subject: bytes, sid: bytes, reply: bytes, size: int) -> bytes:
    """The control line of a MSG, CRLF included."""
    if reply:
        return b"MSG %s %s %s %d\r\n" % (subject, sid, reply, size)
    return b"MSG %s %s %d\r\n" % (subject, sid, size)


def hmsg_head(subject: bytes, sid: bytes, reply: bytes, hdr_size: int, total_size: int) -> bytes:
    """The control line of an HMSG, CRLF included."""
    if reply:
        return b"HMSG %s %s %s %d %d\r\n" % (subject, sid, reply, hdr_size, total_size)
    return b"HMSG %s %s %d %d\r\n" % (subject, sid, hdr_size, total_size)


def encode_msg(subject: bytes, sid: bytes, reply: bytes, payload: bytes) -> bytes:
    """A complete MSG (control line, payload, CRLF)."""
    return msg_head(subject, sid, reply, len(payload)) + payload + CRLF


def encode_hmsg(subject: bytes, sid: bytes, reply: bytes, hdr: bytes, payload: bytes) -> bytes:
    """A complete HMSG; ``hdr`` is the full header block ending in a blank line."""
    return hmsg_head(subject, sid, reply, len(hdr), len(hdr) + len(payload)) + hdr + payload + CRLF
