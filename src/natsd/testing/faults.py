"""Faults on cue, injected inside the server's store and transports (never simulated by the test).

* **Disk**: the file store writes message blocks through ``natsd.store.file.block._pwrite`` /
  ``_fsync`` and consumer state (``o.dat``, ``o.log``) through
  ``natsd.store.file.consumer_state._write`` / ``_fsync`` (module names kept for exactly this).
  :class:`DiskFaults` replaces them once per process with wrappers that, for a file descriptor
  under an armed server's store directory, raise ``OSError(ENOSPC)`` (or any errno) or sleep
  before the real ``fsync``. Other servers, and the same server once the fault is cleared, pass
  straight through. The store then does what it does on a real full disk: a message write is cut
  back and its publish answered with 503 "insufficient resources"; a consumer state write leaves
  the older state on disk and is tried again by the next flush (as nats-server's consumer store
  does), the consumer going on in memory. Both resume by themselves when space is back. Stream
  and consumer ``meta.inf`` writes are not reached.
* **Transports**: :meth:`Faults.cut_client` and :meth:`Faults.cut_leaf` ``abort()`` the server's
  side of a connection (no flush, no goodbye: what a pulled cable or a reset looks like to the
  peer). :meth:`Faults.slow_consumer` lowers one connection's ``max_pending`` so the next burst
  it cannot take makes the server treat it as a slow consumer, as it would a client that stops
  reading.
* **Memory pressure**: :meth:`Faults.memory_pressure` lowers the server-wide memory store limit
  (``max_memory_store``) to what memory streams already hold plus ``headroom``, so the next
  publish beyond it gets the 10023 "insufficient resources" the reference sends.
* **Crash**: see :meth:`natsd.testing.InProcessServer.crash`.
"""

from __future__ import annotations

import contextlib
import errno as _errno
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.server.server import Server

__all__ = ["Faults", "DiskFaults"]


class _DiskRule:
    __slots__ = ("root", "errno", "fsync_delay")

    def __init__(self, root: str) -> None:
        self.root = root
        self.errno = 0  # 0: writes succeed
        self.fsync_delay = 0.0


class DiskFaults:
    """The process-wide hook on the file store's write system calls (installed on first use)."""

    _lock = threading.Lock()
    _rules: dict[str, _DiskRule] = {}
    _installed = False

    @classmethod
    def rule(cls, root: str) -> _DiskRule:
        cls._install()
        root = os.path.realpath(root)
        with cls._lock:
            r = cls._rules.get(root)
            if r is None:
                r = cls._rules[root] = _DiskRule(root)
            return r

    @classmethod
    def forget(cls, root: str) -> None:
        with cls._lock:
            cls._rules.pop(os.path.realpath(root), None)

    @classmethod
    def _match(cls, fd: int) -> _DiskRule | None:
        rules = cls._rules
        if not rules:
            return None  # no fault armed anywhere: no lookup at all
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")  # which store this descriptor belongs to
        except OSError:
            return None
        for root, r in list(rules.items()):
            if path.startswith(root + os.sep):
                return r
        return None

    @classmethod
    def _install(cls) -> None:
        with cls._lock:
            if cls._installed:
                return
            # Imported here: a server without faults never loads this module's hooks.
            from natsd.store.file import block, consumer_state

            real_pwrite: Callable[..., int] = block._pwrite
            real_write: Callable[..., int] = consumer_state._write
            real_fsync = block._fsync

            def pwrite(fd: int, data, off: int) -> int:
                r = cls._match(fd)
                if r is not None and r.errno:
                    raise OSError(r.errno, os.strerror(r.errno))
                return real_pwrite(fd, data, off)

            def write(fd: int, data) -> int:
                r = cls._match(fd)
                if r is not None and r.errno:
                    raise OSError(r.errno, os.strerror(r.errno))
                return real_write(fd, data)

            def fsync(fd: Any) -> None:  # (os.fsync's own signature: an int or a file object)
                r = cls._match(fd)
                if r is not None:
                    if r.errno:
                        raise OSError(r.errno, os.strerror(r.errno))
                    if r.fsync_delay:
                        time.sleep(r.fsync_delay)  # a slow disk blocks whoever fsyncs, in real time
                real_fsync(fd)

            block._pwrite = pwrite
            block._fsync = fsync
            consumer_state._write = write
            consumer_state._fsync = fsync
            cls._installed = True


