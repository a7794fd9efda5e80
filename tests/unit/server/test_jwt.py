"""natsd.config.jwt (decode/verify NATS JWTs and nkey signatures), the claims -> settings
conversions of natsd.server.trust, and subject mapping for imports."""

from __future__ import annotations

import base64
import json

import pytest

from natsd.config import jwt as J
from natsd.server.imports import map_subject
from natsd.server.trust import js_limits, user_permissions
from tests.helpers.identities import Identity, account_claims, b64url, operator_setup, user_claims

pytestmark = pytest.mark.unit


def _tamper(token: str, edit) -> str:
    h, p, s = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(p + "=="))
    edit(claims)
    return f"{h}.{b64url(json.dumps(claims).encode())}.{s}"


def test_decode_round_trip_and_types():
    setup = operator_setup("A")
    op = J.decode_operator(setup.operator_jwt)
    assert op.subject == setup.operator.public and op.system_account == setup.system.public
    acc, ajwt = setup.accounts["A"]
    ac = J.decode_account(ajwt)
    assert ac.subject == acc.public and ac.issuer == setup.operator.public
    u, ujwt = setup.user("A", "bob", pub={"allow": ["a"]}, bearer=True)
    uc = J.decode_user(ujwt)
    assert (uc.subject, uc.account, uc.name, uc.pub, uc.bearer_token) == (u.public, acc.public, "bob",
                                                                         {"allow": ["a"]}, True)
    with pytest.raises(J.JWTError, match="not a user JWT"):
        J.decode_user(ajwt)
    with pytest.raises(J.JWTError, match="not a account JWT"):
        J.decode_account(ujwt)


@pytest.mark.parametrize("bad, message", [
    ("abc", "expected 3 chunks"),
    ("a.b.c.d", "expected 3 chunks"),
    ("eyJ.e30.AA", "bad JSON"),
])
def test_decode_rejects_malformed(bad, message):
    with pytest.raises(J.JWTError, match=message):
        J.decode(bad)


def test_decode_rejects_tampered_claims_and_foreign_signatures():
    setup = operator_setup("A")
    _, ujwt = setup.user("A")
    with pytest.raises(J.JWTError, match="signature"):
        J.decode(_tamper(ujwt, lambda c: c["nats"].update(pub={"allow": [">"]})))
    # Re-pointing iss at another key does not help: the signature is checked against iss.
    other = Identity.new("account")
    with pytest.raises(J.JWTError, match="signature"):
        J.decode(_tamper(ujwt, lambda c: c.update(iss=other.public)))
    h, p, _ = ujwt.split(".")
    with pytest.raises(J.JWTError, match="signature"):
        J.decode(f"{h}.{p}.{b64url(other.sign_bytes(f'{h}.{p}'.encode()))}")


def test_decode_rejects_unknown_algorithm_and_type():
    acc = Identity.new("account")
    body = b64url(json.dumps({"iss": acc.public, "sub": acc.public, "nats": {"type": "account"}}).encode())
    for header, message in ((b'{"typ":"JWT","alg":"HS256"}', "algorithm"), (b'{"typ":"XYZ","alg":"ed25519-nkey"}', "type")):
        h = b64url(header)
        token = f"{h}.{body}.{b64url(acc.sign_bytes(f'{h}.{body}'.encode()))}"
        with pytest.raises(J.JWTError, match=message):
            J.decode(token)


def test_public_keys_and_signatures():
    u = Identity.new("user")
    assert J.is_public_key(u.public, "U") and not J.is_public_key(u.public, "A")
    broken = u.public[:-1] + ("A" if u.public[-1] != "A" else "B")
    assert not J.is_public_key(broken, "U")  # CRC-16 mismatch
    assert not J.is_public_key(u.seed, "U")
    sig = u.sign_bytes(b"nonce")
    assert J.verify(u.public, b"nonce", sig)
    assert not J.verify(u.public, b"other", sig)
    assert not J.verify(broken, b"nonce", sig)
    # CONNECT sig: base64url (Go, JS clients) or standard base64 with padding (nats-py).
    assert J.decode_sig(b64url(sig)) == sig
    assert J.decode_sig(base64.b64encode(sig).decode()) == sig
    assert J.decode_sig("!!!") is None and J.decode_sig(None) is None and J.decode_sig(5) is None


