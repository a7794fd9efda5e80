"""TLS on a connection: a sans-IO ``ssl.SSLObject`` driven from ``data_received``.

:class:`TlsLayer` (a :class:`~natsd.server.transport.layer.Layer`) encrypts what the protocol above writes
and decrypts what arrives, with two ``ssl.MemoryBIO`` buffers. Doing it ourselves instead of
``loop.start_tls`` gives the control the NATS client port needs:

* **INFO before TLS** (``mode="after_info"``): the first write of the protocol above (its INFO)
  goes out in plaintext, then the handshake starts: nats-server's default upgrade;
* **TLS first** (``mode="first"``): the handshake starts at once and the protocol above is only
  created after it (``handshake_first: true``, and every ``wss://`` connection);
* **auto** (``mode="auto"``, ``handshake_first: <duration>``): wait that long for a ClientHello; if
  none comes, fall back to INFO first;
* a client whose first byte is not a TLS handshake record (0x16), e.g. a plaintext ``CONNECT``,
  is closed at once without a reply, as nats-server does ("first record does not look like a TLS
  handshake"); a handshake that does not finish within ``timeout`` is dropped;
* ``pinned_certs``: the SHA-256 of the client certificate's SubjectPublicKeyInfo must be listed.

A handshake step costs about half a millisecond of CPU (an ECDHE key exchange and a signature);
failures on the first record cost nothing of it. No task or thread is used per connection: the
steps run one after another on the :class:`HandshakeQueue`'s single worker thread (OpenSSL releases
the GIL while it computes), so that CPU is spent on the second core and a flood of bad or half-done
handshakes delays other handshakes rather than the traffic of established clients. While a step
runs, the ``SSLObject`` and its input ``MemoryBIO`` belong to the worker: bytes that arrive in the
meantime are held and written into the BIO when the step is back on the loop.

:class:`TlsContexts` keeps the current ``SSLContext`` of each listener so a reload (SIGHUP) swaps
certificates for new connections without touching established ones.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, cast

from natsd.config.tls import CIPHER_SUITES, TLSConfigError, TLSOptions, build_server_context
from natsd.server.auth.authenticator import AuthResult, Authenticator
from natsd.server.transport.layer import Layer
from natsd.server.log import logger
from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Clock, Timer

__all__ = [
    "TlsLayer",
    "TlsContexts",
    "HandshakeQueue",
    "connz_fields",
    "REASON_TLS_HANDSHAKE",
    "spki_sha256",
    "cert_identities",
    "map_certificate_user",
]

#: The /connz close reason of a failed handshake (nats-server's spelling).
REASON_TLS_HANDSHAKE = "TLS Handshake Failure"

_HANDSHAKE_RECORD = 0x16
_WANT_READ = object()  # a handshake step's outcome: OpenSSL needs the peer's next flight
_READ_SIZE = 256 * 1024

# States.
_WAIT_FIRST = 0  # auto mode: waiting for a ClientHello or the fallback delay
_PLAIN_INFO = 1  # the next write (INFO) goes out in plaintext, then the handshake
_HANDSHAKE = 2
_OPEN = 3
_CLOSED = 4


def spki_sha256(der_cert: bytes) -> str:
    """Hex SHA-256 of a certificate's DER SubjectPublicKeyInfo (the ``pinned_certs`` format)."""
    import hashlib  # (OpenSSL's digests, with pinned certificates only: start-up time, ADR 0015)

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_der_x509_certificate(der_cert)
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(spki).hexdigest()


class _Upper(Protocol):
    """What the layer uses of the protocol above it (a ClientConnection) when the handshake fails."""

    def tls_failed(self, message: str) -> None: ...


