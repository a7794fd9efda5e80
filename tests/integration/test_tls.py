"""TLS on the client port with real nats-py clients (certificates made by tests/helpers/certs.py)."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import urllib.request

import nats
import pytest

from natsd.clock import ManualClock
from natsd.config.options import UserOptions
from natsd.config.tls import TLSOptions
from natsd.server.transport.tls import spki_sha256
from tests.helpers.certs import make_pki
from tests.helpers.inproc import running_server

pytestmark = pytest.mark.integration


@pytest.fixture
def pki(tmp_path):
    return make_pki(tmp_path / "pki")


def _tls(pki, **kw) -> TLSOptions:
    return TLSOptions(cert_file=pki.server_cert, key_file=pki.server_key, ca_file=pki.ca_file, **kw)


async def _roundtrip(nc) -> bytes:
    async def echo(m):
        await m.respond(m.data.upper())

    sub = await nc.subscribe("tls.echo", cb=echo)
    await nc.flush()
    r = await nc.request("tls.echo", b"hello", timeout=2)
    await sub.unsubscribe()
    return r.data


async def _raw_info(port: int) -> dict:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    line = await asyncio.wait_for(r.readline(), 2)
    w.close()
    return json.loads(line[5:])


async def test_tls_pubsub_request_headers_with_tls_option(pki):
    async with running_server(tls=_tls(pki)) as s:
        info = await _raw_info(s.port)
        assert info["tls_required"] is True and "tls_verify" not in info
        nc = await nats.connect(
            s.client_url, tls=pki.client_context(with_cert=False), tls_hostname="localhost", allow_reconnect=False
        )
        try:
            sub = await nc.subscribe("h.>")
            await nc.publish("h.1", b"payload", headers={"X-Id": "7"})
            m = await sub.next_msg(2)
            assert (m.subject, m.data, m.headers) == ("h.1", b"payload", {"X-Id": "7"})
            assert await _roundtrip(nc) == b"HELLO"
            # big payloads cross several TLS records both ways
            big = bytes(range(256)) * 3000
            await nc.publish("h.big", big)
            m = await sub.next_msg(2)
            assert m.data == big
        finally:
            await nc.close()
        assert all(c.closed or c.transport.get_extra_info("ssl_object") for c in s.clients.values())


async def test_tls_scheme_url_and_custom_hostname(pki):
    async with running_server(tls=_tls(pki)) as s:
        nc = await nats.connect(
            f"tls://localhost:{s.port}", tls=pki.client_context(with_cert=False), allow_reconnect=False
        )
        assert await _roundtrip(nc) == b"HELLO"
        [c] = _connz(s)
        assert c["type"] == "nats" and c["tls_version"] == "1.3" and "tls_first" not in c
        await nc.close()
        # 127.0.0.1 in the URL, the certificate's other DNS name checked instead
        nc = await nats.connect(
            f"tls://127.0.0.1:{s.port}",
            tls=pki.client_context(with_cert=False),
            tls_hostname="server.natsd.test",
            allow_reconnect=False,
        )
        assert await _roundtrip(nc) == b"HELLO"
        await nc.close()
        with pytest.raises(Exception):
            await nats.connect(
                f"tls://127.0.0.1:{s.port}",
                tls=pki.client_context(with_cert=False),
                tls_hostname="wrong.example",
                allow_reconnect=False,
                connect_timeout=2,
            )


async def test_tls_reconnect_after_server_restart(pki):
    async with running_server(tls=_tls(pki)) as s:
        port = s.port
        reconnected = asyncio.Event()

        async def on_reconnect():
            reconnected.set()

        nc = await nats.connect(
            f"tls://localhost:{port}",
            tls=pki.client_context(with_cert=False),
            reconnected_cb=on_reconnect,
            reconnect_time_wait=0.1,
            max_reconnect_attempts=100,
        )
        try:
            assert await _roundtrip(nc) == b"HELLO"
            await s.shutdown()
            async with running_server(tls=_tls(pki), port=port):
                await asyncio.wait_for(reconnected.wait(), 10)
                assert await _roundtrip(nc) == b"HELLO"
        finally:
            await nc.close()


def _connz(s) -> list[dict]:
    from natsd.server.monitoring.endpoints import MonitorServer

    return MonitorServer(s).connz({})["connections"]


async def test_handshake_first(pki):
    async with running_server(tls=_tls(pki, handshake_first=True)) as s:
        nc = await nats.connect(
            f"tls://localhost:{s.port}",
            tls=pki.client_context(with_cert=False),
            tls_handshake_first=True,
            allow_reconnect=False,
        )
        assert await _roundtrip(nc) == b"HELLO"
        [c] = _connz(s)
        assert (c["tls_version"], c["tls_first"]) == ("1.3", True)
        assert c["tls_cipher_suite"] in (
            "TLS_AES_256_GCM_SHA384",
            "TLS_AES_128_GCM_SHA256",
            "TLS_CHACHA20_POLY1305_SHA256",
        )
        await nc.close()
        # a client that waits for INFO gets nothing: TLS must come first
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(r.read(1), 0.3)
        w.close()


async def test_handshake_first_with_fallback_serves_both_kinds_of_client(pki):
    tls = _tls(pki, handshake_first=True, handshake_first_fallback_ns=50_000_000)
    async with running_server(tls=tls) as s:
        first = await nats.connect(
            f"tls://localhost:{s.port}",
            tls=pki.client_context(with_cert=False),
            tls_handshake_first=True,
            allow_reconnect=False,
        )
        later = await nats.connect(
            f"tls://localhost:{s.port}", tls=pki.client_context(with_cert=False), allow_reconnect=False
        )
        assert await _roundtrip(first) == b"HELLO"
        assert await _roundtrip(later) == b"HELLO"
        await first.close()
        await later.close()


async def test_plaintext_client_on_tls_port_is_closed_without_reply(pki):
    async with running_server(tls=_tls(pki)) as s:
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        assert (await r.readline()).startswith(b"INFO ")
        w.write(b'CONNECT {"verbose":false}\r\nPING\r\n')
        assert await asyncio.wait_for(r.read(), 2) == b""  # closed, nothing said (as nats-server)
        w.close()
        assert not s.clients
        # and a healthy TLS client is unaffected
        nc = await nats.connect(
            s.client_url, tls=pki.client_context(with_cert=False), tls_hostname="localhost", allow_reconnect=False
        )
        assert await _roundtrip(nc) == b"HELLO"
        await nc.close()


async def test_silent_client_dropped_after_tls_timeout(pki):
    clock = ManualClock()
    async with running_server(tls=_tls(pki, timeout_ns=500_000_000), clock=clock) as s:
        r, w = await asyncio.open_connection("127.0.0.1", s.port)
        await r.readline()
        await asyncio.sleep(0.05)
        assert len(s.clients) == 1
        clock.advance(400_000_000)
        assert len(s.clients) == 1
        clock.advance(200_000_000)
        assert await asyncio.wait_for(r.read(), 2) == b""
        assert len(s.clients) == 0
        w.close()


async def test_verify_requires_a_client_certificate_from_the_ca(pki):
    async with running_server(tls=_tls(pki, verify=True)) as s:
        info = await _raw_info(s.port)
        assert info["tls_verify"] is True
        nc = await nats.connect(f"tls://localhost:{s.port}", tls=pki.client_context(), allow_reconnect=False)
        assert await _roundtrip(nc) == b"HELLO"
        await nc.close()
        with pytest.raises(Exception):
            await nats.connect(
                f"tls://localhost:{s.port}",
                tls=pki.client_context(with_cert=False),
                allow_reconnect=False,
                connect_timeout=2,
            )
        other = pki.client_context(with_cert=False)
        other.load_cert_chain(pki.other_client_cert, pki.other_client_key)
        with pytest.raises(Exception):
            await nats.connect(f"tls://localhost:{s.port}", tls=other, allow_reconnect=False, connect_timeout=2)


async def test_verify_and_map_logs_in_the_certificate_user(tmp_path):
    pki = make_pki(tmp_path / "pki", client_emails=("alice@example.com",))
    users = [UserOptions(user="alice@example.com"), UserOptions(user="bob")]
    async with running_server(tls=_tls(pki, verify_and_map=True), users=users) as s:
        nc = await nats.connect(f"tls://localhost:{s.port}", tls=pki.client_context(), allow_reconnect=False)
        assert await _roundtrip(nc) == b"HELLO"
        assert [c.user for c in s.clients.values()] == ["alice@example.com"]
        await nc.close()
        nc = await nats.connect(f"tls://localhost:{s.port}", tls=pki.client_context(), allow_reconnect=False)
        opts = s.options
        s.reload(type(opts)(**{f: getattr(opts, f) for f in opts.__slots__}))  # a SIGHUP with the same config
        assert [c.user for c in s.clients.values() if not c.closed] == ["alice@example.com"]
        assert await _roundtrip(nc) == b"HELLO"
        await nc.close()
    # the subject DN maps too (RFC 2253 order, as nats-server prints it)
    users = [UserOptions(user="CN=client,O=natsd tests")]
    async with running_server(tls=_tls(pki, verify_and_map=True), users=users) as s:
        nc = await nats.connect(f"tls://localhost:{s.port}", tls=pki.client_context(), allow_reconnect=False)
        assert await _roundtrip(nc) == b"HELLO"
        await nc.close()
    # a certificate naming no configured user is refused
    async with running_server(tls=_tls(pki, verify_and_map=True), users=[UserOptions(user="carol")]) as s:
        with pytest.raises(Exception, match="Authorization Violation"):
            await nats.connect(f"tls://localhost:{s.port}", tls=pki.client_context(), allow_reconnect=False)


async def test_pinned_certs(pki):
    with open(pki.client_cert) as f:
        der = ssl.PEM_cert_to_DER_cert(f.read())
    good = spki_sha256(der)
    async with running_server(tls=_tls(pki, verify=True, pinned_certs={good})) as s:
        nc = await nats.connect(f"tls://localhost:{s.port}", tls=pki.client_context(), allow_reconnect=False)
        assert await _roundtrip(nc) == b"HELLO"
        await nc.close()
    async with running_server(tls=_tls(pki, verify=True, pinned_certs={"0" * 64})) as s:
        with pytest.raises(Exception):
            await nats.connect(
                f"tls://localhost:{s.port}", tls=pki.client_context(), allow_reconnect=False, connect_timeout=2
            )


def _peer_cert(port: int, pki) -> bytes:
    ctx = pki.client_context(with_cert=False)
    with socket.create_connection(("127.0.0.1", port), timeout=3) as raw:
        raw.recv(4096)  # INFO
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return s.getpeercert(binary_form=True)


async def test_reload_swaps_certificates_for_new_connections(pki, tmp_path):
    pki2 = make_pki(tmp_path / "pki2")  # same CA key, a newly issued server certificate
    async with running_server(tls=_tls(pki)) as s:
        nc = await nats.connect(
            f"tls://localhost:{s.port}", tls=pki.client_context(with_cert=False), allow_reconnect=False
        )
        before = await asyncio.to_thread(_peer_cert, s.port, pki)
        opts = s.options
        new = type(opts)(**{f: getattr(opts, f) for f in opts.__slots__})
        new.tls = TLSOptions(cert_file=pki2.server_cert, key_file=pki2.server_key, ca_file=pki2.ca_file)
        s.reload(new)
        after = await asyncio.to_thread(_peer_cert, s.port, pki)
        assert before != after
        with open(pki2.server_cert) as f:
            assert after == ssl.PEM_cert_to_DER_cert(f.read())
        assert await _roundtrip(nc) == b"HELLO"  # the established connection carries on
        await nc.close()


async def test_https_monitoring(pki):
    async with running_server(tls=_tls(pki), https_port=-1) as s:
        ctx = pki.client_context(with_cert=False)

        def get():
            with urllib.request.urlopen(f"https://localhost:{s.https_port}/varz", context=ctx, timeout=5) as r:
                return json.loads(r.read())

        varz = await asyncio.to_thread(get)
        assert varz["server_id"] == s.server_id
        assert (varz["tls_required"], varz["https_port"], varz["tls_timeout"]) == (True, s.https_port, 2)
        assert "tls_verify" not in varz


async def test_ports_file_names_the_secure_listeners(pki, tmp_path):
    import os

    from natsd.config.tls import WebsocketOptions

    ws = WebsocketOptions(port=-1, tls=_tls(pki))
    async with running_server(tls=_tls(pki), https_port=-1, websocket=ws, ports_file_dir=str(tmp_path)) as s:
        with open(tmp_path / f"natsd_{os.getpid()}.ports") as f:
            ports = json.load(f)
        assert ports == {
            "nats": [f"tls://127.0.0.1:{s.port}"],
            "monitoring": [f"https://127.0.0.1:{s.https_port}"],
            "websocket": [f"wss://127.0.0.1:{s.websocket_port}"],
        }
