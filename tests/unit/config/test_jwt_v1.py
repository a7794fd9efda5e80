"""v1 JWTs (``"alg":"ed25519"``, the claim type beside ``iss``, the signature over the claims chunk
alone) decode as the Go library's v2 decoder migrates them, for operators, accounts and users."""

from __future__ import annotations

import base64
import json

import nkeys
import pytest

from natsd.config import jwt as J
from tests.helpers.jwtgen import _b64, encode_jwt, encode_jwt_v1, new_key

pytestmark = [pytest.mark.unit, pytest.mark.timeout(10)]


@pytest.fixture
def keys():
    op, _ = new_key(nkeys.PREFIX_BYTE_OPERATOR)
    acc, _ = new_key(nkeys.PREFIX_BYTE_ACCOUNT)
    user, _ = new_key(nkeys.PREFIX_BYTE_USER)
    return op, acc, user


def _pub(k) -> str:
    return k.public_key.decode()


def test_v1_operator_account_and_user(keys):
    op, acc, user = keys
    oc = J.decode_operator(encode_jwt_v1(op, _pub(op), "OP", "operator", {"signing_keys": []}))
    assert (oc.subject, oc.name) == (_pub(op), "OP")
    ac = J.decode_account(
        encode_jwt_v1(
            op,
            _pub(acc),
            "foo",
            "account",
            {
                "limits": {
                    "subs": -1,
                    "conn": -1,
                    "imports": -1,
                    "exports": -1,
                    "data": -1,
                    "payload": -1,
                    "wildcards": True,
                    "mem_storage": 1024,
                    "disk_storage": 1024,
                    "streams": 3,
                    "consumer": 3,
                }
            },
        )
    )
    assert ac.subject == _pub(acc) and ac.issuer == _pub(op)
    # v1 accounts had no JetStream: the Go library migrates them with JetStream limits zeroed
    assert ac.limits == {
        "subs": -1,
        "conn": -1,
        "imports": -1,
        "exports": -1,
        "data": -1,
        "payload": -1,
        "wildcards": True,
    }
    uc = J.decode_user(encode_jwt_v1(acc, _pub(user), "u", "user", {"pub": {"allow": ["a.>"]}}))
    assert uc.account == _pub(acc) and uc.pub == {"allow": ["a.>"]}
    assert uc.limits == {"subs": -1, "data": -1, "payload": -1}  # absent v1 limits are unlimited


def test_v1_user_of_a_signing_key_names_its_account_at_the_top(keys):
    op, acc, user = keys
    signer, _ = new_key(nkeys.PREFIX_BYTE_ACCOUNT)
    uc = J.decode_user(encode_jwt_v1(signer, _pub(user), "u", "user", {"subs": 10}, issuer_account=_pub(acc)))
    assert uc.issuer == _pub(signer) and uc.account == _pub(acc) and uc.limits["subs"] == 10


def test_v1_signature_covers_the_claims_chunk_only(keys):
    op, acc, _ = keys
    token = encode_jwt_v1(op, _pub(acc), "foo", "account", {})
    h, p, s = token.split(".")
    # the header is not signed in v1: another header keeps the token valid (the Go library's rule)
    other = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    assert J.decode_account(f"{other}.{p}.{s}").subject == _pub(acc)
    claims = json.loads(base64.urlsafe_b64decode(p + "=="))
    claims["name"] = "evil"
    forged = f"{h}.{_b64(json.dumps(claims).encode())}.{s}"
    with pytest.raises(J.JWTError, match="^claim failed V1 signature verification$"):
        J.decode_account(forged)
    # a v2 token's signature (over header.claims) does not pass for a v1 body, nor the other way round
    v2 = encode_jwt(op, _pub(acc), "foo", {"type": "account"})
    h2, p2, s2 = v2.split(".")
    with pytest.raises(J.JWTError, match="V1 signature"):
        J.decode_account(f"{h2}.{p}.{s2}")
    with pytest.raises(J.JWTError, match="V2 signature"):
        J.decode_account(f"{h2}.{p2}.{s}")


def test_v1_user_with_a_max_limit_is_refused(keys):
    _, acc, user = keys
    with pytest.raises(J.JWTError, match="deprecated Max/Times in jwtV2"):
        J.decode_user(encode_jwt_v1(acc, _pub(user), "u", "user", {"max": 5}))
    assert J.decode_user(encode_jwt_v1(acc, _pub(user), "u", "user", {"max": -1})).subject == _pub(user)


def test_a_token_without_version_or_top_level_type_is_refused(keys):
    op, acc, _ = keys
    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64(json.dumps({"iss": _pub(op), "sub": _pub(acc), "nats": {"type": "account"}}).encode())
    token = f"{header}.{body}.{_b64(op.sign(body.encode()))}"  # (versionless: verified as v1, as Go does)
    with pytest.raises(J.JWTError, match="received 0"):
        J.decode_account(token)


def test_newer_versions_are_refused(keys):
    op, acc, _ = keys
    with pytest.raises(J.JWTError, match="newer version"):
        J.decode(_v3(op, acc))


def _v3(op, acc) -> str:
    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64(json.dumps({"iss": _pub(op), "sub": _pub(acc), "nats": {"type": "account", "version": 3}}).encode())
    return f"{header}.{body}.{_b64(op.sign(f'{header}.{body}'.encode()))}"


def test_v1_activation_keeps_the_export_type_as_kind(keys):
    op, acc, _ = keys
    importer, _ = new_key(nkeys.PREFIX_BYTE_ACCOUNT)
    act = J.decode(encode_jwt_v1(acc, _pub(importer), "act", "activation", {"subject": "svc.>", "type": "service"}))
    assert act["nats"]["type"] == "activation" and act["nats"]["kind"] == "service"
    assert act["sub"] == _pub(importer) and act["iss"] == _pub(acc)