class TlsLayer(Layer):
    """The server side of TLS on one connection (see the module docstring).

    ``context`` is called once per connection for the current ``SSLContext``; ``make_upper``
    builds the protocol above; ``handshakes`` paces the handshake work (:class:`HandshakeQueue`).
    A failed handshake is reported to the protocol above, if there is one yet, through its
    ``tls_failed(message)``.
    """

    __slots__ = (
        "_context",
        "_make_upper",
        "_clock",
        "_timeout_ns",
        "_mode",
        "_fallback_ns",
        "_pinned",
        "_state",
        "_sslobj",
        "_in",
        "_out",
        "_pending",
        "_timer",
        "_seen_first",
        "_handshakes",
        "tls_first",
        "_stepping",
        "_held",
    )

    def __init__(
        self,
        context: Callable[[], ssl.SSLContext],
        make_upper: Callable[[], asyncio.Protocol],
        clock: "Clock",
        handshakes: "HandshakeQueue",
        *,
        timeout_ns: int,
        mode: str = "after_info",
        fallback_ns: int = 0,
        pinned: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        super().__init__()
        self._handshakes = handshakes
        self.tls_first = False  # the handshake came before INFO (handshake_first, wss)
        self._context = context
        self._make_upper = make_upper
        self._clock = clock
        self._timeout_ns = timeout_ns
        self._mode = mode
        self._fallback_ns = fallback_ns
        self._pinned = pinned
        self._state = _HANDSHAKE
        # the TLS object and its BIOs, made by connection_made() (every other method runs after it)
        self._sslobj: ssl.SSLObject
        self._in: ssl.MemoryBIO
        self._out: ssl.MemoryBIO
        self._pending: bytearray | None = None  # upper writes held until the handshake is done
        self._timer: Timer | None = None
        self._seen_first = False
        self._stepping = False  # a handshake step is on the worker thread (it owns _sslobj and _in)
        self._held: list[bytes] | None = None  # bytes that arrived during that step

    @classmethod
    def for_options(
        cls,
        tls: TLSOptions,
        context: Callable[[], ssl.SSLContext],
        make_upper: Callable[[], asyncio.Protocol],
        clock: "Clock",
        handshakes: "HandshakeQueue",
    ) -> "TlsLayer":
        """A layer configured by a port's ``tls {}`` block (:class:`natsd.config.tls.TLSOptions`):
        ``handshake_first`` picks the mode (TLS first; with a fallback delay, either), else the
        upgrade follows the plaintext INFO."""
        if not tls.handshake_first:
            mode = "after_info"
        else:
            mode = "auto" if tls.handshake_first_fallback_ns > 0 else "first"
        return cls(
            context,
            make_upper,
            clock,
            handshakes,
            timeout_ns=tls.timeout_ns,
            mode=mode,
            fallback_ns=tls.handshake_first_fallback_ns,
            pinned=tls.pinned_certs,
        )

    # -- setup ------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.lower = cast(asyncio.Transport, transport)  # a stream connection's
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._sslobj = self._context().wrap_bio(self._in, self._out, server_side=True)
        self._timer = self._clock.call_later(self._timeout_ns, self._handshake_timeout)
        if self._mode == "after_info":
            self._state = _PLAIN_INFO
            self.start_upper(self._make_upper())
        elif self._mode == "auto":
            self._state = _WAIT_FIRST
            self._fallback_timer()
        else:
            self._state = _HANDSHAKE

    def _fallback_timer(self) -> None:
        # The handshake timer is re-armed by the fallback: the timeout counts from the INFO.
        self._cancel_timer()
        self._timer = self._clock.call_later(self._fallback_ns, self._fallback)

    def _fallback(self) -> None:
        self._timer = None
        if self._state != _WAIT_FIRST:
            return
        self._state = _PLAIN_INFO
        self._timer = self._clock.call_later(self._timeout_ns, self._handshake_timeout)
        self.start_upper(self._make_upper())

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # -- input ------------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        state = self._state
        if state == _OPEN:
            self._in.write(data)
            self._read_app_data()
            return
        if state == _CLOSED:
            return
        if not self._seen_first:
            self._seen_first = True
            if data[0] != _HANDSHAKE_RECORD:
                self._fail("tls: first record does not look like a TLS handshake")
                return
            self.tls_first = self.upper is None  # no INFO went out before this handshake
            if state == _WAIT_FIRST:
                self._state = state = _HANDSHAKE
                self._cancel_timer()
                self._timer = self._clock.call_later(self._timeout_ns, self._handshake_timeout)
        if self._stepping:  # the worker thread is reading _in: hold the bytes until it is done
            if self._held is None:
                self._held = []
            self._held.append(data)
            return
        self._in.write(data)
        if state == _HANDSHAKE:  # (in _PLAIN_INFO the handshake starts once INFO is out)
            self._handshakes.submit(self)

    def _handshake_step(self) -> object:
        """On the worker thread: one ``do_handshake``; the outcome goes back to the loop."""
        try:
            self._sslobj.do_handshake()
        except ssl.SSLWantReadError:
            return _WANT_READ
        except (ssl.SSLError, ValueError) as e:
            return e
        return None

    def _step_done(self, outcome: object) -> None:
        """On the loop: the worker's step is back (``None`` done, ``_WANT_READ``, or the error)."""
        self._stepping = False
        held, self._held = self._held, None
        if held:
            self._in.write(b"".join(held))
        if self._state != _HANDSHAKE:
            return  # closed (or failed, or timed out) while the step ran
        if outcome is _WANT_READ:
            self._flush_out()
            if held:
                self._handshakes.submit(self)
            return
        if outcome is not None:
            self._flush_out()  # the alert, if OpenSSL produced one
            self._fail(f"TLS handshake error: {getattr(outcome, 'reason', None) or outcome}")
            return
        if self._pinned and not self._pin_ok():
            return
        self._cancel_timer()
        self._state = _OPEN
        self._flush_out()
        logger.debug("TLS handshake complete: %s, %s", self._sslobj.version(), (self._sslobj.cipher() or ("",))[0])
        if self.upper is None:
            self.start_upper(self._make_upper())
        pending, self._pending = self._pending, None
        if pending and not self._closing:
            self.write(pending)
        if self._in.pending:
            self._read_app_data()

    def _pin_ok(self) -> bool:
        der = self._sslobj.getpeercert(binary_form=True)
        if der is None or spki_sha256(der) not in self._pinned:
            if self.lower is not None:
                _reset(self.lower)  # the client's handshake is done: fail it loudly (see _reset)
            self._fail("TLS handshake error: certificate not pinned")
            return False
        return True

    def _read_app_data(self) -> None:
        # OpenSSL hands out one TLS record per read, and a peer that flushes often (nats-server
        # does) sends records of a few hundred bytes: this loop runs once per record. The C
        # object's read skips the ``ssl.SSLObject.read`` wrapper (about a microsecond a call);
        # same arguments, same exceptions.
        sslobj = self._sslobj
        read = getattr(sslobj, "_sslobj", sslobj).read
        chunks = []
        try:
            while True:
                chunk = read(_READ_SIZE)
                if not chunk:  # b"" (or SSLZeroReturnError): the client sent close_notify
                    raise ssl.SSLZeroReturnError
                chunks.append(chunk)
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:  # close_notify: the client is done
            self._deliver(chunks)
            self._flush_out()
            if self.upper is not None:
                self.upper.eof_received()
            self.close()
            return
        except ssl.SSLError as e:
            logger.debug("TLS read error: %s", e)
            self._deliver(chunks)
            self.abort()
            return
        self._deliver(chunks)
        if self._out.pending:  # e.g. TLS 1.3 key updates answered by OpenSSL
            self._flush_out()

    def _deliver(self, chunks: list) -> None:
        if chunks and self.upper is not None:
            # One hand-off per read keeps the parser's batching (many operations per call).
            self.upper.data_received(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    # -- output -----------------------------------------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        state = self._state
        if state == _OPEN:
            try:
                self._sslobj.write(data)
            except ssl.SSLError as e:
                logger.debug("TLS write error: %s", e)
                self.abort()
                return
            lower = self.lower
            assert lower is not None  # set by connection_made()
            lower.write(self._out.read())
        elif state == _PLAIN_INFO:
            # The INFO of the upgrade-after-INFO mode; the handshake follows.
            lower = self.lower
            assert lower is not None  # set by connection_made()
            lower.write(data)
            self._state = _HANDSHAKE
            if self._in.pending:
                self._handshakes.submit(self)
        elif state != _CLOSED:
            if self._pending is None:
                self._pending = bytearray()
            self._pending += data

    def _flush_out(self) -> None:
        if self._out.pending and self.lower is not None and not self.lower.is_closing():
            self.lower.write(self._out.read())

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self._sslobj
        if name == "peercert":
            return self._sslobj.getpeercert() if self._state == _OPEN else default
        if name == "cipher":
            return self._sslobj.cipher() if self._state == _OPEN else default
        return super().get_extra_info(name, default)

    @property
    def established(self) -> bool:
        return self._state == _OPEN

    # -- closing ----------------------------------------------------------------------------------

    def close(self) -> None:
        if self._state == _OPEN and not self._closing:
            try:
                self._sslobj.unwrap()  # queues our close_notify
            except (ssl.SSLError, ValueError):
                pass
            self._flush_out()
        self._closing = True
        self._state = _CLOSED
        self._cancel_timer()
        if self.lower is not None:
            self.lower.close()

    def abort(self) -> None:
        self._state = _CLOSED
        self._cancel_timer()
        super().abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._state = _CLOSED
        self._cancel_timer()
        super().connection_lost(exc)

    def _handshake_timeout(self) -> None:
        self._timer = None
        if self._state in (_HANDSHAKE, _PLAIN_INFO, _WAIT_FIRST):
            self._fail("TLS handshake error: i/o timeout")

    def _fail(self, message: str) -> None:
        """A failed handshake: no reply (nothing can be said in plaintext), log, close."""
        self._state = _CLOSED
        self._cancel_timer()
        peer = self.lower.get_extra_info("peername") if self.lower is not None else None
        up = cast("_Upper | None", self.upper)
        if up is not None:
            up.tls_failed(message)  # logs with its prefix and records the close reason
        else:
            logger.debug("%s - %s", f"{peer[0]}:{peer[1]}" if peer else "?", message)
        self._closing = True
        if self.lower is not None:
            self.lower.abort()


def _reset(transport: asyncio.BaseTransport) -> None:
    """Make the coming close a TCP reset (SO_LINGER 0), whatever is still unread.

    A pinning failure is found after OpenSSL finished the handshake (Python's ``ssl`` has no verify
    callback, so no alert can be sent as nats-server's does), and a plain close is a FIN or a reset depending on
    whether the client's next bytes (its CONNECT
    right after its Finished) had arrived yet. A client reading a FIN in the middle of its connect
    (nats-py) may treat it as a quiet end rather than a failure; a reset fails it every time, as
    nats-server's alert does."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_0)
        except OSError:
            pass


_LINGER_0 = struct.pack("ii", 1, 0)


class HandshakeQueue:
    """Runs handshake steps on one worker thread, one at a time, in arrival order.

    A step (``SSLObject.do_handshake``) is mostly OpenSSL computing an ECDHE key exchange and a
    signature, about half a millisecond, with the GIL released. On the event loop a flood of new
    connections would hold the loop that long per step and delay every established client; on
    the worker the loop only moves bytes and the crypto runs on the other core. One worker is
    enough (the machine this targets has two cores) and keeps the order. Each layer has at most
    one step queued or running, so the queue is bounded by the number of connections, and a
    handshake that times out while waiting finds its layer closed and costs nothing.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, pool: "Executor | None" = None) -> None:
        self._loop = loop
        # the worker (started with the first TLS handshake); tests pass one that runs on their fake loop
        self._pool: Executor | None = pool

    def submit(self, layer: TlsLayer) -> None:
        if layer._stepping:
            return  # its step is running; what arrived meanwhile is fed when it is back
        layer._stepping = True
        pool = self._pool
        if pool is None:
            pool = self._pool = ThreadPoolExecutor(1, thread_name_prefix="natsd-tls")
        pool.submit(self._run, layer)

    def _run(self, layer: TlsLayer) -> None:  # worker thread
        outcome = layer._handshake_step() if layer._state == _HANDSHAKE else _WANT_READ
        try:
            self._loop.call_soon_threadsafe(layer._step_done, outcome)
        except RuntimeError:
            pass  # the loop is closed: the server is gone

    def close(self) -> None:
        """Stop the worker (server shutdown); steps not started are dropped."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


# -- contexts per listener, reloadable ------------------------------------------------------------


class TlsContexts:
    """The current ``SSLContext`` of each TLS listener, rebuilt on reload.

    ``get(name)`` is what each new connection calls (so a reload affects new connections only).
    For listeners whose context is fixed when they start (HTTPS monitoring uses asyncio's own
    TLS), :meth:`reload` loads the new certificate into the existing context instead.
    """

    def __init__(self) -> None:
        self._ctx: dict[str, ssl.SSLContext] = {}
        self._opts: dict[str, TLSOptions] = {}
        self._in_place: set[str] = set()

    def add(self, name: str, tls: TLSOptions, *, in_place: bool = False) -> ssl.SSLContext:
        ctx = build_server_context(tls)
        self._ctx[name] = ctx
        self._opts[name] = tls
        if in_place:
            self._in_place.add(name)
        return ctx

    def get(self, name: str) -> ssl.SSLContext:
        return self._ctx[name]

    def getter(self, name: str) -> Callable[[], ssl.SSLContext]:
        return lambda: self._ctx[name]

    def reload(self, name: str, tls: TLSOptions | None) -> None:
        """Rebuild ``name`` from new options; on error keep the old context and log."""
        if name not in self._ctx or tls is None:
            return
        try:
            new = build_server_context(tls)
            if name in self._in_place:
                self._ctx[name].load_cert_chain(tls.cert_file, tls.key_file)
            else:
                self._ctx[name] = new
            self._opts[name] = tls
        except (TLSConfigError, ssl.SSLError, OSError) as e:
            logger.error("TLS reload of %s failed, keeping the previous certificates: %s", name, e)


# -- verify_and_map ---------------------------------------------------------------------------------

# Short names of RFC 2253 / Go's pkix.Name.String() for the attributes ssl.getpeercert() reports.
_RDN = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
    "postalCode": "POSTALCODE",
    "serialNumber": "SERIALNUMBER",
}


def _dn(subject: tuple) -> str:
    # getpeercert() lists RDNs in certificate order; RFC 2253 (and Go) prints them reversed.
    parts = []
    for rdn in reversed(subject):
        parts.append("+".join(f"{_RDN.get(k, k)}={v}" for k, v in rdn))
    return ",".join(parts)


def cert_identities(peercert: dict | None) -> list[str]:
    """The names ``verify_and_map`` tries, in nats-server's order: e-mail SANs, URI SANs,
    DNS SANs, then the subject DN (RFC 2253)."""
    if not peercert:
        return []
    sans = peercert.get("subjectAltName", ())
    out = [v for k, v in sans if k == "email"]
    out += [v for k, v in sans if k == "URI"]
    out += [v for k, v in sans if k == "DNS"]
    subject = peercert.get("subject")
    if subject:
        out.append(_dn(subject))
    return out


def map_certificate_user(auth: Authenticator, peercert: dict | None) -> AuthResult:
    """``verify_and_map``: the configured user whose name is one of the certificate's identities
    (:func:`cert_identities`); a failed :class:`~natsd.server.auth.authenticator.AuthResult` when none is."""
    for name in cert_identities(peercert):
        u = auth.users.get(name)
        if u is not None:
            return AuthResult(True, u.user, u.account or "$G", auth.perms.get(u.user))
    return AuthResult(False, "")


# -- /connz ------------------------------------------------------------------------------------------

_GO_CIPHER_NAMES = {v: k for k, v in CIPHER_SUITES.items() if v}


def connz_fields(transport: asyncio.BaseTransport | None) -> dict:
    """What /connz says about a connection's transport, in nats-server's spelling: ``type``
    ``websocket`` for WebSocket clients; ``tls_version`` (``"1.3"``), ``tls_cipher_suite`` (Go's
    suite names) and ``tls_first`` for TLS ones."""
    out: dict = {}
    if transport is None:
        return out
    if getattr(transport, "info_overrides", None) is not None:
        out["type"] = "websocket"
    sslobj = transport.get_extra_info("ssl_object")
    if sslobj is not None:
        try:
            version, cipher = sslobj.version(), sslobj.cipher()
        except (ValueError, ssl.SSLError):
            return out
        if version:
            out["tls_version"] = version.removeprefix("TLSv")
        if cipher:
            out["tls_cipher_suite"] = _GO_CIPHER_NAMES.get(cipher[0], cipher[0])
        if isinstance(transport, TlsLayer) and transport.tls_first:
            out["tls_first"] = True
    return out
