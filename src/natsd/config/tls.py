"""TLS and WebSocket settings: typed options, their config blocks, and ``SSLContext`` building.

One :class:`TLSOptions` describes a TLS endpoint the way nats-server's ``tls {}`` block does; the
client port, the HTTPS monitoring port and the ``websocket {}`` listener each use one, and a later
leafnode ``remotes`` entry can use the same type with :func:`build_client_context`.

* :func:`parse_tls_block` / :func:`parse_websocket_block` read the config tree (keys and aliases as
  nats-server spells them, case-insensitive); errors are collected on the caller's context with
  the block's ``file:line:column``.
* :func:`build_server_context` turns options into an ``ssl.SSLContext``. Loading the files here (no
  sockets are involved) lets the config check report an unreadable file, a malformed certificate
  or a key that does not match as a config error, with nats-server's wording, before the server
  starts. The server builds its contexts again with the same function at start and on reload.

What the Python ``ssl`` module cannot express is approximated, and said so here:

* ``cipher_suites`` restrict TLS 1.2 suites only (Go's TLS does not let TLS 1.3 suites be configured
  either, so this matches the reference);
* ``curve_preferences``: ``ssl`` can set one ECDH curve, so the first NIST curve in the list is used
  (``X25519`` stays enabled by OpenSSL's defaults).
"""

from __future__ import annotations

import ssl
from dataclasses import field

from natsd.lazydataclass import dataclass
from typing import Any

__all__ = [
    "TLSOptions",
    "WebsocketOptions",
    "TLSConfigError",
    "build_server_context",
    "build_client_context",
    "parse_tls_block",
    "parse_websocket_block",
    "DEFAULT_TLS_TIMEOUT_NS",
    "DEFAULT_HANDSHAKE_FIRST_FALLBACK_NS",
]

SECOND_NS = 1_000_000_000
#: nats-server's TLS_TIMEOUT: a handshake must complete within this.
DEFAULT_TLS_TIMEOUT_NS = 2 * SECOND_NS
#: ``handshake_first: auto``: wait this long for a TLS ClientHello before sending INFO in plaintext.
DEFAULT_HANDSHAKE_FIRST_FALLBACK_NS = 50_000_000
#: WebSocket upgrade requests must be complete within this (nats-server's default handshake timeout).
DEFAULT_WS_HANDSHAKE_TIMEOUT_NS = 2 * SECOND_NS


class TLSConfigError(ValueError):
    """TLS settings that cannot be used (message in nats-server's words)."""


@dataclass(slots=True)
class TLSOptions:
    """A ``tls {}`` block. Durations in nanoseconds; ``pinned_certs`` are lowercase hex SHA-256
    digests of the peer certificate's DER SubjectPublicKeyInfo, as in nats-server."""

    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    verify: bool = False
    verify_and_map: bool = False
    insecure: bool = False
    timeout_ns: int = DEFAULT_TLS_TIMEOUT_NS
    min_version: str = ""  # "1.2" / "1.3"; "" = the library default (TLS 1.2)
    cipher_suites: list[str] = field(default_factory=list)
    curve_preferences: list[str] = field(default_factory=list)
    pinned_certs: set[str] = field(default_factory=set)
    handshake_first: bool = False
    # With handshake_first: after this long without a ClientHello, fall back to INFO first
    # (0 = never: TLS must come first).
    handshake_first_fallback_ns: int = 0
    pos: str = ""  # file:line:col of the block, for messages at start and reload

    @property
    def verify_clients(self) -> bool:
        return self.verify or self.verify_and_map


@dataclass(slots=True)
class WebsocketOptions:
    """A ``websocket {}`` block (``port`` 0 = no WebSocket listener, -1 = a random port)."""

    host: str = ""  # "" = the client host
    port: int = 0
    advertise: str = ""
    no_tls: bool = False
    tls: TLSOptions | None = None
    compression: bool = False
    same_origin: bool = False
    allowed_origins: list[str] = field(default_factory=list)
    # Name of a cookie carrying a user JWT. Parsed and kept; it takes effect once JWT (operator
    # mode) authentication exists in natsd.
    jwt_cookie: str = ""
    handshake_timeout_ns: int = DEFAULT_WS_HANDSHAKE_TIMEOUT_NS
    pos: str = ""


