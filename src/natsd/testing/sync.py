""":class:`SyncServer`: an :class:`~natsd.testing.server.InProcessServer` on a loop thread of its
own, for synchronous code (a Django/Flask test, a script, a sync pytest test)::

    with SyncServer() as srv:
        nc = ... connect to srv.url from any thread or loop ...
        srv.advance(30)
        srv.faults.disk_full()

Every method runs on the server's loop thread and waits for it (``advance``, ``crash``,
``restart``, the fault and introspection calls), so the test's own thread never touches the
server's objects concurrently.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import threading
from typing import Any, Callable, TypeVar

from natsd.testing.server import InProcessServer

__all__ = ["SyncServer"]

T = TypeVar("T")


class _SyncFaults:
    def __init__(self, owner: "SyncServer") -> None:
        self._owner = owner

    def __getattr__(self, name: str) -> Callable[..., Any]:
        fn = getattr(self._owner._inner().faults, name)
        if not callable(fn):
            return fn

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._owner.call(lambda: fn(*args, **kwargs))

        return call


class SyncServer:
    """Same options as :class:`InProcessServer`; runs it on a daemon loop thread."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self.inner: InProcessServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.faults = _SyncFaults(self)

    # -- the loop thread ---------------------------------------------------------------------------
    def _run(self, coro: Any, timeout: float = 60) -> Any:
        assert self._loop is not None, "not started"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def call(self, fn: Callable[[], T], timeout: float = 60) -> T:
        """Run ``fn()`` on the server's loop thread and return its result."""

        async def on_loop() -> T:
            return fn()

        result: T = self._run(on_loop(), timeout)
        return result

    def start(self) -> "SyncServer":
        if self._thread is not None:
            return self
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=main, name="natsd-test-server", daemon=True)
        self._thread.start()
        ready.wait()

        async def make() -> InProcessServer:
            # Built on the loop thread: the server's clock and its loop belong together.
            return await InProcessServer(**self._kwargs).start()

        try:
            self.inner = self._run(make())
        except BaseException:
            self._stop_loop()
            raise
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        try:
            if self.inner is not None:
                self._run(self.inner.stop())
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def finish() -> None:
            # Tasks left by clients of this loop (none of ours): cancel them before closing.
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await loop.shutdown_asyncgens()

        try:
            asyncio.run_coroutine_threadsafe(finish(), loop).result(10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()
            self._loop = self._thread = None

    def __enter__(self) -> "SyncServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the InProcessServer API, synchronously -----------------------------------------------------------
    def _inner(self) -> InProcessServer:
        if self.inner is None:
            raise RuntimeError("the server is not running")
        return self.inner

    @property
    def url(self) -> str:
        return self._inner().url

    @property
    def port(self) -> int:
        return self._inner().port

    @property
    def store_dir(self) -> str:
        return self._inner().store_dir

    @property
    def captured(self) -> Any:
        return self._inner().captured

    @property
    def clock(self) -> Any:
        return self._inner().clock

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None
        return self._loop

    def advance(self, seconds: float | _dt.timedelta) -> None:
        self._run(self._inner().advance(seconds))

    def crash(self) -> None:
        self._run(self._inner().crash())

    def restart(self) -> None:
        self._run(self._inner().restart())

    def stream_info(self, name: str, account: str = "$G") -> dict:
        return self.call(lambda: self._inner().stream_info(name, account))

    def consumer_info(self, stream: str, name: str, account: str = "$G") -> dict:
        return self.call(lambda: self._inner().consumer_info(stream, name, account))
