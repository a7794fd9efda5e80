"""Fixtures of the snapshot/restore tests: two in-process engines over FakePorts on a ManualClock."""

from __future__ import annotations

import pytest

from tests.helpers.fakeports import JsEnv


@pytest.fixture
def env(tmp_path):
    e = JsEnv(str(tmp_path / "a"))
    yield e
    e.stop()


@pytest.fixture
def env2(tmp_path):
    e = JsEnv(str(tmp_path / "b"))
    yield e
    e.stop()
