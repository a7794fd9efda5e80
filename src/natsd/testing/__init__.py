"""natsd for testing and embedding: a JetStream server in your process, time you control, faults
on cue. See docs/testing.md ("Testing your application with natsd").

* :class:`InProcessServer`: natsd on the running asyncio loop (``async with``), JetStream on, a
  temporary store, a free port, nats-server options as keyword arguments or config text.
* :class:`SyncServer`: the same on a loop thread of its own, for synchronous code.
* :class:`SubprocessServer`: ``python -m natsd`` (or a real ``nats-server``) as a child process,
  with the same lifecycle API (no time control: timers run in real time).
* :class:`TestClock`: the clock tests move with ``advance(seconds)``.
* pytest fixtures: ``pytest -p natsd.testing.pytest_plugin`` (see that module).

Names are loaded on first use: ``import natsd.testing`` costs nothing until a server starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from natsd.testing.clock import TestClock
    from natsd.testing.faults import Faults
    from natsd.testing.server import Captured, InProcessServer
    from natsd.testing.subprocess import SubprocessServer
    from natsd.testing.sync import SyncServer

__all__ = ["InProcessServer", "SyncServer", "SubprocessServer", "TestClock", "Faults", "Captured"]

_WHERE = {
    "InProcessServer": "natsd.testing.server",
    "Captured": "natsd.testing.server",
    "SyncServer": "natsd.testing.sync",
    "SubprocessServer": "natsd.testing.subprocess",
    "TestClock": "natsd.testing.clock",
    "Faults": "natsd.testing.faults",
}


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'natsd.testing' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value
