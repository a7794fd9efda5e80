"""Server-to-client protocol lines, byte for byte as nats-server writes them.

Layouts (``\\r\\n`` = CRLF; ``[reply ]`` present only when the message has a reply subject)::

    INFO <json>\\r\\n                      compact JSON, no spaces (Go's encoding/json style)
    MSG <subject> <sid> [reply ]<size>\\r\\n<payload>\\r\\n
    HMSG <subject> <sid> [reply ]<hdr_size> <total_size>\\r\\n<headers><payload>\\r\\n
    +OK\\r\\n
    -ERR '<text>'\\r\\n                    always single-quoted: nats-py only parses the quoted form
    PING\\r\\n / PONG\\r\\n

The server frames every MSG/HMSG with the functions below (``natsd.server.writer`` queues the
bytes). A message to several receivers is framed from pieces shared by all of them, so each
receiver costs in-place appends and no allocation (:func:`msg_parts`)::

    head = b"MSG <subject> "          mid = b" [<reply> ]<size>\\r\\n"
    HMSG: head = b"HMSG <subject> "   mid = b" [<reply> ]<hdr_size> <total_size>\\r\\n"
    frame = head + <sid> + mid + <data> + CRLF

A run of messages with one control line (:func:`append_run`) is ``prefix`` and ``CRLF + prefix``
joined between the payloads; a consumer's batch (:func:`append_msgs`) is one ``%``-format per
message. Both append to the caller's ``bytearray``: measured, that is cheaper than returning
the joined bytes (one copy fewer) and cheaper than one ``b"".join`` of interleaved parts.
"""

from __future__ import annotations

import json

from natsd.protocol.errors import LocalProtocolError

__all__ = [
    "OK",
    "PING",
    "PONG",
    "CRLF",
    "encode_info",
    "encode_err",
    "encode_msg",
    "encode_hmsg",
    "msg_head",
    "hmsg_head",
    "msg_parts",
    "msg_prefix",
    "append_run",
    "msg_pieces",
    "append_msgs",
]

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
    """A complete MSG (control line, payload, CRLF), one format call."""
    if reply:
        return b"MSG %s %s %s %d\r\n%s\r\n" % (subject, sid, reply, len(payload), payload)
    return b"MSG %s %s %d\r\n%s\r\n" % (subject, sid, len(payload), payload)


def encode_hmsg(subject: bytes, sid: bytes, reply: bytes, hdr: bytes, payload: bytes) -> bytes:
    """A complete HMSG; ``hdr`` is the full header block ending in a blank line."""
    hl = len(hdr)
    if reply:
        return b"HMSG %s %s %s %d %d\r\n%s%s\r\n" % (subject, sid, reply, hl, hl + len(payload), hdr, payload)
    return b"HMSG %s %s %d %d\r\n%s%s\r\n" % (subject, sid, hl, hl + len(payload), hdr, payload)


# Precomputed `` <size>\r\n`` suffixes of msg_parts, per size (publishers repeat a few sizes).
# Bounded: cleared when full. The ``head`` is not cached on purpose: it is a new object per
# message, and a leafnode link (natsd.server.leaf.node) recognises one message routed to several
# of its queue subscriptions by that identity.
_SIZE_MIDS: dict[int, bytes] = {}
_PIECES_MAX = 1024


def msg_parts(subject: bytes, reply: bytes, hdr_len: int, size: int) -> tuple[bytes, bytes]:
    """``(head, mid)`` of a message's control line without the sid (see the module docstring):
    ``head + sid + mid`` is the line of each receiver. ``hdr_len`` > 0 makes it an HMSG whose
    ``size`` counts header and payload; ``reply`` ``b""`` means none. ``head`` is a new object
    on every call (see above)."""
    if hdr_len:
        head = b"HMSG " + subject + b" "
        return head, b" %s %d %d\r\n" % (reply, hdr_len, size) if reply else b" %d %d\r\n" % (hdr_len, size)
    head = b"MSG " + subject + b" "
    if reply:
        return head, b" %s %d\r\n" % (reply, size)
    mid = _SIZE_MIDS.get(size)
    if mid is None:
        if len(_SIZE_MIDS) >= _PIECES_MAX:
            _SIZE_MIDS.clear()
        mid = _SIZE_MIDS[size] = b" %d\r\n" % size
    return head, mid


def msg_prefix(subject: bytes, sid: bytes, reply: bytes, hdr_len: int, size: int) -> bytes:
    """The whole control line (CRLF included) of a MSG (``hdr_len`` 0) or HMSG."""
    if hdr_len:
        return hmsg_head(subject, sid, reply, hdr_len, size)
    return msg_head(subject, sid, reply, size)


