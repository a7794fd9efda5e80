"""Every auth mode and permission violation, with nats-py and with raw sockets for exact texts."""

from __future__ import annotations

import asyncio

import bcrypt
import nats
import pytest

from natsd.config.options import AccountOptions, Permissions, SubjectPermission, UserOptions
from tests.helpers.inproc import running_server
from tests.helpers.rawclient import RawClient


async def connect_fails(server, **creds) -> str:
    """Send CONNECT with ``creds`` on a raw socket; returns the -ERR text and checks the close.

    (A nats-py connect that fails authentication leaks its transport, which the warnings-as-
    errors policy would turn into a failure of an unrelated test, so failures are raw.)
    """
    import json

    async with RawClient.connect(server.port) as c:
        await c.send(b"CONNECT " + json.dumps({"verbose": False, **creds}).encode() + b"\r\nPING\r\n")
        m = await c.expect(rb"-ERR '([^']*)'\r\n")
        await c.expect_closed()
        return m.group(1).decode().lower()


def url(server, cred: str = "") -> str:
    return f"nats://{cred}127.0.0.1:{server.port}"


async def test_token_auth():
    async with running_server(authorization="s3cret") as s:
        nc = await nats.connect(url(s), token="s3cret")
        assert nc._server_info["auth_required"] is True
        await nc.close()
        assert "authorization violation" in await connect_fails(s, auth_token="wrong")
        assert "authorization violation" in await connect_fails(s)


async def test_user_password_plain_and_bcrypt():
    hashed = bcrypt.hashpw(b"pw2", bcrypt.gensalt(4, prefix=b"2a")).decode()
    users = [UserOptions(user="plain", password="pw1"), UserOptions(user="hashed", password=hashed)]
    async with running_server(users=users) as s:
        for cred in ("plain:pw1@", "hashed:pw2@"):
            nc = await nats.connect(url(s, cred))
            await nc.flush()
            await nc.close()
        nc = await nats.connect(url(s), user="hashed", password="pw2")  # cached verification path
        await nc.close()
        assert "authorization violation" in await connect_fails(s, user="hashed", **{"pass": "nope"})
        assert "authorization violation" in await connect_fails(s, user="nobody", **{"pass": "pw1"})


async def test_single_user_from_options():
    async with running_server(username="admin", password="secret") as s:
        nc = await nats.connect(url(s, "admin:secret@"))
        await nc.close()
        assert "authorization violation" in await connect_fails(s, user="admin", **{"pass": "bad"})


async def test_bcrypt_ops_pipelined_behind_connect_are_kept():
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
    async with running_server(users=[UserOptions(user="u", password=hashed)]) as s:
        async with RawClient.connect(s.port) as c:
            await c.send(b'CONNECT {"verbose":false,"user":"u","pass":"pw"}\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n')
            await c.expect(rb"MSG a 1 1\r\nx\r\nPONG\r\n")


async def test_ops_before_connect_need_auth():
    async with running_server(authorization="t") as s:
        async with RawClient.connect(s.port) as c:
            await c.send(b"PING\r\n")
            await c.expect(rb"-ERR 'Authorization Violation'\r\n")
            await c.expect_closed()


async def test_no_auth_user():
    users = [UserOptions(user="anon", password="x", permissions=Permissions(publish=SubjectPermission(allow=["ok.>"])))]
    async with running_server(users=users, no_auth_user="anon") as s:
        async with RawClient.connect(s.port) as c:
            assert c.info["auth_required"] is True  # still advertised, as the reference does
            await c.send(b'CONNECT {"verbose":false}\r\nPUB ok.1 0\r\n\r\nPUB no 0\r\n\r\nPING\r\n')
            await c.expect(rb"-ERR 'Permissions Violation for Publish to \"no\"'\r\nPONG\r\n")


PERMS = Permissions(
    publish=SubjectPermission(allow=["foo.>", "_INBOX.>"], deny=["foo.bar"]),
    subscribe=SubjectPermission(allow=["foo.*", "_INBOX.>"], deny=["foo.no"]),
)


@pytest.fixture
async def perm_server():
    async with running_server(
        users=[UserOptions(user="a", password="pa", permissions=PERMS), UserOptions(user="admin", password="pw")]
    ) as s:
        yield s


