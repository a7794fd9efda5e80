"""The Sublist's shape caches (results that depend on a prefix of the subject only) must always
answer exactly what a fresh trie walk answers, through any insert/remove."""

from __future__ import annotations

import random

from natsd.subjects.sublist import Sublist
from natsd.subjects.tokens import subject_matches
from tests.helpers.compiled import python_only


class Sub:
    def __init__(self, subject: str, queue: str | None) -> None:
        self.subject = subject
        self.queue = queue


def test_one_off_subjects_are_answered_from_the_shape_caches():
    sl = Sublist()
    inbox = Sub("_INBOX.abc.*", None)
    acks = Sub("$JS.ACK.>", None)
    sl.insert(inbox.subject, inbox)
    sl.insert(acks.subject, acks)
    r1 = sl.match("_INBOX.abc.1")
    assert sl.match("_INBOX.abc.2") is r1 and r1.psubs == (inbox,)
    a1 = sl.match("$JS.ACK.S.C.1.1.1.0.0")
    assert sl.match("$JS.ACK.S.C.1.2.2.0.0") is a1 and a1.psubs == (acks,)
    # Same prefix, different shape: walked, not taken from a cache.
    assert sl.match("_INBOX").psubs == ()
    assert sl.match("_INBOXa").psubs == ()
    assert sl.match("_INBOX.abc.1.2").psubs == ()
    assert sl.match("_INBOX.abc").psubs == ()
    assert sl.match("_INBOX.abc.").psubs == ()
    assert sl.match("$JS.ACK.S..1").psubs == ()
    # A new subscription invalidates them.
    lit = Sub("_INBOX.abc.9", None)
    sl.insert(lit.subject, lit)
    assert set(sl.match("_INBOX.abc.9").psubs) == {inbox, lit}
    assert sl.match("_INBOX.abc.8").psubs == (inbox,)
    sl.remove(acks.subject, acks)
    assert sl.match("$JS.ACK.S.C.1.3.3.0.0").psubs == ()


def _churn(rng: random.Random, sl: Sublist, live: list[Sub]) -> None:
    """One random change: remove a live subscription (30%) or insert a new random one."""
    if live and rng.random() < 0.3:
        s = live.pop(rng.randrange(len(live)))
        assert sl.remove(s.subject, s, s.queue)
        return
    t = [rng.choice(["a", "b", "c", "*", ">"]) for _ in range(rng.randint(1, 4))]
    if ">" in t:
        t = t[: t.index(">") + 1]
    s = Sub(".".join(t), rng.choice([None, None, "q"]))
    sl.insert(s.subject, s, s.queue)
    live.append(s)


def test_random_against_subject_matches():
    rng = random.Random(11)
    lits = ["a", "b", "c", "d"]
    for _ in range(150):
        sl = Sublist()
        live: list[Sub] = []
        for _ in range(40):
            _churn(rng, sl, live)
            for _ in range(20):
                lit = ".".join(rng.choice(lits) for _ in range(rng.randint(1, 5)))
                r = sl.match(lit)
                want_p = {s for s in live if s.queue is None and subject_matches(s.subject, lit)}
                want_q = {s for s in live if s.queue and subject_matches(s.subject, lit)}
                assert set(r.psubs) == want_p and len(r.psubs) == len(want_p)
                assert {m for g in r.qsubs for m in g} == want_q


def test_match_many_answers_what_match_answers():
    rng = random.Random(12)
    lits = ["a", "b", "c", "d", ""]  # "" makes empty tokens: those match nothing
    for _ in range(100):
        sl = Sublist()
        live: list[Sub] = []
        for _ in range(30):
            _churn(rng, sl, live)
            # runs sharing prefixes (like acks), with odd ones in between
            head = ".".join(rng.choice(lits[:4]) for _ in range(rng.randint(1, 3)))
            run = [head + "." + ".".join(rng.choice(lits) for _ in range(rng.randint(1, 3))) for _ in range(15)]
            run += [".".join(rng.choice(lits) for _ in range(rng.randint(1, 5))) for _ in range(5)]
            rng.shuffle(run)
            start = rng.randrange(len(run))
            got = sl.match_many(run, start)
            fresh = Sublist(cache=False)
            for s in live:
                fresh.insert(s.subject, s, s.queue)
            for subject, r in zip(run[start:], got):
                w = fresh.match(subject)
                assert set(r.psubs) == set(w.psubs) and len(r.psubs) == len(w.psubs), subject
                assert {frozenset(g) for g in r.qsubs} == {frozenset(g) for g in w.qsubs}, subject


