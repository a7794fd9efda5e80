"""Filter pushdown for batch reads (Spark 4.1+ ``DataSourceReader.pushFilters``): pure translation
of Spark's filters into what a read can skip on the server.

What is pushed, and how exactly:

* ``subject = 'a.b'``, ``subject IN (...)``, ``subject LIKE 'a.%'`` (Spark's ``StringStartsWith``
  with a prefix ending in ``.``) become the consumers' filter subjects (``a.b``, ``a.>``); exact,
  so Spark does not evaluate them again. Values with wildcards or empty tokens are not subjects a
  message can have and are left to Spark. With option ``subjects`` set, the pushed literals are
  intersected with it (a literal no option filter matches reads nothing); a prefix is then left to
  Spark.
* ``seq`` comparisons (``=``, ``<``, ``<=``, ``>``, ``>=``) narrow the planned sequence range;
  exact.
* ``timestamp`` comparisons become a start time (the first sequence stored at or after it) and an
  end (the first sequence stored at or after it, exclusive). Stored times follow the server's
  clock, which may step back, so these filters are **also** returned to Spark: the range is a
  speed-up, and Spark's own evaluation keeps the answer exact.

``IS NOT NULL`` on those columns (which Spark adds by itself) is always true and dropped.
Anything else (``OR`` is never offered by Spark, ``NOT``, other columns) stays with Spark.
Spark compares timestamps in microseconds while the server stores nanoseconds: ``timestamp > T``
holds for a message stored at ``T + 1 µs`` or later, ``timestamp <= T`` for one before ``T + 1 µs``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone

__all__ = ["Pushed", "translate", "subject_matches", "PUSHDOWN_WORKER"]

# The PySpark worker that plans a read with filter pushdown (pyspark/sql/worker/...): a reader
# that implements pushFilters is refused by the other planner (DATA_SOURCE_PUSHDOWN_DISABLED), so
# the source hands its pushing reader only to this one (tests/unit/spark/test_pushdown.py checks
# that the installed PySpark still has it).
PUSHDOWN_WORKER = "data_source_pushdown_filters.py"

_US = 1000  # ns per µs
_NEVER_NULL = ("subject", "data", "stream", "seq", "timestamp")
_BAD_LITERAL = re.compile(r"[\s*>]|^\.|\.$|\.\.|^$")


@dataclass(frozen=True)
class Pushed:
    """What a batch read can skip; ``subjects=None`` means "no subject filter pushed"."""

    subjects: tuple[str, ...] | None = None
    seq_lo: int = 1
    seq_hi: int | None = None  # inclusive
    ts_from_ns: int | None = None  # inclusive
    ts_to_ns: int | None = None  # exclusive

    @property
    def nothing(self) -> bool:
        """Whether no row can match (an empty subject set or an empty range)."""
        return self.subjects == () or (self.seq_hi is not None and self.seq_hi < self.seq_lo)


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS subject matching (``*`` one token, ``>`` the rest, at least one token)."""
    p, s = pattern.split("."), subject.split(".")
    for i, tok in enumerate(p):
        if tok == ">":
            return len(s) > i
        if i >= len(s) or (tok != "*" and tok != s[i]):
            return False
    return len(p) == len(s)


def _ns(value) -> int | None:
    if not isinstance(value, datetime):
        return None
    if value.tzinfo is None:  # PySpark hands local wall-clock times for TIMESTAMP literals
        value = value.astimezone()
    delta = value.astimezone(timezone.utc) - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * _US


def _literal(v) -> str | None:
    return v if isinstance(v, str) and not _BAD_LITERAL.search(v) else None


def _subject_filter(f, option_subjects: tuple[str, ...]) -> tuple[str, ...] | None:
    """The filter subjects ``f`` means, or None when it cannot be pushed exactly."""
    kind = type(f).__name__
    if kind == "EqualTo":
        values = [f.value]
    elif kind == "In":
        values = list(f.value)
    elif kind == "StringStartsWith" and not option_subjects:
        prefix = f.value if isinstance(f.value, str) else ""
        if prefix.endswith(".") and _literal(prefix[:-1]):
            return (prefix + ">",)
        return None
    else:
        return None
    lits = [_literal(v) for v in values]
    if any(x is None for x in lits):
        return None
    keep = [x for x in lits if x and (not option_subjects or any(subject_matches(o, x) for o in option_subjects))]
    return tuple(dict.fromkeys(keep))


def _seq(p: Pushed, f) -> Pushed | None:
    kind, v = type(f).__name__, getattr(f, "value", None)
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    hi = p.seq_hi
    if kind == "EqualTo":
        return replace(p, seq_lo=max(p.seq_lo, v), seq_hi=v if hi is None else min(hi, v))
    if kind in ("GreaterThan", "GreaterThanOrEqual"):
        return replace(p, seq_lo=max(p.seq_lo, v + 1 if kind == "GreaterThan" else v))
    if kind in ("LessThan", "LessThanOrEqual"):
        top = v - 1 if kind == "LessThan" else v
        return replace(p, seq_hi=top if hi is None else min(hi, top))
    return None


def _time(p: Pushed, f) -> Pushed | None:
    kind, ns = type(f).__name__, _ns(getattr(f, "value", None))
    if ns is None or kind not in ("GreaterThan", "GreaterThanOrEqual", "EqualTo", "LessThan", "LessThanOrEqual"):
        return None
    if kind in ("GreaterThan", "GreaterThanOrEqual", "EqualTo"):
        start = ns + _US if kind == "GreaterThan" else ns
        p = replace(p, ts_from_ns=max(p.ts_from_ns or 0, start))
    if kind in ("LessThan", "LessThanOrEqual", "EqualTo"):
        end = ns if kind == "LessThan" else ns + _US
        p = replace(p, ts_to_ns=end if p.ts_to_ns is None else min(p.ts_to_ns, end))
    return p


def translate(filters, option_subjects: tuple[str, ...] = ()) -> tuple[Pushed, list]:
    """``(what to push, the filters Spark must still evaluate)``; the second list holds the very
    filter objects given (PySpark matches them by identity)."""
    p = Pushed()
    left = []
    for f in filters:
        col = getattr(f, "attribute", None)
        name = col[0] if isinstance(col, tuple) and len(col) == 1 else None
        if type(f).__name__ == "IsNotNull" and name in _NEVER_NULL:
            continue  # always true: every row has these columns
        if name == "subject" and p.subjects is None:
            subs = _subject_filter(f, option_subjects)
            if subs is not None:
                p = replace(p, subjects=subs)
                continue
        elif name == "seq":
            q = _seq(p, f)
            if q is not None:
                p = q
                continue
        elif name == "timestamp":
            q = _time(p, f)
            if q is not None:
                p = q  # a speed-up only: Spark evaluates it too (see the module docstring)
        left.append(f)
    return p, left
