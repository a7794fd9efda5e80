"""Curve25519 "xkeys" as the nkeys library encodes them (auth callout encryption): the key
format only, so configuration checks load no cryptography (the box is
:mod:`natsd.server.auth.xkeys`).

Keys are nkeys: base32 (no padding) of a prefix byte, the 32 key bytes and a CRC-16/XMODEM
(little endian). Public xkeys start with ``X`` (prefix byte ``23 << 3``); seeds with ``SX``.
"""

from __future__ import annotations

import base64
import binascii

__all__ = ["is_public_xkey", "public_xkey_bytes", "encode_key", "crc16", "XKeyError", "PREFIX_CURVE", "PREFIX_SEED"]

PREFIX_CURVE = 23 << 3  # 'X'
PREFIX_SEED = 18 << 3  # 'S'


class XKeyError(ValueError):
    """A key that does not decode, or a message that does not open."""


def crc16(data: bytes) -> int:
    """CRC-16/XMODEM (polynomial 0x1021, initial 0), the nkeys checksum."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def encode_key(prefix: bytes, raw: bytes) -> str:
    """``prefix`` (one byte, two for a seed) + ``raw`` + checksum, in unpadded base32."""
    body = prefix + raw
    return base64.b32encode(body + crc16(body).to_bytes(2, "little")).decode().rstrip("=")


def public_xkey_bytes(key: object) -> bytes | None:
    """The 32 bytes of a public xkey (``X...``), or None when it is not one."""
    if not isinstance(key, str) or len(key) != 56 or not key.startswith("X"):
        return None
    try:
        raw = base64.b32decode(key)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 35 or raw[0] != PREFIX_CURVE or crc16(raw[:-2]) != int.from_bytes(raw[-2:], "little"):
        return None
    return raw[1:33]


def is_public_xkey(key: object) -> bool:
    return public_xkey_bytes(key) is not None
