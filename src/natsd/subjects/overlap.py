"""Subject overlap among many subjects without comparing every pair.

A stream's subjects must not overlap each other nor another stream's (``subjects_collide``:
some literal subject is matched by both). Comparing every pair is quadratic: 8,000 subjects
took 26 s on the event loop. :class:`OverlapTrie` holds subjects token by token (each node
knows the smallest index stored below it), so asking "which stored subject collides with this
one" walks only the branches that can match: the query's literal token, the stored ``*`` and the
stored ``>`` children; a query ``*`` visits every child of that node, a query ``>`` none (every
stored subject below collides). Realistic subject sets therefore cost time linear in their
total length.

An adversary can still build subject sets that make any exact check slow (wildcard-heavy
patterns that never collide: deciding overlap there is as hard as the orthogonal-vectors
problem); the ``budget`` of :func:`first_overlap` bounds the nodes visited, and the caller
decides what to do past it.

Semantics are exactly those of :func:`natsd.subjects.tokens.subjects_collide` (including for
invalid subjects: tokens are what ``split('.')`` gives).
"""

from __future__ import annotations

from natsd.subjects.tokens import FWC, PWC, TSEP

__all__ = ["OverlapTrie", "first_overlap", "OverlapBudgetExceeded"]

_NONE = 1 << 62  # "no index" (larger than any real one)


class OverlapBudgetExceeded(Exception):
    """The check visited more trie nodes than its budget allowed."""


class _Node:
    __slots__ = ("kids", "end", "lo")

    def __init__(self) -> None:
        self.kids: dict[str, _Node] = {}
        self.end = _NONE  # smallest index of a subject ending exactly here
        self.lo = _NONE  # smallest index of any subject ending here or below


class OverlapTrie:
    """Subjects with an index each; :meth:`first_collision` finds the smallest colliding index."""

    __slots__ = ("root", "visits", "budget")

    def __init__(self, budget: int = 0) -> None:
        self.root = _Node()
        self.visits = 0  # nodes visited by queries so far
        self.budget = budget  # 0 = unbounded; else OverlapBudgetExceeded past it

    def insert(self, subject: str, index: int) -> None:
        node = self.root
        if index < node.lo:
            node.lo = index
        for tok in subject.split(TSEP):
            nxt = node.kids.get(tok)
            if nxt is None:
                nxt = node.kids[tok] = _Node()
            node = nxt
            if index < node.lo:
                node.lo = index
        if index < node.end:
            node.end = index

    def first_collision(self, subject: str, below: int = _NONE) -> int:
        """The smallest index (< ``below``) of a stored subject colliding with ``subject``;
        -1 when none does."""
        toks = subject.split(TSEP)
        n = len(toks)
        best = below
        stack = [(self.root, 0)]
        visits = 0
        while stack:
            node, i = stack.pop()
            visits += 1
            if node.lo >= best:
                continue
            if i == n:
                if node.end < best:
                    best = node.end
                continue
            kids = node.kids
            t = toks[i]
            if t == FWC:
                # '>' matches one or more tokens: everything stored below collides.
                for child in kids.values():
                    if child.lo < best:
                        best = child.lo
                continue
            fw = kids.get(FWC)
            if fw is not None and fw.lo < best:
                best = fw.lo  # a stored '>' here collides with whatever is left of the query
            if t == PWC:
                for tok, child in kids.items():
                    if tok != FWC and child.lo < best:
                        stack.append((child, i + 1))
            else:
                exact = kids.get(t)
                if exact is not None and exact.lo < best:
                    stack.append((exact, i + 1))
                star = kids.get(PWC)
                if star is not None and star.lo < best:
                    stack.append((star, i + 1))
        self.visits += visits
        if self.budget and self.visits > self.budget:
            raise OverlapBudgetExceeded()
        return best if best < below else -1


def first_overlap(subjects: list[str], budget: int = 0) -> tuple[int, int] | None:
    """The first pair ``(i, j)``, i < j, of colliding subjects in the order a nested loop
    ``for i: for j > i`` finds it (smallest ``i``, then smallest ``j``), or None.

    Each subject is checked against the ones before it (the smallest earlier collider), and the
    pair minimal in (i, j) order is kept; once a pair is known, only earlier indices are looked
    for, which prunes most of the remaining work."""
    trie = OverlapTrie(budget)
    best: tuple[int, int] | None = None
    for j, s in enumerate(subjects):
        i = trie.first_collision(s, best[0] + 1 if best is not None else _NONE)
        if i >= 0 and (best is None or i < best[0]):
            best = (i, j)
        trie.insert(s, j)
    return best
