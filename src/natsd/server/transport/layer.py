"""A transport layer: the base of the TLS and WebSocket wrappers.

A layer sits between a lower transport (the socket's, or another layer) and an upper protocol
(:class:`~natsd.server.connection.ClientConnection`, or another layer)::

    socket transport  <->  TlsLayer  <->  WebSocketLayer  <->  ClientConnection

To the lower transport it is an ``asyncio.Protocol``; to the upper protocol it is the transport
(``write``/``close``/``abort``/``pause_reading``/...). Subclasses transform ``data_received``
input before handing it up and ``write`` output before handing it down; everything else (flow
control, extra info, closing) is passed through here. The upper protocol therefore needs no
knowledge of TLS or WebSocket: the NATS parser and the write coalescing stay exactly as on a plain
TCP connection.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable, cast

__all__ = ["Layer"]


class Layer(asyncio.Protocol):
    """Pass-through layer; subclasses override ``data_received`` and ``write``."""

    __slots__ = ("lower", "upper", "_closing")

    def __init__(self) -> None:
        self.lower: asyncio.Transport | None = None
        self.upper: asyncio.Protocol | None = None
        self._closing = False

    # -- as a protocol of the lower transport -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.lower = cast(asyncio.Transport, transport)  # a stream connection's

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        up = self.upper
        if up is not None:
            self.upper = None
            up.connection_lost(exc)

    def eof_received(self) -> bool | None:
        if self.upper is not None:
            return self.upper.eof_received()
        return False

    def pause_writing(self) -> None:
        if self.upper is not None:
            self.upper.pause_writing()

    def resume_writing(self) -> None:
        if self.upper is not None:
            self.upper.resume_writing()

    def start_upper(self, upper: asyncio.Protocol) -> None:
        """Attach the protocol above and tell it the connection is made (with us as transport)."""
        self.upper = upper
        upper.connection_made(self)  # type: ignore[arg-type]  # a Layer is a transport by duck typing

    # -- as the transport of the upper protocol -------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:  # pragma: no cover - every layer overrides it
        lower = self.lower
        assert lower is not None  # set by connection_made()
        lower.write(data)

    def writelines(self, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
        self.write(b"".join(chunks))

    def is_closing(self) -> bool:
        return self._closing or self.lower is None or self.lower.is_closing()

    def close(self) -> None:
        self._closing = True
        if self.lower is not None:
            self.lower.close()

    def abort(self) -> None:
        self._closing = True
        if self.lower is not None:
            self.lower.abort()

    def get_write_buffer_size(self) -> int:
        return self.lower.get_write_buffer_size() if self.lower is not None else 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if self.lower is not None:
            self.lower.set_write_buffer_limits(high=high, low=low)

    def pause_reading(self) -> None:
        if self.lower is not None and not self.lower.is_closing():
            self.lower.pause_reading()

    def resume_reading(self) -> None:
        if self.lower is not None and not self.lower.is_closing():
            self.lower.resume_reading()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.lower.get_extra_info(name, default) if self.lower is not None else default

    def can_write_eof(self) -> bool:
        return False
