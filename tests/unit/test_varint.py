"""natsd.varint: Go's binary.PutUvarint / Uvarint, as S2, snapshot archives and consumer state use them."""

from __future__ import annotations

import pytest

from natsd.varint import append_uvarint, encode_uvarint, read_uvarint


@pytest.mark.parametrize(
    "v,wire",
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (2**64 - 1, b"\xff" * 9 + b"\x01"),
    ],
)
def test_round_trip_with_go_bytes(v, wire):
    assert encode_uvarint(v) == wire
    out = bytearray(b"x")
    append_uvarint(out, v)
    assert bytes(out) == b"x" + wire
    # at an offset, with trailing data, and cut anywhere inside
    buf = b"ab" + wire + b"tail"
    assert read_uvarint(buf, 2, len(buf)) == (v, 2 + len(wire))
    for cut in range(2, 2 + len(wire)):
        assert read_uvarint(buf, 2, cut)[1] == -1


def test_negative_and_overlong_are_refused():
    with pytest.raises(ValueError):
        encode_uvarint(-1)
    with pytest.raises(ValueError):
        append_uvarint(bytearray(), -5)
    with pytest.raises(ValueError):
        read_uvarint(b"\xff" * 10 + b"\x01", 0, 11)
