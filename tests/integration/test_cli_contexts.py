"""natsctl contexts: the nats CLI's files under $XDG_CONFIG_HOME/nats, against nats-server and natsd."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tests.helpers.cli import module_server, ok, run_cli, server_kinds

server = module_server("cli-contexts")


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.delenv("NATS_URL", raising=False)
    return tmp_path / "cfg" / "nats"


def natscli_context(home, name: str, **fields) -> None:
    """A context file as the Go nats CLI writes it (every field, plus ones natsctl does not use)."""
    data = {
        "description": "",
        "url": "",
        "socks_proxy": "",
        "token": "",
        "user": "",
        "password": "",
        "creds": "",
        "nkey": "",
        "cert": "",
        "key": "",
        "ca": "",
        "nsc": "",
        "jetstream_domain": "",
        "jetstream_api_prefix": "",
        "jetstream_event_prefix": "",
        "inbox_prefix": "",
        "user_jwt": "",
        "color_scheme": "",
        "tls_first": False,
        "windows_cert_store": "",
        "windows_cert_match_by": "",
        "windows_cert_match": "",
        "windows_ca_certs_match": None,
    }
    data.update(fields)
    (home / "context").mkdir(parents=True, exist_ok=True)
    (home / "context" / f"{name}.json").write_text(json.dumps(data, indent=2))


def test_a_natscli_context_works_unchanged(server, home):
    natscli_context(home, "prod", url=server.url, description="the test server")
    (home / "context.txt").write_text("prod")
    # no -s: the selected context says where to connect
    ok(None, "stream", "add", "CTX", "--subjects", "ctx.>", "--defaults")
    assert ok(None, "stream", "ls", "-j").json() == ["CTX"]
    info = ok(None, "context", "info", "-j").json()
    assert info["name"] == "prod" and info["url"] == server.url and info["selected"] is True
    # a flag still wins over the context; --context names another one
    natscli_context(home, "dead", url="nats://127.0.0.1:1")
    r = run_cli(None, "--context", "dead", "stream", "ls")
    assert r.rc == 1 and "could not connect to nats://127.0.0.1:1 (context dead)" in r.err
    assert ok(server.url, "--context", "dead", "stream", "ls", "-j").json() == ["CTX"]
    ok(None, "stream", "rm", "CTX", "-f")


def test_add_ls_select_info_rm_write_natscli_files(server, home):
    r = ok(server.url, "context", "add", "local", "--description", "my laptop", "--user", "u", "--password", "p")
    assert 'Context "local" saved' in r.out and "Password: *********" in r.out
    path = home / "context" / "local.json"
    data = json.loads(path.read_text())
    assert data["url"] == server.url and data["user"] == "u" and data["password"] == "p"
    assert data["description"] == "my laptop" and data["jetstream_domain"] == "" and data["nkey"] == ""
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # it may hold a password
    assert (home / "context.txt").read_text() == "local"  # the first context becomes the selected one
    ok(None, "context", "add", "other", "-s", "nats://elsewhere:4222", "--js-domain", "hub", "--creds", "/x.creds")
    assert ok(None, "context", "ls", "-j").json() == ["local", "other"]
    out = ok(None, "context", "ls").out
    assert "local*" in out and "nats://elsewhere:4222" in out
    r = ok(None, "context", "info", "other")
    assert "JetStream Domain: hub" in r.out and "Credentials: /x.creds" in r.out
    assert "does not exist" in r.out  # the creds file is missing: said so, as natscli does
    # updating keeps fields natsctl does not know
    natscli_context(home, "keep", url=server.url, color_scheme="yellow")
    ok(None, "context", "add", "keep", "--token", "t")
    kept = json.loads((home / "context" / "keep.json").read_text())
    assert kept["color_scheme"] == "yellow" and kept["token"] == "t" and kept["url"] == server.url
    ok(None, "context", "select", "other")
    assert (home / "context.txt").read_text() == "other"
    r = run_cli(None, "context", "rm", "other")
    assert r.rc == 1 and "selected context" in r.err
    ok(None, "context", "rm", "local")
    assert not (home / "context" / "local.json").exists()
    r = run_cli(None, "context", "select", "../../etc/passwd")
    assert r.rc == 2 and "invalid context name" in r.err


@pytest.mark.parametrize("kind", server_kinds())
def test_context_credentials_and_api_prefix(kind, tmp_path, home, monkeypatch):
    from tests.helpers.servers import start_server

    srv = start_server(kind, tmp_path, "--user", "ctxuser", "--pass", "ctxpass")
    try:
        r = run_cli(srv.url, "stream", "ls")
        assert r.rc == 1 and "could not connect" in r.err
        ok(srv.url, "context", "add", "auth", "--user", "ctxuser", "--password", "ctxpass", "--select")
        ok(None, "stream", "add", "AUTHED", "--subjects", "authed", "--defaults")
        assert ok(None, "stream", "ls", "-j").json() == ["AUTHED"]
        # the context's JetStream API prefix is the one used: a prefix nobody answers fails
        ok(None, "context", "add", "auth", "--js-api-prefix", "$JS.nowhere.API")
        r = run_cli(None, "stream", "ls")
        assert r.rc == 1 and "$JS.nowhere.API" in r.err
        # and --js-api-prefix on the command line beats the context
        assert ok(None, "--js-api-prefix", "$JS.API", "stream", "ls", "-j").json() == ["AUTHED"]
        # the nats CLI's environment variables: NATS_CONTEXT names the context, NATS_USER/NATS_PASSWORD
        # replace its credentials, a flag beats both
        ok(srv.url, "context", "add", "noauth")
        monkeypatch.setenv("NATS_CONTEXT", "noauth")
        r = run_cli(None, "stream", "ls")
        assert r.rc == 1 and "could not connect" in r.err and "(context noauth)" in r.err
        monkeypatch.setenv("NATS_USER", "ctxuser")
        monkeypatch.setenv("NATS_PASSWORD", "ctxpass")
        assert ok(None, "stream", "ls", "-j").json() == ["AUTHED"]
        r = run_cli(None, "--password", "wrong", "stream", "ls")
        assert r.rc == 1 and "could not connect" in r.err
        monkeypatch.setenv("NATS_TIMEOUT", "soon")
        r = run_cli(None, "stream", "ls")
        assert r.rc == 2 and "--timeout" in r.err
    finally:
        srv.stop()


def test_connection_options_from_a_context(home, tmp_path):
    import ssl

    from natsd.cli.main import _conn_options, build_parser

    natscli_context(
        home,
        "t",
        url="tls://h:4222",
        ca="/nonexistent/ca.pem",
        jetstream_domain="hub",
        tls_first=True,
        nkey="~/seed.nk",
        inbox_prefix="_MY_INBOX",
    )
    (home / "context.txt").write_text("t")
    args = build_parser().parse_args(["stream", "ls"])
    from natsd.cli.main import _SHARED_DEFAULTS

    for k, v in _SHARED_DEFAULTS.items():
        if not hasattr(args, k):
            setattr(args, k, v)
    o = _conn_options(args)
    assert o.server == "tls://h:4222" and o.api_prefix == "$JS.hub.API" and o.tls_first and o.nkey == "~/seed.nk"
    assert o.inbox_prefix == "_MY_INBOX" and o.context == "t"
    from natsd.cli.common import UsageError

    with pytest.raises(UsageError, match="TLS files"):
        o.tls_context()
    # a readable CA gives a verifying SSL context (the system's bundle will do)
    bundle = ssl.get_default_verify_paths().openssl_cafile
    if not os.path.exists(bundle):
        pytest.skip("no system CA bundle")
    o.tls_ca = bundle
    assert isinstance(o.tls_context(), ssl.SSLContext)
