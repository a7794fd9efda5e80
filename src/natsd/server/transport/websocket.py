"""NATS over WebSocket (RFC 6455): the ``websocket {}`` listener.

:class:`WebSocketLayer` is a :class:`~natsd.server.transport.layer.Layer` driven by ``wsproto`` (sans-IO):
it answers the HTTP upgrade, then unwraps incoming frames into the byte stream the ordinary
:class:`~natsd.server.connection.ClientConnection` parses, and wraps each coalesced write of that
connection into one binary frame. The NATS parser and everything above it are the same as on the
TCP port; ``wss://`` puts a :class:`~natsd.server.transport.tls.TlsLayer` (TLS first) underneath.

Upgrade (as nats-server): ``GET`` with ``Upgrade: websocket``, ``Connection: Upgrade``,
``Sec-WebSocket-Key``, ``Sec-WebSocket-Version: 13``; otherwise ``400 Bad Request`` (``405`` for
another method). ``same_origin``/``allowed_origins`` check the ``Origin`` header (absent = allowed)
and answer ``403 Forbidden``. An ``X-Forwarded-For`` IP address becomes the client's IP (INFO
``client_ip``, /connz), as in nats-server. ``compression: true`` accepts ``permessage-deflate`` when offered.
With ``jwt_cookie: <name>`` the cookie of that name is read from the upgrade request and offered to
authentication as CONNECT's ``jwt`` when the client sends none (it takes effect once natsd has JWT
authentication).
The upgrade must complete within ``handshake_timeout``.
A request for ``.../leafnode`` is a leafnode connecting (what nats-server's leaf asks for, see
:mod:`natsd.server.transport.wsclient`): with a ``leafnodes { port }`` it becomes a leaf link
(:meth:`natsd.server.leaf.manager.LeafManager.ws_link`), else it is closed after the upgrade, as
nats-server does. A leaf link that negotiates S2 compresses the bytes under the frames
(:meth:`WebSocketLayer.compress`), as nats-server does.

Frames: text and binary frames both carry protocol bytes; pings are answered with pongs; a close
frame is echoed and the connection closed. When the server closes a connection it first sends a
close frame whose status follows nats-server's mapping of the close reason (1000 client closed,
1001 shutdown, 1002 protocol violation, 1008 auth/policy, 1009 max payload, ...), with the reason
text. Frames that break RFC 6455 (an unmasked client frame, a control frame over 125 bytes, a bad
opcode, invalid UTF-8 in a text frame) close that connection with wsproto's close code (1002 or
1007); a single frame longer than ``max_pending`` closes it with 1009. Messages are never held
whole: each received piece goes straight to the parser, which enforces ``max_payload``.
"""

from __future__ import annotations

import asyncio
import ipaddress
from http.cookies import CookieError, SimpleCookie
from typing import TYPE_CHECKING, Any, Callable, cast
from urllib.parse import urlsplit

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Message,
    Ping,
    Request,
    TextMessage,
)
from wsproto.extensions import Extension, PerMessageDeflate
from wsproto.utilities import RemoteProtocolError

from natsd.config.tls import WebsocketOptions
from natsd.server.transport.layer import Layer
from natsd.server.log import logger
from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Clock, Timer

__all__ = ["WebSocketLayer", "close_status", "check_origin"]

# nats-server's wsEnqueueCloseMessage: /connz close reason -> close status.
_STATUS_BY_REASON = {
    "Client Closed": 1000,
    "Authentication Timeout": 1008,
    "Authentication Failure": 1008,
    "Authorization Violation": 1008,
    "Slow Consumer (Pending Bytes)": 1008,
    "Slow Consumer (Write Deadline)": 1008,
    "Maximum Connections Exceeded": 1008,
    "Maximum Control Line Exceeded": 1008,
    "Maximum Subscriptions Exceeded": 1008,
    "Maximum Account Connections Exceeded": 1008,
    "Missing Account": 1008,
    "Authentication Expired": 1008,
    "Credentials Revoked": 1008,
    "TLS Handshake Failure": 1015,
    "Parse Error": 1002,
    "Protocol Violation": 1002,
    "Bad Client Protocol Version": 1002,
    "Maximum Payload Exceeded": 1009,
    "Server Shutdown": 1001,
    "Lame Duck Mode": 1001,
    "Write Error": 1006,
    "Read Error": 1006,
    "Stale Connection": 1006,
}
_MAX_CLOSE_REASON = 123  # a close frame's payload is at most 125 bytes, 2 of them the status


