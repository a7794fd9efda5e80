"""The Sublist: a subject trie with a bounded match cache, after nats-server's ``sublist.go``.

Structure: a :class:`_Level` holds the children of one token position: ``nodes`` for literal
tokens, plus one ``pwc`` slot for ``*`` and one ``fwc`` slot for ``>``. A :class:`_Node` holds the
items subscribed at exactly that subject (``psubs``, plain; ``qsubs``, per queue group name) and
the next level. ``match(subject)`` walks literal, ``*`` and ``>`` branches together and returns a
:class:`SublistResult`; items from every matching node are gathered, and queue members are
grouped by queue name across nodes (so ``foo.*`` and ``foo.bar`` members of queue ``q`` form one
group, and a publisher delivers to exactly one of them).

The cache maps a literal subject to its immutable result. It holds at most ``CACHE_MAX`` (1024)
entries; when it grows beyond that, the oldest entries are dropped until ``CACHE_SWEEP`` (256)
remain (nats-server sweeps at random; dropping the oldest is as cheap and more predictable).
Insert and remove invalidate only the cached subjects the changed subscription matches: a literal
subject drops one key, a wildcard one scans the (bounded) cache. A warm lookup is one dict get.

Items are any hashable objects (client subscriptions, API handlers); an item is stored at most
once per (subject, queue). The Sublist is not thread-safe: natsd uses it from one event loop.
"""

from __future__ import annotations

from itertools import islice
from typing import Any, Callable, Generic, Hashable, Iterator, TypeVar

from natsd.subjects.tokens import FWC, PWC, TSEP, is_valid_subject, subject_matches

__all__ = ["Sublist", "SublistResult", "EMPTY_RESULT", "InvalidSubjectError", "CACHE_MAX", "CACHE_SWEEP"]

T = TypeVar("T", bound=Hashable)

CACHE_MAX = 1024  # nats-server slCacheMax
CACHE_SWEEP = 256  # nats-server slCacheSweep: size the cache is reduced to
_JOINED_SCAN_MIN = 64  # below this many cached subjects the plain loop is as quick


class InvalidSubjectError(ValueError):
    """Raised by :meth:`Sublist.insert` for a subject that is not valid in the subscribe form
    (nats-server's ``ErrInvalidSubject``: "sublist: invalid subject")."""


class SublistResult:
    """The immutable answer to :meth:`Sublist.match`.

    ``psubs``: tuple of plain items. ``qsubs``: tuple of tuples, one per queue group, holding that
    group's members; ``queues[i]`` is the name of group ``qsubs[i]``.
    """

    __slots__ = ("psubs", "qsubs", "queues")

    psubs: tuple
    qsubs: tuple
    queues: tuple

    def __init__(self, psubs: tuple = (), qsubs: tuple = (), queues: tuple = ()) -> None:
        object.__setattr__(self, "psubs", psubs)
        object.__setattr__(self, "qsubs", qsubs)
        object.__setattr__(self, "queues", queues)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("SublistResult is immutable")

    def __bool__(self) -> bool:
        return bool(self.psubs or self.qsubs)

    def __repr__(self) -> str:
        groups = dict(zip(self.queues, self.qsubs))
        return f"SublistResult(psubs={self.psubs!r}, qsubs={groups!r})"


EMPTY_RESULT = SublistResult()


class _Node:
    __slots__ = ("next", "psubs", "qsubs", "res")

    def __init__(self) -> None:
        self.next: _Level | None = None  # created only when a longer subject passes through
        # dicts used as insertion-ordered sets (item -> None): deterministic fan-out order.
        self.psubs: dict = {}
        self.qsubs: dict[str, dict] | None = None  # most nodes never hold a queue member
        # This node's own items as a result, built on first use and dropped when they change:
        # a match that ends on a single node (the common case) allocates nothing.
        self.res: SublistResult | None = None

    def result(self) -> "SublistResult":
        r = self.res
        if r is None:
            q = self.qsubs
            if q:
                r = SublistResult(tuple(self.psubs), tuple(tuple(m) for m in q.values()), tuple(q))
            else:
                r = SublistResult(tuple(self.psubs))
            self.res = r
        return r

    def is_empty(self) -> bool:
        return not self.psubs and not self.qsubs and (self.next is None or self.next.is_empty())


