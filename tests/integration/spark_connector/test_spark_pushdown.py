"""Filter pushdown (``spark.sql.python.filterPushdown.enabled``): the same queries give the same
rows with and without it, and with it the planned ranges and filter subjects shrink."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from .conftest import make_stream, publish

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]  # a timeout inside py4j breaks the shared session

CONF = "spark.sql.python.filterPushdown.enabled"


@pytest.fixture(scope="module")
def split_stream(js_server):
    """PD: 60 messages on pd.a.N / pd.b.N, then (after a pause) 30 more: two time slices."""
    make_stream(js_server.url, "PD", ["pd.>"])
    publish(js_server.url, [(f"pd.{'ab'[i % 2]}.{i % 3}", str(i).encode()) for i in range(60)])
    time.sleep(0.05)
    cut = datetime.now(timezone.utc)
    time.sleep(0.05)
    publish(js_server.url, [(f"pd.{'ab'[i % 2]}.{i % 3}", str(i).encode()) for i in range(60, 90)])
    return js_server.url, cut


QUERIES = [
    ("subject = 'pd.a.0'", lambda i, s: s == "pd.a.0"),
    ("subject IN ('pd.a.1', 'pd.b.2')", lambda i, s: s in ("pd.a.1", "pd.b.2")),
    ("subject LIKE 'pd.b.%' AND seq > 10 AND seq <= 70", lambda i, s: s.startswith("pd.b.") and 10 < i <= 70),
    ("seq = 42", lambda i, s: i == 42),
    ("subject LIKE 'pd.%' AND data = CAST('3' AS BINARY)", lambda i, s: i == 4),
]


def _rows(spark, url, where):
    df = spark.read.format("jetstream").option("servers", url).option("stream", "PD").option("minPartitions", 2)
    return sorted((r.seq, r.subject) for r in df.load().where(where).select("seq", "subject").collect())


@pytest.mark.parametrize("enabled", ["false", "true"])
def test_same_rows_with_and_without_pushdown(spark, split_stream, enabled):
    url, cut = split_stream
    subjects = {i + 1: f"pd.{'ab'[i % 2]}.{i % 3}" for i in range(90)}
    spark.conf.set(CONF, enabled)
    try:
        for where, want in QUERIES:
            expected = sorted((q, s) for q, s in subjects.items() if want(q, s))
            assert _rows(spark, url, where) == expected, where
        late = _rows(spark, url, f"timestamp >= '{cut.isoformat()}' AND subject = 'pd.a.0'")
        assert late == sorted((q, s) for q, s in subjects.items() if q > 60 and s == "pd.a.0")
        early = _rows(spark, url, f"timestamp < '{cut.isoformat()}'")
        assert [q for q, _ in early] == list(range(1, 61))
    finally:
        spark.conf.unset(CONF)


def test_pushed_filters_shrink_the_plan(split_stream):
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThan

    from natsd.spark.datasource import JetStreamPushdownReader
    from natsd.spark.options import ReadOptions

    url, cut = split_stream
    reader = JetStreamPushdownReader(ReadOptions.parse({"servers": url, "stream": "PD"}, streaming=False))
    fs = [EqualTo(("subject",), "pd.b.1"), GreaterThanOrEqual(("timestamp",), cut), LessThan(("seq",), 80)]
    left = list(reader.pushFilters(fs))
    assert left == [fs[1]]  # time bounds are a speed-up; Spark checks them again
    (part,) = reader.partitions()
    assert (part.spec.lo, part.spec.hi, part.spec.filters) == (61, 79, ("pd.b.1",))
    rows = [r for b in reader.read(part) for r in b.to_pylist()]
    assert [r["seq"] for r in rows] == [q for q in range(61, 80) if (q - 1) % 2 == 1 and (q - 1) % 3 == 1]
