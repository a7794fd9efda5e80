"""The per-invocation context handed to every command: parsed flags, output, and a lazy connection."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, Awaitable, Callable, TypeVar

import nats

from natsd.cli.common import CliError, ConnOptions, JsApi, Out, connect

T = TypeVar("T")


class Ctx:
    """Parsed arguments plus the connection, opened on first use and closed by :meth:`close`."""

    def __init__(self, args: argparse.Namespace, conn: ConnOptions, out: Out):
        self.args = args
        self.conn = conn
        self.out = out
        self._nc: nats.NATS | None = None
        self._api: JsApi | None = None
        #: Set by the Ctrl-C handler (see ``main._run``); long loops may check it to stop cleanly.
        self.interrupted = False
        #: What a long-running command did so far, printed when Ctrl-C stops it ("published 37 of 100 ...").
        self.summary: Callable[[], str | None] | None = None
        #: Errors nats-py reported after connecting (the server's -ERR lines among them).
        self.server_errors: list[Exception] = []
        self._failed: asyncio.Event | None = None
        self._connect_error: Exception | None = None

    @property
    def json(self) -> bool:
        return self.out.json

    @property
    def timeout(self) -> float:
        return self.conn.timeout

    async def nc(self, **extra: Any) -> nats.NATS:
        if self._nc is None:
            self._failed = asyncio.Event()

            async def closed() -> None:
                assert self._failed is not None
                self._failed.set()

            extra.setdefault("closed_cb", closed)
            self._nc = await connect(self.conn, on_error=self._on_async_error, **extra)
            # What happened while connecting (a first server of the list unreachable...) is no error
            # of the commands that follow.
            self.server_errors.clear()
            self._failed.clear()
            self._connect_error = self._nc.last_error
        return self._nc

    def _on_async_error(self, exc: Exception) -> None:
        self.server_errors.append(exc)
        if self._failed is not None:
            self._failed.set()

    def server_error(self, subject: str | None = None) -> str | None:
        """The server's ``-ERR`` text that ended or troubled the connection (``Permissions Violation for
        Publish to "x"``: nats-py closes the connection on it), or None.

        nats-py lowercases the whole ``-ERR`` line; a permissions violation on ``subject`` is given back in
        nats-server's spelling with the subject as it was sent."""
        errs = list(self.server_errors)
        if self._nc is not None and self._nc.last_error is not None and self._nc.last_error is not self._connect_error:
            errs.append(self._nc.last_error)
        for exc in reversed(errs):
            text = str(exc).strip()
            if text.startswith("nats: "):
                text = text[len("nats: ") :].strip("'")
                if subject is not None:
                    for what in ("Publish", "Subscription"):
                        canonical = f'Permissions Violation for {what} to "{subject}"'
                        if text.lower() == canonical.lower():
                            return canonical
                return text
        return None

    async def or_server_error(self, aw: Awaitable[T], subject: str | None = None) -> T:
        """Await ``aw``, unless the server reports an error first (or the connection closes): then raise
        that error as a :class:`CliError` instead of waiting for a timeout that would hide it."""
        task = asyncio.ensure_future(aw)
        failed = self._failed
        if failed is None:
            return await task
        waiter = asyncio.ensure_future(failed.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if task.done():
            return task.result()
        why = self.server_error(subject)
        if why is None:
            return await task  # closed for another reason: the awaited call reports it
        task.cancel()
        raise CliError(why)

    async def api(self) -> JsApi:
        if self._api is None:
            self._api = JsApi(await self.nc(), self.conn.timeout, self.conn.api_prefix)
        return self._api

    async def js(self):
        """nats-py's JetStream context (used for KV and the object store)."""
        return (await self.nc()).jetstream(timeout=self.conn.timeout, prefix=self.conn.api_prefix)

    async def close(self) -> None:
        if self._nc is not None and not self._nc.is_closed:
            try:
                # Make sure everything we published reached the server, then close (drain would also wait
                # for subscriptions' pending callbacks, which a CLI that is done does not need).
                if self._nc.is_connected:
                    await self._nc.flush(timeout=max(int(self.conn.timeout), 1))
            except Exception:  # closing after an error must not mask it
                pass
            await self._nc.close()
        self._nc = None
