"""pytest fixtures for testing applications against natsd (issue 26).

Activation: installed natsd registers this module through the ``pytest11`` entry point (under
this module's own name, so ``-p natsd.testing.pytest_plugin`` also works where entry points are
off). It is inert unless used: it adds one command-line option and fixtures whose names all start
with ``natsd_``; no hook changes collection or other tests, no fixture is autouse, and nothing
imports the server until a fixture runs.

Fixtures
--------
``natsd_server``        function scope, async tests: an :class:`~natsd.testing.InProcessServer` on
                        the test's loop (JetStream on, temporary store, free port).
``natsd_client``        a connected nats-py client of ``natsd_server`` (closed after the test).
``natsd_js``            ``natsd_client.jetstream()``.
``natsd_clock``         the server's clock: ``natsd_clock.advance(30)`` (then let the loop run:
                        ``await natsd_server.advance(30)`` does both).
``natsd_faults``        ``natsd_server.faults`` (disk full, slow fsync, cut client/leaf, slow
                        consumer, memory pressure).
``natsd_sync_server``   function scope, for sync tests: a :class:`~natsd.testing.SyncServer`
                        (its own loop thread).
``natsd_module_server`` / ``natsd_session_server``: a SyncServer shared by a module / the session
                        (usable from sync and async tests: connect to ``.url``).

Options: ``@pytest.mark.natsd(max_payload=1024, config="...", jetstream={...})`` on a test (or its
module/class) gives the function-scoped servers nats-server options; shared servers take theirs
from ``natsd_server_options`` (override that fixture in a conftest, module or session scope).

``--nats-server=PATH`` runs the same fixtures against a real nats-server subprocess per test
(per module/session for the shared ones). Time control and faults are then unavailable: a test
that asks for ``natsd_clock`` / ``natsd_faults`` or calls ``advance`` is skipped with a reason.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Iterator

import pytest

_async_fixture: Any
try:  # async fixtures: pytest-asyncio's decorator works in its strict and auto modes alike
    from pytest_asyncio import fixture as _async_fixture
except ImportError:  # pragma: no cover - without pytest-asyncio only the sync fixtures are usable
    _async_fixture = pytest.fixture

__all__ = ["pytest_addoption", "pytest_configure"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("natsd", "natsd testing fixtures")
    group.addoption(
        "--nats-server",
        dest="natsd_reference",
        default=None,
        metavar="PATH",
        help="run the natsd_* fixtures against this nats-server binary (subprocess per test) "
        "instead of an in-process natsd; time control and faults are then skipped",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "natsd(**options): nats-server options for the natsd_* server fixtures")


def _reference(config: pytest.Config) -> str | None:
    return config.getoption("natsd_reference", None)


# InProcessServer's own arguments, not server options: a subprocess has none of them.
_IN_PROCESS_ONLY = ("clock", "capture_logs", "log_level")


def _for_subprocess(opts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in opts.items() if k not in _IN_PROCESS_ONLY}


def _marker_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    # Closest marker last so a test's own options win over its module's.
    for mark in reversed(list(request.node.iter_markers("natsd"))):
        opts.update(mark.kwargs)
    return opts


class _ReferenceAdvance:
    """Wraps a subprocess server so ``advance`` / ``faults`` skip the test with a reason."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def advance(self, seconds: Any) -> None:
        pytest.skip("time control needs natsd in-process (running against --nats-server)")

    @property
    def clock(self) -> Any:
        pytest.skip("time control needs natsd in-process (running against --nats-server)")

    @property
    def faults(self) -> Any:
        pytest.skip("faults need natsd in-process (running against --nats-server)")


@_async_fixture
async def natsd_server(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    opts = _marker_options(request)
    ref = _reference(request.config)
    if ref:
        from natsd.testing.subprocess import SubprocessServer

        async with SubprocessServer(binary=ref, **_for_subprocess(opts)) as proc:
            yield _ReferenceAdvance(proc)
        return
    from natsd.testing.server import InProcessServer

    async with InProcessServer(**opts) as srv:
        yield srv


@_async_fixture
async def natsd_client(natsd_server: Any) -> AsyncIterator[Any]:
    import nats

    nc = await nats.connect(natsd_server.url)
    try:
        yield nc
    finally:
        await nc.close()


@pytest.fixture
def natsd_js(natsd_client: Any) -> Any:
    return natsd_client.jetstream()


@pytest.fixture
def natsd_clock(natsd_server: Any) -> Any:
    return natsd_server.clock


@pytest.fixture
def natsd_faults(natsd_server: Any) -> Any:
    return natsd_server.faults


def _sync_server(config: pytest.Config, opts: dict[str, Any]) -> Iterator[Any]:
    ref = _reference(config)
    if ref:
        from natsd.testing.subprocess import SubprocessServer

        with SubprocessServer(binary=ref, **_for_subprocess(opts)) as proc:
            yield _ReferenceSync(proc)
        return
    from natsd.testing.sync import SyncServer

    with SyncServer(**opts) as srv:
        yield srv


class _ReferenceSync(_ReferenceAdvance):
    def advance(self, seconds: Any) -> None:  # type: ignore[override]
        pytest.skip("time control needs natsd in-process (running against --nats-server)")


@pytest.fixture(scope="session")
def natsd_server_options() -> dict[str, Any]:
    """Options of the module/session servers (override in a conftest)."""
    return {}


@pytest.fixture
def natsd_sync_server(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from _sync_server(request.config, _marker_options(request))


@pytest.fixture(scope="module")
def natsd_module_server(request: pytest.FixtureRequest, natsd_server_options: dict[str, Any]) -> Iterator[Any]:
    yield from _sync_server(request.config, dict(natsd_server_options))


@pytest.fixture(scope="session")
def natsd_session_server(request: pytest.FixtureRequest, natsd_server_options: dict[str, Any]) -> Iterator[Any]:
    yield from _sync_server(request.config, dict(natsd_server_options))
