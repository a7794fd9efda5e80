"""The JetStream engine on FakePorts + ManualClock that most of these tests drive (``env``).
Files that check more at teardown (atomic and fast batches) define their own ``env``."""

from __future__ import annotations

import pytest

from tests.helpers.fakeports import JsEnv


@pytest.fixture
def env(tmp_path):
    e = JsEnv(str(tmp_path))
    yield e
    e.stop()
