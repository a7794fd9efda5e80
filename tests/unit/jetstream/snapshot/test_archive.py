"""The NATSARC1 archive codec (natsd.jetstream.snapshot.archive): Go varints, the entry layout,
the incremental reader in any chunking, and what it refuses."""

from __future__ import annotations

import pytest

from natsd.jetstream.snapshot import (
    END_ENTRY,
    MAGIC,
    ArchiveError,
    ArchiveReader,
    encode_entry,
    encode_uvarint,
    encode_varint,
)
from tests.unit.jetstream.snapshot.flows import sample_archive

pytestmark = pytest.mark.unit


def test_varints_match_go_encoding():
    assert encode_uvarint(0) == b"\x00"
    assert encode_uvarint(127) == b"\x7f"
    assert encode_uvarint(128) == b"\x80\x01"
    assert encode_uvarint(300) == b"\xac\x02"
    # zig-zag: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3
    assert [encode_varint(v) for v in (0, -1, 1, -2)] == [b"\x00", b"\x01", b"\x02", b"\x03"]
    assert encode_varint(1_700_000_000_000_000_000) == encode_uvarint(3_400_000_000_000_000_000)


def test_entry_layout_is_the_reference_layout():
    e = encode_entry(b"orders.1", 5, 7, b"NATS/1.0\r\n\r\n", b"hello")
    # name_len, ts (zig-zag), seq, hdr_size, payload_size, name, hdr, payload
    assert e == b"\x08\x0a\x07\x0c\x05orders.1NATS/1.0\r\n\r\nhello"
    assert END_ENTRY == b"\x00" * 5


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
def test_reader_accepts_any_chunking(step):
    data = sample_archive()
    r = ArchiveReader()
    got = []
    for i in range(0, len(data), step):
        got.extend(r.feed(data[i : i + step]))
    assert [e.name for e in got] == ["state.json", "a.b", ""]
    assert got[1].ts == -3 and got[1].seq == 1 and got[1].hdr_size == 2 and got[1].payload == b"HHbody"
    assert got[2].is_end and r.ended


def test_reader_rejects_bad_magic_and_trailing_data():
    with pytest.raises(ArchiveError, match="unsupported snapshot format"):
        ArchiveReader().feed(b"NOTANARCHIVE")
    with pytest.raises(ArchiveError, match="after the end"):
        ArchiveReader().feed(sample_archive() + b"x")


def test_reader_bounds_entry_size():
    r = ArchiveReader(max_entry=10)
    with pytest.raises(ArchiveError, match="too large"):
        r.feed(MAGIC + encode_entry(b"x", 0, 1, b"", b"y" * 20))
