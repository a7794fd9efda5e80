"""Sublist behaviour, after nats-server's sublist_test.go: every test runs with the cache on and
off (TestSublistX / TestSublistXNoCache)."""

from __future__ import annotations

import random

import pytest

from natsd.subjects.sublist import (
    CACHE_MAX,
    CACHE_SWEEP,
    EMPTY_RESULT,
    InvalidSubjectError,
    Sublist,
    SublistResult,
)
from natsd.subjects.tokens import subject_matches


@pytest.fixture(params=[True, False], ids=["cache", "nocache"])
def sl(request):
    return Sublist(cache=request.param)


class Sub:
    """A stand-in subscription: hashable by identity, like the server's."""

    __slots__ = ("subject", "queue")

    def __init__(self, subject, queue=None):
        self.subject = subject
        self.queue = queue

    def __repr__(self):
        return f"Sub({self.subject!r}, {self.queue!r})"


def add(sl, subject, queue=None):
    s = Sub(subject, queue)
    sl.insert(subject, s, queue)
    return s


def verify(result, *expected):
    assert set(result.psubs) == set(expected)
    assert len(result.psubs) == len(expected)


def test_init(sl):
    assert sl.count() == 0
    assert len(sl) == 0
    assert sl.match("foo") is EMPTY_RESULT or not sl.match("foo")


def test_insert_count(sl):
    add(sl, "foo")
    add(sl, "bar")
    add(sl, "foo.bar")
    assert sl.count() == 3


def test_simple(sl):
    s = add(sl, "foo")
    verify(sl.match("foo"), s)
    verify(sl.match("bar"))


def test_simple_multi_tokens(sl):
    s = add(sl, "foo.bar.baz")
    verify(sl.match("foo.bar.baz"), s)
    verify(sl.match("foo.bar"))
    verify(sl.match("foo.bar.baz.qux"))


def test_partial_wildcard(sl):
    lsub = add(sl, "a.b.c")
    psub = add(sl, "a.*.c")
    verify(sl.match("a.b.c"), lsub, psub)
    verify(sl.match("a.x.c"), psub)
    verify(sl.match("a.b"))


def test_partial_wildcard_at_end(sl):
    lsub = add(sl, "a.b.c")
    psub = add(sl, "a.b.*")
    verify(sl.match("a.b.c"), lsub, psub)
    verify(sl.match("a.b.d"), psub)
    verify(sl.match("a.b"))
    verify(sl.match("a.b.c.d"))


def test_full_wildcard(sl):
    lsub = add(sl, "a.b.c")
    fsub = add(sl, "a.>")
    verify(sl.match("a.b.c"), lsub, fsub)
    verify(sl.match("a.>"), fsub)  # a literal '>' token is still matched by 'a.>'
    verify(sl.match("a"))
    root = add(sl, ">")
    verify(sl.match("a"), root)
    verify(sl.match("x.y.z"), root)


def test_two_token_pub_matches_single_token_sub_only_by_fwc(sl):
    s = add(sl, "foo")
    verify(sl.match("foo.bar"))
    f = add(sl, "foo.>")
    verify(sl.match("foo.bar"), f)
    verify(sl.match("foo"), s)


def test_many_wildcard_combinations(sl):
    subs = {p: add(sl, p) for p in ["a.b.c", "a.*.c", "a.b.*", "*.b.c", "*.*.*", "a.>", "*.>", ">", "a.*.>", "a.b.c.>"]}
    for literal in ["a.b.c", "a.x.c", "x.b.c", "a.b.x", "a", "a.b", "a.b.c.d", "x.y.z", "x"]:
        expected = [s for p, s in subs.items() if subject_matches(p, literal)]
        verify(sl.match(literal), *expected)


def test_remove(sl):
    s = add(sl, "a.b.c.d")
    assert sl.count() == 1
    verify(sl.match("a.b.c.d"), s)
    assert sl.remove("a.b.c.d", s) is True
    assert sl.count() == 0
    verify(sl.match("a.b.c.d"))
    assert sl.remove("a.b.c.d", s) is False  # already gone
    assert sl.remove("a.b.c", s) is False
    assert sl.remove("", s) is False


