"""Run a natsd server in-process, on the test's event loop.

Usage (any async test; other areas' integration tests import this)::

    from tests.helpers.inproc import running_server

    async def test_something():
        async with running_server(max_payload=1024) as server:
            nc = await nats.connect(server.client_url)
            ...

``running_server(**overrides)`` builds ``ServerOptions(host="127.0.0.1", port=0, http_port=0)``
with ``overrides`` applied (any ``ServerOptions`` field; ``http_port=-1`` turns monitoring on at
a random port), plus these keyword-only extras:

* ``options=``: a complete ``ServerOptions`` to use instead (used as given: set its ``port`` to 0
  for a random one; ``overrides`` still apply on top);
* ``clock=``: a ``Clock`` for timers, e.g. ``ManualClock()``; with JetStream (which batches
  work with ``Clock.call_soon``) use ``ManualClock(soon_on_loop=True)`` so per-turn work still
  runs on the loop while timers wait for ``advance``;
* ``jetstream=True``: shortcut for ``jetstream.enabled`` with ``store_dir`` in a fresh temporary
  directory (or ``store_dir=...``).

It yields the started :class:`natsd.server.Server` (``server.port``, ``server.http_port``,
``server.client_url``) and shuts it down on exit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from typing import TYPE_CHECKING, AsyncIterator

from natsd.config.options import JetStreamOptions, ServerOptions
from natsd.server import Server

if TYPE_CHECKING:
    import nats

__all__ = ["running_server", "server_and_client", "make_options", "side_by_side"]


def make_options(
    options: ServerOptions | None = None, *, jetstream: bool = False, store_dir: str | None = None, **overrides
) -> ServerOptions:
    opts = options if options is not None else ServerOptions(host="127.0.0.1", port=0, http_port=0)
    if options is None:
        opts.port = 0
    for k, v in overrides.items():
        if not hasattr(opts, k):
            raise TypeError(f"ServerOptions has no field {k!r}")
        setattr(opts, k, v)
    if jetstream or store_dir:
        js = dataclasses.replace(opts.jetstream) if opts.jetstream else JetStreamOptions()
        js.enabled = True
        if store_dir:
            js.store_dir = store_dir
        opts.jetstream = js
    return opts


@contextlib.asynccontextmanager
async def running_server(
    *,
    options: ServerOptions | None = None,
    clock=None,
    jetstream: bool = False,
    store_dir: str | None = None,
    **overrides,
) -> AsyncIterator[Server]:
    """Start a :class:`Server` on a free port for the duration of the ``async with`` block."""
    with contextlib.ExitStack() as stack:
        if jetstream and not store_dir and not (options and options.jetstream.store_dir):
            store_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="natsd-js-"))
        opts = make_options(options, jetstream=jetstream, store_dir=store_dir, **overrides)
        server = Server(opts, clock=clock)
        await server.start()
        try:
            yield server
        finally:
            await server.shutdown()


@contextlib.asynccontextmanager
async def server_and_client(**kwargs) -> AsyncIterator[tuple[Server, "nats.NATS"]]:
    """:func:`running_server` (same arguments) plus a connected nats-py client; the client is
    closed before the server stops."""
    import nats

    async with running_server(**kwargs) as server:
        nc = await nats.connect(server.client_url)
        try:
            yield server, nc
        finally:
            await nc.close()


async def side_by_side(workdir, observe, config: str | None = None) -> tuple:
    """``(await observe(url of a fresh nats-server), await observe(url of a fresh natsd))``: the same
    script against the reference (subprocess) and natsd (in process), each on its own store under
    ``workdir``, for the differential tests. ``config``: the text of a configuration file both
    servers load (its listen port is overridden)."""
    from pathlib import Path

    from natsd.config.options import options_from_file
    from tests.helpers.servers import start_server

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    conf = None
    if config is not None:
        conf = workdir / "side_by_side.conf"
        conf.write_text(config)
    ref = start_server("reference", workdir, store_dir=tempfile.mkdtemp(dir=workdir), config=conf)
    try:
        expected = await observe(ref.url)
    finally:
        ref.stop()
    opts = None
    if conf is not None:
        opts = options_from_file(str(conf))
        opts.host, opts.port, opts.http_port = "127.0.0.1", 0, 0
    async with running_server(options=opts, store_dir=tempfile.mkdtemp(dir=workdir)) as server:
        got = await observe(server.client_url)
    return expected, got