def test_match_many_of_acks_is_one_prefix_result_and_counts_as_hits():
    sl = Sublist()
    acks = Sub("$JS.ACK.>", None)
    sl.insert(acks.subject, acks)
    run = ["$JS.ACK.S.C.1.%d.%d.0.0" % (i, i) for i in range(1, 101)]
    before = sl.stats()
    got = sl.match_many(run)
    assert len(got) == 100 and all(r is got[0] for r in got) and got[0].psubs == (acks,)
    after = sl.stats()
    assert after["num_matches"] - before["num_matches"] == 100
    assert sl.cache_count() <= 2  # the run did not flood the main cache
    # subjects that share the prefix but have an empty token still match nothing
    assert [r.psubs for r in sl.match_many(run[:2] + ["$JS.ACK.S..1", "$JS.ACK.S.", "$JS.ACK.S.C"])] == [
        (acks,),
        (acks,),
        (),
        (),
        (acks,),
    ]


def test_generation_moves_with_every_change():
    sl = Sublist()
    a = Sub("a.>", None)
    g0 = sl.generation
    sl.insert(a.subject, a)
    g1 = sl.generation
    sl.insert(a.subject, a)  # already there: nothing changed
    assert g1 != g0 and sl.generation == g1
    assert not sl.remove("b", a)
    assert sl.generation == g1
    sl.remove(a.subject, a)
    assert sl.generation not in (g0, g1)


def test_match_many_over_more_subjects_than_the_cache_holds():
    # issue 31's shape: 10,000 subjects "w.<k>.<i>" to ten "w.<k>.*" subscribers, answered from
    # the last-token entries in one pass, counted as hits, without flooding the main cache
    sl = Sublist()
    subs = [Sub("w.%d.*" % k, None) for k in range(10)]
    for s in subs:
        sl.insert(s.subject, s)
    run = ["w.%d.%d" % (i % 10, i) for i in range(10_000)]
    first = sl.match_many(run[:20])  # (learns the shapes)
    assert [r.psubs for r in first] == [(subs[i % 10],) for i in range(20)]
    cached = sl.cache_count()
    before = sl.stats()
    got = sl.match_many(run, 5)
    assert len(got) == len(run) - 5
    assert all(r.psubs == (subs[i % 10],) for i, r in enumerate(got, 5))
    after = sl.stats()
    assert after["num_matches"] - before["num_matches"] == len(got)
    assert after["cache_hit_rate"] > before["cache_hit_rate"]
    assert sl.cache_count() == cached
    # a subject whose last token is empty, one without a dot, one with an empty token inside and
    # one that no entry answers, anywhere in such a run: each answered as match() answers it
    odd = ["w.3.", "w", "w..3", ".w.3", "w.3.x.y", "z.1"]
    for k in range(len(odd) + 1):
        mixed = run[:30]
        mixed[k * 4 : k * 4] = odd[k:] + odd[:k]
        fresh = Sublist(cache=False)
        for s in subs:
            fresh.insert(s.subject, s)
        assert [r.psubs for r in sl.match_many(mixed)] == [fresh.match(s).psubs for s in mixed]
    # a change empties the shape caches: the run is answered anew
    extra = Sub("w.3.>", None)
    sl.insert(extra.subject, extra)
    assert set(sl.match_many(["w.3.3", "w.3.13"])[1].psubs) == {subs[3], extra}


def test_match_many_with_shape_entries_answers_what_a_fresh_walk_answers():
    rng = random.Random(31)
    for _ in range(100):
        sl = Sublist()
        live: list[Sub] = []
        for _ in range(10):
            _churn(rng, sl, live)
        # warm the last-token entries, then runs over many last tokens under a few parents
        parents = [".".join(rng.choice(["a", "b", "c"]) for _ in range(rng.randint(1, 3))) for _ in range(4)]
        for p in parents:
            sl.match(p + ".warm")
        run = [rng.choice(parents) + "." + rng.choice(["x", "y", "1", "2", ""]) for _ in range(30)]
        got = sl.match_many(run)
        fresh = Sublist(cache=False)
        for s in live:
            fresh.insert(s.subject, s, s.queue)
        for subject, r in zip(run, got):
            w = fresh.match(subject)
            assert set(r.psubs) == set(w.psubs) and len(r.psubs) == len(w.psubs), subject
            assert {frozenset(g) for g in r.qsubs} == {frozenset(g) for g in w.qsubs}, subject


