"""Fresh nkeys and NATS JWTs for tests (no ``nsc``, nothing checked in).

Every key is generated at test time from ``os.urandom``; the JWTs are encoded here the way the
NATS JWT v2 layout defines them (``base64url(header).base64url(claims).base64url(ed25519 sig)``,
header ``{"typ":"JWT","alg":"ed25519-nkey"}``, ``jti`` = base32 of the SHA-256 of the claims
without ``jti``) and signed with the ``nkeys`` package::

    op = Identity.new("operator")
    acc = Identity.new("account")
    user = Identity.new("user")
    op_jwt = op.sign(operator_claims(op, "OP"))
    acc_jwt = op.sign(account_claims(acc, "A", op))
    user_jwt = acc.sign(user_claims(user, "u", acc))
    creds = creds_text(user_jwt, user.seed)
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from dataclasses import dataclass

import nkeys

PREFIX = {
    "operator": nkeys.PREFIX_BYTE_OPERATOR,
    "account": nkeys.PREFIX_BYTE_ACCOUNT,
    "user": nkeys.PREFIX_BYTE_USER,
    "server": nkeys.PREFIX_BYTE_SERVER,
}


def b64url(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


@dataclass
class Identity:
    """An nkey pair: ``seed`` (``S...``) and ``public`` (``O...``/``A...``/``U...``)."""

    seed: str
    public: str

    @classmethod
    def new(cls, kind: str) -> "Identity":
        seed = nkeys.encode_seed(os.urandom(32), PREFIX[kind]).decode()
        return cls(seed, nkeys.from_seed(seed.encode()).public_key.decode())

    def sign_bytes(self, data: bytes) -> bytes:
        return nkeys.from_seed(self.seed.encode()).sign(data)

    def sign(self, claims: dict) -> str:
        """Encode and sign ``claims`` (``iss`` is set to this key, ``jti`` computed)."""
        claims = dict(claims)
        claims["iss"] = self.public
        claims.pop("jti", None)
        claims.setdefault("iat", int(time.time()))
        claims["jti"] = (
            base64.b32encode(hashlib.sha256(json.dumps(claims, separators=(",", ":")).encode()).digest())
            .decode()
            .rstrip("=")
        )
        header = b64url(b'{"typ":"JWT","alg":"ed25519-nkey"}')
        body = b64url(json.dumps(claims, separators=(",", ":")).encode())
        signing_input = f"{header}.{body}".encode()
        return f"{header}.{body}.{b64url(self.sign_bytes(signing_input))}"


def operator_claims(
    op: Identity, name: str, *, system_account: str = "", signing_keys: list | None = None, **extra
) -> dict:
    nats: dict = {"type": "operator", "version": 2}
    if system_account:
        nats["system_account"] = system_account
    if signing_keys:
        nats["signing_keys"] = signing_keys
    return {"sub": op.public, "name": name, "nats": nats, **extra}


def account_claims(
    acc: Identity,
    name: str,
    *,
    jetstream: dict | None = None,
    imports: list | None = None,
    exports: list | None = None,
    revocations: dict | None = None,
    signing_keys: list | None = None,
    limits: dict | None = None,
    tiered: dict | None = None,
    mappings: dict | None = None,
    **extra,
) -> dict:
    lim = {
        "subs": -1,
        "data": -1,
        "payload": -1,
        "imports": -1,
        "exports": -1,
        "wildcards": True,
        "conn": -1,
        "leaf": -1,
    }
    # JetStream is off unless memory or disk storage is allowed, as in the JWT library's defaults.
    lim.update({"mem_storage": 0, "disk_storage": 0, "streams": 0, "consumer": 0})
    if jetstream is not None:
        lim.update(jetstream)
    if limits:
        lim.update(limits)
    nats: dict = {"limits": lim, "default_permissions": {"pub": {}, "sub": {}}, "type": "account", "version": 2}
    if tiered is not None:  # JetStream tiers live inside "limits" (the JWT's OperatorLimits)
        nats["limits"] = {
            k: v
            for k, v in lim.items()
            if k not in ("mem_storage", "disk_storage", "streams", "consumer", "max_ack_pending")
        }
        nats["limits"]["tiered_limits"] = tiered
    if imports:
        nats["imports"] = imports
    if exports:
        nats["exports"] = exports
    if revocations:
        nats["revocations"] = revocations
    if signing_keys:
        nats["signing_keys"] = signing_keys
    if mappings:
        nats["mappings"] = mappings
    return {"sub": acc.public, "name": name, "nats": nats, **extra}


def user_claims(
    user: Identity,
    name: str,
    *,
    pub: dict | None = None,
    sub: dict | None = None,
    resp: dict | None = None,
    bearer: bool = False,
    issuer_account: str = "",
    **extra,
) -> dict:
    nats: dict = {
        "pub": pub or {},
        "sub": sub or {},
        "subs": -1,
        "data": -1,
        "payload": -1,
        "type": "user",
        "version": 2,
    }
    if resp:
        nats["resp"] = resp
    if bearer:
        nats["bearer_token"] = True
    if issuer_account:
        nats["issuer_account"] = issuer_account
    return {"sub": user.public, "name": name, "nats": nats, **extra}


def creds_text(user_jwt: str, seed: str) -> str:
    """A ``.creds`` file as ``nsc`` writes it."""
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{user_jwt}\n"
        "------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{seed}\n"
        "------END USER NKEY SEED------\n\n"
        "*************************************************************\n"
    )


@dataclass
class OperatorSetup:
    """An operator with a system account and one or more accounts, as ``nsc`` would make them."""

    operator: Identity
    operator_jwt: str
    system: Identity
    system_jwt: str
    accounts: dict  # name -> (Identity, jwt)

    def user(self, account: str, name: str = "u", **kw) -> tuple[Identity, str]:
        acc = self.system if account == "SYS" else self.accounts[account][0]
        u = Identity.new("user")
        return u, acc.sign(user_claims(u, name, **kw))

    def creds(self, account: str, name: str = "u", **kw) -> str:
        u, jwt = self.user(account, name, **kw)
        return creds_text(jwt, u.seed)

    def config(
        self,
        *,
        resolver: str = "memory",
        resolver_dir: str = "",
        jetstream: bool = False,
        store_dir: str = "",
        extra: str = "",
    ) -> str:
        """A server config: ``operator``, ``system_account`` and a resolver over these accounts."""
        lines = [f"operator: {self.operator_jwt}", f"system_account: {self.system.public}"]
        if resolver == "memory":
            lines.append("resolver: MEMORY")
            lines.append("resolver_preload: {")
            lines.append(f"  {self.system.public}: {self.system_jwt}")
            for acc, jwt in self.accounts.values():
                lines.append(f"  {acc.public}: {jwt}")
            lines.append("}")
        else:
            lines.append(f"resolver: {{ type: full, dir: '{resolver_dir}', allow_delete: false }}")
            lines.append("resolver_preload: {")
            lines.append(f"  {self.system.public}: {self.system_jwt}")
            for acc, jwt in self.accounts.values():
                lines.append(f"  {acc.public}: {jwt}")
            lines.append("}")
        if jetstream:
            lines.append(f"jetstream: {{ store_dir: '{store_dir}' }}")
        if extra:
            lines.append(extra)
        return "\n".join(lines) + "\n"


def operator_setup(*names: str, account_kw: dict | None = None) -> OperatorSetup:
    """Operator + ``SYS`` + the named accounts; ``account_kw[name]`` extra account_claims args."""
    op = Identity.new("operator")
    sys_acc = Identity.new("account")
    op_jwt = op.sign(operator_claims(op, "OP", system_account=sys_acc.public))
    sys_jwt = op.sign(account_claims(sys_acc, "SYS"))
    accounts = {}
    for n in names:
        a = Identity.new("account")
        accounts[n] = (a, op.sign(account_claims(a, n, **((account_kw or {}).get(n, {})))))
    return OperatorSetup(op, op_jwt, sys_acc, sys_jwt, accounts)


def identity_files(mode: str, directory) -> tuple[str, str, str]:
    """For the client compatibility suites: (server config, good file, bad file).

    ``mode="nkey"``: files hold user seeds; the good one is an nkey user of the config, the bad
    one is not. ``mode="creds"``: operator mode; the good file is a valid ``.creds``, the bad one a
    ``.creds`` whose JWT has expired.
    """
    from pathlib import Path

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    good, bad = d / f"good.{mode}", d / f"bad.{mode}"
    if mode == "nkey":
        ok, stranger = Identity.new("user"), Identity.new("user")
        good.write_text(ok.seed + "\n")
        bad.write_text(stranger.seed + "\n")
        for path, ident in ((good, ok), (bad, stranger)):  # libnats wants the public key too
            Path(f"{path}.pub").write_text(ident.public + "\n")
        return f"authorization {{ users: [ {{ nkey: {ok.public} }} ] }}\n", str(good), str(bad)
    setup = operator_setup("A")
    good.write_text(setup.creds("A", "good"))
    bad.write_text(setup.creds("A", "expired", exp=int(time.time()) - 60))
    return setup.config(), str(good), str(bad)
