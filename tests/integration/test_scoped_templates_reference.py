"""Scoped signing-key permission templates (issue 29): ``{{name()}}``, ``{{subject()}}``,
``{{account-name()}}``, ``{{account-subject()}}``, ``{{tag(x)}}`` and ``{{account-tag(x)}}`` in a
scope's template expand per user as nats-server expands them, and a template that cannot give valid
permissions refuses the login. The same operator configuration and raw client script run against
nats-server and natsd."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.helpers.identities import Identity, account_claims, b64url, operator_setup, user_claims
from tests.helpers.inproc import side_by_side

pytestmark = [pytest.mark.integration, pytest.mark.reference, pytest.mark.timeout(60)]


def _scope(key: Identity, pub: dict) -> dict:
    return {
        "kind": "user_scope",
        "key": key.public,
        "role": key.public[:6],
        "template": {"pub": pub, "sub": {"allow": ["_INBOX.>"]}, "subs": -1, "data": -1, "payload": -1},
    }


def _setup():
    setup = operator_setup()
    a = Identity.new("account")
    keys = [Identity.new("account") for _ in range(4)]
    scopes = [
        _scope(
            keys[0],
            {
                "allow": [
                    "{{name()}}.>",
                    "team.{{tag(team)}}.{{ account-tag(region) }}",
                    "acct.{{account-name()}}",
                    "who.{{subject()}}",
                    "as.{{account-subject()}}",
                ],
                "deny": ["{{name()}}.secret"],
            },
        ),
        _scope(keys[1], {"deny": ["{{nope()}}"]}),  # unknown function: refused
        _scope(keys[2], {"deny": ["x.{{tag(missing)}}"]}),  # a deny tag without a value: refused
        _scope(keys[3], {"allow": ["{{tag(missing)}}.>"]}),  # nothing left to allow: everything denied
    ]
    acc = account_claims(a, "A", signing_keys=scopes)
    acc["nats"]["tags"] = ["region:eu", "region:us"]
    setup.accounts["A"] = (a, setup.operator.sign(acc))
    return setup, a, keys


def _user(key: Identity, account: Identity, name: str, tags: list[str]) -> tuple[Identity, str]:
    u = Identity.new("user")
    claims = user_claims(u, name, issuer_account=account.public)
    for k in ("pub", "sub", "subs", "data", "payload"):
        del claims["nats"][k]  # a scoped user carries no permissions or limits of its own
    if tags:
        claims["nats"]["tags"] = tags
    return u, key.sign(claims)


async def _session(host: str, u: Identity, jwt: str, subjects: list[str]) -> str:
    """CONNECT as ``u``, publish to each subject, PING; what the server answered."""
    h, p = host.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(h, int(p))
    try:
        info = json.loads((await reader.readline())[5:])
        sig = b64url(u.sign_bytes(info["nonce"].encode()))
        connect = {"verbose": False, "pedantic": False, "jwt": jwt, "sig": sig, "protocol": 1}
        pubs = b"".join(f"PUB {s} 1\r\nx\r\n".encode() for s in subjects)
        writer.write(b"CONNECT " + json.dumps(connect).encode() + b"\r\n" + pubs + b"PING\r\n")
        await writer.drain()
        out = b""
        while b"PONG\r\n" not in out:
            chunk = await asyncio.wait_for(reader.read(4096), 5)
            if not chunk:
                out += b"<EOF>"
                break
            out += chunk
        # (nats-server may add an asynchronous INFO line: not part of the answer)
        lines = [ln for ln in out.decode().split("\r\n") if not ln.startswith("INFO ")]
        return "\r\n".join(lines).replace(u.public, "<user>")
    finally:
        writer.close()
        await writer.wait_closed()


async def test_scoped_templates_match_reference(tmp_path):
    setup, a, keys = _setup()
    users = {
        "tagged": _user(keys[0], a, "bob", ["team:red", "team:blue"]),
        "untagged": _user(keys[0], a, "eve", []),
        "unknown_function": _user(keys[1], a, "x", []),
        "deny_tag_missing": _user(keys[2], a, "x", []),
        "allow_all_dropped": _user(keys[3], a, "x", []),
    }

    async def observe(url: str) -> dict:
        host = url.split("//", 1)[1]
        out = {}
        for what, (u, jwt) in users.items():
            subjects = [
                "bob.x",
                "bob.secret",
                "eve.x",
                "team.red.eu",
                "team.blue.us",
                "team.green.eu",
                "acct.A",
                f"who.{u.public}",
                f"as.{a.public}",
            ]
            out[what] = await _session(host, u, jwt, subjects)
        return out

    expected, got = await side_by_side(tmp_path, observe, config=setup.config())
    assert "team.green.eu" in expected["tagged"] and "team.red.eu" not in expected["tagged"]
    assert "Authorization Violation" in expected["unknown_function"]
    assert "Authorization Violation" in expected["deny_tag_missing"]
    assert "bob.x" in expected["allow_all_dropped"]
    assert got == expected
