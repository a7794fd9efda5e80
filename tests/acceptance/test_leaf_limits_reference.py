"""JWT account limits on leafnode links (``limits.leaf`` of the account claims), side by side with
nats-server: an operator-mode hub (natsd or nats-server, same config) whose account allows one
leaf connection takes the first leaf and refuses the second after its INFO with
``-ERR 'maximum account active connections exceeded'``; the leaf keeps retrying and links once the
first is gone."""

from __future__ import annotations

import pytest

from tests.acceptance.test_leaf_secure_reference import HUBS, Hub, leaf_conf, run_leaf, wait_until
from tests.helpers.jwtgen import operator_setup
from tests.helpers.servers import reference_binary

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.reference,
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]

REFUSED = "maximum account active connections exceeded"


def _hub_body(ids: dict) -> str:
    acc = ids["account_pub"]
    return (
        f'operator: "{ids["operator_jwt_path"]}"\nresolver: MEMORY\n'
        f'resolver_preload: {{ {acc}: "{ids["account_jwt"]}" }}\n'
        "leafnodes { port: LEAF_PORT }\n"
    )


def _remote(hub: Hub, ids: dict) -> str:
    return f'url: "nats-leaf://127.0.0.1:{hub.leaf_port}", credentials: "{ids["creds_path"]}"'


@pytest.mark.timeout(240)
@pytest.mark.parametrize("leaf_kind", ["reference", "natsd"])
async def test_account_leaf_limit(tmp_path, leaf_kind):
    ids = operator_setup(tmp_path, account_limits={"leaf": 1})
    seen = {}
    for kind in HUBS:
        d = tmp_path / kind
        d.mkdir()
        hub = Hub(kind, d, _hub_body(ids))
        try:
            first = run_leaf(leaf_kind, d / "first", leaf_conf(d, "FIRST", _remote(hub, ids)))
            try:
                await wait_until(hub.links, what="first leaf linked")
                second = run_leaf(leaf_kind, d / "second", leaf_conf(d, "SECOND", _remote(hub, ids)))
                try:
                    await wait_until(lambda: REFUSED in second.log(), what=f"second leaf refused by {kind}")
                    links = hub.links()
                    assert [ln["name"] for ln in links] == ["FIRST"]
                    first.stop()
                    # The second leaf retries (with backoff) and takes the freed place.
                    try:
                        await wait_until(
                            lambda: [ln["name"] for ln in hub.links()] == ["SECOND"],
                            timeout=30,
                            what="second leaf linked after the first left",
                        )
                    except AssertionError as e:
                        raise AssertionError(
                            f"{e} ({kind} hub)\nhub:\n{hub.proc.log()[-3000:]}\nsecond leaf:\n{second.log()[-3000:]}"
                        ) from None
                finally:
                    second.stop()
            finally:
                first.stop()
            seen[kind] = True
        finally:
            hub.stop()
    assert seen == {"reference": True, "natsd": True}


@pytest.mark.timeout(180)
async def test_account_without_leaf_limit_entry(tmp_path):
    """An account JWT whose ``limits`` has no ``leaf`` entry: whatever nats-server does with it,
    natsd does the same (linked or refused)."""
    ids = operator_setup(tmp_path, account_limits={"leaf": None})
    outcome = {}
    for kind in HUBS:
        d = tmp_path / kind
        d.mkdir()
        hub = Hub(kind, d, _hub_body(ids))
        try:
            leaf = run_leaf("reference", d / "leaf", leaf_conf(d, "LEAF", _remote(hub, ids)))
            try:
                await wait_until(lambda: hub.links() or REFUSED in leaf.log(), what="linked or refused")
                outcome[kind] = "linked" if hub.links() else "refused"
            finally:
                leaf.stop()
        finally:
            hub.stop()
    assert outcome["natsd"] == outcome["reference"], outcome