def test_remove_wildcard(sl):
    s = add(sl, "a.b.c.d")
    ps = add(sl, "a.b.*.d")
    fs = add(sl, "a.b.>")
    verify(sl.match("a.b.c.d"), s, ps, fs)
    assert sl.remove("a.b.*.d", ps)
    verify(sl.match("a.b.c.d"), s, fs)
    assert sl.remove("a.b.>", fs)
    verify(sl.match("a.b.c.d"), s)
    assert sl.remove("a.b.c.d", s)
    verify(sl.match("a.b.c.d"))
    assert sl.count() == 0


def test_remove_prunes_nodes(sl):
    subs = [add(sl, f"a.b.c{i}.d.e") for i in range(50)] + [add(sl, "a.*.x.>")]
    for s in subs:
        assert sl.remove(s.subject, s)
    # Nothing left: the root level is empty again, so churn does not grow the trie.
    assert sl._root.is_empty()
    assert sl.all() == []


def test_remove_keeps_siblings(sl):
    a = add(sl, "a.b")
    b = add(sl, "a.b.c")
    assert sl.remove("a.b", a)
    verify(sl.match("a.b.c"), b)
    verify(sl.match("a.b"))
    c = add(sl, "a.b")
    assert sl.remove("a.b.c", b)
    verify(sl.match("a.b"), c)


def test_remove_with_wrong_item_or_queue(sl):
    s = add(sl, "foo", "q")
    assert sl.remove("foo", s) is False  # not a plain sub
    assert sl.remove("foo", s, "other") is False
    assert sl.remove("foo", Sub("foo"), "q") is False
    assert sl.remove("foo", s, "q") is True


@pytest.mark.parametrize("bad", ["", ".", "foo.", ".foo", "foo..bar", "foo.>.bar", ">.foo", "foo bar", "a.\t"])
def test_invalid_subjects_insert(sl, bad):
    with pytest.raises(InvalidSubjectError):
        sl.insert(bad, Sub(bad))
    assert sl.count() == 0


def test_invalid_match_subjects_match_nothing(sl):
    add(sl, ">")
    for bad in ["", "foo..bar", ".foo", "foo."]:
        assert not sl.match(bad)
        assert not sl.has_interest(bad)


def test_wildcards_as_literals(sl):
    # 'foo*bar' and 'foo.*bar' are literal tokens; they must not behave as wildcards.
    for subj in ["foo.*-", "foo.>-", "foo.*bar", "foo.bar>"]:
        s = add(sl, subj)
        verify(sl.match("foo.bar"))
        verify(sl.match(subj), s)
        assert sl.remove(subj, s)
        verify(sl.match(subj))


def test_duplicate_insert_is_noop(sl):
    s = add(sl, "foo")
    sl.insert("foo", s)
    assert sl.count() == 1
    verify(sl.match("foo"), s)


def test_basic_queue_results(sl):
    s = add(sl, "foo")
    s1 = add(sl, "foo", "bar")
    r = sl.match("foo")
    verify(r, s)
    assert r.qsubs == ((s1,),)
    assert r.queues == ("bar",)
    s2 = add(sl, "foo", "bar")
    r = sl.match("foo")
    assert len(r.qsubs) == 1 and set(r.qsubs[0]) == {s1, s2}
    s3 = add(sl, "foo", "baz")
    r = sl.match("foo")
    groups = dict(zip(r.queues, r.qsubs))
    assert set(groups["bar"]) == {s1, s2} and groups["baz"] == (s3,)
    sl.remove("foo", s1, "bar")
    sl.remove("foo", s2, "bar")
    r = sl.match("foo")
    assert r.queues == ("baz",) and r.qsubs == ((s3,),)
    sl.remove("foo", s3, "baz")
    r = sl.match("foo")
    verify(r, s)
    assert r.qsubs == ()


def test_queue_groups_merge_across_nodes(sl):
    # Members of one queue name on different (matching) subjects form one group.
    q1 = add(sl, "foo.bar", "workers")
    q2 = add(sl, "foo.*", "workers")
    q3 = add(sl, "foo.>", "workers")
    other = add(sl, "foo.>", "other")
    r = sl.match("foo.bar")
    groups = dict(zip(r.queues, r.qsubs))
    assert set(groups["workers"]) == {q1, q2, q3}
    assert groups["other"] == (other,)
    assert r.psubs == ()


