"""Publish rows to JetStream with acks, pipelined: a window of outstanding PubAcks.

Each message is ``PUB <subject> <reply> <n>`` or, when it carries headers (``Nats-Msg-Id`` and/or
user headers), ``HPUB <subject> <reply> <hdr_len> <total_len>`` with a ``NATS/1.0`` header block.
Replies go to ``<inbox>.<n>`` under one wildcard subscription. A PubAck is the JSON
``{"stream":"S","seq":N}``, ``{"stream":"S","seq":N,"duplicate": true}`` or
``{"error":{"code","err_code","description"},...}``; to keep JSON off the hot path the ack is
classified by byte search (``"error"`` -> parse it and fail, ``duplicate`` -> count it). A ``503``
status (no stream bound to the subject) fails the task.

Publishes are coalesced: up to ``chunk`` encoded messages are joined into one ``sendall``, and
the task stops sending while ``window`` acks are outstanding, reading acks until half the
window is free.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from natsd.spark.wire import ConnectOptions, NatsError, SyncConnection, parse_headers

__all__ = ["PublishStats", "Publisher"]


@dataclass
class PublishStats:
    """What one task published: acked messages and how many the server reported as duplicates."""

    published: int = 0
    duplicates: int = 0


class Publisher:
    """Pipelined JetStream publisher over one connection (one per Spark task)."""

    def __init__(self, opts: ConnectOptions, window: int = 2048, chunk: int = 256, ack_timeout: float = 30.0):
        self.conn = SyncConnection(opts).connect()
        self.reply_prefix = self.conn.inbox_prefix + "."
        self.conn.subscribe(self.conn.inbox_prefix + ".*", sid=1)
        self.window = window
        self.chunk = chunk
        self.ack_timeout = ack_timeout
        self.stats = PublishStats()
        self.outstanding = 0
        self._n = 0
        self._pending: list[bytes] = []
        self._buf = b""

    def publish(self, subject: str, data: bytes, headers: bytes = b"") -> None:
        """Queue one message; ``headers`` is a complete NATS/1.0 header block or ``b""``."""
        self._n += 1
        reply = self.reply_prefix + str(self._n)
        if headers:
            hl = len(headers)
            self._pending.append(
                b"".join((b"HPUB ", subject.encode(), b" ", reply.encode(), b" %d %d\r\n" % (hl, hl + len(data)), headers, data, b"\r\n"))
            )
        else:
            self._pending.append(b"".join((b"PUB ", subject.encode(), b" ", reply.encode(), b" %d\r\n" % len(data), data, b"\r\n")))
        if len(self._pending) >= self.chunk:
            self._send_pending()

    def _send_pending(self) -> None:
        if not self._pending:
            return
        n = len(self._pending)
        self.conn.send(b"".join(self._pending))
        self._pending.clear()
        self.outstanding += n
        if self.outstanding >= self.window:
            self._read_acks(self.window // 2)

    def _read_acks(self, until: int) -> None:
        """Read PubAcks until at most ``until`` remain outstanding."""
        conn = self.conn
        sock = conn.sock
        sock.settimeout(self.ack_timeout)
        buf = self._buf
        pos = 0
        while self.outstanding > until:
            i = buf.find(b"\r\n", pos)
            if i < 0:
                buf = self._recv(buf, pos)
                pos = 0
                continue
            c = buf[pos]
            if c == 77 or c == 72:
                parts = buf[pos:i].split(b" ")
                tlen = int(parts[-1])
                hlen = int(parts[-2]) if c == 72 else 0
                start = i + 2
                end = start + tlen
                if end + 2 > len(buf):
                    buf = self._recv(buf, pos)
                    pos = 0
                    continue
                pos = end + 2
                if parts[2] != b"1":
                    continue
                body = buf[start + hlen : end]
                if hlen and not body:
                    status, desc, _ = parse_headers(buf[start : start + hlen])
                    if status == 503:
                        raise NatsError(f"no stream stores subject {parts[1].decode()!r} (503 no responders)")
                    raise NatsError(f"publish failed: {status} {desc}")
                self.outstanding -= 1
                if b'"error"' in body:
                    err = json.loads(body).get("error", {})
                    raise NatsError(
                        f"publish rejected: {err.get('description')} (code={err.get('code')}, err_code={err.get('err_code')})"
                    )
                self.stats.published += 1
                if b"duplicate" in body and b"true" in body:
                    self.stats.duplicates += 1
                continue
            line = buf[pos:i]
            pos = i + 2
            if line == b"PING":
                conn.send(b"PONG\r\n")
            elif line[:4] == b"-ERR":
                raise NatsError(line.decode(errors="replace"))
        self._buf = buf[pos:]

    def _recv(self, buf: bytes, pos: int) -> bytes:
        try:
            chunk = self.conn.sock.recv(SyncConnection.RECV_SIZE)
        except TimeoutError:
            raise TimeoutError(f"{self.outstanding} PubAcks not received within {self.ack_timeout}s") from None
        if not chunk:
            raise NatsError("connection closed by the server")
        rest = buf[pos:]
        return rest + chunk if rest else chunk

    def finish(self) -> PublishStats:
        """Send what is queued, wait for every ack, close; returns the task's counts."""
        try:
            self._send_pending()
            self._read_acks(0)
        finally:
            self.conn.close()
        return self.stats

    def close(self) -> None:
        self.conn.close()