def close_status(reason: str) -> int:
    """The close status nats-server sends for a /connz close reason (1011 when unknown)."""
    return _STATUS_BY_REASON.get(reason, 1011)


def _host_port(scheme: str, hostport: str) -> tuple[str, str]:
    host, sep, port = hostport.rpartition(":")
    if not sep or "]" in port:
        host, port = hostport, ("443" if scheme == "https" else "80")
    return host.strip("[]").lower(), port


def check_origin(opts: WebsocketOptions, origin: str, host: str, secure: bool) -> str:
    """ "" when the upgrade's ``Origin`` is acceptable, else why not (nats-server's rules)."""
    if not opts.same_origin and not opts.allowed_origins:
        return ""
    if not origin:
        return ""  # non-browser clients send none; RFC 6455 1.6 says the check is moot then
    u = urlsplit(origin)
    if not u.scheme or not u.netloc:
        return f'parse "{origin}": invalid URI for request'
    oh, op = _host_port(u.scheme, u.netloc)
    if opts.same_origin:
        rh, rp = _host_port("https" if secure else "http", host)
        if (oh, op) != (rh, rp):
            return "not same origin"
    if opts.allowed_origins:
        for allowed in opts.allowed_origins:
            a = urlsplit(allowed)
            ah, ap = _host_port(a.scheme, a.netloc)
            if ah == oh and a.scheme == u.scheme and ap == op:
                return ""
        return "not in the allowed list"
    return ""