class _Level:
    __slots__ = ("nodes", "pwc", "fwc")

    def __init__(self) -> None:
        self.nodes: dict[str, _Node] = {}
        self.pwc: _Node | None = None
        self.fwc: _Node | None = None

    def is_empty(self) -> bool:
        return not self.nodes and self.pwc is None and self.fwc is None

    def child(self, token: str) -> _Node | None:
        if token == PWC:
            return self.pwc
        if token == FWC:
            return self.fwc
        return self.nodes.get(token)

    def prune(self, token: str) -> None:
        if token == PWC:
            self.pwc = None
        elif token == FWC:
            self.fwc = None
        else:
            self.nodes.pop(token, None)


def _add_node(node: _Node, psubs: list, qgroups: dict) -> None:
    """Gather ``node``'s items into the result being built (queue groups merged by name)."""
    if node.psubs:
        psubs.extend(node.psubs)
    if node.qsubs:
        for name, members in node.qsubs.items():
            group = qgroups.get(name)
            if group is None:
                qgroups[name] = list(members)
            else:
                group.extend(members)


def _collect(level: _Level | None, tokens: list[str], start: int, found: list) -> None:
    """Append to ``found`` every node holding items that matches ``tokens[start:]`` below
    ``level``. Walks the literal branch iteratively; recurses only into '*' branches. '>' at any
    level matches the rest of the subject (which is non-empty here, since a token remains)."""
    node: _Node | None = None
    pwc: _Node | None = None
    for i in range(start, len(tokens)):
        if level is None:
            return
        fwc = level.fwc
        if fwc is not None and (fwc.psubs or fwc.qsubs):
            found.append(fwc)
        pwc = level.pwc
        if pwc is not None and pwc.next is not None:
            _collect(pwc.next, tokens, i + 1, found)
        node = level.nodes.get(tokens[i])
        level = node.next if node is not None else None
    if node is not None and (node.psubs or node.qsubs):
        found.append(node)
    if pwc is not None and (pwc.psubs or pwc.qsubs):
        found.append(pwc)


def _merge(found: list) -> SublistResult:
    if not found:
        return EMPTY_RESULT
    if len(found) == 1:
        return found[0].result()
    psubs: list = []
    qgroups: dict[str, list] = {}
    for node in found:
        _add_node(node, psubs, qgroups)
    return SublistResult(tuple(psubs), tuple(tuple(g) for g in qgroups.values()), tuple(qgroups))


def _no_literal_items(level: _Level) -> bool:
    """True when no literal child of ``level`` holds items (small levels only: a large one
    just counts as having some)."""
    nodes = level.nodes
    if not nodes:
        return True
    if len(nodes) > 8:
        return False
    for nd in nodes.values():
        if nd.psubs or nd.qsubs:
            return False
    return True


def _node_has_items(node: _Node | None) -> bool:
    return node is not None and bool(node.psubs or node.qsubs)


def _has_interest_level(level: _Level | None, tokens: list[str], start: int) -> bool:
    node: _Node | None = None
    pwc: _Node | None = None
    for i in range(start, len(tokens)):
        if level is None:
            return False
        if _node_has_items(level.fwc):
            return True
        pwc = level.pwc
        if pwc is not None and pwc.next is not None and _has_interest_level(pwc.next, tokens, i + 1):
            return True
        node = level.nodes.get(tokens[i])
        level = node.next if node is not None else None
    return _node_has_items(node) or _node_has_items(pwc)


