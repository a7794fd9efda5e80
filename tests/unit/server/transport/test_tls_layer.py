"""TlsLayer and HandshakeQueue without sockets: a fake transport below, a recording protocol above,
and a client ``SSLObject`` over memory BIOs playing the peer."""

from __future__ import annotations

import ssl

import pytest

from natsd.clock import ManualClock
from natsd.config.tls import TLSOptions, build_server_context
from natsd.server.transport.tls import HandshakeQueue, TlsLayer, cert_identities
from tests.helpers.certs import make_pki

pytestmark = pytest.mark.unit


class FakeLoop:
    def __init__(self) -> None:
        self.soon: list = []

    def call_soon(self, fn, *args):
        self.soon.append((fn, args))

    call_soon_threadsafe = call_soon

    def run_turn(self) -> None:
        todo, self.soon = self.soon, []
        for fn, args in todo:
            fn(*args)

    def run_all(self) -> None:
        while self.soon:
            self.run_turn()


class FakePool:
    """The handshake worker, run as the next turn of the fake loop (so a test sees the step in flight)."""

    def __init__(self, loop: FakeLoop) -> None:
        self.loop = loop
        self.submitted = 0

    def submit(self, fn, *args):
        self.submitted += 1
        self.loop.call_soon(fn, *args)

    def shutdown(self, wait=True, cancel_futures=False):
        pass


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
    layer = TlsLayer(
        lambda: ctx,
        lambda: upper,
        clock,
        HandshakeQueue(loop, FakePool(loop)),
        timeout_ns=1_000_000_000,
        mode=mode,
        **kw,
    )
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


def test_bytes_arriving_during_a_step_are_held_and_fed_after_it(pki):
    """While the worker runs a step it owns the input BIO: what arrives meanwhile waits, then a new
    step is queued for it (and only one step per layer is ever in flight)."""
    layer, lower, upper, loop, _ = _layer(pki)
    pool = layer._handshakes._pool
    lower.take()
    client, cin, cout = _client(pki)
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    hello = cout.read()
    layer.data_received(hello[:10])
    layer.data_received(hello[10:])  # the first step has not run: held, no second submit
    assert pool.submitted == 1 and layer._held == [hello[10:]]
    loop.run_all()  # step 1 saw 10 bytes (wants more), then the held rest, step 2 answers
    assert pool.submitted == 2 and layer._held is None
    cin.write(lower.take())
    client.do_handshake()  # the server's flight was complete
    layer.data_received(cout.read())
    loop.run_all()
    assert layer.established


def test_a_step_that_returns_after_a_close_does_nothing(pki):
    layer, lower, upper, loop, _ = _layer(pki)
    lower.take()
    client, cin, cout = _client(pki)
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    layer.data_received(cout.read())
    layer.abort()
    loop.run_all()
    assert lower.take() == b"" and not layer.established


def test_the_worker_is_a_real_thread_and_stops_with_close(pki):
    import asyncio
    import threading

    async def main():
        ctx = build_server_context(TLSOptions(cert_file=pki.server_cert, key_file=pki.server_key))
        upper = Upper()
        queue = HandshakeQueue(asyncio.get_running_loop())
        layer = TlsLayer(lambda: ctx, lambda: upper, ManualClock(), queue, timeout_ns=10**9)
        lower = FakeTransport()
        layer.connection_made(lower)
        lower.take()
        client, cin, cout = _client(pki)
        seen = set()
        for _ in range(200):
            try:
                client.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
            if cout.pending:
                layer.data_received(cout.read())
            await asyncio.sleep(0.005)
            seen |= {t.name for t in threading.enumerate()}
            data = lower.take()
            if data:
                cin.write(data)
        layer.data_received(cout.read())
        for _ in range(200):
            if layer.established:
                break
            await asyncio.sleep(0.005)
        assert layer.established
        assert any(n.startswith("natsd-tls") for n in seen)
        queue.close()

    asyncio.run(main())


def test_cert_identities_order():
    cert = {
        "subject": ((("organizationName", "Acme"),), (("commonName", "alice"),)),
        "subjectAltName": (("DNS", "a.example"), ("email", "alice@example.com"), ("URI", "spiffe://x/alice")),
    }
    assert cert_identities(cert) == ["alice@example.com", "spiffe://x/alice", "a.example", "CN=alice,O=Acme"]
