"""Auth callout in operator mode (issue 29 item 3): the AUTH account JWT's ``authorization`` section
names the service's user and allows APP; clients present a bearer "sentinel" JWT of AUTH plus their
user/password. One nats-py service and one raw client script against nats-server and natsd, from
the same configuration file."""

from __future__ import annotations

import asyncio
import json
import os

import nats
import nkeys
import pytest

from natsd.config.options import options_from_file
from tests.helpers.callout_service import CalloutService, new_keys, sign
from tests.helpers.inproc import running_server
from tests.helpers.rawclient import RawClient
from tests.helpers.servers import reference_binary, start_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

LIMITS = {
    "subs": -1,
    "data": -1,
    "payload": -1,
    "imports": -1,
    "exports": -1,
    "wildcards": True,
    "conn": -1,
    "leaf": -1,
}
USER_LIMITS = {"subs": -1, "data": -1, "payload": -1}


def _keypair(prefix: int) -> tuple[bytes, str]:
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    return seed, nkeys.from_seed(bytearray(seed)).public_key.decode()


def _setup(tmp_path, xkey: bool) -> dict:
    keys = new_keys()  # AUTH: the issuer and the service's xkey
    op_seed, op = _keypair(nkeys.PREFIX_BYTE_OPERATOR)
    sys_seed, sys_pub = _keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    app_seed, app = _keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    svc_seed, svc = _keypair(nkeys.PREFIX_BYTE_USER)
    _, sentinel_pub = _keypair(nkeys.PREFIX_BYTE_USER)
    authz = {"auth_users": [svc], "allowed_accounts": [app]}
    if xkey:
        authz["xkey"] = keys.xkey
    accounts = {
        sys_pub: sign(
            {"sub": sys_pub, "name": "SYS", "nats": {"type": "account", "version": 2, "limits": LIMITS}}, op_seed
        ),
        keys.account: sign(
            {
                "sub": keys.account,
                "name": "AUTH",
                "nats": {"type": "account", "version": 2, "limits": LIMITS, "authorization": authz},
            },
            op_seed,
        ),
        app: sign({"sub": app, "name": "APP", "nats": {"type": "account", "version": 2, "limits": LIMITS}}, op_seed),
    }
    op_jwt = tmp_path / "op.jwt"
    op_jwt.write_text(sign({"sub": op, "name": "OP", "nats": {"type": "operator", "version": 2}}, op_seed))
    svc_jwt = sign(
        {"sub": svc, "name": "svc", "nats": {"type": "user", "version": 2, **USER_LIMITS}}, keys.account_seed
    )
    creds = _creds(tmp_path / "svc.creds", svc_jwt, svc_seed)
    sysu_seed, sysu = _keypair(nkeys.PREFIX_BYTE_USER)
    sys_jwt = sign({"sub": sysu, "name": "sys", "nats": {"type": "user", "version": 2, **USER_LIMITS}}, sys_seed)
    sys_creds = _creds(tmp_path / "sys.creds", sys_jwt, sysu_seed)
    sentinel = sign(
        {
            "sub": sentinel_pub,
            "name": "sentinel",
            "nats": {
                "type": "user",
                "version": 2,
                "bearer_token": True,
                **USER_LIMITS,
                "pub": {"deny": [">"]},
                "sub": {"deny": [">"]},
            },
        },
        keys.account_seed,
    )
    preload = ", ".join(f'{k}: "{v}"' for k, v in accounts.items())
    conf = tmp_path / "op.conf"
    conf.write_text(
        f'operator: "{op_jwt}"\nsystem_account: {sys_pub}\nresolver: MEMORY\nresolver_preload: {{ {preload} }}\n'
    )
    return {
        "keys": keys,
        "conf": conf,
        "creds": creds,
        "sentinel": sentinel,
        "app": app,
        "app_seed": app_seed,
        "sys_creds": sys_creds,
    }


def _creds(path, jwt: str, seed: bytes):
    path.write_text(
        f"-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n"
        f"-----BEGIN USER NKEY SEED-----\n{seed.decode()}\n------END USER NKEY SEED------\n"
    )
    return path


