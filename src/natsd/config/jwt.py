"""nkeys and NATS JWTs: decode, verify, and read the claims natsd enforces.

A format module (sans-IO), in ``config`` so that ``natsd -t`` can check operator and preloaded
account JWTs with file:line:column errors; the server's trust code uses the same functions.

Keys are the ``nkeys`` encoding (base32 of prefix byte + 32-byte Ed25519 key + CRC-16): ``O``
operator, ``A`` account, ``U`` user, ``N`` server. The ``nkeys`` package (what nats-py signs with)
has no "public key only" constructor, so :func:`verify` decodes the public key
(:func:`public_nkey_bytes`: prefix and CRC-16) and checks the signature with
PyNaCl, the Ed25519 implementation ``nkeys`` itself is built on; no cryptography is written here.

A NATS JWT (v2 layout, https://docs.nats.io/ "JWT" reference) is three base64url parts
(unpadded) joined by dots::

    base64url(header) "." base64url(claims) "." base64url(ed25519(header "." claims))

with header ``{"typ":"JWT","alg":"ed25519-nkey"}`` (v1 tokens say ``"alg":"ed25519"``). The
signature is made by the key named in the claims' ``iss``; nothing in the payload is used before
that signature has been checked against it (:func:`decode`). Claims: ``sub`` (subject key),
``iss``, ``iat``, ``exp``/``nbf`` (unix seconds, optional), ``name``, ``jti``, and ``nats`` with
``type`` (``operator``/``account``/``user``) and the type's fields (see the dataclasses below).

The keys and tokens are :mod:`natsd.config.jwt_tokens` (re-exported here): a server start needs
them, the typed claims only with a JWT configuration or client (issue 31, start-up time).
"""

from __future__ import annotations

from dataclasses import field

# The keys and tokens themselves (what a start needs) are natsd.config.jwt_tokens', re-exported here.
from natsd.lazydataclass import dataclass
from natsd.config.jwt_tokens import (
    JWTError,
    claims_version,
    decode,
    decode_sig,
    extract_jwt,
    is_public_key,
    is_public_nkey,
    public_nkey_bytes,
    verify,
)


__all__ = [
    "is_public_nkey",
    "public_nkey_bytes",
    "limit_of",
    "JWTError",
    "decode",
    "verify",
    "is_public_key",
    "OperatorClaims",
    "AccountClaims",
    "UserClaims",
    "Export",
    "Import",
    "decode_sig",
    "decode_operator",
    "decode_account",
    "decode_user",
    "extract_jwt",
    "claims_version",
]

# -- typed claims -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Base:
    """The claims every JWT has."""

    subject: str
    issuer: str
    name: str
    issued_at: int
    expires: int  # 0: never
    not_before: int
    raw: str = field(repr=False, default="")
    tags: list[str] = field(default_factory=list)  # "key:value" tags (scoped signing-key templates)

    def expired(self, now_s: float) -> bool:
        return bool(self.expires) and now_s >= self.expires

    def not_yet_valid(self, now_s: float) -> bool:
        return bool(self.not_before) and now_s < self.not_before


def _base(claims: dict, raw: str) -> dict:
    return dict(
        subject=str(claims.get("sub", "")),
        issuer=claims["iss"],
        name=str(claims.get("name", "")),
        issued_at=claims.get("iat") or 0,
        expires=claims.get("exp") or 0,
        not_before=claims.get("nbf") or 0,
        raw=raw,
        tags=_tags(claims),
    )


def _tags(claims: dict) -> list[str]:
    """The claims' tags: ``nats.tags`` (v2), or beside ``iss`` (v1)."""
    nats = claims.get("nats")
    t = nats.get("tags") if isinstance(nats, dict) and "tags" in nats else claims.get("tags")
    return [x for x in t if isinstance(x, str)] if isinstance(t, list) else []


def _strs(v) -> list[str]:
    if isinstance(v, str):
        return [x.strip() for x in v.split(",") if x.strip()]
    if isinstance(v, list):
        return [x for x in v if isinstance(x, str)]
    return []


