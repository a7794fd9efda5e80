"""natsd.server.auth.trust and natsd.server.auth.imports: account claims to JetStream limits and
permissions, and subject mapping for imports."""

from __future__ import annotations

import pytest

from natsd.config import jwt as J
from natsd.server.auth.imports import map_subject
from natsd.server.auth.trust import js_limits, user_permissions
from tests.helpers.identities import Identity, account_claims, operator_setup

pytestmark = pytest.mark.unit


def _account(**kw) -> J.AccountClaims:
    op = operator_setup().operator
    acc = Identity.new("account")
    return J.decode_account(op.sign(account_claims(acc, "A", **kw)))


def test_js_limits_from_claims():
    assert js_limits(_account()) is None  # zero storage: JetStream off
    lim = js_limits(
        _account(
            jetstream={
                "mem_storage": -1,
                "disk_storage": 1000,
                "streams": 3,
                "consumer": -1,
                "max_ack_pending": 7,
                "disk_max_stream_bytes": 500,
                "max_bytes_required": True,
            }
        )
    )
    assert (
        lim.max_memory,
        lim.max_storage,
        lim.max_streams,
        lim.max_consumers,
        lim.max_ack_pending,
        lim.storage_max_stream_bytes,
        lim.memory_max_stream_bytes,
        lim.max_bytes_required,
    ) == (-1, 1000, 3, -1, 7, 500, -1, True)
    tiered = js_limits(
        _account(tiered={"R3": {"disk_storage": 9}, "R1": {"mem_storage": 5, "disk_storage": 6, "streams": 2}})
    )
    assert (tiered.max_memory, tiered.max_storage, tiered.max_streams) == (5, 6, 2)
    assert js_limits(_account(tiered={"R1": {"mem_storage": 0, "disk_storage": 0}})) is None


def test_user_permissions_from_claims():
    assert user_permissions({}, {}, None) is None
    p = user_permissions({"allow": ["a.>"], "deny": ["a.b"]}, {"deny": ["x"]}, {"max": 3, "ttl": 5_000_000_000})
    assert (p.publish.allow, p.publish.deny, p.subscribe.allow, p.subscribe.deny) == (["a.>"], ["a.b"], [], ["x"])
    assert (p.allow_responses, p.responses_max, p.responses_expires_ns) == (True, 3, 5_000_000_000)


@pytest.mark.parametrize(
    "pattern, subject, target, expected",
    [
        ("events.>", "events.a.b", "events.>", "events.a.b"),
        ("events.>", "events.a.b", "fromA.events.>", "fromA.events.a.b"),
        ("svc.*", "svc.q", "asvc.*", "asvc.q"),
        ("a.*.b.*", "a.1.b.2", "x.$2.$1", "x.2.1"),
        ("a.*", "a.1", "fixed", "fixed"),
    ],
)
def test_map_subject(pattern, subject, target, expected):
    assert map_subject(pattern, subject, target) == expected
