"""Encoder output byte for byte (as captured from nats-server), and header/status blocks."""

from __future__ import annotations

import json

import pytest

from natsd.protocol import LocalProtocolError
from natsd.protocol.encoder import (
    OK,
    PING,
    PONG,
    encode_err,
    encode_hmsg,
    encode_info,
    encode_msg,
    hmsg_head,
    msg_head,
)
from natsd.protocol.headers import (
    build_header,
    build_status_header,
    get_header,
    get_header_bytes,
    nats_headers,
    parse_headers,
    remove_header,
    replace_header,
)


def test_constants():
    assert (OK, PING, PONG) == (b"+OK\r\n", b"PING\r\n", b"PONG\r\n")


def test_err_is_single_quoted():
    assert encode_err("Unknown Protocol Operation") == b"-ERR 'Unknown Protocol Operation'\r\n"
    assert (
        encode_err('Permissions Violation for Publish to "x"')
        == b"-ERR 'Permissions Violation for Publish to \"x\"'\r\n"
    )
    with pytest.raises(LocalProtocolError):
        encode_err("two\r\nlines")


def test_info_is_compact_json_line_with_go_escapes():
    line = encode_info({"server_id": "N1", "headers": True, "max_payload": 1048576, "x": "a>b"})
    assert line.startswith(b"INFO {") and line.endswith(b"} \r\n")  # the reference's trailing space
    assert b" " not in line[5:-3]
    assert b"\\u003e" in line
    assert json.loads(line[5:]) == {"server_id": "N1", "headers": True, "max_payload": 1048576, "x": "a>b"}


@pytest.mark.parametrize(
    "args,expected",
    [
        ((b"greet.a", b"1", b"", b"hi"), b"MSG greet.a 1 2\r\nhi\r\n"),
        ((b"svc", b"2", b"_INBOX.x.y", b"ping"), b"MSG svc 2 _INBOX.x.y 4\r\nping\r\n"),
        ((b"e", b"9", b"", b""), b"MSG e 9 0\r\n\r\n"),
    ],
)
def test_msg(args, expected):
    assert encode_msg(*args) == expected
    assert msg_head(args[0], args[1], args[2], len(args[3])) == expected[: expected.index(b"\r\n") + 2]


def test_hmsg_matches_capture():
    # [cap A]: HMSG greet.b 1 34 37 / NATS/1.0 / Foo: Bar / X-Multi: 1 / (blank) / hdr
    hdr = b"NATS/1.0\r\nFoo: Bar\r\nX-Multi: 1\r\n\r\n"
    assert len(hdr) == 34
    assert encode_hmsg(b"greet.b", b"1", b"", hdr, b"hdr") == b"HMSG greet.b 1 34 37\r\n" + hdr + b"hdr\r\n"
    assert hmsg_head(b"s", b"1", b"r", 12, 14) == b"HMSG s 1 r 12 14\r\n"


def test_status_headers_as_the_reference():
    assert build_status_header(404, "No Messages") == b"NATS/1.0 404 No Messages\r\n\r\n"
    assert build_status_header(503) == b"NATS/1.0 503\r\n\r\n"
    hb = build_status_header(408, "Request Timeout", {"Nats-Pending-Messages": "5", "Nats-Pending-Bytes": "0"})
    assert hb == b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 5\r\nNats-Pending-Bytes: 0\r\n\r\n"
    assert len(hb) == 81  # the length the capture shows
    nr = build_status_header(503, "", [("Nats-Subject", "nobody")])
    assert nr == b"NATS/1.0 503\r\nNats-Subject: nobody\r\n\r\n" and len(nr) == 38


