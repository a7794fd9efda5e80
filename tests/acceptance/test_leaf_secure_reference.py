"""The accepting leafnode port with TLS and nkey/JWT identities, side by side with nats-server.

Each scenario starts the hub twice, once as nats-server and once as natsd (both subprocesses, the
same config file), and connects the same leaf to it: a real nats-server, or natsd. The good cases
must link (request/reply across, the hub's ``/leafz`` shows the link bound to the right account);
the bad ones (a forged ``.creds`` signature, a wrong nkey, a certificate from an unknown CA, a leaf
without TLS, a plaintext client) must fail the same way on both hubs: what the leaf logs, what the
raw socket reads.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.request
from pathlib import Path

import nats
import nkeys
import pytest

from tests.helpers.certs import make_pki
from tests.helpers.jwtgen import new_key, operator_setup
from tests.helpers.servers import free_port, reference_binary, start_server

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.reference,
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]

HUBS = ("reference", "natsd")


def leafz(http_port: int) -> dict:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/leafz", timeout=2) as r:
            return json.loads(r.read())
    except OSError:
        return {"leafnodes": 0, "leafs": []}


async def wait_until(pred, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        r = await asyncio.to_thread(pred)
        if r:
            return r
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def request_across(from_url: str, to_url: str, subject: str, **connect) -> bytes:
    """A service on ``to_url``'s side answers a request made on ``from_url``'s side."""
    svc = await nats.connect(to_url, **connect.get("to", {}))
    cli = await nats.connect(from_url, **connect.get("from", {}))
    try:

        async def answer(m):
            await m.respond(b"re:" + m.data)

        await svc.subscribe(subject, cb=answer)
        await svc.flush()
        deadline = time.monotonic() + 15
        while True:
            try:
                return (await cli.request(subject, b"x", timeout=0.5)).data
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
    finally:
        await cli.close()
        await svc.close()


class Hub:
    """A hub of the given kind with ``leafnodes`` on ``leaf_port`` and monitoring on ``http``."""

    def __init__(self, kind: str, tmp: Path, body: str) -> None:
        self.kind = kind
        self.leaf_port = free_port()
        self.http = free_port()
        cfg = tmp / f"hub-{kind}.conf"
        cfg.write_text(f"server_name: HUB\nhttp_port: {self.http}\n" + body.replace("LEAF_PORT", str(self.leaf_port)))
        self.proc = start_server(kind, tmp / f"hub-{kind}", config=str(cfg), jetstream=False)
        deadline = time.monotonic() + 10
        while True:  # the leafnode listener opens a moment after the client port
            try:
                socket.create_connection(("127.0.0.1", self.leaf_port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def links(self) -> list:
        return leafz(self.http)["leafs"]

    def stop(self) -> None:
        self.proc.stop()


def leaf_conf(tmp: Path, name: str, remote: str) -> str:
    p = tmp / f"{name}.conf"
    p.write_text(f'server_name: {name}\nleafnodes {{ reconnect: "250ms", remotes: [ {{ {remote} }} ] }}\n')
    return str(p)


def tls_remote(pki, port: int, *, cert: bool = True, other: bool = False) -> str:
    if other:
        c, k = pki.other_client_cert, pki.other_client_key
    else:
        c, k = pki.client_cert, pki.client_key
    pair = f'cert_file: "{c}", key_file: "{k}", ' if cert else ""
    return f'url: "tls://localhost:{port}", tls {{ {pair}ca_file: "{pki.ca_file}" }}'


def hub_tls(pki, *, verify: bool = True) -> str:
    return (
        f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", ca_file: "{pki.ca_file}"'
        f"{', verify: true' if verify else ''} }}"
    )


def run_leaf(kind: str, tmp: Path, conf: str):
    return start_server(kind, tmp, config=conf, jetstream=False)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


# -- nkey over TLS ------------------------------------------------------------------------------------


@pytest.mark.timeout(180)
@pytest.mark.parametrize("leaf_kind", ["reference", "natsd"])
async def test_tls_and_nkey_leaf(tmp_path, pki, leaf_kind):
    """``leafnodes { tls { verify: true }, authorization { nkey, account } }``: the leaf presents
    its certificate and signs the INFO nonce with its seed; a wrong seed is refused."""
    good, good_seed = new_key(nkeys.PREFIX_BYTE_USER)
    _bad, bad_seed = new_key(nkeys.PREFIX_BYTE_USER)
    body = (
        "accounts { EDGE { users: [ {user: e, password: e} ] } }\n"
        f"leafnodes {{ port: LEAF_PORT, {hub_tls(pki)}, "
        f'authorization {{ nkey: "{good.public_key.decode()}", account: EDGE }} }}\n'
    )
    seen = {}
    for kind in HUBS:
        d = tmp_path / kind
        d.mkdir()
        hub = Hub(kind, d, body)
        try:
            leaf = run_leaf(
                leaf_kind,
                d / "leaf",
                leaf_conf(d, "LEAF", tls_remote(pki, hub.leaf_port) + f', nkey: "{good_seed.decode()}"'),
            )
            try:
                links = await wait_until(hub.links, what=f"{leaf_kind} leaf linked to {kind} hub over TLS")
                assert links[0]["account"] == "EDGE" and links[0]["name"] == "LEAF"
                assert await request_across(f"nats://e:e@127.0.0.1:{hub.proc.port}", leaf.url, "svc.n") == b"re:x"
            finally:
                leaf.stop()
            bad = run_leaf(
                leaf_kind,
                d / "bad",
                leaf_conf(d, "BAD", tls_remote(pki, hub.leaf_port) + f', nkey: "{bad_seed.decode()}"'),
            )
            try:
                await wait_until(lambda: "Authorization Violation" in bad.log(), what="wrong nkey refused")
                assert hub.links() == []
            finally:
                bad.stop()
            seen[kind] = "Authorization Violation"
        finally:
            hub.stop()
    assert seen["natsd"] == seen["reference"]


# -- operator mode, .creds ----------------------------------------------------------------------------


@pytest.mark.timeout(180)
@pytest.mark.parametrize("leaf_kind", ["reference", "natsd"])
async def test_tls_and_creds_leaf_in_operator_mode(tmp_path, pki, leaf_kind):
    """An operator-mode hub: the leaf's ``.creds`` user JWT binds the link to its account; a
    ``.creds`` whose seed does not match the JWT is refused with 'Authorization Violation'."""
    ids = operator_setup(tmp_path)
    acc = ids["account_pub"]
    body = (
        f'operator: "{ids["operator_jwt_path"]}"\nresolver: MEMORY\n'
        f'resolver_preload: {{ {acc}: "{ids["account_jwt"]}" }}\n'
        f"leafnodes {{ port: LEAF_PORT, {hub_tls(pki, verify=False)} }}\n"
    )
    forged = tmp_path / "forged.creds"
    lines = Path(ids["creds_path"]).read_text().splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("SU"))
    lines[i] = new_key(nkeys.PREFIX_BYTE_USER)[1].decode()
    forged.write_text("\n".join(lines) + "\n")
    from natsd.server.leaf.node import read_creds, sign_nonce

    jwt, seed = read_creds(ids["creds_path"])
    user = {"user_jwt_cb": lambda: jwt.encode(), "signature_cb": lambda n: sign_nonce(seed, n)[0].encode()}
    for kind in HUBS:
        d = tmp_path / kind
        d.mkdir()
        hub = Hub(kind, d, body)
        try:
            leaf = run_leaf(
                leaf_kind,
                d / "leaf",
                leaf_conf(
                    d, "LEAF", tls_remote(pki, hub.leaf_port, cert=False) + f', credentials: "{ids["creds_path"]}"'
                ),
            )
            try:
                links = await wait_until(hub.links, what=f"{leaf_kind} leaf with .creds linked to {kind} hub")
                assert links[0]["account"] == acc
                hub_url = f"nats://127.0.0.1:{hub.proc.port}"
                assert await request_across(hub_url, leaf.url, "svc.c", **{"from": user}) == b"re:x"
                assert await request_across(leaf.url, hub_url, "svc.d", to=user) == b"re:x"
            finally:
                leaf.stop()
            bad = run_leaf(
                leaf_kind,
                d / "bad",
                leaf_conf(d, "BAD", tls_remote(pki, hub.leaf_port, cert=False) + f', credentials: "{forged}"'),
            )
            try:
                await wait_until(lambda: "Authorization Violation" in bad.log(), what="forged creds refused")
                assert hub.links() == []
            finally:
                bad.stop()
        finally:
            hub.stop()


# -- TLS failures ---------------------------------------------------------------------------------------


def _raw_plaintext(port: int) -> tuple[bytes, bytes]:
    """A plaintext peer on a TLS leafnode port: the INFO it reads, then what follows its CONNECT."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.settimeout(5)
        info = b""
        while not info.endswith(b"\r\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            info += chunk
        s.sendall(b'CONNECT {"name":"plain"}\r\nPING\r\n')
        rest = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                rest += chunk
        except OSError:
            pass
        return info, rest


@pytest.mark.timeout(180)
async def test_tls_failures_match_the_reference(tmp_path, pki):
    """A certificate from an unknown CA, a leaf without TLS config, a plaintext peer: refused on
    both hubs alike (the INFO says ``tls_required``/``tls_verify``; nothing links; no reply in
    plaintext)."""
    body = f"leafnodes {{ port: LEAF_PORT, {hub_tls(pki)} }}\n"
    out = {}
    for kind in HUBS:
        d = tmp_path / kind
        d.mkdir()
        hub = Hub(kind, d, body)
        try:
            info, rest = await asyncio.to_thread(_raw_plaintext, hub.leaf_port)
            assert info.startswith(b"INFO ")
            fields = json.loads(info[5:])
            untrusted = run_leaf(
                "reference", d / "u", leaf_conf(d, "UNTRUSTED", tls_remote(pki, hub.leaf_port, other=True))
            )
            nocert = run_leaf("reference", d / "n", leaf_conf(d, "NOCERT", tls_remote(pki, hub.leaf_port, cert=False)))
            notls = run_leaf(
                "reference", d / "p", leaf_conf(d, "NOTLS", f'url: "nats-leaf://localhost:{hub.leaf_port}"')
            )
            try:

                def attempts() -> bool:
                    return all(p.log().count("Leafnode connection created") >= 2 for p in (untrusted, nocert, notls))

                await wait_until(attempts, what="leaf attempts")
                await asyncio.sleep(0.5)
                assert hub.links() == []
                hub_log = hub.proc.log()
                out[kind] = {
                    "tls_required": fields.get("tls_required"),
                    "tls_verify": fields.get("tls_verify"),
                    "nonce": bool(fields.get("nonce")),
                    "plaintext_reply": rest,
                    # Each failed handshake is logged by the hub in the reference's words.
                    "hub_logs_handshake_errors": hub_log.count("TLS leafnode handshake error") >= 6,
                    "hub_close_reason": "Leafnode connection closed: TLS Handshake Failure" in hub_log,
                    # nats-server upgrades anyway when the hub's INFO says tls_required, and fails on
                    # the hub's certificate (not trusted by the system roots).
                    "notls": "x509: certificate signed by unknown authority" in notls.log(),
                }
            finally:
                for p in (untrusted, nocert, notls):
                    p.stop()
        finally:
            hub.stop()
    assert out["natsd"] == out["reference"], out
    assert out["reference"]["tls_required"] is True and out["reference"]["plaintext_reply"] == b""


@pytest.mark.timeout(180)
async def test_verify_and_map_binds_the_certificate_user(tmp_path, pki):
    """``tls { verify_and_map: true }`` with leafnode ``users``: the leaf's certificate subject
    names the user (and so the account); a certificate naming nobody is refused."""
    body = (
        "accounts { EDGE { users: [ {user: e, password: e} ] } }\n"
        f"leafnodes {{ port: LEAF_PORT, {hub_tls(pki)[:-2]}, verify_and_map: true }}, "
        'authorization { users: [ {user: "CN=client,O=natsd tests", account: EDGE} ] } }\n'
    )
    other = make_pki(tmp_path / "other", client_cn="nobody")
    for kind in HUBS:
        d = tmp_path / kind
        d.mkdir()
        hub = Hub(kind, d, body)
        try:
            leaf = run_leaf("reference", d / "leaf", leaf_conf(d, "LEAF", tls_remote(pki, hub.leaf_port)))
            try:
                links = await wait_until(hub.links, what=f"certificate-mapped leaf on {kind} hub")
                assert links[0]["account"] == "EDGE"
            finally:
                leaf.stop()
            # Same CA (the hub trusts it), but CN=nobody names no user.
            nobody = (
                f'url: "tls://localhost:{hub.leaf_port}", tls {{ cert_file: "{other.client_cert}", '
                f'key_file: "{other.client_key}", ca_file: "{other.ca_file}" }}'
            )
            bad = run_leaf("reference", d / "bad", leaf_conf(d, "NOBODY", nobody))
            try:
                await wait_until(lambda: "Authorization Violation" in bad.log(), what="unmapped certificate refused")
                assert hub.links() == []
            finally:
                bad.stop()
        finally:
            hub.stop()


# -- the leaf user's permissions ----------------------------------------------------------------------

PERMS_BODY = """
authorization { users: [
  { user: leaf, password: leaf, permissions: { publish: { allow: ["up.>"] }, subscribe: { allow: ["down.>"] } } }
  { user: c, password: c }
] }
leafnodes { port: LEAF_PORT }
"""


class _Merged:
    """Messages of several subscriptions, in one queue (``next_msg`` as a nats-py subscription)."""

    def __init__(self) -> None:
        self.q: asyncio.Queue = asyncio.Queue()

    async def cb(self, m) -> None:
        self.q.put_nowait(m)

    async def next_msg(self, timeout: float):
        try:
            return await asyncio.wait_for(self.q.get(), timeout)
        except asyncio.TimeoutError:
            raise nats.errors.TimeoutError from None


async def _flow(hub_url: str, leaf_url: str) -> dict:
    """Which subjects cross each way (the leaf's user may publish up.>, receive down.>)."""
    hub = await nats.connect(hub_url)
    leaf = await nats.connect(leaf_url)
    try:
        # One subscription per prefix (a hub only announces interest its leaf's user may publish
        # to: a subscription to ">" would not be announced at all).
        at_hub, at_leaf = _Merged(), _Merged()
        for prefix in ("up.>", "down.>", "other.>"):
            await hub.subscribe(prefix, cb=at_hub.cb)
            await leaf.subscribe(prefix, cb=at_leaf.cb)
        await hub.flush()
        await leaf.flush()
        # Wait for the interest to cross (the allowed ways).
        deadline = time.monotonic() + 15
        got_up = got_down = False
        while not (got_up and got_down):
            await leaf.publish("up.probe", b"")
            await hub.publish("down.probe", b"")
            await leaf.flush()
            await hub.flush()
            await asyncio.sleep(0.2)
            for sub, name in ((at_hub, "up.probe"), (at_leaf, "down.probe")):
                while True:
                    try:
                        m = await sub.next_msg(timeout=0.05)
                    except nats.errors.TimeoutError:
                        break
                    if m.subject == name:
                        got_up = got_up or name == "up.probe"
                        got_down = got_down or name == "down.probe"
            if time.monotonic() > deadline:
                raise AssertionError("allowed subjects never crossed")
        for subj in ("up.1", "other.1", "down.x"):
            await leaf.publish(subj, b"from-leaf")
        for subj in ("down.1", "other.2", "up.x"):
            await hub.publish(subj, b"from-hub")
        await leaf.flush()
        await hub.flush()
        await asyncio.sleep(0.5)
        out: dict = {"hub_got": [], "leaf_got": []}
        for key, sub, data in (("hub_got", at_hub, b"from-leaf"), ("leaf_got", at_leaf, b"from-hub")):
            while True:
                try:
                    m = await sub.next_msg(timeout=0.1)
                except nats.errors.TimeoutError:
                    break
                if m.data == data:
                    out[key].append(m.subject)
        return {k: sorted(v) for k, v in out.items()}
    finally:
        await hub.close()
        await leaf.close()


def _raw_violation(port: int) -> bytes:
    """A raw leaf that ignores its permissions: what the hub answers to an LMSG it may not send."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.settimeout(5)
        buf = b""
        while b"\r\n" not in buf:
            buf += s.recv(4096)
        s.sendall(b'CONNECT {"user":"leaf","pass":"leaf","name":"RAW","headers":true}\r\n')
        time.sleep(0.3)
        s.sendall(b"LMSG other.1 2\r\nhi\r\n")
        rest = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                rest += chunk
        except OSError:
            pass
        return rest


@pytest.mark.timeout(180)
@pytest.mark.parametrize("leaf_kind", ["reference", "natsd"])
async def test_leaf_user_permissions(tmp_path, leaf_kind):
    """The leaf's user has publish/subscribe permissions: only what it may publish reaches the hub,
    only what it may subscribe to reaches the leaf, on both hubs alike; a raw leaf that sends what it
    may not gets the reference's -ERR and is closed."""
    seen = {}
    for kind in HUBS:
        d = tmp_path / kind
        d.mkdir()
        hub = Hub(kind, d, PERMS_BODY)
        try:
            leaf = run_leaf(
                leaf_kind, d / "leaf", leaf_conf(d, "LEAF", f'url: "nats-leaf://leaf:leaf@127.0.0.1:{hub.leaf_port}"')
            )
            try:
                await wait_until(hub.links, what=f"{leaf_kind} leaf linked to {kind} hub")
                flow = await _flow(f"nats://c:c@127.0.0.1:{hub.proc.port}", leaf.url)
            finally:
                leaf.stop()
            raw = await asyncio.to_thread(_raw_violation, hub.leaf_port)
            seen[kind] = {**flow, "raw": b"-ERR 'Permissions Violation for Publish to \"other.1\"'" in raw}
        finally:
            hub.stop()
    assert seen["natsd"] == seen["reference"], seen
    assert seen["reference"] == {"hub_got": ["up.1"], "leaf_got": ["down.1"], "raw": True}, seen


@pytest.mark.timeout(180)
async def test_handshake_first_and_certificate_users_of_the_server(tmp_path, pki):
    """``tls { handshake_first: true }`` on both ends (no plaintext INFO), and ``verify_and_map``
    without leafnode users: the certificate names one of the server's own users, whose account the
    link binds to."""
    body = (
        'accounts { EDGE { users: [ {user: "CN=client,O=natsd tests"}, {user: e, password: e} ] } }\n'
        f"leafnodes {{ port: LEAF_PORT, {hub_tls(pki)[:-2]}, verify_and_map: true, handshake_first: true }} }}\n"
    )
    remote = (
        f'url: "tls://localhost:LEAF_PORT", tls {{ cert_file: "{pki.client_cert}", '
        f'key_file: "{pki.client_key}", ca_file: "{pki.ca_file}", handshake_first: true }}'
    )
    for kind in HUBS:
        d = tmp_path / kind
        d.mkdir()
        hub = Hub(kind, d, body)
        try:
            info, _rest = await asyncio.to_thread(_first_bytes, hub.leaf_port)
            assert info == b""  # TLS first: the hub waits for the ClientHello
            leaf = run_leaf(
                "reference", d / "leaf", leaf_conf(d, "LEAF", remote.replace("LEAF_PORT", str(hub.leaf_port)))
            )
            try:
                links = await wait_until(hub.links, what=f"TLS-first leaf on {kind} hub")
                assert links[0]["account"] == "EDGE"
                assert await request_across(f"nats://e:e@127.0.0.1:{hub.proc.port}", leaf.url, "svc.f") == b"re:x"
            finally:
                leaf.stop()
        finally:
            hub.stop()


def _first_bytes(port: int) -> tuple[bytes, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.settimeout(0.5)
        try:
            return s.recv(4096), b""
        except OSError:
            return b"", b""
