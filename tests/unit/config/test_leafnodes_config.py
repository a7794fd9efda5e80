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
accounts { EDGE {}, X {} }
leafnodes {
  listen: "127.0.0.1:7422"
  authorization { user: leaf, password: s3cret, account: EDGE, timeout: 3 }
}""")
    ln = o.leafnodes
    assert (ln.host, ln.port) == ("127.0.0.1", 7422)
    assert (ln.username, ln.password, ln.account) == ("leaf", "s3cret", "EDGE")
    assert ln.auth_timeout_ns == 3 * SECOND_NS and ln.auth_required
    o = opts("accounts { X {} }\nleaf { port: 7000, authorization { users: [ {user: a, password: b, account: X} ] } }")
    assert o.leafnodes.port == 7000 and [(u.user, u.password, u.account) for u in o.leafnodes.users] == [
        ("a", "b", "X")
    ]


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
    with pytest.raises(ConfigError, match="no such file"):
        opts('leafnodes { port: 7422, tls { cert_file: "/nonexistent/a", key_file: "/nonexistent/b" } }')
    with pytest.raises(ConfigError, match="missing 'cert_file'"):
        opts('leafnodes { port: 7422, tls { ca_file: "x" } }')  # the accepting side needs its certificate


def test_accepting_side_tls_and_remote_tls(tmp_path):
    from tests.helpers.certs import make_pki

    pki = make_pki(tmp_path)
    o = opts(f"""