def test_build_and_parse_headers():
    block = build_header({"Nats-Msg-Id": "m1", "A": "b c"})
    assert block == b"NATS/1.0\r\nNats-Msg-Id: m1\r\nA: b c\r\n\r\n"
    assert parse_headers(block) == (None, "", {"Nats-Msg-Id": ["m1"], "A": ["b c"]})
    assert build_header() == b"NATS/1.0\r\n\r\n"
    status, desc, hdrs = parse_headers(b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\n\r\n")
    assert (status, desc, hdrs) == (100, "Idle Heartbeat", {"Nats-Last-Consumer": ["3"]})
    assert get_header(block, "Nats-Msg-Id") == "m1"
    assert get_header(block, "Missing") is None
    assert get_header(None, "A") is None
    with pytest.raises(ValueError):
        parse_headers(b"HTTP/1.1 200\r\n\r\n")
    with pytest.raises(ValueError):
        build_header({"Bad\r\nKey": "v"})


# -- the one header scan: nats-server's sliceHeader rules ---------------------------------------


@pytest.mark.parametrize(
    "block, key, value",
    [
        (b"NATS/1.0\r\nNats-Msg-Id: m1\r\n\r\n", b"Nats-Msg-Id", b"m1"),
        (b"NATS/1.0\r\nNats-Msg-Id:m1\r\n\r\n", b"Nats-Msg-Id", b"m1"),  # no space needed
        (b"NATS/1.0\r\nNats-Msg-Id:   m1  \r\n\r\n", b"Nats-Msg-Id", b"m1  "),  # leading spaces only
        (b"NATS/1.0\r\nNats-Msg-Id:\r\n\r\n", b"Nats-Msg-Id", b""),  # present, empty
        (b"NATS/1.0\r\nA: 1\r\nA: 2\r\n\r\n", b"A", b"1"),  # the first wins
        (b"NATS/1.0\r\nX-Nats-Msg-Id: no\r\nNats-Msg-Id: yes\r\n\r\n", b"Nats-Msg-Id", b"yes"),  # starts a line
        (b"NATS/1.0\r\nNats-Msg-Id2: no\r\nNats-Msg-Id: yes\r\n\r\n", b"Nats-Msg-Id", b"yes"),  # ':' at once
        (b"NATS/1.0\r\nV: a: b\r\n\r\n", b"V", b"a: b"),
        (b"NATS/1.0\r\nV: tail", b"V", b"tail"),  # no final CRLF
        (b"NATS/1.0\r\nnats-msg-id: m1\r\n\r\n", b"Nats-Msg-Id", None),  # case-sensitive
        (b"NATS/1.0\r\nNats-Msg-Id : m1\r\n\r\n", b"Nats-Msg-Id", None),  # no space before ':'
        (b"Nats-Msg-Id: m1\r\n\r\n", b"Nats-Msg-Id", None),  # not after a CRLF
        (b"NATS/1.0\r\n\r\n", b"A", None),
        (b"", b"A", None),
        (None, b"A", None),
    ],
)
def test_get_header_follows_nats_server(block, key, value):
    assert get_header_bytes(block, key) == value
    assert get_header(block, key.decode()) == (None if value is None else value.decode())


def test_nats_headers_scans_the_nats_ones_with_the_same_rules():
    hdr = b"NATS/1.0\r\nNats-Msg-Id: a\r\nX: y\r\nNats-Msg-Id: b\r\nNats-TTL:  5s\r\nnats-rollup: all\r\n\r\n"
    assert nats_headers(hdr) == {b"Nats-Msg-Id": b"a", b"Nats-TTL": b"5s"}
    for name, value in nats_headers(hdr).items():
        assert get_header_bytes(hdr, name) == value
    assert nats_headers(b"NATS/1.0\r\nFoo: bar\r\n\r\n") == {}
    assert nats_headers(b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\n\r\n") == {
        b"Nats-Last-Consumer": b"3"
    }


def test_nats_headers_single_line_shortcut_matches_the_line_by_line_rules():
    """A block with one Nats-* line is read with three finds instead of a split: the answers must
    be those of the line-by-line rules (first of a name wins, name at a line start, ':' needed)."""
    import random

    def by_lines(block: bytes) -> dict:
        out: dict = {}
        for line in block.split(b"\r\n")[1:]:
            if line.startswith(b"Nats-"):
                k, sep, v = line.partition(b":")
                if sep and k not in out:
                    out[k] = v.lstrip(b" ")
        return out

    parts = [
        b"Nats-Msg-Id: a",
        b"Nats-Msg-Id:b",
        b"Nats-Incr: 1",
        b"X-Nats-A: 1",
        b"App: Nats-x",
        b"Nats-",
        b"Nats-X",
        b"Nats-Y:",
        b"",
        b" Nats-Z: 1",
        b"NATS/1.0",
        b"Nats-Msg-Id: c",
        b"\r",
        b"\n",
        b"Nats-Msg-Idx: 1",
    ]
    rnd = random.Random(7)
    for _ in range(20_000):
        lines = [rnd.choice([b"NATS/1.0", b"NATS/1.0 503", b"Nats-A: 1"])]
        lines += [rnd.choice(parts) for _ in range(rnd.randint(0, 4))]
        block = b"\r\n".join(lines) + rnd.choice([b"\r\n\r\n", b"\r\n", b"", b"\r"])
        assert nats_headers(block) == by_lines(block), block


def test_remove_and_replace_header_as_the_references_remove_then_gen():
    h = b"NATS/1.0\r\nNats-TTL: 1s\r\nA: b\r\nNats-TTL: 2\r\n\r\n"
    assert remove_header(h, b"Nats-TTL") == b"NATS/1.0\r\nA: b\r\n\r\n"
    assert replace_header(h, b"Nats-TTL", b"60") == b"NATS/1.0\r\nA: b\r\nNats-TTL: 60\r\n\r\n"
    assert replace_header(None, b"Nats-TTL", b"60") == b"NATS/1.0\r\nNats-TTL: 60\r\n\r\n"
    assert replace_header(b"NATS/1.0\r\n\r\n", b"X", b"1") == b"NATS/1.0\r\nX: 1\r\n\r\n"
