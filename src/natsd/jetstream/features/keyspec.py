"""The partition key of a per-key ordered pull consumer (``natsd.partition_key``): its text, parsed
once at create/update (natsd.jetstream.features.metadata), and how a message's key is read (by
natsd.jetstream.consumer.partition, which delivers by it)."""

from __future__ import annotations

import re

from natsd.protocol.headers import get_header
from natsd.store.base import StoreMsg
from natsd.subjects.tokens import tokenize

__all__ = ["KeySpec", "parse_key_spec"]

_WILDCARD = re.compile(r"^\{\{\s*wildcard\s*\(\s*(\d+)\s*\)\s*\}\}$")


class KeySpec:
    """How a message's key is read: ``token`` (index into the subject's tokens) or ``header``."""

    __slots__ = ("header", "text", "token")

    def __init__(self, text: str, token: int = -1, header: str = "") -> None:
        self.text = text
        self.token = token
        self.header = header

    def key(self, sm: StoreMsg) -> str:
        if self.header:
            v = get_header(sm.hdr, self.header)
            return "h:" + v if v is not None else f"#{sm.seq}"  # no header: no constraint
        toks = sm.subject.split(".")
        return "t:" + toks[self.token] if self.token < len(toks) else f"#{sm.seq}"


def parse_key_spec(value: str, filters: list[str]) -> KeySpec | str:
    """The KeySpec of a ``natsd.partition_key`` value, or why it is invalid."""
    v = value.strip()
    if v.startswith("header:"):
        name = v[7:].strip()
        if not name or any(c in name for c in ": \t\r\n"):
            return f'"{value}" is not header:<Name>'
        return KeySpec(v, header=name)
    m = _WILDCARD.match(v)
    if not m:
        return f'"{value}" is not {{{{wildcard(n)}}}} or header:<Name>'
    n = int(m.group(1))
    if len(filters) != 1:
        return "{{wildcard(n)}} needs exactly one filter subject"
    stars = [i for i, t in enumerate(tokenize(filters[0])) if t == "*"]
    if not 1 <= n <= len(stars):
        return f"the filter subject {filters[0]} has no wildcard {n}"
    return KeySpec(v, token=stars[n - 1])
