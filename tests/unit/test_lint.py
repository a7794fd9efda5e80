"""ruff over ``src/`` and ``tests/``: the lint rules and the format (configured in ``[tool.ruff]`` in
pyproject.toml). By hand: ``.venv/bin/ruff check src tests`` and ``.venv/bin/ruff format --check src tests``
(``ruff format src tests`` applies the format; ``ruff check --fix`` what lint can fix by itself).

Two tests, no skips: lint and format fail separately, so a failure says which one to run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    # ruff is installed in the same environment as the interpreter running the tests (the `test`
    # extra); `python -m ruff` finds it there whatever PATH holds.
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache", "src", "tests"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=110,
    )


@pytest.mark.timeout(120)
def test_ruff_check_passes():
    proc = _ruff("check", "--output-format", "concise")
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 0, f"ruff check found problems (ruff check src tests):\n{out[-8000:]}"


@pytest.mark.timeout(120)
def test_ruff_format_check_passes():
    proc = _ruff("format", "--check")
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 0, f"files need formatting (ruff format src tests):\n{out[-8000:]}"
