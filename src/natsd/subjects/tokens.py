"""Subject rules, as nats-server applies them.

A subject is a non-empty string of ``.``-separated tokens. Every token is non-empty and contains
no whitespace (space, tab, CR, LF, FF). In the *subscribe* form two tokens are wildcards, but only
when they make up a whole token:

* ``*`` matches exactly one token;
* ``>`` matches one or more trailing tokens and must be the last token.

``foo*bar`` or ``a>`` are ordinary literal tokens (nats-server treats them so). A *publish*
subject must be valid and literal (no wildcard tokens).

Every function here is pure and works on ``str``; the hot path (per-message publish validation)
is :func:`is_valid_publish_subject`, written to avoid allocating for the common case.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

__all__ = [
    "PWC",
    "FWC",
    "TSEP",
    "is_valid_subject",
    "is_valid_publish_subject",
    "is_literal",
    "tokenize",
    "subject_matches",
    "subset",
    "subjects_collide",
    "has_wildcard_token",
    "matcher",
]

PWC = "*"  # partial wildcard: one token
FWC = ">"  # full wildcard: one or more trailing tokens
TSEP = "."


def _has_whitespace(s: str) -> bool:
    # nats-server rejects "\t\n\f\r " anywhere in a subject. Five substring tests beat a set
    # intersection for typical (short) subjects.
    return (" " in s) or ("\t" in s) or ("\n" in s) or ("\r" in s) or ("\f" in s)


def tokenize(subject: str) -> list[str]:
    """Split ``subject`` into its tokens (no validation)."""
    return subject.split(TSEP)


def is_valid_subject(subject: str) -> bool:
    """True if ``subject`` is valid in the subscribe form (wildcards allowed).

    Rules: non-empty, no empty tokens, no whitespace, ``>`` only as the last whole token.
    """
    if not subject or _has_whitespace(subject):
        return False
    tokens = subject.split(TSEP)
    last = len(tokens) - 1
    for i, t in enumerate(tokens):
        if not t:
            return False
        if t == FWC and i != last:
            return False
    return True


def is_literal(subject: str) -> bool:
    """True if no token of ``subject`` is a wildcard (``*`` or ``>`` as a whole token)."""
    if PWC not in subject and FWC not in subject:
        return True
    for t in subject.split(TSEP):
        if t == PWC or t == FWC:
            return False
    return True


def has_wildcard_token(subject: str) -> bool:
    """True if some whole token of ``subject`` is ``*`` or ``>``."""
    return not is_literal(subject)


def is_valid_publish_subject(subject: str) -> bool:
    """True if ``subject`` is valid and literal (the form PUB/HPUB accept)."""
    if not subject or _has_whitespace(subject):
        return False
    # Fast path: no wildcard characters and no empty token ("..", leading or trailing ".").
    if PWC not in subject and FWC not in subject:
        return not (subject[0] == TSEP or subject[-1] == TSEP or ".." in subject)
    for t in subject.split(TSEP):
        if not t or t == PWC or t == FWC:
            return False
    return True


def subject_matches(pattern: str, literal: str) -> bool:
    """True if the literal subject ``literal`` is matched by the subscribe-form ``pattern``."""
    if pattern == literal:
        return True
    pt = pattern.split(TSEP)
    lt = literal.split(TSEP)
    n = len(lt)
    for i, t in enumerate(pt):
        if i >= n:
            return False
        if t == FWC:
            return True  # '>' needs at least one token, and lt[i] exists
        if t != PWC and t != lt[i]:
            return False
    return len(pt) == n


@lru_cache(maxsize=256)
def matcher(pattern: str) -> Callable[[str], bool]:
    """A one-argument ``subject_matches(pattern, literal)`` for many literals: the pattern is
    split once (cached per pattern), a literal pattern is plain equality, and ``>`` alone
    matches everything."""
    if pattern == FWC:
        return lambda literal: True
    if is_literal(pattern):
        return pattern.__eq__
    pt = tuple(pattern.split(TSEP))
    fwc = pt[-1] == FWC
    if fwc:
        pt = pt[:-1]
    n = len(pt)
    checks = tuple((i, t) for i, t in enumerate(pt) if t != PWC)

    def match(literal: str) -> bool:
        lt = literal.split(TSEP)
        if (len(lt) <= n) if fwc else (len(lt) != n):
            return False
        for i, t in checks:
            if lt[i] != t:
                return False
        return True

    return match


def subset(sub: str, sup: str) -> bool:
    """True if every subject matched by ``sub`` is also matched by ``sup``.

    ``subset("foo.bar", "foo.*")`` and ``subset("foo.*.baz", "foo.>")`` are true;
    ``subset("foo.>", "foo.*")`` is false (``foo.a.b`` escapes it).
    """
    st = sub.split(TSEP)
    pt = sup.split(TSEP)
    ns = len(st)
    for i, t in enumerate(pt):
        if i >= ns:
            return False
        s = st[i]
        if t == FWC:
            return True  # sub has a token here (maybe '>' itself): all it matches is covered
        if s == FWC:
            return False  # sub matches arbitrarily many tokens, sup does not
        if t == PWC:
            continue  # '*' covers any single token, including sub's '*'
        if s != t:
            return False  # sub's '*' is wider than a literal; differing literals are disjoint
    return len(pt) == ns


def subjects_collide(a: str, b: str) -> bool:
    """True if at least one literal subject is matched by both ``a`` and ``b``."""
    if a == b:
        return True
    ta = a.split(TSEP)
    tb = b.split(TSEP)
    for x, y in zip(ta, tb):
        if x == FWC or y == FWC:
            return True
        if x == PWC or y == PWC:
            continue
        if x != y:
            return False
    # Equal-length prefixes matched; a longer side can only match if the shorter one ended in
    # '>', which returned above, so the lengths must agree.
    return len(ta) == len(tb)
