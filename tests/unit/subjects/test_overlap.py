"""OverlapTrie / first_overlap agree with subjects_collide and the pairwise loop (issue 14 item 6)."""

from __future__ import annotations

import random

import pytest

from natsd.subjects.overlap import OverlapBudgetExceeded, OverlapTrie, first_overlap
from natsd.subjects.tokens import subjects_collide


def pairwise(subjects):
    for i, s in enumerate(subjects):
        for j in range(i + 1, len(subjects)):
            if subjects_collide(subjects[j], s):
                return (i, j)
    return None


def rand_subject(rng: random.Random) -> str:
    toks = [rng.choice(["a", "b", "c", "*"]) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.2:
        toks[-1] = ">"
    return ".".join(toks)


def test_matches_subjects_collide_on_random_sets():
    rng = random.Random(7)
    for _ in range(3000):
        subs = [rand_subject(rng) for _ in range(rng.randint(1, 6))]
        assert first_overlap(subs) == pairwise(subs), subs
        trie = OverlapTrie()
        for k, s in enumerate(subs[:-1]):
            trie.insert(s, k)
        q = subs[-1]
        want = [k for k, s in enumerate(subs[:-1]) if subjects_collide(q, s)]
        assert trie.first_collision(q) == (want[0] if want else -1), (subs, q)


@pytest.mark.parametrize(
    "subs,want",
    [
        (["a.b", "x", "a.*"], (0, 2)),
        (["x.b", "a.*", "a.b", "x.*"], (0, 3)),
        (["q", "a.>", "b", "a.b.c", "a.*"], (1, 3)),
        (["a", "b c", "a"], (0, 2)),
        (["a", "a.>"], None),
        ([">", "a"], (0, 1)),
        (["a.*.c", "a.b.>"], (0, 1)),
        (["a..b", "a.*.b"], (0, 1)),
    ],
)
def test_reference_orders(subs, want):
    assert first_overlap(subs) == want == pairwise(subs)


def test_many_subjects_visit_few_nodes():
    """100,000 subjects (what a 1 MB request holds): the nodes visited grow linearly (the
    speed itself is measured in bench/bench_overlap.py, not here)."""
    subs = [f"orders.region{i % 50}.{i}" for i in range(100_000)] + ["events.*.created", "events.>"]
    assert first_overlap(subs) == (100_000, 100_001)
    trie = OverlapTrie(budget=5 * len(subs))  # raises past 5 nodes per subject
    for j, s in enumerate(subs[:-1]):
        assert trie.first_collision(s) == -1
        trie.insert(s, j)


def test_budget_bounds_the_work():
    trie = OverlapTrie(budget=1000)
    for i in range(2000):
        trie.insert(f"k{i}.*.x", i)
    with pytest.raises(OverlapBudgetExceeded):
        trie.first_collision("*.j.y")
