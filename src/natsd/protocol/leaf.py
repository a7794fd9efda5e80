"""Sans-IO parser and encoder for the leafnode protocol (server <-> server), as nats-server speaks it.

A leafnode link is one TCP connection between two servers. The accepting side (the "hub" port,
``leafnodes { port }``) sends INFO first; the soliciting side (a ``leafnodes { remotes }`` entry)
answers with CONNECT. After that both sides speak the same verbs (``\\r\\n`` = CRLF)::

    INFO <json>                                server info; a second one with "connect_info":true
                                               follows CONNECT when the first had "info_on_connect"
    CONNECT <json>                             name, server_id, domain, headers, jetstream,
                                               remote_account, user/pass or jwt/sig/nkey, ...
    LS+ <subject>                              interest in <subject> on the sender's side
    LS+ <subject> <queue> <weight>             queue interest; weight = members over there, re-sent
                                               on every change of the weight
    LS- <subject> [<queue>]                    interest gone
    LMSG <subject> [<reply>] <size>            a message (no sid: one account per link)
    LMSG <subject> + <reply> <q1> [<q2>..] <size>   ... for these queue groups only, with a reply
    LMSG <subject> | <q1> [<q2>..] <size>           ... for these queue groups only, no reply
    HMSG <subject> [...same forms...] <hdr_size> <total_size>   a message with headers
    PING / PONG / +OK / -ERR '<text>'

A message's payload (``size`` bytes, headers first for HMSG) follows its line, then CRLF. A plain
LMSG (no queue list) goes to plain subscriptions only; one with a queue list also goes to one
member of each named group. JetStream push deliveries cross with the delivery subject as
``<subject>`` and the stored message's subject appended to the reply after ``@``
(``$JS.ACK.<...8 dots...>@<subject>``); see :func:`split_js_ack_deliver`.

The loop-detection subscription is an ordinary ``LS+ $LDS.<unique>``: a server that receives its
own ``$LDS`` subject back knows the links form a cycle.

Events returned by :meth:`LeafParser.feed` (tuples, first item the op):

* ``(L_INFO, dict)``, ``(L_CONNECT, dict)``, ``(L_PING,)``, ``(L_PONG,)``, ``(L_OK,)``, ``(L_ERR, text)``
* ``(L_SUB, subject, queue|None, weight)`` and ``(L_UNSUB, subject, queue|None)``
* ``(L_MSG, subject, reply|b"", queues tuple, hdr_len, data)`` (``subject``/``reply``/queues are
  ``bytes``; ``data`` holds headers then payload; ``hdr_len`` is 0 for LMSG)
* ``(L_MSG_RUN, subject, reply, queues, hdr_len, [data, ...])``: consecutive frames of one feed
  with the very same control line (a publisher's burst: same subject, reply, queues and sizes),
  exactly the ``L_MSG`` events they stand for, in order

Errors raise :class:`~natsd.protocol.errors.RemoteProtocolError` (the parser is then failed);
events completed before the bad bytes are attached as ``err.events``.
"""

from __future__ import annotations

import json

from natsd.protocol.errors import ERR_MAX_CONTROL_LINE, ERR_MAX_PAYLOAD, ERR_UNKNOWN_PROTOCOL, RemoteProtocolError
from natsd.protocol.runs import run_length

__all__ = [
    "LeafParser",
    "L_INFO",
    "L_CONNECT",
    "L_PING",
    "L_PONG",
    "L_OK",
    "L_ERR",
    "L_SUB",
    "L_UNSUB",
    "L_MSG",
    "L_MSG_RUN",
    "encode_connect",
    "encode_ls_plus",
    "encode_ls_minus",
    "msg_line",
    "split_js_ack_deliver",
]

L_INFO, L_CONNECT, L_PING, L_PONG, L_OK, L_ERR, L_SUB, L_UNSUB, L_MSG, L_MSG_RUN = range(10)

_PING = (L_PING,)
_PONG = (L_PONG,)
_OKE = (L_OK,)
# Control lines of a link can be long (a CONNECT with a JWT, an INFO with many URLs).
DEFAULT_MAX_LINE = 64 * 1024


