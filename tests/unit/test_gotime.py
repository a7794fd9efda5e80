"""natsd.gotime: Go's time.ParseDuration / Duration.String / RFC 3339, byte for byte.

The expected values are what Go (nats-server 2.15.1's config parser, i.e. time.ParseDuration,
and Go's formatting) gives; the error texts were checked against ``nats-server -t`` with
``lame_duck_duration: "<input>"``.
"""

from __future__ import annotations

import pytest

from natsd.gotime import (
    GO_ZERO_NS,
    GO_ZERO_TIME,
    HOUR,
    MAX_DURATION,
    MILLISECOND,
    MINUTE,
    SECOND,
    format_duration,
    format_rfc3339,
    format_rfc3339_or_zero,
    parse_duration,
    parse_rfc3339,
    parse_rfc3339_or_zero,
    uptime,
)

# -- parse_duration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, ns",
    [
        ("0", 0),
        ("+0", 0),
        ("-0", 0),
        ("0s", 0),
        ("0.0s", 0),
        ("1ns", 1),
        ("1us", 1_000),
        ("1\u00b5s", 1_000),
        ("1\u03bcs", 1_000),
        ("1ms", MILLISECOND),
        ("1s", SECOND),
        ("1m", MINUTE),
        ("1h", HOUR),
        ("5s", 5 * SECOND),
        ("30s", 30 * SECOND),
        ("1478s", 1478 * SECOND),
        ("-5s", -5 * SECOND),
        ("+5s", 5 * SECOND),
        ("1.5h", 90 * MINUTE),
        (".5s", SECOND // 2),
        ("1.s", SECOND),
        ("-.5h", -30 * MINUTE),
        ("1h2m3.004s", HOUR + 2 * MINUTE + 3 * SECOND + 4 * MILLISECOND),
        ("2h45m", 2 * HOUR + 45 * MINUTE),
        ("1h1h", 2 * HOUR),
        ("300ms", 300 * MILLISECOND),
        ("1.0000000001s", SECOND),  # below a nanosecond: dropped
        ("0.3333333333h", 1_199_999_999_880),  # the nanosecond Go's float64 scaling lands on
        ("100.00100s", 100 * SECOND + MILLISECOND),
        ("9007199254740993ns", 9007199254740993),  # 2**53 + 1: a float would round it to even
        ("9223372036854775807ns", MAX_DURATION),
        ("-9223372036854775808ns", -(1 << 63)),
        ("2562047h47m16.854775807s", MAX_DURATION),
        ("1.00000000000000000000000000000001s", SECOND),  # fraction digits beyond int64 are ignored
    ],
)
def test_parse_duration_values(text, ns):
    assert parse_duration(text) == ns
    assert isinstance(parse_duration(text), int)


@pytest.mark.parametrize(
    "text, message",
    [
        ("", 'time: invalid duration ""'),
        ("-", 'time: invalid duration "-"'),
        ("x", 'time: invalid duration "x"'),
        (".s", 'time: invalid duration ".s"'),
        ("1", 'time: missing unit in duration "1"'),
        ("1s2", 'time: missing unit in duration "1s2"'),
        ("1x", 'time: unknown unit "x" in duration "1x"'),
        ("1e3s", 'time: unknown unit "e" in duration "1e3s"'),
        ("1 s", 'time: unknown unit " s" in duration "1 s"'),
        ("1S", 'time: unknown unit "S" in duration "1S"'),
        ("1d", 'time: unknown unit "d" in duration "1d"'),
        ("1\u00b5", 'time: unknown unit "\\xc2\\xb5" in duration "1\\xc2\\xb5"'),
        ('1"', 'time: unknown unit "\\"" in duration "1\\""'),
        ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
        ("2562048h", 'time: invalid duration "2562048h"'),
        ("99999999999999999999s", 'time: invalid duration "99999999999999999999s"'),
        ("2562047h47m16.854775808s", 'time: invalid duration "2562047h47m16.854775808s"'),
        ("5000000h5000000h", 'time: invalid duration "5000000h5000000h"'),
        ("--1s", 'time: invalid duration "--1s"'),
        ("1s-1s", 'time: unknown unit "s-" in duration "1s-1s"'),
    ],
)
def test_parse_duration_errors_are_gos_texts(text, message):
    with pytest.raises(ValueError) as e:
        parse_duration(text)
    assert str(e.value) == message


def test_parse_duration_extra_units_extend_gos_table_only():
    day = 24 * HOUR
    assert parse_duration("1d12h", extra_units={"d": day}) == day + 12 * HOUR
    assert parse_duration("1.5d", extra_units={"d": day}) == day + 12 * HOUR
    with pytest.raises(ValueError, match='unknown unit "w"'):
        parse_duration("1w", extra_units={"d": day})
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration("200000000d", extra_units={"d": day})


