"""tls {}, websocket {}, https and the --tls* flags: typed options and located errors."""

from __future__ import annotations

import ssl

import pytest

from natsd.config.flags import build_options
from natsd.config.lexer import ConfigError
from natsd.config.options import ConfigErrors, options_from_file, options_from_tree
from natsd.config.parser import parse
from natsd.config.tls import TLSOptions, build_client_context, build_server_context
from tests.helpers.certs import make_pki

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def opts(text: str):
    return options_from_tree(parse(text, "t.conf", env={}))


def errors_of(text: str) -> list[ConfigError]:
    with pytest.raises(ConfigError) as ei:
        opts(text)
    e = ei.value
    return e.errors if isinstance(e, ConfigErrors) else [e]


def test_full_tls_block(pki):
    o = opts(f"""
tls {{
  cert_file: "{pki.server_cert}"
  key_file: "{pki.server_key}"
  ca_file: "{pki.ca_file}"
  verify: true
  timeout: 0.5
  min_version: "1.3"
  cipher_suites: ["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"]
  curve_preferences: ["CurveP384", "X25519"]
  pinned_certs: ["{"ab" * 32}"]
  handshake_first: "300ms"
}}
""")
    t = o.tls
    assert (t.cert_file, t.key_file, t.ca_file, t.verify) == (pki.server_cert, pki.server_key, pki.ca_file, True)
    assert t.timeout_ns == 500_000_000 and t.min_version == "1.3"
    assert t.cipher_suites == ["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"]
    assert t.curve_preferences == ["CurveP384", "X25519"]
    assert t.pinned_certs == {"ab" * 32}
    assert (t.handshake_first, t.handshake_first_fallback_ns) == (True, 300_000_000)
    assert t.pos == "t.conf:2:1"
    ctx = build_server_context(t)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.minimum_version == ssl.TLSVersion.TLSv1_3


