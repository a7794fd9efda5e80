"""nkeys and operator mode in process: time-driven expiry on a ManualClock, pushed revocations,
config reloads of nkey users, service-import reply bookkeeping, and start-up errors."""

from __future__ import annotations

import json

import nats
import pytest

from natsd.clock import ManualClock
from natsd.config.lexer import ConfigError
from natsd.config.options import Permissions, ServerOptions, SubjectPermission, UserOptions, options_from_tree
from natsd.config.parser import parse
from natsd.server import Server
from natsd.server.auth import imports
from natsd.config import jwt as J
from tests.helpers.identities import Identity, account_claims, b64url, operator_setup, user_claims
from tests.helpers.inproc import running_server
from tests.helpers.rawclient import RawClient

pytestmark = pytest.mark.integration


def trust_options(conf: str) -> ServerOptions:
    o = options_from_tree(parse(conf, "t.conf", env={}))
    o.host, o.port, o.http_port = "127.0.0.1", 0, 0
    return o


async def login(c: RawClient, identity: Identity, token: str, after: bytes = b"PING\r\n") -> None:
    sig = b64url(identity.sign_bytes(c.info["nonce"].encode()))
    await c.send(b"CONNECT " + json.dumps({"verbose": False, "jwt": token, "sig": sig}).encode() + b"\r\n" + after)


async def test_jwt_expiry_follows_the_injected_clock():
    setup = operator_setup("A")
    clock = ManualClock()
    now_s = clock.time_ns() // 10**9
    u, ujwt = setup.user("A", "soon", exp=now_s + 30, iat=now_s - 5)
    async with running_server(options=trust_options(setup.config()), clock=clock) as s:
        async with RawClient.connect(s.port) as c:
            await login(c, u, ujwt)
            await c.expect(rb"PONG\r\n")
            clock.advance(29 * 10**9)
            assert await c.read_all(0.1) == b""
            clock.advance(2 * 10**9)
            await c.expect(rb"-ERR 'User Authentication Expired'\r\n")
            await c.expect_closed()
        # Already expired by the server's clock: refused at CONNECT.
        async with RawClient.connect(s.port) as c:
            await login(c, u, ujwt)
            await c.expect(rb"-ERR 'Authorization Violation'\r\n")
            await c.expect_closed()


async def test_account_expiry_bounds_its_users():
    setup = operator_setup("A")
    clock = ManualClock()
    now_s = clock.time_ns() // 10**9
    acc, _ = setup.accounts["A"]
    setup.accounts["A"] = (acc, setup.operator.sign(account_claims(acc, "A", exp=now_s + 10, iat=now_s - 5)))
    u, ujwt = setup.user("A", "forever", iat=now_s - 5)
    async with running_server(options=trust_options(setup.config()), clock=clock) as s:
        async with RawClient.connect(s.port) as c:
            await login(c, u, ujwt)
            await c.expect(rb"PONG\r\n")
            clock.advance(11 * 10**9)
            await c.expect(rb"-ERR 'User Authentication Expired'\r\n")


async def test_pushed_revocation_closes_only_revoked_users():
    setup = operator_setup("A")
    acc, _ = setup.accounts["A"]
    async with running_server(options=trust_options(setup.config())) as s:
        victim, vjwt = setup.user("A", "victim")
        other, ojwt = setup.user("A", "other")
        async with RawClient.connect(s.port) as v, RawClient.connect(s.port) as o:
            await login(v, victim, vjwt)
            await login(o, other, ojwt)
            await v.expect(rb"PONG\r\n")
            await o.expect(rb"PONG\r\n")
            iat = J.decode_user(vjwt).issued_at
            claims = J.decode_account(
                setup.operator.sign(account_claims(acc, "A", revocations={victim.public: iat}, iat=iat + 1))
            )
            assert s.trust.update(claims)
            await v.expect(rb"-ERR 'User Authentication Revoked'\r\n")
            await v.expect_closed()
            await o.send(b"PING\r\n")
            await o.expect(rb"PONG\r\n")
            # An older JWT than the one held is not applied.
            older = J.decode_account(setup.operator.sign(account_claims(acc, "A", iat=iat - 100)))
            assert not s.trust.update(older)
            assert s.trust.lookup(acc.public).revocations == {victim.public: iat}


