"""Auth callout (issue 29 item 3, ADR-26): one nats-py callout service and one client script
against nats-server and natsd, each started from the same configuration file. Cases: a user the
service maps to an account with permissions; a user it refuses; a service that stays silent; the
same exchange sealed with xkeys."""

from __future__ import annotations

import asyncio
import json
import time

import nats
import pytest

from natsd.config.options import options_from_file
from tests.helpers.callout_service import CalloutService, Keys, new_keys
from tests.helpers.inproc import running_server
from tests.helpers.rawclient import RawClient
from tests.helpers.servers import reference_binary, start_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

KINDS = ["natsd", "reference"]


def _config(keys: Keys, *, xkey: bool = False) -> str:
    return f"""
accounts {{
  AUTH {{ users: [ {{ user: auth, password: pwd }} ] }}
  APP {{}}
}}
authorization {{
  timeout: 1
  auth_callout {{
    issuer: {keys.account}
    auth_users: [ auth ]
    account: AUTH
    {f"xkey: {keys.xkey}" if xkey else ""}
  }}
}}
"""


def _decide(n: dict) -> dict | str | None:
    user = n["connect_opts"].get("user")
    if user == "alice" and n["connect_opts"].get("pass") == "secret":
        return {
            "aud": "APP",
            "name": "alice",
            "nats": {
                "pub": {"allow": ["app.>"]},
                "sub": {"allow": ["app.>", "_INBOX.>"]},
                "subs": -1,
                "payload": -1,
                "data": -1,
            },
        }
    if user == "brief":  # credentials that run out (nats-server applies no JWT limits to callout users)
        return {"aud": "APP", "exp": int(time.time()) + 2, "nats": {"subs": 1, "payload": -1, "data": -1}}
    if user == "mute":
        return None
    return "no such user"


async def _brief(port: int) -> str:
    """A user whose JWT allows one subscription and expires two seconds after it was issued."""
    async with RawClient.connect(port) as c:
        connect = {"verbose": False, "user": "brief", "pass": "x", "protocol": 1, "lang": "python3"}
        await c.send(b"CONNECT " + json.dumps(connect).encode() + b"\r\nSUB a 1\r\nSUB b 2\r\nPING\r\n")
        seen = (await c.expect_closed(timeout=6)).decode()
        assert str(c.info.get("xkey", "")).startswith("X")  # the server's xkey, in INFO as in nats-server
    # nats-server also sends its post-CONNECT INFO (connect_info, remote_account) after the first PONG, to every
    # client: a general difference, not the callout's, left out here.
    return "".join(line for line in seen.splitlines(keepends=True) if not line.startswith("INFO "))


async def _refused(port: int, user: str, password: str) -> str:
    """What a client that the callout turns down reads, up to the close."""
    async with RawClient.connect(port) as c:
        connect = {"verbose": False, "user": user, "pass": password, "protocol": 1, "lang": "python3"}
        await c.send(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        return (await c.expect_closed(timeout=5)).decode()


async def _script(url: str, keys: Keys) -> dict:
    port = int(url.rsplit(":", 1)[1])
    service = CalloutService(keys, _decide)
    svc_errors: list[str] = []

    async def on_svc_error(e: Exception) -> None:
        svc_errors.append(str(e))

    svc = await nats.connect(url, user="auth", password="pwd", allow_reconnect=False, error_cb=on_svc_error)
    events: list[dict] = []

    async def on_event(msg) -> None:
        events.append(json.loads(msg.data))

    try:
        await svc.subscribe("$SYS.REQ.USER.AUTH", cb=service.handle)
        await svc.subscribe("$SYS.ACCOUNT.CLIENT.AUTH.ERR", cb=on_event)
        await svc.publish("$SYS.REQ.USER.AUTH", b"forged")  # the service's account may not ask itself
        await svc.flush()
        # Allowed: placed in APP with the service's permissions.
        errors: list[Exception] = []

        async def on_error(e: Exception) -> None:
            errors.append(e)

        nc = await nats.connect(url, user="alice", password="secret", allow_reconnect=False, error_cb=on_error)
        got = []

        async def on_msg(m) -> None:
            got.append(m.subject)

        await nc.subscribe("app.>", cb=on_msg)
        await nc.publish("app.one", b"x")
        await nc.publish("other.one", b"x")  # denied by the granted permissions
        await nc.flush()
        await asyncio.sleep(0.3)
        allowed = {"got": got, "errors": sorted(str(e) for e in errors)}
        await nc.close()
        # Refused by the service.
        denied = await _refused(port, "bob", "nope")
        # The service never answers: refused after the authorization timeout.
        mute = await _refused(port, "mute", "x")
        brief = await _brief(port)
        await asyncio.sleep(0.5)
        await svc.flush()
    finally:
        await svc.close()
    first = service.requests[0]["nats"]
    return {
        "allowed": allowed,
        "denied": denied,
        "mute": mute,
        "brief": brief,
        "request_keys": sorted(first),
        "request_aud": service.requests[0]["aud"],
        "client_info": sorted(k for k in first["client_info"] if k not in ("id",)),
        "connect_opts": {k: first["connect_opts"].get(k) for k in ("user", "pass", "protocol")},
        "server_key_is_id": service.requests[0]["iss"] == first["server_id"]["id"],
        "encrypted": sorted(set(service.encrypted)),
        "events": sorted((e["type"], e["client"].get("user"), e["client"].get("acc"), e["reason"]) for e in events),
        "svc_errors": svc_errors,
        "event_shape": sorted(events[0]) if events else [],
        # (natsd measures no RTT for a connection refused before its first PONG)
        "event_client": sorted(k for k in events[0]["client"] if k != "rtt") if events else [],
    }


async def _both(tmp_path, keys: Keys, xkey: bool) -> tuple[dict, dict]:
    conf = tmp_path / "callout.conf"
    conf.write_text(_config(keys, xkey=xkey))
    ref = start_server("reference", tmp_path, config=conf, jetstream=False)
    try:
        expected = await _script(ref.url, keys)
    finally:
        ref.stop()
    options = options_from_file(str(conf))
    options.host, options.port, options.http_port = "127.0.0.1", 0, 0
    async with running_server(options=options) as server:
        got = await _script(server.client_url, keys)
    return expected, got


@pytest.mark.parametrize("xkey", [False, True], ids=["plain", "xkey"])
async def test_auth_callout_side_by_side(tmp_path, xkey, caplog):
    if reference_binary() is None:
        pytest.skip("nats-server binary not available")
    caplog.set_level(5, logger="natsd")  # protocol tracing on: still no password in natsd's log
    keys = new_keys()
    expected, got = await _both(tmp_path, keys, xkey)
    assert "MSG_PAYLOAD" in caplog.text and "secret" not in caplog.text
    assert got == expected
    assert expected["allowed"]["got"] == ["app.one"]
    assert expected["encrypted"] == [xkey]
    assert expected["denied"].startswith("-ERR 'Authorization Violation'")
    assert expected["mute"].startswith("-ERR 'Authorization Violation'")
    assert expected["brief"] == "PONG\r\n-ERR 'User Authentication Expired'\r\n"
    assert [e[3] for e in expected["events"]] == ["Auth callout service returned an error: no such user", ""]
    assert any('permissions violation for publish to "$sys.req.user.auth"' in e.lower() for e in expected["svc_errors"])