def test_result_is_immutable(sl):
    add(sl, "foo")
    r = sl.match("foo")
    assert isinstance(r, SublistResult)
    with pytest.raises(AttributeError):
        r.psubs = ()
    assert isinstance(r.psubs, tuple) and isinstance(r.qsubs, tuple)


def test_has_interest(sl):
    assert not sl.has_interest("foo")
    s = add(sl, "foo.*")
    assert sl.has_interest("foo.bar")
    assert not sl.has_interest("foo")
    assert not sl.has_interest("foo.bar.baz")
    q = add(sl, "a.>", "q")
    assert sl.has_interest("a.b.c")
    sl.remove("a.>", q, "q")
    assert not sl.has_interest("a.b.c")
    sl.match("foo.bar")  # warm the cache, then remove: the answer must change
    sl.remove("foo.*", s)
    assert not sl.has_interest("foo.bar")
    add(sl, "*.*.*")
    assert sl.has_interest("x.y.z") and not sl.has_interest("x.y")


def test_num_interest(sl):
    add(sl, "foo")
    add(sl, "foo.>")
    add(sl, "foo", "q")
    add(sl, "*", "q")
    assert sl.num_interest("foo") == (1, 2)
    assert sl.num_interest("foo.bar") == (1, 0)


def test_cache_invalidation_on_insert_and_remove(sl):
    # Warm results for many subjects, then add and remove subs of each shape: every answer
    # must always equal a fresh trie walk.
    literals = ["a.b.c", "a.b.d", "a.x.c", "b.b.c", "a.b", "a", "a.b.c.d"]
    patterns = ["a.b.c", "a.*.c", "a.>", "*.b.*", ">", "a.b.c.d", "a"]
    live: list[Sub] = []
    rng = random.Random(7)
    for _ in range(200):
        for lit in literals:
            sl.match(lit)
        if live and rng.random() < 0.45:
            s = live.pop(rng.randrange(len(live)))
            assert sl.remove(s.subject, s, s.queue)
        else:
            p = rng.choice(patterns)
            live.append(add(sl, p, rng.choice([None, None, "q"])))
        for lit in literals:
            r = sl.match(lit)
            want_p = {s for s in live if s.queue is None and subject_matches(s.subject, lit)}
            want_q = {s for s in live if s.queue and subject_matches(s.subject, lit)}
            assert set(r.psubs) == want_p
            assert {m for g in r.qsubs for m in g} == want_q
            assert sl.has_interest(lit) == bool(want_p or want_q)


def test_cache_is_bounded():
    sl = Sublist()
    s = add(sl, ">")
    for i in range(CACHE_MAX + 1):
        assert sl.match(f"foo.{i}").psubs == (s,)
    # Crossing the bound sweeps the cache down to CACHE_SWEEP entries.
    assert sl.cache_count() == CACHE_SWEEP
    assert sl.match("foo.0").psubs == (s,)
    for i in range(10_000):
        sl.match(f"bar.{i}")
    assert sl.cache_count() <= CACHE_MAX


def test_cache_hits_return_same_object():
    sl = Sublist()
    add(sl, "foo")
    r1 = sl.match("foo")
    r2 = sl.match("foo")
    assert r1 is r2
    st = sl.stats()
    assert st["num_matches"] == 2
    assert st["cache_hit_rate"] == 0.5
    assert st["num_cache"] == 1


def test_no_cache_has_no_entries():
    sl = Sublist(cache=False)
    add(sl, "foo")
    sl.match("foo")
    sl.match("foo")
    st = sl.stats()
    assert st["num_cache"] == 0
    assert st["cache_hit_rate"] == 0.0
    assert st["num_matches"] == 2


