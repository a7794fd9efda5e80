"""Offset and partition planning for the Spark connector (pure functions, no Spark)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from natsd.spark.options import EARLIEST, LATEST
from natsd.spark.planning import (
    StreamPosition,
    cap_by_budget,
    check_data_loss,
    end_position,
    plan_ranges,
    split_range,
    start_position,
)

POS = StreamPosition(first_seq=101, last_seq=500, messages=400, created="2026-01-01T00:00:00Z")


def test_start_positions_are_last_consumed_sequences():
    assert start_position(EARLIEST, POS) == 100
    assert start_position(LATEST, POS) == 500
    assert start_position(250, POS) == 249  # sequence = first one to read
    assert start_position(EARLIEST, POS, time_seq=300) == 299  # a timestamp wins
    # never-written stream (first_seq 0) and purged stream (first = last + 1)
    assert start_position(EARLIEST, StreamPosition(0, 0)) == 0
    assert start_position(EARLIEST, StreamPosition(51, 50)) == 50


def test_end_positions_are_exclusive_like_kafka_and_clamped():
    assert end_position(LATEST, POS) == 500
    assert end_position(300, POS) == 299  # endingOffsets=300: 300 is the first sequence not read
    assert end_position(900, POS) == 500
    assert end_position(LATEST, POS, time_end_seq=200) == 199  # endingTimestamp is exclusive too
    assert end_position(150, POS, time_end_seq=200) == 149
    assert end_position(250, POS, time_end_seq=200) == 199


def test_split_range_examples():
    assert split_range(1, 10, 3) == [(1, 4), (5, 7), (8, 10)]
    assert split_range(1, 2, 5) == [(1, 1), (2, 2)]  # never more parts than sequences
    assert split_range(5, 4, 3) == []
    assert split_range(7, 7, 1) == [(7, 7)]


@given(lo=st.integers(1, 10**12), n=st.integers(0, 5000), parts=st.integers(1, 64))
def test_split_range_covers_exactly_once(lo, n, parts):
    hi = lo + n - 1
    out = split_range(lo, hi, parts)
    if n == 0:
        assert out == []
        return
    assert out[0][0] == lo and out[-1][1] == hi
    assert all(a <= b for a, b in out)
    assert all(out[i][1] + 1 == out[i + 1][0] for i in range(len(out) - 1))
    sizes = [b - a + 1 for a, b in out]
    assert max(sizes) - min(sizes) <= 1
    assert len(out) == min(parts, n)


def test_plan_ranges_spreads_min_partitions_by_size():
    plan = plan_ranges({"B": (1, 100), "A": (1, 300), "EMPTY": (5, 4)}, 4)
    assert [p[0] for p in plan] == ["A", "A", "A", "B"]
    assert plan[:3] == [("A", 1, 100), ("A", 101, 200), ("A", 201, 300)]
    # every non-empty stream gets a task even when minPartitions is smaller
    assert [p[0] for p in plan_ranges({"A": (1, 10), "B": (3, 3)}, 1)] == ["A", "B"]
    assert plan_ranges({"A": (9, 8)}, 8) == []


@given(
    sizes=st.dictionaries(st.sampled_from("ABCDE"), st.integers(0, 2000), min_size=1),
    parts=st.integers(1, 40),
)
def test_plan_ranges_covers_each_stream_exactly(sizes, parts):
    ranges = {s: (10, 9 + n) for s, n in sizes.items()}
    plan = plan_ranges(ranges, parts)
    for s, n in sizes.items():
        seqs = [q for (name, a, b) in plan if name == s for q in range(a, b + 1)]
        assert seqs == list(range(10, 10 + n))
    live = sum(1 for n in sizes.values() if n)
    if live:
        assert len(plan) >= min(live, parts) and len(plan) <= max(parts, live)


def test_cap_by_budget_admission_control():
    assert cap_by_budget({"A": 0}, {"A": 1000}, 400) == {"A": 400}
    assert cap_by_budget({"A": 800}, {"A": 1000}, 400) == {"A": 1000}
    assert cap_by_budget({"A": 0}, {"A": 1000}, None) == {"A": 1000}
    # proportional across streams, remainder handed out, total == budget
    out = cap_by_budget({"A": 0, "B": 0}, {"A": 300, "B": 100}, 101)
    assert out["A"] + out["B"] == 101 and out["A"] >= 75 and out["B"] >= 25
    # a new stream (no start) has no backlog counted against the budget
    assert cap_by_budget({}, {"N": 50}, 10) == {"N": 50}


@given(
    start=st.dictionaries(st.sampled_from("ABC"), st.integers(0, 1000), min_size=1),
    extra=st.lists(st.integers(0, 1000), min_size=3, max_size=3),
    budget=st.integers(1, 3000),
)
def test_cap_by_budget_never_overshoots(start, extra, budget):
    latest = {s: v + extra[i] for i, (s, v) in enumerate(sorted(start.items()))}
    out = cap_by_budget(start, latest, budget)
    assert all(start[s] <= out[s] <= latest[s] for s in latest)
    moved = sum(out[s] - start[s] for s in latest)
    assert moved == min(budget, sum(latest[s] - start[s] for s in latest))


def test_data_loss_detection():
    ok = StreamPosition(1, 100, 100, "t1")
    assert check_data_loss("S", 50, "t1", ok) is None
    assert check_data_loss("S", 100, "t1", ok) is None
    assert check_data_loss("S", 0, "", ok) is None  # older checkpoints without a created time
    # limits removed 51..150
    loss = check_data_loss("S", 50, "t1", StreamPosition(151, 250, 100, "t1"))
    assert loss and "next sequence 51 < first available 151" in loss.message and loss.resume_from == 150
    # purged (first = last + 1) with unread messages
    assert check_data_loss("S", 50, "t1", StreamPosition(101, 100, 0, "t1")).resume_from == 100
    # fully read, then purged: nothing lost
    assert check_data_loss("S", 100, "t1", StreamPosition(101, 100, 0, "t1")) is None
    # re-created: different creation time
    loss = check_data_loss("S", 20, "t1", StreamPosition(1, 30, 30, "t2"))
    assert loss and "re-created" in loss.message and loss.resume_from == 0
    # went backwards without a creation time to compare
    assert "beyond the last sequence" in check_data_loss("S", 20, "", StreamPosition(1, 5, 5, "")).message


@pytest.mark.parametrize("seq", [0, -5])
def test_split_range_rejects_nothing_but_empty(seq):
    assert split_range(1, seq, 2) == []
