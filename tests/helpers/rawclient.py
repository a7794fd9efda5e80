"""A raw-socket NATS client for protocol tests (in the style of nats-server's test/test.go).

    async with RawClient.connect(server.port) as c:   # reads the INFO line
        await c.send(b'CONNECT {"verbose":false}\\r\\nPING\\r\\n')
        await c.expect(rb"PONG\\r\\n")                  # regex, anchored at the unread data
        await c.expect_closed()                          # EOF (after optional remaining bytes)

``expect`` consumes what it matched and returns the ``re.Match``; it fails with the bytes seen so
far when nothing matches within ``timeout``. ``info`` is the decoded first INFO.
"""

from __future__ import annotations

import asyncio
import json
import re

__all__ = ["RawClient"]


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.buf = bytearray()
        self.info: dict = {}
        self.eof = False

    @classmethod
    async def open(cls, port: int, host: str = "127.0.0.1", read_info: bool = True) -> "RawClient":
        reader, writer = await asyncio.open_connection(host, port)
        c = cls(reader, writer)
        if read_info:
            m = await c.expect(rb"INFO (\{.*?\}) ?\r\n")
            c.info = json.loads(m.group(1))
        return c

    @classmethod
    def connect(cls, port: int, host: str = "127.0.0.1", read_info: bool = True):
        return _RawCtx(cls, port, host, read_info)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def _fill(self, timeout: float) -> bool:
        try:
            chunk = await asyncio.wait_for(self.reader.read(65536), timeout)
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    async def expect(self, pattern: bytes, timeout: float = 2.0) -> re.Match:
        rx = re.compile(pattern, re.S)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            m = rx.match(bytes(self.buf))  # a snapshot: the match must outlive the buffer edit
            if m:
                del self.buf[: m.end()]
                return m
            left = deadline - loop.time()
            if left <= 0 or self.eof:
                raise AssertionError(f"expected {pattern!r}, got {bytes(self.buf)!r} (eof={self.eof})")
            try:
                await self._fill(left)
            except asyncio.TimeoutError:
                pass

    async def read_all(self, timeout: float = 0.2) -> bytes:
        """Everything that arrives within ``timeout`` (or until EOF)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.eof and loop.time() < deadline:
            try:
                await self._fill(deadline - loop.time())
            except asyncio.TimeoutError:
                break
        out = bytes(self.buf)
        self.buf.clear()
        return out

    async def expect_closed(self, timeout: float = 2.0) -> bytes:
        """Wait for EOF; returns any bytes that arrived before it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.eof:
            left = deadline - loop.time()
            if left <= 0:
                raise AssertionError(f"connection still open; unread {bytes(self.buf)!r}")
            try:
                await self._fill(left)
            except asyncio.TimeoutError:
                pass
        out = bytes(self.buf)
        self.buf.clear()
        return out

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionResetError, BrokenPipeError):
            pass


class _RawCtx:
    def __init__(self, cls, port, host, read_info):
        self.args = (cls, port, host, read_info)
        self.client: RawClient | None = None

    async def __aenter__(self) -> RawClient:
        cls, port, host, read_info = self.args
        self.client = await cls.open(port, host, read_info)
        return self.client

    async def __aexit__(self, *exc) -> None:
        if self.client is not None:
            await self.client.close()