class Faults:
    """The faults of one in-process server (``server.faults``)."""

    def __init__(self, owner: "FaultTarget") -> None:
        self._owner = owner
        self._saved_max_memory: int | None = None

    # -- disk --------------------------------------------------------------------------------------
    def _rule(self) -> _DiskRule:
        return DiskFaults.rule(self._owner.store_dir)

    def disk_full(self, err: int = _errno.ENOSPC) -> None:
        """From now on every message-block write or fsync of this server fails with ``err``."""
        self._rule().errno = err

    def disk_ok(self) -> None:
        """Space is back: writes succeed again (the server recovers by itself)."""
        self._rule().errno = 0

    @contextlib.contextmanager
    def disk_full_while(self, err: int = _errno.ENOSPC) -> Iterator[None]:
        """``with server.faults.disk_full_while(): ...``: full inside the block, fine after."""
        self.disk_full(err)
        try:
            yield
        finally:
            self.disk_ok()

    def slow_fsync(self, seconds: float) -> None:
        """Every fsync of this server's message blocks takes ``seconds`` longer (real time: it
        blocks the thread that fsyncs, as a slow disk does); 0 restores normal speed."""
        self._rule().fsync_delay = seconds

    def clear(self) -> None:
        """Remove every fault of this server (called when it stops)."""
        DiskFaults.forget(self._owner.store_dir)
        self.memory_ok()

    # -- transports ----------------------------------------------------------------------------
    def _server(self) -> "Server":
        srv = self._owner.server
        if srv is None:
            raise RuntimeError("the server is not running")
        return srv

    def cut_client(self, name: str | None = None) -> int:
        """Abort the server's side of every client connection (or those whose CONNECT ``name`` is
        ``name``): the peer sees the connection reset, queued output is dropped. Returns how many."""
        n = 0
        for c in list(self._server().clients.values()):
            if name is not None and c.name != name:
                continue
            if c.transport is not None:
                c.transport.abort()
                n += 1
        return n

    def cut_leaf(self, account: str | None = None) -> int:
        """Abort every leafnode link of this server (or of one local account). Returns how many;
        a solicited link reconnects by itself after its reconnect delay."""
        leafs = self._server().leafnodes
        if leafs is None:
            return 0
        n = 0
        for acc, links in list(leafs.links.items()):
            if account is not None and acc != account:
                continue
            for link in list(links):
                if link.transport is not None:
                    link.transport.abort()
                    n += 1
        return n

    def slow_consumer(self, name: str | None = None, max_pending: int = 1) -> int:
        """Make connections (all, or those named ``name``) slow consumers: their pending output
        limit drops to ``max_pending`` bytes, so the next delivery they cannot take at once closes
        them with ``-ERR 'Slow Consumer'`` as a client that stopped reading would be."""
        n = 0
        for c in list(self._server().clients.values()):
            if name is None or c.name == name:
                c.max_pending = max_pending
                n += 1
        return n

    # -- memory ----------------------------------------------------------------------------------
    def memory_pressure(self, headroom: int = 0) -> None:
        """Memory streams may hold only ``headroom`` more bytes than they do now, server-wide: once
        they are over, publishes to them get 10023 "insufficient resources" (file streams are not
        affected)."""
        engine = self._server().jetstream
        if engine is None:
            raise RuntimeError("JetStream is not enabled")
        if self._saved_max_memory is None:
            self._saved_max_memory = engine.max_memory
        streams = self._memory_streams()
        self._set_max_memory(sum(s.store.bytes_used for s in streams) + headroom)

    def memory_ok(self) -> None:
        """Give the memory limit back."""
        if self._saved_max_memory is not None and self._owner.server is not None:
            self._set_max_memory(self._saved_max_memory)
        self._saved_max_memory = None

    def _memory_streams(self) -> list:
        engine = self._server().jetstream
        assert engine is not None
        return [s for acc in engine.accounts.values() for s in acc.streams.values() if s._ut == 0]

    def _set_max_memory(self, limit: int) -> None:
        engine = self._server().jetstream
        assert engine is not None
        engine.max_memory = limit
        # Each stream keeps its type's limit for the publish path (Stream._max_used).
        for s in self._memory_streams():
            s._max_used = limit


class FaultTarget(Protocol):
    """What :class:`Faults` needs from its owner (the in-process server)."""

    @property
    def store_dir(self) -> str: ...

    @property
    def server(self) -> "Server | None": ...
