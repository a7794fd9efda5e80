"""``natsctl server ping``, ``server report jetstream`` and ``server report connections`` against nats-server and
natsd, and the system account's ``$SYS.REQ.SERVER.PING[.*]`` answers they read (natsd.server.monitoring.sysreq)
side by side.

Both servers run the same config: a system account ``SYS`` (user sys) and a JetStream account ``APP`` (user a).
"""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.helpers.cli import run_cli, server_kinds
from tests.helpers.servers import reference_binary, start_server

pytestmark = pytest.mark.integration

CONF = """
server_name: S1
accounts {
  SYS { users: [ {user: sys, password: sys} ] }
  APP { users: [ {user: a, password: a} ], jetstream: enabled }
}
system_account: SYS
"""


@pytest.fixture(scope="module", params=server_kinds())
def server(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(f"sysreq-{request.param}")
    cfg = d / "server.conf"
    cfg.write_text(CONF)
    if request.param == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server binary not installed")
    srv = start_server(request.param, d, config=str(cfg))
    yield srv
    srv.stop()


def sys_url(server) -> str:
    return f"nats://sys:sys@127.0.0.1:{server.port}"


def app_url(server) -> str:
    return f"nats://a:a@127.0.0.1:{server.port}"


def ok(url: str, *argv: str):
    r = run_cli(url, *argv)
    assert r.rc == 0, r
    return r


async def _requests(server, asks: list[tuple[str, bytes]]) -> list[dict | str]:
    nc = await nats.connect(sys_url(server))
    out: list[dict | str] = []
    try:
        for subject, body in asks:
            try:
                out.append(json.loads((await nc.request(subject, body, timeout=1.5)).data))
            except nats.errors.NoRespondersError:
                out.append("no responders")
            except nats.errors.TimeoutError:
                out.append("no answer")
    finally:
        await nc.close()
    return out


def test_ping(server):
    r = ok(sys_url(server), "server", "ping")
    lines = r.out.splitlines()
    assert lines[0].startswith("S1 ") and "rtt=" in lines[0], r
    assert "---- ping statistics ----" in r.out and "1 replies max:" in r.out, r
    assert ok(sys_url(server), "server", "ping", "--id").out.split()[0].startswith("N")
    doc = ok(sys_url(server), "server", "ping", "-j").json()
    assert [s["name"] for s in doc["servers"]] == ["S1"] and doc["missing"] == 0
    missing = run_cli(sys_url(server), "server", "ping", "2", "--timeout", "1s")
    assert missing.rc == 1 and "Missing 1 server(s)" in missing.out, missing
    denied = run_cli(app_url(server), "server", "ping", "--timeout", "1s")  # not the system account
    assert denied.rc == 1 and "system account" in denied.err, denied


def test_report_jetstream(server):
    ok(app_url(server), "stream", "add", "ORDERS", "--subjects", "orders.*", "--defaults")
    try:
        for i in range(3):
            ok(app_url(server), "pub", "orders.new", f"order {i}")
        ok(app_url(server), "con", "add", "ORDERS", "C1", "--pull", "--defaults")
        rows = ok(sys_url(server), "server", "report", "jetstream", "-j").json()
        assert len(rows) == 1 and rows[0]["server"] == "S1", rows
        assert (rows[0]["streams"], rows[0]["consumers"], rows[0]["messages"]) == (1, 1, 3), rows
        assert rows[0]["file"] > 0 and rows[0]["memory"] == 0
        acc = ok(sys_url(server), "server", "report", "jetstream", "--account", "APP", "-j").json()
        assert (acc[0]["streams"], acc[0]["consumers"], acc[0]["messages"]) == (1, 1, 3), acc
        out = ok(sys_url(server), "server", "report", "jetstream").out
        assert "JetStream Summary" in out and "S1" in out and "Consumers" in out
        assert (
            "JetStream Summary for Account APP" in ok(sys_url(server), "server", "report", "js", "--account", "APP").out
        )
    finally:
        ok(app_url(server), "stream", "rm", "ORDERS", "-f")


def test_report_connections(server):
    async def scenario():
        nc = await nats.connect(app_url(server), name="watcher")
        try:
            await nc.subscribe("work.>")
            await nc.subscribe("other")
            await nc.publish("work.1", b"x")
            await nc.flush()
            return await asyncio.to_thread(
                lambda: (
                    run_cli(sys_url(server), "server", "report", "connections", "-j"),
                    run_cli(sys_url(server), "server", "report", "connections", "--account", "APP", "-j"),
                    run_cli(
                        sys_url(server),
                        "server",
                        "report",
                        "connections",
                        "--account",
                        "APP",
                        "--subject",
                        "work.9",
                        "-j",
                    ),
                    run_cli(sys_url(server), "server", "report", "connections", "--subject", "work.9", "-j"),
                    run_cli(sys_url(server), "server", "report", "connections"),
                )
            )
        finally:
            await nc.close()

    every, app, work, no_acc, table = asyncio.run(scenario())
    for r in (every, app, work, table):
        assert r.rc == 0, r
    assert no_acc.rc == 1 and "filter by subject only valid with account filtering" in no_acc.err, no_acc
    watcher = [c for c in every.json() if c.get("name") == "watcher"]
    assert len(watcher) == 1 and watcher[0]["server"]["name"] == "S1", every
    assert sorted(watcher[0]["subscriptions_list"]) == ["other", "work.>"] and watcher[0]["in_msgs"] >= 1
    assert [c.get("name") for c in app.json()] == ["watcher"], app
    assert [c.get("name") for c in work.json()] == ["watcher"], work
    assert "Connections out of" in table.out and "watcher" in table.out and "Connections per server" in table.out


def test_report_connections_fills_the_account_column_and_report_accounts(server):
    async def scenario():
        nc = await nats.connect(app_url(server), name="acc-watcher")
        try:
            await nc.subscribe("acc.>")
            await nc.publish("acc.1", b"xyz")
            await nc.flush()
            return await asyncio.to_thread(
                lambda: (
                    run_cli(sys_url(server), "server", "report", "connections", "-j"),
                    run_cli(sys_url(server), "server", "report", "connections"),
                    run_cli(sys_url(server), "server", "report", "accounts", "-j"),
                    run_cli(sys_url(server), "server", "report", "accounts"),
                    run_cli(sys_url(server), "server", "report", "accounts", "APP"),
                    run_cli(sys_url(server), "server", "report", "accounts", "NOPE"),
                )
            )
        finally:
            await nc.close()

    conns, table, accs, acc_table, app_conns, nope = asyncio.run(scenario())
    for r in (conns, table, accs, acc_table, app_conns):
        assert r.rc == 0, r
    watcher = [c for c in conns.json() if c.get("name") == "acc-watcher"]
    assert watcher[0]["account"] == "APP" and watcher[0]["authorized_user"] == "a"
    row = next(ln for ln in table.out.splitlines() if "acc-watch" in ln)  # (the table wraps long names)
    assert " APP " in row, table.out
    by_name = {a["account"]: a for a in accs.json()}
    assert set(by_name) >= {"APP", "SYS"}, accs.out
    app = by_name["APP"]
    assert app["connections"] >= 1 and app["in_msgs"] >= 1 and app["subscriptions"] >= 1
    assert app["server"][0]["name"] == "S1" and any(c["name"] == "acc-watcher" for c in app["connection_info"])
    assert "Accounts Overview" in acc_table.out and "In Bytes" in acc_table.out and "APP" in acc_table.out
    assert "acc-watch" in app_conns.out and "Connections out of" in app_conns.out
    assert nope.rc == 1 and "did not receive any results for account NOPE" in nope.err


def test_system_requests_are_shaped_as_the_reference(server):
    """The keys natsctl and the nats CLI read, and the refusals (natsd's answers are compared with nats-server's
    by running this test against both: every assertion holds for both)."""
    ping, varz, jsz, connz, health, idz, statz_dot, bad, other = asyncio.run(
        _requests(
            server,
            [
                ("$SYS.REQ.SERVER.PING", b""),
                ("$SYS.REQ.SERVER.PING.VARZ", b""),
                ("$SYS.REQ.SERVER.PING.JSZ", b'{"accounts":true}'),
                ("$SYS.REQ.SERVER.PING.CONNZ", b'{"subscriptions":true}'),
                ("$SYS.REQ.SERVER.PING.HEALTHZ", b""),
                ("$SYS.REQ.SERVER.PING.IDZ", b""),
                ("$SYS.REQ.SERVER.PING.STATZ", b""),
                ("$SYS.REQ.SERVER.PING.CONNZ", b"bad"),
                ("$SYS.REQ.SERVER.PING.VARZ", b'{"server_name":"elsewhere"}'),
            ],
        )
    )
    assert isinstance(ping, dict) and set(ping) == {"server", "statsz"}
    assert {"name", "host", "id", "ver", "jetstream", "flags", "seq", "time"} <= set(ping["server"])
    assert {
        "start",
        "mem",
        "cores",
        "cpu",
        "connections",
        "total_connections",
        "active_accounts",
        "subscriptions",
        "sent",
        "received",
        "slow_consumers",
        "active_servers",
        "jetstream",
    } <= set(ping["statsz"])
    assert ping["statsz"]["active_servers"] == 1 and ping["statsz"]["connections"] >= 1
    assert isinstance(varz, dict) and varz["data"]["server_name"] == "S1" and varz["data"]["system_account"] == "SYS"
    assert isinstance(jsz, dict) and [a["name"] for a in jsz["data"]["account_details"]] == ["APP"]
    assert isinstance(connz, dict) and connz["data"]["num_connections"] >= 1
    assert all("subscriptions_list" in c for c in connz["data"]["connections"])
    assert isinstance(health, dict) and health["data"] == {"status": "ok", "status_code": 200}
    assert isinstance(idz, dict) and set(idz) == {"name", "host", "id"} and idz["id"] == ping["server"]["id"]
    assert statz_dot == "no responders"  # nats-server answers $SYS.REQ.SERVER.PING[.STATSZ], not .PING.STATZ
    assert isinstance(bad, dict) and bad["error"] == {
        "code": 400,
        "description": "invalid character 'b' looking for beginning of value",
    }
    assert other == "no answer"  # a server the filter excludes stays silent
    sid = ping["server"]["id"]
    by_id = asyncio.run(
        _requests(
            server,
            [
                (f"$SYS.REQ.SERVER.{sid}.STATSZ", b""),
                (f"$SYS.REQ.SERVER.{sid}.JSZ", b""),
                ("$SYS.REQ.SERVER.PING.STATSZ", b""),
                ("$SYS.REQ.SERVER.PING.ROUTEZ", b""),
                ("$SYS.REQ.SERVER.PING.GATEWAYZ", b""),
            ],
        )
    )
    assert isinstance(by_id[0], dict) and by_id[0]["server"]["name"] == "S1" and "statsz" in by_id[0]
    assert "store_dir" not in by_id[0]["statsz"]["jetstream"]["config"]
    assert isinstance(by_id[1], dict) and by_id[1]["data"]["streams"] == 0
    assert isinstance(by_id[2], dict) and set(by_id[2]) == {"server", "statsz"}
    assert isinstance(by_id[3], dict) and (by_id[3]["data"]["num_routes"], by_id[3]["data"]["routes"]) == (0, [])
    assert isinstance(by_id[4], dict) and by_id[4]["data"]["outbound_gateways"] == {}
