"""natsctl trace (issue 29): the nats tool's trace verb, against natsd and nats-server alike."""

from __future__ import annotations

import json

import pytest

from natsd.cli.trace import render
from tests.helpers.cli import close_proc, module_server, ok, spawn_cli, wait_for_line

pytestmark = [pytest.mark.timeout(60)]

server = module_server("cli-trace")


def test_trace_only_reports_without_delivering(url):
    sub = spawn_cli(url, "sub", "demo.>", "--count", "1", "--wait", "3s")
    try:
        wait_for_line(sub, "Listening on [demo.>]")
        r = ok(url, "trace", "demo.a", "hello")
        assert r.out.startswith("Tracing message route to subject demo.a")
        assert '--C Client "natsctl" cid:' in r.out and 'subject:"demo.>"' in r.out
        assert "Egress Count:" in r.out and "Client: 1" in r.out
        out, _ = sub.communicate(timeout=15)
    finally:
        close_proc(sub)
    assert "Received on" not in out  # trace-only: nothing delivered


def test_trace_deliver_and_json(url):
    sub = spawn_cli(url, "sub", "demo2.>", "--count", "1", "--wait", "10s")
    try:
        wait_for_line(sub, "Listening on [demo2.>]")
        r = ok(url, "trace", "demo2.a", "hi", "--deliver", "--json", "-H", "X-A:1")
        ev = json.loads(r.out)
        assert ev["request"]["header"]["X-A"] == ["1"]
        assert [e["type"] for e in ev["events"]] == ["in", "eg"]
        out, _ = sub.communicate(timeout=15)
    finally:
        close_proc(sub)
    assert "Received on [demo2.a]" in out


def test_no_interest(url):
    r = ok(url, "trace", "nobody.here")
    assert "--X No active interest" in r.out


def test_render_shapes_like_the_nats_tool():
    ev = {
        "server": {"name": "n1", "ver": "2.11.0"},
        "events": [
            {
                "type": "in",
                "ts": "2026-01-01T00:00:00.000001Z",
                "kind": 0,
                "cid": 5,
                "name": "t",
                "acc": "$G",
                "subj": "bar",
            },
            {"type": "sm", "ts": "2026-01-01T00:00:00.000002Z", "to": "foo"},
            {"type": "js", "ts": "2026-01-01T00:00:00.000003Z", "stream": "S", "subject": "foo"},
            {
                "type": "eg",
                "ts": "2026-01-01T00:00:00.000004Z",
                "kind": 0,
                "cid": 6,
                "sub": "foo",
                "queue": "q",
                "error": "Not delivered because of no echo",
            },
        ],
    }
    lines = render([ev], show_ts=True)
    assert lines[:5] == [
        '[0µs] Client "t" cid:5 server:"n1" version:"2.11.0"',
        '[1µs]     Mapping subject:"foo"',
        '[2µs] --J JetStream action:"stored" stream:"S" subject:"foo"',
        '[3µs] --C Client cid:6 subject:"foo" queue:"q"',
        "  --X Error: Not delivered because of no echo",
    ]
    assert "  JetStream: 1" in lines and "     Client: 1" in lines
