"""An auth callout service written with nats-py, as NATS' documentation shows one (ADR-26): it
subscribes to ``$SYS.REQ.USER.AUTH`` as one of the ``auth_users``, reads the authorization request
JWT (opening it with its xkey when the server sealed it), and answers with an authorization
response JWT signed by the account key named as ``issuer`` in the server's configuration.

Independent of natsd's own code on purpose: JWTs are built here with ``nkeys`` and the xkey box
with PyNaCl directly, so the tests check natsd against the wire format, not against itself.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from typing import Callable

import nkeys
from nacl.public import Box, PrivateKey, PublicKey

__all__ = ["Keys", "CalloutService", "decode_part", "new_keys", "sign"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def decode_part(token: str, i: int = 1) -> dict:
    part = token.split(".")[i]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def sign(claims: dict, seed: bytes) -> str:
    """``claims`` as a nats JWT signed by ``seed`` (``iss``, ``iat`` and ``jti`` filled in)."""
    return _sign(claims, seed)


def _sign(claims: dict, seed: bytes) -> str:
    kp = nkeys.from_seed(bytearray(seed))
    body = dict(claims, iat=int(time.time()), iss=kp.public_key.decode())
    body["jti"] = base64.b32encode(hashlib.sha256(json.dumps(body).encode()).digest()).decode().rstrip("=")
    head = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    payload = _b64(json.dumps(body).encode())
    return f"{head}.{payload}.{_b64(bytes(kp.sign(f'{head}.{payload}'.encode())))}"


def _crc_encode(prefix: bytes, raw: bytes) -> str:
    body = prefix + raw
    return base64.b32encode(body + nkeys.crc16(bytearray(body)).to_bytes(2, "little")).decode().rstrip("=")


def _xkey_raw(public: str) -> bytes:
    return base64.b32decode(public + "=" * (-len(public) % 8))[1:33]


@dataclass
class Keys:
    account_seed: bytes  # the issuer
    account: str
    xkey_private: PrivateKey
    xkey: str  # public, X...


def new_keys() -> Keys:
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_ACCOUNT)
    priv = PrivateKey.generate()
    return Keys(
        seed,
        nkeys.from_seed(bytearray(seed)).public_key.decode(),
        priv,
        _crc_encode(bytes([23 << 3]), bytes(priv.public_key)),
    )


@dataclass
class CalloutService:
    """``decide(request nats claims) -> dict | str | None``: the user claims to grant (``aud`` = the
    account, ``nats`` = permissions/limits), an error text, or None to stay silent."""

    keys: Keys
    decide: Callable[[dict], dict | str | None]
    requests: list[dict] = field(default_factory=list)
    encrypted: list[bool] = field(default_factory=list)

    async def handle(self, msg) -> None:
        data = msg.data
        server_xkey = (msg.headers or {}).get("Nats-Server-Xkey")
        if server_xkey:
            box = Box(self.keys.xkey_private, PublicKey(_xkey_raw(server_xkey)))
            assert data[:4] == b"xkv1"
            data = box.decrypt(data[28:], data[4:28])
        self.encrypted.append(bool(server_xkey))
        req = decode_part(data.decode())
        self.requests.append(req)
        n = req["nats"]
        decision = self.decide(n)
        if decision is None:
            return
        resp: dict = {
            "sub": n["user_nkey"],
            "aud": n["server_id"]["id"],
            "nats": {"type": "authorization_response", "version": 2},
        }
        if isinstance(decision, str):
            resp["nats"]["error"] = decision
        else:
            decision = dict(decision)
            seed = decision.pop("seed", self.keys.account_seed)  # operator mode: another account may issue
            user = {
                "sub": n["user_nkey"],
                **decision,
                "nats": {"type": "user", "version": 2, **decision.get("nats", {})},
            }
            resp["nats"]["jwt"] = _sign(user, seed)
        out = _sign(resp, self.keys.account_seed).encode()
        if server_xkey:
            box = Box(self.keys.xkey_private, PublicKey(_xkey_raw(server_xkey)))
            nonce = os.urandom(24)
            out = b"xkv1" + bytes(box.encrypt(out, nonce))
        await msg.respond(out)