def _signing_keys(v) -> dict[str, dict | None]:
    """``signing_keys``: plain keys, or scoped ``{"kind":"user_scope","key":...,"template":...}``."""
    out: dict[str, dict | None] = {}
    if isinstance(v, list):
        for k in v:
            if isinstance(k, str):
                out[k] = None
            elif isinstance(k, dict) and isinstance(k.get("key"), str):
                out[k["key"]] = k if k.get("kind") == "user_scope" else None
    return out


@dataclass(slots=True)
class OperatorClaims(_Base):
    """An operator JWT's claims."""

    signing_keys: set[str] = field(default_factory=set)
    system_account: str = ""


@dataclass(slots=True)
class Export:
    """An account export: ``type`` ``stream``/``service``, ``subject`` (wildcards allowed),
    ``token_req`` (private: importers need an activation token, unsupported here: refused),
    ``response_type`` (``Singleton``/``Stream``/``Chunked``) for services."""

    subject: str
    type: str
    token_req: bool = False
    response_type: str = "Singleton"
    response_threshold_ns: int = 0
    allow_trace: bool = False  # a traced request is traced on into the exporter (ADR-41)


@dataclass(slots=True)
class Import:
    """An account import of ``subject`` exported by ``account`` (see natsd.server.auth.imports for
    ``local_subject`` and the legacy ``to``)."""

    subject: str
    account: str
    type: str
    local_subject: str = ""
    to: str = ""
    token: str = ""
    allow_trace: bool = False  # (a stream import) a traced message is traced on into the importer
    share: bool = False  # (a service import) the requester's details go with the request (Nats-Request-Info)


@dataclass(slots=True)
class AccountClaims(_Base):
    """An account JWT's claims."""

    signing_keys: dict[str, dict | None] = field(default_factory=dict)
    revocations: dict[str, int] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)
    exports: list[Export] = field(default_factory=list)
    limits: dict = field(default_factory=dict)
    tiered_limits: dict = field(default_factory=dict)
    default_permissions: dict = field(default_factory=dict)
    # "mappings": {source: [{"subject", "weight", "cluster"}]} (natsd.server.mapping.from_claims)
    mappings: dict = field(default_factory=dict)

    def revoked(self, user: str, issued_at: int) -> bool:
        """Revocations map a user key (or ``*``: everyone) to a time: JWTs issued at or before
        it are revoked."""
        for key in (user, "*"):
            ts = self.revocations.get(key)
            if ts is not None and issued_at <= ts:
                return True
        return False


@dataclass(slots=True)
class UserClaims(_Base):
    """A user JWT's claims."""

    issuer_account: str = ""
    pub: dict = field(default_factory=dict)
    sub: dict = field(default_factory=dict)
    resp: dict | None = None
    bearer_token: bool = False
    limits: dict = field(default_factory=dict)
    empty_permissions: bool = True  # no permission or limit field set (required by scoped keys)

    @property
    def account(self) -> str:
        return self.issuer_account or self.issuer


def _typed(token: str, kind: str) -> dict:
    claims = decode(token)
    if claims_version(claims) == 0 and claims["nats"].get("version") != 1:
        raise JWTError("library supports version 2 or less - received 0")
    t = claims["nats"].get("type")
    if t != kind:
        raise JWTError(f"not a {kind} JWT (type {t!r})")
    return claims


def decode_operator(token: str) -> OperatorClaims:
    c = _typed(token, "operator")
    n = c["nats"]
    if (
        not is_public_key(c.get("sub", ""), "O")
        or c["iss"] != c.get("sub")
        and c["iss"] not in _strs(n.get("signing_keys"))
    ):
        raise JWTError("operator JWT must be self-signed")
    return OperatorClaims(
        **_base(c, token),
        signing_keys=set(_strs(n.get("signing_keys"))),
        system_account=str(n.get("system_account", "")),
    )


