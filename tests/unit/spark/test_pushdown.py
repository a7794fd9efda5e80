"""Filter pushdown translation (pure): what becomes filter subjects, sequence and time bounds,
and what stays with Spark (returned by identity, as PySpark requires)."""

from __future__ import annotations

import os
from datetime import datetime, timezone

import pytest

pytest.importorskip("pyspark")
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringStartsWith,
)

from natsd.spark.pushdown import PUSHDOWN_WORKER, Pushed, subject_matches, translate

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
T0_NS = int(T0.timestamp()) * 1_000_000_000


def test_subject_filters_become_consumer_filters():
    assert translate([EqualTo(("subject",), "a.b")])[0].subjects == ("a.b",)
    assert translate([In(("subject",), ("a.b", "c", "a.b"))])[0].subjects == ("a.b", "c")
    assert translate([StringStartsWith(("subject",), "orders.eu.")])[0].subjects == ("orders.eu.>",)


@pytest.mark.parametrize(
    "f",
    [
        EqualTo(("subject",), "a.*"),  # a wildcard is not a subject a message has
        EqualTo(("subject",), "a..b"),
        StringStartsWith(("subject",), "ord"),  # not on a token boundary
        StringContains(("subject",), "x"),
        Not(EqualTo(("subject",), "a")),
        EqualTo(("data",), b"x"),
    ],
)
def test_what_cannot_be_pushed_exactly_stays_with_spark(f):
    pushed, left = translate([f])
    assert pushed == Pushed() and left == [f] and left[0] is f


def test_subject_literals_are_intersected_with_the_subjects_option():
    f = In(("subject",), ("orders.eu.1", "orders.us.1"))
    assert translate([f], ("orders.eu.>",))[0].subjects == ("orders.eu.1",)
    nothing, _ = translate([EqualTo(("subject",), "x")], ("orders.>",))
    assert nothing.subjects == () and nothing.nothing
    prefix = StringStartsWith(("subject",), "orders.")
    assert translate([prefix], ("orders.eu.>",)) == (Pushed(), [prefix])


def test_only_one_subject_filter_is_pushed_the_rest_stays_with_spark():
    a, b = EqualTo(("subject",), "a"), StringStartsWith(("subject",), "a.")
    pushed, left = translate([a, b])
    assert pushed.subjects == ("a",) and left == [b]


def test_sequence_comparisons_narrow_the_range_exactly():
    fs = [GreaterThan(("seq",), 10), LessThanOrEqual(("seq",), 20), GreaterThanOrEqual(("seq",), 5)]
    pushed, left = translate(fs)
    assert (pushed.seq_lo, pushed.seq_hi, left) == (11, 20, [])
    assert translate([EqualTo(("seq",), 7)])[0].seq_lo == 7 and translate([EqualTo(("seq",), 7)])[0].seq_hi == 7
    assert translate([LessThan(("seq",), 1)])[0].nothing


def test_time_bounds_are_pushed_and_also_left_to_spark():
    ge, lt = GreaterThanOrEqual(("timestamp",), T0), LessThan(("timestamp",), T0.replace(day=2))
    pushed, left = translate([ge, lt])
    assert pushed.ts_from_ns == T0_NS and pushed.ts_to_ns == T0_NS + 86_400 * 10**9
    assert left == [ge, lt]
    # Spark compares microseconds: > T starts 1 µs later, <= T ends 1 µs later (exclusive).
    gt, le = GreaterThan(("timestamp",), T0), LessThanOrEqual(("timestamp",), T0)
    assert translate([gt])[0].ts_from_ns == T0_NS + 1000 and translate([le])[0].ts_to_ns == T0_NS + 1000


def test_naive_timestamps_are_local_wall_clock_times():
    naive = datetime(2026, 11, 1, 12, 0, 0)
    assert translate([GreaterThanOrEqual(("timestamp",), naive)])[0].ts_from_ns == int(naive.timestamp()) * 10**9


def test_subject_matching():
    assert subject_matches("a.*", "a.b") and not subject_matches("a.*", "a.b.c")
    assert subject_matches("a.>", "a.b.c") and not subject_matches("a.>", "a")
    assert subject_matches("a.b", "a.b") and not subject_matches("a.b", "a.c")


def test_pyspark_still_has_the_pushdown_planner_the_source_recognises():
    import pyspark.sql.worker as w

    assert os.path.exists(os.path.join(os.path.dirname(w.__file__), PUSHDOWN_WORKER))


def test_is_not_null_on_columns_that_are_never_null_is_dropped():
    from pyspark.sql.datasource import IsNotNull, IsNull

    keep = IsNull(("seq",))
    pushed, left = translate([IsNotNull(("seq",)), IsNotNull(("subject",)), keep, IsNotNull(("headers",))])
    assert pushed == Pushed() and left[0] is keep and len(left) == 2