@pytest.mark.parametrize(
    "ops,err",
    [
        (b"PUB foo.bar 1\r\nx\r\n", b'Permissions Violation for Publish to "foo.bar"'),
        (b"PUB bar 1\r\nx\r\n", b'Permissions Violation for Publish to "bar"'),
        (b"SUB foo.no 1\r\n", b'Permissions Violation for Subscription to "foo.no"'),
        (b"SUB bar 1\r\n", b'Permissions Violation for Subscription to "bar"'),
        (b"SUB bar q 1\r\n", b'Permissions Violation for Subscription to "bar" using queue "q"'),
    ],
)
async def test_permission_violation_texts(perm_server, ops, err):
    async with RawClient.connect(perm_server.port) as c:
        await c.send(b'CONNECT {"verbose":false,"user":"a","pass":"pa"}\r\n' + ops + b"PING\r\n")
        await c.expect(rb"-ERR '" + err.replace(b".", rb"\.") + rb"'\r\nPONG\r\n")  # connection stays up


async def test_permissions_with_nats_py(perm_server):
    errors = []

    async def err_cb(e):
        errors.append(str(e))

    nc = await nats.connect(url(perm_server, "a:pa@"), error_cb=err_cb)
    admin = await nats.connect(url(perm_server, "admin:pw@"))
    try:
        sub = await nc.subscribe("foo.*")
        await nc.flush()
        # allowed publish arrives; denied subject is never delivered even to a wildcard sub
        await admin.publish("foo.no", b"hidden")
        await admin.publish("foo.yes", b"shown")
        await admin.flush()
        assert (await sub.next_msg(timeout=2)).data == b"shown"
        await nc.publish("foo.bar", b"denied")
        await nc.flush()
        await asyncio.sleep(0.05)
        assert any("permissions violation" in e.lower() for e in errors)
        assert nc.is_connected  # permission errors do not close the connection
    finally:
        await nc.close()
        await admin.close()


async def test_allow_responses():
    perms = Permissions(subscribe=SubjectPermission(allow=["req"]), allow_responses=True)
    users = [UserOptions(user="svc", password="p", permissions=perms), UserOptions(user="cli", password="p")]
    async with running_server(users=users) as s:
        svc = await nats.connect(url(s, "svc:p@"))
        cli = await nats.connect(url(s, "cli:p@"))
        try:

            async def handler(msg):
                await msg.respond(b"answer")
                await msg.respond(b"second")  # only one response is allowed

            await svc.subscribe("req", cb=handler)
            await svc.flush()
            inbox = cli.new_inbox()
            sub = await cli.subscribe(inbox)
            await cli.publish("req", b"q", reply=inbox)
            await cli.flush()
            assert (await sub.next_msg(timeout=2)).data == b"answer"
            with pytest.raises(nats.errors.TimeoutError):
                await sub.next_msg(timeout=0.2)
        finally:
            await svc.close()
            await cli.close()


async def test_allow_responses_expires_on_the_injected_clock():
    """``allow_responses: {max: 3, expires: 5s}``: a responder may answer a request up to 3 times,
    but not once 5 s have passed since the request reached it (as nats-server's client permissions)."""
    from natsd.clock import ManualClock

    clock = ManualClock(soon_on_loop=True)
    perms = Permissions(
        subscribe=SubjectPermission(allow=["req"]),
        allow_responses=True,
        responses_max=3,
        responses_expires_ns=5_000_000_000,
    )
    users = [UserOptions(user="svc", password="p", permissions=perms), UserOptions(user="cli", password="p")]
    async with running_server(users=users, clock=clock) as s:
        svc = await nats.connect(url(s, "svc:p@"))
        cli = await nats.connect(url(s, "cli:p@"))
        try:
            sreq = await svc.subscribe("req")
            await svc.flush()
            inbox = cli.new_inbox()
            sub = await cli.subscribe(inbox)
            await cli.publish("req", b"q1", reply=inbox)
            await cli.flush()
            m1 = await sreq.next_msg(timeout=2)
            sub2 = await cli.subscribe(inbox + ".2")
            await cli.publish("req", b"q2", reply=inbox + ".2")
            await cli.flush()
            m2 = await sreq.next_msg(timeout=2)
            await m1.respond(b"a1")
            await m1.respond(b"a2")
            assert [(await sub.next_msg(timeout=2)).data for _ in range(2)] == [b"a1", b"a2"]
            clock.advance(6_000_000_000)  # past expires: neither request may be answered now
            await m1.respond(b"late")
            await m2.respond(b"late2")
            await svc.flush()
            with pytest.raises(nats.errors.TimeoutError):
                await sub.next_msg(timeout=0.3)
            with pytest.raises(nats.errors.TimeoutError):
                await sub2.next_msg(timeout=0.1)
        finally:
            await svc.close()
            await cli.close()


