"""Operator mode (decentralized JWT auth): trusted operators, the account resolver, claim updates.

Theory of operation
-------------------
With ``operator:`` (or ``trusted_keys``) in the config, every client must present a **user JWT**
in CONNECT (``jwt``) and, unless the JWT is a ``bearer_token``, sign the INFO ``nonce`` with the
user's nkey (``sig``). :meth:`Trust.authenticate` then checks, in this order: the user JWT's own
signature (:func:`natsd.config.jwt.decode`), its ``exp``/``nbf``, the account it names
(``issuer_account`` when signed by an account signing key, else ``iss``) which the resolver must
hold and whose JWT must be signed by a trusted operator key (the operator's subject or one of its
``signing_keys``) and not be expired, that the user was issued by the account key or one of the
account's ``signing_keys``, the account's ``revocations``, and the nonce signature. Any failure is
``-ERR 'Authorization Violation'``, as nats-server answers all of them.

Accounts are named by their public key. Their claims give the user-independent parts of an
account: JetStream limits (``limits``/``tiered_limits``, see :func:`js_limits`), imports and
exports (:mod:`natsd.server.auth.imports`), revocations.

Resolvers: ``MEMORY`` holds ``resolver_preload``; ``full`` keeps one ``<dir>/<account key>.jwt``
file per account (the raw JWT, written to a temporary file and renamed, so a crash never leaves a
torn one), seeded from ``resolver_preload`` unless the directory already holds a newer JWT.
The full resolver accepts pushed account JWTs on ``$SYS.REQ.CLAIMS.UPDATE`` and
``$SYS.REQ.ACCOUNT.<key>.CLAIMS.UPDATE`` in the system account, persists them, serves them on
``$SYS.REQ.ACCOUNT.<key>.CLAIMS.LOOKUP`` and lists the account keys on ``$SYS.REQ.CLAIMS.LIST``
(deleting, ``$SYS.REQ.CLAIMS.DELETE``, is not implemented); MEMORY answers only the per-account subject and applies
the update (in memory) to accounts already in use, others get "jwt update skipped", as the
reference does. Limits from the claims (-1 = unlimited, absent = 0 as the Go JWT library decodes
them): account ``conn`` ('maximum account active connections exceeded' at CONNECT), account and
user ``subs`` ('maximum subscriptions exceeded') and ``payload`` ('Maximum Payload Violation',
connection closed); ``data``, ``src``, ``times`` and connection types are not enforced. An update applies at once:
new limits, imports/exports, and connected users that are now revoked get
``-ERR 'User Authentication Revoked'`` and are closed. An update older (``iat``) than the JWT held
is acknowledged but not applied, as the reference does.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Callable

from natsd import __version__
from natsd.atomicfile import atomic_write
from natsd.config.lexer import ConfigError
from natsd.config.options import AccountJetStreamLimits, Permissions, ServerOptions, SubjectPermission
from natsd.config import jwt as J
from natsd.gotime import SECOND, format_rfc3339
from natsd.server.auth.authenticator import AuthResult, compile_permissions
from natsd.server.auth.imports import apply_imports
from natsd.server.auth.templates import TemplateError, expand_permissions
from natsd.server.connection import REASON_AUTH
from natsd.server.log import logger
from natsd.server.mapping import from_claims as mapping_from_claims
from natsd.server.ports import ServerPorts

if TYPE_CHECKING:  # pragma: no cover
    from natsd.server.account import Account
    from natsd.server.context import ServerContext

__all__ = ["Trust", "js_limits", "user_permissions", "MemoryResolver", "DirResolver"]

ERR_REVOKED = "User Authentication Revoked"
ERR_EXPIRED = "User Authentication Expired"
ERR_MAX_ACCOUNT_CONNS = "maximum account active connections exceeded"
_USER_CACHE_MAX = 4096


def _tighter(a: int, b: int) -> int:
    """The stricter of two JWT limits (-1: unlimited)."""
    if a < 0:
        return b
    return a if b < 0 else min(a, b)


def _config_error(message: str, source: str) -> ConfigError:
    parts = source.rsplit(":", 2) if source else []
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return ConfigError(message, parts[0], int(parts[1]), int(parts[2]))
    return ConfigError(message)


# -- resolvers ------------------------------------------------------------------------------------


class MemoryResolver:
    """Account JWTs held in memory (``resolver: MEMORY`` + ``resolver_preload``)."""

    def __init__(self, preload: dict[str, str]) -> None:
        self._jwts = dict(preload)

    def fetch(self, account: str) -> str | None:
        return self._jwts.get(account)

    def store(self, account: str, token: str) -> None:
        self._jwts[account] = token


class DirResolver(MemoryResolver):
    """``resolver { type: full, dir: ... }``: one ``<account>.jwt`` file per account."""

    def __init__(self, directory: str, preload: dict[str, str]) -> None:
        super().__init__({})
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        for name in os.listdir(directory):
            if name.endswith(".jwt"):
                try:
                    with open(os.path.join(directory, name), encoding="ascii") as f:
                        self._jwts[name[:-4]] = f.read().strip()
                except (OSError, UnicodeDecodeError) as e:
                    logger.warning("Could not read account JWT %s: %s", name, e)
        for acc, token in preload.items():
            held = self._jwts.get(acc)
            if held is None or _iat(token) > _iat(held):
                self.store(acc, token)

    def store(self, account: str, token: str) -> None:
        path = os.path.join(self.dir, account + ".jwt")
        atomic_write(path, token.encode("ascii"))
        super().store(account, token)


def _iat(token: str) -> int:
    try:
        return J.decode(token).get("iat") or 0
    except J.JWTError:
        return -1


# -- claims -> natsd settings ---------------------------------------------------------------------

_JS_FIELDS = (
    ("mem_storage", "max_memory"),
    ("disk_storage", "max_storage"),
    ("streams", "max_streams"),
    ("consumer", "max_consumers"),
    ("max_ack_pending", "max_ack_pending"),
    ("mem_max_stream_bytes", "memory_max_stream_bytes"),
    ("disk_max_stream_bytes", "storage_max_stream_bytes"),
)


def js_limits(claims: J.AccountClaims) -> AccountJetStreamLimits | None:
    """The account's JetStream limits, or None when JetStream is off for it.

    ``tiered_limits`` (``R1``, the tier of a single server's replica-1 streams; else the first
    tier) win over the plain ``limits``, as in the reference. JetStream is on when memory or disk
    storage is non-zero (-1 = unlimited); a 0 stream/consumer count means unlimited, which the
    engine's checks (``> 0``) already treat that way.
    """
    src = claims.limits
    tier = ""
    if claims.tiered_limits:
        tiers = claims.tiered_limits
        tier = "R1" if "R1" in tiers else next(iter(tiers))
        src = tiers[tier]
        if not isinstance(src, dict):
            return None
    mem, disk = src.get("mem_storage", 0), src.get("disk_storage", 0)
    if not mem and not disk:
        return None
    lim = AccountJetStreamLimits()
    for key, attr in _JS_FIELDS:
        v = src.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            setattr(lim, attr, v)
    lim.max_bytes_required = bool(src.get("max_bytes_required", False))
    lim.tier = tier
    return lim


def _subject_perm(d: dict | None) -> SubjectPermission | None:
    if not isinstance(d, dict):
        return None
    allow = [s for s in d.get("allow") or [] if isinstance(s, str)]
    deny = [s for s in d.get("deny") or [] if isinstance(s, str)]
    return SubjectPermission(allow, deny) if allow or deny else None


def user_permissions(pub: dict | None, sub: dict | None, resp: dict | None) -> Permissions | None:
    """JWT ``pub``/``sub``/``resp`` as config-file permissions (``resp.ttl`` is nanoseconds)."""
    p = Permissions(publish=_subject_perm(pub), subscribe=_subject_perm(sub))
    if isinstance(resp, dict):
        p.allow_responses = True
        p.responses_max = resp.get("max") or 1
        p.responses_expires_ns = resp.get("ttl") or 0
    if p.publish is None and p.subscribe is None and not p.allow_responses:
        return None
    return p


# -- trust ----------------------------------------------------------------------------------------


class Trust:
    """Trusted operators + resolver; built once per configuration (see module docstring)."""

    def __init__(self, options: ServerOptions, now: Callable[[], float] = time.time) -> None:
        t = options.trust
        self.now = now
        self.keys: set[str] = set(t.trusted_keys)
        self.operators: list[J.OperatorClaims] = []
        for token, source in zip(t.operators, t.operator_sources):
            try:
                op = J.decode_operator(token)
            except J.JWTError as e:
                raise _config_error(f"error parsing operator JWT: {e}", source) from None
            self.operators.append(op)
            self.keys.add(op.subject)
            self.keys.update(op.signing_keys)
        sys_acc = options.system_account or next((o.system_account for o in self.operators if o.system_account), "")
        self.system_account = sys_acc
        for acc, token in t.resolver_preload.items():
            try:
                claims = J.decode_account(token)
            except J.JWTError as e:
                raise ConfigError(f"resolver_preload: account {acc}: {e}") from None
            if claims.subject != acc:
                raise ConfigError(f"resolver_preload: key {acc} does not match the JWT's account {claims.subject}")
        r = t.resolver
        if r is not None and r.type == "full":
            self.resolver: MemoryResolver = DirResolver(r.dir, t.resolver_preload)
        else:
            self.resolver = MemoryResolver(t.resolver_preload)
        # The full resolver keeps every pushed account; MEMORY only updates accounts in use.
        self.stores_updates = isinstance(self.resolver, DirResolver)
        self._claims: dict[str, J.AccountClaims] = {}
        self._users: dict[str, J.UserClaims] = {}  # verified user JWTs (bounded)
        self.server: "ServerContext | None" = None

    # -- accounts ---------------------------------------------------------------------------------

    def lookup(self, account: str) -> J.AccountClaims | None:
        """The account's verified claims (None: unknown, undecodable or untrusted)."""
        c = self._claims.get(account)
        if c is not None:
            return c
        token = self.resolver.fetch(account)
        if token is None:
            logger.warning("Account fetch failed: account missing")
            return None
        try:
            c = self._verify_account(token)
        except J.JWTError as e:
            logger.warning("Account %s: %s", account, e)
            return None
        if c.subject != account:
            return None
        self._claims[account] = c
        return c

    def _verify_account(self, token: str) -> J.AccountClaims:
        c = J.decode_account(token)
        if c.issuer not in self.keys:
            raise J.JWTError("account JWT not signed by a trusted operator")
        now = self.now()
        for imp in c.imports:
            # As the reference: an import carrying a bad activation token (undecodable, for
            # another account, from another exporter, expired) makes the whole account invalid.
            if imp.token:
                try:
                    act = J.decode(imp.token)
                except J.JWTError as e:
                    raise J.JWTError(f"import {imp.subject!r}: activation token: {e}") from None
                n = act["nats"]
                exporter = n.get("issuer_account") or act["iss"]
                if n.get("type") != "activation" or act.get("sub") not in (c.subject, "*") or exporter != imp.account:
                    raise J.JWTError(f"import {imp.subject!r}: activation token is not for this import")
                if act.get("exp") and now >= act["exp"]:
                    raise J.JWTError(f"import {imp.subject!r}: activation token has expired")
        return c

    def preloaded(self) -> list[str]:
        return list(self.resolver._jwts)

    # -- CONNECT ----------------------------------------------------------------------------------

    def authenticate(self, opts: dict, nonce: str) -> AuthResult:
        """Check CONNECT's ``jwt``/``sig`` (see the module docstring)."""
        fail = AuthResult(False)
        token = opts.get("jwt")
        if not isinstance(token, str) or not token:
            return fail
        uc = self._users.get(token)
        if uc is None:
            try:
                uc = J.decode_user(token)
            except J.JWTError as e:
                logger.debug("user JWT rejected: %s", e)
                return fail
            # A verified token always decodes to the same claims: reconnects skip the work.
            if len(self._users) >= _USER_CACHE_MAX:
                self._users.clear()
            self._users[token] = uc
        now = self.now()
        if uc.expired(now) or uc.not_yet_valid(now):
            return fail
        ac = self.lookup(uc.account)
        if ac is None or ac.expired(now):
            return fail
        scope = None
        if uc.issuer != ac.subject:
            if uc.issuer not in ac.signing_keys:
                return fail
            scope = ac.signing_keys[uc.issuer]
            if scope is not None and not uc.empty_permissions:
                return fail  # scoped users must leave permissions and limits to the scope
        elif uc.issuer_account and uc.issuer_account != uc.issuer:
            return fail
        if ac.revoked(uc.subject, uc.issued_at):
            return fail
        if not uc.bearer_token:
            sig = J.decode_sig(opts.get("sig"))
            if sig is None or not J.verify(uc.subject, nonce.encode(), sig):
                return fail
        user_limits = uc.limits
        if scope is not None:  # a scoped signing key: its template decides the permissions
            t = scope.get("template")
            try:
                tmpl = expand_permissions(t if isinstance(t, dict) else {}, uc, ac)
            except TemplateError as e:
                logger.debug("User JWT generated invalid permissions: %s", e)
                return fail
            perms = user_permissions(tmpl.get("pub"), tmpl.get("sub"), tmpl.get("resp"))
            user_limits = {k: J.limit_of(tmpl, k) for k in ("subs", "data", "payload")}
        elif uc.pub or uc.sub or uc.resp:
            perms = user_permissions(uc.pub, uc.sub, uc.resp)
        else:
            dp = ac.default_permissions
            perms = user_permissions(dp.get("pub"), dp.get("sub"), dp.get("resp"))
        max_conns = J.limit_of(ac.limits, "conn")
        acc = self.server.accounts.get(ac.subject) if self.server is not None else None
        if max_conns >= 0 and (len(acc.clients) if acc is not None else 0) >= max_conns:
            return AuthResult(False, uc.subject, error=ERR_MAX_ACCOUNT_CONNS)
        expires = min(x for x in (uc.expires, ac.expires, 1 << 62) if x)
        return AuthResult(
            True,
            uc.subject,
            ac.subject,
            compile_permissions(perms),
            expires=0 if expires == 1 << 62 else expires,
            jwt_iat=uc.issued_at,
            max_subs=_tighter(user_limits["subs"], J.limit_of(ac.limits, "subs")),
            max_payload=_tighter(user_limits["payload"], J.limit_of(ac.limits, "payload")),
        )

    # -- server wiring ----------------------------------------------------------------------------

    def bind(self, server: "ServerContext") -> None:
        self.server = server
        self.now = lambda: server.clock.time_ns() / 1e9  # expiry checks follow the injected clock

    def account_created(self, acc: "Account") -> None:
        """A new Account object for a JWT account: apply its claims (imports, JetStream)."""
        if not J.is_public_key(acc.name, "A"):
            return  # $G: exists in every server, never a JWT account
        claims = self.lookup(acc.name)
        if claims is not None:
            self._apply(acc, claims, relink=False)

    def _apply(self, acc: "Account", claims: J.AccountClaims, relink: bool = True) -> None:
        server = self.server
        if server is None:
            return
        apply_imports(server, acc, claims)
        acc.mapper = mapping_from_claims(acc.name, claims.mappings)
        # Its exports changed: importers from it re-link (their subscriptions live here).
        for other in list(server.accounts.values()) if relink else ():
            if (
                other is not acc
                and other.name in self._claims
                and any(i.account == acc.name for i in self._claims[other.name].imports)
            ):
                apply_imports(server, other, self._claims[other.name])
        if acc.name != self.system_account:
            server.apply_js_limits(acc, js_limits(claims))

    def start_system_services(self) -> None:
        """Subscribe the claim update/lookup handlers in the system account."""
        server = self.server
        if server is None or not self.system_account:
            return
        ports = ServerPorts(server.get_account(self.system_account))
        self._ports = ports
        ports.subscribe("$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE", self._on_update)
        if self.stores_updates:
            ports.subscribe("$SYS.REQ.CLAIMS.UPDATE", self._on_update)
            ports.subscribe("$SYS.REQ.ACCOUNT.*.CLAIMS.LOOKUP", self._on_lookup)
            ports.subscribe("$SYS.REQ.CLAIMS.LIST", self._on_list)

    def _reply(self, reply: str, body: dict) -> None:
        if not reply:
            return
        server = self.server
        assert server is not None  # bound before any request can arrive
        payload = {
            "server": {
                "name": server.server_name,
                "host": server.options.host,
                "id": server.server_id,
                "ver": __version__,
                "jetstream": server.jetstream is not None,
                "flags": 0,
                "seq": 0,
                "time": format_rfc3339(int(self.now()) * SECOND),
            }
        }
        payload.update(body)
        self._ports.publish(reply, "", None, json.dumps(payload, separators=(",", ":")).encode())

    def _on_lookup(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        account = subject.split(".")[3]
        token = self.resolver.fetch(account)
        if reply:  # an unknown account gets an empty reply, as from the reference
            self._ports.publish(reply, "", None, token.encode() if token else b"")

    def _on_list(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        self._reply(reply, {"data": sorted(self.resolver._jwts)})

    def _on_update(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        expect = subject.split(".")[3] if subject.startswith("$SYS.REQ.ACCOUNT.") else ""
        account = expect or "n/a"
        try:
            token = payload.decode("ascii").strip()
            try:
                account = expect or J.decode(token).get("sub") or account
            except J.JWTError:
                pass
            claims = self._verify_account(token)
            if expect and claims.subject != expect:
                raise J.JWTError("subject does not match jwt content")
        except (J.JWTError, UnicodeDecodeError) as e:
            msg = f"jwt update resulted in error - {e}"
            logger.error("jwt update resulted in error - %s - %s", account, e)
            self._reply(reply, {"error": {"account": account, "code": 500, "description": msg}})
            return
        if not self.stores_updates and (self.server is None or claims.subject not in self.server.accounts):
            # MEMORY resolver: only accounts in use take updates (and only until a restart).
            self._reply(reply, {"data": {"account": claims.subject, "code": 200, "message": "jwt update skipped"}})
            return
        self.update(claims)
        self._reply(reply, {"data": {"account": claims.subject, "code": 200, "message": "jwt updated"}})

    def update(self, claims: J.AccountClaims) -> bool:
        """Store and apply newer account claims; False when the held JWT is newer."""
        held = self._claims.get(claims.subject)
        if held is None:
            token = self.resolver.fetch(claims.subject)
            if token is not None:
                try:
                    held = J.decode_account(token)
                except J.JWTError:
                    held = None
        if held is not None and held.issued_at > claims.issued_at:
            return False
        try:
            self.resolver.store(claims.subject, claims.raw)
        except OSError as e:
            logger.error("Could not store account JWT %s: %s", claims.subject, e)
            return False
        self._claims[claims.subject] = claims
        server = self.server
        if server is not None:
            acc = server.accounts.get(claims.subject)
            if acc is not None:
                self._apply(acc, claims)
                self._recheck_clients(acc, claims)
        logger.info("Updated account %s", claims.subject)
        return True

    def _recheck_clients(self, acc: "Account", claims: J.AccountClaims) -> None:
        for c in list(acc.clients):
            iat = c.jwt_iat
            if iat is not None and claims.revoked(c.user, iat):
                logger.error("%s%s", c.prefix, ERR_REVOKED)
                c.close_with_err(ERR_REVOKED, REASON_AUTH)
