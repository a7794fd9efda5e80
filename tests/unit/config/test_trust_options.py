"""nkey users and the decentralized-auth keys (operator, trusted_keys, resolver,
resolver_preload) of the config file, with located errors."""

from __future__ import annotations

import pytest

from natsd.config.lexer import ConfigError
from natsd.config.options import options_from_file, options_from_tree
from natsd.config.parser import parse
from natsd.config.trust import is_public_nkey
from tests.helpers.identities import Identity, operator_setup

pytestmark = pytest.mark.unit


def opts(text: str):
    return options_from_tree(parse(text, "t.conf", env={}))


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as ei:
        opts(text)
    errs = getattr(ei.value, "errors", [ei.value])
    return [str(e) for e in errs]


def test_nkey_users_in_authorization_and_accounts():
    a, b = Identity.new("user"), Identity.new("user")
    o = opts(f"""
authorization {{ users: [ {{ nkey: {a.public}, permissions: {{ publish: "x" }} }}, {{ user: u, pass: p }} ] }}
accounts {{ ACC {{ users: [ {{ nkey: {b.public} }} ] }} }}
""")
    assert [(u.nkey, u.account) for u in o.nkeys] == [(b.public, "ACC"), (a.public, "$G")]
    assert o.nkeys[1].permissions.publish.allow == ["x"]
    assert [u.user for u in o.users] == ["u"]


def test_no_auth_user_may_name_an_nkey():
    a = Identity.new("user")
    o = opts(f"authorization {{ users: [ {{ nkey: {a.public} }} ] }}\nno_auth_user: {a.public}\n")
    assert o.no_auth_user == a.public


def test_bad_and_duplicate_nkeys_are_located():
    a = Identity.new("user")
    errs = errors_of(f"authorization {{ users: [ {{ nkey: {Identity.new('account').public} }} ] }}")
    assert errs == ["t.conf:1:28: Not a valid public nkey for a user"]
    errs = errors_of(f"authorization {{ users: [ {{ nkey: {a.public} }}, {{ nkey: {a.public} }} ] }}")
    assert errs == [f't.conf:1:17: Duplicate nkey "{a.public}" detected']


def test_operator_inline_file_and_armoured(tmp_path):
    setup = operator_setup("A")
    acc, ajwt = setup.accounts["A"]
    armoured = tmp_path / "op.jwt"
    armoured.write_text(f"-----BEGIN NATS OPERATOR JWT-----\n{setup.operator_jwt}\n------END NATS OPERATOR JWT------\n")
    conf = tmp_path / "s.conf"
    conf.write_text(
        f"operator: op.jwt\nsystem_account: {setup.system.public}\nresolver: MEMORY\n"
        f"resolver_preload: {{ {acc.public}: {ajwt} }}\n"
    )
    o = options_from_file(str(conf))  # relative to the config file's directory
    assert o.trust.operators == [setup.operator_jwt]
    assert o.trust.enabled and o.trust.resolver.type == "memory"
    assert o.trust.resolver_preload == {acc.public: ajwt}
    o = opts(f"operators: [{setup.operator_jwt}]\ntrusted_keys: {setup.operator.public}\n")
    assert o.trust.operators == [setup.operator_jwt] and o.trust.trusted_keys == [setup.operator.public]


def test_full_resolver_options():
    o = opts("resolver { type: full, dir: '/tmp/x', allow_delete: true, interval: '2m', limit: 50 }\n")
    r = o.trust.resolver
    assert (r.type, r.dir, r.allow_delete, r.limit) == ("full", "/tmp/x", True, 50)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "operator: /nonexistent/op.jwt\n",
            "t.conf:1:1: error parsing operator JWT: No such file or directory: /nonexistent/op.jwt",
        ),
        ("trusted_keys: [OABC]\n", "t.conf:1:16: trust key 'OABC' required to be a valid public operator nkey"),
        ("resolver: URL(http://x)\n", "t.conf:1:1: URL account resolvers are not supported by natsd"),
        ("resolver: { type: cache, dir: x }\n", "t.conf:1:1: the cache resolver"),
        ("resolver: SOMETHING\n", "t.conf:1:1: error parsing resolver, unknown resolver"),
        (
            "resolver_preload: { ABC: x }\n",
            "t.conf:1:21: resolver_preload key 'ABC' is not a valid public account nkey",
        ),
    ],
)
def test_trust_errors_are_located(text, message):
    errs = errors_of(text)
    assert errs[0].startswith(message), errs


def test_public_nkey_check():
    u = Identity.new("user")
    assert is_public_nkey(u.public, "U") and is_public_nkey(u.public)
    assert not is_public_nkey(u.public.lower()) and not is_public_nkey(5) and not is_public_nkey(u.public[:-2])


def test_jwts_are_verified_when_the_config_is_read():
    setup = operator_setup("A")
    acc, ajwt = setup.accounts["A"]
    forged = setup.operator_jwt[:-4] + ("AAAA" if not setup.operator_jwt.endswith("AAAA") else "BBBB")
    assert errors_of(f"operator: {forged}\n")[0].startswith(
        "t.conf:1:1: error parsing operator JWT: claim failed V2 signature verification"
    )
    # An account JWT where an operator JWT belongs.
    assert errors_of(f"operator: {ajwt}\n")[0].startswith("t.conf:1:1: error parsing operator JWT: not a operator JWT")
    bad = setup.config().replace(ajwt, ajwt[:-4] + ("AAAA" if not ajwt.endswith("AAAA") else "BBBB"))
    assert any(e.endswith(": invalid account JWT") for e in errors_of(bad))
    other = Identity.new("account")
    swapped = setup.config().replace(f"{acc.public}: {ajwt}", f"{other.public}: {ajwt}")
    assert any("does not match the JWT's account" in e for e in errors_of(swapped))


def test_nkey_users_take_no_name_or_password():
    u = Identity.new("user")
    errs = errors_of(f"authorization {{ users: [ {{ nkey: {u.public}, user: x }} ] }}")
    assert errs[0].endswith("Nkey users do not take usernames or passwords")


def test_operator_mode_does_not_require_the_system_account_in_accounts():
    setup = operator_setup("A")
    o = opts(setup.config() + "accounts { X { users: [ {user: a, password: b} ] } }\n")
    assert o.system_account == setup.system.public
