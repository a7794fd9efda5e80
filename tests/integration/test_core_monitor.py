"""Monitoring HTTP endpoints: field names as nats-server's, counters consistent with traffic."""

from __future__ import annotations

import asyncio
import json

import nats

from tests.helpers.inproc import running_server


async def http_get(port: int, path: str) -> tuple[int, dict | bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body


async def test_varz_counts_traffic(server, nc):
    sub = await nc.subscribe("m.*")
    for i in range(5):
        await nc.publish("m.x", b"12345")
    await nc.flush()
    for _ in range(5):
        await sub.next_msg(timeout=2)
    status, v = await http_get(server.http_port, "/varz")
    assert status == 200
    for key in (
        "server_id",
        "server_name",
        "version",
        "proto",
        "host",
        "port",
        "max_connections",
        "ping_interval",
        "ping_max",
        "http_port",
        "max_control_line",
        "max_payload",
        "max_pending",
        "write_deadline",
        "start",
        "now",
        "uptime",
        "mem",
        "cores",
        "connections",
        "total_connections",
        "in_msgs",
        "in_bytes",
        "out_msgs",
        "out_bytes",
        "slow_consumers",
        "subscriptions",
        "http_req_stats",
    ):
        assert key in v, key
    assert v["in_msgs"] == 5 and v["in_bytes"] == 25
    assert v["out_msgs"] == 5 and v["out_bytes"] == 25
    assert v["connections"] == 1 and v["subscriptions"] >= 1
    assert v["port"] == server.port and v["max_payload"] == 1048576
    # natsd's own field: whether the compiled build is in use (true in `make test-compiled`)
    from natsd import _compiled

    assert v["natsd_compiled"]["active"] is _compiled.STATUS["active"]
    assert v["natsd_compiled"]["modules"] == list(_compiled.STATUS["modules"])
    assert bool(v["natsd_compiled"]["modules"]) is _compiled.STATUS["active"]
    assert v["now"].endswith("Z")


async def test_connz_subs_paging_sort(server):
    clients = [await nats.connect(server.client_url, name=f"c{i}") for i in range(3)]
    try:
        await clients[1].subscribe("a")
        await clients[1].subscribe("b", queue="q")
        for c in clients:
            await c.flush()
        status, cz = await http_get(server.http_port, "/connz?subs=1")
        assert status == 200
        assert cz["num_connections"] == 3 and cz["total"] == 3 and cz["limit"] == 1024
        by_name = {c["name"]: c for c in cz["connections"]}
        assert sorted(by_name["c1"]["subscriptions_list"]) == ["a", "b"]
        assert by_name["c1"]["lang"] == "python3" and by_name["c1"]["ip"] == "127.0.0.1"
        _, page = await http_get(server.http_port, "/connz?limit=1&offset=1&sort=cid")
        assert page["num_connections"] == 1 and page["offset"] == 1 and page["total"] == 3
        assert page["connections"][0]["cid"] == sorted(c["cid"] for c in cz["connections"])[1]
        _, detail = await http_get(server.http_port, "/connz?subs=detail&sort=subs")
        first = detail["connections"][0]
        assert first["name"] == "c1"
        assert {d["subject"]: d.get("qgroup") for d in first["subscriptions_list_detail"]} == {"a": None, "b": "q"}
        status, _ = await http_get(server.http_port, "/connz?sort=bogus")
        assert status == 400
    finally:
        for c in clients:
            await c.close()


async def test_subsz_healthz_accountz_jsz(server, nc):
    await nc.subscribe("x.y")
    await nc.flush()
    _, sz = await http_get(server.http_port, "/subsz?subs=1")
    assert sz["num_subscriptions"] >= 1
    assert any(s["subject"] == "x.y" and s["account"] == "$G" for s in sz["subscriptions_list"])
    for key in ("num_cache", "num_inserts", "num_removes", "num_matches", "cache_hit_rate", "max_fanout", "avg_fanout"):
        assert key in sz
    assert await http_get(server.http_port, "/healthz") == (200, {"status": "ok"})
    _, az = await http_get(server.http_port, "/accountz")
    assert "$G" in az["accounts"]
    _, ad = await http_get(server.http_port, "/accountz?acc=$G")
    assert ad["account_detail"]["account_name"] == "$G"
    assert ad["account_detail"]["client_connections"] == 1
    _, js = await http_get(server.http_port, "/jsz")
    assert js["disabled"] is True  # core-only server
    status, body = await http_get(server.http_port, "/nope")
    assert status == 404


async def test_monitoring_off_by_default():
    async with running_server() as s:
        assert s.http_port == 0


async def test_keep_alive_serves_several_requests(server):
    reader, writer = await asyncio.open_connection("127.0.0.1", server.http_port)
    try:
        for _ in range(3):
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0].split(b":")[1])
            assert json.loads(await reader.readexactly(length)) == {"status": "ok"}
    finally:
        writer.close()
        await writer.wait_closed()