def test_extract_jwt_from_armoured_text():
    setup = operator_setup()
    text = f"-----BEGIN NATS OPERATOR JWT-----\n{setup.operator_jwt}\n------END NATS OPERATOR JWT------\n"
    assert J.extract_jwt(text) == setup.operator_jwt
    with pytest.raises(J.JWTError):
        J.extract_jwt("nothing here")


def test_revocations():
    acc = Identity.new("account")
    u = Identity.new("user")
    ac = J.decode_account(operator_setup().operator.sign(account_claims(acc, "A", revocations={u.public: 100})))
    assert ac.revoked(u.public, 100) and ac.revoked(u.public, 50)
    assert not ac.revoked(u.public, 101)
    assert not ac.revoked(Identity.new("user").public, 1)
    everyone = J.decode_account(operator_setup().operator.sign(account_claims(acc, "A", revocations={"*": 10})))
    assert everyone.revoked(u.public, 9) and not everyone.revoked(u.public, 11)


def _account(**kw) -> J.AccountClaims:
    op = operator_setup().operator
    acc = Identity.new("account")
    return J.decode_account(op.sign(account_claims(acc, "A", **kw)))


def test_js_limits_from_claims():
    assert js_limits(_account()) is None  # zero storage: JetStream off
    lim = js_limits(_account(jetstream={"mem_storage": -1, "disk_storage": 1000, "streams": 3, "consumer": -1,
                                        "max_ack_pending": 7, "disk_max_stream_bytes": 500,
                                        "max_bytes_required": True}))
    assert (lim.max_memory, lim.max_storage, lim.max_streams, lim.max_consumers, lim.max_ack_pending,
            lim.storage_max_stream_bytes, lim.memory_max_stream_bytes, lim.max_bytes_required) == (
        -1, 1000, 3, -1, 7, 500, -1, True)
    tiered = js_limits(_account(tiered={"R3": {"disk_storage": 9}, "R1": {"mem_storage": 5, "disk_storage": 6,
                                                                           "streams": 2}}))
    assert (tiered.max_memory, tiered.max_storage, tiered.max_streams) == (5, 6, 2)
    assert js_limits(_account(tiered={"R1": {"mem_storage": 0, "disk_storage": 0}})) is None


def test_user_permissions_from_claims():
    assert user_permissions({}, {}, None) is None
    p = user_permissions({"allow": ["a.>"], "deny": ["a.b"]}, {"deny": ["x"]}, {"max": 3, "ttl": 5_000_000_000})
    assert (p.publish.allow, p.publish.deny, p.subscribe.allow, p.subscribe.deny) == (["a.>"], ["a.b"], [], ["x"])
    assert (p.allow_responses, p.responses_max, p.responses_expires_ns) == (True, 3, 5_000_000_000)


def test_scoped_users_must_have_empty_permissions():
    acc = Identity.new("account")
    u = Identity.new("user")
    bare = user_claims(u, "s")
    for k in ("pub", "sub", "subs", "data", "payload"):
        del bare["nats"][k]
    assert J.decode_user(acc.sign(bare)).empty_permissions
    assert not J.decode_user(acc.sign(user_claims(u, "s"))).empty_permissions  # -1 limits are set limits


@pytest.mark.parametrize("pattern, subject, target, expected", [
    ("events.>", "events.a.b", "events.>", "events.a.b"),
    ("events.>", "events.a.b", "fromA.events.>", "fromA.events.a.b"),
    ("svc.*", "svc.q", "asvc.*", "asvc.q"),
    ("a.*.b.*", "a.1.b.2", "x.$2.$1", "x.2.1"),
    ("a.*", "a.1", "fixed", "fixed"),
])
def test_map_subject(pattern, subject, target, expected):
    assert map_subject(pattern, subject, target) == expected