# -- Go names -> OpenSSL names ---------------------------------------------------------------

# Go (nats-server) cipher suite names -> OpenSSL names; "" for TLS 1.3 suites (not configurable).
CIPHER_SUITES = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    # TLS 1.3 suites: accepted (Go accepts the names) but not configurable, see the module doc.
    "TLS_AES_128_GCM_SHA256": "",
    "TLS_AES_256_GCM_SHA384": "",
    "TLS_CHACHA20_POLY1305_SHA256": "",
}
_CURVES = {
    "curvep256": "prime256v1",
    "curvep384": "secp384r1",
    "curvep521": "secp521r1",
    "x25519": "",
    "x25519mlkem768": "",
}
_VERSIONS = {
    "1.0": ssl.TLSVersion.TLSv1,
    "1.1": ssl.TLSVersion.TLSv1_1,
    "1.2": ssl.TLSVersion.TLSv1_2,
    "1.3": ssl.TLSVersion.TLSv1_3,
}


def _file_error(path: str, e: OSError) -> str:
    # Go's os.Open wording: "open <path>: no such file or directory".
    return f"open {path}: {(e.strerror or str(e)).lower()}"


def _has_pem(path: str, what: str) -> None:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TLSConfigError(f"error parsing X509 certificate/key pair: {_file_error(path, e)}") from None
    if b"-----BEGIN" not in data:
        raise TLSConfigError(
            f"error parsing X509 certificate/key pair: tls: failed to find any PEM data in {what} input"
        )


def _load_pair(ctx: ssl.SSLContext, tls: TLSOptions) -> None:
    _has_pem(tls.cert_file, "certificate")
    _has_pem(tls.key_file, "key")
    try:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    except ssl.SSLError as e:
        reason = (e.reason or str(e)).upper()
        if "MISMATCH" in reason:
            msg = "tls: private key does not match public key"
        elif "PEM" in reason or "ASN1" in reason or "NO_START_LINE" in reason or "X509" in reason:
            msg = f"tls: failed to parse certificate or key ({e.reason or e})"
        else:
            msg = f"tls: {e.reason or e}"
        raise TLSConfigError(f"error parsing X509 certificate/key pair: {msg}") from None
    except OSError as e:
        raise TLSConfigError(f"error parsing X509 certificate/key pair: {_file_error(tls.cert_file, e)}") from None


def _load_ca(ctx: ssl.SSLContext, ca_file: str) -> None:
    try:
        with open(ca_file, "rb"):
            pass
    except OSError as e:
        raise TLSConfigError(_file_error(ca_file, e)) from None
    try:
        ctx.load_verify_locations(cafile=ca_file)
    except (ssl.SSLError, ValueError):
        raise TLSConfigError("failed to parse root ca certificate") from None


def _apply_common(ctx: ssl.SSLContext, tls: TLSOptions) -> None:
    ctx.minimum_version = _VERSIONS.get(tls.min_version, ssl.TLSVersion.TLSv1_2)
    if tls.cipher_suites:
        names = [CIPHER_SUITES[c] for c in tls.cipher_suites if CIPHER_SUITES.get(c)]
        if names:
            try:
                ctx.set_ciphers(":".join(names))
            except ssl.SSLError:
                raise TLSConfigError("no usable cipher suites in cipher_suites") from None
    for c in tls.curve_preferences:
        name = _CURVES.get(c.lower())
        if name:
            ctx.set_ecdh_curve(name)
            break


def build_server_context(tls: TLSOptions) -> ssl.SSLContext:
    """An ``SSLContext`` for the server side of ``tls``; raises :class:`TLSConfigError`."""
    if not tls.cert_file:
        raise TLSConfigError("missing 'cert_file' in TLS configuration")
    if not tls.key_file:
        raise TLSConfigError("missing 'key_file' in TLS configuration")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_pair(ctx, tls)
    if tls.ca_file:
        _load_ca(ctx, tls.ca_file)
    if tls.verify_clients:
        ctx.verify_mode = ssl.CERT_REQUIRED
    _apply_common(ctx, tls)
    # Client-initiated TLS 1.2 renegotiation costs the server a full handshake on demand (a cheap
    # way to burn its CPU); Go's TLS refuses it too.
    ctx.options |= ssl.OP_NO_RENEGOTIATION
    return ctx


