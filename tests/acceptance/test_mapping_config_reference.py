"""Bad subject mappings: `-t` refuses the same file as nats-server, with the same messages on the
same lines (issue 29). Columns are not compared: nats-server counts a quoted key from inside its
quotes and a map from its closing brace, natsd from where each starts."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.acceptance.test_config_files import run_natsd
from tests.helpers.servers import reference_binary

pytestmark = [pytest.mark.acceptance, pytest.mark.reference, pytest.mark.timeout(60)]

CONF = Path(__file__).resolve().parents[1] / "data" / "conf" / "bad_mappings.conf"
_LINE = re.compile(r"^(?:nats-server: |natsd: )?(?P<file>[^:]+):(?P<line>\d+):\d+: (?P<msg>.*)$")


def _errors(stderr: str) -> set[tuple[int, str]]:
    out = set()
    for line in stderr.splitlines():
        m = _LINE.match(line)
        if m:
            out.add((int(m["line"]), m["msg"]))
    return out


def test_mapping_errors_match_reference():
    binary = reference_binary()
    if binary is None:
        pytest.skip("reference nats-server not installed")
    ref = subprocess.run([binary, "-t", "-c", str(CONF)], capture_output=True, text=True, timeout=30)
    ours = run_natsd("-t", "-c", str(CONF))
    assert ref.returncode != 0 and ours.returncode != 0
    expected = _errors(ref.stderr)
    assert len(expected) == 9, ref.stderr  # every bad mapping in the file, none of the good ones
    assert _errors(ours.stderr) == expected
