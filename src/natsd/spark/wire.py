"""A minimal, blocking NATS client for the Spark connector's hot paths.

Why not nats-py here: Spark calls ``read()``/``write()`` in plain Python worker processes with no
event loop, and nats-py's per-message ``Msg`` objects and futures cap a pull/push reader at
15-60k msg/s (see ``../shared/reference/spark-connector.md`` §3.1). This module speaks the NATS
text protocol directly over one socket, so the reader and writer can parse with ``bytes.find``
and slicing and keep per-message work to a few operations.

Wire formats used (all as nats-server spells them)::

    client -> server
      CONNECT {json}\\r\\n                       handshake (verbose off, headers on, no_responders on)
      PING\\r\\n / PONG\\r\\n
      SUB <subject> <sid>\\r\\n
      UNSUB <sid>\\r\\n
      PUB <subject> [reply] <#bytes>\\r\\n<payload>\\r\\n
      HPUB <subject> [reply] <#hdr> <#total>\\r\\n<NATS/1.0\\r\\nK: V\\r\\n\\r\\n><payload>\\r\\n
    server -> client
      INFO {json}\\r\\n, +OK, -ERR '<text>', PING, PONG
      MSG <subject> <sid> [reply] <#bytes>\\r\\n<payload>\\r\\n
      HMSG <subject> <sid> [reply] <#hdr> <#total>\\r\\n<headers><payload>\\r\\n

Header blocks start with ``NATS/1.0`` optionally followed by `` <status> <description>``
(``100 Idle Heartbeat``, ``100 FlowControl Request``, ``503`` no responders, ...), then
``Key: Value`` lines, then an empty line.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import time
from dataclasses import dataclass, field
from urllib.parse import urlparse

from natsd.nuid import nuid
from natsd.redact import redact

__all__ = [
    "ConnectOptions",
    "NatsError",
    "NoRespondersError",
    "SyncConnection",
    "parse_headers",
    "encode_headers",
    "header_pairs_raw",
    "JSApiError",
]

CRLF = b"\r\n"
_MAX_CONTROL_LINE = 4096


class NatsError(Exception):
    """A protocol-level failure (connection refused, ``-ERR``, timeout)."""


class NoRespondersError(NatsError):
    """A request got the server's ``503`` status: nothing is subscribed (no stream on the subject)."""


class JSApiError(NatsError):
    """A ``$JS.API`` reply carried ``{"error": {"code", "err_code", "description"}}``."""

    def __init__(self, code: int, err_code: int, description: str):
        super().__init__(f"{description} (code={code}, err_code={err_code})")
        self.code = code
        self.err_code = err_code
        self.description = description


@dataclass(frozen=True)
class ConnectOptions:
    """Where and how to connect; picklable so it can travel inside Spark partitions.

    ``servers`` is a comma-separated list of ``nats://host:port`` (or ``tls://``) URLs; each is
    tried in order. URL user info (``nats://u:p@h``) is honoured like nats-py does.
    """

    servers: str = "nats://127.0.0.1:4222"
    user: str | None = None
    # Secrets stay out of repr(): Spark logs partitions and plans, and tracebacks show arguments.
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    creds: str | None = None
    name: str = "natsd-spark"
    connect_timeout: float = 10.0
    tls_ca: str | None = None
    tls_cert: str | None = None  # client certificate (PEM) for servers that verify clients
    tls_key: str | None = None
    # A bare user nkey seed (``SU...``) or its file; CONNECT carries the public nkey and a signature.
    nkey_seed: str | None = field(default=None, repr=False)
    # The JetStream API subject prefix: ``$JS.API`` for the local domain, ``$JS.<domain>.API``
    # to reach another domain's JetStream across a leafnode link (what nats-py's ``domain=`` does).
    api_prefix: str = "$JS.API"
    extra: dict = field(default_factory=dict)

    def urls(self) -> list[str]:
        out = []
        for raw in self.servers.split(","):
            raw = raw.strip()
            if not raw:
                continue
            if "://" not in raw:
                raw = "nats://" + raw
            out.append(raw)
        if not out:
            raise ValueError("option 'servers' is empty")
        return out


def parse_headers(block: bytes) -> tuple[int, str, list[tuple[str, str]]]:
    """Parse a NATS header block into ``(status, description, [(key, value), ...])``.

    Order and repeated keys are kept (NATS headers are multi-valued). ``status`` is 0 when the
    first line is a plain ``NATS/1.0``.
    """
    lines = block.decode("utf-8", "replace").split("\r\n")
    first = lines[0]
    status = 0
    desc = ""
    rest = first[8:].strip() if first.startswith("NATS/1.0") else ""
    if rest:
        code, _, desc = rest.partition(" ")
        try:
            status = int(code)
        except ValueError:
            status = 0
    out = []
    for line in lines[1:]:
        if not line:
            continue
        k, sep, v = line.partition(":")
        if sep:
            out.append((k.strip(), v.strip()))
    return status, desc, out


