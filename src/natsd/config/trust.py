"""Decentralized-auth settings: ``operator``, ``trusted_keys``, ``resolver``, ``resolver_preload``.

As nats-server:

* ``operator`` (aliases ``operators``, ``root``, ``roots``, ``root_operators``, ``root_operator``):
  one or a list of operator JWTs, each given inline (``eyJ...``) or as the path of a file holding
  it (``nsc`` writes ``.jwt`` files, optionally with ``-----BEGIN ...`` armour);
* ``trusted_keys`` (alias ``trusted``): operator public keys (``O...``) trusted without a JWT;
* ``resolver``: ``MEMORY`` (accounts only from ``resolver_preload``) or a map
  ``{ type: full, dir: <path>, allow_delete: bool, limit: n }`` (accounts stored as
  ``<dir>/<account public key>.jwt`` and updated through ``$SYS.REQ.CLAIMS.UPDATE``); ``cache``
  and ``URL(...)`` resolvers need an account server natsd does not talk to: refused;
* ``resolver_preload``: ``{ <account public key>: <account JWT> }``.

Signatures are checked when the server starts (:mod:`natsd.server.trust`); here the values are
only read, with errors at file:line:column. Public nkeys are checked here (prefix, base32, CRC-16)
so a mistyped key in ``nkey:``/``trusted_keys`` is a config error, as in the reference.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from dataclasses import dataclass, field
from typing import Any

from natsd.config.parser import ConfigList, ConfigMap

__all__ = ["ResolverOptions", "TrustOptions", "parse_trust_key", "is_public_nkey", "public_nkey_bytes",
           "TRUST_KEYS"]

_JWT_RE = re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
# nkeys prefix bytes (first base32 character): operator O, account A, user U, server N, cluster C.
_PREFIX_BYTES = {"O": 14 << 3, "A": 0, "U": 20 << 3, "N": 13 << 3, "C": 2 << 3}


def _crc16(data: bytes) -> int:
    """CRC-16/XMODEM, the checksum at the end of every nkey."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        crc &= 0xFFFF
    return crc


def public_nkey_bytes(key: Any, kind: str = "") -> bytes | None:
    """The 32 Ed25519 bytes of a public nkey (``kind``: required first letter), or None."""
    if not isinstance(key, str) or len(key) != 56 or (kind and not key.startswith(kind)):
        return None
    prefix = _PREFIX_BYTES.get(key[0])
    if prefix is None:
        return None
    try:
        raw = base64.b32decode(key)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 35 or raw[0] != prefix or _crc16(raw[:-2]) != int.from_bytes(raw[-2:], "little"):
        return None
    return raw[1:33]


def is_public_nkey(key: Any, kind: str = "") -> bool:
    return public_nkey_bytes(key, kind) is not None


@dataclass(slots=True)
class ResolverOptions:
    type: str = "memory"  # "memory" | "full"
    dir: str = ""
    allow_delete: bool = False
    limit: int = 1000


@dataclass(slots=True)
class TrustOptions:
    """What the trust keys of a config file say (``ServerOptions.trust``)."""

    operators: list[str] = field(default_factory=list)  # operator JWTs (file contents resolved)
    operator_sources: list[str] = field(default_factory=list)  # "file:line:col" of each, for errors
    trusted_keys: list[str] = field(default_factory=list)
    resolver: ResolverOptions | None = None
    resolver_preload: dict[str, str] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return bool(self.operators or self.trusted_keys)


_OPERATOR_KEYS = ("operator", "operators", "root", "roots", "root_operators", "root_operator")
TRUST_KEYS = frozenset(_OPERATOR_KEYS + ("trusted", "trusted_keys", "resolver", "account_resolver",
                                         "accounts_resolver", "resolver_preload"))


def _strings(ctx, v: Any, pos, what: str) -> list[tuple[str, Any]]:
    if isinstance(v, str):
        return [(v, pos)]
    if isinstance(v, list):
        out = []
        for i, x in enumerate(v):
            xpos = v.pos(i) if isinstance(v, ConfigList) else pos
            if isinstance(x, str):
                out.append((x, xpos))
            else:
                ctx.error(xpos, f"{what} entries must be strings")
        return out
    ctx.error(pos, f"{what} must be a string or an array of strings")
    return []


