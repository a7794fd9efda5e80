"""natsctl value parsing and formatting: durations, sizes, numbers, templates (no sockets)."""

from __future__ import annotations

import re

import pytest

from natsd.cli.common import (
    UsageError,
    comma,
    format_duration,
    human_bytes,
    parse_duration,
    parse_size,
    parse_time,
    rfc3339,
)
from natsd.cli.pubsub import render_template

S = 1_000_000_000


@pytest.mark.parametrize(
    "text,ns",
    [
        ("1y", 365 * 86400 * S),
        ("2y", 2 * 365 * 86400 * S),
        ("1d", 86400 * S),
        ("1h", 3600 * S),
        ("1m", 60 * S),
        ("10s", 10 * S),
        ("1h30m", 5400 * S),
        ("500ms", S // 2),
        ("1.5s", 3 * S // 2),
        ("250us", 250_000),
        ("2w", 14 * 86400 * S),
        ("1M", 30 * 86400 * S),
        ("-1", 0),
        ("0", 0),
        ("unlimited", 0),
        ("30", 30 * S),
        ("1.h", 3600 * S),
        ("1d12h", 36 * 3600 * S),
        ("1.5d", 36 * 3600 * S),
        ("9007199254740993ns", 9007199254740993),
    ],
)
def test_parse_duration(text, ns):
    assert parse_duration(text) == ns


@pytest.mark.parametrize("bad", ["1x", "h1", "1h-", "abc", "-5s", "300y", ".h"])
def test_parse_duration_rejects(bad):
    with pytest.raises(UsageError, match="invalid"):
        parse_duration(bad, flag="--max-age")


@pytest.mark.parametrize(
    "ns,text",
    [
        (365 * 86400 * S, "8760h0m0s"),
        (2 * 365 * 86400 * S, "17520h0m0s"),
        (86400 * S, "24h0m0s"),
        (30 * S, "30s"),
        (120 * S, "2m0s"),
        (3 * S // 2, "1.5s"),
        (S // 2, "500ms"),
        (0, "0s"),
        (1500, "1.5µs"),
        (999, "999ns"),
    ],
)
def test_format_duration_is_gos(ns, text):
    assert format_duration(ns) == text


@pytest.mark.parametrize(
    "text,n",
    [
        ("-1", -1),
        ("1024", 1024),
        ("1KB", 1000),
        ("1KiB", 1024),
        ("1MiB", 1024**2),
        ("10GiB", 10 * 1024**3),
        ("512M", 512 * 1000**2),
        ("1.5kb", 1500),
        (2048, 2048),
    ],
)
def test_parse_size(text, n):
    assert parse_size(text) == n


def test_parse_size_rejects():
    with pytest.raises(UsageError, match="--max-bytes"):
        parse_size("lots", flag="--max-bytes")


@pytest.mark.parametrize(
    "n,text", [(0, "0 B"), (147, "147 B"), (1024, "1 KiB"), (1536, "1.5 KiB"), (10 * 1024**3, "10 GiB")]
)
def test_human_bytes(n, text):
    assert human_bytes(n) == text


def test_comma_and_time():
    assert comma(1_000_001) == "1,000,001"
    t = parse_time("2026-11-21T09:54:49.787067136Z")
    assert t is not None and (t.year, t.microsecond) == (2026, 787067)
    assert parse_time("0001-01-01T00:00:00Z") is None
    assert parse_time("2026-11-21T10:54:49.787067999+01:00") == t  # truncated to the microsecond
    assert parse_time("not a time") is None
    assert rfc3339(t) == "2026-11-21T09:54:49.787067Z"


def test_templates():
    assert render_template("order {{Count}}", 7) == "order 7"
    assert render_template("{{.Count}}-{{ Count }}", 3) == "3-3"
    # natscli's time.RFC3339: whole seconds
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", render_template("{{TimeStamp}}", 1))
    assert render_template("{{Unix}}", 1).isdigit() and len(render_template("{{UnixNano}}", 1)) >= 19
    r = render_template("{{Random 3 5}}", 1)
    assert 3 <= len(r) <= 5 and r.isalpha()
    assert render_template("{{ID}}", 1) != render_template("{{ID}}", 1)
    assert render_template("re: {{Request}}", 1, request="ping") == "re: ping"
    assert render_template("{{Unknown}} stays", 1) == "{{Unknown}} stays"
    assert render_template("no template", 1) == "no template"


def test_read_json_file_accepts_config_info_and_request_shapes(tmp_path):
    import json

    from natsd.cli.common import read_json_file

    cfg = {"name": "ORDERS", "subjects": ["ORDERS.*"]}
    shapes = {
        "bare.json": cfg,
        "stream_info.json": {"config": cfg, "state": {"messages": 0}, "created": "2026-01-01T00:00:00Z"},
    }
    for name, obj in shapes.items():
        (tmp_path / name).write_text(json.dumps(obj))
        assert read_json_file(str(tmp_path / name)) == cfg, name
    ccfg = {"durable_name": "TAIL", "deliver_subject": "out.tail", "ack_policy": "none"}
    (tmp_path / "con_info.json").write_text(json.dumps({"stream_name": "LOGS", "name": "TAIL", "config": ccfg}))
    (tmp_path / "seed_req.json").write_text(json.dumps({"stream_name": "LOGS", "config": ccfg}))
    for name in ("con_info.json", "seed_req.json"):
        assert read_json_file(str(tmp_path / name)) == {**ccfg, "stream_name": "LOGS"}
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(UsageError, match="invalid JSON"):
        read_json_file(str(tmp_path / "bad.json"))
    with pytest.raises(UsageError, match="cannot read"):
        read_json_file(str(tmp_path / "missing.json"))