def test_stats(sl):
    subs = [add(sl, "foo"), add(sl, "foo.>"), add(sl, "*"), add(sl, "foo", "q"), add(sl, "foo", "q")]
    sl.remove("*", subs[2])
    sl.match("foo")
    sl.match("foo")
    sl.match("foo.bar")
    st = sl.stats()
    assert set(st) == {
        "num_subscriptions",
        "num_cache",
        "num_inserts",
        "num_removes",
        "num_matches",
        "cache_hit_rate",
        "max_fanout",
        "avg_fanout",
    }
    assert st["num_subscriptions"] == 4
    assert st["num_inserts"] == 5
    assert st["num_removes"] == 1
    assert st["num_matches"] == 3
    if sl.cache_count():
        # "foo" -> 1 plain + 1 queue group = 2; "foo.bar" -> 1.
        assert st["max_fanout"] == 2
        assert st["avg_fanout"] == 1.5
        assert st["cache_hit_rate"] == pytest.approx(1 / 3)
    else:
        assert st["max_fanout"] == 0


def test_all(sl):
    a = add(sl, "foo.bar")
    b = add(sl, "foo.*", "q")
    c = add(sl, ">")
    d = add(sl, "foo")
    got = sorted(((s, q or "", id(i)) for s, q, i in sl.all()))
    want = sorted([("foo.bar", "", id(a)), ("foo.*", "q", id(b)), (">", "", id(c)), ("foo", "", id(d))])
    assert got == want


def test_generic_items_handlers(sl):
    # A Sublist also routes API subjects to handler callables.
    def create():
        return "create"

    def info():
        return "info"

    sl.insert("$JS.API.STREAM.CREATE.*", create)
    sl.insert("$JS.API.STREAM.INFO.*", info)
    r = sl.match("$JS.API.STREAM.CREATE.ORDERS")
    assert r.psubs == (create,) and r.psubs[0]() == "create"
    assert not sl.match("$JS.API.STREAM.CREATE")


def test_random_against_brute_force(sl):
    rng = random.Random(11)
    toks = ["a", "b", "c", "*", ">"]
    live = []
    for _ in range(300):
        n = rng.randint(1, 4)
        parts = [rng.choice(toks) for _ in range(n)]
        if ">" in parts[:-1]:
            continue
        live.append(add(sl, ".".join(parts), rng.choice([None, "q1", "q2"])))
    for _ in range(300):
        lit = ".".join(rng.choice("abcd") for _ in range(rng.randint(1, 5)))
        r = sl.match(lit)
        want_p = {s for s in live if s.queue is None and subject_matches(s.subject, lit)}
        assert set(r.psubs) == want_p and len(r.psubs) == len(want_p)
        groups = dict(zip(r.queues, r.qsubs))
        for q in ("q1", "q2"):
            want_q = {s for s in live if s.queue == q and subject_matches(s.subject, lit)}
            assert set(groups.get(q, ())) == want_q
    for s in live:
        assert sl.remove(s.subject, s, s.queue)
    assert sl.count() == 0 and sl._root.is_empty()


def test_cache_invalidation_with_many_cached_subjects():
    # Past 64 cached subjects a wildcard insert first asks one search of the joined keys whether
    # any starts with its literal prefix (issue 31): answers must still equal a fresh trie walk,
    # also when the matching key is the cache's first or last, or shares only part of a token.
    sl = Sublist()
    literals = ["h.1.x", "a.b.c"] + [f"f.{i}.x" for i in range(120)] + ["a.bb.c", "a.b.d", "f.7", "f.77.x.y", "g.1"]
    patterns = ["h.1.>", "a.b.>", "a.*.c", "f.7.>", "f.7.*", "f.*.x", "f.77.>", "g.>", "f.1.x", "a.>", "*.1"]
    live: list[Sub] = []
    rng = random.Random(3)
    for _ in range(150):
        for lit in literals:
            sl.match(lit)
        if live and rng.random() < 0.4:
            s = live.pop(rng.randrange(len(live)))
            assert sl.remove(s.subject, s, s.queue)
        else:
            live.append(add(sl, rng.choice(patterns)))
        for lit in rng.sample(literals, 20) + [literals[0], literals[-1]]:
            r = sl.match(lit)
            assert set(r.psubs) == {s for s in live if subject_matches(s.subject, lit)}, lit
