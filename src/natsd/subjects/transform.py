"""Subject transforms: nats-server's mapping destinations (``{{wildcard(n)}}``, ``$n``,
``{{partition(n,...)}}``, ``{{split(...)}}``, ``{{splitFromLeft/Right}}``,
``{{sliceFromLeft/Right}}``, ``{{left}}``, ``{{right}}``, ``{{random(n)}}``).

Used by streams (``subject_transform``, sources' ``subject_transforms``, ``republish``, through
:func:`transform`) and by account subject mappings (:mod:`natsd.subjects.mapping`). Pure
functions over subject strings; a destination is compiled once (:class:`SubjectTransform`) and
applied to the tokens of each subject.

Errors carry nats-server's texts (``invalid mapping destination: ... in <token>``) because the
config loader prints them as the reference does.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

__all__ = ["transform", "SubjectTransform", "MappingError", "validate_mapping", "BAD_SUBJECT", "tokenize_dest"]

# The kinds of destination token (nats-server's transform function types).
_LITERAL, _PARTITION, _WILDCARD, _SPLIT_LEFT, _SPLIT_RIGHT = 0, 1, 2, 3, 4
_SLICE_LEFT, _SLICE_RIGHT, _SPLIT, _LEFT, _RIGHT, _RANDOM = 5, 6, 7, 8, 9, 10

BAD_SUBJECT = "invalid subject"  # nats-server's ErrBadSubject
_INVALID = "invalid mapping destination"
_NOT_ENOUGH = f"{_INVALID}: not enough arguments passed to the function"
_TOO_MANY = f"{_INVALID}: too many arguments passed to the function"
_BAD_ARG = f"{_INVALID}: function argument is invalid or in the wrong format"
_OUT_OF_RANGE = f"{_INVALID}: wildcard index out of range"
_UNKNOWN = f"{_INVALID}: unknown function"
_BAD_DEST = f"{_INVALID}: invalid transform"


class MappingError(ValueError):
    """A destination nats-server refuses; ``str()`` is the reference's text."""


def _fn(name: str) -> re.Pattern[str]:
    # As the reference: case-insensitive first letters, arguments up to the last ")".
    pat = "".join(f"[{c.lower()}{c.upper()}]" if c.isupper() or i == 0 else c for i, c in enumerate(name))
    return re.compile(r"{{\s*" + pat + r"\s*\((.*)\)\s*}}")


# Tried in this order, as nats-server does (``split`` last among the split family so that
# ``splitFromLeft`` is not read as ``split``; its pattern needs "(" right after the name anyway).
# Compiled on first use: a server without mappings or stream transforms never pays for it.
_NAMES = [
    ("Wildcard", _WILDCARD),
    ("Partition", _PARTITION),
    ("SplitFromLeft", _SPLIT_LEFT),
    ("SplitFromRight", _SPLIT_RIGHT),
    ("SliceFromLeft", _SLICE_LEFT),
    ("SliceFromRight", _SLICE_RIGHT),
    ("Right", _RIGHT),
    ("Left", _LEFT),
    ("Split", _SPLIT),
    ("Random", _RANDOM),
]


@lru_cache(maxsize=1)
def _funcs() -> list[tuple[re.Pattern[str], int]]:
    return [(_fn(name), kind) for name, kind in _NAMES]


_COMMA = r",\s*"
_INT32_MAX = (1 << 31) - 1


def _atoi(s: str, token: str) -> int:
    s = s.strip(" ")
    try:
        if not s or not (s.isdigit() or (s[0] in "+-" and s[1:].isdigit())):
            raise ValueError(s)
        return int(s)
    except ValueError:
        raise MappingError(f"{_BAD_ARG} in {token}") from None


def _index_int(token: str, args: list[str], kind: int) -> tuple[int, list[int], int, str]:
    """A function of (wildcard index, int): splitFromLeft/Right, sliceFromLeft/Right, left, right."""
    if len(args) < 2:
        raise MappingError(f"{_NOT_ENOUGH} in {token}")
    if len(args) > 2:
        raise MappingError(f"{_TOO_MANY} in {token}")
    i = _atoi(args[0], token)
    n = _atoi(args[1], token)
    if not -(1 << 31) <= n <= _INT32_MAX:
        raise MappingError(f"{_BAD_ARG} in {token}")
    return kind, [i], n, ""


