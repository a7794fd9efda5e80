"""Identities and permissions of leafnode links: the soliciting side's credentials, the accepting
side's checks, the user's permissions and the per-message filters built from them.

Soliciting side: a remote's ``tls {}`` becomes a client ``SSLContext`` (:func:`remote_ssl_context`,
the client port's :func:`natsd.config.tls.build_client_context`); ``credentials`` is a ``.creds``
file (:func:`read_creds`) whose seed signs the hub's INFO ``nonce`` (:func:`sign_nonce`), sent in
CONNECT as ``jwt``/``sig``; ``nkey`` is a seed whose public key and signature go as ``nkey``/``sig``.

Accepting side (:func:`authenticate`), in nats-server's order:

1. the leafnode block's single ``user``/``password`` (its ``account``);
2. its single ``nkey``: CONNECT's ``nkey`` must be it and ``sig`` its Ed25519 signature of the
   nonce this link's INFO carried (its ``account``);
3. its ``users`` list (each with an ``account``); with ``tls { verify_and_map: true }`` the
   certificate's e-mail/URI/DNS SANs or subject DN names the user instead of CONNECT's ``user``;
4. otherwise the server's own client authentication (:class:`natsd.server.auth.authenticator.Authenticator`):
   users and nkeys of ``authorization {}``/``accounts {}``, tokens, or, in operator mode, the user
   JWT of a ``.creds`` file (:class:`natsd.server.auth.trust.Trust`, the account named by the JWT);
   ``verify_and_map`` maps the certificate to one of the server's users;
5. no authentication configured anywhere: the link binds to the leafnode block's ``account``.

The code that checks passwords, signatures and JWTs is the client port's; only the order is here.

Permissions (:class:`LinkPerms`): a leaf's user may carry ``publish``/``subscribe`` permissions (config
users, nkey users, JWT users and their account's defaults). They read from the leaf's point of view:
``publish`` is what the leaf may send us, ``subscribe`` what we may send it. The accepting side
enforces them (a message or a literal ``LS+`` the user may not send: ``-ERR 'Permissions Violation for
Publish|Subscription to "<subject>"'`` and the link closed; what the user may not receive is not sent;
only interest in subjects the user may publish to is announced) and tells the leaf in its INFO
(``import``: the user's subscribe permission, ``export``: its publish permission), which a
soliciting natsd then applies on its side (no violations: it simply does not send). As in the
reference, ``$JS.ACK.`` and ``_R_.`` replies are not checked.

``allow_responses`` of a leaf's user (accepting side, as nats-server applies it to leaf links): a
message we send the leaf with a reply subject its user's subscribe permission does not cover (the
reference checks the reply against the link's swapped publish filter, which is the user's
subscribe permission) makes that reply subject publishable by the leaf ``max`` times (default 1)
within ``expires`` (0: no limit), although its publish permission refuses it. The INFO does not
mention it, and interest in the reply subject is not announced: a nats-server or natsd leaf
filters its side by the ``export`` it was told, so only a leaf that sends the reply anyway
benefits (as with nats-server as the hub).
"""

from __future__ import annotations

import base64
import re
import asyncio
import ssl
from typing import TYPE_CHECKING, Any, Iterable

from natsd.config.jwt import decode_sig, verify
from natsd.protocol.encoder import encode_err
from natsd.protocol.errors import permissions_publish
from natsd.protocol.leaf import encode_ls_minus
from natsd.config.options import SubjectPermission
from natsd.config.tls import build_client_context  # the client port's TLS plumbing
from natsd.server.auth.authenticator import AuthResult, SubjectFilter, check_password
from natsd.server.log import logger
from natsd.server.transport.tls import cert_identities, map_certificate_user
from natsd.subjects.tokens import subject_matches, subset
from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Timer
    from natsd.config.leafnodes import LeafNodeOptions
    from natsd.config.tls import TLSOptions
    from natsd.server.auth.authenticator import Authenticator, CompiledPermissions
    from natsd.server.context import ServerContext

__all__ = ["remote_ssl_context", "read_creds", "sign_nonce", "authenticate", "LinkPerms", "LeafIdentityMixin"]

# The decorated blocks of a .creds file: "-----BEGIN ...-----", the token, "------END ...------".
_CREDS_RE = re.compile(rb"\s*(?:(?:[-]{3,}.*[-]{3,}\r?\n)([\w\-.=]+)(?:\r?\n[-]{3,}.*[-]{3,}(\r?\n|\Z)))")


