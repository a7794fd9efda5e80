"""natsd's own features (issue 27) with nats.js v3 unchanged (``tests/compat/js/natsd_features.mjs``):
``natsd.*`` metadata keys switch them on in natsd; nats-server keeps the keys and ignores them."""

from __future__ import annotations

import pytest

from tests.acceptance.test_compat_natsjs import JS_DIR, ensure_natsjs
from tests.compat.harness import ScenarioRunner, assert_ok, kinds

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def natsjs(tmp_path_factory) -> ScenarioRunner:
    node = ensure_natsjs()
    return ScenarioRunner(
        command=lambda name: ([node, f"{name}.mjs"], JS_DIR), workdir=tmp_path_factory.mktemp("natsjs-features")
    )


@pytest.mark.parametrize("kind", kinds())
def test_natsd_features_with_natsjs(natsjs, kind):
    res = natsjs.result("natsd_features", kind)
    assert_ok(res)
    assert res["consumerMetadata"] == "dlq.wq"  # both servers keep the key
    if kind == "reference":  # the features are off: no dead letters, no schema, no keep-last
        assert res["advertised"] is None
        assert res["deadLetters"] == [] and res["wqLeft"] == 1  # the terminated one is acked
        assert res["bad"]["name"] == "NoError" and res["ordMsgs"] == 2
        assert res["badSetting"]["name"] == "NoError"
        assert res["kv"] == {"a": None, "b": None, "msgs": 0}
        assert [len(r) for r in res["partitionRounds"]] == [10, 2]  # no key: a plain batch
        return
    assert res["advertised"] == ["dead_letter", "keep_last_under_max_age", "partition_key", "schemas"]
    assert res["deadLetters"] == [
        {"data": "terminate me", "reason": "Terminated", "text": "schema v2 needed", "seq": "1", "xid": "t"},
        {"data": "never acked", "reason": "MaxDeliveries", "text": "", "seq": "2", "xid": ""},
    ]
    assert res["wqLeft"] == 0
    assert res["goodSeq"] == 1 and res["ordMsgs"] == 1
    assert res["bad"]["api"]["err_code"] == 19010, res["bad"]
    assert res["bad"]["message"].startswith("message on orders.new does not match schema inline:orders.*")
    assert res["badSetting"]["api"]["err_code"] == 19001
    assert res["kv"] == {"a": "2", "b": "x", "msgs": 2}
    # One message per key in flight: each fetch gets the next message of each of the 3 keys.
    assert res["partitionRounds"] == [
        [["pk.k0", 1], ["pk.k1", 2], ["pk.k2", 3]],
        [["pk.k0", 4], ["pk.k1", 5], ["pk.k2", 6]],
    ]
