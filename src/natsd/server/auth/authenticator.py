"""Client authentication and per-user permissions.

Modes, as nats-server (checked in this order):

* **users list** (``authorization { users: [...] }`` and ``accounts { A { users: [...] } }``):
  ``user``/``pass`` from CONNECT must name a user; each user may carry permissions and belongs to
  an account (``$G`` unless configured under ``accounts``);
* **single user** (``authorization { user, password }`` / ``--user --pass``);
* **token** (``authorization { token }`` / ``--auth``), sent as ``auth_token``;
* **no_auth_user**: a client that presents no credentials at all is logged in as that user;
* **nkeys** (``users: [{nkey: U...}]``): CONNECT carries ``nkey`` (the user's public key) and
  ``sig``, its Ed25519 signature of the ``nonce`` the server put in this connection's INFO
  (:mod:`natsd.config.jwt` verifies it); checked before the users list when ``nkey`` is present;
* **operator mode** (``operator:``/``trusted_keys``): only user JWTs, see :mod:`natsd.server.auth.trust`.

Every failure is ``-ERR 'Authorization Violation'``, as the reference answers.

Passwords and tokens starting with ``$2`` are bcrypt hashes (``$2a$``/``$2b$``), compared with
``bcrypt.checkpw``; that costs ~100 ms at cost 11, so the connection runs it in a worker thread
(see ``ClientConnection``) and successful checks are remembered (by SHA-256 of the password, never
the password itself) so reconnect storms do not stall.

Permissions: ``publish``/``subscribe`` each have ``allow`` and ``deny`` lists of subjects with
wildcards. An empty ``allow`` list means "everything not denied". A subscription is checked
with its subject's tokens taken literally against the patterns (so, as in the reference, an
allow of ``foo.*`` admits ``SUB foo.>``); deny patterns are also applied to each delivered
message, so a wildcard subscription never receives a denied subject.
``allow_responses`` lets a user publish to the reply subject of a message it received (at most
``responses_max`` times within ``responses_expires_ns``) even when publish is otherwise denied.
"""

from __future__ import annotations

from natsd.lazydataclass import dataclass

from natsd.config.options import Permissions, ServerOptions, SubjectPermission, UserOptions
from natsd.config.jwt_tokens import decode_sig, verify
from natsd.subjects.tokens import subject_matches
from natsd.protocolbase import Protocol

__all__ = [
    "Authenticator",
    "AuthResult",
    "Callout",
    "CalloutApplicant",
    "SubjectFilter",
    "CompiledPermissions",
    "is_bcrypt",
    "check_password",
]

_CACHE_MAX = 1024


def is_bcrypt(secret: str) -> bool:
    """nats-server treats any secret beginning with ``$2`` as a bcrypt hash."""
    return secret.startswith("$2")


def check_password(stored: str, given: str) -> bool:
    """Compare a presented password/token with the configured one (plain or bcrypt)."""
    if is_bcrypt(stored):
        import bcrypt

        try:
            return bcrypt.checkpw(given.encode(), stored.encode())
        except ValueError:
            return False
    import hmac  # (hmac, with OpenSSL's digests, loads with the first password: start-up time, ADR 0015)

    return hmac.compare_digest(stored.encode(), given.encode())


class SubjectFilter:
    """allow/deny lists over subjects, with a bounded per-filter decision cache."""

    __slots__ = ("allow", "deny", "_cache")

    def __init__(self, perm: SubjectPermission | None) -> None:
        self.allow: tuple[str, ...] = tuple(perm.allow) if perm else ()
        self.deny: tuple[str, ...] = tuple(perm.deny) if perm else ()
        self._cache: dict[str, bool] = {}

    def allows(self, subject: str) -> bool:
        r = self._cache.get(subject)
        if r is None:
            r = (not self.allow or any(subject_matches(p, subject) for p in self.allow)) and not any(
                subject_matches(p, subject) for p in self.deny
            )
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[subject] = r
        return r

    def denies(self, subject: str) -> bool:
        """Only the deny list (used on delivery to wildcard subscriptions)."""
        return any(subject_matches(p, subject) for p in self.deny)


@dataclass(slots=True)
class CompiledPermissions:
    """A user's permissions as the router checks them (subject filters per direction)."""

    publish: SubjectFilter | None
    subscribe: SubjectFilter | None
    allow_responses: bool
    responses_max: int
    responses_expires_ns: int


def compile_permissions(p: Permissions | None) -> CompiledPermissions | None:
    if p is None:
        return None
    pub = SubjectFilter(p.publish) if p.publish and (p.publish.allow or p.publish.deny) else None
    sub = SubjectFilter(p.subscribe) if p.subscribe and (p.subscribe.allow or p.subscribe.deny) else None
    if pub is None and sub is None and not p.allow_responses:
        return None
    if p.allow_responses and pub is None:
        # allow_responses alone implies "publish only responses" in the reference.
        pub = SubjectFilter(SubjectPermission(allow=[], deny=[">"]))
    return CompiledPermissions(pub, sub, p.allow_responses, p.responses_max or 1, p.responses_expires_ns)


@dataclass(slots=True)
class AuthResult:
    """Outcome of a CONNECT: ``ok``; ``user`` name (``""`` for token/anonymous); account name;
    permissions; ``bcrypt`` = (hash, password) still to verify in a thread when not None."""

    ok: bool
    user: str = ""
    account: str = "$G"
    permissions: CompiledPermissions | None = None
    bcrypt: tuple[str, str] | None = None
    cache_key: bytes = b""
    expires: int = 0  # JWT users: unix seconds when the credentials expire (0: never)
    jwt_iat: int | None = None  # JWT users: issued-at, for revocations pushed later
    max_subs: int = -1  # JWT user/account limits (-1: none beyond the server's)
    max_payload: int = -1
    error: str = ""  # a refusal with its own -ERR text instead of 'Authorization Violation'
    callout: bool = False  # the auth callout service decides (natsd.server.auth.callout)


