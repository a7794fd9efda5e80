"""``$SYS.SERVER.<id>.CLIENT.AUTH.ERR`` (issue 29): every refused login (wrong user, password,
token or nkey) is announced in the system account as nats-server's ``client_disconnect``
advisory with reason ``Authentication Failure``. The same configuration and client script run
against nats-server and natsd; the advisories must have the same fields (ids, times, ports and the
server's identity aside)."""

from __future__ import annotations

import asyncio
import base64
import json

import nats
import nkeys
import pytest

from tests.helpers.inproc import side_by_side
from tests.helpers.servers import free_port

pytestmark = [pytest.mark.integration, pytest.mark.reference, pytest.mark.timeout(60)]

_GOOD_SEED = b"SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU"
_GOOD = nkeys.from_seed(bytearray(_GOOD_SEED)).public_key.decode()
_OTHER_SEED = b"SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4"

CONFIG = f"""
system_account: SYS
accounts {{
  SYS {{ users [{{user: sys, password: sys}}] }}
  APP {{
    users [{{user: alice, password: right}}, {{nkey: {_GOOD}}}]
  }}
}}
"""

# Fields that are ids, times, addresses or the server's identity.
_VOLATILE_CLIENT = {"start", "stop", "host", "id", "rtt"}
_VOLATILE_SERVER = {"name", "host", "id", "ver", "seq", "time", "flags", "jetstream", "feature_flags"}


def _shape(ev: dict) -> dict:
    ev = dict(ev)
    ev.pop("id")
    ev.pop("timestamp")
    ev["server"] = {k: v for k, v in ev["server"].items() if k not in _VOLATILE_SERVER}
    ev["client"] = {k: v for k, v in ev["client"].items() if k not in _VOLATILE_CLIENT}
    return ev


async def _refused_login(host: str, fields: dict) -> bytes:
    """One CONNECT with ``fields`` over a raw socket (nats-py leaves a refused connection's
    transport open); an ``nkey`` of "sign" signs the nonce with a key the server does not know."""
    h, p = host.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(h, int(p))
    try:
        info = json.loads((await reader.readline())[5:])
        if fields.get("nkey") == "sign":
            kp = nkeys.from_seed(bytearray(_OTHER_SEED))
            fields = dict(fields, nkey=kp.public_key.decode())
            fields["sig"] = base64.urlsafe_b64encode(kp.sign(info["nonce"].encode())).decode().rstrip("=")
        connect = {"verbose": False, "pedantic": False, "lang": "python3", "version": "2.16.0", "protocol": 1}
        writer.write(b"CONNECT " + json.dumps(dict(connect, **fields)).encode() + b"\r\nPING\r\n")
        await writer.drain()
        return await asyncio.wait_for(reader.read(4096), 5)
    finally:
        writer.close()
        await writer.wait_closed()


async def _script(url: str) -> list[str]:
    host = url.split("//", 1)[1]
    sys_nc = await nats.connect(f"nats://sys:sys@{host}")
    events: list[dict] = []

    async def on_event(m):
        events.append({"subject": m.subject.split(".")[0] + ".SERVER.*." + ".".join(m.subject.split(".")[3:])})
        events[-1].update(json.loads(m.data))

    try:
        await sys_nc.subscribe("$SYS.SERVER.*.CLIENT.AUTH.ERR", cb=on_event)
        await sys_nc.flush()
        attempts = [
            {"user": "alice", "pass": "wrong", "name": "bad-password"},
            {"user": "mallory", "pass": "x", "name": "no-such-user"},
            {"auth_token": "sometoken", "name": "token"},
            {"name": "nothing"},
            {"nkey": "sign", "name": "bad-nkey"},
        ]
        for fields in attempts:
            assert b"Authorization Violation" in await _refused_login(host, fields)
        ok = await nats.connect(f"nats://alice:right@{host}")  # a good login: no event
        await ok.close()
        for _ in range(100):
            if len(events) >= len(attempts):
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        return sorted(json.dumps(_shape(e), sort_keys=True) for e in events)
    finally:
        await sys_nc.close()


async def test_auth_error_events_match_reference(tmp_path):
    expected, got = await side_by_side(tmp_path, _script, config=CONFIG)
    assert len(expected) == 5
    assert all('"Authentication Failure"' in e for e in expected)
    for g, e in zip(got, expected):
        assert json.loads(g) == json.loads(e)
    assert got == expected


GLOBAL_CONFIG = """
authorization { users [{user: a, password: a}] }
"""


async def test_global_account_users_see_the_account_advisory(tmp_path):
    """Users of the global account (``authorization { users }``, no accounts) get nats-server's
    ``$SYS.ACCOUNT.CLIENT.AUTH.ERR`` advisory of a refused login in their account."""

    async def script(url: str) -> list[str]:
        host = url.split("//", 1)[1]
        nc = await nats.connect(f"nats://a:a@{host}")
        events: list[dict] = []

        async def on_event(m):
            events.append(dict(json.loads(m.data), subject=m.subject))

        try:
            await nc.subscribe("$SYS.ACCOUNT.CLIENT.AUTH.ERR", cb=on_event)
            await nc.flush()
            assert b"Authorization Violation" in await _refused_login(host, {"user": "a", "pass": "b", "name": "x"})
            for _ in range(100):
                if events:
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.2)
            return sorted(json.dumps(_shape(e), sort_keys=True) for e in events)
        finally:
            await nc.close()

    expected, got = await side_by_side(tmp_path, script, config=GLOBAL_CONFIG)
    assert len(expected) == 1 and '"acc": "$G"' in expected[0]
    assert got == expected


async def test_a_refused_leafnode_is_announced_too(tmp_path):
    """A leafnode connection with wrong credentials: the same advisory, of kind ``Leafnode`` and
    in no account (``N/A``), as nats-server sends it."""
    lp = free_port()
    config = (
        "system_account: SYS\n"
        "accounts { SYS { users [{user: sys, password: sys}] }, APP { users [{user: a, password: a}] } }\n"
        f"leafnodes {{ listen: 127.0.0.1:{lp}, authorization {{ user: leaf, password: good, account: APP }} }}\n"
    )

    async def script(url: str) -> list[str]:
        host = url.split("//", 1)[1]
        nc = await nats.connect(f"nats://sys:sys@{host}")
        events: list[dict] = []

        async def on_event(m):
            events.append(json.loads(m.data))

        try:
            await nc.subscribe("$SYS.SERVER.*.CLIENT.AUTH.ERR", cb=on_event)
            await nc.flush()
            reader, writer = await asyncio.open_connection("127.0.0.1", lp)
            try:
                await reader.readline()  # INFO
                connect = {"name": "badleaf", "user": "leaf", "pass": "wrong", "headers": True, "version": "2.15.1"}
                writer.write(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
                await writer.drain()
                assert b"Authorization Violation" in await asyncio.wait_for(reader.read(4096), 5)
            finally:
                writer.close()
                await writer.wait_closed()
            for _ in range(100):
                if events:
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.2)
            return sorted(json.dumps(_shape(e), sort_keys=True) for e in events)
        finally:
            await nc.close()

    expected, got = await side_by_side(tmp_path, script, config=config)
    assert len(expected) == 1 and '"kind": "Leafnode"' in expected[0] and '"acc": "N/A"' in expected[0]
    assert got == expected