def _placeholder(token: str) -> tuple[int, list[int], int, str]:
    """(kind, wildcard indexes, int argument, string argument) of one destination token."""
    n = len(token)
    if n > 1 and token[0] == "$":
        # the old "$1" form; other "$..." tokens are literals (other features use them)
        rest = token[1:]
        if rest.isdigit() or (rest[:1] in "+-" and rest[1:].isdigit()):
            return _WILDCARD, [int(rest)], -1, ""
        return _LITERAL, [], -1, ""
    if not (n > 4 and token.startswith("{{") and token.endswith("}}")):
        return _LITERAL, [], -1, ""
    for pattern, kind in _funcs():
        m = pattern.search(token)
        if m is None:
            continue
        args = re.split(_COMMA, m.group(1))
        if kind == _WILDCARD:
            if len(args) == 1 and args[0] == "":
                raise MappingError(f"{_NOT_ENOUGH} in {token}")
            if len(args) > 1:
                raise MappingError(f"{_TOO_MANY} in {token}")
            return _WILDCARD, [_atoi(args[0], token)], -1, ""
        if kind == _PARTITION:
            count = _atoi(args[0], token)
            if count > _INT32_MAX:
                raise MappingError(f"{_BAD_ARG} in {token}")
            return _PARTITION, [_atoi(a, token) for a in args[1:]], count, ""
        if kind == _SPLIT:
            if len(args) < 2:
                raise MappingError(f"{_NOT_ENOUGH} in {token}")
            if len(args) > 2:
                raise MappingError(f"{_TOO_MANY} in {token}")
            i = _atoi(args[0], token)
            if " " in args[1] or "." in args[1]:
                raise MappingError(f"{_BAD_ARG} in {token}")
            return _SPLIT, [i], -1, args[1]
        if kind == _RANDOM:
            if len(args) != 1:
                raise MappingError(f"{_NOT_ENOUGH} in {token}")
            count = _atoi(args[0], token)
            if count > _INT32_MAX:
                raise MappingError(f"{_BAD_ARG} in {token}")
            return _RANDOM, [], count, ""
        return _index_int(token, args, kind)
    raise MappingError(f"{_UNKNOWN} in {token}")


def _subject_info(subject: str) -> tuple[bool, list[str], int, bool]:
    """(valid, tokens, number of "*", ends with ">") as nats-server's subjectInfo."""
    if not subject:
        return False, [], 0, False
    tokens = subject.split(".")
    npwc = 0
    fwc = False
    for t in tokens:
        if not t or fwc:
            return False, [], 0, False
        if t == ">":
            fwc = True
        elif t == "*":
            npwc += 1
    return True, tokens, npwc, fwc


def fnv1a32(data: bytes) -> int:
    """FNV-1a, 32 bits: the hash ``{{partition()}}`` buckets with (so partitions match the reference)."""
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


