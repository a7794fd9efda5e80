"""An in-process natsd with JetStream for tests and embedding, on the caller's running loop.

::

    from natsd.testing import InProcessServer

    async with InProcessServer(max_payload=1024) as srv:     # JetStream on, temp store, free port
        nc = await nats.connect(srv.url)
        ...
        await srv.advance(30)                                # ack_wait passes, no sleeping
        srv.faults.disk_full(); ...; srv.faults.disk_ok()
        await srv.crash(); await srv.restart()                # kill -9, then recover from the store

Options are nats-server's names (``max_payload=1024``, ``jetstream={"max_memory_store": "1GB"}``,
``lame_duck_duration="10s"``, ``accounts={...}``), applied after ``config`` (the text of a
nats-server configuration file), through the same config loader as ``natsd -c``. Unknown names
raise ``ValueError``.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any, cast

from natsd.clock import Clock, SystemClock
from natsd.testing.clock import ClockScope, TestClock
from natsd.testing.faults import Faults

if TYPE_CHECKING:  # pragma: no cover
    from natsd.config.options import ServerOptions
    from natsd.server.server import Server

__all__ = ["InProcessServer", "build_options", "Captured"]


def build_options(config: str | None = None, **options: Any) -> "ServerOptions":
    """ServerOptions from a config text and nats-server option names (applied in that order)."""
    from natsd.config.options import ServerOptions, options_from_tree

    o = ServerOptions(host="127.0.0.1", port=0, http_port=0)
    if config:
        from natsd.config.parser import parse

        o = options_from_tree(parse(config, file="<config>"), o)
    if options:
        # options_from_tree takes plain dicts too (nested ones included), without positions.
        o = options_from_tree(cast(Any, dict(options)), o)
    bad = [w for w in o.config_warnings]
    if bad:
        raise ValueError("; ".join(bad))
    return o


class Captured:
    """What a server said during a test: ``logs`` (formatted lines, nats-server style levels) and
    ``advisories`` (``(subject, decoded JSON)`` of everything on ``$JS.EVENT.>`` and
    ``$SYS.>`` in the server's accounts)."""

    def __init__(self) -> None:
        self.logs: list[str] = []
        self.advisories: list[tuple[str, Any]] = []

    def advisories_of(self, kind: str) -> list[Any]:
        """Advisories whose ``type`` ends with ``kind``, e.g. ``"max_deliver"``, ``"nak"``."""
        return [a for _, a in self.advisories if isinstance(a, dict) and str(a.get("type", "")).endswith(kind)]

    def clear(self) -> None:
        self.logs.clear()
        self.advisories.clear()


class _LogCapture(logging.Handler):
    def __init__(self, out: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.out = out
        from natsd.server.log import NatsFormatter

        self.setFormatter(NatsFormatter(logtime=False))

    def emit(self, record: logging.LogRecord) -> None:
        self.out.append(self.format(record))


class InProcessServer:
    """natsd on the running event loop. See the module docstring.

    Keyword arguments (besides nats-server options):

    * ``config``: configuration text (nats-server format);
    * ``jetstream``: True (default), False, or a dict of the ``jetstream {}`` block;
    * ``store_dir``: where JetStream keeps its files (default: a temporary directory removed on
      :meth:`stop`);
    * ``clock``: ``None`` (default: a frozen :class:`TestClock`, moved only by :meth:`advance`),
      ``"flowing"`` (a :class:`TestClock` that follows real time and jumps on :meth:`advance`),
      ``"real"`` (the system clock), or any :class:`~natsd.clock.Clock`;
    * ``port``: 0 (default) picks a free port; ``host`` defaults to 127.0.0.1;
    * ``capture_logs``: capture the ``natsd`` logger's lines into ``captured.logs`` (default True,
      at ``log_level``, INFO by default).
    """

    def __init__(
        self,
        *,
        config: str | None = None,
        jetstream: bool | dict = True,
        store_dir: str | None = None,
        clock: Clock | str | None = None,
        capture_logs: bool = True,
        log_level: int = logging.INFO,
        **options: Any,
    ) -> None:
        if isinstance(jetstream, dict):
            options["jetstream"] = jetstream
        self.options = build_options(config, **options)
        if jetstream is not False:
            self.options.jetstream.enabled = True
        self._own_store = False
        if store_dir is not None:
            self.options.jetstream.store_dir = str(store_dir)
        if clock is None:
            self.clock: Clock = TestClock()
        elif clock == "flowing":
            self.clock = TestClock(flowing=True)
        elif clock == "real":
            self.clock = SystemClock()
        elif isinstance(clock, str):
            raise ValueError(f"clock must be None, 'flowing', 'real' or a Clock, not {clock!r}")
        else:
            self.clock = clock
        self.server: Server | None = None
        self.captured = Captured()
        self.faults = Faults(self)
        self._scope: ClockScope | None = None
        self._capture_logs = capture_logs
        self._log_level = log_level
        self._log_handler: _LogCapture | None = None
        self._saved_level = logging.NOTSET
        self._adv_subs: list[Any] = []

    # -- addresses ---------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._srv().port

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:<port>``, for ``nats.connect``."""
        return self._srv().client_url

    client_url = url

    @property
    def store_dir(self) -> str:
        return self.options.jetstream.store_dir

    def _srv(self) -> "Server":
        if self.server is None:
            raise RuntimeError("the server is not running (start() it, or use `async with`)")
        return self.server

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> "InProcessServer":
        """Bind a free port (or the given one) and start, with JetStream recovering what the
        store holds. Returns self."""
        if self.server is not None:
            return self
        from natsd.server.server import Server  # the server's code, only when one starts

        js = self.options.jetstream
        if js.enabled and not js.store_dir:
            js.store_dir = tempfile.mkdtemp(prefix="natsd-test-", dir=_temp_root())
            self._own_store = True
        self._begin_capture()
        self._scope = ClockScope(self.clock)
        server = Server(self.options, clock=self._scope)
        await server.start()
        self.server = server
        # The next incarnation (restart after a crash or stop) binds the same port, so clients
        # that reconnect find it again.
        self.options.port = server.port
        self._watch_advisories()
        return self

    async def stop(self) -> None:
        """Shut down cleanly (stores flushed and closed), remove the temporary store, stop
        capturing. Idempotent."""
        await self._shutdown()
        self.faults.clear()
        self._end_capture()
        if self._own_store:
            shutil.rmtree(self.options.jetstream.store_dir, ignore_errors=True)
            self.options.jetstream.store_dir = ""
            self._own_store = False

    async def _shutdown(self) -> None:
        srv, self.server = self.server, None
        if srv is None:
            return
        self._unwatch_advisories()
        try:
            await srv.shutdown()
        finally:
            if self._scope is not None:
                self._scope.drop()

    async def restart(self) -> None:
        """A clean restart: shut down (everything flushed), start again on the same port and
        store."""
        self.faults.memory_ok()
        await self._shutdown()
        await self.start()

    async def crash(self) -> None:
        """Die as ``kill -9`` would: client and leaf connections are reset, nothing buffered in the
        process is written (message blocks not yet handed to the OS and consumer states not yet
        flushed are lost), files are closed as the kernel closes them, and the dead server's
        timers never fire. Then :meth:`start` (or :meth:`restart`) recovers from the store."""
        srv, self.server = self.server, None
        if srv is None:
            return
        self._unwatch_advisories()
        assert self._scope is not None
        self._scope.drop()
        self.faults.memory_ok()
        if srv._listener is not None:
            srv._listener.close()
        for c in list(srv.clients.values()):
            if c.transport is not None:
                c.transport.abort()
        if srv.leafnodes is not None:
            for links in list(srv.leafnodes.links.values()):
                for link in list(links):
                    if link.transport is not None:
                        link.transport.abort()
        engine = srv.jetstream
        if engine is not None:
            from natsd.store.file.stream_store import FileStreamStore

            engine.started = False
            for acc in list(engine.accounts.values()):
                for stream in list(acc.streams.values()):
                    store = stream.store
                    if isinstance(store, FileStreamStore):
                        store._abandon()
            srv.jetstream = None  # shutdown() below must not flush what the crash lost
        await srv.shutdown()  # only listeners and bookkeeping are left to release

    async def lame_duck(self) -> None:
        """Enter lame duck mode (clients get INFO ``ldm``, then are closed over
        ``lame_duck_duration`` after ``lame_duck_grace_period``, all on the server's clock: run
        this as a task and :meth:`advance`); returns once the server has shut down."""
        srv = self._srv()
        await srv.lame_duck()
        if self.server is srv:
            await self.stop()

    async def __aenter__(self) -> "InProcessServer":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- time ----------------------------------------------------------------------------------------
    async def advance(self, seconds: float | _dt.timedelta) -> None:
        """Move the server's :class:`TestClock` forward, firing every timer due on the way, then
        let the loop run so what they sent (redeliveries, heartbeats, expiry notices) reaches the
        clients."""
        clock = self.clock
        if not isinstance(clock, TestClock):
            raise RuntimeError(
                f"advance() needs the server's TestClock (clock=None); this server runs on {type(clock).__name__}"
            )
        clock.advance(seconds)
        await settle()

    # -- introspection -------------------------------------------------------------------------------
    def _js_account(self, account: str) -> Any:
        engine = self._srv().jetstream
        if engine is None:
            raise RuntimeError("JetStream is not enabled")
        acc = engine.accounts.get(account)
        if acc is None:
            raise KeyError(f"no JetStream account {account!r}")
        return acc

    def stream_info(self, name: str, account: str = "$G") -> dict:
        """The stream's ``state`` as ``$JS.API.STREAM.INFO`` reports it (messages, bytes,
        first_seq, last_seq, num_deleted, consumer_count...), read from the server directly."""
        from dataclasses import asdict

        stream = self._js_account(account).streams.get(name)
        if stream is None:
            raise KeyError(f"no stream {name!r}")
        st = asdict(stream.store.state())
        st["consumer_count"] = stream.num_consumers()
        return st

    def consumer_info(self, stream: str, name: str, account: str = "$G") -> dict:
        """The consumer's info as ``$JS.API.CONSUMER.INFO`` renders it: ``num_pending``,
        ``num_ack_pending``, ``num_redelivered``, ``ack_floor``, ``delivered``, ``num_waiting``..."""
        s = self._js_account(account).streams.get(stream)
        if s is None:
            raise KeyError(f"no stream {stream!r}")
        c = s.consumer(name)
        if c is None:
            raise KeyError(f"no consumer {name!r} on {stream!r}")
        return c.info()

    # -- capture -------------------------------------------------------------------------------------
    def _begin_capture(self) -> None:
        if not self._capture_logs or self._log_handler is not None:
            return
        from natsd.server.log import logger

        self._log_handler = _LogCapture(self.captured.logs)
        self._saved_level = logger.level
        if logger.getEffectiveLevel() > self._log_level:
            logger.setLevel(self._log_level)
        logger.addHandler(self._log_handler)

    def _end_capture(self) -> None:
        if self._log_handler is None:
            return
        from natsd.server.log import logger

        logger.removeHandler(self._log_handler)
        logger.setLevel(self._saved_level)
        self._log_handler = None

    def _watch_advisories(self) -> None:
        import json

        srv = self._srv()
        from natsd.server.ports import ServerPorts

        out = self.captured.advisories
        for acc in list(srv.accounts.values()):
            ports = ServerPorts(acc)

            def on_msg(subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
                try:
                    out.append((subject, json.loads(payload)))
                except ValueError:
                    out.append((subject, payload))

            self._adv_subs.append(ports.subscribe("$JS.EVENT.>", on_msg))

    def _unwatch_advisories(self) -> None:
        for sub in self._adv_subs:
            sub.unsubscribe()
        self._adv_subs = []


def _temp_root() -> str | None:
    """Where temporary stores go: a RAM file system when there is one (/dev/shm on Linux). The
    file store runs unchanged (same writes, same fsync calls, same faults), but an fsync there
    costs nothing, where on a disk creating and deleting a stream fsyncs several files and
    directories (measured ~80 ms per stream on the project's VM, against well under 1 ms)."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        return shm
    return None


async def settle(turns: int = 8) -> None:
    """Let the loop run a few turns (per-turn batching, socket writes, the client's reads)."""
    for _ in range(turns):
        await asyncio.sleep(0)