def append_run(out: bytearray, prefix: bytes, payloads: list) -> None:
    """Append one frame per payload, all with the control line ``prefix`` (:func:`msg_prefix`):
    byte-identical to appending ``prefix + payload + CRLF`` for each, with one join."""
    out += prefix
    out += (CRLF + prefix).join(payloads)
    out += CRLF


def msg_pieces(sid: bytes, subjects, replies, payloads) -> tuple:
    """``(pieces, nbytes)``: the frames of header-less messages to subscription ``sid``, message
    ``i`` to ``subjects[i]`` with reply ``replies[i]`` (``replies`` None: no reply), as
    ``b"".join(pieces)`` writes them, byte-identical to :func:`msg_head` + payload + CRLF each;
    ``nbytes`` is the payload bytes.

    When every payload has one size (a publisher's usual run) the pieces are the subjects,
    replies and payloads themselves between shared separators (``CRLF + "MSG "``, ``" <sid> "``,
    ``" <size>\r\n"``), laid out by slice assignment: nothing is formatted per message. Else one
    ``%``-format per message (in C, through ``map``)."""
    k = len(payloads)
    sizes = list(map(len, payloads))
    nbytes = sum(sizes)
    if sizes.count(sizes[0]) == k:
        tail = b" %d\r\n" % sizes[0]
        w = 4 if replies is None else 6
        parts = [b"\r\nMSG "] * (w * k + 1)
        parts[0] = b"MSG "
        parts[w * k] = CRLF
        parts[1::w] = subjects
        if replies is None:
            parts[2::w] = [b" " + sid + tail] * k
        else:
            parts[2::w] = [b" " + sid + b" "] * k
            parts[3::w] = replies
            parts[4::w] = [tail] * k
        parts[w - 1 :: w] = payloads
        return parts, nbytes
    sid = sid.replace(b"%", b"%%")
    if replies is None:
        return map((b"MSG %s " + sid + b" %d\r\n%s\r\n").__mod__, zip(subjects, sizes, payloads)), nbytes
    return map((b"MSG %s " + sid + b" %s %d\r\n%s\r\n").__mod__, zip(subjects, replies, sizes, payloads)), nbytes


def append_templated(out: bytearray, sid: bytes, subjects, reply_fmt: bytes, cols, payloads) -> int:
    """Append one ``MSG <subject> <sid> <reply> <size>`` frame per payload, all to subscription
    ``sid``, where message ``i``'s reply is ``reply_fmt % (cols[0][i], cols[1][i], ...)``
    (``reply_fmt``: a ``%``-template whose literal ``%`` are escaped; every message has a reply
    and no headers); returns the payload bytes appended.

    Byte-identical to :func:`append_msgs` of ``(subject, reply, None, payload)`` items, but the
    reply is formatted inside each frame's single format (a JetStream consumer's run: the v1
    ack subject from its stream sequence, consumer sequence, time and pending count), and the
    run is built by C-level ``map``/``zip`` and appended with one join."""
    fmt = b"MSG %s " + sid.replace(b"%", b"%%") + b" " + reply_fmt + b" %d\r\n%s\r\n"
    sizes = list(map(len, payloads))
    out += b"".join(map(fmt.__mod__, zip(subjects, *cols, sizes, payloads)))
    return sum(sizes)


def append_msgs(out: bytearray, sid: bytes, items) -> int:
    """Append a MSG/HMSG per ``(subject, reply, hdr, payload)`` item (wire ``bytes``; ``reply``
    ``b""`` and ``hdr`` ``None``/``b""`` when absent), all to subscription ``sid``, in order;
    returns the payload bytes (headers included) appended."""
    nbytes = 0
    # The sid sits between subject and reply in every frame: part of the format (escaped).
    msg_fmt = b"MSG %s " + sid.replace(b"%", b"%%") + b" %s %d\r\n%s\r\n"
    for subject, reply, hdr, payload in items:
        if hdr:
            hl = len(hdr)
            size = hl + len(payload)
            if reply:
                out += b"HMSG %s %s %s %d %d\r\n%s%s\r\n" % (subject, sid, reply, hl, size, hdr, payload)
            else:
                out += b"HMSG %s %s %d %d\r\n%s%s\r\n" % (subject, sid, hl, size, hdr, payload)
        else:
            size = len(payload)
            if reply:
                out += msg_fmt % (subject, reply, size, payload)
            else:
                out += b"MSG %s %s %d\r\n%s\r\n" % (subject, sid, size, payload)
        nbytes += size
    return nbytes