def header_pairs_raw(block: bytes) -> list[tuple[str, bytes]]:
    """The ``Key: Value`` pairs of a header block with values as the bytes on the wire (Kafka's
    BINARY header values); order and repeated keys kept, status line skipped."""
    out = []
    for line in block.split(CRLF)[1:]:
        k, sep, v = line.partition(b":")
        if sep:
            out.append((k.strip().decode("utf-8", "replace"), v.strip()))
    return out


def encode_headers(pairs) -> bytes:
    """Encode ``[(key, value), ...]`` as a NATS/1.0 header block (ends with an empty line)."""
    parts = [b"NATS/1.0\r\n"]
    for k, v in pairs:
        parts.append(f"{k}: {v}\r\n".encode())
    parts.append(CRLF)
    return b"".join(parts)


def _sign_nonce_with_creds(creds_path: str, nonce: str) -> tuple[str, str]:
    """Return ``(jwt, signature)`` for a ``.creds`` file; needs the optional ``nkeys`` package."""
    try:
        import nkeys
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise NatsError("option 'creds' needs the 'nkeys' package (pip install nkeys)") from exc
    text = open(creds_path, encoding="utf-8").read()
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("-----BEGIN"):
            i += 1
            body = []
            while i < len(lines) and not lines[i].startswith("------END") and not lines[i].startswith("-----END"):
                if lines[i].strip():
                    body.append(lines[i].strip())
                i += 1
            blocks.append("".join(body))
        i += 1
    if len(blocks) < 2:
        raise NatsError(f"creds file {creds_path!r}: expected a JWT and an NKEY seed block")
    kp = nkeys.from_seed(blocks[1].encode())
    sig = base64.urlsafe_b64encode(kp.sign(nonce.encode())).decode().rstrip("=")
    return blocks[0], sig


def tls_context(opts: ConnectOptions) -> ssl.SSLContext:
    """The client TLS context of both data paths and the planner: ``tlsCa`` verifies the server,
    ``tlsCert``/``tlsKey`` present a client certificate (servers with ``verify: true``)."""
    ctx = ssl.create_default_context(cafile=opts.tls_ca)
    if opts.tls_ca is None and os.environ.get("NATSD_SPARK_TLS_INSECURE"):
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if opts.tls_cert:
        ctx.load_cert_chain(opts.tls_cert, opts.tls_key)
    return ctx


def seed_text(seed_or_path: str) -> str:
    """A seed given inline (``SU...``) or as a file holding one (nats-py's ``nkeys_seed``)."""
    text = seed_or_path.strip()
    if text.startswith("S") and "/" not in text and not os.path.exists(text):
        return text
    with open(text, encoding="utf-8") as f:
        for line in f:
            if line.strip().startswith("S"):
                return line.strip()
    raise NatsError("option 'nkey': the file holds no nkey seed (a line starting with 'S')")


def sign_nonce_with_seed(seed_or_path: str, nonce: str) -> tuple[str, str]:
    """``(public nkey, signature of the server's nonce)`` for a bare nkey seed (needs ``nkeys``)."""
    try:
        import nkeys
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise NatsError("option 'nkey' needs the 'nkeys' package (pip install nkeys)") from exc
    kp = nkeys.from_seed(seed_text(seed_or_path).encode())
    sig = base64.urlsafe_b64encode(kp.sign(nonce.encode())).decode().rstrip("=")
    return kp.public_key.decode(), sig


