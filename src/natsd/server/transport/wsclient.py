"""The client side of WebSocket (RFC 6455), for leafnode remotes with a ``ws://``/``wss://`` URL.

:class:`WebSocketClientLayer` is a :class:`~natsd.server.transport.layer.Layer` driven by ``wsproto``
(sans-IO, the library natsd's WebSocket listener uses too): on connect it sends the HTTP upgrade
nats-server's leaf sends (``GET /leafnode`` -- the path tells the hub's WebSocket port that a
leafnode, not a client, is connecting; a path in the URL comes first: ``ws://hub/pre`` asks for
``/pre/leafnode`` -- with ``Host``, a random ``Sec-WebSocket-Key``, version 13 and, with the
remote's ``ws_compression``, ``permessage-deflate`` with no context takeover either way). Once the
hub answers ``101`` the leafnode protocol runs above it unchanged: each write of the link becomes
one binary frame (masked, as a client's must be), each received data frame's bytes go up as they
come (messages are not reassembled: the leaf parser takes a byte stream). ``wss://`` puts TLS
underneath, before the upgrade (the asyncio transport's, as nats-server does TLS first there).

S2 compression of the leaf link (:mod:`natsd.server.leaf.compress`) sits *beneath* the frames,
as nats-server does it: once negotiated, the frames (headers included) are what the S2 stream
carries (:meth:`WebSocketClientLayer.compress`).

A hub that refuses the upgrade (any status but 101, or a bad accept key: wsproto checks it)
or closes before it never gets a leaf link: ``on_failure`` tells the remote, which retries with
its backoff. Pings are answered; a close frame is answered and the connection closed.
"""

from __future__ import annotations

import asyncio
from typing import Callable, cast

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Message,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.extensions import Extension, PerMessageDeflate
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from natsd.server.transport.layer import Layer

__all__ = ["WebSocketClientLayer", "leaf_ws_target"]

LEAF_WS_PATH = "leafnode"  # nats-server's leafNodeWSPath


def leaf_ws_target(url_path: str) -> str:
    """The request target for a remote URL's path (``""`` -> ``/leafnode``)."""
    p = url_path.strip("/")
    return "/" + (f"{p}/{LEAF_WS_PATH}" if p else LEAF_WS_PATH)


class WebSocketClientLayer(Layer):
    """One outgoing WebSocket connection carrying a leafnode link (see the module docstring)."""

    __slots__ = (
        "_host",
        "_target",
        "_make_upper",
        "_on_failure",
        "_compress",
        "_ws",
        "_open",
        "ws_compressed",
        "_deflate",
        "_inflate",
    )

    def __init__(
        self,
        host: str,
        target: str,
        make_upper: Callable[[], asyncio.Protocol],
        on_failure: Callable[[str], None],
        *,
        compression: bool = False,
    ) -> None:
        super().__init__()
        self._host = host
        self._target = target
        self._make_upper = make_upper
        self._on_failure: Callable[[str], None] | None = on_failure
        self._compress = compression
        self._ws = WSConnection(ConnectionType.CLIENT)
        self._open = False
        self.ws_compressed = False  # permessage-deflate accepted by the hub
        self._deflate: Callable[[bytes], bytes] | None = None
        self._inflate: Callable[[bytes], bytes] | None = None

    def compress(self, deflate: Callable[[bytes], bytes], inflate: Callable[[bytes], bytes]) -> None:
        """From now on the bytes under the frames are an S2 stream both ways."""
        self._deflate = deflate
        self._inflate = inflate

    def _send(self, frame: bytes) -> None:
        if self.lower is not None:
            self.lower.write(frame if self._deflate is None else self._deflate(frame))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.lower = cast(asyncio.Transport, transport)  # a stream connection's
        extensions: list[Extension] = []
        if self._compress:
            extensions.append(PerMessageDeflate(client_no_context_takeover=True, server_no_context_takeover=True))
        self.lower.write(self._ws.send(Request(host=self._host, target=self._target, extensions=extensions)))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._open:
            self._closing = True
            self._fail(str(exc) if exc else "connection closed during the websocket upgrade")
            return
        super().connection_lost(exc)

    @property
    def failed(self) -> bool:
        """The upgrade failed (``on_failure`` was called)."""
        return self._on_failure is None and not self._open

    def _fail(self, why: str) -> None:
        cb, self._on_failure = self._on_failure, None
        if cb is not None:
            cb(why)

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        ws = self._ws
        try:
            if self._inflate is not None:
                data = self._inflate(data)
            ws.receive_data(data)
            pieces: list[bytes | bytearray] = []
            for ev in ws.events():
                if isinstance(ev, (BytesMessage, TextMessage)):
                    pieces.append(ev.data if isinstance(ev, BytesMessage) else ev.data.encode())
                elif isinstance(ev, AcceptConnection):
                    self._open = True
                    self.ws_compressed = any(isinstance(e, PerMessageDeflate) for e in ev.extensions)
                    self.start_upper(self._make_upper())
                elif isinstance(ev, (RejectConnection, RejectData)):
                    status = getattr(ev, "status_code", 0)
                    self._closing = True
                    self._fail(
                        f"invalid websocket connection (status {status})" if status else "invalid websocket connection"
                    )
                    super().close()
                    return
                elif isinstance(ev, Ping):
                    self._deliver(pieces)
                    pieces = []
                    self._send(ws.send(ev.response()))
                elif isinstance(ev, CloseConnection):
                    self._deliver(pieces)
                    try:
                        self._send(ws.send(ev.response()))
                    except LocalProtocolError:
                        pass
                    super().close()
                    return
            self._deliver(pieces)
        except (RemoteProtocolError, ValueError) as e:  # (ValueError: a CompressionError)
            self._closing = True
            if not self._open:
                self._fail(f"invalid websocket connection: {e}")
            super().abort()

    def _deliver(self, pieces: list) -> None:
        if pieces and self.upper is not None and not self._closing:
            self.upper.data_received(pieces[0] if len(pieces) == 1 else b"".join(pieces))

    # -- output -----------------------------------------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or not self._open:
            return
        self._send(self._ws.send(Message(data=bytes(data))))

    def close(self) -> None:
        if not self._closing and self._open:
            try:
                self._send(self._ws.send(CloseConnection(code=1000)))
            except LocalProtocolError:
                pass
        super().close()
