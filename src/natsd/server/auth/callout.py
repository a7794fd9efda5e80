"""Auth callout (nats-server 2.10+, ADR-26), configuration mode:
``authorization { users: [...], auth_callout { issuer, auth_users, account, xkey, allowed_accounts } }``.

A client whose CONNECT user (or nkey) is not in ``auth_users`` is not checked against the configured users:
the server asks a service instead. It publishes, in the callout ``account``, on ``$SYS.REQ.USER.AUTH`` with a
private reply inbox, an *authorization request* JWT signed by the server's own nkey (the server id is its public
key), holding a fresh user nkey the answer must be for, the server, the client's information and its whole
CONNECT options (password and token included: deciding on them is the service's job; they are never logged).

The service answers with an *authorization response* JWT (``sub``: that user nkey, ``aud``: the server id) that
carries either an ``error`` or a user JWT signed by ``issuer``. The user JWT's ``aud`` names the account the
client is placed in; its permissions, expiry and ``name`` apply to the connection (its ``subs``/``payload``
limits do not: nats-server builds a callout user from its permissions alone). With ``xkey`` (the service's
public Curve25519 key), the request is sealed for it (see :mod:`natsd.server.auth.xkeys`) and carries the
server's public xkey in a ``Nats-Server-Xkey`` header; the answer may be sealed back or plain. No answer
within the authorization timeout, an ``error``, or any check that fails refuses the client with
``Authorization Violation``; the reason is logged as a warning with nats-server's texts, and published as a
``client_disconnect`` advisory on ``$SYS.ACCOUNT.CLIENT.AUTH.ERR`` in the callout account (and on
``$SYS.SERVER.<id>.CLIENT.AUTH.ERR`` in the system account when there is one).
Clients placed in the callout account may not publish on ``$SYS.REQ.USER.AUTH``.

Operator mode: an account JWT's ``authorization`` section (``auth_users``, ``allowed_accounts``, ``xkey``)
gives that account its service. A client presenting a valid user JWT of the account (typically a bearer
"sentinel" with no permissions) whose key is not in ``auth_users`` goes to the service, which is asked in
that account with the account as the request's subject; the user JWT it returns is issued by the account or
an allowed one (or their signing keys), which is where the client is placed.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import os
import time
from typing import TYPE_CHECKING

import nkeys

from natsd.lazydataclass import dataclass
from natsd import __version__
from natsd import nats_headers as NH
from natsd.config import jwt as J
from natsd.config.options import AuthCalloutOptions, Permissions, SubjectPermission
from natsd.config.xkey import XKeyError
from natsd.nuid import nuid as next_nuid
from natsd.server.auth.authenticator import AuthResult, CalloutApplicant, SubjectFilter, compile_permissions
from natsd.server.auth.events import disconnect_advisory
from natsd.server.auth.templates import TemplateError, expand_permissions
from natsd.server.auth.xkeys import XKeyPair
from natsd.server.ports import ServerPorts

if TYPE_CHECKING:  # pragma: no cover
    from natsd.server.account import Account
    from natsd.server.context import ServerContext, TrustView

__all__ = ["AuthCallout", "server_identity", "encode_jwt", "AUTH_CALLOUT_SUBJECT"]

logger = logging.getLogger("natsd")

AUTH_CALLOUT_SUBJECT = "$SYS.REQ.USER.AUTH"
XKEY_HEADER = NH.SERVER_XKEY.decode()
_ACCOUNT_AUTH_ERR = "$SYS.ACCOUNT.CLIENT.AUTH.ERR"


class CalloutError(Exception):
    """A refusal, with nats-server's text (already title-cased)."""


def _title(text: str) -> str:
    return text[:1].upper() + text[1:]


def server_identity() -> tuple[str, str]:
    """A fresh server nkey: (seed, public key). The server id is the public key, as in nats-server, so the
    requests it signs verify against their ``iss``."""
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_SERVER)
    return seed.decode(), nkeys.from_seed(bytearray(seed)).public_key.decode()