class SyncConnection:
    """One blocking NATS connection with a tiny buffered reader.

    Not thread-safe; one per task. The request/reply helper multiplexes replies on one wildcard
    inbox subscription (sid 1), like nats-py's ``_INBOX.<nuid>.*``.
    """

    RECV_SIZE = 1 << 20

    def __init__(self, opts: ConnectOptions):
        self.opts = opts
        self.sock: socket.socket | None = None
        self.info: dict = {}
        self.buf = b""
        self.pos = 0  # parse position in buf; consumed bytes are dropped only when refilling
        self.inbox_prefix = "_INBOX." + nuid()
        self._next_sid = 2
        self._req_counter = 0
        self._inbox_subscribed = False

    # ------------------------------------------------------------------ connect
    def connect(self) -> "SyncConnection":
        errors = []
        for url in self.opts.urls():
            try:
                self._connect_one(url)
                return self
            except (OSError, NatsError) as exc:
                errors.append(redact(f"{url}: {exc}"))
                self._close_socket()
        raise NatsError("could not connect to any server: " + "; ".join(errors))

    def _connect_one(self, url: str) -> None:
        u = urlparse(url)
        host = u.hostname or "127.0.0.1"
        port = u.port or 4222
        sock = socket.create_connection((host, port), timeout=self.opts.connect_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Large kernel buffers let the server push a whole flow-control window without stalling.
        for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            try:
                sock.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)
            except OSError:  # pragma: no cover - kernel limits
                pass
        self.sock = sock
        self.buf = b""
        self.pos = 0
        line = self._read_line(self.opts.connect_timeout)
        if not line.startswith(b"INFO "):
            raise NatsError(f"expected INFO, got {line[:80]!r}")
        self.info = json.loads(line[5:])
        tls = u.scheme in ("tls", "wss") or self.info.get("tls_required")
        if tls:
            self.sock = tls_context(self.opts).wrap_socket(sock, server_hostname=host)
        connect = {
            "verbose": False,
            "pedantic": False,
            "tls_required": bool(tls),
            "name": self.opts.name,
            "lang": "python3",
            "version": "natsd-spark",
            "protocol": 1,
            "echo": True,
            "headers": True,
            "no_responders": True,
        }
        user = self.opts.user or u.username
        password = self.opts.password or u.password
        if self.opts.token:
            connect["auth_token"] = self.opts.token
        elif user and not password and not self.opts.creds:
            connect["auth_token"] = user  # nats://token@host, as nats-py reads it
        elif user:
            connect["user"] = user
            connect["pass"] = password or ""
        if self.opts.creds:
            jwt, sig = _sign_nonce_with_creds(self.opts.creds, self.info.get("nonce", ""))
            connect["jwt"] = jwt
            connect["sig"] = sig
        elif self.opts.nkey_seed:
            connect["nkey"], connect["sig"] = sign_nonce_with_seed(self.opts.nkey_seed, self.info.get("nonce", ""))
        self.sock.sendall(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        while True:
            line = self._read_line(self.opts.connect_timeout)
            if line == b"PONG":
                break
            if line.startswith(b"-ERR"):
                raise NatsError(line.decode(errors="replace"))
            # +OK, INFO updates and PINGs are fine during the handshake.
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
        self.sock.settimeout(None)

    def _close_socket(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None

    def close(self) -> None:
        """Flush nothing, just close: callers wanting delivery call :meth:`flush` first."""
        self._close_socket()

    def close_after_send(self) -> None:
        """Half-close (FIN after everything sent) then close, without reading what is queued.

        Used after fire-and-forget requests (consumer deletes) while deliveries may still be
        queued towards us: the server reads our last bytes before it sees the FIN, and we do not
        parse megabytes of deliveries we no longer want just to see a PONG.
        """
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        self._close_socket()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ low-level IO
    def _fill(self, timeout: float | None) -> None:
        assert self.sock is not None
        self.sock.settimeout(timeout)
        try:
            chunk = self.sock.recv(self.RECV_SIZE)
        except socket.timeout as exc:
            raise TimeoutError("timed out waiting for the server") from exc
        if not chunk:
            raise NatsError("connection closed by the server")
        rest = self.buf[self.pos :]
        self.buf = rest + chunk if rest else chunk
        self.pos = 0

    def _read_line(self, timeout: float | None) -> bytes:
        while True:
            i = self.buf.find(CRLF, self.pos)
            if i >= 0:
                line = self.buf[self.pos : i]
                self.pos = i + 2
                return line
            if len(self.buf) - self.pos > _MAX_CONTROL_LINE * 16:
                raise NatsError("control line too long")
            self._fill(timeout)

    def take_buffered(self) -> bytes:
        """Hand over what was received but not parsed yet, for a caller that reads the socket itself.

        nats-server sends an INFO right after the handshake's PONG, and over TLS that line can be split
        between two records: a caller that started from an empty buffer would parse the rest of it
        as a protocol line of its own.
        """
        rest = self.buf[self.pos :]
        self.buf = b""
        self.pos = 0
        return rest

    def send(self, data: bytes) -> None:
        assert self.sock is not None
        self.sock.sendall(data)

    def new_sid(self) -> int:
        sid = self._next_sid
        self._next_sid += 1
        return sid

    def subscribe(self, subject: str, sid: int | None = None) -> int:
        sid = self.new_sid() if sid is None else sid
        self.send(f"SUB {subject} {sid}\r\n".encode())
        return sid

    def unsubscribe(self, sid: int) -> None:
        self.send(f"UNSUB {sid}\r\n".encode())

    def publish(self, subject: str, payload: bytes = b"", reply: str = "", headers=None) -> None:
        self.send(encode_pub(subject, payload, reply, encode_headers(headers) if headers else b""))

    def next_op(self, timeout: float | None):
        """Read one server operation.

        Returns ``("MSG", subject, sid, reply, header_bytes, payload)`` for MSG/HMSG (header_bytes
        is ``b""`` for MSG), or ``(op_name, line)`` for the others. PINGs are answered here.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            pos = self.pos
            buf = self.buf
            i = buf.find(CRLF, pos)
            if i < 0:
                self._fill(None if deadline is None else max(0.001, deadline - time.monotonic()))
                continue
            line = buf[pos:i]
            head = line[:4]
            if head == b"HMSG" or head == b"MSG ":
                parts = line.split(b" ")
                if head == b"HMSG":
                    if len(parts) == 6:
                        _, subj, sid, reply, hlen_b, tlen_b = parts
                    else:
                        _, subj, sid, hlen_b, tlen_b = parts
                        reply = b""
                    hlen = int(hlen_b)
                    tlen = int(tlen_b)
                else:
                    if len(parts) == 5:
                        _, subj, sid, reply, tlen_b = parts
                    else:
                        _, subj, sid, tlen_b = parts
                        reply = b""
                    hlen = 0
                    tlen = int(tlen_b)
                end = i + 2 + tlen
                if len(buf) < end + 2:
                    self._fill(None if deadline is None else max(0.001, deadline - time.monotonic()))
                    continue
                body = buf[i + 2 : end]
                self.pos = end + 2
                return ("MSG", subj, int(sid), reply, body[:hlen], body[hlen:])
            self.pos = i + 2
            if line == b"PING":
                self.send(b"PONG\r\n")
                continue
            if line.startswith(b"-ERR"):
                raise NatsError(line.decode(errors="replace"))
            if line == b"+OK" or line == b"PONG" or line.startswith(b"INFO"):
                return (line[:4].decode(), line)
            raise NatsError(f"unexpected protocol line {line[:80]!r}")

    def flush(self, timeout: float = 10.0) -> None:
        """Round-trip a PING so everything sent before has been processed by the server."""
        self.send(b"PING\r\n")
        deadline = time.monotonic() + timeout
        while True:
            op = self.next_op(max(0.001, deadline - time.monotonic()))
            if op[0] == "PONG":
                return
            # Anything else arriving now (stray replies) is irrelevant to a flush.

    # ------------------------------------------------------------------ request/reply
    def _ensure_inbox(self) -> None:
        if not self._inbox_subscribed:
            self.subscribe(self.inbox_prefix + ".*", sid=1)
            self._inbox_subscribed = True

    def new_reply(self) -> str:
        self._ensure_inbox()
        self._req_counter += 1
        return f"{self.inbox_prefix}.{self._req_counter}"

    def request(self, subject: str, payload: bytes = b"", timeout: float = 10.0, headers=None):
        """Send a request and wait for its reply; returns ``(header_bytes, payload)``.

        Messages for other subscriptions that arrive meanwhile are dropped, so only use this
        while no other subscription is active.
        """
        reply = self.new_reply()
        want = reply.encode()
        self.publish(subject, payload, reply, headers)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply to {subject} within {timeout}s")
            try:
                op = self.next_op(left)
            except TimeoutError:
                raise TimeoutError(f"no reply to {subject} within {timeout}s") from None
            if op[0] == "MSG" and op[2] == 1 and op[1] == want:
                hdr, body = op[4], op[5]
                if hdr and not body:
                    status, desc, _ = parse_headers(hdr)
                    if status == 503:
                        raise NoRespondersError(f"no responders for {subject}")
                return hdr, body

    def js_request(self, subject: str, body: dict | None = None, timeout: float = 10.0) -> dict:
        """A ``$JS.API`` request; raises :class:`JSApiError` on an error reply."""
        payload = b"" if body is None else json.dumps(body).encode()
        try:
            _, resp = self.request(subject, payload, timeout)
        except NoRespondersError as exc:
            raise NatsError(f"JetStream not enabled or not reachable ({subject})") from exc
        data = json.loads(resp)
        err = data.get("error")
        if err:
            raise JSApiError(err.get("code", 0), err.get("err_code", 0), err.get("description", ""))
        return data


def encode_pub(subject: str, payload: bytes, reply: str = "", header_block: bytes = b"") -> bytes:
    """Encode one PUB (or HPUB when ``header_block`` is non-empty)."""
    r = f" {reply}" if reply else ""
    if header_block:
        hl = len(header_block)
        return f"HPUB {subject}{r} {hl} {hl + len(payload)}\r\n".encode() + header_block + payload + CRLF
    return f"PUB {subject}{r} {len(payload)}\r\n".encode() + payload + CRLF
