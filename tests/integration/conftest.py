"""Integration fixtures: an in-process natsd on a free port and real nats-py clients.

* ``server``: a started :class:`natsd.server.Server` (core NATS, monitoring on a random port);
  see :func:`tests.helpers.inproc.running_server` to start one with other options.
* ``nc``: a nats-py client connected to ``server`` (closed after the test).
* ``url``: for the natsctl tests, whose modules override ``server`` with
  :func:`tests.helpers.cli.module_server`: its URL, every stream deleted first.
"""

from __future__ import annotations

import nats
import pytest

from tests.helpers.cli import clean_streams
from tests.helpers.inproc import running_server


@pytest.fixture
async def server():
    async with running_server(http_port=-1) as s:
        yield s


@pytest.fixture
async def nc(server):
    client = await nats.connect(server.client_url, allow_reconnect=False)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def url(server):
    """The module server's URL, with every stream deleted first (each test starts from an empty account)."""
    clean_streams(server.url)
    return server.url
