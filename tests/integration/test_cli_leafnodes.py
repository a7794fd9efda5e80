"""``natsctl server report leafnodes`` / ``server request leafnodes`` against nats-server and natsd hubs.

The same hub config (a system account, a leafnode user bound to account EDGE) runs as nats-server and as
natsd (subprocesses); a nats-server leaf links to it; natsctl, connected as the system user, must list the
same link on both: name, account, direction, counters, and the subscriptions with ``--subscriptions``.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.request

import pytest

from tests.helpers.cli import run_cli
from tests.helpers.servers import free_port, reference_binary, start_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]

HUB_CONF = """
server_name: HUB
http_port: {http}
accounts {{
  SYS {{ users: [ {{user: sys, password: sys}} ] }}
  EDGE {{ users: [ {{user: e, password: e}} ] }}
}}
system_account: SYS
leafnodes {{ port: {lp}, authorization {{ users: [ {{user: leaf, password: leaf, account: EDGE}} ] }} }}
"""


def _leafs(http: int) -> list:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/leafz", timeout=2) as r:
            return json.loads(r.read())["leafs"]
    except OSError:
        return []


def _wait(pred, what: str, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while not (r := pred()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
    return r


def _observe(kind: str, tmp_path) -> dict:
    d = tmp_path / kind
    d.mkdir()
    http, lp = free_port(), free_port()
    cfg = d / "hub.conf"
    cfg.write_text(HUB_CONF.format(http=http, lp=lp))
    hub = start_server(kind, d / "hub", config=str(cfg), jetstream=False)
    try:
        _wait(lambda: _port_open(lp), "leafnode port")
        leaf_cfg = d / "leaf.conf"
        leaf_cfg.write_text(
            f'server_name: LEAF\nleafnodes {{ remotes: [ {{ url: "nats-leaf://leaf:leaf@127.0.0.1:{lp}" }} ] }}\n'
        )
        leaf = start_server("reference", d / "leaf", config=str(leaf_cfg), jetstream=False)
        try:
            _wait(lambda: _leafs(http), f"leaf linked to the {kind} hub")
            sys_url = f"nats://sys:sys@127.0.0.1:{hub.port}"
            rep = run_cli(sys_url, "server", "report", "leafnodes", "1", "--json")
            assert rep.rc == 0, rep
            table = run_cli(sys_url, "server", "report", "leafnodes", "1")
            assert table.rc == 0, table
            req = run_cli(sys_url, "server", "request", "leafnodes", "1", "--subscriptions")
            assert req.rc == 0, req
            other = run_cli(sys_url, "server", "report", "leafnodes", "--account", "NOPE", "--json")
            denied = run_cli(f"nats://e:e@127.0.0.1:{hub.port}", "server", "report", "leafnodes", "--timeout", "1s")
            return {
                "report": rep.json(),
                "table": table.out,
                "request": req.json(),
                "other": other.json(),
                "denied": denied,
            }
        finally:
            leaf.stop()
    finally:
        hub.stop()


def _port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.mark.timeout(120)
def test_report_and_request_leafnodes_match_the_reference(tmp_path):
    seen = {kind: _observe(kind, tmp_path) for kind in ("reference", "natsd")}
    for kind, o in seen.items():
        (row,) = o["report"]
        assert (row["server"], row["name"], row["account"], row["is_spoke"]) == ("HUB", "LEAF", "EDGE", False), kind
        assert row["ip"] == "127.0.0.1" and row["port"] > 0 and row["rtt"]
        assert "Leafnode Report" in o["table"] and "LEAF" in o["table"] and "EDGE" in o["table"], o["table"]
        data = o["request"]["data"]
        assert o["request"]["server"]["name"] == "HUB" and data["leafnodes"] == 1
        # The leaf's own interest (its loop-detection subject at least) is listed with --subscriptions.
        assert any(s.startswith("$LDS.") for s in data["leafs"][0]["subscriptions_list"]), kind
        assert o["other"] == []
        assert o["denied"].rc == 1 and "system account" in o["denied"].err, o["denied"]
    keys = ("server", "name", "account", "is_spoke")  # (compression: natsd links are never compressed, "off")
    assert [{k: r.get(k) for k in keys} for r in seen["natsd"]["report"]] == [
        {k: r.get(k) for k in keys} for r in seen["reference"]["report"]
    ]
