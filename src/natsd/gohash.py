"""nats-server's ``getHash``: the first ``size`` bytes of SHA-256 of a name, each byte taken modulo
62 as a base-62 digit.

nats-server uses it wherever a short stable name is derived from a longer one: the node name of a
``server_name`` (``edge1`` -> ``u0GDDaas``), a stream's identity (API level 5), the account hash of
the v2 ack subjects, MQTT session and shared-subscription names. One copy, so every one of them
spells it as the reference does.
"""

from __future__ import annotations

import hashlib

__all__ = ["DIGITS", "get_hash"]

#: nats-server's digits (``accounts.go``), upper case before lower case.
DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def get_hash(name: str, size: int = 8, digits: str = DIGITS) -> str:
    """The ``size``-character hash of ``name`` (``digits``: the 62 digits to map the bytes onto)."""
    b = hashlib.sha256(name.encode()).digest()
    return "".join(digits[b[i] % 62] for i in range(size))