async def test_reload_rechecks_nkey_users():
    alice, bob = Identity.new("user"), Identity.new("user")
    opts = ServerOptions(
        host="127.0.0.1", port=0, http_port=0, nkeys=[UserOptions(nkey=alice.public), UserOptions(nkey=bob.public)]
    )
    async with running_server(options=opts) as s:
        na = await nats.connect(s.client_url, nkeys_seed_str=alice.seed, allow_reconnect=False)
        async with RawClient.connect(s.port) as cb:
            sig = b64url(bob.sign_bytes(cb.info["nonce"].encode()))
            await cb.send(
                b'CONNECT {"verbose":false,"nkey":"%s","sig":"%s"}\r\nPING\r\n' % (bob.public.encode(), sig.encode())
            )
            await cb.expect(rb"PONG\r\n")
            perms = Permissions(publish=SubjectPermission(allow=["only.this"]))
            s.reload(ServerOptions(host="127.0.0.1", port=0, nkeys=[UserOptions(nkey=alice.public, permissions=perms)]))
            await cb.expect(rb"-ERR 'Authorization Violation'\r\n")
            await cb.expect_closed()
        assert na.is_connected
        client = next(c for c in s.clients.values() if c.user == alice.public)
        assert not client.pub_filter.allows("other") and client.pub_filter.allows("only.this")
        await na.close()


async def test_service_import_replies_are_bounded(monkeypatch):
    """Requests that are never answered do not grow the reply table without bound."""
    monkeypatch.setattr(imports, "MAX_PENDING", 5)
    op_setup = operator_setup()
    op = op_setup.operator
    A, B = Identity.new("account"), Identity.new("account")
    op_setup.accounts = {
        "A": (A, op.sign(account_claims(A, "A", exports=[{"subject": "svc", "type": "service"}]))),
        "B": (B, op.sign(account_claims(B, "B", imports=[{"subject": "svc", "account": A.public, "type": "service"}]))),
    }
    async with running_server(options=trust_options(op_setup.config())) as s:
        ua, ajwt = op_setup.user("A")
        ub, bjwt = op_setup.user("B")
        async with RawClient.connect(s.port) as ca, RawClient.connect(s.port) as cb:
            await login(ca, ua, ajwt, b"SUB svc 1\r\nPING\r\n")
            await ca.expect(rb"PONG\r\n")
            await login(
                cb,
                ub,
                bjwt,
                b"SUB r.> 1\r\n" + b"".join(b"PUB svc r.%d 1\r\nx\r\n" % i for i in range(20)) + b"PING\r\n",
            )
            await cb.expect(rb"PONG\r\n")
            seen = await ca.read_all(0.3)
            assert seen.count(b"MSG svc 1 _R_.") == 20
            link = next(link for link in s.accounts[B.public].links if hasattr(link, "pending"))
            assert len(link.pending) <= 5
            # The latest request can still be answered; the reply reaches B's requester.
            last = seen.rsplit(b"MSG svc 1 ", 1)[1].split(b" ", 1)[0]
            await ca.send(b"PUB " + last + b" 3\r\nyes\r\nPING\r\n")
            await cb.expect(rb"MSG r\.19 1 3\r\nyes\r\n")


def test_bad_operator_or_preload_fails_start_with_the_config_position():
    setup = operator_setup("A")
    acc, ajwt = setup.accounts["A"]
    broken = setup.operator_jwt[:-4] + "AAAA"
    with pytest.raises(ConfigError) as ei:
        Server(trust_options(f"port: 1\noperator: {broken}\nresolver: MEMORY\n"))
    assert str(ei.value).startswith("t.conf:2:1: error parsing operator JWT: claim failed V2 signature")
    other = Identity.new("account")
    with pytest.raises(ConfigError, match="does not match"):
        Server(trust_options(setup.config().replace(f"{acc.public}: {ajwt}", f"{other.public}: {ajwt}")))


async def test_users_of_accounts_from_untrusted_operators_are_refused():
    setup = operator_setup("A")
    rogue = Identity.new("operator")
    acc = Identity.new("account")
    conf = setup.config().replace("}\n", f"  {acc.public}: {rogue.sign(account_claims(acc, 'X'))}\n}}\n", 1)
    async with running_server(options=trust_options(conf)) as s:
        u = Identity.new("user")
        async with RawClient.connect(s.port) as c:
            await login(c, u, acc.sign(user_claims(u, "x")))
            await c.expect(rb"-ERR 'Authorization Violation'\r\n")
            await c.expect_closed()


async def test_reload_keeps_jwt_users_within_account_connection_limit():
    setup = operator_setup("A")
    acc, _ = setup.accounts["A"]
    setup.accounts["A"] = (acc, setup.operator.sign(account_claims(acc, "A", limits={"conn": 1})))
    options = trust_options(setup.config())
    async with running_server(options=options) as s:
        u, ujwt = setup.user("A")
        async with RawClient.connect(s.port) as c:
            await login(c, u, ujwt)
            await c.expect(rb"PONG\r\n")
            s.reload(trust_options(setup.config()))
            await c.send(b"PING\r\n")
            await c.expect(rb"PONG\r\n")
