"""Message schedules with nats.js v3 unchanged (its ``schedule`` / ``cancelSchedule`` publish
options), against nats-server 2.15.1 and natsd (``tests/compat/js/schedules.mjs``)."""

from __future__ import annotations

import pytest

from tests.acceptance.test_compat_natsjs import ensure_natsjs, JS_DIR
from tests.compat.harness import ScenarioRunner, assert_ok, kinds

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def natsjs(tmp_path_factory) -> ScenarioRunner:
    node = ensure_natsjs()
    return ScenarioRunner(
        command=lambda name: ([node, f"{name}.mjs"], JS_DIR), workdir=tmp_path_factory.mktemp("natsjs-schedules")
    )


@pytest.mark.parametrize("kind", kinds())
def test_schedules_with_natsjs(natsjs, kind):
    res = natsjs.result("schedules", kind)
    assert_ok(res)
    assert (res["atSeq"], res["everySeq"]) == (2, 3)
    assert res["bad"]["api"]["err_code"] == 10189, res["bad"]
    assert res["once"] == {"data": "later", "scheduler": "sch.schedule.once", "next": "purge"}
    assert res["every"] == {"data": "42", "scheduler": "sch.schedule.every", "ttl": "5s", "nextIsTime": True}
    assert res["cancelled"] is True and res["scheduleGone"] is True
