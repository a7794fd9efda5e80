"""Leafnode compression (natsd.server.leaf.compress): the reference's mode negotiation table,
s2_auto's levels by RTT, and the stream coders (natsd's writer read back by the reader, Go's S2
repeat copies decoded, chunking of the input irrelevant)."""

from __future__ import annotations

import os

import pytest

from natsd.server.leaf.compress import (
    CompressionError,
    S2Reader,
    S2Writer,
    auto_mode,
    info_mode,
    needs_compression,
    select_mode,
)
from natsd.server.transport.wsclient import leaf_ws_target

pytestmark = pytest.mark.unit

MS = 1_000_000


@pytest.mark.parametrize(
    "local,remote,want",
    [
        ("s2_fast", "", "not supported"),  # an old server announces nothing
        ("s2_fast", "not supported", "not supported"),
        ("s2_best", "off", "off"),
        ("accept", "accept", "off"),
        ("s2_better", "accept", "s2_better"),
        ("accept", "s2_auto", "s2_fast"),  # accept here, auto there: fast
        ("accept", "s2_best", "s2_best"),
        ("s2_fast", "s2_best", "s2_fast"),  # asymmetric: each side its own
        ("s2_auto", "s2_uncompressed", "s2_auto"),
    ],
)
def test_select_mode(local, remote, want):
    assert select_mode(local, remote) == want


def test_unknown_mode_is_an_error_with_the_reference_text():
    with pytest.raises(CompressionError, match='unsupported route compression mode "zstd"'):
        select_mode("s2_fast", "zstd")


def test_auto_levels_by_rtt():
    t = [10 * MS, 50 * MS, 100 * MS]
    assert [auto_mode(r * MS, t) for r in (0, 10, 11, 50, 99, 100, 101, 5000)] == [
        "s2_uncompressed",
        "s2_uncompressed",
        "s2_fast",
        "s2_fast",
        "s2_better",
        "s2_better",
        "s2_best",
        "s2_best",
    ]
    # a 0 disables a level; fewer thresholds end at the last one's level
    assert auto_mode(1 * MS, [0, 0, 20 * MS]) == "s2_better"
    assert auto_mode(30 * MS, [0, 0, 20 * MS]) == "s2_best"
    assert auto_mode(30 * MS, [5 * MS, 10 * MS]) == "s2_fast"


def test_info_mode_and_needs():
    assert info_mode("s2_auto", "s2_fast") == "s2_auto"
    assert info_mode("accept", "s2_fast") == "s2_fast"
    assert [needs_compression(m) for m in ("off", "not supported", "", "accept", "s2_auto", "s2_best")] == [
        False,
        False,
        False,
        True,
        True,
        True,
    ]


def test_writer_output_reads_back_in_any_chunking():
    w, r = S2Writer(), S2Reader()
    pieces = [b"INFO {}\r\n", b"abc" * 30_000, os.urandom(70_000), b"", b"PING\r\n"]
    stream = b"".join(w(p) for p in pieces)
    assert stream.startswith(b"\xff\x06\x00\x00sNaPpY") and stream.count(b"sNaPpY") == 1
    for step in (1, 7, 4096, len(stream)):
        r2 = S2Reader()
        out = b"".join(r2(stream[i : i + step]) for i in range(0, len(stream), step))
        assert out == b"".join(pieces)
    assert r(stream) == b"".join(pieces)


def test_go_s2_stream_with_repeat_copies_and_a_second_identifier():
    """An S2 stream as Go's writer emits it: 'S2sTwO', a compressed chunk whose block uses the
    repeat copy (1-byte-offset copy with offset 0), a stored chunk, then a new writer's identifier
    (nats-server replaces the writer when s2_auto changes level)."""
    # block: uvarint(12), literal "abcd", copy1 len 4 off 4 ("abcd"), repeat len 4 ("abcd")
    block = bytes([12, (4 - 1) << 2, *b"abcd", 0x01 | (0 << 2), 4, 0x01 | (0 << 2), 0])

    def chunk(typ, body):
        return bytes([typ]) + len(body).to_bytes(3, "little") + body

    stream = (
        chunk(0xFF, b"S2sTwO")
        + chunk(0x00, b"\0\0\0\0" + block)
        + chunk(0x01, b"\0\0\0\0PING\r\n")
        + chunk(0xFF, b"S2sTwO")
        + chunk(0xFE, b"pad")
        + chunk(0x01, b"\0\0\0\0PONG\r\n")
    )
    assert S2Reader()(stream) == b"abcd" * 3 + b"PING\r\nPONG\r\n"
    with pytest.raises(CompressionError):
        S2Reader()(chunk(0x00, b"\0\0\0\0" + block))  # no identifier first
    with pytest.raises(CompressionError):
        S2Reader()(chunk(0xFF, b"S2sTwO") + chunk(0x05, b"x"))  # reserved unskippable chunk type


def test_ws_target():
    assert leaf_ws_target("") == "/leafnode"
    assert leaf_ws_target("/") == "/leafnode"
    assert leaf_ws_target("/some/path/") == "/some/path/leafnode"
