"""Identities of leafnode links: the soliciting side's credentials and the accepting side's checks.

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
4. otherwise the server's own client authentication (:class:`natsd.server.auth.Authenticator`):
   users and nkeys of ``authorization {}``/``accounts {}``, tokens, or, in operator mode, the user
   JWT of a ``.creds`` file (:class:`natsd.server.trust.Trust`, the account named by the JWT);
   ``verify_and_map`` maps the certificate to one of the server's users;
5. no authentication configured anywhere: the link binds to the leafnode block's ``account``.

The code that checks passwords, signatures and JWTs is the client port's; only the order is here.
Permissions of the user are not applied to the link (see the module's limits in the report).
"""

from __future__ import annotations

import base64
import re
from typing import TYPE_CHECKING

from natsd.config.jwt import decode_sig, verify
from natsd.server.auth import AuthResult, check_password
from natsd.server.tls import cert_identities, map_certificate_user

if TYPE_CHECKING:  # pragma: no cover
    from natsd.config.leafnodes import LeafNodeOptions
    from natsd.server.auth import Authenticator

__all__ = ["remote_ssl_context", "read_creds", "sign_nonce", "authenticate"]

# The decorated blocks of a .creds file: "-----BEGIN ...-----", the token, "------END ...------".
_CREDS_RE = re.compile(rb"\s*(?:(?:[-]{3,}.*[-]{3,}\r?\n)([\w\-.=]+)(?:\r?\n[-]{3,}.*[-]{3,}(\r?\n|\Z)))")


def remote_ssl_context(tls_options):
    """The ``ssl.SSLContext`` for a remote's ``tls {}`` options (:class:`natsd.config.tls.TLSOptions`),
    or None for plaintext. The link itself starts in plaintext: the hub sends INFO, then both sides
    run the TLS handshake (see ``LeafConnection._start_tls``), as nats-server does."""
    if not tls_options:
        return None
    from natsd.config.tls import build_client_context  # the client port's TLS plumbing

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


def authenticate(ln: "LeafNodeOptions", auth: "Authenticator", d: dict, c) -> AuthResult:
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