def _http_error(status: int, text: str) -> bytes:
    body = (text + "\n").encode()
    return (
        f"HTTP/1.1 {status} {text}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Sec-Websocket-Version: 13\r\nX-Content-Type-Options: nosniff\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


class _Upper(Protocol):
    """What the layer uses of the protocol above it (a ClientConnection) when it closes."""

    closed: bool
    close_reason: str

    def close(self, reason: str) -> None: ...


class WebSocketLayer(Layer):
    """Server side of one WebSocket connection (see the module docstring)."""

    __slots__ = (
        "_opts",
        "_make_upper",
        "_clock",
        "_ws",
        "_timer",
        "_secure",
        "_frame_bytes",
        "_max_frame",
        "info_overrides",
        "_open",
        "_forwarded_for",
        "_jwt_cookie",
        "_make_leaf",
        "_deflate",
        "_inflate",
        "ws_compressed",
        "_make_mqtt",
    )

    def __init__(
        self,
        opts: WebsocketOptions,
        make_upper: Callable[[], asyncio.Protocol],
        clock: "Clock",
        *,
        secure: bool,
        max_frame: int,
        info_overrides: dict,
        make_leaf: "Callable[[], asyncio.Protocol | None] | None" = None,
        make_mqtt: "Callable[[], asyncio.Protocol | None] | None" = None,
    ) -> None:
        super().__init__()
        # MQTT over WebSocket: ".../mqtt" (nats-server's mqttWSPath), when the server has an mqtt port.
        self._make_mqtt = make_mqtt
        self._opts = opts
        self._make_upper = make_upper
        self._clock = clock
        self._ws = WSConnection(ConnectionType.SERVER)
        self._timer: Timer | None = None
        self._secure = secure
        self._frame_bytes = 0
        self._max_frame = max_frame
        # INFO fields that differ from the TCP port's (read by Server.info_for).
        self.info_overrides = info_overrides
        self._open = False
        self._forwarded_for = ""  # X-Forwarded-For of the upgrade request, when it is an IP address
        self._jwt_cookie = ""  # the `jwt_cookie` cookie's value, offered as CONNECT's jwt
        # A leafnode asks for ".../leafnode" (natsd.server.transport.wsclient); its link may compress the
        # bytes under the frames (compress()), as nats-server does.
        self._make_leaf = make_leaf
        self._deflate: Callable[[bytes], bytes] | None = None
        self._inflate: Callable[[bytes], bytes] | None = None
        self.ws_compressed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.lower = cast(asyncio.Transport, transport)  # a stream connection's
        if self._opts.handshake_timeout_ns > 0:
            self._timer = self._clock.call_later(self._opts.handshake_timeout_ns, self._handshake_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().connection_lost(exc)

    def _handshake_timeout(self) -> None:
        self._timer = None
        if not self._open:
            logger.debug("websocket handshake error: timeout")
            self.abort()

    # -- input ------------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        ws = self._ws
        try:
            if self._inflate is not None:
                data = self._inflate(data)
            ws.receive_data(data)
        except ValueError as e:  # a CompressionError of a leaf link's S2 stream
            logger.debug("websocket leafnode decompression error: %s", e)
            self._shutdown_upper("Protocol Violation")
            self._close_lower()
            return
        except RemoteProtocolError as e:
            self._reject_http(400 if "method" not in str(e).lower() else 405, str(e))
            return
        pieces: list[bytes | bytearray] = []
        for ev in ws.events():
            if isinstance(ev, BytesMessage) or isinstance(ev, TextMessage):
                d = ev.data if isinstance(ev, BytesMessage) else ev.data.encode()
                size = self._frame_bytes + len(d)
                if size > self._max_frame:
                    self._deliver(pieces)
                    self._protocol_close(1009, "frame too big")
                    return
                self._frame_bytes = 0 if ev.frame_finished else size
                pieces.append(d)
            elif isinstance(ev, Request):
                self._upgrade(ev)
                if self._closing:
                    return
            elif isinstance(ev, Ping):
                self._deliver(pieces)
                pieces = []
                self._send(ws.send(ev.response()))
            elif isinstance(ev, CloseConnection):
                self._deliver(pieces)
                self._remote_close(ev)
                return
        self._deliver(pieces)

    def _deliver(self, pieces: list) -> None:
        if pieces and self.upper is not None and not self._closing:
            self.upper.data_received(pieces[0] if len(pieces) == 1 else b"".join(pieces))

    def _upgrade(self, req: Request) -> None:
        headers = {k.lower(): v for k, v in req.extra_headers}
        origin = (headers.get(b"origin") or headers.get(b"sec-websocket-origin") or b"").decode("latin-1")
        why = check_origin(self._opts, origin, req.host, self._secure)
        if why:
            logger.debug("websocket handshake error: origin not allowed: %s", why)
            lower = self.lower
            assert lower is not None  # set by connection_made()
            lower.write(_http_error(403, "Forbidden"))
            self.close()
            return
        xff = headers.get(b"x-forwarded-for", b"").decode("latin-1").split(",")[0].strip()
        if xff:
            try:
                ipaddress.ip_address(xff)
                self._forwarded_for = xff  # a proxy in front: the client is who it says (as nats-server)
            except ValueError:
                pass
        if self._opts.jwt_cookie and b"cookie" in headers:
            jar = SimpleCookie()
            try:
                jar.load(headers[b"cookie"].decode("latin-1"))
            except CookieError:
                jar = SimpleCookie()
            if self._opts.jwt_cookie in jar:
                self._jwt_cookie = jar[self._opts.jwt_cookie].value
        extensions: list[Extension] = []
        if self._opts.compression and any(
            isinstance(e, str) and e.split(";")[0].strip().lower() == "permessage-deflate" for e in req.extensions
        ):
            extensions.append(PerMessageDeflate(client_no_context_takeover=True, server_no_context_takeover=True))
        upper: asyncio.Protocol | None
        subprotocol = None
        path = req.target.split("?")[0].rstrip("/")
        mqtt = self._make_mqtt() if path.endswith("/mqtt") and self._make_mqtt is not None else None
        if mqtt is not None:
            upper = mqtt
            # MQTT clients ask for the "mqtt" subprotocol and expect it back (as nats-server answers)
            subprotocol = "mqtt" if "mqtt" in req.subprotocols else None
        elif req.target.split("?")[0].rstrip("/").endswith("/leafnode") and self._make_leaf is not None:
            # A leafnode connection (nats-server's leafNodeWSPath), made after the upgrade as
            # there: a server without a leafnodes port refuses it once the upgrade is done.
            upper = None
        else:
            upper = self._make_upper()
        lower = self.lower
        assert lower is not None  # set by connection_made()
        lower.write(self._ws.send(AcceptConnection(extensions=extensions, subprotocol=subprotocol)))
        self.ws_compressed = bool(extensions)
        self._open = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if upper is None and self._make_leaf is not None:
            upper = self._make_leaf()
            if upper is None:
                self._close_lower()
                return
        assert upper is not None
        self.start_upper(upper)

    def _reject_http(self, status: int, why: str) -> None:
        logger.debug("websocket handshake error: %s", why)
        if not self._open:
            lower = self.lower
            assert lower is not None  # set by connection_made()
            lower.write(_http_error(status, "Bad Request" if status == 400 else "Method Not Allowed"))
        self.close()

    def _remote_close(self, ev: CloseConnection) -> None:
        # A close frame from the client is echoed; one made up by wsproto for a broken frame
        # (ParseFailed) carries the status we must send (1002, 1007).
        code = ev.code
        if code in (1002, 1007, 1009) and self._ws.state.name == "OPEN":
            self._protocol_close(code, ev.reason or "protocol error")
            return
        try:
            self._send(self._ws.send(ev.response()))
        except Exception:  # already closing on our side
            pass
        self._shutdown_upper("Client Closed")
        self._close_lower()

    def _protocol_close(self, code: int, reason: str) -> None:
        logger.debug("websocket protocol error: %s (%d)", reason, code)
        self._send_close(code, reason)
        self._shutdown_upper("Maximum Payload Exceeded" if code == 1009 else "Protocol Violation")
        self._close_lower()

    def _shutdown_upper(self, reason: str) -> None:
        up = cast("_Upper | None", self.upper)
        self._closing = True
        if up is not None and not up.closed:
            # The connection ends because of the frame layer: tell the protocol above with the
            # reason for /connz (it closes us back, a no-op now that _closing is set).
            up.close(reason)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "jwt_cookie":
            return self._jwt_cookie or default
        if name == "peername" and self._forwarded_for:
            peer = super().get_extra_info(name, default)
            return (self._forwarded_for, peer[1] if peer else 0)
        return super().get_extra_info(name, default)

    # -- output -----------------------------------------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or not self._open:
            return
        self._send(self._ws.send(Message(data=bytes(data))))

    def _send(self, frame: bytes) -> None:
        lower = self.lower
        assert lower is not None  # set by connection_made()
        lower.write(frame if self._deflate is None else self._deflate(frame))

    def compress(self, deflate: Callable[[bytes], bytes], inflate: Callable[[bytes], bytes]) -> None:
        """A leaf link negotiated S2: from now on the bytes under the frames are the S2 stream."""
        self._deflate = deflate
        self._inflate = inflate

    def _send_close(self, code: int, reason: str) -> None:
        if self._open and self._ws.state.name in ("OPEN", "REMOTE_CLOSING"):
            try:
                self._send(self._ws.send(CloseConnection(code=code, reason=reason[:_MAX_CLOSE_REASON])))
            except Exception:
                pass

    def _close_lower(self) -> None:
        self._closing = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.lower is not None:
            self.lower.close()

    def close(self) -> None:
        if not self._closing:
            up = cast("_Upper | None", self.upper)
            reason = (up.close_reason if up is not None else "") or "Client Closed"
            self._send_close(close_status(reason), reason)
        self._close_lower()

    def abort(self) -> None:
        # No close frame: aborting drops whatever is still buffered anyway.
        self._closing = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.lower is not None:
            self.lower.abort()
