"""Subject rules (nats-server: IsValidSubject, IsValidLiteralSubject, subjectIsSubsetMatch,
SubjectsCollide, matchLiteral)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.subjects.tokens import (
    is_literal,
    is_valid_publish_subject,
    is_valid_subject,
    subject_matches,
    subjects_collide,
    subset,
    tokenize,
)

VALID = [
    "foo",
    "foo.bar",
    "foo.*",
    "foo.>",
    ">",
    "*",
    "*.>",
    "foo.*.bar",
    "foo*bar",
    "foo.bar*",
    "a>",
    "foo.>a",
    "foo.**",
    "$JS.API.STREAM.CREATE.x",
    "_INBOX.abc.*",
    "ünïcode.subj",
]
INVALID = [
    "",
    ".",
    "foo.",
    ".foo",
    "foo..bar",
    "foo.>.bar",
    ">.foo",
    "foo bar",
    "foo\tbar",
    "foo\r",
    "foo\nbar",
    "foo\fbar",
    " ",
    "foo. .bar",
    "foo.>.>",
]


@pytest.mark.parametrize("s", VALID)
def test_valid_subjects(s):
    assert is_valid_subject(s)


@pytest.mark.parametrize("s", INVALID)
def test_invalid_subjects(s):
    assert not is_valid_subject(s)
    assert not is_valid_publish_subject(s)


@pytest.mark.parametrize(
    "s,lit",
    [
        ("foo", True),
        ("foo.bar.baz", True),
        ("foo*bar", True),
        ("foo.bar>", True),
        ("*foo", True),
        (">foo", True),
        ("foo.*", False),
        ("foo.>", False),
        ("*", False),
        (">", False),
        ("a.*.b", False),
    ],
)
def test_is_literal(s, lit):
    assert is_literal(s) is lit
    assert is_valid_publish_subject(s) is lit


def test_publish_fast_path_rejects_empty_tokens():
    for s in ["a..b", ".a", "a.", "a.b..", "a\x20b"]:
        assert not is_valid_publish_subject(s)
    assert is_valid_publish_subject("a.b.c")


def test_tokenize():
    assert tokenize("a.b.*.>") == ["a", "b", "*", ">"]
    assert tokenize("a") == ["a"]


@pytest.mark.parametrize(
    "pattern,literal,ok",
    [
        ("foo", "foo", True),
        ("foo", "bar", False),
        ("foo.*", "foo.bar", True),
        ("foo.*", "foo", False),
        ("foo.*", "foo.bar.baz", False),
        ("foo.>", "foo.bar", True),
        ("foo.>", "foo.bar.baz", True),
        ("foo.>", "foo", False),
        (">", "foo", True),
        (">", "foo.bar", True),
        ("*", "foo", True),
        ("*", "foo.bar", False),
        ("*.bar", "foo.bar", True),
        ("*.*.baz", "foo.bar.baz", True),
        ("foo.*.baz", "foo.bar.bax", False),
        ("foo*", "foo.bar", False),
        ("foo*", "foox", False),
        ("foo*", "foo*", True),
        ("foo.bar", "foo.bar.baz", False),
        ("foo.bar.baz", "foo.bar", False),
    ],
)
def test_subject_matches(pattern, literal, ok):
    assert subject_matches(pattern, literal) is ok


@pytest.mark.parametrize(
    "sub,sup,ok",
    [
        ("foo.bar", "foo.bar", True),
        ("foo.bar", "foo.*", True),
        ("foo.bar", "foo.>", True),
        ("foo.bar", ">", True),
        ("foo.*", "foo.*", True),
        ("foo.*", "foo.>", True),
        ("foo.*", "foo.bar", False),
        ("foo.>", "foo.*", False),
        ("foo.>", "foo.>", True),
        ("foo.>", ">", True),
        (">", "foo.>", False),
        ("foo.*.baz", "foo.>", True),
        ("foo.*.baz", "foo.*.*", True),
        ("foo.*.*", "foo.*.baz", False),
        ("foo.bar", "foo.bar.baz", False),
        ("foo", "foo.>", False),
        ("*", ">", True),
        ("*.>", ">", True),
        (">", "*.>", False),  # ">" matches "a", "*.>" needs two tokens
        ("*.>", "*", False),
    ],
)
def test_subset(sub, sup, ok):
    assert subset(sub, sup) is ok


@pytest.mark.parametrize(
    "a,b,ok",
    [
        ("foo.bar", "foo.bar", True),
        ("foo.bar", "foo.baz", False),
        ("foo.*", "foo.bar", True),
        ("foo.*", "*.bar", True),
        ("foo.*", "bar.*", False),
        ("foo.>", "foo.bar.baz", True),
        ("foo.>", "foo", False),
        ("foo.*", "foo.bar.baz", False),
        ("foo.*.>", "foo.bar", False),
        ("foo.*.>", "foo.bar.baz", True),
        (">", "anything.at.all", True),
        ("*", "foo.bar", False),
        ("foo.>", "*.bar.>", True),
        ("a.b.c", "a.b", False),
    ],
)
def test_subjects_collide(a, b, ok):
    assert subjects_collide(a, b) is ok
    assert subjects_collide(b, a) is ok


# Property checks over a small alphabet so that collisions and matches are frequent.
_token = st.sampled_from(["a", "b", "*", ">"])
_pattern = st.lists(_token, min_size=1, max_size=4).map(".".join).filter(is_valid_subject)
_literal = st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=5).map(".".join)
_ALL_LITERALS = [".".join(p) for n in range(1, 6) for p in __import__("itertools").product("ab", repeat=n)]


@settings(max_examples=200, deadline=None)
@given(_pattern, _pattern)
def test_subset_and_collide_agree_with_brute_force(a, b):
    # Literals of up to 5 tokens over {a, b} are enough to witness every pattern of <= 4 tokens.
    ma = {s for s in _ALL_LITERALS if subject_matches(a, s)}
    mb = {s for s in _ALL_LITERALS if subject_matches(b, s)}
    assert subjects_collide(a, b) == bool(ma & mb)
    if subset(a, b):
        assert ma <= mb
    elif ma <= mb:
        # Only a '>' reaching beyond the 5-token window could hide a counterexample.
        assert ">" in a
