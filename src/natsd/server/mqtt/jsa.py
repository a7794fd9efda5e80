"""JetStream requests of the MQTT layer, as nats-server's mqttJSA makes them.

MQTT state lives in ordinary JetStream streams of the client's account, reached through the
account's ``$JS.API`` (or ``$JS.<domain>.API`` with ``mqtt { js_domain }``) exactly as any client
would: the MQTT layer never imports the JetStream engine, and a backup of those streams moves MQTT
sessions and retained messages between natsd and nats-server.

Replies come back on ``$MQTT.JSA.<node>.<kind>.<n>`` (nats-server's reply prefix, ``<node>`` being
the hash of the server name), one internal wildcard subscription per account. Control requests
(stream and consumer creation, session load/store) are awaited; the per-message stores of QoS 1
publishes register a callback instead (no task or future per message).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from typing import Any, Callable

__all__ = ["JsApi", "JsApiError"]

ReplyCb = Callable[[bytes | None, bytes], None]


class JsApiError(Exception):
    """An API error reply: ``code`` (HTTP-like), ``err_code`` (nats-server's), ``description``."""

    def __init__(self, code: int, err_code: int, description: str) -> None:
        super().__init__(f"{description} (code={code}, err_code={err_code})")
        self.code = code
        self.err_code = err_code
        self.description = description


class JsApi:
    __slots__ = ("ports", "prefix", "api", "timeout_s", "_n", "_waiting", "_sub", "loop")

    def __init__(self, ports: Any, node: str, domain: str, timeout_ns: int) -> None:
        self.ports = ports
        self.prefix = f"$MQTT.JSA.{node}."
        self.api = f"$JS.{domain}.API." if domain else "$JS.API."
        self.timeout_s = timeout_ns / 1e9
        self._n = itertools.count(1)
        self._waiting: dict[str, ReplyCb] = {}
        self._sub = ports.subscribe(self.prefix + ">", self._reply)
        self.loop = asyncio.get_running_loop()

    def close(self) -> None:
        self._sub.unsubscribe()
        self._waiting.clear()

    def _reply(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        cb = self._waiting.pop(subject, None)
        if cb is not None:
            cb(hdr, payload)

    def publish_cb(self, kind: str, subject: str, hdr: bytes | None, payload: bytes, cb: ReplyCb) -> None:
        """Publish with a reply subject; ``cb(hdr, payload)`` gets the reply (a PubAck)."""
        reply = f"{self.prefix}{kind}.{next(self._n)}"
        self._waiting[reply] = cb
        self.ports.publish(subject, reply, hdr, payload)

    def forget(self, kinds_prefix: str) -> None:
        """Drop pending callbacks whose reply subject starts with ``prefix + kinds_prefix`` (a
        closed connection's outstanding stores)."""
        p = self.prefix + kinds_prefix
        for k in [k for k in self._waiting if k.startswith(p)]:
            del self._waiting[k]

    async def request(self, kind: str, subject: str, payload: bytes, hdr: bytes | None = None) -> bytes:
        fut: asyncio.Future[bytes] = self.loop.create_future()

        def done(h: bytes | None, p: bytes) -> None:
            if not fut.done():
                fut.set_result(p)

        reply = f"{self.prefix}{kind}.{next(self._n)}"
        self._waiting[reply] = done
        self.ports.publish(subject, reply, hdr, payload)
        try:
            return await asyncio.wait_for(fut, self.timeout_s)
        finally:
            self._waiting.pop(reply, None)

    async def call(self, kind: str, op: str, body: dict | None) -> dict:
        """``$JS.API.<op>`` with a JSON body; raises :class:`JsApiError` on an error reply."""
        raw = await self.request(kind, self.api + op, json.dumps(body).encode() if body is not None else b"")
        resp = json.loads(raw)
        err = resp.get("error")
        if err:
            raise JsApiError(err.get("code", 0), err.get("err_code", 0), err.get("description", ""))
        return resp

    async def last_msg(self, stream: str, subject: str) -> tuple[int, bytes | None, bytes] | None:
        """The last message on ``subject`` (seq, header block, data), or None when there is none."""
        try:
            r = await self.call("ML", f"STREAM.MSG.GET.{stream}", {"last_by_subj": subject})
        except JsApiError as e:
            if e.err_code == 10037:  # JSNoMessageFoundErr
                return None
            raise
        m = r.get("message") or {}
        hdrs = m.get("hdrs")
        return (int(m.get("seq", 0)), base64.b64decode(hdrs) if hdrs else None, base64.b64decode(m.get("data") or b""))

    def send(self, subject: str, payload: bytes = b"", hdr: bytes | None = None) -> None:
        """Fire and forget (acks, deletes that need no answer)."""
        self.ports.publish(subject, "", hdr, payload)
