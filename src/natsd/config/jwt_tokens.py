"""nkeys and NATS JWTs as tokens: public keys, signatures, and a JWT's verified claims as a dict.

The part of :mod:`natsd.config.jwt` a server start needs (a configured user nkey is checked, a
CONNECT's nkey signature verified, an account name told from an account key): the typed claims
(:mod:`natsd.config.jwt`'s dataclasses, ~5 ms of a start to build) load only with a JWT
configuration or a JWT client (issue 31, start-up time). The formats are described in
:mod:`natsd.config.jwt`.
"""

from __future__ import annotations

import base64
import binascii
import re

# nacl and nkeys (PyNaCl, ~40 modules with libsodium) are imported where a signature or a key's
# checksum is checked: a server without nkeys or JWTs never needs them (issue 26, start-up time).

__all__ = [
    "is_public_nkey",
    "public_nkey_bytes",
    "JWTError",
    "decode",
    "verify",
    "is_public_key",
    "decode_sig",
    "extract_jwt",
    "claims_version",
]

# nkeys prefix bytes (first base32 character): operator O, account A, user U, server N, cluster C.
_PREFIX_BYTES = {"O": 14 << 3, "A": 0, "U": 20 << 3, "N": 13 << 3, "C": 2 << 3}


def public_nkey_bytes(key, kind: str = "") -> bytes | None:
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
    import nkeys

    if len(raw) != 35 or raw[0] != prefix or nkeys.crc16(bytearray(raw[:-2])) != int.from_bytes(raw[-2:], "little"):
        return None
    return raw[1:33]


def is_public_nkey(key, kind: str = "") -> bool:
    return public_nkey_bytes(key, kind) is not None


# (compiled by re's cache when a JWT is first looked for: start-up time, ADR 0015)
_JWT_RE = r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"


class JWTError(ValueError):
    """A token or key that does not decode or whose signature does not verify."""


def _b64decode(s: str) -> bytes:
    """base64url or standard base64, padded or not (clients differ: nats-py sends standard)."""
    s = s.strip()
    pad = "=" * (-len(s) % 4)
    try:
        if "-" in s or "_" in s:
            return base64.urlsafe_b64decode(s + pad)
        return base64.b64decode(s + pad, validate=True)
    except (binascii.Error, ValueError) as e:
        raise JWTError(f"bad base64: {e}") from None


def _raw_public_key(public: str, kind: str = "") -> bytes:
    """The 32 Ed25519 bytes of an nkey public key (checked prefix and CRC-16)."""
    raw = public_nkey_bytes(public, kind)
    if raw is None:
        raise JWTError("not a valid public nkey")
    return raw


def is_public_key(public: str, kind: str) -> bool:
    return is_public_nkey(public, kind)


def verify(public: str, data: bytes, sig: bytes) -> bool:
    """True when ``sig`` is ``public``'s Ed25519 signature of ``data``."""
    import nacl.exceptions
    import nacl.signing

    try:
        nacl.signing.VerifyKey(_raw_public_key(public)).verify(data, sig)
        return True
    except (JWTError, nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, ValueError, TypeError):
        return False


def decode_sig(sig) -> bytes | None:
    """CONNECT's ``sig``: base64url (nats.go, nats.js) or standard base64 (nats-py); None if bad."""
    if not isinstance(sig, str) or not sig:
        return None
    try:
        return _b64decode(sig)
    except JWTError:
        return None


def extract_jwt(text: str) -> str:
    """The first JWT in ``text`` (a bare token, or a file with ``-----BEGIN ...`` armour)."""
    m = re.search(_JWT_RE, text)
    if m is None:
        raise JWTError("no JWT found")
    return m.group(0)