accounts {{ EDGE {{}} }}
leafnodes {{
  port: 7422
  tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", ca_file: "{pki.ca_file}", verify_and_map: true,
        timeout: 3 }}
  authorization {{ users: [ {{ user: "CN=client,O=natsd tests", account: EDGE }} ] }}
  remotes: [ {{ url: "tls://hub:7422", tls {{ ca_file: "{pki.ca_file}" }} }} ]
}}""")
    ln = o.leafnodes
    assert ln.tls.cert_file == pki.server_cert and ln.tls.verify_and_map and ln.tls.timeout_ns == 3 * SECOND_NS
    # A remote needs no certificate of its own: a CA (or nothing) is enough.
    assert ln.remotes[0].tls.ca_file == pki.ca_file and not ln.remotes[0].tls.cert_file
    with pytest.raises(ConfigError, match="failed to parse root ca"):
        opts(f'leafnodes {{ remotes: [ {{ url: "tls://h", tls {{ ca_file: "{pki.server_key}" }} }} ] }}')


def test_authorization_nkey_and_the_mixes_the_reference_refuses():
    import nkeys
    import os

    pub = nkeys.from_seed(nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)).public_key.decode()
    ln = opts(
        f'accounts {{ EDGE {{}} }}\nleafnodes {{ port: 1, authorization {{ nkey: "{pub}", account: EDGE }} }}'
    ).leafnodes
    assert (ln.nkey, ln.account) == (pub, "EDGE") and ln.auth_required
    with pytest.raises(ConfigError, match="Not a valid public nkey for leafnode authorization"):
        opts('leafnodes { port: 1, authorization { nkey: "UNOTAKEY" } }')
    with pytest.raises(ConfigError, match="can not have a single user/pass and a users array"):
        opts("leafnodes { port: 1, authorization { user: a, password: b, users: [ {user: c, password: d} ] } }")
    with pytest.raises(ConfigError, match="can not have a single nkey and a users array"):
        opts(f'leafnodes {{ port: 1, authorization {{ nkey: "{pub}", users: [ {{user: c, password: d}} ] }} }}')
    with pytest.raises(ConfigError, match='duplicate user "c" detected in leafnode authorization'):
        opts("leafnodes { port: 1, authorization { users: [ {user: c, password: d}, {user: c, password: e} ] } }")


def test_named_accounts_must_exist_and_operator_mode_rules():
    """nats-server's checks once the whole file is read, same words, at the block's position."""
    with pytest.raises(ConfigError, match='cannot find local account "NOPE" specified in leafnode authorization'):
        opts("leafnodes {\n port: 1, authorization { user: a, password: b, account: NOPE } }")
    with pytest.raises(ConfigError, match='cannot find local account "NOPE" specified in leafnode remote'):
        opts('leafnodes { remotes: [ { url: "nats-leaf://h:1", account: NOPE } ] }')
    ok = opts(
        "accounts { EDGE {} }\nleafnodes { port: 1, authorization { users: [ {user: a, password: b, "
        'account: EDGE} ] }, remotes: [ { url: "h:1", account: "$G" } ] }'
    )
    assert ok.leafnodes.users[0].account == "EDGE"
    import nkeys
    import os

    acc = nkeys.from_seed(nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_ACCOUNT)).public_key.decode()
    op = nkeys.from_seed(nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_OPERATOR)).public_key.decode()
    with pytest.raises(ConfigError, match="operator mode does not allow specifying users in leafnode config"):
        opts(
            f'trusted_keys: ["{op}"]\nleafnodes {{ port: 1, authorization {{ users: [ {{user: a, password: b}} ] }} }}'
        )
    with pytest.raises(ConfigError, match="operator mode requires account nkeys in remotes"):
        opts(f'trusted_keys: ["{op}"]\nleafnodes {{ remotes: [ {{ url: "h:1", account: EDGE }} ] }}')
    assert opts(f'trusted_keys: ["{op}"]\nleafnodes {{ remotes: [ {{ url: "h:1", account: "{acc}" }} ] }}').leafnodes


def test_compression_modes_as_the_reference_reads_them():
    """``compression`` of the block and of a remote: default s2_auto, spellings normalised, a
    boolean, or a map with rtt_thresholds (ascending, a 0 disables a level, at most 4)."""
    ln = opts('leafnodes { port: 1, remotes: [ { url: "h:1" } ] }').leafnodes
    assert ln.compression == "s2_auto" and ln.remotes[0].compression == "s2_auto"
    assert ln.compression_rtts_ns == [10_000_000, 50_000_000, 100_000_000]
    for given, want in (
        ("fast", "s2_fast"),
        ("s2_better", "s2_better"),
        ("best", "s2_best"),
        ("disabled", "off"),
        ("accept", "accept"),
        ("on", "s2_auto"),
        ("true", "s2_auto"),
        ("auto", "s2_auto"),
        ("OFF", "off"),
        ("not_supported", "not supported"),
    ):
        assert opts(f'leafnodes {{ port: 1, compression: "{given}" }}').leafnodes.compression == want, given
    assert opts("leafnodes { port: 1, compression: false }").leafnodes.compression == "off"
    assert opts("leafnodes { port: 1, compression: true }").leafnodes.compression == "s2_auto"
    r = opts(
        'leafnodes { remotes: [ { url: "h:1", compression: { mode: s2_auto, '
        'rtt_thresholds: ["5ms", "0", "30ms", 0] } } ] }'
    ).leafnodes.remotes[0]
    assert (r.compression, r.compression_rtts_ns) == ("s2_auto", [5_000_000, 0, 30_000_000])
    with pytest.raises(ConfigError, match='unsupported compression mode "s3"'):
        opts('leafnodes { port: 1, compression: "s3" }')
    with pytest.raises(ConfigError, match="ascending order"):
        opts('leafnodes { port: 1, compression: { mode: auto, rtt_thresholds: ["50ms", "10ms"] } }')
    with pytest.raises(ConfigError, match="no more than 4 RTT thresholds"):
        opts('leafnodes { port: 1, compression: { mode: auto, rtt: ["1ms", "2ms", "3ms", "4ms", "5ms"] } }')
    with pytest.raises(ConfigError, match="requires at least one RTT threshold"):
        opts('leafnodes { port: 1, compression: { mode: auto, rtt_thresholds: ["0s"] } }')
    with pytest.raises(ConfigError, match='unknown field "level"'):
        opts("leafnodes { port: 1, compression: { level: 3 } }")


def test_websocket_remotes():
    from natsd.config.leafnodes import is_ws_url

    r = opts(
        'leafnodes { remotes: [ { url: "ws://hub:8080", ws_compression: true, ws_no_masking: true } ] }'
    ).leafnodes.remotes[0]
    assert is_ws_url(r.urls[0]) and r.ws_compression
    # nats-server gives every remote URL without a port 7422, ws:// and wss:// included
    assert remote_url_parts("ws://hub") == ("hub", 7422, "", "")
    assert remote_url_parts("wss://u:p@hub") == ("hub", 7422, "u", "p")
    with pytest.raises(ConfigError, match="cannot have a mix of websocket and non-websocket urls"):
        opts('leafnodes { remotes: [ { urls: ["ws://a:1", "nats-leaf://b:2"] } ] }')