@python_only
def test_match_many_of_cached_subjects_is_one_pass_over_the_cache():
    # issue 31 (the connections row): a publisher round robin over 100 subscriber subjects. Once
    # each subject was matched, a run of them is answered from the main cache without a match()
    # per subject, with the same results, counted as hits.
    calls = []

    class Counting(Sublist):
        def match(self, subject):
            calls.append(subject)
            return super().match(subject)

    sl = Counting()
    subs = [Sub("sc.%d" % i, None) for i in range(100)]
    for s in subs:
        sl.insert(s.subject, s)
    run = ["sc.%d" % (i % 100) for i in range(1000)]
    first = sl.match_many(run[:100])
    assert [r.psubs for r in first] == [(s,) for s in subs]
    calls.clear()
    before = sl.stats()
    got = sl.match_many(run, 3)
    assert calls == []
    assert [r.psubs for r in got] == [(subs[i % 100],) for i in range(3, 1000)]
    after = sl.stats()
    assert after["num_matches"] - before["num_matches"] == len(got)
    assert after["cache_hit_rate"] > before["cache_hit_rate"]
    # a subject not in the cache: the run is matched subject by subject, with the same answers
    sl.insert("sc.*", Sub("sc.*", None))  # (drops the cached sc.<i> entries)
    got = sl.match_many(["sc.1", "sc.x", "sc.2"])
    assert [len(r.psubs) for r in got] == [2, 1, 2] and calls


def test_many_devices_under_a_full_wildcard_are_one_shape_entry():
    # issue 31's plgd shape: a stream on plgd.> takes plgd.<device>.<event> from more devices
    # than any cache holds; the walk ends at the device token (no node for it), so one entry
    # keyed by "plgd." answers them all, with the one result
    sl = Sublist()
    stream = Sub("plgd.>", None)
    api = Sub("$JS.API.>", None)
    lit = Sub("plgd.d00005.online", None)  # a device with a node of its own: walked
    mid = Sub("plgd.d00006.*", None)
    for s in (stream, api, lit, mid):
        sl.insert(s.subject, s)
    run = ["plgd.d%05d.%s" % (i % 20_000, ("online", "offline")[i % 2]) for i in range(40_000)]
    got = sl.match_many(run[:10])
    before = sl.stats()
    got += sl.match_many(run[10:])
    after = sl.stats()
    fresh = Sublist(cache=False)
    for s in (stream, api, lit, mid):
        fresh.insert(s.subject, s)
    assert [set(r.psubs) for r in got] == [set(fresh.match(s).psubs) for s in run]
    plain = [r for s, r in zip(run, got) if not s.startswith(("plgd.d00005.", "plgd.d00006."))]
    assert len(plain) == 40_000 - 4 and all(r is plain[0] for r in plain) and plain[0].psubs == (stream,)
    # counted as hits, and the run did not flood the main cache (nor walk the trie per device)
    assert after["num_matches"] - before["num_matches"] == len(run) - 10
    assert after["cache_hit_rate"] > 0.99 and sl.cache_count() < 20
    # the same prefix but no more tokens after the missing one, empty tokens, other shapes
    odd = ["plgd.d1", "plgd.d1.", "plgd..x", "plgd.d1..x", "plgd.d00005.online", "plgd.d00006.x", "plgd.d1.a.b"]
    for s in odd:
        assert set(sl.match(s).psubs) == set(fresh.match(s).psubs), s
    assert [set(r.psubs) for r in sl.match_many(odd)] == [set(fresh.match(s).psubs) for s in odd]
    # a new device with a node of its own empties the entry: walked again
    dev = Sub("plgd.d00007.>", None)
    sl.insert(dev.subject, dev)
    assert set(sl.match("plgd.d00007.online").psubs) == {stream, dev}
    assert sl.match("plgd.d00008.online").psubs == (stream,)