def decode(token: str) -> dict:
    """Verify ``token``'s signature against its ``iss`` key and return the claims."""
    if not isinstance(token, str):
        raise JWTError("JWT must be a string")
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise JWTError("expected 3 chunks")
    import json  # (json loads with the first JWT: start-up time, ADR 0015)

    try:
        header = json.loads(_b64decode(parts[0]))
        claims = json.loads(_b64decode(parts[1]))
    except (ValueError, RecursionError) as e:  # bad UTF-8/JSON, or JSON nested beyond reason
        raise JWTError(f"bad JSON: {e}") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise JWTError("header and claims must be objects")
    if str(header.get("typ", "")).upper() != "JWT":
        raise JWTError(f"not supported type {header.get('typ')!r}")
    if header.get("alg") not in ("ed25519-nkey", "ed25519"):
        raise JWTError(f"unexpected {header.get('alg')!r} algorithm")
    nats = claims.get("nats")
    if not isinstance(nats, dict):
        nats = claims["nats"] = {}
    version = claims_version(claims)
    if version > 2:
        raise JWTError("JWT was generated by a newer version")
    # v1 signed the claims chunk alone, v2 signs "header.claims" (the Go library's Decode picks by
    # the claims' version, whatever the header's alg says).
    signed = parts[1] if version <= 1 else f"{parts[0]}.{parts[1]}"
    iss = claims.get("iss")
    if not isinstance(iss, str) or not verify(iss, signed.encode(), _b64decode(parts[2])):
        raise JWTError(f"claim failed V{1 if version <= 1 else 2} signature verification")
    for k in ("iat", "exp", "nbf"):
        v = claims.get(k)
        if v is not None and (type(v) is not int):
            raise JWTError(f"{k} must be an integer")
    if version == 1:
        _migrate_v1(claims)
    return claims


def claims_version(claims: dict) -> int:
    """The JWT format version, as the Go library (v2 ``identifier.Version``) reads it: a top-level
    ``type`` marks a v1 token (v1 kept ``type``, ``tags`` and ``issuer_account`` beside ``iss``);
    otherwise ``nats.version`` (absent: 0, which no claim type accepts)."""
    if isinstance(claims.get("type"), str) and claims["type"]:
        return 1
    v = (claims.get("nats") or {}).get("version")
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


# A v1 account's limits that survive the move to v2 (NatsLimits and AccountLimits); the Go
# library zeroes the JetStream limits of every v1 account (v1 had none).
_V1_ACCOUNT_LIMITS = ("subs", "data", "payload", "imports", "exports", "wildcards", "conn", "leaf", "disallow_bearer")


def _migrate_v1(claims: dict) -> None:
    """A v1 token's claims in the v2 layout the typed decoders read (the Go library's
    ``migrateV1`` for operators, accounts and users): ``type``/``tags``/``issuer_account`` move
    into ``nats``; an account keeps only its connection limits (no JetStream); a user's
    deprecated ``max`` must be absent or -1, and its absent limits are unlimited."""
    nats = claims["nats"]
    if claims["type"] == "activation" and "type" in nats:
        nats.setdefault("kind", nats["type"])  # a v1 activation's nats.type was the export's type
    nats["type"] = claims["type"]
    for k in ("tags", "issuer_account"):
        if k in claims and k not in nats:
            nats[k] = claims[k]
    kind = claims["type"]
    if kind == "account":
        lim = nats.get("limits") if isinstance(nats.get("limits"), dict) else {}
        nats["limits"] = {k: v for k, v in lim.items() if k in _V1_ACCOUNT_LIMITS}
        for k in ("identity", "tiered_limits", "default_permissions", "mappings", "authorization", "trace"):
            nats.pop(k, None)  # (v2-only fields: a v1 token carrying them is not what v1 produced)
    elif kind == "user":
        mx = nats.pop("max", -1)
        if mx != -1:
            raise JWTError("jwtV1 user: deprecated Max/Times in jwtV2")
        for k in ("subs", "data", "payload"):  # v1 users are unlimited unless they say otherwise (as
            nats.setdefault(k, -1)  # nats-server serves them: a v2 user's absent limit is 0)
    nats["version"] = 1