@pytest.mark.parametrize(
    "value,first,fallback",
    [("true", True, 0), ("false", False, 0), ('"auto"', True, 50_000_000), ('"1s"', True, 1_000_000_000)],
)
def test_handshake_first_forms(pki, value, first, fallback):
    o = opts(f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", handshake_first: {value} }}')
    assert (o.tls.handshake_first, o.tls.handshake_first_fallback_ns) == (first, fallback)


@pytest.mark.parametrize(
    "make,fragment",
    [
        (
            lambda p, d: (f"{d}/missing.pem", p.server_key, ""),
            "error parsing X509 certificate/key pair: open {d}/missing.pem: no such file or directory",
        ),
        (
            lambda p, d: (p.server_cert, p.client_key, ""),
            "error parsing X509 certificate/key pair: tls: private key does not match public key",
        ),
        (
            lambda p, d: (f"{d}/garbage.pem", p.server_key, ""),
            "error parsing X509 certificate/key pair: tls: failed to find any PEM data in certificate input",
        ),
        (
            lambda p, d: (p.server_cert, f"{d}/garbage.pem", ""),
            "error parsing X509 certificate/key pair: tls: failed to find any PEM data in key input",
        ),
        (lambda p, d: (p.server_cert, p.server_key, f"{d}/garbage.pem"), "failed to parse root ca certificate"),
        (lambda p, d: (p.server_cert, p.server_key, f"{d}/nope.pem"), "open {d}/nope.pem: no such file or directory"),
        # unreadable (a directory; the permission case below needs a non-root user)
        (lambda p, d: (str(d), p.server_key, ""), "error parsing X509 certificate/key pair: open {d}: is a directory"),
    ],
)
def test_bad_files_are_config_errors_at_the_block(pki, tmp_path, make, fragment):
    (tmp_path / "garbage.pem").write_text("this is not a certificate\n")
    cert, key, ca = make(pki, tmp_path)
    conf = tmp_path / "n.conf"
    conf.write_text(
        f'port: 1\ntls {{\n  cert_file: "{cert}"\n  key_file: "{key}"\n'
        + (f'  ca_file: "{ca}"\n' if ca else "")
        + "}\n"
    )
    with pytest.raises(ConfigError) as ei:
        options_from_file(str(conf))
    assert str(ei.value) == f"{conf}:2:1: " + fragment.format(d=tmp_path)


def test_unreadable_file(pki, tmp_path):
    import os

    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    key = tmp_path / "k.pem"
    key.write_bytes(open(pki.server_key, "rb").read())
    key.chmod(0)
    with pytest.raises(ConfigError, match="permission denied"):
        opts(f'tls {{ cert_file: "{pki.server_cert}", key_file: "{key}" }}')


@pytest.mark.parametrize(
    "body,loc,msg",
    [
        ('cipher_suites: ["NOPE"]', "t.conf:1:X", "unrecognized cipher NOPE"),
        ('curve_preferences: ["CurveP999"]', "t.conf:1:X", "unrecognized curve preference CurveP999"),
        ('pinned_certs: ["xyz"]', "t.conf:1:X", "error parsing tls config, cert pin: xyz is not a valid sha256 hex"),
        ('min_version: "1.1"', "t.conf:1:X", "unsupported minimum TLS version: 1.1"),
        ("verify: 3", "t.conf:1:X", "verify: expected a boolean, got int 3"),
    ],
)
def test_bad_values(pki, body, loc, msg):
    errs = errors_of(f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", {body} }}')
    assert errs[0].message == msg and errs[0].line == 1


def test_websocket_block(pki):
    o = opts(f"""
websocket {{
  listen: "127.0.0.1:8443"
  tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}" }}
  compression: true
  same_origin: true
  allowed_origins: ["https://app.example.com"]
  jwt_cookie: "my_jwt"
  handshake_timeout: "3s"
}}
""")
    ws = o.websocket
    assert (ws.host, ws.port, ws.compression, ws.same_origin) == ("127.0.0.1", 8443, True, True)
    assert ws.allowed_origins == ["https://app.example.com"] and ws.jwt_cookie == "my_jwt"
    assert ws.handshake_timeout_ns == 3_000_000_000 and ws.tls.cert_file == pki.server_cert


def test_websocket_needs_tls_or_no_tls():
    assert [str(e) for e in errors_of("websocket {\n port: 8080\n}")] == [
        "t.conf:1:1: websocket requires TLS configuration"
    ]
    assert opts("ws { port: 8080, no_tls: true }").websocket.port == 8080


def test_https_needs_tls(pki):
    assert [e.message for e in errors_of("https: 8443")] == ["TLS config required for https monitoring"]
    o = opts(f'https: "127.0.0.1:8443"\ntls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}" }}')
    assert (o.http_host, o.https_port) == ("127.0.0.1", 8443)


def test_tls_flags(pki):
    o = build_options(["--tls", "--tlscert", pki.server_cert, "--tlskey", pki.server_key, "-ms", "8443"])
    assert o.tls.cert_file == pki.server_cert and o.https_port == 8443 and not o.tls.verify
    o = build_options(
        ["--tlsverify", "--tlscert", pki.server_cert, "--tlskey", pki.server_key, "--tlscacert", pki.ca_file]
    )
    assert o.tls.verify and o.tls.ca_file == pki.ca_file
    # cert flags alone do not turn TLS on (as nats-server)
    assert build_options(["--tlscert", pki.server_cert]).tls is None
    with pytest.raises(ConfigError, match="TLS Server private key must be present"):
        build_options(["--tls", "--tlscert", pki.server_cert])
    with pytest.raises(ConfigError, match="private key does not match"):
        build_options(["--tls", "--tlscert", pki.server_cert, "--tlskey", pki.client_key])


def test_flags_override_the_file_block(pki, tmp_path):
    conf = tmp_path / "f.conf"
    conf.write_text(f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}" }}\n')
    o = build_options(["-c", str(conf), "--tlsverify", "--tlscacert", pki.ca_file])
    assert o.tls.verify and o.tls.ca_file == pki.ca_file and o.tls.cert_file == pki.server_cert


def test_client_context_for_dialing_out(pki):
    ctx = build_client_context(TLSOptions(ca_file=pki.ca_file, cert_file=pki.client_cert, key_file=pki.client_key))
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert build_client_context(TLSOptions(insecure=True)).verify_mode == ssl.CERT_NONE


def test_tls_extends_the_default_auth_timeout(pki):
    # nats-server: TLS timeout + 1s when no auth timeout is configured (the handshake counts)
    o = opts(f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", timeout: 3 }}')
    assert o.auth_timeout_ns == 4_000_000_000
    o = opts(f'authorization {{ timeout: 10 }}\ntls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}" }}')
    assert o.auth_timeout_ns == 10_000_000_000
