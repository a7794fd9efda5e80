"""Account subject mappings (nats-server's ``mappings {}``): published subjects rewritten before
routing, JetStream capture and imports, with weighted destinations for canary and A/B splits.

A :class:`SubjectMapper` holds an account's mappings in configuration order; :meth:`map` returns
the subject a publish is delivered to, or ``None`` when no mapping applies. The first mapping
whose source matches wins (a literal source by equality, a wildcard one by subset match), as
nats-server's ``selectMappedSubject``.

Weights: each destination has a weight in percent; when the weights do not total 100 and the
source is not itself listed, the source is added with the remainder (so 10 % to a canary leaves
90 % where it was); listing the source explicitly with less than 100 in all drops the rest
(deliberate loss, as the reference). A draw in [0, 100) picks the destination whose cumulative
weight exceeds it; ``rand`` is injectable so tests pick deterministically.
"""

from __future__ import annotations

from natsd.lazydataclass import dataclass
from typing import Callable

from natsd.subjects.tokens import is_literal, is_valid_subject, subject_matches
from natsd.subjects.transform import BAD_SUBJECT, MappingError, SubjectTransform, tokenize_dest, validate_mapping

__all__ = ["MapDest", "Mapping", "SubjectMapper", "MappingError"]


@dataclass
class MapDest:
    """One configured destination (nats-server's ``MapDest``): ``weight`` in percent."""

    subject: str
    weight: int = 100
    cluster: str = ""


class Mapping:
    """One source subject and its weighted destinations (cumulative weights, ascending)."""

    __slots__ = ("src", "wc", "dests", "cdests")

    def __init__(self, src: str, dests: list[MapDest]) -> None:
        """Validate and compile; raises :class:`MappingError` with nats-server's text."""
        if not is_valid_subject(src):
            raise MappingError(BAD_SUBJECT)
        self.src = src
        self.wc = not is_literal(src)
        seen: set[str] = set()
        totals: dict[str, int] = {}
        plain: list[tuple[SubjectTransform, int]] = []
        by_cluster: dict[str, list[tuple[SubjectTransform, int]]] = {}
        for d in dests:
            if d.subject in seen:
                raise MappingError(f'duplicate entry for "{d.subject}"')
            seen.add(d.subject)
            if d.weight > 100:
                raise MappingError("individual weights need to be <= 100")
            totals[d.cluster] = totals.get(d.cluster, 0) + d.weight
            if totals[d.cluster] > 100:
                raise MappingError("total weight needs to be <= 100")
            tr = validate_mapping(src, d.subject)
            (by_cluster.setdefault(d.cluster, []) if d.cluster else plain).append((tr, d.weight))
        self.dests = self._cumulative(plain, src in seen)
        # Cluster-scoped destinations: natsd has no clusters, so these never apply (kept so the
        # config is validated as the reference validates it).
        self.cdests = {c: self._cumulative(v, src in seen) for c, v in by_cluster.items()}

    def _cumulative(
        self, dests: list[tuple[SubjectTransform, int]], have_src: bool
    ) -> list[tuple[SubjectTransform, int]]:
        total = sum(w for _, w in dests)
        if total != 100 and not have_src:
            ident = SubjectTransform(self.src, tokenize_dest(self.src) if self.wc else self.src)
            dests = dests + [(ident, 100 if not dests else 100 - total)]
        dests = sorted(dests, key=lambda d: d[1])  # stable, as Go's sort of equal weights is not guaranteed
        out: list[tuple[SubjectTransform, int]] = []
        acc = 0
        for tr, w in dests:
            acc += w
            out.append((tr, acc))
        return out


class SubjectMapper:
    """An account's mappings; :meth:`map` is called for each publish only when there is one."""

    __slots__ = ("mappings", "rand")

    def __init__(self, rand: Callable[[int], int] | None = None) -> None:
        self.mappings: list[Mapping] = []
        if rand is None:
            from random import randrange  # (with the first mapper, not at start-up: ADR 0015)

            rand = randrange
        self.rand: Callable[[int], int] = rand

    def add(self, src: str, dests: list[MapDest]) -> None:
        """Add (or replace, keeping its place) the mapping of ``src``; raises :class:`MappingError`."""
        m = Mapping(src, dests)
        for i, old in enumerate(self.mappings):
            if old.src == src:
                self.mappings[i] = m
                return
        self.mappings.append(m)

    def __bool__(self) -> bool:
        return bool(self.mappings)

    def _find(self, subject: str) -> Mapping | None:
        for m in self.mappings:
            if (subject == m.src) if not m.wc else subject_matches(m.src, subject):
                return m
        return None

    def matches(self, subject: str) -> bool:
        """Whether a mapping applies to ``subject`` (no draw: runs ask this once for all their messages)."""
        return self._find(subject) is not None

    def map(self, subject: str) -> str | None:
        """The mapped subject for a publish to ``subject``, or ``None`` when none applies."""
        found = self._find(subject)
        if found is None:
            return None
        dests = found.dests
        if len(dests) == 1 and dests[0][1] == 100:
            tr = dests[0][0]
        else:
            w = self.rand(100)
            for tr, cum in dests:
                if w < cum:
                    break
            else:
                return ""  # the explicit source took less than 100 %: this publish is dropped
        # partition(n) of a literal source hashes the subject (the reference does so whenever a
        # wildcard mapping was tried first, which tokenized it; its empty-key case is an artefact
        # of its map order).
        return tr.apply(subject)