def remote_ssl_context(tls_options: TLSOptions | None) -> ssl.SSLContext | None:
    """The ``ssl.SSLContext`` for a remote's ``tls {}`` options (:class:`natsd.config.tls.TLSOptions`),
    or None for plaintext. The link itself starts in plaintext: the hub sends INFO, then both sides
    run the TLS handshake (see ``LeafConnection._start_tls``), as nats-server does."""
    if not tls_options:
        return None
    return build_client_context(tls_options)


def read_creds(path: str) -> tuple[str, bytes]:
    """``(user_jwt, seed)`` from a ``.creds`` file (the decorated JWT and NKEY SEED blocks)."""
    with open(path, "rb") as f:
        data = f.read()
    items = _CREDS_RE.findall(data)
    if len(items) < 2:
        raise ValueError(f"credentials file {path} malformed")
    return items[0][0].decode(), items[1][0]


def sign_nonce(seed: bytes, nonce: str) -> tuple[str, str]:
    """``(sig, public_key)``: the nonce signed with the seed, base64url without padding."""
    import nkeys  # the NATS ed25519 keys library

    kp = nkeys.from_seed(seed)
    try:
        sig = base64.urlsafe_b64encode(kp.sign(nonce.encode())).decode().rstrip("=")
        return sig, kp.public_key.decode()
    finally:
        kp.wipe()


class _Link(Protocol):
    """What :func:`authenticate` reads of the link: the nonce it sent, its transport."""

    @property
    def nonce(self) -> str: ...

    @property
    def transport(self) -> asyncio.BaseTransport | None: ...


def authenticate(ln: "LeafNodeOptions", auth: "Authenticator", d: dict, c: _Link) -> AuthResult:
    """The result of a leaf CONNECT ``d`` on link ``c`` (its ``nonce``, its transport for the
    peer certificate); ``account`` is the local account the link binds to. See the module doc."""
    user = d.get("user", "") or ""
    pw = d.get("pass", "") or ""
    if not isinstance(user, str) or not isinstance(pw, str):
        return AuthResult(False)
    if ln.username:
        return AuthResult(user == ln.username and check_password(ln.password, pw), user, ln.account or "$G")
    if ln.nkey:
        nk = d.get("nkey")
        sig = decode_sig(d.get("sig"))
        ok = nk == ln.nkey and sig is not None and bool(c.nonce) and verify(nk, c.nonce.encode(), sig)
        return AuthResult(ok, nk if isinstance(nk, str) else "", ln.account or "$G")
    tls_map = ln.tls is not None and ln.tls.verify_and_map
    peercert = c.transport.get_extra_info("peercert") if tls_map and c.transport is not None else None
    if ln.users:
        if tls_map:
            names = cert_identities(peercert)
            for u in ln.users:
                if u.user in names:
                    return AuthResult(True, u.user, u.account or "$G")
            return AuthResult(False)
        for u in ln.users:
            if u.user == user:
                return AuthResult(check_password(u.password, pw), user, u.account or "$G")
        return AuthResult(False, user)
    if not auth.auth_required:
        return AuthResult(True, "", ln.account or "$G")
    if tls_map and auth.trust is None:
        return map_certificate_user(auth, peercert)
    res = auth.authenticate(d, c.nonce)
    if res.ok and res.bcrypt is not None:
        # A leaf link connects rarely: the ~100 ms bcrypt check runs inline.
        res.ok = check_password(*res.bcrypt)
        if res.ok:
            auth.remember(res.cache_key)
    return res


# -- permissions ---------------------------------------------------------------------------------

_UNCHECKED = ("$JS.ACK.", "_R_.")  # replies the reference lets through its leaf permission checks
_INTERNAL_INTEREST = ("$LDS.", "$GR.", "_GR_.")
_REPLIES_MAX = 10_000  # allow_responses: tracked reply subjects per link


class _Checked:
    """A :class:`SubjectFilter` that lets the unchecked reply subjects through."""

    __slots__ = ("f",)

    def __init__(self, f: SubjectFilter) -> None:
        self.f = f

    def allows(self, subject: str) -> bool:
        return subject.startswith(_UNCHECKED) or self.f.allows(subject)


def _perm_json(f: SubjectFilter | None) -> dict | None:
    if f is None:
        return None
    d: dict = {}
    if f.allow:
        d["allow"] = list(f.allow)
    if f.deny:
        d["deny"] = list(f.deny)
    return d


