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

Operator and preloaded account JWTs are decoded and their signatures checked here
(:mod:`natsd.config.jwt`), so ``natsd -t`` reports a bad one at file:line:column as the reference
does; which operator signed an account is checked when it is used (:mod:`natsd.server.auth.trust`).
"""

from __future__ import annotations

import os
from dataclasses import field

from natsd.lazydataclass import dataclass
from typing import Any

from natsd.config.jwt_tokens import JWTError, extract_jwt, is_public_nkey
from natsd.config.parser import ConfigList, ConfigMap

__all__ = ["ResolverOptions", "TrustOptions", "parse_trust_key", "TRUST_KEYS"]


@dataclass(slots=True)
class ResolverOptions:
    """The account resolver (``resolver``): memory or full (a JWT directory)."""

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
TRUST_KEYS = frozenset(
    _OPERATOR_KEYS
    + ("trusted", "trusted_keys", "resolver", "account_resolver", "accounts_resolver", "resolver_preload")
)


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
    try:
        return extract_jwt(content)
    except JWTError:
        ctx.error(pos, f"error parsing operator JWT: no JWT found in {text}")
        return None


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
    # (the typed claims load with a trust configuration only: issue 31, start-up time)
    from natsd.config.jwt import decode_account, decode_operator

    kl = key.lower()
    v = m[key]
    pos = m.pos(key)
    if kl in _OPERATOR_KEYS:
        for text, tpos in _strings(ctx, v, pos, "operator"):
            jwt = _operator_jwt(ctx, text, tpos, config_dir)
            if jwt is not None:
                try:
                    decode_operator(jwt)
                except JWTError as e:
                    ctx.error(tpos, f"error parsing operator JWT: {e}")
                    continue
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
                try:
                    claims = decode_account(jwt)
                except JWTError:
                    ctx.error(v.pos(acc), "invalid account JWT")
                    continue
                if claims.subject != acc:
                    ctx.error(
                        v.pos(acc), f"resolver_preload: key {acc} does not match the JWT's account {claims.subject}"
                    )
                    continue
                trust.resolver_preload[acc] = jwt
