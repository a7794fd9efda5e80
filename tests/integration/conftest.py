"""Integration fixtures: an in-process natsd on a free port and real nats-py clients.

* ``server``: a started :class:`natsd.server.Server` (core NATS, monitoring on a random port);
  see :func:`tests.helpers.inproc.running_server` to start one with other options.
* ``nc``: a nats-py client connected to ``server`` (closed after the test).
"""

from __future__ import annotations

import nats
import pytest

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
