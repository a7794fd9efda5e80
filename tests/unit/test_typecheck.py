"""mypy over ``src/`` passes: the typed seams (``Stream.store: StreamStore``, the ``Ports`` protocol and
its server implementation, the store protocols and their two implementations) are checked on every
``make test``.

The configuration is ``[tool.mypy]`` in pyproject.toml (the files to check come from there). Run it by
hand with ``PYTHONPATH=src .venv/bin/python -m mypy``. The cache goes to a temporary directory, so the
run does not depend on (or leave) a cache in the work tree; a cold run takes ~10-20 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_mypy_passes_on_src(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache"), "--no-error-summary"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 0, f"mypy found problems (PYTHONPATH=src python -m mypy):\n{out[-8000:]}"