class OperatorMode(Protocol):
    """Operator mode as the authenticator uses it (:class:`natsd.server.auth.trust.Trust`): user
    JWTs only."""

    def authenticate(self, opts: dict, nonce: str) -> AuthResult: ...


class CalloutApplicant(Protocol):
    """What the auth callout reads of the connection it authorizes (a ``ClientConnection``)."""

    cid: int
    ip: str
    nonce: str
    connect_opts: dict
    start_ns: int


class Callout(Protocol):
    """The auth callout as the authenticator and connections use it
    (:class:`natsd.server.auth.callout.AuthCallout`)."""

    def delegates(self, opts: dict, res: AuthResult) -> bool: ...

    def restrict(self, res: AuthResult) -> AuthResult: ...

    async def authorize(self, client: CalloutApplicant, opts: dict, account: str) -> AuthResult: ...


class Authenticator:
    """Built from :class:`ServerOptions`; rebuilt on config reload."""

    def __init__(
        self, options: ServerOptions, trust: OperatorMode | None = None, callout: Callout | None = None
    ) -> None:
        self.trust = trust  # natsd.server.auth.trust.Trust in operator mode
        self.callout = callout
        self.nkeys: dict[str, UserOptions] = {u.nkey: u for u in options.nkeys}
        self.nkey_perms = {k: compile_permissions(u.permissions) for k, u in self.nkeys.items()}
        # INFO carries a per-connection nonce whenever a client may have to sign one.
        self.nonce_required = bool(self.nkeys or trust is not None)
        self.token = options.authorization
        self.username = options.username
        self.password = options.password
        self.users: dict[str, UserOptions] = {}
        for u in options.users:
            self.users[u.user] = u
        for acc in options.accounts:
            for u in acc.users:
                if u.account in ("", "$G") and acc.name != "$G":
                    u = UserOptions(user=u.user, password=u.password, permissions=u.permissions, account=acc.name)
                self.users[u.user] = u
        self.perms = {name: compile_permissions(u.permissions) for name, u in self.users.items()}
        self.no_auth_user = options.no_auth_user
        self.auth_required = bool(self.token or self.username or self.users or self.nonce_required)
        self._verified: dict[bytes, None] = {}

    def _ok_user(self, u: UserOptions, given: str) -> AuthResult:
        res = AuthResult(True, u.user, u.account or "$G", self.perms.get(u.user))
        return self._with_secret(res, u.password, given)

    def _with_secret(self, res: AuthResult, stored: str, given: str) -> AuthResult:
        import hashlib, hmac  # noqa: E401 (with the first password or token: start-up time, ADR 0015)

        if is_bcrypt(stored):
            key = hashlib.sha256(stored.encode() + b"\0" + given.encode()).digest()
            if key in self._verified:
                return res
            res.bcrypt = (stored, given)
            res.cache_key = key
            return res
        if not hmac.compare_digest(stored.encode(), given.encode()):
            return AuthResult(False, res.user)
        return res

    def remember(self, key: bytes) -> None:
        """Record a successful bcrypt verification."""
        if len(self._verified) >= _CACHE_MAX:
            self._verified.clear()
        self._verified[key] = None

    def authenticate(self, opts: dict, nonce: str = "") -> AuthResult:
        """Check CONNECT options (``nonce``: the one sent in this connection's INFO); may return
        a result whose ``bcrypt`` still needs checking."""
        if not self.auth_required:
            return AuthResult(True)
        res = self.trust.authenticate(opts, nonce) if self.trust is not None else self._configured(opts, nonce)
        if self.callout is not None:
            if self.callout.delegates(opts, res):
                return AuthResult(True, res.user, res.account, callout=True)
            return self.callout.restrict(res)
        return res

    def _configured(self, opts: dict, nonce: str) -> AuthResult:
        """The configured users, nkeys, user/password or token."""
        nkey = opts.get("nkey")
        if nkey and self.nkeys:
            return self._nkey(nkey, opts.get("sig"), nonce)
        user = opts.get("user") or ""
        password = opts.get("pass") or ""
        token = opts.get("auth_token") or ""
        if not user and not password and not token and self.no_auth_user:
            u = self.users.get(self.no_auth_user)
            if u is not None:
                return AuthResult(True, u.user, u.account or "$G", self.perms.get(u.user))
            u = self.nkeys.get(self.no_auth_user)
            if u is not None:
                return AuthResult(True, u.nkey, u.account or "$G", self.nkey_perms.get(u.nkey))
        if self.users:
            u = self.users.get(user)
            if u is not None:
                return self._ok_user(u, password)
            if not self.username and not self.token:
                return AuthResult(False, user)
        if self.username:
            if user == self.username:
                return self._with_secret(AuthResult(True, user), self.password, password)
            if not self.token:
                return AuthResult(False, user)
        if self.token:
            return self._with_secret(AuthResult(True), self.token, token)
        return AuthResult(False, user)

    def _nkey(self, nkey: str, sig: str | None, nonce: str) -> AuthResult:
        u = self.nkeys.get(nkey) if isinstance(nkey, str) else None
        raw = decode_sig(sig)
        if u is None or raw is None or not nonce or not verify(nkey, nonce.encode(), raw):
            return AuthResult(False, nkey if isinstance(nkey, str) else "")
        return AuthResult(True, nkey, u.account or "$G", self.nkey_perms.get(nkey))