async def test_accounts_are_isolated():
    accounts = [
        AccountOptions(name="A", users=[UserOptions(user="a", password="p")]),
        AccountOptions(name="B", users=[UserOptions(user="b", password="p")]),
    ]
    async with running_server(accounts=accounts) as s:
        a = await nats.connect(url(s, "a:p@"))
        a2 = await nats.connect(url(s, "a:p@"))
        b = await nats.connect(url(s, "b:p@"))
        try:
            sa = await a.subscribe("shared")
            sb = await b.subscribe("shared")
            await a.flush()
            await b.flush()
            await a2.publish("shared", b"for-A")
            await a2.flush()
            assert (await sa.next_msg(timeout=2)).data == b"for-A"
            with pytest.raises(nats.errors.TimeoutError):
                await sb.next_msg(timeout=0.2)
            # and requests across accounts find no responders
            with pytest.raises(nats.errors.NoRespondersError):
                await b.request("only.in.a", b"", timeout=1)
        finally:
            for c in (a, a2, b):
                await c.close()
        assert s.accounts["A"].sublist.count() == 0


async def test_reload_changes_permissions_and_drops_removed_users():
    users = [UserOptions(user="keep", password="p"), UserOptions(user="gone", password="p")]
    async with running_server(users=users) as s:
        async with RawClient.connect(s.port) as keep, RawClient.connect(s.port) as gone:
            await keep.send(b'CONNECT {"verbose":false,"user":"keep","pass":"p"}\r\nPING\r\n')
            await keep.expect(rb"PONG\r\n")
            await gone.send(b'CONNECT {"verbose":false,"user":"gone","pass":"p"}\r\nPING\r\n')
            await gone.expect(rb"PONG\r\n")
            new = type(s.options)(**{f: getattr(s.options, f) for f in s.options.__dataclass_fields__})
            new.users = [
                UserOptions(user="keep", password="p", permissions=Permissions(publish=SubjectPermission(deny=["x"])))
            ]
            s.reload(new)
            await gone.expect(rb"-ERR 'Authorization Violation'\r\n")
            await gone.expect_closed()
            await keep.send(b"PUB x 0\r\n\r\nPING\r\n")
            await keep.expect(rb"-ERR 'Permissions Violation for Publish to \"x\"'\r\nPONG\r\n")


async def test_sighup_reload_rereads_the_config_file(tmp_path):
    from natsd.config.flags import build_options

    conf = tmp_path / "natsd.conf"
    conf.write_text("authorization { users: [ {user: a, password: a} ] }\n")
    opts = build_options(["-c", str(conf)])
    opts.host, opts.port = "127.0.0.1", 0
    async with running_server(options=opts) as s:
        assert "authorization violation" in await connect_fails(s, user="b", **{"pass": "b"})
        conf.write_text("authorization { users: [ {user: a, password: a}, {user: b, password: b} ] }\n")
        s._reload_signal()  # what SIGHUP runs
        nc = await nats.connect(url(s, "b:b@"))
        await nc.close()
        conf.write_text("authorization { users: [ {user: a, password: \n")  # broken: keep running as is
        s._reload_signal()
        nc = await nats.connect(url(s, "b:b@"))
        await nc.close()
        assert s.config_loads == 1


REFERENCE_AUTH_CONF = """
authorization {
  users: [
    {user: a, password: pa, permissions: {
        publish: {allow: ["foo.>", "_INBOX.>"], deny: ["foo.bar"]},
        subscribe: {allow: ["foo.*", "_INBOX.>"], deny: ["foo.no"]}}}
  ]
}
"""


@pytest.mark.reference
@pytest.mark.parametrize(
    "ops,err",
    [
        (b"PUB foo.bar 1\r\nx\r\n", b'Permissions Violation for Publish to "foo.bar"'),
        (b"SUB bar q 1\r\n", b'Permissions Violation for Subscription to "bar" using queue "q"'),
        (b"SUB foo.no 1\r\n", b'Permissions Violation for Subscription to "foo.no"'),
    ],
)
async def test_reference_permission_texts(tmp_path, ops, err):
    """The same exchanges against nats-server with the equivalent config file."""
    from tests.helpers.servers import reference_binary, start_server

    if reference_binary() is None:
        pytest.skip("reference nats-server binary not available")
    conf = tmp_path / "auth.conf"
    conf.write_text(REFERENCE_AUTH_CONF)
    handle = start_server("reference", tmp_path, jetstream=False, config=str(conf))
    try:
        async with RawClient.connect(handle.port) as c:
            await c.send(b'CONNECT {"verbose":false,"user":"a","pass":"pa"}\r\n' + ops + b"PING\r\n")
            await c.expect(rb"-ERR '" + err.replace(b".", rb"\.") + rb"'\r\nPONG\r\n")
        async with RawClient.connect(handle.port) as c:
            await c.send(b'CONNECT {"verbose":false,"user":"a","pass":"wrong"}\r\n')
            await c.expect(rb"-ERR 'Authorization Violation'\r\n")
    finally:
        handle.stop()
