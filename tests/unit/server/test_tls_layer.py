"""TlsLayer and HandshakeQueue without sockets: a fake transport below, a recording protocol above,
and a client ``SSLObject`` over memory BIOs playing the peer."""

from __future__ import annotations

import ssl

import pytest

from natsd.clock import ManualClock
from natsd.config.tls import TLSOptions, build_server_context
from natsd.server.tls import HandshakeQueue, TlsLayer, cert_identities
from tests.helpers.certs import make_pki

pytestmark = pytest.mark.unit


class FakeLoop:
    def __init__(self) -> None:
        self.soon: list = []

    def call_soon(self, fn, *args):
        self.soon.append((fn, args))

    def run_turn(self) -> None:
        todo, self.soon = self.soon, []
        for fn, args in todo:
            fn(*args)

    def run_all(self) -> None:
        while self.soon:
            self.run_turn()


class FakeTransport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = self.aborted = False

    def write(self, data) -> None:
        self.written += data

    def take(self) -> bytes:
        out, self.written = bytes(self.written), bytearray()
        return out

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 5555) if name == "peername" else default

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass


class Upper:
    """Stands in for ClientConnection: sends INFO when connected, records what it receives."""

    def __init__(self) -> None:
        self.transport = None
        self.received = bytearray()
        self.failed = None
        self.lost = False

    def connection_made(self, t) -> None:
        self.transport = t
        t.write(b"INFO {}\r\n")

    def data_received(self, data) -> None:
        self.received += data

    def eof_received(self):
        return False

    def connection_lost(self, exc) -> None:
        self.lost = True

    def tls_failed(self, message: str) -> None:
        self.failed = message


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _layer(pki, mode="after_info", **kw):
    ctx = build_server_context(TLSOptions(cert_file=pki.server_cert, key_file=pki.server_key))
    loop, clock, upper = FakeLoop(), ManualClock(), Upper()
    layer = TlsLayer(lambda: ctx, lambda: upper, clock, HandshakeQueue(loop), timeout_ns=1_000_000_000,
                     mode=mode, **kw)
    lower = FakeTransport()
    layer.connection_made(lower)
    return layer, lower, upper, loop, clock


def _client(pki):
    ctx = pki.client_context(with_cert=False)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    return ctx.wrap_bio(inc, out, server_hostname="localhost"), inc, out


def _pump(layer, lower, loop, client, cin, cout, rounds=10) -> None:
    for _ in range(rounds):
        try:
            client.do_handshake()
        except ssl.SSLWantReadError:
            pass
        if cout.pending:
            layer.data_received(cout.read())
        loop.run_all()
        data = lower.take()
        if data:
            cin.write(data)


def test_info_in_plaintext_then_handshake_then_app_data_both_ways(pki):
    layer, lower, upper, loop, _ = _layer(pki)
    assert lower.take() == b"INFO {}\r\n"
    client, cin, cout = _client(pki)
    _pump(layer, lower, loop, client, cin, cout)
    assert layer.established and client.version() in ("TLSv1.3", "TLSv1.2")
    client.write(b"PING\r\n" * 3000)  # several TLS records in one read
    layer.data_received(cout.read())
    assert bytes(upper.received) == b"PING\r\n" * 3000
    layer.write(b"PONG\r\n")
    cin.write(lower.take())
    assert client.read(100) == b"PONG\r\n"


def test_plaintext_first_record_is_refused_silently(pki):
    layer, lower, upper, loop, _ = _layer(pki)
    lower.take()
    layer.data_received(b'CONNECT {"verbose":false}\r\n')
    assert lower.aborted and lower.take() == b""
    assert upper.failed == "tls: first record does not look like a TLS handshake"


def test_handshake_timeout(pki):
    layer, lower, upper, loop, clock = _layer(pki)
    clock.advance(999_000_000)
    assert not lower.aborted
    clock.advance(2_000_000)
    assert lower.aborted and upper.failed == "TLS handshake error: i/o timeout"


def test_handshake_first_creates_the_connection_after_the_handshake(pki):
    layer, lower, upper, loop, _ = _layer(pki, mode="first")
    assert upper.transport is None and lower.take() == b""
    client, cin, cout = _client(pki)
    _pump(layer, lower, loop, client, cin, cout)
    assert upper.transport is layer
    assert client.read(100) == b"INFO {}\r\n"  # INFO went out encrypted


def test_auto_mode_falls_back_to_info_first(pki):
    layer, lower, upper, loop, clock = _layer(pki, mode="auto", fallback_ns=50_000_000)
    assert lower.take() == b""
    clock.advance(50_000_000)
    assert lower.take() == b"INFO {}\r\n"
    client, cin, cout = _client(pki)
    _pump(layer, lower, loop, client, cin, cout)
    assert layer.established


def test_handshakes_are_paced_per_loop_turn(pki):
    loop = FakeLoop()
    queue = HandshakeQueue(loop)
    ran = []

    class Step:
        def __init__(self, i):
            self.i = i

        def _do_handshake(self):
            ran.append(self.i)

    for i in range(10):
        queue.submit(Step(i))
    loop.run_turn()
    assert ran == list(range(HandshakeQueue.PER_TURN))
    loop.run_all()
    assert ran == list(range(10))


def test_cert_identities_order():
    cert = {"subject": ((("organizationName", "Acme"),), (("commonName", "alice"),)),
            "subjectAltName": (("DNS", "a.example"), ("email", "alice@example.com"), ("URI", "spiffe://x/alice"))}
    assert cert_identities(cert) == ["alice@example.com", "spiffe://x/alice", "a.example", "CN=alice,O=Acme"]