def _perm_from_json(v: object) -> SubjectFilter | None:
    if not isinstance(v, dict):
        return None
    allow = [x for x in v.get("allow") or () if isinstance(x, str)]
    deny = [x for x in v.get("deny") or () if isinstance(x, str)]
    if not allow and not deny:
        return None
    return SubjectFilter(SubjectPermission(allow=allow, deny=deny))


class LinkPerms:
    """The permission filters of one link (see the module docstring). ``recv``/``send`` filter
    the messages each way (None: everything), ``interest`` what interest we announce, ``sub``
    (accepting side) the literal ``LS+`` subjects the leaf may ask for."""

    __slots__ = ("recv", "send", "interest", "sub", "imp", "exp", "replies", "resp_max", "resp_ttl")

    def __init__(
        self,
        recv: SubjectFilter | None,
        send: SubjectFilter | None,
        interest: SubjectFilter | None,
        sub: SubjectFilter | None,
    ) -> None:
        self.recv = _Checked(recv) if recv is not None else None
        self.send = _Checked(send) if send is not None else None
        self.interest = interest
        self.sub = sub
        self.imp = _perm_json(send)  # what the leaf may import (receive), from its point of view
        self.exp = _perm_json(recv)
        #: allow_responses (accepting side): reply subject -> [responses left, sent at (ns)]
        self.replies: dict[str, list[int]] | None = None
        self.resp_max = 1
        self.resp_ttl = 0

    @classmethod
    def for_hub(cls, perms: CompiledPermissions) -> "LinkPerms":
        """The accepting side, from the leaf user's ``CompiledPermissions``."""
        p = cls(recv=perms.publish, send=perms.subscribe, interest=perms.publish, sub=perms.subscribe)
        if perms.allow_responses:
            p.replies = {}
            p.resp_max = perms.responses_max
            p.resp_ttl = perms.responses_expires_ns
        return p

    def track_reply(self, reply: str, now: int) -> None:
        """allow_responses: we sent the leaf a message with reply subject ``reply``."""
        replies = self.replies
        if replies is None or self.send is None or self.send.allows(reply):
            return  # (no subscribe permission: the reference counts the reply as allowed already)
        if len(replies) >= _REPLIES_MAX:
            self._prune(now)
            if len(replies) >= _REPLIES_MAX:
                replies.clear()  # bounded: unanswered requests must not grow memory forever
        replies[reply] = [self.resp_max, now]

    def response_allowed(self, subject: str, now: int) -> bool:
        """allow_responses: may the leaf publish to ``subject`` (a reply it was sent)? Uses up
        one of its responses."""
        replies = self.replies
        if replies is None:
            return False
        e = replies.get(subject)
        if e is None:
            return False
        if self.resp_ttl > 0 and now - e[1] > self.resp_ttl:
            del replies[subject]
            return False
        e[0] -= 1
        if e[0] <= 0:
            del replies[subject]
        return True

    def _prune(self, now: int) -> None:
        ttl = self.resp_ttl
        if ttl > 0 and self.replies:
            for k in [k for k, e in self.replies.items() if now - e[1] > ttl]:
                del self.replies[k]

    @classmethod
    def for_spoke(cls, imp: object, exp: object) -> "LinkPerms":
        """The soliciting side, from the ``import``/``export`` of the hub's INFO."""
        i, e = _perm_from_json(imp), _perm_from_json(exp)
        return cls(recv=i, send=e, interest=i, sub=None)

    def announces(self, subject: str) -> bool:
        return self.interest is None or self.interest.allows(subject)

    def refuses_pub(self, subject: str) -> bool:
        return self.recv is not None and not self.recv.allows(subject)

    def refuses_sub(self, subject: str) -> bool:
        if self.sub is None or subject.startswith(_INTERNAL_INTEREST) or "*" in subject or ">" in subject:
            return False  # (wildcard interest: the messages are filtered one by one instead)
        return not self.sub.allows(subject)

    def info_fields(self) -> dict:
        d = {}
        if self.imp is not None:
            d["import"] = self.imp
        if self.exp is not None:
            d["export"] = self.exp
        return d


# -- per-message filters ---------------------------------------------------------------------------


def _matches_any(patterns: Iterable[str], subject: str) -> bool:
    for p in patterns:
        if subject_matches(p, subject):
            return True
    return False


_CACHE_MAX = 4096


