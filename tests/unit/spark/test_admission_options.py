"""Admission-control and by-timestamp options (Kafka's names) and their planning helpers."""

from __future__ import annotations

import pytest

from natsd.spark.options import OptionError, ReadOptions, parse_bytes, parse_duration
from natsd.spark.planning import bytes_to_sequences, cap_task_size


def _ro(streaming=True, **opts):
    return ReadOptions.parse({"stream": "S", **{k.lower(): v for k, v in opts.items()}}, streaming=streaming)


def test_durations_and_sizes():
    assert parse_duration(None, "maxTriggerDelay", 900.0) == 900.0
    assert [parse_duration(v, "d", 0) for v in ("15m", "30s", "500ms", "1h", "2.5")] == [900, 30, 0.5, 3600, 2.5]
    assert [parse_bytes(v, "b") for v in ("10", "10k", "2m", "1g", "3kb")] == [10, 10240, 2 << 20, 1 << 30, 3072]
    for bad in ("soon", "-1s", "1w"):
        with pytest.raises(OptionError, match="maxTriggerDelay"):
            _ro(maxTriggerDelay=bad)
    with pytest.raises(OptionError, match="maxBytesPerTrigger"):
        _ro(maxBytesPerTrigger="0")


def test_by_timestamp_options():
    ro = _ro(
        streaming=False,
        startingOffsetsByTimestamp='{"S": 0, "T": "2026-11-01T00:00:00Z"}',
        endingOffsetsByTimestamp='{"S": "2026-11-02"}',
    )
    assert ro.starting_time("S") == "1970-01-01T00:00:00Z" and ro.starting_time("T") == "2026-11-01T00:00:00Z"
    assert ro.starting_time("U") is None and ro.ending_time("S") == "2026-11-02T00:00:00Z"
    assert _ro(startingTimestamp="0", startingOffsetsByTimestamp='{"S": 5}').starting_time("S") == (
        "1970-01-01T00:00:00Z"  # startingTimestamp wins, as in Kafka
    )
    assert _ro().timestamp_strategy == "error"  # Kafka's default
    assert _ro(startingOffsetsByTimestampStrategy="LATEST").timestamp_strategy == "latest"
    for name, bad in (
        ("startingOffsetsByTimestamp", "[1]"),
        ("startingOffsetsByTimestamp", '{"S": true}'),
        ("startingOffsetsByTimestampStrategy", "earliest"),
    ):
        with pytest.raises(OptionError, match=name):
            _ro(**{name: bad})
    with pytest.raises(OptionError, match="batch reads only"):
        _ro(endingOffsetsByTimestamp='{"S": 1}')


def test_min_max_and_per_partition_limits():
    ro = _ro(minOffsetsPerTrigger="100", maxRecordsPerPartition="5000")
    assert (ro.min_offsets_per_trigger, ro.max_trigger_delay, ro.max_records_per_partition) == (100, 900.0, 5000)
    with pytest.raises(OptionError, match="minOffsetsPerTrigger"):
        _ro(minOffsetsPerTrigger="0")


def test_cap_task_size_and_bytes_to_sequences():
    plan = [("A", 1, 10), ("B", 5, 6)]
    assert cap_task_size(plan, None) == plan
    assert cap_task_size(plan, 4) == [("A", 1, 4), ("A", 5, 7), ("A", 8, 10), ("B", 5, 6)]
    assert bytes_to_sequences(1000, {"A": 50, "B": 50}, {"A": 100.0, "B": 300.0}) == 5  # 200 B average
    assert bytes_to_sequences(10, {"A": 50}, {"A": 100.0}) == 1  # at least one
    assert bytes_to_sequences(10, {"A": 0}, {}) == 1


def test_progress_options():
    ro = _ro(progressBucket="P")
    assert (ro.progress_bucket, ro.progress_key) == ("P", "S")  # the key defaults to the stream
    with pytest.raises(OptionError, match="progressKey"):
        ReadOptions.parse({"streampattern": "S.*", "progressbucket": "P"}, streaming=True)
    for name, bad in (("progressBucket", "a.b"), ("progressKey", "a..b")):
        with pytest.raises(OptionError, match=name):
            _ro(**{"progressBucket": "P", name: bad})