def _user_nkey() -> str:
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    return nkeys.from_seed(bytearray(seed)).public_key.decode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def encode_jwt(claims: dict, seed: str) -> str:
    """Sign ``claims`` as the nats JWT library does: ``ed25519-nkey``, ``jti`` = base32 SHA-512/256 of
    the claims, ``iss`` = the seed's public key."""
    kp = nkeys.from_seed(bytearray(seed.encode()))
    body = dict(claims, iss=kp.public_key.decode())
    body.pop("jti", None)
    digest = hashlib.new("sha512_256", json.dumps(body, separators=(",", ":")).encode()).digest()
    body = {"jti": base64.b32encode(digest).decode().rstrip("="), **body}
    head = _b64(b'{"typ":"JWT","alg":"ed25519-nkey"}')
    payload = _b64(json.dumps(body, separators=(",", ":")).encode())
    sig = kp.sign(f"{head}.{payload}".encode())
    return f"{head}.{payload}.{_b64(bytes(sig))}"


class _Named:
    """A response's user JWT claims as the template functions read them (name, subject,
    issuer_account, tags)."""

    def __init__(self, user: dict) -> None:
        n = user.get("nats")
        un: dict = n if isinstance(n, dict) else {}
        self.name = str(user.get("name") or "")
        self.subject = str(user.get("sub") or "")
        self.issuer_account = str(un.get("issuer_account") or "")
        tags = un.get("tags")
        self.tags = [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


def _raw_user(opts: dict) -> str:
    return opts.get("user") or opts.get("nkey") or ""


def _subject_perm(d: object) -> SubjectPermission | None:
    if not isinstance(d, dict):
        return None
    allow = [s for s in d.get("allow") or [] if isinstance(s, str)]
    deny = [s for s in d.get("deny") or [] if isinstance(s, str)]
    return SubjectPermission(allow, deny) if allow or deny else None


def _permissions(n: dict, in_callout_account: bool) -> Permissions | None:
    pub = _subject_perm(n.get("pub"))
    if in_callout_account:  # the service's own account may not forge requests
        pub = pub or SubjectPermission([], [])
        pub.deny = [*pub.deny, AUTH_CALLOUT_SUBJECT]
    p = Permissions(publish=pub, subscribe=_subject_perm(n.get("sub")))
    resp = n.get("resp")
    if isinstance(resp, dict):
        p.allow_responses = True
        p.responses_max = resp.get("max") or 1
        p.responses_expires_ns = resp.get("ttl") or 0
    return p if p.publish or p.subscribe or p.allow_responses else None


@dataclass(frozen=True, slots=True)
class _Setting:
    """One account's callout: the configuration block's, or (operator mode) its account JWT's
    ``authorization`` section, where the account itself is the issuer."""

    account: str
    issuer: str
    auth_users: frozenset[str]
    xkey: str = ""
    allowed_accounts: tuple[str, ...] = ()
    operator: bool = False
    signing_keys: frozenset[str] = frozenset()


class AuthCallout:
    """The callout of one server (see the module docstring): ``options`` in configuration mode, or
    ``trust`` in operator mode, where each account JWT may name its own service."""

    def __init__(self, options: AuthCalloutOptions | None, seed: str, trust: TrustView | None = None) -> None:
        self.options = options
        self.trust = trust
        self.seed = seed
        self._config = (
            _Setting(
                options.account,
                options.issuer,
                frozenset(options.auth_users),
                options.xkey,
                tuple(options.allowed_accounts),
            )
            if options is not None and trust is None
            else None
        )
        # The server's xkey, shown in INFO as nats-server shows it; requests are sealed only for a service
        # that names its own xkey.
        self.xkp: XKeyPair | None = XKeyPair.create()
        self.server: ServerContext | None = None
        self._inboxes: dict[str, tuple[ServerPorts, str]] = {}  # account -> (ports, inbox prefix)
        self._pending: dict[str, asyncio.Future[bytes | None]] = {}
        self._authz: dict[str, _Setting | None] = {}  # account JWT -> its setting (operator mode)

    def _setting(self, account: str) -> _Setting | None:
        """The callout that applies to clients of ``account`` (None: that account has none)."""
        if self._config is not None or self.trust is None:
            return self._config
        claims = self.trust.lookup(account)
        if claims is None:
            return None
        if claims.raw not in self._authz:
            if len(self._authz) >= 1024:
                self._authz.clear()
            a = J.decode(claims.raw)["nats"].get("authorization")  # verified by the resolver already
            users = a.get("auth_users") if isinstance(a, dict) else None
            self._authz[claims.raw] = (
                _Setting(
                    claims.subject,
                    claims.subject,
                    frozenset(u for u in users if isinstance(u, str)),
                    str(a.get("xkey") or ""),
                    tuple(x for x in a.get("allowed_accounts") or [] if isinstance(x, str)),
                    True,
                    frozenset(claims.signing_keys),
                )
                if isinstance(a, dict) and isinstance(users, list) and users
                else None
            )
        return self._authz[claims.raw]

    def bind(self, server: ServerContext) -> None:
        self.server = server
        o = self.options
        if o is None or self._config is None:
            return
        if self._account(o.account) is None:
            logger.error('Authorization callout account "%s" not valid', o.account)
        known = set(server.auth.users) | set(server.auth.nkeys)
        for u in o.auth_users:
            if u not in known:
                logger.error('Authorization callout user "%s" not valid: <nil>', u)

    def delegates(self, opts: dict, res: AuthResult) -> bool:
        """Whether this CONNECT goes to the service rather than the configured users (configuration mode),
        or past the user JWT it presented (operator mode: a valid JWT of an account with a callout, for a
        user not in its ``auth_users``)."""
        if self.trust is not None:
            st = self._setting(res.account) if res.ok else None
            return st is not None and res.user not in st.auth_users
        st = self._config
        if st is None or _raw_user(opts) in st.auth_users:
            return False
        allowed = st.allowed_accounts
        return not (allowed and res.ok and res.account != "$G" and res.account not in allowed)

    def restrict(self, res: AuthResult) -> AuthResult:
        """A client placed in the callout account by the configured users (the service itself) may not
        publish on ``$SYS.REQ.USER.AUTH``, as in nats-server."""
        st = self._setting(res.account) if res.ok else None
        if st is None or res.account != st.account:
            return res
        p = res.permissions
        pub = p.publish if p is not None else None
        deny = SubjectPermission(list(pub.allow) if pub else [], [*(pub.deny if pub else ()), AUTH_CALLOUT_SUBJECT])
        if p is None:
            res.permissions = compile_permissions(Permissions(publish=deny))
        else:
            p.publish = SubjectFilter(deny)
        return res

    def _account(self, name: str) -> Account | None:
        server = self.server
        if server is None:
            return None
        if name == "$G":
            return server.global_account
        return server.accounts.get(name)

    # -- the exchange ------------------------------------------------------------------------------

    def _inbox(self, acc: Account) -> tuple[ServerPorts, str]:
        got = self._inboxes.get(acc.name)
        if got is None:
            ports = ServerPorts(acc)
            prefix = f"_INBOX.{next_nuid()}."
            ports.subscribe(prefix + "*", self._on_reply)
            got = self._inboxes[acc.name] = (ports, prefix)
        return got

    def _on_reply(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        fut = self._pending.pop(subject, None)
        if fut is not None and not fut.done():
            fut.set_result(payload)

    async def authorize(self, client: CalloutApplicant, opts: dict, account: str) -> AuthResult:
        """Ask the service about ``client`` (whose JWT, in operator mode, is of ``account``); a refused
        result when it says no, fails or is silent."""
        fail = AuthResult(False, _raw_user(opts))
        server = self.server
        assert server is not None  # bound by the server before it accepts clients
        st = self._setting(account)
        if st is not None and st.operator:
            # (the system account's advisory names the account the client's JWT is of)
            fail = AuthResult(False, fail.user, account=st.account)
        acc = self._account(st.account) if st is not None else None
        if st is None or acc is None:
            name = st.account if st is not None else account
            logger.warning('No valid account "%s" for auth callout request: account not found', name)
            return fail
        user_nkey = _user_nkey()
        request = encode_jwt(self._request_claims(server, client, opts, user_nkey, st), self.seed)
        payload, hdr = request.encode(), None
        if self.xkp is not None and st.xkey:
            payload = self.xkp.seal(payload, st.xkey)
            hdr = f"NATS/1.0\r\n{XKEY_HEADER}: {self.xkp.public_key}\r\n\r\n".encode()
        ports, prefix = self._inbox(acc)
        reply = prefix + next_nuid()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bytes | None] = loop.create_future()
        self._pending[reply] = fut

        def silent() -> None:
            if not fut.done():
                fut.set_result(None)

        timer = server.clock.call_later(server.options.auth_timeout_ns, silent)
        try:
            ports.publish(AUTH_CALLOUT_SUBJECT, reply, hdr, payload)
            answer = await fut
        finally:
            timer.cancel()
            self._pending.pop(reply, None)
        if answer is None:
            logger.debug('Authorization callout response not received in time on account "%s"', acc.name)
            self._auth_error_event(client, acc, "", st)  # the reference gives no reason for silence
            return fail
        try:
            return self._decide(answer, user_nkey, acc, server, st)
        except CalloutError as e:
            logger.warning("%s", e)
            self._auth_error_event(client, acc, str(e), st)
            return fail

    def _request_claims(
        self, server: ServerContext, client: CalloutApplicant, opts: dict, user_nkey: str, st: _Setting
    ) -> dict:
        info: dict = {
            "host": client.ip,
            "id": client.cid,
            "user": _raw_user(opts),
            "name": opts.get("name") or "",
            "kind": "Client",
            "type": "nats",
        }
        connect = {
            "jwt": opts.get("jwt"),
            "nkey": opts.get("nkey"),
            "sig": opts.get("sig"),
            "auth_token": opts.get("auth_token"),
            "user": opts.get("user"),
            "pass": opts.get("pass"),
            "name": opts.get("name"),
            "lang": opts.get("lang"),
            "version": opts.get("version"),
        }
        if connect["sig"]:
            info["nonce"] = client.nonce
        srv = {"name": server.server_name, "host": server.options.host, "id": server.server_id, "version": __version__}
        if self.xkp is not None and st.xkey:
            srv["xkey"] = self.xkp.public_key
        now = int(time.time())
        return {
            "aud": "nats-authorization-request",
            "exp": now + max(1, server.options.auth_timeout_ns // 1_000_000_000),
            "iat": now,
            "sub": st.issuer,
            "nats": {
                "server_id": srv,
                "user_nkey": user_nkey,
                "client_info": {k: v for k, v in info.items() if v},
                "connect_opts": {
                    **{k: v for k, v in connect.items() if isinstance(v, str) and v},
                    "protocol": opts.get("protocol") or 0,
                },
                "type": "authorization_request",
                "version": 2,
            },
        }

    def _open(self, answer: bytes, account: str, st: _Setting) -> bytes:
        if self.xkp is not None and st.xkey and answer and not answer.startswith(b"eyJ"):
            try:
                return self.xkp.open_(answer, st.xkey)
            except XKeyError as e:
                raise CalloutError(_title(f'error decrypting auth callout response on account "{account}": {e}'))
        return answer

    def _response(self, answer: bytes, user_nkey: str, acc: Account, server: ServerContext, st: _Setting) -> dict:
        """The response claims' ``nats`` part, checked as nats-server checks it."""
        if not answer:
            raise CalloutError(f'Auth callout violation: "no reason supplied" on account "{acc.name}"')
        msg = self._open(answer, acc.name, st)
        try:
            claims = J.decode(msg.decode("ascii", errors="replace"))
        except J.JWTError as e:
            raise CalloutError(_title(str(e))) from None
        n = claims["nats"]
        if n.get("type") != "authorization_response":
            raise CalloutError("Not an authorization response claim")
        issue = ""
        if not J.is_public_key(str(claims.get("sub", "")), "U"):
            issue = "Subject must be a user public key"
        elif not J.is_public_key(str(claims.get("aud", "")), "N"):
            issue = "Audience must be a server public key"
        elif not n.get("jwt") and not n.get("error"):
            issue = "Error or Jwt is required"
        elif n.get("jwt") and n.get("error"):
            issue = "Only Error or Jwt can be set"
        if issue:
            raise CalloutError(f"Authorization response had validation errors: {issue}")
        if claims.get("sub") != user_nkey:
            raise CalloutError("Auth callout violation: auth callout response is not for expected user")
        if claims.get("aud") != server.server_id:
            raise CalloutError("Auth callout violation: auth callout response is not for server")
        if n.get("error"):
            raise CalloutError(f"Auth callout service returned an error: {n['error']}")
        if st.operator and msg is answer:  # a plain answer must come from the account or its signing keys
            signer = n.get("issuer_account") or claims["iss"]
            if signer != st.account and signer not in st.signing_keys:
                raise CalloutError("Auth callout signing key is unknown")
        return n

    def _decide(self, answer: bytes, user_nkey: str, acc: Account, server: ServerContext, st: _Setting) -> AuthResult:
        n = self._response(answer, user_nkey, acc, server, st)
        try:
            user = J.decode(str(n["jwt"]))
        except J.JWTError as e:
            raise CalloutError(_title(str(e))) from None
        un = user["nats"]
        now = time.time()
        if un.get("type") != "user":
            raise CalloutError("Error validating user JWT: not a user claim")
        if user.get("exp") and now >= user["exp"]:
            raise CalloutError("Error validating user JWT: claim is expired")
        if user.get("nbf") and now < user["nbf"]:
            raise CalloutError("Error validating user JWT: claim is not yet valid")
        if user.get("sub") != user_nkey:
            raise CalloutError(
                f'Expected authorized user of "{user_nkey}" but got "{user.get("sub")}" on account "{acc.name}"'
            )
        if st.operator:
            target, perms_from = self._operator_target(user, acc, server, st)
        else:
            if un.get("issuer_account"):
                raise CalloutError(f'Error non operator mode account "{acc.name}": attempted to use issuer_account')
            if user["iss"] != st.issuer:
                raise CalloutError(
                    f'Wrong issuer for auth callout response on account "{acc.name}", expected '
                    f'"{st.issuer}" got "{user["iss"]}"'
                )
            placement = str(user.get("aud") or "")
            found = self._account(placement)
            if found is None:
                raise CalloutError(
                    f'No valid account "{placement}" for auth callout response on account "{acc.name}": '
                    "account not found"
                )
            target, perms_from = found, un
        perms = _permissions(perms_from, target.name == st.account)
        return AuthResult(
            True,
            str(user.get("name") or user_nkey),
            target.name,
            compile_permissions(perms),
            expires=int(user.get("exp") or 0),
            # The user JWT's subs/payload/data limits are not applied: nats-server builds the callout user
            # from its permissions alone (buildInternalNkeyUser; checked side by side with 2.15.1).
            jwt_iat=int(user.get("iat") or 0),
        )

    def _operator_target(self, user: dict, acc: Account, server: ServerContext, st: _Setting) -> tuple[Account, dict]:
        """Operator mode: the account the user JWT's issuer places the client in (the callout account, or
        one of its ``allowed_accounts``, signing keys included) and where its permissions come from (a
        scoped signing key's template, the JWT, or the account's default permissions)."""
        un = user["nats"]
        placement = un.get("issuer_account") or user["iss"]
        if placement != st.account and placement not in st.allowed_accounts and "*" not in st.allowed_accounts:
            raise CalloutError(
                f'Account "{user["iss"]}" not permitted as valid account option for auth callout for account '
                f'"{acc.name}"'
            )
        assert self.trust is not None  # operator mode
        claims = self.trust.lookup(placement)
        if claims is None:
            raise CalloutError(
                f'No valid account "{placement}" for auth callout response on account "{acc.name}": account not found'
            )
        if user["iss"] != claims.subject and user["iss"] not in claims.signing_keys:
            raise CalloutError(f'User JWT issuer "{user["iss"]}" is not known')
        scope = claims.signing_keys.get(user["iss"])
        if isinstance(scope, dict):
            template = scope.get("template")
            try:
                perms_from = expand_permissions(template if isinstance(template, dict) else {}, _Named(user), claims)
            except TemplateError as e:
                raise CalloutError(f"user JWT generated invalid permissions: {e}") from None
        elif any(un.get(k) for k in ("pub", "sub", "resp")):
            perms_from = un
        else:
            perms_from = claims.default_permissions
        return server.get_account(claims.subject), perms_from

    # -- advisories --------------------------------------------------------------------------------

    def _auth_error_event(self, client: CalloutApplicant, acc: Account, reason: str, st: _Setting) -> None:
        """nats-server's ``client_disconnect`` advisory for a refused client in the callout account, the
        refusal's text as the reason (the server-wide one in the system account is the connection's,
        as for any authorization failure: natsd.server.auth.events)."""
        server = self.server
        if server is None:
            return
        body = disconnect_advisory(server, client, client.connect_opts or {}, acc.name, reason)
        ServerPorts(acc).publish(_ACCOUNT_AUTH_ERR, "", None, json.dumps(body, separators=(",", ":")).encode())