class _DenyCache(dict):
    """subject -> denied?, for the per-message checks of one direction of a link: the deny
    patterns, and the user's permission filter when the link has one (both fixed per link; a
    publisher's subjects repeat). Cleared when full."""

    __slots__ = ("patterns", "allow")

    def __init__(self, patterns: tuple, allow: _Checked | None = None) -> None:
        super().__init__()
        self.patterns = patterns
        self.allow = allow  # natsd.server.auth.authenticator.SubjectFilter or None

    def __missing__(self, subject: str) -> bool:
        if len(self) >= _CACHE_MAX:
            self.clear()
        a = self.allow
        v = self[subject] = _matches_any(self.patterns, subject) or (a is not None and not a.allows(subject))
        return v


def _covered(patterns: Iterable[str], subject: str) -> bool:
    """Every subject ``subject`` (a subscription, maybe with wildcards) matches is in ``patterns``."""
    for p in patterns:
        if subset(subject, p):
            return True
    return False


class LeafIdentityMixin:
    """The identity side of :class:`natsd.server.leaf.node.LeafConnection` (which owns the
    attributes used here): TLS failures, JWT expiry, the user's permissions."""

    if TYPE_CHECKING:  # what the mixin uses of LeafConnection, declared for the type checker
        server: ServerContext
        prefix: str
        closed: bool
        perms: "LinkPerms | None"
        deny_in: tuple[str, ...]
        deny_out: tuple[str, ...]
        smap: dict[tuple[str, str | None], Any]
        _denied_in: "_DenyCache"
        _denied_out: "_DenyCache"
        _expire_timer: Timer | None

        def send(self, data: bytes) -> None: ...
        def close(self, reason: str = ..., graceful: bool = ...) -> None: ...

    def _apply_perms(self) -> None:
        p = self.perms
        self._denied_in = _DenyCache(self.deny_in, p.recv if p else None)
        self._denied_out = _DenyCache(self.deny_out, p.send if p else None)

    def _perm_violation(self, what: str, subject: str) -> None:
        """A leaf sent what its user may not (its side had the permissions in our INFO): the
        reference's -ERR, and the link is closed."""
        text = f'Permissions Violation for {what} to "{subject}"'
        logger.error("%s%s Violation on %r - Check other side configuration", self.prefix, what, subject)
        self.send(encode_err(text))
        self.close("Protocol Violation")

    def trace_dest_allowed(self, dest: str) -> bool:
        """May a message traced in over this link have its events published on ``dest``? What
        this side may take from the leaf (accepting side: its user's publish permission, as
        nats-server's leafSendAllowed; soliciting side: the import the hub gave us, as its
        leafReceiveAllowed). When not, the reference's publish violation (the link stays up):
        the message is dropped (natsd.server.msgtrace.start_leaf)."""
        p = self.perms
        if p is None or p.recv is None or p.recv.allows(dest):
            return True
        logger.error('%sPublish Violation - Subject "%s"', self.prefix, dest)
        self.send(encode_err(permissions_publish(dest)))
        return False

    def _perms_from_hub(self, imp: object, exp: object) -> None:
        """The hub told us our user's permissions: send only what we may export, take and
        announce only what we may import (interest already announced is withdrawn)."""
        self.perms = LinkPerms.for_spoke(imp, exp)
        self._apply_perms()
        for subject, queue in list(self.smap):
            if not self.perms.announces(subject):
                del self.smap[(subject, queue)]
                self.send(encode_ls_minus(subject, queue))

    def _arm_expiry(self, expires_s: int) -> None:
        """A link authenticated by a user JWT ends when the JWT (or its account's) expires."""
        delay = max(0, int(expires_s * 1_000_000_000 - self.server.clock.time_ns()))
        self._expire_timer = self.server.clock.call_later(delay, self._expired)

    def _expired(self) -> None:
        self._expire_timer = None
        if not self.closed:
            logger.error("%sUser Authentication Expired", self.prefix)
            self.send(encode_err("User Authentication Expired"))
            self.close("Authentication Expired")

    def tls_failed(self, message: str) -> None:
        """The TLS layer below gave up (a plaintext first record, a bad certificate, a timeout)."""
        if not self.closed:
            # nats-server's wording ("TLS leafnode handshake error: ...", reason TLS Handshake Failure)
            logger.error(
                "%sTLS leafnode handshake error: %s", self.prefix, message.removeprefix("TLS handshake error: ")
            )
            self.close("TLS Handshake Failure", graceful=False)
