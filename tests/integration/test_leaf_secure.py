"""The accepting leafnode port with TLS, in process (natsd on both ends): the soliciting natsd's
``tls {}`` and ``.creds`` against natsd's TLS port in operator mode, a JWT link that ends with its JWT,
and a reload that swaps the port's certificate for new links (the established link carries on).

The side-by-side checks with nats-server are in ``tests/acceptance/test_leaf_secure_reference.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import ssl
import time

import nats
import pytest

from natsd.config.leafnodes import LeafNodeOptions, RemoteLeafOptions
from natsd.config.options import ServerOptions
from natsd.config.tls import TLSOptions
from tests.helpers.certs import make_pki
from tests.helpers.inproc import running_server

pytestmark = pytest.mark.integration


async def _until(pred, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def _linked(server) -> list:
    return [c for c in server.leafnodes.connections.values() if c.ready]


def _leaf_port_cert(port: int, pki) -> bytes:
    """The certificate the leafnode port presents (INFO in plaintext, then the handshake)."""
    ctx = pki.client_context(with_cert=True)
    with socket.create_connection(("127.0.0.1", port), timeout=3) as raw:
        raw.recv(4096)  # INFO
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return s.getpeercert(binary_form=True)


def _hub(pki, **ln) -> ServerOptions:
    o = ServerOptions(host="127.0.0.1", port=0, http_port=0, server_name="HUBD")
    o.leafnodes = LeafNodeOptions(
        host="127.0.0.1",
        port=-1,
        tls=TLSOptions(cert_file=pki.server_cert, key_file=pki.server_key, ca_file=pki.ca_file, verify=True),
        **ln,
    )
    return o


def _edge(port: int, pki, **remote) -> ServerOptions:
    o = ServerOptions(host="127.0.0.1", port=0, http_port=0, server_name="EDGED")
    tls = TLSOptions(ca_file=pki.ca_file, cert_file=pki.client_cert, key_file=pki.client_key)
    o.leafnodes = LeafNodeOptions(
        reconnect_ns=100_000_000, remotes=[RemoteLeafOptions(urls=[f"tls://localhost:{port}"], tls=tls, **remote)]
    )
    return o


async def test_natsd_to_natsd_over_tls_with_creds_in_operator_mode(tmp_path):
    from natsd.server.leaf.auth import read_creds, sign_nonce
    from tests.helpers.jwtgen import operator_setup

    pki = make_pki(tmp_path / "pki")
    ids = operator_setup(tmp_path)
    hub_opts = _hub(pki)
    from natsd.config.parser import parse
    from natsd.config.options import options_from_tree

    op = options_from_tree(
        parse(
            f'operator: "{ids["operator_jwt_path"]}"\nresolver: MEMORY\n'
            f'resolver_preload: {{ {ids["account_pub"]}: "{ids["account_jwt"]}" }}\n',
            "op.conf",
            env={},
        )
    )
    hub_opts.trust = op.trust
    async with running_server(options=hub_opts) as hub:
        edge_opts = _edge(hub.leafnodes.port, pki, credentials=ids["creds_path"])
        async with running_server(options=edge_opts) as edge:
            await _until(lambda: _linked(hub), "TLS + .creds link")
            (link,) = _linked(hub)
            assert link.account.name == ids["account_pub"]
            assert link.transport.get_extra_info("ssl_object") is not None
            jwt, seed = read_creds(ids["creds_path"])
            hub_nc = await nats.connect(
                hub.client_url, user_jwt_cb=lambda: jwt.encode(), signature_cb=lambda n: sign_nonce(seed, n)[0].encode()
            )
            edge_nc = await nats.connect(edge.client_url)
            try:

                async def svc(m):
                    await m.respond(b"edge:" + m.data)

                await edge_nc.subscribe("svc.e", cb=svc)
                await edge_nc.flush()
                deadline = time.monotonic() + 10
                while True:
                    try:
                        assert (await hub_nc.request("svc.e", b"1", timeout=0.5)).data == b"edge:1"
                        break
                    except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                        if time.monotonic() > deadline:
                            raise
            finally:
                await hub_nc.close()
                await edge_nc.close()


async def test_jwt_link_ends_when_the_jwt_expires(tmp_path, caplog):
    """A leaf that logged in with a user JWT carrying ``exp`` is cut off when it expires (on the
    hub's injected clock), with the client port's error text."""
    import logging

    from natsd.clock import ManualClock
    from natsd.config.options import options_from_tree
    from natsd.config.parser import parse
    from tests.helpers.identities import operator_setup

    caplog.set_level(logging.ERROR, logger="natsd")
    pki = make_pki(tmp_path / "pki")
    now = int(time.time())
    setup = operator_setup("A")
    creds = tmp_path / "leaf.creds"
    creds.write_text(setup.creds("A", "leaf", exp=now + 30))
    hub_opts = _hub(pki)
    hub_opts.trust = options_from_tree(parse(setup.config(), "op.conf", env={})).trust
    hub_opts.system_account = setup.system.public
    async with running_server(options=hub_opts, clock=ManualClock(start_time_ns=now * 10**9)) as hub:
        async with running_server(options=_edge(hub.leafnodes.port, pki, credentials=str(creds))):
            await _until(lambda: _linked(hub), "TLS + .creds link")
            (link,) = _linked(hub)
            assert link.account.name == setup.accounts["A"][0].public
            hub.clock.advance(25 * 10**9)
            assert not link.closed
            hub.clock.advance(10 * 10**9)
            assert link.closed and link.close_reason == "Authentication Expired"
            assert "User Authentication Expired" in caplog.text


async def test_reload_swaps_the_leafnode_certificate(tmp_path):
    pki = make_pki(tmp_path / "pki")
    pki2 = make_pki(tmp_path / "pki2")  # same CA key, a newly issued server certificate
    async with running_server(options=_hub(pki)) as hub:
        port = hub.leafnodes.port
        async with running_server(options=_edge(port, pki)) as _edge_srv:
            await _until(lambda: _linked(hub), "TLS link")
            (link,) = _linked(hub)
            before = await asyncio.to_thread(_leaf_port_cert, port, pki)
            new = dataclasses.replace(hub.options)
            new.leafnodes = dataclasses.replace(
                hub.options.leafnodes,
                tls=TLSOptions(cert_file=pki2.server_cert, key_file=pki2.server_key, ca_file=pki2.ca_file, verify=True),
            )
            hub.reload(new)
            after = await asyncio.to_thread(_leaf_port_cert, port, pki)
            with open(pki2.server_cert) as f:
                assert before != after == ssl.PEM_cert_to_DER_cert(f.read())
            assert not link.closed and link.ready  # the established link carries on
            # Switching TLS off needs a restart: the reload keeps it on.
            off = dataclasses.replace(hub.options)
            off.leafnodes = dataclasses.replace(hub.options.leafnodes, tls=None)
            hub.reload(off)
            assert hub.leafnodes.options.tls is not None


@pytest.mark.skipif(
    __import__("tests.helpers.servers", fromlist=["reference_binary"]).reference_binary() is None,
    reason="nats-server binary not available",
)
async def test_interest_waits_for_the_hubs_permissions(tmp_path):
    """A natsd leaf whose clients already subscribe to subjects its hub user may not receive: the
    interest goes out only after the hub's INFO with the permissions, so a nats-server hub never
    sees a forbidden LS+ (it would close the link) and the allowed subjects cross."""
    from tests.helpers.servers import free_port, start_server

    lp = free_port()
    cfg = tmp_path / "hub.conf"
    cfg.write_text(
        "authorization { users: [\n"
        '  { user: leaf, password: leaf, permissions: { publish: { allow: ["up.>"] }, '
        'subscribe: { allow: ["down.>"] } } }\n  { user: c, password: c }\n] }\n'
        f"leafnodes {{ port: {lp} }}\n"
    )
    o = ServerOptions(host="127.0.0.1", port=0, http_port=0, server_name="EDGED")
    o.leafnodes = LeafNodeOptions(
        reconnect_ns=100_000_000, remotes=[RemoteLeafOptions(urls=[f"nats-leaf://leaf:leaf@127.0.0.1:{lp}"])]
    )
    async with running_server(options=o) as edge:
        # The edge's clients subscribe before the hub even runs.
        nc = await nats.connect(edge.client_url)
        forbidden = await nc.subscribe("other.literal")
        allowed = await nc.subscribe("down.1")
        await nc.flush()
        hub = start_server("reference", tmp_path / "hub", config=str(cfg), jetstream=False)
        try:
            hub_nc = await nats.connect(f"nats://c:c@127.0.0.1:{hub.port}")
            try:
                await _until(lambda: _linked(edge), "link with permissions")
                (link,) = _linked(edge)
                assert link.perms is not None and not link.perms.announces("other.literal")
                deadline = time.monotonic() + 10
                while True:
                    await hub_nc.publish("down.1", b"ok")
                    await hub_nc.publish("other.literal", b"no")
                    await hub_nc.flush()
                    try:
                        m = await allowed.next_msg(timeout=0.3)
                        break
                    except nats.errors.TimeoutError:
                        if time.monotonic() > deadline:
                            raise
                assert m.data == b"ok"
                with pytest.raises(nats.errors.TimeoutError):
                    await forbidden.next_msg(timeout=0.3)
                assert not link.closed and "Permissions Violation" not in hub.log()
            finally:
                await hub_nc.close()
        finally:
            await nc.close()
            hub.stop()