def _decider(app: str, app_seed: bytes):
    def decide(n: dict) -> dict | str | None:
        c = n["connect_opts"]
        if c.get("user") == "alice" and c.get("pass") == "secret":
            # Issued by APP (an allowed account): the client is placed there.
            return {
                "seed": app_seed,
                "name": "alice",
                "nats": {"pub": {"allow": ["app.>"]}, "sub": {"allow": ["app.>"]}, **USER_LIMITS},
            }
        return "no such user"

    return decide


async def _raw(port: int, sentinel: str, user: str, password: str, ops: bytes) -> str:
    async with RawClient.connect(port) as c:
        connect = {
            "verbose": False,
            "jwt": sentinel,
            "user": user,
            "pass": password,
            "protocol": 1,
            "lang": "python3",
            "headers": True,
        }
        await c.send(b"CONNECT " + json.dumps(connect).encode() + b"\r\n" + ops + b"PING\r\n")
        seen = (await c.read_all(timeout=1.0)).decode()
    # nats-server's post-CONNECT INFO (connect_info) is a general difference, not the callout's.
    return "".join(line for line in seen.splitlines(keepends=True) if not line.startswith("INFO "))


async def _script(url: str, s: dict) -> dict:
    port = int(url.rsplit(":", 1)[1])
    service = CalloutService(s["keys"], _decider(s["app"], s["app_seed"]))
    svc_errors: list[str] = []

    async def on_svc_error(e: Exception) -> None:
        svc_errors.append(str(e).lower())

    svc = await nats.connect(url, user_credentials=str(s["creds"]), allow_reconnect=False, error_cb=on_svc_error)
    sys_nc = await nats.connect(url, user_credentials=str(s["sys_creds"]), allow_reconnect=False)
    events: list[dict] = []

    async def on_event(msg) -> None:
        events.append(json.loads(msg.data))

    try:
        await sys_nc.subscribe("$SYS.SERVER.*.CLIENT.AUTH.ERR", cb=on_event)
        await sys_nc.flush()
        await svc.subscribe("$SYS.REQ.USER.AUTH", cb=service.handle)
        await svc.publish("$SYS.REQ.USER.AUTH", b"forged")  # the service's own account may not ask
        await svc.flush()
        allowed = await _raw(
            port, s["sentinel"], "alice", "secret", b"SUB app.> 1\r\nPUB app.one 1\r\nx\r\nPUB other 1\r\nx\r\n"
        )
        denied = await _raw(port, s["sentinel"], "bob", "nope", b"")
        await asyncio.sleep(0.2)
    finally:
        await svc.close()
        await sys_nc.close()
    first = service.requests[0]
    return {
        "allowed": allowed,
        "denied": denied,
        "request_sub_is_account": first["sub"] == s["keys"].account,
        "sentinel_forwarded": first["nats"]["connect_opts"].get("jwt") == s["sentinel"],
        "encrypted": sorted(set(service.encrypted)),
        "svc_errors": svc_errors,
        "server_events": sorted((e["client"].get("user", ""), e["client"].get("acc", ""), e["reason"]) for e in events),
    }


@pytest.mark.parametrize("xkey", [False, True], ids=["plain", "xkey"])
async def test_operator_mode_auth_callout_side_by_side(tmp_path, xkey):
    if reference_binary() is None:
        pytest.skip("nats-server binary not available")
    s = _setup(tmp_path, xkey)
    ref = start_server("reference", tmp_path, config=s["conf"], jetstream=False)
    try:
        expected = await _script(ref.url, s)
    finally:
        ref.stop()
    options = options_from_file(str(s["conf"]))
    options.host, options.port, options.http_port = "127.0.0.1", 0, 0
    async with running_server(options=options) as server:
        got = await _script(server.client_url, s)
    assert got == expected
    assert expected["allowed"].startswith("MSG app.one 1 1\r\nx\r\n")
    assert 'Permissions Violation for Publish to "other"' in expected["allowed"]
    assert expected["denied"] == "-ERR 'Authorization Violation'\r\n"
    assert expected["request_sub_is_account"] and expected["sentinel_forwarded"]
    assert expected["encrypted"] == [xkey]
    assert any('permissions violation for publish to "$sys.req.user.auth"' in e for e in expected["svc_errors"])
    assert expected["server_events"], "nats-server publishes the refusal server-wide"
