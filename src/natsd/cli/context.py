"""The per-invocation context handed to every command: parsed flags, output, and a lazy connection."""

from __future__ import annotations

import argparse
from typing import Any, Callable

import nats

from natsd.cli.common import ConnOptions, JsApi, Out, connect


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

    @property
    def json(self) -> bool:
        return self.out.json

    @property
    def timeout(self) -> float:
        return self.conn.timeout

    async def nc(self, **extra: Any) -> nats.NATS:
        if self._nc is None:
            self._nc = await connect(self.conn, **extra)
        return self._nc

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
