"""Operator-mode credentials for tests: operator, account and user JWTs signed with nkeys.

A minimal encoder of the NATS JWT v2 format (``header.claims.signature``, base64url without
padding, ed25519 signature by the issuer's nkey over ``header.claims``), enough for a reference
server run with ``operator:``/``resolver: MEMORY`` and for ``.creds`` files.
"""

from __future__ import annotations

import base64
import json
import os
import time

import nkeys

__all__ = ["new_key", "encode_jwt", "encode_jwt_v1", "operator_setup", "operator_setup_v1"]


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def new_key(prefix: int):
    """A fresh nkeys KeyPair with the given public prefix byte (nkeys.PREFIX_BYTE_*)."""
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    return nkeys.from_seed(bytearray(seed)), bytes(seed)


def encode_jwt(issuer, subject: str, name: str, nats: dict) -> str:
    header = {"typ": "JWT", "alg": "ed25519-nkey"}
    claims = {
        "jti": base64.b32encode(os.urandom(20)).decode().rstrip("="),
        "iat": int(time.time()),
        "iss": issuer.public_key.decode(),
        "name": name,
        "sub": subject,
        "nats": {**nats, "version": 2},
    }
    signing_input = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(claims).encode())
    return signing_input + "." + _b64(issuer.sign(signing_input.encode()))


def encode_jwt_v1(issuer, subject: str, name: str, kind: str, nats: dict, **top) -> str:
    """A JWT in the v1 format (what nsc wrote before v2, still accepted by nats-server): header
    ``{"typ":"jwt","alg":"ed25519"}``, the claim ``type`` (and ``tags``, a user's ``issuer_account``)
    beside ``iss`` rather than in ``nats``, no ``nats.version``, and the signature over the claims
    chunk alone (v2 signs ``header.claims``)."""
    header = {"typ": "jwt", "alg": "ed25519"}
    claims = {
        "jti": base64.b32encode(os.urandom(20)).decode().rstrip("="),
        "iat": int(time.time()),
        "iss": issuer.public_key.decode(),
        "name": name,
        "sub": subject,
        "type": kind,
        **top,
        "nats": nats,
    }
    body = _b64(json.dumps(claims).encode())
    return _b64(json.dumps(header).encode()) + "." + body + "." + _b64(issuer.sign(body.encode()))


def _creds(user_jwt: str, user_seed: bytes) -> str:
    return (
        "-----BEGIN NATS USER JWT-----\n" + user_jwt + "\n------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n\n"
        "-----BEGIN USER NKEY SEED-----\n" + user_seed.decode() + "\n------END USER NKEY SEED------\n"
    )


def operator_setup_v1(dir_path, accounts: tuple[str, ...] = ("foo", "bar")) -> dict:
    """An operator and accounts in the v1 format, as nats-py's tests/nkeys/resolver_preload.conf has
    them (operator file, resolver MEMORY, resolver_preload), and a v1 user with a .creds file per
    account. Returns ``conf_path``, ``operator_jwt_path``, ``accounts`` (name -> public key),
    ``account_jwts`` and ``creds`` (name -> path)."""
    op, _ = new_key(nkeys.PREFIX_BYTE_OPERATOR)
    op_jwt = encode_jwt_v1(op, op.public_key.decode(), "OP", "operator", {})
    op_path = os.path.join(str(dir_path), "op.jwt")
    with open(op_path, "w") as f:
        f.write(op_jwt)
    pubs, jwts, creds = {}, {}, {}
    for name in accounts:
        acc, _ = new_key(nkeys.PREFIX_BYTE_ACCOUNT)
        pub = acc.public_key.decode()
        pubs[name] = pub
        jwts[name] = encode_jwt_v1(
            op,
            pub,
            name,
            "account",
            {
                "limits": {
                    "subs": -1,
                    "conn": -1,
                    "leaf": -1,
                    "imports": -1,
                    "exports": -1,
                    "data": -1,
                    "payload": -1,
                    "wildcards": True,
                }
            },
        )
        user, user_seed = new_key(nkeys.PREFIX_BYTE_USER)
        user_jwt = encode_jwt_v1(acc, user.public_key.decode(), f"{name}-user", "user", {})
        creds[name] = os.path.join(str(dir_path), f"{name}.creds")
        with open(creds[name], "w") as f:
            f.write(_creds(user_jwt, user_seed))
    conf = os.path.join(str(dir_path), "resolver_preload.conf")
    with open(conf, "w") as f:
        f.write(
            f'operator = "{op_path}"\n\nresolver = MEMORY\n\nresolver_preload = {{\n'
            + "".join(f'  # {n}\n  {pubs[n]} : "{jwts[n]}"\n\n' for n in accounts)
            + "}\n"
        )
    return {"conf_path": conf, "operator_jwt_path": op_path, "accounts": pubs, "account_jwts": jwts, "creds": creds}


def operator_setup(dir_path, account_limits: dict | None = None) -> dict:
    """Operator, account and user; returns paths and JWTs: ``operator_jwt_path``, ``account_pub``,
    ``account_jwt``, ``creds_path``. ``account_limits`` replaces entries of the account's
    ``limits`` (a value None removes the key)."""
    op, _ = new_key(nkeys.PREFIX_BYTE_OPERATOR)
    acc, _ = new_key(nkeys.PREFIX_BYTE_ACCOUNT)
    user, user_seed = new_key(nkeys.PREFIX_BYTE_USER)
    op_jwt = encode_jwt(op, op.public_key.decode(), "OP", {"type": "operator"})
    limits = {
        "subs": -1,
        "conn": -1,
        "leaf": -1,
        "imports": -1,
        "exports": -1,
        "data": -1,
        "payload": -1,
        "wildcards": True,
    }
    for k, v in (account_limits or {}).items():
        if v is None:
            limits.pop(k, None)
        else:
            limits[k] = v
    acc_jwt = encode_jwt(op, acc.public_key.decode(), "ACC", {"type": "account", "limits": limits})
    user_jwt = encode_jwt(
        acc,
        user.public_key.decode(),
        "leaf-user",
        {"type": "user", "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1},
    )
    op_path = os.path.join(str(dir_path), "op.jwt")
    with open(op_path, "w") as f:
        f.write(op_jwt)
    creds_path = os.path.join(str(dir_path), "leaf.creds")
    with open(creds_path, "w") as f:
        f.write(
            "-----BEGIN NATS USER JWT-----\n" + user_jwt + "\n------END NATS USER JWT------\n\n"
            "************************* IMPORTANT *************************\n"
            "NKEY Seed printed below can be used to sign and prove identity.\n\n"
            "-----BEGIN USER NKEY SEED-----\n" + user_seed.decode() + "\n------END USER NKEY SEED------\n"
        )
    return {
        "operator_jwt_path": op_path,
        "account_pub": acc.public_key.decode(),
        "account_jwt": acc_jwt,
        "creds_path": creds_path,
        "user_jwt": user_jwt,
    }
