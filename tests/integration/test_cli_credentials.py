"""natsctl and credentials, against nats-server and natsd: a URL's user info wins over the selected
context's (as in the nats CLI), passwords never appear in what natsctl prints, and a publish the
server refuses shows the server's permissions error instead of a timeout."""

from __future__ import annotations

import json
import time

import pytest

from tests.helpers.cli import run_cli, server_kinds, start_kind

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CONF = """
accounts {
  APP: {
    jetstream: enabled
    users: [ { user: app, password: apppass,
               permissions: { publish: { deny: ["ORDERS.x"] } } } ]
  }
  SYS: { users: [ { user: sys, password: syspass } ] }
}
system_account: SYS
"""


@pytest.fixture(scope="module", params=server_kinds())
def server(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(f"cli-creds-{request.param}")
    (d / "creds.conf").write_text(CONF)
    srv = start_kind(request.param, d, "-c", str(d / "creds.conf"))
    yield srv
    srv.stop()


@pytest.fixture
def app_context(tmp_path, monkeypatch, server):
    """A selected context holding the APP user's credentials (the nats CLI's file layout)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.delenv("NATS_URL", raising=False)
    home = tmp_path / "cfg" / "nats"
    (home / "context").mkdir(parents=True)
    (home / "context" / "app.json").write_text(
        json.dumps({"url": f"nats://127.0.0.1:{server.port}", "user": "app", "password": "apppass"})
    )
    (home / "context.txt").write_text("app")
    return home


def _url(server, userinfo: str) -> str:
    return f"nats://{userinfo}@127.0.0.1:{server.port}"


def test_url_credentials_win_over_the_context(server, app_context):
    # The context's user (APP) has no system account: its ping has no responders.
    r = run_cli(None, "server", "ping", "-j")
    assert r.rc == 1
    # The URL's user is the system user: the ping is answered.
    r = run_cli(_url(server, "sys:syspass"), "server", "ping", "-j")
    assert r.rc == 0, r
    # A wrong password in the URL fails, although the context's credentials are right.
    r = run_cli(_url(server, "app:wrong"), "stream", "ls")
    assert r.rc == 1
    assert f"could not connect to nats://app:xxxxx@127.0.0.1:{server.port} (context app): " in r.err
    assert "authorization" in r.err.lower()
    assert "wrong" not in r.err + r.out


def test_connected_url_is_redacted(server, app_context):
    r = run_cli(_url(server, "sys:syspass"), "server", "check", "connection")
    assert r.rc == 0, r
    assert f"OK Connection: connected to nats://sys:xxxxx@127.0.0.1:{server.port} in " in r.out
    assert "syspass" not in r.out + r.err
    r = run_cli(_url(server, "app:apppass"), "account", "info")
    assert r.rc == 0, r
    assert "Connected URL: nats://app:xxxxx@" in r.out and "apppass" not in r.out


def test_contexts_show_no_password(server, app_context):
    home = app_context
    (home / "context" / "withpw.json").write_text(json.dumps({"url": f"nats://sys:syspass@127.0.0.1:{server.port}"}))
    for argv in (("context", "ls"), ("context", "info", "withpw")):
        r = run_cli(None, *argv)
        assert r.rc == 0, r
        assert "syspass" not in r.out and "nats://sys:xxxxx@127.0.0.1" in r.out


def test_publish_permission_violation_is_the_servers_error(server, app_context):
    r = run_cli(None, "stream", "add", "ORDERS", "--subjects", "ORDERS.>", "--defaults")
    assert r.rc == 0, r
    try:
        t0 = time.monotonic()
        r = run_cli(None, "pub", "ORDERS.x", "hello", "--wait")
        took = time.monotonic() - t0
        assert r.rc == 1
        assert r.err == 'natsctl: error: Permissions Violation for Publish to "ORDERS.x"\n'
        assert took < 4, took  # not the 5 s acknowledgement timeout
        r = run_cli(None, "pub", "ORDERS.x", "hello")
        assert r.rc == 1 and 'Permissions Violation for Publish to "ORDERS.x"' in r.err
        r = run_cli(None, "req", "ORDERS.x", "hello")
        assert r.rc == 1 and r.err.endswith('natsctl: error: Permissions Violation for Publish to "ORDERS.x"\n')
        r = run_cli(None, "pub", "ORDERS.ok", "hello", "--wait")
        assert r.rc == 0 and "Stored in Stream: ORDERS Sequence: 1" in r.out
        # a dead first server of the list is no error of the publish that follows
        for _ in range(3):
            r = run_cli(f"nats://127.0.0.1:1,{_url(server, 'app:apppass')}", "pub", "ORDERS.ok", "again", "--wait")
            assert r.rc == 0, r
    finally:
        run_cli(None, "stream", "rm", "ORDERS", "-f")
