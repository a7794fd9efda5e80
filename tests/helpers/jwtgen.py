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

__all__ = ["new_key", "encode_jwt", "operator_setup"]


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def new_key(prefix: int):
    """A fresh nkeys KeyPair with the given public prefix byte (nkeys.PREFIX_BYTE_*)."""
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    return nkeys.from_seed(bytearray(seed)), bytes(seed)


def encode_jwt(issuer, subject: str, name: str, nats: dict) -> str:
    header = {"typ": "JWT", "alg": "ed25519-nkey"}
    claims = {"jti": base64.b32encode(os.urandom(20)).decode().rstrip("="), "iat": int(time.time()),
              "iss": issuer.public_key.decode(), "name": name, "sub": subject, "nats": {**nats, "version": 2}}
    signing_input = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(claims).encode())
    return signing_input + "." + _b64(issuer.sign(signing_input.encode()))


def operator_setup(dir_path, account_limits: dict | None = None) -> dict:
    """Operator, account and user; returns paths and JWTs: ``operator_jwt_path``, ``account_pub``,
    ``account_jwt``, ``creds_path``. ``account_limits`` replaces entries of the account's
    ``limits`` (a value None removes the key)."""
    op, _ = new_key(nkeys.PREFIX_BYTE_OPERATOR)
    acc, _ = new_key(nkeys.PREFIX_BYTE_ACCOUNT)
    user, user_seed = new_key(nkeys.PREFIX_BYTE_USER)
    op_jwt = encode_jwt(op, op.public_key.decode(), "OP", {"type": "operator"})
    limits = {"subs": -1, "conn": -1, "leaf": -1, "imports": -1, "exports": -1, "data": -1, "payload": -1,
              "wildcards": True}
    for k, v in (account_limits or {}).items():
        if v is None:
            limits.pop(k, None)
        else:
            limits[k] = v
    acc_jwt = encode_jwt(op, acc.public_key.decode(), "ACC", {"type": "account", "limits": limits})
    user_jwt = encode_jwt(acc, user.public_key.decode(), "leaf-user",
                          {"type": "user", "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1})
    op_path = os.path.join(str(dir_path), "op.jwt")
    with open(op_path, "w") as f:
        f.write(op_jwt)
    creds_path = os.path.join(str(dir_path), "leaf.creds")
    with open(creds_path, "w") as f:
        f.write("-----BEGIN NATS USER JWT-----\n" + user_jwt + "\n------END NATS USER JWT------\n\n"
                "************************* IMPORTANT *************************\n"
                "NKEY Seed printed below can be used to sign and prove identity.\n\n"
                "-----BEGIN USER NKEY SEED-----\n" + user_seed.decode() + "\n------END USER NKEY SEED------\n")
    return {"operator_jwt_path": op_path, "account_pub": acc.public_key.decode(), "account_jwt": acc_jwt,
            "creds_path": creds_path, "user_jwt": user_jwt}