def _operator_jwt(ctx, text: str, pos, config_dir: str) -> str | None:
    if text.startswith("eyJ"):
        return text
    path = text if os.path.isabs(text) or not config_dir else os.path.join(config_dir, text)
    try:
        with open(path, encoding="utf-8") as f:
            content = f.read()
    except OSError as e:
        ctx.error(pos, f"error parsing operator JWT: {e.strerror or e}: {text}")
        return None
    m = _JWT_RE.search(content)
    if m is None:
        ctx.error(pos, f"error parsing operator JWT: no JWT found in {text}")
        return None
    return m.group(0)


def _resolver(ctx, v: Any, pos) -> ResolverOptions | None:
    if isinstance(v, str):
        if v.strip().upper() == "MEMORY":
            return ResolverOptions("memory")
        if v.strip().upper().startswith("URL("):
            ctx.error(pos, "URL account resolvers are not supported by natsd (use MEMORY or full)")
            return None
        ctx.error(pos, f"error parsing resolver, unknown resolver {v!r}")
        return None
    if not isinstance(v, ConfigMap):
        ctx.error(pos, "resolver must be MEMORY, URL(...) or a map")
        return None
    r = ResolverOptions("full")
    kind = ""
    for k in v:
        kl = k.lower()
        kpos = v.pos(k)
        x = v[k]
        if kl == "type":
            kind = str(x).lower()
        elif kl == "dir":
            if isinstance(x, str):
                r.dir = x
            else:
                ctx.error(kpos, "resolver dir must be a string")
        elif kl == "allow_delete":
            r.allow_delete = bool(x)
        elif kl == "limit":
            if isinstance(x, int) and not isinstance(x, bool):
                r.limit = x
            else:
                ctx.error(kpos, "resolver limit must be an integer")
        elif kl in ("interval", "timeout", "ttl", "hard_delete"):
            pass  # cluster sync / cache timing: nothing to synchronise with on one server
        else:
            ctx.unknown(v, k)
    if kind not in ("full", "cache"):
        ctx.error(pos, f"resolver type must be full or cache, got {kind!r}")
        return None
    if kind == "cache":
        ctx.error(pos, "the cache resolver needs a full resolver elsewhere in a cluster; use type: full")
        return None
    if not r.dir:
        r.dir = os.path.join(os.getcwd(), "jwt")  # nats-server's default directory
    return r


def parse_trust_key(ctx, trust: TrustOptions, m: ConfigMap, key: str, config_dir: str) -> None:
    """Apply one top-level trust key (one of :data:`TRUST_KEYS`) onto ``trust``."""
    kl = key.lower()
    v = m[key]
    pos = m.pos(key)
    if kl in _OPERATOR_KEYS:
        for text, tpos in _strings(ctx, v, pos, "operator"):
            jwt = _operator_jwt(ctx, text, tpos, config_dir)
            if jwt is not None:
                trust.operators.append(jwt)
                trust.operator_sources.append(str(tpos) if tpos is not None else "")
    elif kl in ("trusted", "trusted_keys"):
        for text, tpos in _strings(ctx, v, pos, "trusted_keys"):
            if not is_public_nkey(text, "O"):
                ctx.error(tpos, f"trust key {text!r} required to be a valid public operator nkey")
            else:
                trust.trusted_keys.append(text)
    elif kl in ("resolver", "account_resolver", "accounts_resolver"):
        trust.resolver = _resolver(ctx, v, pos)
    elif kl == "resolver_preload":
        if not isinstance(v, ConfigMap):
            ctx.error(pos, "resolver_preload should be a map of account public keys to JWTs")
            return
        for acc in v:
            jwt = v[acc]
            if not is_public_nkey(acc, "A"):
                ctx.error(v.pos(acc), f"resolver_preload key {acc!r} is not a valid public account nkey")
            elif not isinstance(jwt, str):
                ctx.error(v.pos(acc), "resolver_preload values must be JWT strings")
            else:
                trust.resolver_preload[acc] = jwt
