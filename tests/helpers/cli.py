"""Run ``natsctl`` from tests: in-process (fast, captured) or through the installed console script.

``run_cli(url, *argv, stdin="")`` calls ``natsd.cli.main.main`` in this process with stdout/stderr captured
and stdin replaced (so it is never a terminal) and returns a :class:`CliResult`. ``spawn_cli(url, *argv)``
starts the real ``natsctl`` script (``<venv>/bin/natsctl``) as a subprocess, for commands that run until
something else happens (``sub``, ``reply``, ``consumer events``) and for checking the script itself.

``server_kinds()`` are the pytest params for a module-scoped server fixture: the reference nats-server
(marked ``reference``) and natsd (which must start with JetStream: a failure fails the test, never skips it).

The CLI test modules share their helpers from here (the ``url`` fixture, the module server's URL
with every stream deleted, is in tests/integration/conftest.py)::

    from tests.helpers.cli import module_server, ok

    server = module_server("cli-kv")  # one server per kind for the whole module

``url`` is that server's URL with every stream deleted first; ``ok(url, *argv)`` is ``run_cli`` that must succeed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.servers import reference_binary, start_server

REPO = Path(__file__).resolve().parents[2]


@dataclass
class CliResult:
    rc: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def __str__(self) -> str:  # shown by pytest when an assertion on the result fails
        return f"rc={self.rc}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


#: natsctl reads natscli contexts from $XDG_CONFIG_HOME/nats; tests get an empty one (not the user's), unless
#: a test sets XDG_CONFIG_HOME itself (monkeypatch.setenv) to work with contexts.
_EMPTY_CONFIG_HOME = tempfile.mkdtemp(prefix="natsctl-test-config-")


def run_cli(url: str | None, *argv: str, stdin: str = "") -> CliResult:
    """``natsctl -s URL argv...`` in-process."""
    from natsd.cli.main import main

    args = (["-s", url] if url else []) + [str(a) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    isolate = "XDG_CONFIG_HOME" not in os.environ
    if isolate:
        os.environ["XDG_CONFIG_HOME"] = _EMPTY_CONFIG_HOME
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(args)
    finally:
        sys.stdin = old_stdin
        if isolate:
            os.environ.pop("XDG_CONFIG_HOME", None)
    return CliResult(rc, out.getvalue(), err.getvalue())


def natsctl_script() -> str:
    cand = Path(sys.executable).parent / "natsctl"
    return str(cand) if cand.exists() else str(REPO / ".venv" / "bin" / "natsctl")


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(REPO / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("NATS_URL", None)
    env.setdefault("XDG_CONFIG_HOME", _EMPTY_CONFIG_HOME)
    return env


def spawn_cli(url: str | None, *argv: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.Popen:
    """Start the real console script; read ``.stdout``/``.stderr`` (text) and ``wait()`` on it."""
    args = [natsctl_script()] + (["-s", url] if url else []) + [str(a) for a in argv]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=stdin, text=True, env=cli_env())


def run_script(url: str | None, *argv: str, input: str | None = None, timeout: float = 30) -> CliResult:
    """Run the real console script to completion."""
    args = [natsctl_script()] + (["-s", url] if url else []) + [str(a) for a in argv]
    p = subprocess.run(
        args, capture_output=True, text=True, input=input if input is not None else "", timeout=timeout, env=cli_env()
    )
    return CliResult(p.returncode, p.stdout, p.stderr)


def wait_for_line(proc: subprocess.Popen, needle: str, limit: int = 50, stream: str = "stdout") -> list[str]:
    """Read the process's stdout (or stderr) until a line contains ``needle`` (it announces readiness)."""
    lines = []
    pipe = getattr(proc, stream)
    assert pipe is not None
    for _ in range(limit):
        line = pipe.readline()
        if not line:
            break
        lines.append(line)
        if needle in line:
            return lines
    raise AssertionError(f"{needle!r} not seen on {stream}; got {lines!r}")


def server_kinds() -> list:
    return [pytest.param("reference", marks=pytest.mark.reference), pytest.param("natsd")]


def start_kind(kind: str, tmp_path: Path, *extra: str):
    """Start ``kind`` for a module fixture, skipping only when the reference binary is missing here."""
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server binary not installed")
    return start_server(kind, tmp_path, *extra)


def module_server(prefix: str):
    """A module-scoped ``server`` fixture, once per :func:`server_kinds`, in a temporary ``<prefix>-<kind>`` dir."""

    @pytest.fixture(scope="module", params=server_kinds())
    def server(request, tmp_path_factory):
        srv = start_kind(request.param, tmp_path_factory.mktemp(f"{prefix}-{request.param}"))
        yield srv
        srv.stop()

    return server


def ok(url: str | None, *argv: str, **kw: Any) -> CliResult:
    """``run_cli`` that must exit 0 (the failed result, with its output, is the assertion message)."""
    r = run_cli(url, *argv, **kw)
    assert r.rc == 0, r
    return r


def clean_streams(url: str) -> None:
    """Delete every stream, so each test starts from an empty account on the shared module server."""
    r = run_cli(url, "stream", "ls", "-j")
    assert r.rc == 0, r
    for name in r.json():
        d = run_cli(url, "stream", "rm", name, "-f")
        assert d.rc == 0, d


def close_proc(proc: subprocess.Popen) -> None:
    """Kill (if still running), reap, and close the pipes of a spawned natsctl (no ResourceWarnings)."""
    if proc.poll() is None:
        proc.kill()
    try:
        proc.communicate(timeout=10)
    except (ValueError, OSError, subprocess.TimeoutExpired):
        pass
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass
