"""examples/testing_app (docs/testing.md) runs as its own pytest project, through natsd's pytest
plugin, and passes in seconds (issue 26)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "testing_app"


def test_example_suite_passes():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        env=env,
        timeout=170,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "6 passed" in r.stdout, r.stdout[-2000:]
