"""Big payloads spanning reads (16 KB JetStream publishes off a socket): the read that completes a
payload gives only the missing bytes, and the rest of it is parsed in place."""

from __future__ import annotations

import tracemalloc

import pytest

from natsd.protocol import Parser, RemoteProtocolError
from natsd.protocol.errors import ERR_UNKNOWN_PROTOCOL
from natsd.protocol.events import OP_PING, OP_PUB, OP_PUB_BATCH, unbatched

SIZE = 16384


def _pubs(n: int, reply: bool = True) -> tuple[bytes, list[tuple]]:
    data, expected = [], []
    for i in range(n):
        body = bytes([65 + i % 26]) * SIZE
        r = b"_INBOX.x.%d" % i if reply else b""
        data.append(b"PUB js.in %s%s%d\r\n%s\r\n" % (r, b" " if r else b"", SIZE, body))
        expected.append((OP_PUB, b"js.in", r, 0, body))
    return b"".join(data), expected


def _feed_cut(p: Parser, data: bytes, cuts: list[int], kind=bytes) -> list:
    out, prev = [], 0
    for c in sorted(set(cuts)) + [len(data)]:
        if c > prev:
            out += p.feed(kind(data[prev:c]))
            prev = c
    return unbatched(out)


@pytest.mark.parametrize("reply", [True, False])
@pytest.mark.parametrize("batch", [True, False])
def test_every_cut_around_a_payload_end_gives_the_same_events(reply, batch):
    data, expected = _pubs(3, reply)
    data += b"PING\r\n"
    expected.append((OP_PING,))
    first_end = data.index(b"\r\n", data.index(b"\r\n") + 2)  # the CR after the first payload
    line2 = data.index(b"\r\n", first_end + 2)
    for cut in [
        10,
        100,
        first_end - 1,
        first_end,
        first_end + 1,
        first_end + 2,
        first_end + 3,
        line2,
        line2 + 2,
        line2 + 3,
    ]:
        for second in (None, line2 + 2 + SIZE // 2, line2 + 2 + SIZE, line2 + 3 + SIZE):
            cuts = [cut] if second is None or second <= cut else [cut, second]
            got = _feed_cut(Parser(batch=batch), data, cuts)
            assert got == expected, (cut, second)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_small_reads_and_other_buffer_types(kind):
    # Reads smaller than a payload (the loop's read size does not fit the message): every piece
    # waits, the last one completes it, whatever buffer type the transport hands over.
    data, expected = _pubs(4)
    for step in (1000, 4096, 16000, SIZE + 30, 3 * SIZE):
        got = _feed_cut(Parser(batch=True), data, list(range(step, len(data), step)), kind)
        assert got == expected, step
        assert all(type(e[4]) is bytes for e in got)


def test_missing_terminator_after_a_spanning_payload():
    data, _ = _pubs(1)
    bad = data[:-2] + b"xx"
    p = Parser()
    assert p.feed(bad[:1000]) == []
    with pytest.raises(RemoteProtocolError) as ei:
        p.feed(bad[1000:])
    assert ei.value.err == ERR_UNKNOWN_PROTOCOL


def test_a_spanning_payload_then_identical_lines_still_batch():
    # The completed payload is an ordinary event: identical reply-less lines after it in the
    # same read merge with it into one batch, as they would without the split.
    data, expected = _pubs(4, reply=False)
    data = data.replace(b"PUB js.in", b"PUB js.same")
    expected = [(e[0], b"js.same", *e[2:]) for e in expected]
    p = Parser(batch=True)
    first = p.feed(data[: SIZE // 2]) + p.feed(data[SIZE // 2 : SIZE + 10])
    rest = p.feed(data[SIZE + 10 :])
    assert unbatched(first + rest) == expected
    assert len(rest) == 1 and rest[0][0] == OP_PUB_BATCH and len(rest[0][1]) == 4


def test_the_completing_read_is_not_copied_whole():
    # A big read that first completes a payload begun by the previous read: the parser copies
    # the payloads out of it (once), not the whole read into a buffer and out again (that cost
    # two more copies of every byte of a 16 KB publisher's reads).
    data, expected = _pubs(40)
    cut = SIZE // 2
    p = Parser(batch=True)
    head = p.feed(data[:cut])
    read = data[cut:]
    tracemalloc.start()
    try:
        rest = p.feed(read)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert unbatched(head + rest) == expected
    # the payloads themselves take ~len(read); before, the read was also copied twice
    assert peak < 1.3 * len(read), peak
