"""nats-server's ``getHash``: the first ``size`` bytes of SHA-256 of a name, each byte taken modulo
62 as a base-62 digit.

nats-server uses it wherever a short stable name is derived from a longer one: the node name of a
``server_name`` (``edge1`` -> ``u0GDDaas``), a stream's identity (API level 5), the account hash of
the v2 ack subjects, MQTT session and shared-subscription names. One copy, so every one of them
spells it as the reference does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hashlib import sha256
else:
    try:
        # sha256: the interpreter's own SHA-256, the same digest as hashlib's without loading OpenSSL's
        # digests (hashlib with _hashlib: ~1.5 ms of a -js start, which names its node; issue 31); also
        # for the other digests of a JetStream start (a template's checksum)
        from _sha256 import sha256
    except ImportError:  # pragma: no cover (Python 3.12 on: _sha2; else hashlib's)
        try:
            from _sha2 import sha256
        except ImportError:
            from hashlib import sha256

__all__ = ["DIGITS", "get_hash", "sha256"]

#: nats-server's digits (``accounts.go``), upper case before lower case.
DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def get_hash(name: str, size: int = 8, digits: str = DIGITS) -> str:
    """The ``size``-character hash of ``name`` (``digits``: the 62 digits to map the bytes onto)."""
    b = sha256(name.encode()).digest()
    return "".join(digits[b[i] % 62] for i in range(size))
