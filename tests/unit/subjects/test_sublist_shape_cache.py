"""The Sublist's shape caches (results that depend on a prefix of the subject only) must always
answer exactly what a fresh trie walk answers, through any insert/remove."""

from __future__ import annotations

import random

from natsd.subjects.sublist import Sublist
from natsd.subjects.tokens import subject_matches


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


def test_random_against_subject_matches():
    rng = random.Random(11)
    toks = ["a", "b", "c", "*", ">"]
    lits = ["a", "b", "c", "d"]
    for _ in range(150):
        sl = Sublist()
        live: list[Sub] = []
        for _ in range(40):
            if live and rng.random() < 0.3:
                s = live.pop(rng.randrange(len(live)))
                assert sl.remove(s.subject, s, s.queue)
            else:
                t = [rng.choice(toks) for _ in range(rng.randint(1, 4))]
                if ">" in t:
                    t = t[:t.index(">") + 1]
                s = Sub(".".join(t), rng.choice([None, None, "q"]))
                sl.insert(s.subject, s, s.queue)
                live.append(s)
            for _ in range(20):
                lit = ".".join(rng.choice(lits) for _ in range(rng.randint(1, 5)))
                r = sl.match(lit)
                want_p = {s for s in live if s.queue is None and subject_matches(s.subject, lit)}
                want_q = {s for s in live if s.queue and subject_matches(s.subject, lit)}
                assert set(r.psubs) == want_p and len(r.psubs) == len(want_p)
                assert {m for g in r.qsubs for m in g} == want_q
