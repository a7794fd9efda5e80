"""Auth callout pieces without sockets: the configuration block, the xkey format and box, who is
delegated, and every check of the service's answer (natsd.server.auth.callout)."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import nkeys
import pytest

from natsd.config.options import AuthCalloutOptions, ServerOptions, UserOptions, options_from_tree
from natsd.config.parser import parse
from natsd.config.xkey import XKeyError, crc16, is_public_xkey, public_xkey_bytes
from natsd.server.auth.authenticator import AuthResult, Authenticator
from natsd.server.auth.callout import AUTH_CALLOUT_SUBJECT, AuthCallout, CalloutError, encode_jwt, server_identity
from natsd.server.auth.xkeys import XKeyPair
from tests.helpers.callout_service import _sign, decode_part, new_keys

pytestmark = pytest.mark.unit

KEYS = new_keys()


def _opts(text: str) -> ServerOptions:
    return options_from_tree(parse(text, "t.conf", env={}))


def _errors(text: str) -> str:
    with pytest.raises(Exception) as ei:
        _opts(text)
    return str(ei.value)


def test_config_block():
    o = _opts(
        f"authorization {{ users: [{{user: auth, password: p}}]\n"
        f"  auth_callout {{ issuer: {KEYS.account}, auth_users: [auth], xkey: {KEYS.xkey} }} }}"
    )
    assert o.auth_callout == AuthCalloutOptions(issuer=KEYS.account, account="$G", auth_users=["auth"], xkey=KEYS.xkey)
    assert o.config_notices == []


@pytest.mark.parametrize(
    "block,text",
    [
        ("auth_users: [a]", "Authorization callouts require an issuer to be specified"),
        (f"issuer: {KEYS.account}", "Authorization callouts require authorized users to be specified"),
        ("issuer: UABC, auth_users: [a]", 'Expected callout user to be a valid public account nkey, got "UABC"'),
        (f"issuer: {KEYS.account}, auth_users: [a], xkey: XBAD", "Expected callout xkey to be a valid public xkey"),
        (
            f"issuer: {KEYS.account}, auth_users: [a], colour: red",
            'Unknown field "colour" parsing authorization callout',
        ),
        (f"issuer: {KEYS.account}, auth_users: a", "Expected auth_users field to be an array"),
    ],
)
def test_config_errors(block, text):
    assert text in _errors(f"authorization {{ auth_callout {{ {block} }} }}")


def test_xkey_format_and_box():
    for i in range(64):
        data = os.urandom(i)
        assert crc16(data) == nkeys.crc16(bytearray(data))
    a, b, c = XKeyPair.create(), XKeyPair.create(), XKeyPair.create()
    assert is_public_xkey(a.public_key) and not is_public_xkey(KEYS.account) and a.seed.startswith("SX")
    assert XKeyPair.from_seed(a.seed).public_key == a.public_key
    sealed = a.seal(b"secret", b.public_key)
    assert sealed[:4] == b"xkv1" and b"secret" not in sealed
    assert b.open_(sealed, a.public_key) == b"secret"
    with pytest.raises(XKeyError):
        c.open_(sealed, a.public_key)  # not the recipient
    with pytest.raises(XKeyError):
        b.open_(b"xkv2" + sealed[4:], a.public_key)


def test_service_side_box_is_nacl():
    # The helper's service seals with PyNaCl directly: natsd opens it.
    from nacl.public import Box, PublicKey

    server = XKeyPair.create()
    raw = public_xkey_bytes(server.public_key)
    assert raw is not None
    sealed = b"xkv1" + bytes(Box(KEYS.xkey_private, PublicKey(raw)).encrypt(b"hello", os.urandom(24)))
    assert server.open_(sealed, KEYS.xkey) == b"hello"


def _authenticator() -> tuple[Authenticator, AuthCallout]:
    o = ServerOptions(users=[UserOptions(user="auth", password="pwd", account="AUTH")])
    callout = AuthCallout(
        AuthCalloutOptions(issuer=KEYS.account, account="AUTH", auth_users=["auth"]), server_identity()[0]
    )
    return Authenticator(o, None, callout), callout


def test_auth_users_authenticate_normally_and_others_are_delegated():
    auth, _ = _authenticator()
    svc = auth.authenticate({"user": "auth", "pass": "pwd"})
    assert svc.ok and not svc.callout and svc.account == "AUTH"
    # ... and may not publish requests themselves.
    assert svc.permissions is not None and not svc.permissions.publish.allows(AUTH_CALLOUT_SUBJECT)
    assert svc.permissions.publish.allows("anything.else")
    assert not auth.authenticate({"user": "auth", "pass": "wrong"}).ok
    for opts in ({"user": "alice", "pass": "x"}, {"auth_token": "t"}, {}):
        assert auth.authenticate(opts).callout


def test_request_jwt_is_signed_by_the_server_key():
    seed, public = server_identity()
    token = encode_jwt({"sub": KEYS.account, "nats": {"type": "authorization_request", "version": 2}}, seed)
    from natsd.config import jwt as J

    claims = J.decode(token)  # verifies the signature against iss
    assert claims["iss"] == public and public.startswith("N") and len(claims["jti"]) == 52


# -- the answer ------------------------------------------------------------------------------------


def _server():
    seed, sid = server_identity()
    accounts = {"AUTH": SimpleNamespace(name="AUTH"), "APP": SimpleNamespace(name="APP")}
    return SimpleNamespace(server_id=sid, accounts=accounts, global_account=SimpleNamespace(name="$G")), seed


def _user_nkey() -> str:
    return nkeys.from_seed(bytearray(nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER))).public_key.decode()


def _answer(
    server,
    user_nkey: str,
    *,
    user: dict | None = None,
    error: str = "",
    sub: str = "",
    aud: str = "",
    seed: bytes | None = None,
) -> bytes:
    n: dict = {"type": "authorization_response", "version": 2}
    if error:
        n["error"] = error
    else:
        claims = {"sub": user_nkey, "aud": "APP", **(user or {})}
        claims["nats"] = {"type": "user", "version": 2, **claims.get("nats", {})}
        n["jwt"] = _sign(claims, seed or KEYS.account_seed)
    return _sign({"sub": sub or user_nkey, "aud": aud or server.server_id, "nats": n}, KEYS.account_seed).encode()


def _decide(answer_of, **kw):
    server, seed = _server()
    callout = AuthCallout(AuthCalloutOptions(issuer=KEYS.account, account="AUTH", auth_users=["auth"]), seed)
    callout.server = server
    user_nkey = _user_nkey()
    st = callout._setting("AUTH")
    return callout._decide(answer_of(server, user_nkey, **kw), user_nkey, server.accounts["AUTH"], server, st)


def test_granted_user_gets_account_permissions_and_expiry():
    exp = int(time.time()) + 3600
    res = _decide(
        _answer,
        user={
            "name": "alice",
            "exp": exp,
            "nats": {"pub": {"allow": ["app.>"]}, "sub": {"deny": ["secret.>"]}, "subs": 5, "payload": 100},
        },
    )
    assert isinstance(res, AuthResult) and res.ok
    # Limits are left alone, as nats-server leaves them for callout users (permissions only).
    assert (res.user, res.account, res.expires, res.max_subs, res.max_payload) == ("alice", "APP", exp, -1, -1)
    assert res.permissions.publish.allows("app.x") and not res.permissions.publish.allows("other")
    assert res.permissions.subscribe.denies("secret.x")


@pytest.mark.parametrize(
    "kw,text",
    [
        ({"error": "no such user"}, "Auth callout service returned an error: no such user"),
        (
            {"sub": "UAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
            "Authorization response had validation errors: Subject must be a user public key",
        ),
        ({"aud": "APP"}, "Authorization response had validation errors: Audience must be a server public key"),
        ({"user": {"aud": "NOPE"}}, 'No valid account "NOPE" for auth callout response on account "AUTH"'),
        ({"user": {"exp": 1}}, "Error validating user JWT: claim is expired"),
        (
            {"user": {"nats": {"issuer_account": KEYS.account}}},
            'Error non operator mode account "AUTH": attempted to use issuer_account',
        ),
    ],
)
def test_refusals_say_why(kw, text):
    with pytest.raises(CalloutError) as ei:
        _decide(_answer, **kw)
    assert text in str(ei.value)


def test_answers_for_someone_else_are_refused():
    other = _user_nkey()
    with pytest.raises(CalloutError, match="auth callout response is not for expected user"):
        _decide(lambda server, user_nkey: _answer(server, other))
    with pytest.raises(CalloutError, match="auth callout response is not for server"):
        _decide(lambda server, user_nkey: _answer(server, user_nkey, aud=server_identity()[1]))


def test_user_signed_by_another_account_is_refused():
    stranger = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_ACCOUNT)
    with pytest.raises(
        CalloutError, match=f'Wrong issuer for auth callout response on account "AUTH", expected "{KEYS.account}"'
    ):
        _decide(_answer, seed=stranger)


def test_empty_or_garbled_answers_are_refused():
    with pytest.raises(CalloutError, match='"no reason supplied" on account "AUTH"'):
        _decide(lambda server, user_nkey: b"")
    with pytest.raises(CalloutError):
        _decide(lambda server, user_nkey: b"eyJ.not.ajwt")


def test_request_claims_carry_the_client_and_its_connect_options():
    server, seed = _server()
    server.server_name, server.options = "srv", SimpleNamespace(host="127.0.0.1", auth_timeout_ns=2_000_000_000)
    callout = AuthCallout(AuthCalloutOptions(issuer=KEYS.account, account="AUTH", auth_users=["auth"]), seed)
    client = SimpleNamespace(cid=7, ip="10.0.0.1", nonce="abc", connect_opts={}, start_ns=0)
    opts = {"user": "alice", "pass": "pw", "sig": "s", "name": "app", "lang": "python3", "protocol": 1}
    claims = callout._request_claims(server, client, opts, "UKEY", callout._setting("AUTH"))
    n = claims["nats"]
    assert claims["sub"] == KEYS.account and claims["aud"] == "nats-authorization-request"
    assert n["client_info"] == {
        "host": "10.0.0.1",
        "id": 7,
        "user": "alice",
        "name": "app",
        "kind": "Client",
        "type": "nats",
        "nonce": "abc",
    }
    assert n["connect_opts"] == {
        "user": "alice",
        "pass": "pw",
        "sig": "s",
        "name": "app",
        "lang": "python3",
        "protocol": 1,
    }
    assert n["server_id"]["id"] == server.server_id and "xkey" not in n["server_id"]
    assert decode_part(encode_jwt(claims, seed))["nats"]["user_nkey"] == "UKEY"


def test_allowed_accounts_limit_what_is_delegated():
    o = ServerOptions(
        users=[
            UserOptions(user="auth", password="pwd", account="AUTH"),
            UserOptions(user="ops", password="p", account="OPS"),
        ]
    )
    callout = AuthCallout(
        AuthCalloutOptions(issuer=KEYS.account, account="AUTH", auth_users=["auth"], allowed_accounts=["APP"]),
        server_identity()[0],
    )
    auth = Authenticator(o, None, callout)
    # A configured user of an account outside allowed_accounts keeps its own authorization ...
    ops = auth.authenticate({"user": "ops", "pass": "p"})
    assert ops.ok and not ops.callout and ops.account == "OPS"
    # ... while unknown users (the global account) still go to the service.
    assert auth.authenticate({"user": "stranger", "pass": "x"}).callout