def _error(err: str | None, detail: str, events: list) -> RemoteProtocolError:
    e = RemoteProtocolError(err, detail)
    e.events = events
    return e


def _size(b: bytes) -> int:
    # Digits only (int() would accept "+5", " 5", "5_0").
    return int(b) if b.isdigit() else -1


class LeafParser:
    """Turns the bytes of a leafnode link into events (see the module docstring)."""

    __slots__ = ("max_line", "max_payload", "_buf", "_failed")

    def __init__(self, max_payload: int = 1024 * 1024, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.max_payload = max_payload
        self.max_line = max_line
        self._buf = b""
        self._failed = False

    def feed(self, data: bytes) -> list:
        if self._failed:
            raise RemoteProtocolError(None, "parser failed earlier")
        buf = self._buf + data if self._buf else bytes(data)
        events: list = []
        pos = 0
        n = len(buf)
        find = buf.find
        try:
            while pos < n:
                eol = find(b"\n", pos)
                if eol < 0:
                    if n - pos > self.max_line:
                        raise _error(ERR_MAX_CONTROL_LINE, "control line too long", events)
                    break
                line = buf[pos:eol]
                if line.endswith(b"\r"):
                    line = line[:-1]
                c = line[:1]
                if c in (b"L", b"l", b"H", b"h") and line[1:4].upper() == b"MSG":
                    args = line[4:].split()
                    if len(args) < 2:
                        raise _error(None, f"bad message line {line[:80]!r}", events)
                    hdr = c in (b"H", b"h")
                    ev, size = self._msg_args(args, hdr, events)
                    start = eol + 1
                    end = start + size
                    if end + 2 > n:
                        break  # payload not complete yet: keep the line too
                    if buf[end : end + 2] != b"\r\n":
                        raise _error(ERR_UNKNOWN_PROTOCOL, "message payload not followed by CRLF", events)
                    # A publisher's burst repeats this very line (subject, reply, queues, sizes):
                    # frames that start with the same bytes need no parsing, only their payload,
                    # and the burst is one L_MSG_RUN event (its length: natsd.protocol.runs).
                    head = buf[pos:start]
                    hl = start - pos
                    step = hl + size + 2
                    pos = end + 2
                    k = run_length(buf, pos, head, step, n) if pos + step <= n else 0
                    if k:
                        payloads = [buf[start:end]]
                        first = pos + hl
                        pos += k * step
                        payloads += [buf[i : i + size] for i in range(first, pos, step)]
                        events.append((L_MSG_RUN,) + ev[1:] + (payloads,))
                    else:
                        events.append(ev + (buf[start:end],))
                    continue
                pos = eol + 1
                self._control(line, events)
        except RemoteProtocolError:
            self._failed = True
            self._buf = b""
            raise
        self._buf = buf[pos:] if pos < n else b""
        return events

    def _msg_args(self, args: list, hdr: bool, events: list) -> tuple[tuple, int]:
        subject = args[0]
        nsize = 2 if hdr else 1
        if len(args) < 1 + nsize:
            raise _error(None, "message line without size", events)
        sizes = args[-nsize:]
        mid = args[1:-nsize]
        reply = b""
        queues: tuple = ()
        if mid:
            ind = mid[0]
            if ind == b"+" and len(mid) >= 2:
                reply = mid[1]
                queues = tuple(mid[2:])
            elif ind == b"|":
                queues = tuple(mid[1:])
            elif len(mid) == 1:
                reply = ind
            else:
                raise _error(None, f"bad reply indicator {ind!r}", events)
        size = _size(sizes[-1])
        hdr_len = _size(sizes[0]) if hdr else 0
        if size < 0 or hdr_len < 0 or hdr_len > size:
            raise _error(None, "bad message size", events)
        if size > self.max_payload:
            raise _error(ERR_MAX_PAYLOAD, f"message of {size} bytes", events)
        return (L_MSG, subject, reply, queues, hdr_len), size

    def _control(self, line: bytes, events: list) -> None:
        head, _, rest = line.partition(b" ")
        op = head.upper()
        if op == b"LS+":
            a = rest.split()
            if len(a) == 1:
                events.append((L_SUB, a[0], None, 1))
            elif len(a) == 3 and _size(a[2]) >= 0:
                events.append((L_SUB, a[0], a[1], _size(a[2])))
            else:
                raise _error(None, f"LS+ parse error {line[:80]!r}", events)
        elif op == b"LS-":
            a = rest.split()
            if len(a) == 1:
                events.append((L_UNSUB, a[0], None))
            elif len(a) >= 2:  # "LS- subject queue" (a trailing weight is tolerated)
                events.append((L_UNSUB, a[0], a[1]))
            else:
                raise _error(None, f"LS- parse error {line[:80]!r}", events)
        elif op == b"PING":
            events.append(_PING)
        elif op == b"PONG":
            events.append(_PONG)
        elif op in (b"INFO", b"CONNECT"):
            try:
                d = json.loads(rest)
            except ValueError:
                raise _error(None, f"malformed {op.decode()} JSON", events) from None
            if not isinstance(d, dict):
                raise _error(None, f"malformed {op.decode()} JSON", events)
            events.append((L_INFO if op == b"INFO" else L_CONNECT, d))
        elif op == b"+OK":
            events.append(_OKE)
        elif op == b"-ERR":
            text = rest.decode("utf-8", "replace").strip()
            if len(text) >= 2 and text[0] == "'" and text[-1] == "'":
                text = text[1:-1]
            events.append((L_ERR, text))
        elif not line.strip():
            return  # an empty line between operations: harmless
        else:
            raise _error(ERR_UNKNOWN_PROTOCOL, f"unknown operation {line[:40]!r}", events)


# -- encoder --------------------------------------------------------------------------------------


def encode_connect(d: dict) -> bytes:
    """``CONNECT <json>\\r\\n`` (compact JSON)."""
    return b"CONNECT " + json.dumps(d, separators=(",", ":")).encode() + b"\r\n"


def encode_ls_plus(subject: str, queue: str | None = None, weight: int = 1) -> bytes:
    if queue:
        return b"LS+ %s %s %d\r\n" % (subject.encode(), queue.encode(), weight)
    return b"LS+ " + subject.encode() + b"\r\n"


def encode_ls_minus(subject: str, queue: str | None = None) -> bytes:
    if queue:
        return b"LS- %s %s\r\n" % (subject.encode(), queue.encode())
    return b"LS- " + subject.encode() + b"\r\n"


def msg_line(subject: bytes, reply: bytes, queues: tuple | list, hdr_len: int, size: int) -> bytes:
    """The control line (with CRLF) of one LMSG/HMSG; the payload and CRLF follow it."""
    if queues:
        q = b" ".join(queues)
        mid = b"+ " + reply + b" " + q if reply else b"| " + q
        if hdr_len:
            return b"HMSG %s %s %d %d\r\n" % (subject, mid, hdr_len, size)
        return b"LMSG %s %s %d\r\n" % (subject, mid, size)
    if hdr_len:
        if reply:
            return b"HMSG %s %s %d %d\r\n" % (subject, reply, hdr_len, size)
        return b"HMSG %s %d %d\r\n" % (subject, hdr_len, size)
    if reply:
        return b"LMSG %s %s %d\r\n" % (subject, reply, size)
    return b"LMSG %s %d\r\n" % (subject, size)


_JS_ACK = b"$JS.ACK."


def split_js_ack_deliver(reply: bytes) -> tuple[bytes, bytes]:
    """``(reply, shown_subject)`` for a JetStream delivery's ``$JS.ACK.<8 dots>@<subject>`` reply;
    ``(reply, b"")`` when the reply has no such suffix."""
    if not reply.startswith(_JS_ACK):
        return reply, b""
    dots = 0
    for i, ch in enumerate(reply):
        if ch == 46:  # '.'
            dots += 1
        elif ch == 64 and dots >= 8:  # '@'
            if i < len(reply) - 1:
                return reply[:i], reply[i + 1 :]
            return reply, b""
    return reply, b""
