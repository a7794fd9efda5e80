"""Authentication modes and permission filters (no sockets)."""

from __future__ import annotations

import bcrypt

from natsd.config.options import AccountOptions, Permissions, ServerOptions, SubjectPermission, UserOptions
from natsd.server.auth.authenticator import Authenticator, SubjectFilter, check_password, compile_permissions


def test_no_auth():
    a = Authenticator(ServerOptions())
    assert not a.auth_required
    assert a.authenticate({}).ok


def test_token_plain_and_bcrypt():
    a = Authenticator(ServerOptions(authorization="s3cret"))
    assert a.auth_required
    assert a.authenticate({"auth_token": "s3cret"}).ok
    assert not a.authenticate({"auth_token": "nope"}).ok
    assert not a.authenticate({}).ok
    h = bcrypt.hashpw(b"tok", bcrypt.gensalt(4)).decode()
    r = Authenticator(ServerOptions(authorization=h)).authenticate({"auth_token": "tok"})
    assert r.ok and r.bcrypt == (h, "tok")  # verified off-loop by the connection
    assert check_password(h, "tok") and not check_password(h, "bad")


def test_single_user():
    a = Authenticator(ServerOptions(username="u", password="p"))
    assert a.authenticate({"user": "u", "pass": "p"}).ok
    assert not a.authenticate({"user": "u", "pass": "x"}).ok
    assert not a.authenticate({"user": "v", "pass": "p"}).ok


def test_users_accounts_and_no_auth_user():
    opts = ServerOptions(
        users=[UserOptions(user="a", password="pa")],
        accounts=[AccountOptions(name="ACC", users=[UserOptions(user="b", password="pb")])],
        no_auth_user="a",
    )
    a = Authenticator(opts)
    r = a.authenticate({"user": "b", "pass": "pb"})
    assert r.ok and r.account == "ACC" and r.user == "b"
    r = a.authenticate({})
    assert r.ok and r.user == "a" and r.account == "$G"
    assert not a.authenticate({"user": "a", "pass": "wrong"}).ok
    assert not a.authenticate({"user": "zz", "pass": "pa"}).ok


def test_bcrypt_success_is_remembered():
    h = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
    a = Authenticator(ServerOptions(users=[UserOptions(user="u", password=h)]))
    r = a.authenticate({"user": "u", "pass": "pw"})
    assert r.bcrypt is not None
    a.remember(r.cache_key)
    assert a.authenticate({"user": "u", "pass": "pw"}).bcrypt is None
    assert a.authenticate({"user": "u", "pass": "other"}).bcrypt is not None


def test_subject_filter_allow_deny_wildcards():
    f = SubjectFilter(SubjectPermission(allow=["foo.>", "_INBOX.>"], deny=["foo.bar"]))
    assert f.allows("foo.x") and f.allows("foo.x.y") and f.allows("_INBOX.abc")
    assert not f.allows("foo.bar") and not f.allows("bar")
    assert f.allows("foo.x")  # cached answer is the same
    only_deny = SubjectFilter(SubjectPermission(deny=["secret.*"]))
    assert only_deny.allows("anything") and not only_deny.allows("secret.x")
    # A subscription's wildcard tokens are matched literally, like the reference's sublist check.
    sub = SubjectFilter(SubjectPermission(allow=["foo.*"]))
    assert sub.allows("foo.>") and not sub.allows("bar.>")


def test_allow_responses_alone_restricts_publish_to_replies():
    p = compile_permissions(Permissions(subscribe=SubjectPermission(allow=["req"]), allow_responses=True))
    assert p.publish is not None and not p.publish.allows("x")
    assert p.responses_max == 1
    assert compile_permissions(None) is None
    assert compile_permissions(Permissions()) is None
