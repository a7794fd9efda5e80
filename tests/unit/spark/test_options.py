"""Option parsing for the jetstream data source (no Spark session, no sockets)."""

from __future__ import annotations

import pytest

from natsd.spark.options import EARLIEST, LATEST, ReadOptions, WriteOptions, parse_offsets, parse_timestamp


def test_offsets_forms():
    assert parse_offsets(None, "o", EARLIEST).default == EARLIEST
    assert parse_offsets("latest", "o", EARLIEST).default == LATEST
    assert parse_offsets(" 42 ", "o", EARLIEST).default == 42
    spec = parse_offsets('{"A": {"seq": 7}, "B": -2, "C": -1, "D": "latest", "E": 9}', "o", EARLIEST)
    assert spec.per_stream == {"A": 7, "B": EARLIEST, "C": LATEST, "D": LATEST, "E": 9}
    assert spec.for_stream("A") == 7 and spec.for_stream("Z") == EARLIEST


@pytest.mark.parametrize("bad", ["0", "-3", "soon", "{", '{"A": {"sequence": 1}}', "{}"])
def test_offsets_errors(bad):
    with pytest.raises(ValueError):
        parse_offsets(bad, "startingOffsets", EARLIEST)


def test_timestamps():
    # written as Go marshals a time.Time (natsd.gotime): fraction trimmed, nanoseconds kept
    assert parse_timestamp("1700000000000", "t") == "2023-11-14T22:13:20Z"
    assert parse_timestamp("1700000000123", "t") == "2023-11-14T22:13:20.123Z"
    assert parse_timestamp("2026-11-01T00:00:00Z", "t") == "2026-11-01T00:00:00Z"
    assert parse_timestamp("2026-11-01T00:00:00.123456789Z", "t") == "2026-11-01T00:00:00.123456789Z"
    assert parse_timestamp("2026-11-01T02:00:00+02:00", "t") == "2026-11-01T00:00:00Z"
    assert parse_timestamp("2026-11-01T00:00:00", "t") == "2026-11-01T00:00:00Z"  # naive = UTC
    assert parse_timestamp(None, "t") is None
    with pytest.raises(ValueError):
        parse_timestamp("yesterday", "startingTimestamp")


def test_read_options_defaults_follow_kafka():
    batch = ReadOptions.parse({"stream": "S"}, streaming=False)
    stream = ReadOptions.parse({"stream": "S"}, streaming=True)
    assert batch.starting.default == EARLIEST and stream.starting.default == LATEST
    assert batch.ending.default == LATEST
    assert batch.fail_on_data_loss is True and batch.include_headers is False
    assert batch.min_partitions == 1 and batch.max_messages_per_trigger is None
    assert batch.connect.servers == "nats://127.0.0.1:4222"


def test_read_options_parse_everything():
    ro = ReadOptions.parse(
        {
            "servers": "nats://a:1,nats://b:2",
            "user": "u",
            "password": "p",
            "streampattern": "ORD.*",
            "subjects": "o.eu.>, o.us.>",
            "startingoffsets": "5",
            "maxmessagespertrigger": "100",
            "minpartitions": "8",
            "includeheaders": "TRUE",
            "failondataloss": "false",
            "startingtimestamp": "0",
        },
        streaming=True,
    )
    assert ro.connect.urls() == ["nats://a:1", "nats://b:2"] and ro.connect.user == "u"
    assert ro.subjects == ("o.eu.>", "o.us.>")
    assert ro.matches("ORDERS") and not ro.matches("XORDERS")
    assert (ro.max_messages_per_trigger, ro.min_partitions) == (100, 8)
    assert ro.include_headers and not ro.fail_on_data_loss
    assert ro.starting_timestamp == "1970-01-01T00:00:00Z"


@pytest.mark.parametrize(
    "opts,streaming,msg",
    [
        ({}, False, "exactly one of"),
        ({"stream": "A", "streampattern": "B"}, False, "exactly one of"),
        ({"streampattern": "("}, False, "invalid regular expression"),
        ({"stream": "A", "endingoffsets": "5"}, True, "batch reads only"),
        ({"stream": "A", "minpartitions": "0"}, False, ">= 1"),
        ({"stream": "A", "includeheaders": "maybe"}, False, "true or false"),
    ],
)
def test_read_options_errors(opts, streaming, msg):
    with pytest.raises(ValueError, match=msg):
        ReadOptions.parse(opts, streaming=streaming)


def test_write_options():
    wo = WriteOptions.parse({"subject": "x.y", "idempotence": "column:order_id"}, streaming=False)
    assert (wo.idempotence, wo.id_column, wo.subject) == ("column", "order_id", "x.y")
    assert WriteOptions.parse({}, streaming=True).idempotence == "none"
    assert WriteOptions.parse({"idempotence": "positional"}, streaming=True).msg_id_prefix is None
    pos = WriteOptions.parse({"idempotence": "Positional", "msgidprefix": "job1"}, streaming=False)
    assert pos.idempotence == "positional" and pos.msg_id_prefix == "job1"
    with pytest.raises(ValueError, match="msgIdPrefix"):
        WriteOptions.parse({"idempotence": "positional"}, streaming=False)
    with pytest.raises(ValueError, match="none, positional or column"):
        WriteOptions.parse({"idempotence": "always"}, streaming=False)


def test_a_bad_servers_option_names_no_password():
    with pytest.raises(ValueError) as ei:
        ReadOptions.parse({"stream": "A", "servers": "http://app:s3cret@h:4222"}, streaming=False)
    assert "s3cret" not in str(ei.value) and "http://app:xxxxx@h:4222" in str(ei.value)


def test_static_registration_module_is_discoverable():
    """PySpark auto-registers ``DefaultSource`` from top-level ``pyspark_*`` modules on the path."""
    import pkgutil

    import pyspark_jetstream

    from natsd.spark import JetStreamDataSource

    assert "pyspark_jetstream" in {m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_")}
    assert pyspark_jetstream.DefaultSource is JetStreamDataSource
    assert JetStreamDataSource.name() == "jetstream"