class SubjectTransform:
    """A compiled ``src -> dest`` transform (nats-server's ``subjectTransform``).

    ``rand(n)`` (default :func:`random.randrange`) draws ``{{random(n)}}``; tests inject their own.
    """

    __slots__ = ("src", "dest", "dtoks", "stoks", "kinds", "indexes", "ints", "strs", "templated", "rand")

    def __init__(self, src: str, dest: str, rand: Callable[[int], int] | None = None) -> None:
        """Compile; raises :class:`MappingError` with the reference's text when nats-server would refuse."""
        src = src or ">"
        sv, stoks, npwc, sfwc = _subject_info(src)
        dv, dtoks, dnpwc, dfwc = _subject_info(dest)
        if not sv or not dv or dnpwc > 0 or sfwc != dfwc:
            raise MappingError(BAD_SUBJECT)
        self.src, self.dest, self.stoks, self.dtoks = src, dest, stoks, dtoks
        if rand is None:
            from random import randrange  # (with the first transform, not at start-up: ADR 0015)

            rand = randrange
        self.rand = rand
        # Source token position of the n-th "*" (1-based, as destinations number them).
        star_at = [i for i, t in enumerate(stoks) if t == "*"]
        self.kinds: list[int] = []
        self.indexes: list[list[int]] = []
        self.ints: list[int] = []
        self.strs: list[str] = []
        for token in dtoks:
            kind, wild, n, s = _placeholder(token)
            if not (npwc > 0 or sfwc) and kind not in (_LITERAL, _RANDOM, _PARTITION):
                # a literal source has no wildcard to refer to
                raise MappingError(f"{_OUT_OF_RANGE} in {token}")
            positions: list[int] = []
            if kind not in (_LITERAL, _RANDOM) and (npwc > 0 or sfwc):
                for w in wild:
                    if w > npwc:
                        raise MappingError(f"{_OUT_OF_RANGE} in {token}: [{w}]")
                    positions.append(star_at[w - 1] if w >= 1 else 0)
            self.kinds.append(kind)
            self.indexes.append(positions)
            self.ints.append(n)
            self.strs.append(s)
        # Whether building the destination needs the subject's tokens at all.
        self.templated = any(k != _LITERAL for k in self.kinds) or dfwc

    def apply(self, subject: str) -> str:
        """The destination for ``subject`` (which the source matches)."""
        return self.apply_tokens(subject.split("."))

    def apply_tokens(self, tokens: list[str]) -> str:
        if not self.templated:
            return self.dest
        out: list[str] = []
        kinds, dtoks = self.kinds, self.dtoks
        for i, kind in enumerate(kinds):
            if kind == _LITERAL:
                if dtoks[i] == ">":
                    # the tokens the source's ">" matched
                    out.append(".".join(tokens[len(self.stoks) - 1 :]))
                    break
                out.append(dtoks[i])
                continue
            out.append(self._function(i, kind, tokens))
        return ".".join(out)

    def _function(self, i: int, kind: int, tokens: list[str]) -> str:
        n = self.ints[i]
        idx = self.indexes[i]
        if kind == _PARTITION:
            key = "".join(tokens[j] for j in idx) if idx else ".".join(tokens)
            return str(fnv1a32(key.encode()) % n) if n else "0"
        if kind == _RANDOM:
            return str(self.rand(n)) if n > 0 else "0"
        if kind == _WILDCARD:
            return tokens[idx[0]] if idx and idx[0] < len(tokens) else ""
        tok = tokens[idx[0]]
        size = len(tok)
        if kind == _SPLIT:
            return ".".join(p for p in tok.split(self.strs[i]) if p)
        if not 0 < n < size:
            return tok  # too short to split or slice at that size: unchanged, as the reference
        if kind == _SPLIT_LEFT:
            return f"{tok[:n]}.{tok[n:]}"
        if kind == _SPLIT_RIGHT:
            return f"{tok[: size - n]}.{tok[size - n :]}"
        if kind == _SLICE_LEFT:
            return ".".join(tok[j : j + n] for j in range(0, size, n))
        if kind == _SLICE_RIGHT:
            r = size % n
            parts = [tok[:r]] if r else []
            parts.extend(tok[j : j + n] for j in range(r, size, n))
            return ".".join(parts)
        if kind == _LEFT:
            return tok[:n]
        return tok[size - n :]  # _RIGHT


def validate_mapping(src: str, dest: str) -> SubjectTransform:
    """nats-server's ValidateMapping then NewSubjectTransform: the compiled transform, or
    :class:`MappingError` with the reference's text."""
    fwc = False
    for t in dest.split("."):
        n = len(t)
        if n == 0 or fwc:
            raise MappingError(f"{_BAD_DEST} in {t}")
        if n > 4 and t.startswith("{{") and t.endswith("}}"):
            if not any(p.search(t) for p, _ in _funcs()):
                raise MappingError(f"{_UNKNOWN} in {t}")
            continue
        if t == ">":
            fwc = True
        elif any(c in t for c in "\t\n\f\r "):
            raise MappingError(_BAD_DEST)
    return SubjectTransform(src, dest)


def tokenize_dest(subject: str) -> str:
    """``foo.*.*`` -> ``foo.$1.$2``: the identity destination of a wildcard source (the implicit
    remainder of weighted mappings)."""
    out = []
    n = 0
    for t in subject.split("."):
        if t == "*":
            n += 1
            out.append(f"${n}")
        else:
            out.append(t)
    return ".".join(out)


@lru_cache(maxsize=256)
def _compiled(src: str, dest: str) -> SubjectTransform | None:
    try:
        return SubjectTransform(src, dest)
    except MappingError:
        return None


def transform(src: str, dest: str, subject: str) -> str:
    """Apply the mapping ``src -> dest`` to ``subject`` (streams' subject transforms and
    republish). Returns "" when the destination cannot be built."""
    if dest == ">" or dest == src:
        return subject
    tr = _compiled(src, dest)
    if tr is None:
        return ""
    try:
        return tr.apply(subject)
    except IndexError:
        return ""
