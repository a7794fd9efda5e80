"""The server: listener, client registry, accounts, JetStream wiring and lifecycle.

Lifecycle::

    server = Server(ServerOptions(port=0))      # 0 or -1: pick a free port
    await server.start()                        # listening; server.port is the bound port
    ...
    await server.lame_duck()                    # optional: ldm INFO, stop accepting, close slowly
    await server.shutdown()

``run()`` is the blocking entry for ``natsd.server.main``: it installs uvloop when available,
handles SIGINT/SIGTERM (graceful shutdown), SIGUSR2 (lame duck) and SIGHUP (reload through the
``reload_options`` callable given to the constructor, by default
:func:`natsd.config.flags.reload_options`, which re-reads the config file and re-applies the
command-line flags), and returns the exit code.

Time comes from the injected :class:`~natsd.clock.Clock` (timers for pings, auth timeout, write
deadline, lame duck pacing), so tests drive it with ``ManualClock``.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import itertools
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING, Any, Callable

from natsd import __version__, _compiled
from natsd.clock import Clock, SystemClock
from natsd.config import flags
from natsd.config.options import AccountJetStreamLimits, ServerOptions
from natsd.config.ports import InvalidPortError, listen_problems
from natsd.protocol.encoder import encode_info
from natsd.protocol.errors import ERR_AUTH_VIOLATION, ERR_MAX_CONNECTIONS
from natsd.server import mapping, msgtrace
from natsd.server.account import GLOBAL_ACCOUNT, Account
from natsd.server.auth.authenticator import Authenticator
from natsd.server.connection import (
    REASON_AUTH,
    REASON_LAME_DUCK,
    REASON_MAX_CONN,
    REASON_SERVER_SHUTDOWN,
    ClientConnection,
)
from natsd.server.jsbanner import node_name
from natsd.server.log import logger, reopen_log_file, setup_logging_from
from natsd.server.ports import ServerPorts
from natsd.server.transport.busypoll import BusyPoll, default_window_ns
from natsd.server.transport.flushbatch import FlushBatch
from natsd.server.transport.tls import HandshakeQueue, TlsContexts, TlsLayer

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.manager import JetStreamEngine
    from natsd.server.auth.callout import AuthCallout
    from natsd.server.auth.trust import Trust
    from natsd.server.leaf.manager import LeafManager
    from natsd.server.monitoring.endpoints import MonitorServer
    from natsd.server.monitoring.sysreq import SystemRequests

__all__ = ["Server", "GIT_COMMIT"]

GIT_COMMIT = "natsd"
# JetStream API level advertised in INFO (nats-server 2.11 = 1); the engine may override.
API_LEVEL = 1


def _server_id() -> str:
    # nats-server ids are nkey public keys: 'N' + 55 base32 characters.
    return "N" + base64.b32encode(os.urandom(35)).decode()[:55]


class JetStreamStartError(Exception):
    """JetStream was asked for (``-js`` / ``jetstream {}``) and could not be started: fatal."""


class Server:
    """A NATS server bound to ``options`` (see :class:`~natsd.config.options.ServerOptions`)."""

    def __init__(
        self,
        options: ServerOptions | None = None,
        clock: Clock | None = None,
        reload_options: Callable[[], ServerOptions] | None = None,
    ) -> None:
        self.options = options if options is not None else ServerOptions()
        self._clock = clock
        self.reload_options = reload_options
        self.server_id = _server_id()
        self.server_name = self.options.server_name or self.server_id
        # Operator mode (JWT accounts): see natsd.server.auth.trust.
        self.trust: Trust | None = None
        if self.options.trust.enabled:
            # Operator mode only: JWT accounts (and PyNaCl) are not loaded by other servers.
            from natsd.server.auth.trust import Trust

            self.trust = Trust(self.options)
        self.callout: AuthCallout | None = None
        if self.options.auth_callout is not None or self.trust is not None:
            # deferred (start-up time): only servers that may call out (a configured callout, or operator mode
            # where an account JWT may name one) sign requests, so only they need a real server nkey (the id is
            # its public key) and PyNaCl
            from natsd.server.auth.callout import AuthCallout, server_identity

            seed, self.server_id = server_identity()
            self.server_name = self.options.server_name or self.server_id
            self.callout = AuthCallout(self.options.auth_callout, seed, self.trust)
        self.auth = Authenticator(self.options, self.trust, self.callout)
        self.accounts: dict[str, Account] = {}
        if self.trust is not None:
            self.trust.bind(self)
        self.global_account = self.get_account(GLOBAL_ACCOUNT)
        for acc in self.options.accounts:
            self.get_account(acc.name)
        if self.callout is not None:
            self.callout.bind(self)
        mapping.install(self.get_account, self.accounts, self.options)
        msgtrace.install(self.accounts, self.options)
        self.clients: dict[int, ClientConnection] = {}
        self._cids = itertools.count(1)
        self.slow_consumers = 0
        self.stale_connections = 0
        self.stalled_clients = 0  # producer stalls (backpressure events)
        # Totals of closed connections (live ones are summed on demand for /varz).
        self.closed_in_msgs = 0
        self.closed_in_bytes = 0
        self.closed_out_msgs = 0
        self.closed_out_bytes = 0
        self.total_connections = 0
        self.start_time_ns = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self._listener: asyncio.base_events.Server | None = None
        self._monitor: MonitorServer | None = None
        self._https_monitor: MonitorServer | None = None
        self._sysreq: SystemRequests | None = None  # $SYS.REQ.SERVER.* answers (natsd.server.monitoring.sysreq)
        self._ws_listener: asyncio.base_events.Server | None = None
        self._ws_port = 0
        self._https_port = 0
        self._handshakes: HandshakeQueue | None = None  # created with the loop in start()
        # Busy polling after requests (natsd.server.transport.busypoll); its window is set in start().
        self.busy_poll = BusyPoll(0, lambda cb: None)
        # The connections' per-turn flushes (natsd.server.writer); bound to the loop in start().
        self.flush_batch = FlushBatch(lambda cb: None)
        self.tls = TlsContexts()  # SSLContexts of the TLS listeners ("client", "websocket", "https")
        self._port = 0
        self._http_port = 0
        self.lame_duck_mode = False
        self.running = False
        self._stopped: asyncio.Event | None = None
        self.jetstream: JetStreamEngine | None = None  # when JetStream is enabled (and started)
        self.leafnodes: LeafManager | None = None  # with a leafnodes {} block
        self.mqtt: Any = None  # natsd.server.mqtt.MQTTListener with an mqtt {} port
        self.config_loads = 0
        self._ports_file = ""

    # -- properties ------------------------------------------------------------------------------

    @property
    def clock(self) -> Clock:
        if self._clock is None:
            self._clock = SystemClock(self.loop)
        return self._clock

    @property
    def handshakes(self) -> HandshakeQueue:
        """The worker that runs TLS handshakes off the loop (made by start(); the listeners that
        need it exist only after)."""
        q = self._handshakes
        assert q is not None, "the server is not started"
        return q

    @property
    def port(self) -> int:
        """The bound client port (useful with ``port=0``/``-1``)."""
        return self._port

    @property
    def http_port(self) -> int:
        """The bound monitoring port, 0 when monitoring is off."""
        return self._http_port

    @property
    def websocket_port(self) -> int:
        """The bound WebSocket port, 0 when there is no ``websocket {}`` listener."""
        return self._ws_port

    @property
    def https_port(self) -> int:
        """The bound HTTPS monitoring port, 0 when off."""
        return self._https_port

    @property
    def client_url(self) -> str:
        host = self.options.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return f"nats://{host}:{self._port}"

    def next_cid(self) -> int:
        return next(self._cids)

    def get_account(self, name: str) -> Account:
        acc = self.accounts.get(name)
        if acc is None:
            acc = self.accounts[name] = Account(name, cache=not self.options.no_sublist_cache)
            if self.trust is not None:
                self.trust.account_created(acc)  # imports, exports and JetStream from its JWT
        return acc

    def apply_js_limits(self, acc: Account, limits: AccountJetStreamLimits | None) -> None:
        """JetStream limits from an account JWT (at creation or pushed later): enable JetStream
        for the account, change its limits in place (checked on the next request/publish, as the
        config-file limits are), or switch it off (``None``): its streams stop, their files stay,
        the API answers "JetStream not enabled for account", and enabling it again recovers them,
        as the reference does."""
        acc.js_limits = limits
        engine = self.jetstream
        if engine is None:
            return
        if limits is None:
            if acc.jetstream is not None:
                acc.jetstream.stop()
                engine.accounts.pop(acc.name, None)
                acc.jetstream = None
                assert acc.ports is not None  # enabled JetStream always has its ports
                acc.js_disabled_subs = (
                    engine.disable_account_api(acc.ports, acc.name == self._system_account_name()) or []
                )
            return
        if acc.jetstream is not None:
            js = acc.jetstream
            js.limits = limits
            js.limits_enforced = limits.max_memory >= 0 or limits.max_storage >= 0
            js._usage_dirty = True
            return
        for sub in acc.js_disabled_subs:
            sub.unsubscribe()
        acc.js_disabled_subs = []
        if acc.ports is None:
            acc.ports = ServerPorts(acc)
        acc.jetstream = engine.enable_account(acc.name, acc.ports, limits)

    # -- start / stop ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind the client (and monitoring) listeners, start JetStream, log the banner.

        On failure (e.g. the port is taken) whatever was started is stopped again and the
        error propagates.
        """
        try:
            await self._start()
        except BaseException:
            await self.shutdown()
            raise

    async def _start(self) -> None:
        self.loop = asyncio.get_running_loop()
        opts = self.options
        self.start_time_ns = self.clock.time_ns()
        self._stopped = asyncio.Event()
        if opts.mqtt is not None:
            from natsd.config.mqtt import check_mqtt_startup

            check_mqtt_startup(opts)  # nats-server refuses these at start, before listening
        logger.info("Starting nats-server")
        logger.info("  Version:  %s", __version__)
        logger.info("  Git:      [%s]", GIT_COMMIT)
        logger.info("  Name:     %s", self.server_name)
        if opts.jetstream.enabled:
            # nats-server's node name: a hash of the server name, stable across restarts
            logger.info("  Node:     %s", node_name(self.server_name))
        logger.info("  ID:       %s", self.server_id)
        logger.log(*_compiled.status_line())
        if opts.config_file:
            logger.info("Using configuration file: %s", opts.config_file)
        if any(u.password and not u.password.startswith("$2") for u in self.auth.users.values()) or (
            opts.password and not opts.password.startswith("$2")
        ):
            logger.warning("Plaintext passwords detected, use nkeys or bcrypt")
        bad_ports = listen_problems(opts)
        if bad_ports:  # before anything binds: Python would take the port modulo 65536
            raise InvalidPortError(bad_ports[0])
        if self.trust is not None:
            self._start_trust()
        await self._start_jetstream()
        port = opts.port if opts.port > 0 else 0
        host = opts.host or "0.0.0.0"
        if opts.tls is not None:
            self.tls.add("client", opts.tls)
        self._handshakes = HandshakeQueue(self.loop)
        self.busy_poll = BusyPoll(
            default_window_ns() if opts.busy_poll_ns < 0 else opts.busy_poll_ns, self.loop.call_soon
        )
        self.flush_batch = FlushBatch(self.loop.call_soon)
        # MQTT listens before the client port (as nats-server logs it), so a client port that
        # accepts means the MQTT port does too
        await self._start_mqtt()
        self._listener = await self.loop.create_server(
            self._new_client_protocol, listen_host(self.loop, host), port, reuse_address=True, backlog=4096
        )
        self._port = self._listener.sockets[0].getsockname()[1]
        await self._start_secure_listeners()
        if opts.http_port:
            # deferred (issue 26, start-up time): the monitoring room loads only with a port for it
            from natsd.server.monitoring.endpoints import MonitorServer

            self._monitor = monitor = MonitorServer(self)
            try:
                self._http_port = await monitor.start(
                    opts.http_host or "0.0.0.0", opts.http_port if opts.http_port > 0 else 0
                )
            except OSError:
                self._monitor = None
                raise
            logger.info("Starting http monitor on %s:%d", opts.http_host or "0.0.0.0", self._http_port)
        logger.info("Listening for client connections on %s:%d", host, self._port)
        if opts.tls is not None:
            logger.info("TLS required for client connections")
        await self._start_leafnodes()
        self._start_system_requests()
        self._write_ports_file()
        logger.info("Server is ready")
        self.running = True

    def _start_trust(self) -> None:
        """Operator mode: register the system and preloaded accounts (so JetStream recovers
        their streams) and the claim-update service."""
        trust = self.trust
        assert trust is not None  # called in operator mode only
        logger.info("Trusted Operators")
        for op in trust.operators:
            logger.info("  System  : %r", op.system_account)
            logger.info("  Operator: %r", op.name)
        if trust.system_account:
            self.get_account(trust.system_account)
        for name in trust.preloaded():
            self.get_account(name)
        trust.start_system_services()

    def _system_account_name(self) -> str:
        return self.options.system_account or (self.trust.system_account if self.trust is not None else "")

    def _start_system_requests(self) -> None:
        """With a system account, answer ``$SYS.REQ.SERVER.PING[.*]`` (see :mod:`natsd.server.monitoring.sysreq`)."""
        name = self.options.system_account or (self.trust.system_account if self.trust is not None else "")
        if not name:
            return
        # deferred (issue 26, start-up time): only with a system account
        from natsd.server.monitoring.endpoints import MonitorServer
        from natsd.server.monitoring.sysreq import SystemRequests

        self._sysreq = SystemRequests(self, self._monitor or MonitorServer(self), name)
        self._sysreq.start()

    async def _start_leafnodes(self) -> None:
        if self.options.leafnodes is None:
            return
        # deferred (issue 26, start-up time): the leaf room loads only with a leafnodes {} block
        from natsd.server.leaf.manager import LeafManager

        self.leafnodes = leafnodes = LeafManager(self, self.options.leafnodes)
        await leafnodes.start()

    async def _start_mqtt(self) -> None:
        mo = self.options.mqtt
        if mo is None or not mo.port:
            return
        from natsd.server.mqtt import MQTTListener  # its own room; imported only when configured

        self.mqtt = MQTTListener(self)
        await self.mqtt.start()

    def _write_ports_file(self) -> None:
        """``pid_file`` (the pid as text) and ``ports_file_dir``/natsd_<pid>.ports, a JSON
        object ``{"nats": ["nats://h:p"], "monitoring": ["http://h:p"]}`` as the reference
        writes it (named after the executable, so ``natsd_<pid>.ports`` here)."""
        opts = self.options
        if opts.pid_file:
            try:
                with open(opts.pid_file, "w") as f:
                    f.write(str(os.getpid()))
            except OSError as e:
                logger.error("Could not write pidfile: %s", e)
        if opts.ports_file_dir:
            import json

            host = self.client_url.split("//", 1)[1].rsplit(":", 1)[0]
            ports = {"nats": [f"{'tls' if opts.tls else 'nats'}://{host}:{self._port}"]}
            if self._http_port:
                ports["monitoring"] = [f"http://{host}:{self._http_port}"]
            elif self._https_port:
                ports["monitoring"] = [f"https://{host}:{self._https_port}"]
            if self._ws_port:
                ports["websocket"] = [f"{'wss' if opts.websocket.tls else 'ws'}://{host}:{self._ws_port}"]
            path = os.path.join(opts.ports_file_dir, f"natsd_{os.getpid()}.ports")
            try:
                with open(path, "w") as f:
                    json.dump(ports, f)
                self._ports_file = path
            except OSError as e:
                logger.error("Error writing ports file %s: %s", path, e)

    async def _start_jetstream(self) -> None:
        """Start the JetStream engine and enable it on its accounts.

        JetStream was asked for, so a failure here is fatal: it raises :class:`JetStreamStartError`
        (the process logs it and exits non-zero, an in-process server's ``start()`` raises) rather
        than leaving a server that silently answers without JetStream.
        """
        opts = self.options
        if not opts.jetstream.enabled:
            return
        # deferred (issue 26, start-up time): the engine and its API are imported only when asked for
        from natsd.jetstream.api import JetStreamApi
        from natsd.jetstream.manager import JetStreamEngine
        from natsd.jetstream.config.constants import JS_API_LEVEL
        from natsd.server.jsbanner import log_jetstream_banner, log_recovery_summary  # (imports jetstream types)

        engine = JetStreamEngine(
            opts, self.clock, server_id=self.server_id, server_name=self.server_name, api=JetStreamApi()
        )
        self.jetstream = engine  # set first: a failure below is cleaned up by start()'s shutdown()
        try:
            js_accounts: list[tuple[str, AccountJetStreamLimits]] = [
                (a.name, a.jetstream) for a in opts.accounts if a.jetstream is not None
            ]
            if self.trust is not None:  # JWT accounts: the limits their claims carry
                js_accounts = [(a.name, a.js_limits) for a in self.accounts.values() if a.js_limits is not None]
            elif not js_accounts:
                js_accounts = [(GLOBAL_ACCOUNT, AccountJetStreamLimits())]
            logger.info("Starting JetStream")
            log_jetstream_banner(engine, JS_API_LEVEL)
            t0 = self.clock.monotonic_ns()
            for name, limits in js_accounts:
                if opts.system_account and name == opts.system_account:
                    logger.warning("Not allowed to enable JetStream on the system account")
                    continue
                acc = self.get_account(name)
                acc.ports = ServerPorts(acc)
                acc.js_limits = limits
                acc.jetstream = engine.enable_account(name, acc.ports, limits)
            # Accounts without JetStream still get an answer on $JS.API (503, "JetStream not
            # enabled for account") instead of no-responders, as the reference does.
            for acc in list(self.accounts.values()):
                if acc.jetstream is None:
                    acc.ports = ServerPorts(acc)
                    acc.js_disabled_subs = (
                        engine.disable_account_api(acc.ports, acc.name == self._system_account_name()) or []
                    )
            engine.start()
            log_recovery_summary(engine, self.clock.monotonic_ns() - t0)
        except OSError:
            raise  # the store directory: reported as a start-up error like a bind failure
        except Exception as e:
            raise JetStreamStartError(f"{type(e).__name__}: {e}") from e

    async def shutdown(self) -> None:
        """Stop accepting, close every client (queued output is flushed), stop JetStream."""
        if (
            not self.running
            and self._listener is None
            and self.jetstream is None
            and self._monitor is None
            and self.leafnodes is None
            and self.mqtt is None
        ):
            return  # never started, or already shut down
        self.running = False
        self.busy_poll.stop()
        logger.info("Initiating Shutdown...")
        if self._listener is not None:
            self._listener.close()
        if self._sysreq is not None:
            self._sysreq.stop()
            self._sysreq = None
        if self._monitor is not None:
            await self._monitor.stop()
            self._monitor = None
        await self._stop_secure_listeners()
        if self.mqtt is not None:
            await self.mqtt.stop()
            self.mqtt = None
        if self.leafnodes is not None:
            await self.leafnodes.stop()
            self.leafnodes = None
        for c in list(self.clients.values()):
            c.close(REASON_SERVER_SHUTDOWN)
        if self._handshakes is not None:
            self._handshakes.close()
        if self.jetstream is not None:
            try:
                self.jetstream.stop()
            except Exception:
                logger.exception("JetStream shutdown failed")
            self.jetstream = None
        if self._listener is not None:
            await self._listener.wait_closed()
            self._listener = None
        if self._ports_file:
            try:
                os.remove(self._ports_file)
            except OSError:
                pass
            self._ports_file = ""
        logger.info("Server Exiting..")
        if self._stopped is not None:
            self._stopped.set()

    async def wait_stopped(self) -> None:
        if self._stopped is not None:
            await self._stopped.wait()

    # -- clients ---------------------------------------------------------------------------------

    def info_dict(self) -> dict:
        """The INFO keys shared by every client (nats-server's order and spelling)."""
        opts = self.options
        d = {
            "server_id": self.server_id,
            "server_name": self.server_name,
            "version": __version__,
            "proto": 1,
            "git_commit": GIT_COMMIT,
            "go": "python%d.%d.%d" % sys.version_info[:3],
            "host": opts.host,
            "port": self._port,
            "headers": True,
        }
        if self.auth.auth_required:
            d["auth_required"] = True
        if opts.tls is not None:
            d["tls_required"] = True
            if opts.tls.verify_clients:
                d["tls_verify"] = True
        d["max_payload"] = opts.max_payload
        if self.jetstream is not None:
            d["jetstream"] = True
            if opts.jetstream.domain:
                d["domain"] = opts.jetstream.domain
        return d

    def info_for(self, c: ClientConnection, **extra) -> bytes:
        d = self.info_dict()
        d["client_id"] = c.cid
        d["client_ip"] = c.ip
        if c.nonce:
            d["nonce"] = c.nonce
        if self.jetstream is not None:
            d["api_lvl"] = API_LEVEL
        if self.callout is not None and self.callout.xkp is not None:
            d["xkey"] = self.callout.xkp.public_key  # the key callout requests are sealed with, as nats-server
        overrides = getattr(c.transport, "info_overrides", None)  # e.g. a WebSocket connection's port
        if overrides:
            for k, v in overrides.items():
                if v is None:
                    d.pop(k, None)
                else:
                    d[k] = v
        d.update(extra)
        return encode_info(d)

    def accept_client(self, c: ClientConnection) -> bool:
        """Register a new connection; False (and the connection closed) when refused."""
        if not self.running or self.lame_duck_mode:
            c.close(REASON_LAME_DUCK if self.lame_duck_mode else REASON_SERVER_SHUTDOWN)
            return False
        if len(self.clients) >= self.options.max_connections:
            logger.error("%s%s", c.prefix, ERR_MAX_CONNECTIONS)
            c.close_with_err(ERR_MAX_CONNECTIONS, REASON_MAX_CONN)
            return False
        self.clients[c.cid] = c
        self.total_connections += 1
        return True

    def client_closed(self, c: ClientConnection) -> None:
        if self.clients.pop(c.cid, None) is not None:
            self.closed_in_msgs += c.in_msgs
            self.closed_in_bytes += c.in_bytes
            self.closed_out_msgs += c.out_msgs
            self.closed_out_bytes += c.out_bytes
        if c.account is not None:
            c.account.clients.discard(c)

    def totals(self) -> tuple[int, int, int, int]:
        """(in_msgs, in_bytes, out_msgs, out_bytes) over the server's lifetime."""
        im, ib, om, ob = self.closed_in_msgs, self.closed_in_bytes, self.closed_out_msgs, self.closed_out_bytes
        for c in self.clients.values():
            im += c.in_msgs
            ib += c.in_bytes
            om += c.out_msgs
            ob += c.out_bytes
        return im, ib, om, ob

    def num_subscriptions(self) -> int:
        return sum(a.sublist.count() for a in self.accounts.values())

    # -- reload ----------------------------------------------------------------------------------

    def reload(self, new_options: ServerOptions) -> None:
        """Apply a new configuration: auth, permissions and limits.

        Connected clients are re-checked against the new users: a client whose credentials
        are no longer valid gets ``-ERR 'Authorization Violation'`` and is closed; the others
        get the new permissions. Listening addresses are not changed by a reload (as in the
        reference, which refuses to reload them).
        """
        old_auth = self.auth
        new_options.port = self.options.port
        new_options.host = self.options.host
        new_options.http_port = self.options.http_port
        self._reload_tls(new_options)
        if self.leafnodes is not None:  # leafnode certificates and authorization (natsd.server.leaf.manager)
            new_options.leafnodes = self.leafnodes.reload(new_options.leafnodes)
        new_options.trust = self.options.trust  # operator/resolver changes need a restart
        if self.mqtt is not None:  # the MQTT listener and its settings need a restart (as nats-server)
            new_options.mqtt = self.options.mqtt
        new_options.auth_callout = self.options.auth_callout  # callout changes need a restart
        new_auth = Authenticator(new_options, self.trust, self.callout)
        new_auth._verified = old_auth._verified  # bcrypt results stay valid for unchanged hashes
        self.options = new_options
        self.auth = new_auth
        for acc in new_options.accounts:
            self.get_account(acc.name)
        mapping.install(self.get_account, self.accounts, new_options)
        msgtrace.install(self.accounts, new_options)
        for c in list(self.clients.values()):
            c.parser.max_payload = new_options.max_payload
            if c.jwt_max_payload >= 0:  # a JWT user's own limit survives reloads
                c.parser.max_payload = min(c.parser.max_payload, c.jwt_max_payload)
            c.parser.max_control_line = new_options.max_control_line
            c.max_pending = new_options.max_pending
            c.auth_required = new_auth.auth_required
            if not c.connected or not new_auth.auth_required:
                c.perms = c.pub_filter = c.sub_filter = c.sub_deny = None
                c.replies = None
                continue
            if c.jwt_iat is not None:
                continue  # JWT users answer to their account's claims, not to the config file
            res = c._authenticate(c.connect_opts)  # (certificate users too)
            if res.ok and res.bcrypt is not None:
                res.ok = False  # unverified new hash: the client must reconnect
            if not res.ok or (c.account is not None and res.account != c.account.name):
                logger.error("%sauthentication error after reload", c.prefix)
                c.close_with_err(ERR_AUTH_VIOLATION, REASON_AUTH)
                continue
            c.user = res.user
            p = res.permissions
            c.perms = p
            c.pub_filter = p.publish if p else None
            c.sub_filter = p.subscribe if p else None
            c.sub_deny = p.subscribe if (p and p.subscribe is not None and p.subscribe.deny) else None
            c.replies = {} if (p and p.allow_responses) else None
        self.config_loads += 1
        logger.info("Reloaded server configuration")

    def _reload_signal(self) -> None:
        try:
            if self.reload_options is not None:
                opts = self.reload_options()
            else:
                opts = flags.reload_options(self.options)
        except Exception as e:
            logger.error("Failed to reload server configuration: %s", e)
            return
        self.reload(opts)

    # -- secure transports (TLS, WebSocket, HTTPS monitoring) -------------------------------------

    def _new_client_protocol(self) -> asyncio.BaseProtocol:
        """The protocol for a new client-port connection: plain, or under a TLS layer."""
        tls = self.options.tls
        if tls is None:
            return ClientConnection(self)
        handshakes = self._handshakes
        assert handshakes is not None  # created by start(), before the listener
        return TlsLayer.for_options(
            tls, self.tls.getter("client"), lambda: ClientConnection(self), self.clock, handshakes
        )

    def _new_ws_protocol(self):
        # deferred (issue 26, start-up time): only with a websocket {} block
        from natsd.server.transport.websocket import WebSocketLayer

        ws = self.options.websocket
        tls = ws.tls
        secure = tls is not None
        overrides = {
            "host": ws.host or self.options.host,
            "port": self._ws_port,
            "tls_required": True if secure else None,
            "tls_verify": True if secure and tls.verify_clients else None,
            "tls_available": None,
        }
        layer = WebSocketLayer(
            ws,
            lambda: ClientConnection(self),
            self.clock,
            secure=secure,
            max_frame=self.options.max_pending,
            info_overrides=overrides,
            make_leaf=self.leafnodes.ws_link if self.leafnodes is not None else None,
            make_mqtt=self._new_ws_mqtt,
        )
        if not secure:
            return layer
        return TlsLayer(
            self.tls.getter("websocket"),
            lambda: layer,
            self.clock,
            self._handshakes,
            timeout_ns=tls.timeout_ns,
            mode="first",
            pinned=tls.pinned_certs,
        )

    def _new_ws_mqtt(self):
        """An MQTT connection under a WebSocket (``ws://host:port/mqtt``), when MQTT is served."""
        if self.mqtt is None:
            return None
        from natsd.server.mqtt.connection import MQTTConnection

        return MQTTConnection(self.mqtt)

    async def _start_secure_listeners(self) -> None:
        opts = self.options
        if opts.https_port and opts.http_port:
            raise OSError(
                f"Can't start monitoring: can't specify both HTTP ({opts.http_port}) and "
                f"HTTPs ({opts.https_port}) ports"
            )
        ws = opts.websocket
        if ws.port:
            if ws.tls is not None:
                self.tls.add("websocket", ws.tls)
            host = ws.host or opts.host or "0.0.0.0"
            self._ws_listener = await asyncio.get_running_loop().create_server(
                self._new_ws_protocol, host, ws.port if ws.port > 0 else 0, reuse_address=True, backlog=4096
            )
            self._ws_port = self._ws_listener.sockets[0].getsockname()[1]
            logger.info("Listening for websocket clients on %s://%s:%d", "wss" if ws.tls else "ws", host, self._ws_port)
            if ws.tls is None:
                logger.warning("Websocket not configured with TLS. DO NOT USE IN PRODUCTION!")
            if ws.jwt_cookie:
                # The cookie is offered as CONNECT's jwt; it only counts where JWT auth is configured.
                logger.debug("websocket: a %r cookie stands in for a missing CONNECT jwt", ws.jwt_cookie)
        if opts.https_port and opts.tls is not None:
            # deferred (issue 26, start-up time), as for the plain monitoring port
            from natsd.server.monitoring.endpoints import MonitorServer

            # asyncio's TLS for HTTPS; a reload loads new certificates into this same context.
            ctx = self.tls.add("https", opts.tls, in_place=True)
            self._https_monitor = https_monitor = MonitorServer(self)
            host = opts.http_host or "0.0.0.0"
            self._https_port = await https_monitor.start(host, opts.https_port if opts.https_port > 0 else 0, ssl=ctx)
            logger.info("Starting https monitor on %s:%d", host, self._https_port)

    async def _stop_secure_listeners(self) -> None:
        if self._ws_listener is not None:
            self._ws_listener.close()
        if self.mqtt is not None:
            self.mqtt.close_listener()
            self._ws_listener = None
        if self._https_monitor is not None:
            await self._https_monitor.stop()
            self._https_monitor = None

    def _reload_tls(self, new: ServerOptions) -> None:
        """SIGHUP: new certificates for new connections. Listeners are not added or removed by a
        reload (as in the reference), so TLS cannot be switched on or off this way."""
        old = self.options
        if (old.tls is None) != (new.tls is None):
            logger.error("Config reload: TLS cannot be enabled or disabled without a restart")
            new.tls = old.tls
        new.websocket.port = old.websocket.port
        new.websocket.host = old.websocket.host
        if (old.websocket.tls is None) != (new.websocket.tls is None):
            new.websocket.tls = old.websocket.tls
        new.https_port = old.https_port
        self.tls.reload("client", new.tls)
        self.tls.reload("https", new.tls)
        self.tls.reload("websocket", new.websocket.tls)

    # -- lame duck ---------------------------------------------------------------------------------

    async def _sleep_ns(self, ns: int) -> None:
        fut = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        self.clock.call_later(ns, wake)
        await fut

    async def lame_duck(self) -> None:
        """Lame duck mode: stop accepting, tell clients (INFO ``ldm``), close them over
        ``lame_duck_duration`` after ``lame_duck_grace_period``, then shut down."""
        if self.lame_duck_mode or not self.running:
            return
        self.lame_duck_mode = True
        opts = self.options
        logger.info("Entering lame duck mode, stop accepting new clients")
        if self._listener is not None:
            self._listener.close()
        if self._ws_listener is not None:
            self._ws_listener.close()
        for c in list(self.clients.values()):
            c.send_raw(self.info_for(c, ldm=True))
        grace = opts.lame_duck_grace_period_ns
        duration = max(opts.lame_duck_duration_ns - grace, 0)
        if grace > 0:
            await self._sleep_ns(grace)
        clients = list(self.clients.values())
        if clients:
            n = len(clients)
            # Spread the closes evenly; at most ~1000 steps so huge servers don't spin timers.
            steps = min(n, 1000)
            per_step = -(-n // steps)
            interval = duration // steps if steps else 0
            logger.info("Closing %d existing clients", n)
            for i in range(0, n, per_step):
                for c in clients[i : i + per_step]:
                    c.close(REASON_LAME_DUCK)
                if interval and i + per_step < n:
                    await self._sleep_ns(interval)
        await self.shutdown()

    # -- blocking entry point ------------------------------------------------------------------------

    def run(self) -> int:
        """Run until SIGINT/SIGTERM (or lame duck completes); returns the exit code."""
        if not logger.handlers:
            o = self.options
            setup_logging_from(o)
        loop_factory = None
        try:
            import uvloop

            loop_factory = uvloop.new_event_loop
        except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
            pass
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(self._serve_forever())

    async def _serve_forever(self) -> int:
        # Recovery makes objects by the million (indexes, subjects, streams, consumers) and none
        # is garbage yet: each collection the allocations triggered walked all of them again,
        # half of a 200,000-key bucket's restart (issue 31). The collector resumes once started,
        # and freeze() below then moves what recovery made out of its generations.
        collecting = gc.isenabled()
        gc.disable()
        try:
            await self.start()
        except InvalidPortError as e:
            logger.critical("%s", e)  # nats-server's own [FTL] line for the listener
            return 1
        except OSError as e:
            # Bind failures (the common case) and store-directory errors from JetStream.
            logger.critical("Error starting server: %s", e)
            return 1
        except JetStreamStartError as e:
            logger.critical("Can't start JetStream: %s", e)
            return 1
        finally:
            if collecting:
                gc.enable()
        loop = asyncio.get_running_loop()

        def freeze() -> None:
            logger.debug("%d objects alive at start moved out of the collector's generations", freeze_startup_heap())

        # Half a second after start, not before the first accept: its full collection takes
        # 10-60 ms, which a client connecting right after start (a test's subprocess server)
        # would otherwise wait for (issue 26, start-up time).
        loop.call_later(0.5, freeze)
        tasks: set[asyncio.Task] = set()

        def spawn(coro) -> None:
            t = loop.create_task(coro)
            tasks.add(t)
            t.add_done_callback(tasks.discard)

        def on_stop(signame: str) -> None:
            logger.info("Trapped %r signal", signame)
            spawn(self.shutdown())

        for sig, name in ((signal.SIGINT, "interrupt"), (signal.SIGTERM, "terminated")):
            loop.add_signal_handler(sig, on_stop, name)
        if hasattr(signal, "SIGUSR2"):
            loop.add_signal_handler(signal.SIGUSR2, lambda: spawn(self.lame_duck()))
        if hasattr(signal, "SIGHUP"):
            loop.add_signal_handler(signal.SIGHUP, self._reload_signal)
        if hasattr(signal, "SIGUSR1"):  # logrotate: reopen the log file (log.reopen_log_file)
            loop.add_signal_handler(signal.SIGUSR1, reopen_log_file)
        await self.wait_stopped()
        return 0


def listen_host(loop: asyncio.AbstractEventLoop, host: str) -> Any:
    """``host`` as ``create_server`` should get it: uvloop encodes a host given as text with the
    IDNA codec, whose module and tables were ~5 ms of a start (issue 26), so an address literal
    goes to it as bytes (in a list: a bare bytes value would be taken for a sequence of hosts).
    Anything else, and asyncio's own loop (which never needs the codec for a literal), unchanged."""
    if type(loop).__module__.partition(".")[0] != "uvloop":
        return host
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return [host.encode("ascii")]
    return host


def free_port(host: str = "127.0.0.1") -> int:
    """A currently free TCP port (for tests that need to know a port before starting)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def freeze_startup_heap() -> int:
    """Move every object alive once the server is up (the recovered streams, consumers and their
    indexes, the imported modules) out of the cyclic collector's generations; returns how many.

    They live as long as the process, yet each full collection walked all of them: with 300
    streams x 10 consumers a full pass took ~90 ms of CPU, with 1,000 x 10 ~0.5 s, a stall for
    every client. Frozen objects are still freed by reference counting; only cycles among them
    would stay, and recovered state has none that outlive it. Called by :meth:`Server.run` (the
    process entry point), not by :meth:`Server.start`: in-process servers in tests share one heap.
    """
    import gc

    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
