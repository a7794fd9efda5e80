"""JetStream asked for and unable to start is fatal, never a server quietly running without it.

An in-process server's ``start()`` raises :class:`JetStreamStartError` (and leaves nothing bound
or open); ``Server.run()`` (what ``natsd`` runs) logs one ``[FTL] Can't start JetStream: ...`` line
and returns 1. Before, an ``AttributeError`` during start-up was caught and the server went on
without JetStream, so tests that needed JetStream skipped instead of failing.
"""

from __future__ import annotations

import socket

import pytest

from natsd.jetstream.manager import JetStreamEngine
from natsd.server import Server
from natsd.server.log import logger
from natsd.server.server import JetStreamStartError
from tests.helpers.inproc import make_options, running_server


def _broken_start(self) -> None:
    raise AttributeError("'JetStreamEngine' object has no attribute 'something_missing'")


async def test_in_process_server_raises_and_releases_its_port(monkeypatch, tmp_path):
    monkeypatch.setattr(JetStreamEngine, "start", _broken_start)
    opts = make_options(jetstream=True, store_dir=str(tmp_path))
    server = Server(opts)
    with pytest.raises(JetStreamStartError, match="something_missing"):
        await server.start()
    assert server.jetstream is None and not server.running
    assert server._listener is None  # shut down again: the client port is free
    monkeypatch.undo()
    async with running_server(jetstream=True, store_dir=str(tmp_path)) as s:  # the same store dir works after
        assert s.jetstream is not None


@pytest.fixture
def natsd_logger_restored():
    """run() installs natsd's stderr handler; give the next tests the logger as it was."""
    saved = (list(logger.handlers), logger.propagate, logger.level)
    yield
    for h in list(logger.handlers):
        logger.removeHandler(h)
    for h in saved[0]:
        logger.addHandler(h)
    logger.propagate, logger.level = saved[1], saved[2]


def test_run_logs_a_fatal_line_and_exits_non_zero(monkeypatch, tmp_path, capfd, natsd_logger_restored):
    monkeypatch.setattr(JetStreamEngine, "start", _broken_start)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    opts = make_options(jetstream=True, store_dir=str(tmp_path), port=port)
    server = Server(opts)
    assert server.run() == 1  # run() sets up natsd's own log format on stderr
    fatal = [ln.split("] ", 2)[-1] for ln in capfd.readouterr().err.splitlines() if "[FTL]" in ln]
    assert fatal == [
        "Can't start JetStream: AttributeError: 'JetStreamEngine' object has no attribute 'something_missing'"
    ]
    with socket.socket() as again:  # nothing left listening
        again.bind(("127.0.0.1", port))


async def test_without_jetstream_nothing_changes(monkeypatch):
    monkeypatch.setattr(JetStreamEngine, "start", _broken_start)
    async with running_server() as s:  # JetStream not asked for: the engine is never built
        assert s.jetstream is None and s.running