# -- format_duration --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ns, text",
    [
        (0, "0s"),
        (1, "1ns"),
        (999, "999ns"),
        (1_000, "1\u00b5s"),
        (1_500, "1.5\u00b5s"),
        (1_001, "1.001\u00b5s"),
        (MILLISECOND, "1ms"),
        (1_500_000, "1.5ms"),
        (1_000_001, "1.000001ms"),
        (500 * MILLISECOND, "500ms"),
        (999_999_999, "999.999999ms"),
        (SECOND, "1s"),
        (1_500_000_000, "1.5s"),
        (SECOND + 1, "1.000000001s"),
        (MINUTE, "1m0s"),
        (90 * SECOND, "1m30s"),
        (90 * SECOND + SECOND // 2, "1m30.5s"),
        (HOUR, "1h0m0s"),
        (HOUR + 2 * MINUTE + 3 * SECOND + 4 * MILLISECOND, "1h2m3.004s"),
        (8760 * HOUR, "8760h0m0s"),
        (-SECOND, "-1s"),
        (-1, "-1ns"),
        (-90 * SECOND, "-1m30s"),
        (MAX_DURATION, "2562047h47m16.854775807s"),
        (-(1 << 63), "-2562047h47m16.854775808s"),
        (9007199254740993, "2501h59m59.254740993s"),
    ],
)
def test_format_duration_is_go_string(ns, text):
    assert format_duration(ns) == text


@pytest.mark.parametrize(
    "ns",
    [
        0,
        1,
        1_500,
        MILLISECOND,
        1_234_567_891,
        59 * SECOND,
        HOUR + 1,
        MAX_DURATION,
        -(1 << 63),
        -7 * MINUTE,
        9007199254740993,
    ],
)
def test_format_then_parse_round_trips(ns):
    assert parse_duration(format_duration(ns)) == ns


@pytest.mark.parametrize(
    "ns, text",
    [
        (0, "0s"),
        (-5 * SECOND, "0s"),
        (SECOND - 1, "0s"),
        (59 * SECOND, "59s"),
        (279 * SECOND, "4m39s"),
        (HOUR, "1h0m0s"),
        (86400 * SECOND + HOUR + 2 * MINUTE + 3 * SECOND, "1d1h2m3s"),
        (365 * 86400 * SECOND + SECOND, "1y0d0h0m1s"),
        (800 * 86400 * SECOND, "2y70d0h0m0s"),
    ],
)
def test_uptime_is_nats_servers_spelling(ns, text):
    assert uptime(ns) == text


# -- RFC 3339 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ns, text",
    [
        (0, "1970-01-01T00:00:00Z"),
        (1, "1970-01-01T00:00:00.000000001Z"),
        (1_763_719_000 * SECOND + 473_919_500, "2025-11-21T09:56:40.4739195Z"),
        (1_763_719_000 * SECOND + 100_000_000, "2025-11-21T09:56:40.1Z"),
        (-1, "1969-12-31T23:59:59.999999999Z"),
        (GO_ZERO_NS, GO_ZERO_TIME),
        (253402300799 * SECOND + 999_999_999, "9999-12-31T23:59:59.999999999Z"),
    ],
)
def test_format_rfc3339_as_go_marshals_utc(ns, text):
    assert format_rfc3339(ns) == text
    assert parse_rfc3339(text) == ns


def test_format_rfc3339_or_zero_maps_unset_to_gos_zero_time():
    assert format_rfc3339_or_zero(0) == GO_ZERO_TIME
    assert format_rfc3339_or_zero(-5) == GO_ZERO_TIME
    assert format_rfc3339_or_zero(SECOND) == "1970-01-01T00:00:01Z"
    assert parse_rfc3339_or_zero("") == 0
    assert parse_rfc3339_or_zero(GO_ZERO_TIME) == 0
    assert parse_rfc3339_or_zero("1970-01-01T00:00:01Z") == SECOND


@pytest.mark.parametrize(
    "text, ns",
    [
        ("2026-11-21T09:56:02Z", 1795254962 * SECOND),
        ("2026-11-21T09:56:02.5Z", 1795254962 * SECOND + 500_000_000),
        ("2026-11-21T10:56:02.5+01:00", 1795254962 * SECOND + 500_000_000),
        ("2026-11-21T04:26:02.5-05:30", 1795254962 * SECOND + 500_000_000),
        ("2026-11-21T09:56:02.123456789999Z", 1795254962 * SECOND + 123_456_789),  # truncated, as Go
        ("2026-11-21T09:56:02.000000001Z", 1795254962 * SECOND + 1),
        ("2024-02-29T00:00:00Z", 1709164800 * SECOND),
        ("1969-12-31T23:59:59Z", -SECOND),
    ],
)
def test_parse_rfc3339(text, ns):
    assert parse_rfc3339(text) == ns


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2026-11-21",
        "2026-11-21T09:56:02",
        "2026-11-21 09:56:02Z",
        "2026-11-21t09:56:02Z",
        "2026-11-21T09:56:02z",
        "2026-11-21T09:56Z",
        "2026-11-21T09:56:02.Z",
        "2026-11-21T09:56:02+0100",
        "2026-13-01T00:00:00Z",
        "2025-02-29T00:00:00Z",
        "2026-11-21T24:00:00Z",
        "2026-11-21T09:60:00Z",
        "2026-11-21T09:56:60Z",
        "2026-11-21T09:56:02+24:00",
        "2026-11-21T09:56:02+01:60",
        "2026-11-21T09:56:02Z ",
        "\u0662026-11-21T09:56:02Z",
    ],
)
def test_parse_rfc3339_rejects_what_go_rejects(text):
    with pytest.raises(ValueError):
        parse_rfc3339(text)
