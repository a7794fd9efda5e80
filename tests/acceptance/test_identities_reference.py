"""nkeys and decentralized JWT auth, side by side: every scenario runs against the reference
nats-server 2.15.1 and natsd (both as subprocesses started from the same config file), with real
nats-py clients, and the observations must be equal.

Keys, account and user JWTs are generated per test (tests/helpers/identities.py); nothing secret
is checked in. Bad input is sent on raw sockets so the exact ``-ERR`` text and the close are seen,
while a healthy client on the same server keeps working.
"""

from __future__ import annotations

import asyncio
import json
import time

import nats
import pytest
from nats.aio.client import RawCredentials

from tests.helpers.identities import (
    Identity,
    account_claims,
    b64url,
    operator_setup,
    user_claims,
)
from tests.helpers.servers import reference_binary, start_server

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.reference,
    pytest.mark.timeout(180),
    pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed"),
]

KINDS = ["reference", "natsd"]


def _server(kind, tmp_path, conf: str, **kw):
    path = tmp_path / f"{kind}.conf"
    path.write_text(conf)
    return start_server(kind, tmp_path / kind, config=path, jetstream=kw.pop("jetstream", False), **kw)


async def raw_connect(
    port: int, make_connect, after: bytes = b"PING\r\n", wait: float = 0.0, idle: float = 0.5, first: float = 10.0
) -> tuple[dict, bytes]:
    """INFO, then CONNECT (``make_connect(nonce)``) + ``after``; returns (INFO, everything read,
    with ``<EOF>`` appended when the server closed the connection).

    Reading stops at EOF, or once nothing more arrived for ``idle`` seconds after the first bytes
    (which may take up to ``first`` seconds on a loaded machine) and at least ``wait`` seconds
    have passed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        line = await reader.readline()
        info = json.loads(line[5:])
        writer.write(b"CONNECT " + json.dumps(make_connect(info.get("nonce", ""))).encode() + b"\r\n" + after)
        await writer.drain()
        out = b""
        loop = asyncio.get_running_loop()
        start = loop.time()
        while True:
            now = loop.time()
            timeout = max(idle, start + wait - now) if out else max(first, start + wait - now)
            try:
                chunk = await asyncio.wait_for(reader.read(4096), timeout)
            except asyncio.TimeoutError:
                break
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                out += b"<EOF>"
                break
            out += chunk
        return info, out
    finally:
        writer.close()


def signed(identity: Identity, **fields):
    def make(nonce: str) -> dict:
        return {"verbose": False, "pedantic": False, **fields, "sig": b64url(identity.sign_bytes(nonce.encode()))}

    return make


async def roundtrip(nc) -> bytes:
    async def echo(m):
        await m.respond(b"echo:" + m.data)

    sub = await nc.subscribe("rt.echo", cb=echo)
    r = await nc.request("rt.echo", b"x", timeout=2)
    await sub.unsubscribe()
    return r.data


# -- nkeys ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_nkeys_with_nats_py(kind, tmp_path):
    alice, bob = Identity.new("user"), Identity.new("user")
    conf = (
        f"authorization {{ users: [ {{ nkey: {alice.public} }},\n"
        f'  {{ nkey: {bob.public}, permissions: {{ publish: "ok.>", subscribe: ["ok.>", "_INBOX.>"] }} }} ] }}\n'
    )
    srv = _server(kind, tmp_path, conf)
    try:
        seed_file = tmp_path / "alice.nk"
        seed_file.write_text(alice.seed + "\n")
        observed = {}
        nc = await nats.connect(srv.url, nkeys_seed=str(seed_file), allow_reconnect=False)
        nonce = nc._server_info.get("nonce", "")
        observed["nonce"] = (len(nonce), nonce.replace("-", "").replace("_", "").isalnum())
        observed["auth_required"] = nc._server_info.get("auth_required")
        observed["rt_file"] = await roundtrip(nc)
        # A fresh nonce per connection.
        nc2 = await nats.connect(srv.url, nkeys_seed_str=f"  \n{alice.seed}\n\t ", allow_reconnect=False)
        observed["fresh_nonce"] = nc2._server_info["nonce"] != nonce
        observed["rt_whitespace"] = await roundtrip(nc2)
        await nc2.close()
        # Bob's permissions come from his nkey entry.
        errors = []

        async def on_err(e):
            errors.append(str(e))

        nb = await nats.connect(srv.url, nkeys_seed_str=bob.seed, error_cb=on_err, allow_reconnect=False)
        await nb.publish("nope", b"x")
        await nb.flush()
        await asyncio.sleep(0.2)
        observed["bob_errors"] = errors
        await nb.close()
        # Bad input: unknown nkey, bad signature, missing signature, garbage; nc unaffected.
        stranger = Identity.new("user")
        cases = {
            "unknown": signed(stranger, nkey=stranger.public),
            "bad_sig": signed(stranger, nkey=alice.public),
            "no_sig": lambda n: {"verbose": False, "nkey": alice.public},
            "garbage_sig": lambda n: {"verbose": False, "nkey": alice.public, "sig": "!!!"},
            "garbage_nkey": lambda n: {"verbose": False, "nkey": "Uxyz", "sig": "abc"},
            "std_base64_sig": lambda n: {
                "verbose": False,
                "nkey": alice.public,
                "sig": __import__("base64").b64encode(alice.sign_bytes(n.encode())).decode(),
            },
        }
        for name, make in cases.items():
            _, out = await raw_connect(srv.port, make)
            observed[name] = out
        observed["rt_after"] = await roundtrip(nc)
        await nc.close()
    finally:
        srv.stop()
    assert observed["nonce"] == (15, True)
    assert observed["auth_required"] is True
    assert observed["fresh_nonce"] is True
    assert observed["rt_file"] == observed["rt_whitespace"] == observed["rt_after"] == b"echo:x"
    assert observed["bob_errors"] == ['nats: permissions violation for publish to "nope"'] or any(
        "nope" in e for e in observed["bob_errors"]
    )
    for name in ("unknown", "bad_sig", "no_sig", "garbage_sig", "garbage_nkey"):
        assert observed[name] == b"-ERR 'Authorization Violation'\r\n<EOF>", (name, observed[name])
    assert observed["std_base64_sig"] == b"PONG\r\n"


# -- operator mode: users ------------------------------------------------------------------------------


async def _jwt_user_observations(srv, setup, tmp_path) -> dict:
    A, _ = setup.accounts["A"]
    obs = {}
    creds = tmp_path / "a.creds"
    creds.write_text(setup.creds("A", "alice"))
    nc = await nats.connect(srv.url, user_credentials=str(creds), allow_reconnect=False)
    obs["nonce_len"] = len(nc._server_info.get("nonce", ""))
    obs["rt_file"] = await roundtrip(nc)
    # From strings (RawCredentials) and from a (jwt file, seed file) pair.
    n2 = await nats.connect(srv.url, user_credentials=RawCredentials(setup.creds("A", "bob")), allow_reconnect=False)
    obs["rt_strings"] = await roundtrip(n2)
    await n2.close()
    u, ujwt = setup.user("A", "carol")
    (tmp_path / "c.jwt").write_text(ujwt)
    (tmp_path / "c.nk").write_text(u.seed)  # nats-py reads the pair raw
    n3 = await nats.connect(
        srv.url, user_credentials=(str(tmp_path / "c.jwt"), str(tmp_path / "c.nk")), allow_reconnect=False
    )
    obs["rt_pair"] = await roundtrip(n3)
    await n3.close()
    # Creds plus a token: the token is not what authenticates in operator mode.
    n4 = await nats.connect(srv.url, user_credentials=str(creds), token="some-token", allow_reconnect=False)
    obs["rt_creds_token"] = await roundtrip(n4)
    await n4.close()
    # Accounts are isolated: B does not see A's messages.
    nb = await nats.connect(srv.url, user_credentials=RawCredentials(setup.creds("B")), allow_reconnect=False)
    seen = []

    async def cb(m):
        seen.append(m.data)

    await nb.subscribe("iso", cb=cb)
    await nb.flush()
    await nc.publish("iso", b"from-A")
    await nc.flush()
    await asyncio.sleep(0.2)
    obs["isolation"] = seen
    await nb.close()
    # User JWT permissions.
    pu, pjwt = setup.user("A", "perm", pub={"allow": ["foo"]}, sub={"deny": ["bar"]})
    _, obs["perms"] = await raw_connect(
        srv.port, signed(pu, jwt=pjwt), after=b"PUB baz 1\r\nx\r\nSUB bar 1\r\nPUB foo 1\r\nx\r\nPING\r\n"
    )
    # Bearer token: no signature needed.
    bu, bjwt = setup.user("A", "bearer", bearer=True)
    _, obs["bearer"] = await raw_connect(srv.port, lambda n: {"verbose": False, "jwt": bjwt})
    # Bad input: each is 'Authorization Violation' and a close.
    now = int(time.time())
    eu, ejwt = setup.user("A", "expired", exp=now - 10)
    fu, fjwt = setup.user("A", "future", nbf=now + 100)
    other = Identity.new("account")
    ou = Identity.new("user")
    ojwt = other.sign(user_claims(ou, "orphan"))
    parts = pjwt.split(".")
    forged_claims = json.loads(__import__("base64").urlsafe_b64decode(parts[1] + "=="))
    forged_claims["nats"]["pub"] = {"allow": [">"]}
    forged = f"{parts[0]}.{b64url(json.dumps(forged_claims).encode())}.{parts[2]}"
    stranger = Identity.new("user")
    cases = {
        "bad_sig": signed(stranger, jwt=pjwt),
        "no_sig": lambda n: {"verbose": False, "jwt": pjwt},
        "expired": signed(eu, jwt=ejwt),
        "not_yet_valid": signed(fu, jwt=fjwt),
        "unknown_account": signed(ou, jwt=ojwt),
        "forged": signed(pu, jwt=forged),
        "garbage": signed(pu, jwt="eyJ.garbage.jwt"),
        "account_jwt_as_user": signed(pu, jwt=setup.accounts["A"][1]),
        "user_pass": lambda n: {"verbose": False, "user": "a", "pass": "b"},
        "nothing": lambda n: {"verbose": False},
    }
    for name, make in cases.items():
        _, obs[name] = await raw_connect(srv.port, make)
    # Expiring while connected.
    xu, xjwt = setup.user("A", "soon", exp=int(time.time()) + 2)
    _, obs["expiring"] = await raw_connect(srv.port, signed(xu, jwt=xjwt), wait=4.0)
    obs["rt_after"] = await roundtrip(nc)
    await nc.close()
    return obs


@pytest.mark.parametrize("kind", KINDS)
async def test_jwt_users_memory_resolver(kind, tmp_path):
    setup = operator_setup("A", "B")
    srv = _server(kind, tmp_path, setup.config())
    try:
        obs = await _jwt_user_observations(srv, setup, tmp_path)
    finally:
        srv.stop()
    assert obs["nonce_len"] == 15
    for k in ("rt_file", "rt_strings", "rt_pair", "rt_creds_token", "rt_after"):
        assert obs[k] == b"echo:x", k
    assert obs["isolation"] == []
    assert obs["perms"] == (
        b"-ERR 'Permissions Violation for Publish to \"baz\"'\r\n"
        b"-ERR 'Permissions Violation for Subscription to \"bar\"'\r\nPONG\r\n"
    )
    assert obs["bearer"] == b"PONG\r\n"
    for k in (
        "bad_sig",
        "no_sig",
        "expired",
        "not_yet_valid",
        "unknown_account",
        "forged",
        "garbage",
        "account_jwt_as_user",
        "user_pass",
        "nothing",
    ):
        assert obs[k] == b"-ERR 'Authorization Violation'\r\n<EOF>", (k, obs[k])
    assert obs["expiring"] == b"PONG\r\n-ERR 'User Authentication Expired'\r\n<EOF>"


@pytest.mark.parametrize("kind", KINDS)
async def test_revocations_in_account_jwt(kind, tmp_path):
    setup = operator_setup("A")
    A, _ = setup.accounts["A"]
    gone, kept = Identity.new("user"), Identity.new("user")
    now = int(time.time())
    setup.accounts["A"] = (A, setup.operator.sign(account_claims(A, "A", revocations={gone.public: now + 5})))
    srv = _server(kind, tmp_path, setup.config())
    try:
        _, revoked = await raw_connect(srv.port, signed(gone, jwt=A.sign(user_claims(gone, "g", iat=now - 5))))
        # A JWT issued after the revocation time is valid again.
        _, reissued = await raw_connect(srv.port, signed(gone, jwt=A.sign(user_claims(gone, "g", iat=now + 10))))
        _, other = await raw_connect(srv.port, signed(kept, jwt=A.sign(user_claims(kept, "k"))))
    finally:
        srv.stop()
    assert revoked == b"-ERR 'Authorization Violation'\r\n<EOF>"
    assert reissued == b"PONG\r\n"
    assert other == b"PONG\r\n"


@pytest.mark.parametrize("kind", KINDS)
async def test_signing_keys(kind, tmp_path):
    """Accounts signed by an operator signing key, users by an account signing key (plain and
    scoped: the scope's template gives the permissions)."""
    setup = operator_setup()
    op_sk, acc_sk, scoped_sk = Identity.new("operator"), Identity.new("account"), Identity.new("account")
    from tests.helpers.identities import operator_claims

    setup.operator_jwt = setup.operator.sign(
        operator_claims(setup.operator, "OP", system_account=setup.system.public, signing_keys=[op_sk.public])
    )
    A = Identity.new("account")
    scope = {
        "kind": "user_scope",
        "key": scoped_sk.public,
        "role": "r",
        "template": {"pub": {"allow": ["scoped.>"]}, "sub": {}, "subs": -1, "data": -1, "payload": -1},
    }
    ajwt = op_sk.sign(account_claims(A, "A", signing_keys=[acc_sk.public, scope]))
    setup.accounts["A"] = (A, ajwt)
    srv = _server(kind, tmp_path, setup.config())
    try:
        u1 = Identity.new("user")
        _, plain = await raw_connect(
            srv.port,
            signed(u1, jwt=acc_sk.sign(user_claims(u1, "p", issuer_account=A.public))),
            after=b"PUB any 1\r\nx\r\nPING\r\n",
        )
        u2 = Identity.new("user")
        bare = user_claims(u2, "s", issuer_account=A.public)
        for k in ("pub", "sub", "subs", "data", "payload"):
            del bare["nats"][k]  # a scoped user carries no permissions or limits of its own
        _, scoped = await raw_connect(
            srv.port, signed(u2, jwt=scoped_sk.sign(bare)), after=b"PUB any 1\r\nx\r\nPUB scoped.a 1\r\nx\r\nPING\r\n"
        )
        u4 = Identity.new("user")
        _, scoped_with_limits = await raw_connect(
            srv.port, signed(u4, jwt=scoped_sk.sign(user_claims(u4, "s", issuer_account=A.public)))
        )
        u3 = Identity.new("user")
        stranger_sk = Identity.new("account")
        _, unknown_sk = await raw_connect(
            srv.port, signed(u3, jwt=stranger_sk.sign(user_claims(u3, "x", issuer_account=A.public)))
        )
    finally:
        srv.stop()
    assert plain == b"PONG\r\n"
    assert scoped == b"-ERR 'Permissions Violation for Publish to \"any\"'\r\nPONG\r\n"
    assert unknown_sk == b"-ERR 'Authorization Violation'\r\n<EOF>"
    assert scoped_with_limits == b"-ERR 'Authorization Violation'\r\n<EOF>"


# -- operator mode: full resolver and pushed claims ----------------------------------------------------


def _strip_server(body: bytes) -> dict:
    d = json.loads(body)
    d.pop("server", None)
    return d


@pytest.mark.parametrize("kind", KINDS)
async def test_full_resolver_claim_updates(kind, tmp_path):
    setup = operator_setup("A")
    A, _ = setup.accounts["A"]
    jwt_dir = tmp_path / f"{kind}-jwt"
    conf = setup.config(resolver="full", resolver_dir=str(jwt_dir))
    srv = _server(kind, tmp_path, conf)
    obs = {}
    try:
        sysc = await nats.connect(srv.url, user_credentials=RawCredentials(setup.creds("SYS")), allow_reconnect=False)
        # A new account pushed at run time: its users can connect at once.
        C = Identity.new("account")
        cjwt = setup.operator.sign(account_claims(C, "C"))
        cu, cujwt = Identity.new("user"), ""
        cujwt = C.sign(user_claims(cu, "c"))
        # (the reference first tries to fetch it from other servers for ~2 s)
        _, obs["c_before"] = await raw_connect(srv.port, signed(cu, jwt=cujwt))
        r = await sysc.request("$SYS.REQ.CLAIMS.UPDATE", cjwt.encode(), timeout=2)
        obs["update"] = _strip_server(r.data)
        r = await sysc.request(f"$SYS.REQ.ACCOUNT.{C.public}.CLAIMS.UPDATE", cjwt.encode(), timeout=2)
        obs["update_by_subject"] = _strip_server(r.data)
        _, obs["c_after"] = await raw_connect(srv.port, signed(cu, jwt=cujwt))
        r = await sysc.request(f"$SYS.REQ.ACCOUNT.{C.public}.CLAIMS.LOOKUP", b"", timeout=2)
        obs["lookup"] = r.data.decode() == cjwt
        r = await sysc.request(f"$SYS.REQ.ACCOUNT.{Identity.new('account').public}.CLAIMS.LOOKUP", b"", timeout=2)
        obs["lookup_unknown"] = r.data
        r = await sysc.request("$SYS.REQ.CLAIMS.LIST", b"", timeout=2)
        obs["list"] = sorted(json.loads(r.data)["data"])
        r = await sysc.request("$SYS.REQ.CLAIMS.UPDATE", b"garbage", timeout=2)
        obs["garbage"] = _strip_server(r.data)
        r = await sysc.request(f"$SYS.REQ.ACCOUNT.{A.public}.CLAIMS.UPDATE", cjwt.encode(), timeout=2)
        obs["mismatch"] = _strip_server(r.data)
        # Revoking a connected user closes it with the reference's text; others stay.
        victim = Identity.new("user")
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        info = json.loads((await reader.readline())[5:])
        vjwt = A.sign(user_claims(victim, "v"))
        writer.write(
            b"CONNECT "
            + json.dumps(
                {"verbose": False, "jwt": vjwt, "sig": b64url(victim.sign_bytes(info["nonce"].encode()))}
            ).encode()
            + b"\r\nPING\r\n"
        )
        obs["victim_connected"] = await asyncio.wait_for(reader.readline(), 2)
        keeper = await nats.connect(
            srv.url, user_credentials=RawCredentials(setup.creds("A", "keeper")), allow_reconnect=False
        )
        a2 = setup.operator.sign(
            account_claims(A, "A", revocations={victim.public: int(time.time()) + 1}, iat=int(time.time()) + 1)
        )
        r = await sysc.request("$SYS.REQ.CLAIMS.UPDATE", a2.encode(), timeout=2)
        obs["revoke"] = _strip_server(r.data)
        obs["victim_got"] = await asyncio.wait_for(reader.read(1000), 3)
        obs["victim_eof"] = await asyncio.wait_for(reader.read(1000), 3)
        writer.close()
        obs["keeper_rt"] = await roundtrip(keeper)
        await keeper.close()
        await sysc.close()
    finally:
        srv.stop()
    # Persisted: a restart with the same directory still knows account C (no preload for it).
    srv = _server(kind, tmp_path, conf)
    try:
        _, obs["c_after_restart"] = await raw_connect(srv.port, signed(cu, jwt=cujwt))
    finally:
        srv.stop()
    ok = {"data": {"account": C.public, "code": 200, "message": "jwt updated"}}
    assert obs["c_before"].startswith(b"-ERR 'Authorization Violation'\r\n")
    assert obs["update"] == ok and obs["update_by_subject"] == ok
    assert obs["c_after"] == b"PONG\r\n"
    assert obs["lookup"] is True
    assert obs["lookup_unknown"] == b""
    assert obs["list"] == sorted([setup.system.public, A.public, C.public])
    assert obs["garbage"] == {
        "error": {"account": "n/a", "code": 500, "description": "jwt update resulted in error - expected 3 chunks"}
    }
    assert obs["mismatch"] == {
        "error": {
            "account": A.public,
            "code": 500,
            "description": "jwt update resulted in error - subject does not match jwt content",
        }
    }
    assert obs["victim_connected"] == b"PONG\r\n"
    assert obs["revoke"] == {"data": {"account": A.public, "code": 200, "message": "jwt updated"}}
    assert obs["victim_got"] == b"-ERR 'User Authentication Revoked'\r\n"
    assert obs["victim_eof"] == b""
    assert obs["keeper_rt"] == b"echo:x"
    assert obs["c_after_restart"] == b"PONG\r\n"


# -- imports/exports and JetStream limits ---------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_imports_exports_and_jetstream_limits(kind, tmp_path):
    setup = operator_setup()
    op = setup.operator
    A, B = Identity.new("account"), Identity.new("account")
    ajwt = op.sign(
        account_claims(
            A,
            "A",
            exports=[
                {"name": "ev", "subject": "events.>", "type": "stream"},
                {"name": "svc", "subject": "svc.*", "type": "service"},
                {"name": "multi", "subject": "multi", "type": "service", "response_type": "Stream"},
            ],
            jetstream={"mem_storage": -1, "disk_storage": 1024 * 1024, "streams": 2, "consumer": -1},
        )
    )
    bjwt = op.sign(
        account_claims(
            B,
            "B",
            imports=[
                {
                    "name": "ev",
                    "subject": "events.>",
                    "account": A.public,
                    "type": "stream",
                    "local_subject": "fromA.events.>",
                },
                {"name": "legacy", "subject": "events.x", "account": A.public, "type": "stream", "to": "legacy"},
                {"name": "svc", "subject": "svc.*", "account": A.public, "type": "service", "local_subject": "asvc.*"},
                {"name": "multi", "subject": "multi", "account": A.public, "type": "service"},
                {"name": "nope", "subject": "private.>", "account": A.public, "type": "stream"},
            ],
        )
    )
    setup.accounts = {"A": (A, ajwt), "B": (B, bjwt)}
    srv = _server(kind, tmp_path, setup.config(jetstream=True, store_dir=str(tmp_path / f"{kind}-js")))
    obs: dict = {}
    try:
        na = await nats.connect(srv.url, user_credentials=RawCredentials(setup.creds("A")), allow_reconnect=False)
        nb = await nats.connect(srv.url, user_credentials=RawCredentials(setup.creds("B")), allow_reconnect=False)
        got = []

        async def cb(m):
            got.append((m.subject, m.data, m.reply))

        for s in ("fromA.>", "legacy.>", "private.>"):
            await nb.subscribe(s, cb=cb)

        async def svc(m):
            await m.respond(b"re:" + m.subject.encode() + b":" + m.data)

        async def multi(m):
            await m.respond(b"1")
            await m.respond(b"2")

        await na.subscribe("svc.*", cb=svc)
        await na.subscribe("multi", cb=multi)
        await na.flush()
        await nb.flush()
        await na.publish("events.x", b"e1")
        await na.publish("events.y.z", b"e2", reply="r.1")
        await na.publish("private.a", b"p")
        await na.flush()
        await asyncio.sleep(0.3)
        obs["stream"] = sorted(got)
        r = await nb.request("asvc.q", b"hello", timeout=2)
        obs["service"] = r.data
        try:
            await nb.request("svc.q", b"hello", timeout=1)
            obs["unmapped"] = "answered"
        except Exception as e:  # the class is the observation
            obs["unmapped"] = type(e).__name__
        inbox = nb.new_inbox()
        responses = []

        async def rcb(m):
            responses.append(m.data)

        await nb.subscribe(inbox, cb=rcb)
        await nb.publish("multi", b"x", reply=inbox)
        await nb.flush()
        await asyncio.sleep(0.3)
        obs["multi"] = responses
        # JetStream limits from A's claims; B has none.
        js = na.jetstream()
        info = await js.account_info()
        obs["limits"] = (info.limits.max_memory, info.limits.max_storage, info.limits.max_streams)
        results = []
        for i in range(3):
            try:
                await js.add_stream(name=f"S{i}", subjects=[f"s{i}"])
                results.append("ok")
            except Exception as e:
                results.append(getattr(e, "err_code", type(e).__name__))
        obs["streams"] = results
        try:
            await nb.jetstream().account_info()
            obs["b_js"] = "enabled"
        except Exception as e:
            obs["b_js"] = type(e).__name__
        # Service requests to an export nobody serves: no responders, as a local request.
        nc2 = await nats.connect(srv.url, user_credentials=RawCredentials(setup.creds("B")), allow_reconnect=False)
        await na.close()
        await asyncio.sleep(0.3)  # the server has dropped A's subscriptions
        try:
            await nc2.request("asvc.q", b"hello", timeout=1)
            obs["no_responders"] = "answered"
        except Exception as e:
            obs["no_responders"] = type(e).__name__
        await nc2.close()
        await nb.close()
    finally:
        srv.stop()
    assert obs["stream"] == [
        ("fromA.events.x", b"e1", ""),
        ("fromA.events.y.z", b"e2", "r.1"),
        ("legacy.events.x", b"e1", ""),
    ]
    assert obs["service"] == b"re:svc.q:hello"
    assert obs["unmapped"] == "NoRespondersError"
    assert obs["multi"] == [b"1", b"2"]
    assert obs["limits"] == (-1, 1024 * 1024, 2)
    assert obs["streams"] == ["ok", "ok", 10027]
    assert obs["b_js"] == "ServiceUnavailableError"
    assert obs["no_responders"] == "NoRespondersError"


@pytest.mark.parametrize("kind", KINDS)
async def test_pushed_jetstream_limits_take_effect(kind, tmp_path):
    """JetStream enabled and its limits changed by a pushed account JWT, without a restart;
    then tiered limits (``limits.tiered_limits.R1``, what a single server's streams use)."""
    setup = operator_setup("A")
    A, _ = setup.accounts["A"]
    conf = setup.config(
        resolver="full",
        resolver_dir=str(tmp_path / f"{kind}-jwt"),
        jetstream=True,
        store_dir=str(tmp_path / f"{kind}-js"),
    )
    srv = _server(kind, tmp_path, conf)
    obs = {}
    try:
        sysc = await nats.connect(srv.url, user_credentials=RawCredentials(setup.creds("SYS")), allow_reconnect=False)
        na = await nats.connect(srv.url, user_credentials=RawCredentials(setup.creds("A")), allow_reconnect=False)
        try:
            await na.jetstream().account_info()
            obs["before"] = "enabled"
        except Exception as e:
            obs["before"] = type(e).__name__
        tier = {"mem_storage": 1 << 20, "disk_storage": 1 << 20, "streams": 1, "consumer": 1}
        a2 = setup.operator.sign(account_claims(A, "A", jetstream=tier, iat=int(time.time()) + 1))
        await sysc.request("$SYS.REQ.CLAIMS.UPDATE", a2.encode(), timeout=2)
        await asyncio.sleep(0.2)
        js = na.jetstream()
        info = await js.account_info()
        obs["after"] = (
            info.limits.max_memory,
            info.limits.max_storage,
            info.limits.max_streams,
            info.limits.max_consumers,
        )
        await js.add_stream(name="ONE", subjects=["one"])
        try:
            await js.add_stream(name="TWO", subjects=["two"])
            obs["second"] = "ok"
        except Exception as e:
            obs["second"] = getattr(e, "err_code", type(e).__name__)
        tier2 = dict(tier, streams=5)
        a3 = setup.operator.sign(account_claims(A, "A", tiered={"R1": tier2}, iat=int(time.time()) + 2))
        await sysc.request("$SYS.REQ.CLAIMS.UPDATE", a3.encode(), timeout=2)
        await asyncio.sleep(0.2)
        await js.add_stream(name="TWO", subjects=["two"])
        obs["raised"] = (await js.account_info()).streams
        info = json.loads((await na.request("$JS.API.INFO", b"", timeout=2)).data)
        obs["tiered_report"] = (info["limits"]["max_streams"], info["tiers"]["R1"]["limits"]["max_streams"])
        await na.close()
        await sysc.close()
    finally:
        srv.stop()
    assert obs["before"] == "ServiceUnavailableError"
    assert obs["after"] == (1 << 20, 1 << 20, 1, 1)
    assert obs["second"] == 10027
    assert obs["raised"] == 2
    assert obs["tiered_report"] == (0, 5)  # tiered limits are reported under "tiers"


@pytest.mark.parametrize("kind", KINDS)
async def test_memory_resolver_updates_only_accounts_in_use(kind, tmp_path):
    setup = operator_setup("A")
    A, _ = setup.accounts["A"]
    srv = _server(kind, tmp_path, setup.config())
    obs = {}
    try:
        sysc = await nats.connect(srv.url, user_credentials=RawCredentials(setup.creds("SYS")), allow_reconnect=False)
        C = Identity.new("account")
        cjwt = setup.operator.sign(account_claims(C, "C"))
        try:
            await sysc.request("$SYS.REQ.CLAIMS.UPDATE", cjwt.encode(), timeout=1)
            obs["generic"] = "answered"
        except Exception as e:
            obs["generic"] = type(e).__name__
        r = await sysc.request(f"$SYS.REQ.ACCOUNT.{C.public}.CLAIMS.UPDATE", cjwt.encode(), timeout=2)
        obs["unknown"] = _strip_server(r.data)
        cu = Identity.new("user")
        _, obs["c_user"] = await raw_connect(srv.port, signed(cu, jwt=C.sign(user_claims(cu, "c"))))
        victim = Identity.new("user")
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        info = json.loads((await reader.readline())[5:])
        writer.write(
            b"CONNECT "
            + json.dumps(
                {
                    "verbose": False,
                    "jwt": A.sign(user_claims(victim, "v")),
                    "sig": b64url(victim.sign_bytes(info["nonce"].encode())),
                }
            ).encode()
            + b"\r\nPING\r\n"
        )
        obs["victim"] = await asyncio.wait_for(reader.readline(), 2)
        a2 = setup.operator.sign(
            account_claims(A, "A", revocations={victim.public: int(time.time()) + 1}, iat=int(time.time()) + 1)
        )
        r = await sysc.request(f"$SYS.REQ.ACCOUNT.{A.public}.CLAIMS.UPDATE", a2.encode(), timeout=2)
        obs["in_use"] = _strip_server(r.data)
        obs["victim_got"] = await asyncio.wait_for(reader.read(1000), 3)
        writer.close()
        await sysc.close()
    finally:
        srv.stop()
    assert obs["generic"] == "NoRespondersError"
    assert obs["unknown"] == {"data": {"account": C.public, "code": 200, "message": "jwt update skipped"}}
    assert obs["c_user"].startswith(b"-ERR 'Authorization Violation'\r\n")
    assert obs["victim"] == b"PONG\r\n"
    assert obs["in_use"] == {"data": {"account": A.public, "code": 200, "message": "jwt updated"}}
    assert obs["victim_got"] == b"-ERR 'User Authentication Revoked'\r\n"


@pytest.mark.parametrize("kind", KINDS)
async def test_account_and_user_limits(kind, tmp_path):
    """``conn``/``subs``/``payload`` of the account and the user JWT; an absent limit is 0, as the
    Go JWT library decodes it."""
    setup = operator_setup("A", "NOLIMITS")
    A, _ = setup.accounts["A"]
    setup.accounts["A"] = (A, setup.operator.sign(account_claims(A, "A", limits={"conn": 2, "subs": 3, "payload": 10})))
    N, _ = setup.accounts["NOLIMITS"]
    bare = account_claims(N, "NOLIMITS")
    for k in ("conn", "subs", "payload"):
        del bare["nats"]["limits"][k]
    setup.accounts["NOLIMITS"] = (N, setup.operator.sign(bare))
    srv = _server(kind, tmp_path, setup.config())
    obs = {}
    try:
        held = []
        for i in range(3):
            u = Identity.new("user")
            reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            info = json.loads((await reader.readline())[5:])
            writer.write(
                b"CONNECT "
                + json.dumps(
                    {
                        "verbose": False,
                        "jwt": A.sign(user_claims(u, "x")),
                        "sig": b64url(u.sign_bytes(info["nonce"].encode())),
                    }
                ).encode()
                + b"\r\nPING\r\n"
            )
            obs[f"conn{i}"] = await asyncio.wait_for(reader.read(1000), 2)
            held.append(writer)
        held.pop(0).close()
        await asyncio.sleep(0.3)
        u = Identity.new("user")
        _, obs["account_limits"] = await raw_connect(
            srv.port,
            signed(u, jwt=A.sign(user_claims(u, "x"))),
            after=(
                b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nSUB d 4\r\nPUB a 10\r\n0123456789\r\nPING\r\n"
                b"PUB a 11\r\n0123456789A\r\n"
            ),
        )
        for w in held:
            w.close()
        await asyncio.sleep(0.3)
        u = Identity.new("user")
        c = user_claims(u, "x")
        c["nats"]["subs"], c["nats"]["payload"] = 1, 3
        _, obs["user_limits"] = await raw_connect(
            srv.port,
            signed(u, jwt=A.sign(c)),
            after=(b"SUB a 1\r\nSUB b 2\r\nPUB a 3\r\nabc\r\nPING\r\nPUB a 4\r\nabcd\r\n"),
        )
        u = Identity.new("user")
        c = user_claims(u, "x")
        for k in ("subs", "payload"):
            del c["nats"][k]
        _, obs["absent_user_limits"] = await raw_connect(
            srv.port, signed(u, jwt=A.sign(c)), after=(b"SUB a 1\r\nPING\r\nPUB a 1\r\nx\r\n")
        )
        u = Identity.new("user")
        _, obs["absent_account_limits"] = await raw_connect(srv.port, signed(u, jwt=N.sign(user_claims(u, "x"))))
    finally:
        srv.stop()
    # nats-server sometimes repeats "maximum subscriptions exceeded" for one refused SUB (it checks
    # again when it applies the account's limits to a client that just connected, and the repeat can
    # land after later replies such as PONG): the first one is the answer. natsd's output is taken as is.
    once = b"-ERR 'maximum subscriptions exceeded'\r\n"
    if kind == "reference":
        for k in ("account_limits", "user_limits", "absent_user_limits"):
            head, sep, tail = obs[k].partition(once)
            obs[k] = head + sep + tail.replace(once, b"")
    assert obs["conn0"] == obs["conn1"] == b"PONG\r\n"
    assert obs["conn2"] == b"-ERR 'maximum account active connections exceeded'\r\n"
    assert obs["account_limits"] == (
        b"-ERR 'maximum subscriptions exceeded'\r\nMSG a 1 10\r\n0123456789\r\nPONG\r\n"
        b"-ERR 'Maximum Payload Violation'\r\n<EOF>"
    )
    assert obs["user_limits"] == (
        b"-ERR 'maximum subscriptions exceeded'\r\nMSG a 1 3\r\nabc\r\nPONG\r\n"
        b"-ERR 'Maximum Payload Violation'\r\n<EOF>"
    )
    assert obs["absent_user_limits"] == (
        b"-ERR 'maximum subscriptions exceeded'\r\nPONG\r\n-ERR 'Maximum Payload Violation'\r\n<EOF>"
    )
    assert obs["absent_account_limits"] == b"-ERR 'maximum account active connections exceeded'\r\n<EOF>"


@pytest.mark.parametrize("kind", KINDS)
async def test_private_exports_need_activation_tokens(kind, tmp_path):
    setup = operator_setup()
    op = setup.operator
    A, B, C, D = (Identity.new("account") for _ in range(4))

    def activation(to: str, subject: str, **extra) -> str:
        return A.sign(
            {
                "sub": to,
                "name": subject,
                "nats": {"subject": subject, "kind": "stream", "type": "activation", "version": 2},
                **extra,
            }
        )

    exports = [
        {"name": "priv", "subject": "priv.>", "type": "stream", "token_req": True},
        {"name": "psvc", "subject": "psvc", "type": "service", "token_req": True},
    ]

    def importer(acc, name, token, svc_token=""):
        imports = [
            {
                "name": "priv",
                "subject": "priv.>",
                "account": A.public,
                "type": "stream",
                "local_subject": "got.>",
                **({"token": token} if token else {}),
            }
        ]
        if svc_token:
            imports.append(
                {"name": "psvc", "subject": "psvc", "account": A.public, "type": "service", "token": svc_token}
            )
        return acc, op.sign(account_claims(acc, name, imports=imports))

    svc_act = A.sign(
        {
            "sub": B.public,
            "name": "psvc",
            "nats": {"subject": "psvc", "kind": "service", "type": "activation", "version": 2},
        }
    )
    setup.accounts = {
        "A": (A, op.sign(account_claims(A, "A", exports=exports))),
        "B": importer(B, "B", activation(B.public, "priv.>"), svc_act),
        "C": importer(C, "C", activation(B.public, "priv.>")),  # issued to B, not C
        "D": importer(D, "D", ""),
        "E": importer(Identity.new("account"), "E", activation("*", "priv.>", exp=int(time.time()) - 10)),
    }
    srv = _server(kind, tmp_path, setup.config())
    got: dict = {}
    try:
        na = await nats.connect(srv.url, user_credentials=RawCredentials(setup.creds("A")), allow_reconnect=False)

        async def svc(m):
            await m.respond(b"private-svc")

        await na.subscribe("psvc", cb=svc)
        await na.flush()
        clients = []
        for name in ("C", "E"):  # a bad activation token invalidates the whole account
            u, ujwt = setup.user(name)
            _, got[name] = await raw_connect(srv.port, signed(u, jwt=ujwt))
        for name in ("B", "D"):
            nc = await nats.connect(srv.url, user_credentials=RawCredentials(setup.creds(name)), allow_reconnect=False)
            got[name] = []

            async def cb(m, name=name):
                got[name].append(m.subject)

            await nc.subscribe("got.>", cb=cb)
            await nc.flush()
            clients.append(nc)
        await na.publish("priv.x", b"secret")
        await na.flush()
        await asyncio.sleep(0.3)
        got["svc"] = (await clients[0].request("psvc", b"q", timeout=2)).data
        for nc in clients:
            await nc.close()
        await na.close()
    finally:
        srv.stop()
    refused = b"-ERR 'Authorization Violation'\r\n<EOF>"
    assert got == {"B": ["got.x"], "C": refused, "D": [], "E": refused, "svc": b"private-svc"}


@pytest.mark.parametrize("kind", KINDS)
async def test_pushed_claims_switch_jetstream_off_and_on(kind, tmp_path):
    """JetStream removed from an account's claims: its API answers 503 and its streams stop
    (no PubAck); put back: the streams come back with their messages."""
    setup = operator_setup("A")
    A, _ = setup.accounts["A"]
    on = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}
    setup.accounts["A"] = (A, setup.operator.sign(account_claims(A, "A", jetstream=on)))
    conf = setup.config(
        resolver="full",
        resolver_dir=str(tmp_path / f"{kind}-jwt"),
        jetstream=True,
        store_dir=str(tmp_path / f"{kind}-js"),
    )
    srv = _server(kind, tmp_path, conf)
    obs = {}
    try:
        sysc = await nats.connect(srv.url, user_credentials=RawCredentials(setup.creds("SYS")), allow_reconnect=False)
        na = await nats.connect(srv.url, user_credentials=RawCredentials(setup.creds("A")), allow_reconnect=False)
        js = na.jetstream()
        await js.add_stream(name="S", subjects=["s"])
        await js.publish("s", b"1")
        off = setup.operator.sign(account_claims(A, "A", iat=int(time.time()) + 1))
        await sysc.request("$SYS.REQ.CLAIMS.UPDATE", off.encode(), timeout=2)
        await asyncio.sleep(0.3)
        for name, call in (
            ("info", js.account_info()),
            ("stream", js.stream_info("S")),
            ("publish", js.publish("s", b"2", timeout=1)),
        ):
            try:
                await call
                obs[name] = "ok"
            except Exception as e:  # the class is the observation
                obs[name] = type(e).__name__
        back = setup.operator.sign(account_claims(A, "A", jetstream=on, iat=int(time.time()) + 2))
        await sysc.request("$SYS.REQ.CLAIMS.UPDATE", back.encode(), timeout=2)
        await asyncio.sleep(0.3)
        obs["messages_after"] = (await js.stream_info("S")).state.messages
        await na.close()
        await sysc.close()
    finally:
        srv.stop()
    assert obs == {
        "info": "ServiceUnavailableError",
        "stream": "ServiceUnavailableError",
        "publish": "NoStreamResponseError",
        "messages_after": 1,
    }
