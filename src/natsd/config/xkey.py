"""Curve25519 "xkeys" as the nkeys library encodes and uses them (auth callout encryption).

Keys are nkeys: base32 (no padding) of a prefix byte, the 32 key bytes and a CRC-16 (little
endian). Public xkeys start with ``X`` (prefix byte ``23 << 3``); seeds with ``SX``.

``seal``/``open_`` are nkeys' ``Seal``/``Open``: a NaCl box (Curve25519, XSalsa20-Poly1305)
between the sender's private key and the recipient's public key, framed as::

    b"xkv1" | nonce (24 random bytes) | box (16-byte Poly1305 tag, then the ciphertext)
"""

from __future__ import annotations

import base64
import binascii

__all__ = ["XKeyPair", "is_public_xkey", "public_xkey_bytes", "seal", "open_", "XKeyError"]

_PREFIX_CURVE = 23 << 3  # 'X'
_PREFIX_SEED = 18 << 3  # 'S'
VERSION = b"xkv1"
_NONCE_LEN = 24


class XKeyError(ValueError):
    """A key that does not decode, or a message that does not open."""


def _crc16(data: bytes) -> int:
    import nkeys

    return int(nkeys.crc16(bytearray(data)))


def _encode(prefix: bytes, raw: bytes) -> str:
    body = prefix + raw
    return base64.b32encode(body + _crc16(body).to_bytes(2, "little")).decode().rstrip("=")


def public_xkey_bytes(key: object) -> bytes | None:
    """The 32 bytes of a public xkey (``X...``), or None when it is not one."""
    if not isinstance(key, str) or len(key) != 56 or not key.startswith("X"):
        return None
    try:
        raw = base64.b32decode(key)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 35 or raw[0] != _PREFIX_CURVE or _crc16(raw[:-2]) != int.from_bytes(raw[-2:], "little"):
        return None
    return raw[1:33]


def is_public_xkey(key: object) -> bool:
    return public_xkey_bytes(key) is not None


class XKeyPair:
    """A Curve25519 key pair (``create()`` makes a fresh one; ``from_seed`` reads ``SX...``)."""

    __slots__ = ("_private",)

    def __init__(self, private: bytes) -> None:
        from nacl.public import PrivateKey

        self._private = PrivateKey(private)

    @classmethod
    def create(cls) -> XKeyPair:
        from nacl.public import PrivateKey

        return cls(bytes(PrivateKey.generate()))

    @classmethod
    def from_seed(cls, seed: str) -> XKeyPair:
        pad = "=" * (-len(seed) % 8)
        try:
            raw = base64.b32decode(seed + pad)
        except (binascii.Error, ValueError):
            raise XKeyError("invalid seed") from None
        b1 = raw[0] & 0xF8 if raw else 0
        b2 = ((raw[0] & 7) << 5) | ((raw[1] & 0xF8) >> 3) if len(raw) > 1 else 0
        if len(raw) != 36 or b1 != _PREFIX_SEED or b2 != _PREFIX_CURVE:
            raise XKeyError("invalid seed")
        if _crc16(raw[:-2]) != int.from_bytes(raw[-2:], "little"):
            raise XKeyError("invalid seed checksum")
        return cls(raw[2:34])

    @property
    def public_key(self) -> str:
        return _encode(bytes([_PREFIX_CURVE]), bytes(self._private.public_key))

    @property
    def seed(self) -> str:
        b1 = _PREFIX_SEED | (_PREFIX_CURVE >> 5)
        b2 = (_PREFIX_CURVE & 31) << 3
        return _encode(bytes([b1, b2]), bytes(self._private))

    def seal(self, message: bytes, recipient: str) -> bytes:
        return seal(self, message, recipient)

    def open_(self, message: bytes, sender: str) -> bytes:
        return open_(self, message, sender)


def _box(pair: XKeyPair, other: str):
    from nacl.public import Box, PublicKey

    raw = public_xkey_bytes(other)
    if raw is None:
        raise XKeyError("invalid public xkey")
    return Box(pair._private, PublicKey(raw))


def seal(pair: XKeyPair, message: bytes, recipient: str) -> bytes:
    import os

    nonce = os.urandom(_NONCE_LEN)
    sealed = _box(pair, recipient).encrypt(message, nonce)  # nonce | tag | ciphertext
    return VERSION + bytes(sealed)


def open_(pair: XKeyPair, message: bytes, sender: str) -> bytes:
    from nacl.exceptions import CryptoError

    if len(message) <= len(VERSION) + _NONCE_LEN:
        raise XKeyError("invalid input")
    if message[: len(VERSION)] != VERSION:
        raise XKeyError("unknown xkey version")
    nonce = message[len(VERSION) : len(VERSION) + _NONCE_LEN]
    try:
        return bytes(_box(pair, sender).decrypt(message[len(VERSION) + _NONCE_LEN :], nonce))
    except CryptoError:
        raise XKeyError("could not decrypt message") from None
