"""The leafnodes {} block: accepting port, authorization, remotes (urls, account, credentials,
deny lists, tls kept raw for the TLS hook), reconnect; errors located at file:line:column."""

from __future__ import annotations

import pytest

from natsd.config.leafnodes import remote_url_parts
from natsd.config.lexer import ConfigError
from natsd.config.options import SECOND_NS, ConfigErrors, options_from_tree
from natsd.config.parser import parse

pytestmark = pytest.mark.unit


def opts(text: str):
    return options_from_tree(parse(text, "t.conf", env={}))


def test_absent_block_means_no_leafnodes():
    assert opts("port: 4222").leafnodes is None


def test_accepting_side_and_authorization():
    o = opts("""
leafnodes {
  listen: "127.0.0.1:7422"
  authorization { user: leaf, password: s3cret, account: EDGE, timeout: 3 }
}""")
    ln = o.leafnodes
    assert (ln.host, ln.port) == ("127.0.0.1", 7422)
    assert (ln.username, ln.password, ln.account) == ("leaf", "s3cret", "EDGE")
    assert ln.auth_timeout_ns == 3 * SECOND_NS and ln.auth_required
    o = opts("leaf { port: 7000, authorization { users: [ {user: a, password: b, account: X} ] } }")
    assert o.leafnodes.port == 7000 and [(u.user, u.password, u.account) for u in o.leafnodes.users] == [("a", "b", "X")]


def test_remotes():
    o = opts("""
leafnodes {
  reconnect: "250ms"
  remotes: [
    { url: "nats-leaf://u:p@hub:7422", account: "$G", credentials: "/x.creds",
      deny_imports: ["secret.>"], deny_exports: "private.>" }
    { urls: ["nats-leaf://a:1", "b:2"], hub: true }
  ]
}""")
    ln = o.leafnodes
    assert ln.reconnect_ns == 250_000_000
    r1, r2 = ln.remotes
    assert r1.urls == ["nats-leaf://u:p@hub:7422"] and r1.account == "$G" and r1.credentials == "/x.creds"
    assert r1.deny_imports == ["secret.>"] and r1.deny_exports == ["private.>"]
    assert r1.tls is None  # tls {}: see test_remote_over_tls (natsd.config.tls parses it)
    assert r2.urls == ["nats-leaf://a:1", "nats-leaf://b:2"] and r2.hub is True
    assert remote_url_parts(r1.urls[0]) == ("hub", 7422, "u", "p")
    assert remote_url_parts("nats-leaf://h") == ("h", 7422, "", "")


def test_errors_are_located():
    with pytest.raises(ConfigError) as ei:
        opts("leafnodes {\n  remotes: [ { account: A } ]\n}")
    errs = ei.value.errors if isinstance(ei.value, ConfigErrors) else [ei.value]
    assert any("no url" in str(e) and "t.conf:2" in str(e) for e in errs)
    with pytest.raises(ConfigError):
        opts('leafnodes { port: "x" }')
    with pytest.raises(ConfigError, match="not supported"):
        opts('leafnodes { port: 7422, tls { cert_file: "a" } }')  # never plaintext by accident
