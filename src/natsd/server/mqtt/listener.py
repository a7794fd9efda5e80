"""The MQTT listener (``mqtt { port }``): accepts connections and keeps one
:class:`~natsd.server.mqtt.sessions.AccountSessions` per account, created on the account's first
MQTT connection (its streams are looked up or created then, as nats-server does)."""

from __future__ import annotations

import asyncio
from typing import Any

from natsd.server.log import logger
from natsd.server.transport.tls import TlsLayer
from natsd.server.mqtt.connection import MQTTConnection
from natsd.server.mqtt.sessions import AccountSessions

__all__ = ["MQTTListener"]


class MQTTListener:
    def __init__(self, server: Any) -> None:
        self.server = server
        self.options = server.options.mqtt
        self.conns: dict[int, MQTTConnection] = {}
        self._asms: dict[str, asyncio.Future[AccountSessions]] = {}
        self._listener: asyncio.base_events.Server | None = None
        self.port = 0
        self.host = ""
        self.total_connections = 0
        self.stopping = False
        self.closed_in_msgs = self.closed_out_msgs = self.closed_in_bytes = self.closed_out_bytes = 0

    def _protocol(self) -> Any:
        self.total_connections += 1
        mo = self.options
        if mo.tls is None:
            return MQTTConnection(self)
        s = self.server
        return TlsLayer(
            s.tls.getter("mqtt"),
            lambda: MQTTConnection(self),
            s.clock,
            s.handshakes,
            timeout_ns=mo.tls.timeout_ns,
            mode="first",
            pinned=mo.tls.pinned_certs,
        )

    async def start(self) -> None:
        mo = self.options
        if mo.tls is not None:
            self.server.tls.add("mqtt", mo.tls)
        self.host = mo.host or "0.0.0.0"  # nats-server's default MQTT host, whatever the client host
        self._listener = await asyncio.get_running_loop().create_server(
            self._protocol, self.host, mo.port if mo.port > 0 else 0, reuse_address=True, backlog=4096
        )
        self.port = self._listener.sockets[0].getsockname()[1]
        logger.info(
            "Listening for MQTT clients on %s://%s:%d", "tls" if mo.tls is not None else "mqtt", self.host, self.port
        )

    async def stop(self) -> None:
        self.stopping = True
        if self._listener is not None:
            self._listener.close()
        for c in list(self.conns.values()):
            c.will = None  # a server shutdown is not the client's abrupt close
            c.close("Server Shutdown")
        for f in self._asms.values():
            if f.done() and not f.cancelled() and f.exception() is None:
                f.result().close()
        self._asms.clear()
        if self._listener is not None:
            await self._listener.wait_closed()
            self._listener = None

    def close_listener(self) -> None:
        """Lame duck: stop accepting, keep the connections."""
        if self._listener is not None:
            self._listener.close()

    async def sessions_for(self, account: Any) -> AccountSessions:
        f = self._asms.get(account.name)
        if f is None or (f.done() and f.exception() is not None):
            f = self._asms[account.name] = asyncio.get_running_loop().create_future()
            ports = account.ports
            if ports is None or account.jetstream is None:
                f.set_exception(RuntimeError(f"JetStream not enabled for account {account.name!r}"))
            else:
                asm = AccountSessions(self.server, account, ports)
                try:
                    await asm.start()
                except BaseException as e:
                    asm.close()
                    f.set_exception(e)
                    f.exception()  # retrieved: this caller raises it
                    raise
                f.set_result(asm)
        return await asyncio.shield(f)

    def varz(self) -> dict:
        """/varz's ``mqtt`` section, nats-server's MQTTOptsVarz (empty values left out)."""
        mo = self.options
        d: dict = {"host": mo.host or "0.0.0.0", "port": mo.port if mo.port > 0 else self.port}
        if mo.no_auth_user:
            d["no_auth_user"] = mo.no_auth_user
        if mo.auth_timeout_s:
            d["auth_timeout"] = mo.auth_timeout_s
        if mo.tls is not None and mo.tls.verify_and_map:
            d["tls_map"] = True
        t = (mo.tls.timeout_ns / 1e9) if mo.tls is not None else 2
        d["tls_timeout"] = int(t) if t == int(t) else t
        if mo.js_domain:
            d["js_domain"] = mo.js_domain
        if mo.ack_wait_ns:
            d["ack_wait"] = mo.ack_wait_ns
        if mo.max_ack_pending:
            d["max_ack_pending"] = mo.max_ack_pending
        return d

    def closed_conn(self, c: MQTTConnection) -> None:
        self.closed_in_msgs += c.in_msgs
        self.closed_out_msgs += c.out_msgs
        self.closed_in_bytes += c.in_bytes
        self.closed_out_bytes += c.out_bytes
