"""natsd.config.jwt: decoding and verifying NATS JWTs and nkey signatures."""

from __future__ import annotations

import base64
import json

import pytest

from natsd.config import jwt as J
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
    assert (uc.subject, uc.account, uc.name, uc.pub, uc.bearer_token) == (
        u.public,
        acc.public,
        "bob",
        {"allow": ["a"]},
        True,
    )
    with pytest.raises(J.JWTError, match="not a user JWT"):
        J.decode_user(ajwt)
    with pytest.raises(J.JWTError, match="not a account JWT"):
        J.decode_account(ujwt)


@pytest.mark.parametrize(
    "bad, message",
    [
        ("abc", "expected 3 chunks"),
        ("a.b.c.d", "expected 3 chunks"),
        ("eyJ.e30.AA", "bad JSON"),
        ("e30." + "W1" * 40 + "." + "W" * 20000 + ".AA", "expected 3 chunks"),
        ("e30." + __import__("base64").urlsafe_b64encode(b"[" * 100000).decode().rstrip("=") + ".AA", "bad JSON"),
        ("e30.//8.AA", "bad"),
    ],
)
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
    for header, message in (
        (b'{"typ":"JWT","alg":"HS256"}', "algorithm"),
        (b'{"typ":"XYZ","alg":"ed25519-nkey"}', "type"),
    ):
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


def test_scoped_users_must_have_empty_permissions():
    acc = Identity.new("account")
    u = Identity.new("user")
    bare = user_claims(u, "s")
    for k in ("pub", "sub", "subs", "data", "payload"):
        del bare["nats"][k]
    assert J.decode_user(acc.sign(bare)).empty_permissions
    assert not J.decode_user(acc.sign(user_claims(u, "s"))).empty_permissions  # -1 limits are set limits
