"""The xkey box as nkeys implements ``Seal``/``Open`` (auth callout encryption): a NaCl box
(Curve25519, XSalsa20-Poly1305) between the sender's private key and the recipient's public key,
framed as::

    b"xkv1" | nonce (24 random bytes) | box (16-byte Poly1305 tag, then the ciphertext)

Loaded only by servers with an ``auth_callout`` that names an ``xkey`` (PyNaCl, start-up time).
"""

from __future__ import annotations

import base64
import binascii
import os

from nacl.exceptions import CryptoError
from nacl.public import Box, PrivateKey, PublicKey

from natsd.config.xkey import PREFIX_CURVE, PREFIX_SEED, XKeyError, crc16, encode_key, public_xkey_bytes

__all__ = ["XKeyPair", "VERSION"]

VERSION = b"xkv1"
_NONCE_LEN = 24


class XKeyPair:
    """A Curve25519 key pair (``create()`` makes a fresh one; ``from_seed`` reads ``SX...``)."""

    __slots__ = ("_private",)

    def __init__(self, private: bytes) -> None:
        self._private = PrivateKey(private)

    @classmethod
    def create(cls) -> XKeyPair:
        return cls(bytes(PrivateKey.generate()))

    @classmethod
    def from_seed(cls, seed: str) -> XKeyPair:
        try:
            raw = base64.b32decode(seed + "=" * (-len(seed) % 8))
        except (binascii.Error, ValueError):
            raise XKeyError("invalid seed") from None
        if len(raw) != 36 or raw[0] & 0xF8 != PREFIX_SEED or ((raw[0] & 7) << 5) | (raw[1] >> 3) != PREFIX_CURVE:
            raise XKeyError("invalid seed")
        if crc16(raw[:-2]) != int.from_bytes(raw[-2:], "little"):
            raise XKeyError("invalid seed checksum")
        return cls(raw[2:34])

    @property
    def public_key(self) -> str:
        return encode_key(bytes([PREFIX_CURVE]), bytes(self._private.public_key))

    @property
    def seed(self) -> str:
        return encode_key(bytes([PREFIX_SEED | (PREFIX_CURVE >> 5), (PREFIX_CURVE & 31) << 3]), bytes(self._private))

    def _box(self, other: str) -> Box:
        raw = public_xkey_bytes(other)
        if raw is None:
            raise XKeyError("invalid public xkey")
        return Box(self._private, PublicKey(raw))

    def seal(self, message: bytes, recipient: str) -> bytes:
        """nkeys' ``Seal``: ``message`` for ``recipient`` (a public xkey) from this key."""
        nonce = os.urandom(_NONCE_LEN)
        return VERSION + bytes(self._box(recipient).encrypt(message, nonce))  # nonce | tag | ciphertext

    def open_(self, message: bytes, sender: str) -> bytes:
        """nkeys' ``Open``: a sealed ``message`` from ``sender`` (a public xkey) to this key."""
        if len(message) <= len(VERSION) + _NONCE_LEN:
            raise XKeyError("invalid input")
        if message[: len(VERSION)] != VERSION:
            raise XKeyError("unknown xkey version")
        nonce = message[len(VERSION) : len(VERSION) + _NONCE_LEN]
        try:
            return bytes(self._box(sender).decrypt(message[len(VERSION) + _NONCE_LEN :], nonce))
        except CryptoError:
            raise XKeyError("could not decrypt message") from None
