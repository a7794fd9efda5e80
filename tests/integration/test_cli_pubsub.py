"""natsctl pub/sub/req/reply, account info and server check, through the real console script where it matters."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import close_proc, module_server, ok, run_cli, run_script, server_kinds, spawn_cli, wait_for_line


server = module_server("cli-pubsub")


def test_pub_sub_with_templates_and_headers(url):
    sub = spawn_cli(url, "sub", "demo.>", "--count", "3", "--wait", "10s")
    try:
        wait_for_line(sub, "Listening on [demo.>]")
        r = ok(url, "pub", "demo.a", "msg {{Count}} of {{ Count }}", "--count", "2", "-H", "X-Seq:{{Count}}")
        assert r.out.splitlines() == ["Published 10 bytes to demo.a", "Published 10 bytes to demo.a"]
        ok(url, "pub", "demo.b", "line1\nline2")
        out, err = sub.communicate(timeout=15)
    finally:
        close_proc(sub)
    assert sub.returncode == 0, err
    assert "[#1] Received on [demo.a]: 'msg 1 of 1'" in out and "X-Seq: 1" in out
    assert "[#2] Received on [demo.a]: 'msg 2 of 2'" in out and "X-Seq: 2" in out
    assert "[#3] Received on [demo.b]:\nline1\nline2" in out


def test_sub_json_and_timeout(url):
    sub = spawn_cli(url, "sub", "j.x", "--count", "1", "-j", "--wait", "10s")
    try:
        # with -j the "Listening on" line goes to stderr, keeping stdout pure JSON
        wait_for_line(sub, "Listening on [j.x]", stream="stderr")
        ok(url, "pub", "j.x", "{{TimeStamp}}")
        out, _ = sub.communicate(timeout=15)
    finally:
        close_proc(sub)
    d = json.loads(out)
    assert d["subject"] == "j.x" and d["data"].endswith("Z") and d["data"][:2] == "20"
    r = run_script(url, "sub", "nothing.here", "--count", "1", "--wait", "300ms")
    assert r.rc == 1 and "received 0 of 1" in r.err


def test_req_reply(url):
    rep = spawn_cli(url, "reply", "svc.echo", "pong {{Count}}: {{Request}}", "--count", "2")
    try:
        wait_for_line(rep, "Listening on [svc.echo]")
        r = ok(url, "req", "svc.echo", "ping")
        assert r.out.strip() == "pong 1: ping"
        assert "Sending request on [svc.echo]" in r.err and "Received on [" in r.err
        r = ok(url, "req", "svc.echo", "--raw", stdin="from stdin")
        assert r.out.strip() == "pong 2: from stdin"
        rep.communicate(timeout=10)
    finally:
        close_proc(rep)
    assert rep.returncode == 0
    r = run_cli(url, "req", "nobody.home", "x")
    assert r.rc == 1 and "no responders" in r.err


def test_js_api_by_request_like_the_seed(url):
    # seed: nats req '$JS.API.INFO' '' shows the account JSON; nats req '$JS.API.STREAM.INFO.nonexisting' ''
    r = ok(url, "req", "$JS.API.INFO", "", "--raw")
    assert "limits" in json.loads(r.out)
    r = ok(url, "req", "$JS.API.STREAM.INFO.nonexisting", "", "--raw")
    err = json.loads(r.out)["error"]
    assert err["code"] == 404 and err["err_code"] == 10059


def test_pub_wait_shows_the_ack(url):
    ok(url, "stream", "add", "ACKS", "--subjects", "acks.*")
    r = ok(url, "pub", "acks.1", "x", "--wait")
    assert "Stored in Stream: ACKS Sequence: 1" in r.out
    r = ok(url, "pub", "acks.1", "y", "--wait", "-H", "Nats-Msg-Id:abc", "-j")
    assert r.json() == {"subject": "acks.1", "messages": 1, "bytes": 1, "stream": "ACKS", "seq": 2}
    r = ok(url, "pub", "acks.1", "y", "--wait", "-H", "Nats-Msg-Id:abc")
    assert "Sequence: 2 (duplicate)" in r.out
    r = run_cli(url, "pub", "unbound.subject", "x", "--wait")
    assert r.rc == 1 and "no stream captures unbound.subject" in r.err
    r = run_cli(url, "pub", "acks.1", "z", "--wait", "-H", "Nats-Expected-Last-Sequence:1")
    assert r.rc == 1 and "wrong last sequence" in r.err


def test_account_info_and_server_check(url, server):
    ok(url, "stream", "add", "A1", "--subjects", "a1")
    info = ok(url, "account", "info", "-j").json()
    assert info["streams"] == 1 and "limits" in info and "api" in info
    out = ok(url, "account", "info").out
    assert "Streams: 1 of Unlimited" in out and "Memory:" in out and "Storage:" in out
    r = run_script(url, "server", "check")
    assert r.rc == 0, r
    assert r.out.startswith("OK Connection: connected to") and "OK Jetstream: 1 streams" in r.out
    checks = ok(url, "server", "check", "jetstream", "-j").json()
    assert [c["check"] for c in checks] == ["jetstream"] and checks[0]["status"] == "OK"


def test_connection_failures_and_exit_codes(tmp_path):
    from tests.helpers.servers import free_port

    dead = f"nats://127.0.0.1:{free_port()}"
    r = run_script(dead, "server", "check")
    assert r.rc == 1 and r.out.startswith("CRITICAL Connection")
    r = run_script(dead, "stream", "ls")
    assert r.rc == 1 and r.err.startswith("natsctl: error: could not connect to")
    # NATS_URL is honoured when -s is absent
    import os
    import subprocess

    from tests.helpers.cli import cli_env, natsctl_script

    env = cli_env()
    env["NATS_URL"] = dead
    p = subprocess.run([natsctl_script(), "stream", "ls"], capture_output=True, text=True, env=env, timeout=30)
    assert p.returncode == 1 and dead in p.stderr
    assert os.environ.get("NATS_URL") is None or True
    # usage errors are 2, and --help documents the codes
    r = run_script(None, "stream", "frobnicate")
    assert r.rc == 2 and "natsctl: error:" in r.err
    r = run_script(None, "--help")
    assert r.rc == 0 and "exit codes:" in r.out and "usage error" in r.out


@pytest.mark.parametrize("kind", server_kinds())
def test_user_password_and_no_jetstream(kind, tmp_path):
    from tests.helpers.servers import start_server

    srv = start_server(kind, tmp_path, "--user", "u", "--pass", "secret", jetstream=False)
    try:
        r = run_cli(srv.url, "--user", "u", "--password", "wrong", "stream", "ls")
        assert r.rc == 1 and "could not connect" in r.err
        # right credentials, but JetStream is off: the connection check passes, the JetStream one is critical
        r = run_cli(srv.url, "--user", "u", "--password", "secret", "server", "check")
        assert r.rc == 1, r
        assert "OK Connection" in r.out and "CRITICAL Jetstream" in r.out
        r = run_cli(srv.url, "--user", "u", "--password", "secret", "stream", "ls")
        assert r.rc == 1 and "JetStream not enabled" in r.err
        r = run_cli(f"nats://u:secret@127.0.0.1:{srv.port}", "pub", "x", "y")
        assert r.rc == 0, r
    finally:
        srv.stop()