class Sublist(Generic[T]):
    """Subject -> interested items, with queue groups and a bounded match cache.

    ``Sublist(cache=False)`` disables the cache (every match walks the trie).
    """

    __slots__ = (
        "_root",
        "_cache",
        "_count",
        "_inserts",
        "_removes",
        "_matches",
        "_hits",
        "_pcache",
        "_pdepths",
        "_lcache",
        "_pfirst",
        "_mcache",
        "_mdepths",
        "watch",
    )

    def __init__(self, cache: bool = True) -> None:
        self._root = _Level()
        self._cache: dict[str, SublistResult] | None = {} if cache else None
        # Shape caches (see match): results that do not depend on every token, keyed by the
        # tokens they do depend on. Cleared on every insert/remove; bounded like the cache.
        self._pcache: dict[str, SublistResult] = {}
        self._pdepths: dict[int, None] = {}
        self._lcache: dict[str, SublistResult] = {}
        self._pfirst = False  # the last shape hit came from _pcache: look there first
        # "<t0>.<...>.<tk-1>." -> (level k, result): every subject with those first k tokens, a
        # token k the level has no literal node for, and more tokens after it (see match).
        self._mcache: dict[str, tuple[_Level, SublistResult]] = {}
        self._mdepths: dict[int, None] = {}
        self._count = 0
        self._inserts = 0
        self._removes = 0
        self._matches = 0
        self._hits = 0
        # Optional observer ``watch(subject, queue, item, delta)`` of every effective insert (+1)
        # and remove (-1): leafnode links announce the account's interest from it. (Declared: the
        # compiled build checks attribute types, and a bare None would admit only None.)
        self.watch: Callable[[str, str | None, Any, int], None] | None = None

    # -- mutation ---------------------------------------------------------------------------

    def insert(self, subject: str, item: T, queue: str | None = None) -> None:
        """Add ``item`` under ``subject`` (subscribe form), in queue group ``queue`` if given.

        Raises :class:`InvalidSubjectError` for an invalid subject. Inserting the same
        (subject, queue, item) twice is a no-op.
        """
        if not is_valid_subject(subject):
            raise InvalidSubjectError(f"sublist: invalid subject {subject!r}")
        level = self._root
        node: _Node | None = None
        tokens = subject.split(TSEP)
        last = len(tokens) - 1
        for i, t in enumerate(tokens):
            if t == PWC:
                node = level.pwc
                if node is None:
                    node = level.pwc = _Node()
            elif t == FWC:
                node = level.fwc
                if node is None:
                    node = level.fwc = _Node()
            else:
                node = level.nodes.get(t)
                if node is None:
                    node = level.nodes[t] = _Node()
            if i != last:
                if node.next is None:
                    node.next = _Level()
                level = node.next
        assert node is not None
        if queue:
            if node.qsubs is None:
                node.qsubs = {}
            members = node.qsubs.get(queue)
            if members is None:
                members = node.qsubs[queue] = {}
            target = members
        else:
            target = node.psubs
        if item in target:
            return
        target[item] = None
        node.res = None
        self._count += 1
        self._inserts += 1
        self._invalidate(subject)
        if self.watch is not None:
            self.watch(subject, queue or None, item, 1)

    def remove(self, subject: str, item: T, queue: str | None = None) -> bool:
        """Remove ``item`` from ``subject`` (and ``queue``); False if it was not there.

        Nodes and levels left empty are pruned, so the trie does not grow with churn.
        """
        if not subject:
            return False
        level: _Level | None = self._root
        path: list[tuple[_Level, _Node, str]] = []
        node: _Node | None = None
        for t in subject.split(TSEP):
            if level is None:
                return False
            node = level.child(t)
            if node is None:
                return False
            path.append((level, node, t))
            level = node.next
        assert node is not None
        if queue:
            qsubs = node.qsubs
            members = qsubs.get(queue) if qsubs else None
            if qsubs is None or members is None or item not in members:
                return False
            del members[item]
            if not members:
                del qsubs[queue]
        else:
            if item not in node.psubs:
                return False
            del node.psubs[item]
        node.res = None
        self._count -= 1
        self._removes += 1
        # Prune from the leaf upwards; stop at the first node that still holds something.
        for lvl, n, t in reversed(path):
            if n.next is not None and n.next.is_empty():
                n.next = None
            if n.psubs or n.qsubs or n.next is not None:
                break
            lvl.prune(t)
        self._invalidate(subject)
        if self.watch is not None:
            self.watch(subject, queue or None, item, -1)
        return True

    def _invalidate(self, subject: str) -> None:
        """Drop cached results for literal subjects that ``subject`` matches."""
        if self._pcache or self._lcache or self._mcache:
            self._pcache.clear()
            self._pdepths.clear()
            self._lcache.clear()
            self._mcache.clear()
            self._mdepths.clear()
        cache = self._cache
        if not cache:
            return
        if PWC not in subject and FWC not in subject:
            cache.pop(subject, None)
            return
        tokens = subject.split(TSEP)
        if PWC not in tokens and FWC not in tokens:
            cache.pop(subject, None)
            return
        # Literal prefix up to the first wildcard token: a cheap filter before the full match.
        prefix_tokens: list[str] = []
        for t in tokens:
            if t == PWC or t == FWC:
                break
            prefix_tokens.append(t)
        prefix = TSEP.join(prefix_tokens) + TSEP if prefix_tokens else ""
        if prefix and len(cache) >= _JOINED_SCAN_MIN:
            # No cached subject starts with the prefix: one C-level join and search says so where
            # the loop below costs ~60 us over a full cache (a stream's `s.<i>.>` at every create
            # among API subjects, issue 31). A key holding a newline could only make it loop.
            joined = "\n".join(cache)
            if not joined.startswith(prefix) and "\n" + prefix not in joined:
                return
        stale = [k for k in cache if k.startswith(prefix) and subject_matches(subject, k)]
        for k in stale:
            del cache[k]

    # -- queries ----------------------------------------------------------------------------

    def match(self, subject: str) -> SublistResult:
        """Everything interested in the literal ``subject``.

        A subject with an empty token (``"a..b"``, ``""``) matches nothing. Results are shared
        and immutable; callers must not try to change them.

        One-off subjects (a reply inbox ``_INBOX.<id>.<n>`` matched by ``_INBOX.<id>.*``, an ack
        ``$JS.ACK.<stream>.<consumer>.<seqs...>`` matched by ``$JS.ACK.>``) miss the cache every
        time. Their results usually depend on a prefix of the subject only, which the walk
        detects when it takes no ``*`` branch:

        * the literal path ends before the last token (no node for token ``k``): every subject
          with the same first ``k`` tokens and more after them matches the same items. Kept in
          ``_pcache`` under ``"<t0>.<...>.<tk-1>."``;
        * the last level has no literal node holding items: every subject of the same length
          and first ``n-1`` tokens matches the same items. Kept in ``_lcache`` under
          ``"<t0>.<...>.<tn-2>"``.

        * the literal path ends at token ``k`` because its level has no node for it (a stream on
          ``plgd.>`` and publishes to ``plgd.<device>.<event>`` over more devices than
          ``_pcache`` holds): every subject with the same first ``k`` tokens, a token ``k`` that
          level has no node for either, and more tokens after it matches the same items. Kept
          in ``_mcache`` under ``"<t0>.<...>.<tk-1>."`` with the level (one entry for all the
          devices).

        So such a miss costs a split and a dict lookup instead of a trie walk and a new result.
        """
        self._matches += 1
        cache = self._cache
        if cache is not None:
            r = cache.get(subject)
            if r is not None:
                self._hits += 1
                return r
            if self._lcache or self._pcache:
                r = self._shape_get(subject)
                if r is not None:
                    cache[subject] = r
                    if len(cache) > CACHE_MAX:
                        self._sweep()
                    return r
        tokens = subject.split(TSEP)
        if "" in tokens:
            return EMPTY_RESULT
        found: list = []
        level: _Level | None = self._root
        node: _Node | None = None
        pwc: _Node | None = None
        last: _Level | None = None
        simple = True  # no '*' branch taken: the result depends on a prefix only
        n = len(tokens)
        i = 0
        while i < n:
            if level is None:
                break
            fwc = level.fwc
            if fwc is not None and (fwc.psubs or fwc.qsubs):
                found.append(fwc)
            pwc = level.pwc
            if pwc is not None and pwc.next is not None:
                simple = False
                _collect(pwc.next, tokens, i + 1, found)
            last = level
            node = level.nodes.get(tokens[i])
            level = node.next if node is not None else None
            i += 1
        if level is None and i < n:
            r = _merge(found)
            if simple and cache is not None:
                # Ended early at token i: the first i tokens decide (and there are more).
                pc = self._pcache
                if len(pc) >= CACHE_MAX:
                    pc.clear()
                    self._pdepths.clear()
                pc[subject[: len(subject) - len(subject.split(TSEP, i)[i])]] = r
                self._pdepths[i] = None
                if node is None and last is not None:
                    # token i - 1 has no node at level ``last``: the first i - 1 tokens decide
                    mc = self._mcache
                    if len(mc) >= CACHE_MAX:
                        mc.clear()
                        self._mdepths.clear()
                    k = i - 1
                    mc[subject[: len(subject) - len(subject.split(TSEP, k)[k])] if k else ""] = (last, r)
                    self._mdepths[k] = None
        else:
            if node is not None and (node.psubs or node.qsubs):
                found.append(node)
            if pwc is not None and (pwc.psubs or pwc.qsubs):
                found.append(pwc)
            r = _merge(found)
            if simple and cache is not None and n > 1 and last is not None and _no_literal_items(last):
                lc = self._lcache
                if len(lc) >= CACHE_MAX:
                    lc.clear()
                lc[subject[: subject.rfind(TSEP)]] = r
        if cache is not None:
            cache[subject] = r
            if len(cache) > CACHE_MAX:
                self._sweep()
        return r

    def match_many(self, subjects: list[str], start: int = 0) -> list[SublistResult]:
        """``[match(s) for s in subjects[start:]]``, cheaper for a run of one-off subjects.

        A run of acks (``$JS.ACK.<stream>.<consumer>.<seqs...>``) all hit the same prefix entry
        of the shape cache (see :meth:`match`). Once a subject's result is known to come from
        prefix ``p`` (its first ``k`` tokens), every later subject that starts with ``p`` and
        has only non-empty tokens after it has that result too: a ``startswith`` replaces the
        split, the slice and the lookup, and nothing is added to the main cache. A publisher
        over more subjects than the cache holds (``plgd.<device>.<event>`` to ``plgd.*.<event>``
        subscribers) misses the cache on almost every subject, but the last-token entry of the
        shape cache (``_lcache``) answers it: that probe is made here inline, and such answers
        are not added to the main cache either (they would only push out each other). The
        results are those of this moment: a caller that lets subscriptions change before it
        uses them all (see :attr:`generation`) must match the rest again.
        """
        whole = self._match_run_cached(subjects, start)
        if whole is not None:
            return whole
        lc = self._lcache
        cache = self._cache
        out: list[SublistResult] = []
        append = out.append
        match = self.match
        pfx = ""
        pr = None
        lp = 0
        fast = 0
        for i in range(start, len(subjects)):
            s = subjects[i]
            if pr is not None and s.startswith(pfx) and len(s) > lp and s[-1] != TSEP and ".." not in s:
                append(pr)
                fast += 1
                continue
            if lc:
                # (either cache's answer is the right one: both are emptied on every change)
                j = s.rfind(TSEP)
                r = lc.get(s[:j]) if j > 0 and s[-1] != TSEP and ".." not in s else None
                if r is None and cache is not None:
                    r = cache.get(s)
                if r is not None:
                    append(r)
                    fast += 1
                    continue
            if self._mcache and s and s[-1] != TSEP and ".." not in s:
                hit = self._miss_get(s)
                if hit is not None:
                    # what decided (the tokens through the one without a node) answers the
                    # run's next subjects with the same start, as a prefix entry would
                    pr, lp = hit
                    pfx = s[:lp]
                    append(pr)
                    fast += 1
                    continue
            r = match(s)
            append(r)
            pc = self._pcache
            if pc:
                # Does a prefix entry answer this subject? Then it answers the run's next ones.
                for k in self._pdepths:
                    parts = s.split(TSEP, k)
                    if len(parts) > k:
                        p = s[: len(s) - len(parts[k])]
                        if pc.get(p) is r:
                            pfx, pr, lp = p, r, len(p)
                            break
            lc = self._lcache
        if fast:
            self._matches += fast
            self._hits += fast
        return out

    def _match_run_cached(self, subjects: list[str], start: int) -> list[SublistResult] | None:
        """The whole run answered by one cache in C-level passes, or None (see :meth:`match_many`)."""
        lc = self._lcache
        if lc and start < len(subjects) and subjects[start].rpartition(TSEP)[0] in lc:
            # The whole run through the last-token entries at once (C-level passes). A key of
            # _lcache is the parent of a valid subject: never empty, no empty token. So a
            # subject's parent (all before its last '.') that is a key has the key's answer,
            # unless the subject's last token is empty ("a.b."), which the join check finds.
            run = subjects[start:] if start else subjects
            got: list = list(map(lc.get, [s.rpartition(TSEP)[0] for s in run]))
            if None not in got:
                joined = "\n".join(run)
                if ".\n" not in joined and not joined.endswith(TSEP):
                    self._matches += len(got)
                    self._hits += len(got)
                    return got
        cache = self._cache
        if cache and start < len(subjects) and subjects[start] in cache:
            # A publisher cycling over a few hundred subjects (one per subscriber connection):
            # every subject is in the main cache, one C-level pass answers the run. (A key of
            # the cache is a subject match() answered, so its entry is its answer.)
            run = subjects[start:] if start else subjects
            got = list(map(cache.get, run))
            if None not in got:
                self._matches += len(got)
                self._hits += len(got)
                return got
        return None

    def sibling_result(self, subject: str) -> SublistResult | None:
        """What every subject made of ``subject``'s tokens but another (non-empty) last one
        matches, when the shape cache knows it (``_lcache``, see :meth:`match`: filled when
        ``subject`` itself was matched), else None. A run of replies to one inbox
        (``_INBOX.<id>.<token>``, PubAcks) then needs one match, not one per reply. Valid until
        the subscriptions change (:attr:`generation`)."""
        j = subject.rfind(TSEP)
        if j <= 0 or not self._lcache:
            return None
        return self._lcache.get(subject[:j])

    @property
    def generation(self) -> int:
        """Changes whenever a subscription is added or removed (results may then differ)."""
        return self._inserts + self._removes

    def _shape_get(self, subject: str) -> SublistResult | None:
        """A result from the shape caches (see :meth:`match`), or None."""
        if not subject or subject[-1] == TSEP or ".." in subject:
            return None  # an empty token: let the walk answer
        lc = self._lcache
        pc = self._pcache
        lc_later = bool(pc) and self._pfirst
        if lc and not lc_later:
            j = subject.rfind(TSEP)
            if j > 0:
                r = lc.get(subject[:j])
                if r is not None:
                    return r
        if pc:
            for k in self._pdepths:
                parts = subject.split(TSEP, k)
                if len(parts) > k:
                    r = pc.get(subject[: len(subject) - len(parts[k])])
                    if r is not None:
                        self._pfirst = True  # a run of acks: try this cache first next time
                        return r
            self._pfirst = False
        if lc and lc_later:
            j = subject.rfind(TSEP)
            if j > 0:
                r = lc.get(subject[:j])
                if r is not None:
                    return r
        hit = self._miss_get(subject) if self._mcache else None
        return hit[0] if hit is not None else None

    def _miss_get(self, subject: str) -> tuple[SublistResult, int] | None:
        """The ``_mcache`` answer for ``subject`` (see :meth:`match`) and the length of what
        decided it (the tokens through the one without a node, and the dot after it), or None.
        The caller has checked that no token after the first is empty (no ``..``, no trailing
        ``.``)."""
        mc = self._mcache
        for k in self._mdepths:
            parts = subject.split(TSEP, k + 1)
            if len(parts) < k + 2:
                continue
            tok = parts[k]
            j = len(subject) - len(parts[k + 1])
            e = mc.get(subject[: j - len(tok) - 1])
            if e is not None and tok and tok not in e[0].nodes:
                return e[1], j
        return None

    def _sweep(self) -> None:
        cache = self._cache
        assert cache is not None
        # dicts keep insertion order: the first keys are the oldest entries.
        # Keep the newest CACHE_SWEEP entries in a new dict (one C-level pass, no per-key del).
        self._cache = dict(islice(cache.items(), len(cache) - CACHE_SWEEP, None))

    def has_interest(self, subject: str) -> bool:
        """True if at least one item matches the literal ``subject`` (no result is built)."""
        cache = self._cache
        if cache is not None:
            r = cache.get(subject)
            if r is not None:
                return bool(r.psubs or r.qsubs)
        tokens = subject.split(TSEP)
        for t in tokens:
            if not t:
                return False
        return _has_interest_level(self._root, tokens, 0)

    def num_interest(self, subject: str) -> tuple[int, int]:
        """(plain items, queue members) matching ``subject``."""
        r = self.match(subject)
        return len(r.psubs), sum(len(g) for g in r.qsubs)

    def count(self) -> int:
        """Number of (subject, queue, item) entries stored."""
        return self._count

    def __len__(self) -> int:
        return self._count

    def cache_count(self) -> int:
        """Number of cached results (0 with the cache off)."""
        return len(self._cache) if self._cache is not None else 0

    def stats(self) -> dict[str, Any]:
        """Counters shaped like nats-server's ``/subsz`` (``SublistStats``) JSON."""
        matches = self._matches
        out: dict[str, Any] = {
            "num_subscriptions": self._count,
            "num_cache": self.cache_count(),
            "num_inserts": self._inserts,
            "num_removes": self._removes,
            "num_matches": matches,
            "cache_hit_rate": (self._hits / matches) if matches else 0.0,
            "max_fanout": 0,
            "avg_fanout": 0.0,
        }
        # Fan-out is measured over cached results, as the reference does (a queue group counts 1).
        if self._cache:
            tot = mx = 0
            for r in self._cache.values():
                n = len(r.psubs) + len(r.qsubs)
                tot += n
                if n > mx:
                    mx = n
            out["max_fanout"] = mx
            out["avg_fanout"] = tot / len(self._cache)
        return out

    def all(self) -> list[tuple[str, str | None, T]]:
        """Every stored entry as (subject, queue or None, item), in trie order."""
        out: list[tuple[str, str | None, T]] = []
        self._collect(self._root, [], out)
        return out

    def __iter__(self) -> Iterator[tuple[str, str | None, T]]:
        return iter(self.all())

    def _collect(self, level: _Level, prefix: list[str], out: list) -> None:
        children: list[tuple[str, _Node]] = list(level.nodes.items())
        if level.pwc is not None:
            children.append((PWC, level.pwc))
        if level.fwc is not None:
            children.append((FWC, level.fwc))
        for token, node in children:
            prefix.append(token)
            subject = TSEP.join(prefix)
            for item in node.psubs:
                out.append((subject, None, item))
            for q, members in (node.qsubs or {}).items():
                for item in members:
                    out.append((subject, q, item))
            if node.next is not None:
                self._collect(node.next, prefix, out)
            prefix.pop()