def _import(d: dict) -> Import | None:
    if not isinstance(d, dict) or not isinstance(d.get("subject"), str) or not isinstance(d.get("account"), str):
        return None
    return Import(
        subject=d["subject"],
        account=d["account"],
        type=str(d.get("type", "stream")),
        local_subject=str(d.get("local_subject") or ""),
        to=str(d.get("to") or ""),
        token=str(d.get("token", "")),
        allow_trace=d.get("allow_trace") is True,
        share=d.get("share") is True,
    )


def _export(d: dict) -> Export | None:
    if not isinstance(d, dict) or not isinstance(d.get("subject"), str):
        return None
    rt = d.get("response_type") or "Singleton"
    thr = d.get("response_threshold") or 0
    return Export(
        subject=d["subject"],
        type=str(d.get("type", "stream")),
        token_req=bool(d.get("token_req")),
        response_type=str(rt),
        response_threshold_ns=thr if isinstance(thr, int) else 0,
        allow_trace=d.get("allow_trace") is True,
    )


def _tiers(limits) -> dict:
    """``limits.tiered_limits``: JetStream limits per replica tier (``R1``, ``R3``...)."""
    t = limits.get("tiered_limits") if isinstance(limits, dict) else None
    return t if isinstance(t, dict) else {}


def decode_account(token: str) -> AccountClaims:
    c = _typed(token, "account")
    n = c["nats"]
    if not is_public_key(c.get("sub", ""), "A"):
        raise JWTError("account JWT subject is not an account key")
    revs = n.get("revocations") if isinstance(n.get("revocations"), dict) else {}
    return AccountClaims(
        **_base(c, token),
        signing_keys=_signing_keys(n.get("signing_keys")),
        revocations={k: v for k, v in revs.items() if isinstance(v, int)},
        imports=[i for i in map(_import, n.get("imports") or []) if i is not None],
        exports=[e for e in map(_export, n.get("exports") or []) if e is not None],
        limits=n.get("limits") if isinstance(n.get("limits"), dict) else {},
        tiered_limits=_tiers(n.get("limits")),
        default_permissions=n.get("default_permissions") if isinstance(n.get("default_permissions"), dict) else {},
        mappings=n.get("mappings") if isinstance(n.get("mappings"), dict) else {},
    )


# User JWT fields that are permissions or limits: all must be unset (zero/empty) for a user
# issued by a scoped signing key, as the JWT library's "empty permissions" check.
_PERMISSION_FIELDS = (
    "pub",
    "sub",
    "resp",
    "subs",
    "data",
    "payload",
    "src",
    "times",
    "times_location",
    "locale",
    "bearer_token",
    "allowed_connection_types",
)


def limit_of(d: dict, key: str) -> int:
    """A JWT limit: -1 unlimited; an absent one is 0, as the Go JWT library decodes it (nsc
    always writes -1 for "no limit")."""
    v = d.get(key, 0) if isinstance(d, dict) else 0
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def decode_user(token: str) -> UserClaims:
    c = _typed(token, "user")
    n = c["nats"]
    if not is_public_key(c.get("sub", ""), "U"):
        raise JWTError("user JWT subject is not a user key")
    if not is_public_key(c["iss"], "A"):
        raise JWTError("user JWT must be issued by an account")
    ia = n.get("issuer_account") or ""
    if ia and not is_public_key(ia, "A"):
        raise JWTError("issuer_account is not an account key")
    resp = n.get("resp") if isinstance(n.get("resp"), dict) else None
    return UserClaims(
        **_base(c, token),
        issuer_account=ia,
        pub=n.get("pub") if isinstance(n.get("pub"), dict) else {},
        sub=n.get("sub") if isinstance(n.get("sub"), dict) else {},
        resp=resp,
        bearer_token=bool(n.get("bearer_token")),
        empty_permissions=not any(n.get(k) for k in _PERMISSION_FIELDS),
        limits={k: limit_of(n, k) for k in ("subs", "data", "payload")},
    )
