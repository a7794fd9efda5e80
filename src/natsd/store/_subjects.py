"""Subject-filter matching for the stores (private).

The stores only need "does this stored (literal) subject match this filter": ``*`` matches one
token, ``>`` (last token only) one or more. This is kept local so ``natsd.store`` depends on
nothing but the standard library; it follows the same rules as ``natsd.subjects``.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["is_all", "is_literal", "subject_matches", "compile_filter"]


def is_all(filter: str) -> bool:
    """``""`` and ``">"`` mean "every subject" everywhere in the store API."""
    return filter == "" or filter == ">"


def is_literal(filter: str) -> bool:
    """True when ``filter`` has no wildcard token (``foo*bar`` is a literal token)."""
    if "*" not in filter and ">" not in filter:
        return True
    for tok in filter.split("."):
        if tok == "*" or tok == ">":
            return False
    return True


@lru_cache(maxsize=1024)
def _filter_tokens(filter: str) -> tuple[tuple[str, ...], bool]:
    toks = filter.split(".")
    if toks and toks[-1] == ">":
        return tuple(toks[:-1]), True
    return tuple(toks), False


def subject_matches(subject: str, filter: str) -> bool:
    """Whether literal ``subject`` matches ``filter`` (which may hold ``*`` and a final ``>``)."""
    if is_all(filter):
        return True
    if subject == filter:
        return True
    ftoks, fwc = _filter_tokens(filter)
    stoks = subject.split(".")
    n = len(ftoks)
    if fwc:
        if len(stoks) <= n:
            return False
    elif len(stoks) != n:
        return False
    for i in range(n):
        f = ftoks[i]
        if f != "*" and f != stoks[i]:
            return False
    return True


def compile_filter(filter: str):
    """A one-argument predicate for ``filter`` (cheap equality for literals)."""
    if is_all(filter):
        return lambda s: True
    if is_literal(filter):
        return filter.__eq__
    return lambda s: subject_matches(s, filter)