def build_client_context(tls: TLSOptions) -> ssl.SSLContext:
    """An ``SSLContext`` for dialing out with ``tls`` (for leafnode remotes and tests)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if tls.ca_file:
        _load_ca(ctx, tls.ca_file)
    else:
        ctx.load_default_certs()
    if tls.cert_file or tls.key_file:
        _load_pair(ctx, tls)
    if tls.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    _apply_common(ctx, tls)
    return ctx


# -- config tree ------------------------------------------------------------------------------
#
# ``ctx`` is natsd.config.options._Ctx (error/warn/unknown/unsupported and typed getters); it is
# passed in rather than imported so this module stays a leaf of options.py.

_UNSUPPORTED_TLS = frozenset(
    (
        "cert_store",
        "cert_match",
        "cert_match_by",
        "cert_match_skip_invalid",
        "ocsp_peer",
        "certs",
        "connection_rate_limit",
        "ca_certs_match",
        "verify_cert_and_check_known_urls",
    )
)


def _str_list(ctx, m, k) -> list[str] | None:
    v = m[k]
    if isinstance(v, str):
        return [v]
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return list(v)
    ctx.error(m.pos(k), f"{k}: expected a string or an array of strings")
    return None


def _seconds_or_duration(ctx, m, k) -> int | None:
    v = m[k]
    if isinstance(v, bool):
        ctx.error(m.pos(k), f"{k}: expected a number of seconds or a duration")
        return None
    if isinstance(v, (int, float)):
        return int(v * SECOND_NS)
    return ctx.duration(m, k)


def parse_tls_block(ctx, m, key: str, *, check_files: bool = True) -> TLSOptions | None:
    """Read ``m[key]`` (a ``tls {}`` map) into :class:`TLSOptions`; ``None`` after errors.

    With ``check_files`` the certificate, key and CA files are loaded once (as the reference
    does while parsing) so a bad file is reported at the block's position.
    """
    block = ctx.map_(m, key)
    if block is None:
        return None
    pos = m.pos(key)
    tls = TLSOptions(pos=str(pos) if pos is not None else "")
    errors_before = len(ctx.errors)
    for k in block:
        kl = k.lower()
        if kl in ("cert_file", "key_file", "ca_file"):
            setattr(tls, kl, ctx.str_(block, k) or "")
        elif kl in ("verify", "verify_and_map", "insecure"):
            b = ctx.bool_(block, k)
            if b is not None:
                setattr(tls, kl, b)
        elif kl == "timeout":
            d = _seconds_or_duration(ctx, block, k)
            if d is not None:
                tls.timeout_ns = d
        elif kl == "min_version":
            v = ctx.str_(block, k)
            if v is not None:
                if v not in ("1.2", "1.3"):
                    ctx.error(
                        block.pos(k),
                        f'unsupported TLS version: "{v}"'
                        if v not in _VERSIONS
                        else f"unsupported minimum TLS version: {v}",
                    )
                else:
                    tls.min_version = v
        elif kl == "cipher_suites":
            for c in _str_list(ctx, block, k) or []:
                if c not in CIPHER_SUITES:
                    ctx.error(block.pos(k), f"unrecognized cipher {c}")
                else:
                    tls.cipher_suites.append(c)
        elif kl == "curve_preferences":
            for c in _str_list(ctx, block, k) or []:
                if c.lower() not in _CURVES:
                    ctx.error(block.pos(k), f"unrecognized curve preference {c}")
                else:
                    tls.curve_preferences.append(c)
        elif kl == "pinned_certs":
            for c in _str_list(ctx, block, k) or []:
                c = c.lower()
                if len(c) != 64 or any(ch not in "0123456789abcdef" for ch in c):
                    ctx.error(block.pos(k), f"error parsing tls config, cert pin: {c} is not a valid sha256 hex")
                else:
                    tls.pinned_certs.add(c)
        elif kl == "handshake_first":
            _handshake_first(ctx, block, k, tls)
        elif kl in _UNSUPPORTED_TLS:
            ctx.unsupported(block, k)
        else:
            ctx.unknown(block, k)
    if len(ctx.errors) != errors_before:
        return None
    if check_files:
        try:
            build_server_context(tls)
        except TLSConfigError as e:
            ctx.error(pos, str(e))
            return None
    return tls


def _handshake_first(ctx, block, k: str, tls: TLSOptions) -> None:
    # true/false, "auto" (fall back to INFO first after 50ms), or a duration (that fallback delay).
    v = block[k]
    if isinstance(v, bool):
        tls.handshake_first = v
        return
    if isinstance(v, str):
        if v.lower() in ("auto", "auto_fallback"):
            tls.handshake_first = True
            tls.handshake_first_fallback_ns = DEFAULT_HANDSHAKE_FIRST_FALLBACK_NS
            return
        if v.lower() in ("true", "on", "yes"):
            tls.handshake_first = True
            return
        if v.lower() in ("false", "off", "no"):
            return
        d = ctx.duration(block, k)
        if d is not None:
            tls.handshake_first = True
            tls.handshake_first_fallback_ns = d
        return
    ctx.error(block.pos(k), f'error parsing tls config, unknown type for "{k}": {v!r}')


_UNSUPPORTED_WS = frozenset(
    (
        "authorization",
        "no_auth_user",
        "username",
        "password",
        "token",
        "users",
        "nkeys",
        "auth_timeout",
        "headers_as_cookies",
        "token_cookie",
        "user_cookie",
        "pass_cookie",
        "ping_interval",
    )
)


def parse_websocket_block(ctx, m, key: str, host_port) -> WebsocketOptions | None:
    """Read ``m[key]`` (``websocket {}``/``ws {}``); ``host_port`` is options' listen parser."""
    block = ctx.map_(m, key)
    if block is None:
        return None
    pos = m.pos(key)
    ws = WebsocketOptions(pos=str(pos) if pos is not None else "")
    for k in block:
        kl = k.lower()
        if kl == "listen":
            hp = host_port(ctx, block, k)
            if hp is not None:
                ws.host, ws.port = hp
        elif kl == "port":
            ws.port = ctx.int_(block, k) or 0
        elif kl in ("host", "net"):
            ws.host = ctx.str_(block, k) or ""
        elif kl == "advertise":
            ws.advertise = ctx.str_(block, k) or ""
        elif kl in ("no_tls", "compression", "same_origin"):
            b = ctx.bool_(block, k)
            if b is not None:
                setattr(ws, kl, b)
        elif kl == "tls":
            ws.tls = parse_tls_block(ctx, block, k)
        elif kl == "allowed_origins":
            ws.allowed_origins = _str_list(ctx, block, k) or []
            for o in ws.allowed_origins:
                if "://" not in o:
                    ctx.error(block.pos(k), f'unable to parse allowed origin: parse "{o}": invalid URI for request')
        elif kl == "jwt_cookie":
            ws.jwt_cookie = ctx.str_(block, k) or ""
        elif kl == "handshake_timeout":
            d = _seconds_or_duration(ctx, block, k)
            if d is not None:
                ws.handshake_timeout_ns = d
        elif kl in _UNSUPPORTED_WS:
            ctx.unsupported(block, k)
        else:
            ctx.unknown(block, k)
    if ws.port and ws.tls is None and not ws.no_tls:
        ctx.error(pos, "websocket requires TLS configuration")
    return ws


def tls_from_flags(values: dict[str, Any]) -> TLSOptions:
    """``--tls --tlscert --tlskey --tlscacert --tlsverify`` as nats-server combines them."""
    return TLSOptions(
        cert_file=values.get("cert_file", ""),
        key_file=values.get("key_file", ""),
        ca_file=values.get("ca_file", ""),
        verify=bool(values.get("verify", False)),
    )
