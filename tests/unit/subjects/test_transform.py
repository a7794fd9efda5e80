"""Subject transforms and account mappings (natsd.subjects.transform / .mapping), against the
values nats-server produces (checked side by side in tests/integration/test_subject_mappings_reference.py)."""

from __future__ import annotations

import pytest

from natsd.subjects.mapping import MapDest, SubjectMapper
from natsd.subjects.transform import MappingError, SubjectTransform, fnv1a32, transform, validate_mapping

pytestmark = [pytest.mark.unit, pytest.mark.timeout(10)]


@pytest.mark.parametrize(
    ("src", "dest", "subject", "out"),
    [
        ("a.*.*", "b.{{wildcard(2)}}.$1", "a.x.y", "b.y.x"),
        ("a.*", "b.{{split(1,-)}}", "a.x-y--z-", "b.x.y.z"),
        ("a.*", "b.{{splitFromLeft(1,2)}}", "a.abcdef", "b.ab.cdef"),
        ("a.*", "b.{{splitFromRight(1,2)}}", "a.abcdef", "b.abcd.ef"),
        ("a.*", "b.{{splitFromLeft(1,9)}}", "a.abc", "b.abc"),
        ("a.*", "b.{{sliceFromLeft(1,2)}}", "a.abcdefg", "b.ab.cd.ef.g"),
        ("a.*", "b.{{sliceFromRight(1,3)}}", "a.abcdefg", "b.a.bcd.efg"),
        ("a.*", "b.{{left(1,2)}}.{{right(1,2)}}", "a.abcdef", "b.ab.ef"),
        ("a.>", "b.>", "a.x.y", "b.x.y"),
        ("a.*.>", "b.$1.>", "a.x.y.z", "b.x.y.z"),
        ("a", "b", "a", "b"),
    ],
)
def test_functions(src, dest, subject, out):
    assert SubjectTransform(src, dest).apply(subject) == out


def test_partition_is_fnv1a_of_the_named_tokens():
    tr = SubjectTransform("orders.*", "orders.{{partition(8,1)}}.{{wildcard(1)}}")
    assert fnv1a32(b"") == 0x811C9DC5 and fnv1a32(b"a") == 0xE40C292C  # FNV-1a reference vectors
    assert tr.apply("orders.42") == f"orders.{fnv1a32(b'42') % 8}.42"
    whole = SubjectTransform("x.*", "p.{{partition(3)}}")
    assert whole.apply("x.k") == f"p.{fnv1a32(b'x.k') % 3}"


def test_random_draw_is_injectable():
    tr = SubjectTransform("a", "b.{{random(10)}}", rand=lambda n: n - 1)
    assert tr.apply("a") == "b.9"


@pytest.mark.parametrize(
    ("src", "dest", "message"),
    [
        ("j.*", "k.{{foo(1)}}", "invalid mapping destination: unknown function in {{foo(1)}}"),
        (
            "c.*",
            "d.{{wildcard(2)}}",
            "invalid mapping destination: wildcard index out of range in {{wildcard(2)}}: [2]",
        ),
        ("w", "x.{{wildcard(1)}}", "invalid mapping destination: wildcard index out of range in {{wildcard(1)}}"),
        ("q.*", "r.*", "invalid subject"),
        ("u.>", "v", "invalid subject"),
        (
            "a.*",
            "b.{{wildcard()}}",
            "invalid mapping destination: not enough arguments passed to the function in {{wildcard()}}",
        ),
        (
            "a.*",
            "b.{{split(1)}}",
            "invalid mapping destination: not enough arguments passed to the function in {{split(1)}}",
        ),
        (
            "a.*",
            "b.{{left(1,2,3)}}",
            "invalid mapping destination: too many arguments passed to the function in {{left(1,2,3)}}",
        ),
        (
            "a.*",
            "b.{{partition(x)}}",
            "invalid mapping destination: function argument is invalid or in the wrong format in {{partition(x)}}",
        ),
    ],
)
def test_errors_carry_the_reference_text(src, dest, message):
    with pytest.raises(MappingError) as e:
        validate_mapping(src, dest)
    assert str(e.value) == message


def test_stream_transform_keeps_its_contract():
    assert transform("a.*", "b.$1", "a.x") == "b.x"
    assert transform("a.*", "b.$2", "a.x") == ""  # cannot be built
    assert transform("a.>", ">", "a.x") == "a.x"
    assert transform("a.*", "b.{{partition(2,1)}}", "a.x") == f"b.{fnv1a32(b'x') % 2}"


def test_weighted_destinations_add_the_source_for_the_remainder():
    m = SubjectMapper(rand=lambda n: 0)
    m.add("svc", [MapDest("svc.canary", 10)])
    assert m.map("svc") == "svc.canary"
    m.rand = lambda n: 10
    assert m.map("svc") == "svc"  # the 90 % left where it was
    assert m.map("other") is None


def test_explicit_source_below_100_drops_the_rest():
    m = SubjectMapper(rand=lambda n: 60)
    m.add("svc", [MapDest("svc", 50), MapDest("svc.b", 10)])
    assert m.map("svc") == ""


def test_first_matching_mapping_wins_and_replacing_keeps_its_place():
    m = SubjectMapper()
    m.add("a.*", [MapDest("one.$1")])
    m.add("a.b", [MapDest("two")])
    assert m.map("a.b") == "one.b"
    m.add("a.*", [MapDest("three.$1")])
    assert [x.src for x in m.mappings] == ["a.*", "a.b"] and m.map("a.b") == "three.b"


@pytest.mark.parametrize(
    ("dests", "message"),
    [
        ([MapDest("x", 60), MapDest("y", 60)], "total weight needs to be <= 100"),
        ([MapDest("x", 10), MapDest("x", 10)], 'duplicate entry for "x"'),
        ([MapDest("x", 101)], "individual weights need to be <= 100"),
    ],
)
def test_weight_errors(dests, message):
    with pytest.raises(MappingError, match=message):
        SubjectMapper().add("a", dests)


def test_matches_draws_nothing():
    def no_draw(n):
        raise AssertionError("matches() must not draw")

    m = SubjectMapper(rand=no_draw)
    m.add("svc.*", [MapDest("a.$1", 50), MapDest("b.$1", 50)])
    assert m.matches("svc.x") and not m.matches("other")
