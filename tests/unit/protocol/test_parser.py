"""The sans-IO parser: every operation whole, byte by byte, and followed by trailing data
(h11's ``tr()`` pattern), plus limits and malformed input with the reference's -ERR texts."""

from __future__ import annotations

import pytest

from natsd.protocol import Parser, RemoteProtocolError
from natsd.protocol.errors import ERR_MAX_CONTROL_LINE, ERR_MAX_PAYLOAD, ERR_UNKNOWN_PROTOCOL
from natsd.protocol.events import OP_CONNECT, OP_HPUB, OP_PING, OP_PONG, OP_PUB, OP_SUB, OP_UNSUB, unbatched

TRAILING = b"PING\r\n"  # a complete op: must come out after the case's events, untouched


def tr(data: bytes, expected: list, **kw) -> None:
    """Check ``data`` parses to ``expected`` whole, byte by byte, and with trailing data."""
    # 1. whole
    assert Parser(**kw).feed(data) == expected
    # 2. one byte at a time: a single op must not come out before its last byte
    p = Parser(**kw)
    got: list = []
    for i in range(len(data) - 1):
        got += p.feed(data[i : i + 1])
        if len(expected) <= 1:
            assert got == [], f"event emitted early at byte {i} of {data!r}"
    got += p.feed(data[-1:])
    assert got == expected
    assert p.buffered == 0
    # 3. trailing data is left for the next event
    p = Parser(**kw)
    assert p.feed(data + TRAILING) == expected + [(OP_PING,)]
    # 4. and arriving in two halves at every split point
    for cut in range(1, len(data)):
        p = Parser(**kw)
        got = p.feed(data[:cut]) + p.feed(data[cut:])
        assert got == expected, f"split at {cut}"


CASES = [
    (b"PING\r\n", [(OP_PING,)]),
    (b"PONG\r\n", [(OP_PONG,)]),
    (b"ping\r\n", [(OP_PING,)]),
    (b"PING\n", [(OP_PING,)]),  # the reference accepts a bare LF
    (b"PINGX\r\n", [(OP_PING,)]),  # ...and ignores anything after PING up to the newline
    (b'CONNECT {"verbose":false,"name":"x"}\r\n', [(OP_CONNECT, {"verbose": False, "name": "x"})]),
    (b"connect {}\r\n", [(OP_CONNECT, {})]),
    (b"PUB foo 5\r\nhello\r\n", [(OP_PUB, b"foo", b"", 0, b"hello")]),
    (b"PUB foo  5\r\nhello\r\n", [(OP_PUB, b"foo", b"", 0, b"hello")]),  # nats-py: empty reply
    (b"PUB foo bar 0\r\n\r\n", [(OP_PUB, b"foo", b"bar", 0, b"")]),
    (b"PUB   foo   bar   2   \r\nhi\r\n", [(OP_PUB, b"foo", b"bar", 0, b"hi")]),
    (b"pub\tfoo\t2\r\nhi\r\n", [(OP_PUB, b"foo", b"", 0, b"hi")]),
    (b"PUB foo 4\r\n\r\n\r\n\r\n", [(OP_PUB, b"foo", b"", 0, b"\r\n\r\n")]),  # CRLF inside payload
    (b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", [(OP_HPUB, b"foo", b"", 12, b"NATS/1.0\r\n\r\nhi")]),
    (b"HPUB foo r 0 4\r\nabcd\r\n", [(OP_HPUB, b"foo", b"r", 0, b"abcd")]),  # nats.js: header length 0
    (b"hpub foo  12 12\r\nNATS/1.0\r\n\r\n\r\n", [(OP_HPUB, b"foo", b"", 12, b"NATS/1.0\r\n\r\n")]),
    (b"SUB foo 1\r\n", [(OP_SUB, b"foo", None, b"1")]),
    (b"SUB foo  1\r\n", [(OP_SUB, b"foo", None, b"1")]),  # nats-py: empty queue
    (b"SUB foo.* q 22\r\n", [(OP_SUB, b"foo.*", b"q", b"22")]),
    (b"sub foo.> q 3\n", [(OP_SUB, b"foo.>", b"q", b"3")]),
    (b"UNSUB 1\r\n", [(OP_UNSUB, b"1", None)]),
    (b"UNSUB 1 \r\n", [(OP_UNSUB, b"1", None)]),  # nats-py: trailing space
    (b"UNSUB 7 10\r\n", [(OP_UNSUB, b"7", 10)]),
    (b"UNSUB 7 x\r\n", [(OP_UNSUB, b"7", -1)]),
    (b"INFO {}\r\n", []),  # ignored from clients, as the reference does
    (b"+OK\r\n", []),
    (
        b"SUB a 1\r\nPUB a 1\r\nx\r\nUNSUB 1\r\n",
        [(OP_SUB, b"a", None, b"1"), (OP_PUB, b"a", b"", 0, b"x"), (OP_UNSUB, b"1", None)],
    ),
]


@pytest.mark.parametrize("data,expected", CASES, ids=[repr(c[0][:24]) for c in CASES])
def test_ops(data, expected):
    tr(data, expected)


def test_payload_is_exact_slice_and_bytes():
    p = Parser()
    (ev,) = p.feed(bytearray(b"PUB foo 3\r\nabc\r\n"))
    assert type(ev[4]) is bytes and ev[4] == b"abc"


def test_large_payload_in_many_chunks():
    body = bytes(range(256)) * 4096  # 1 MiB
    data = b"PUB big 1048576\r\n" + body + b"\r\n"
    p = Parser()
    out = []
    for i in range(0, len(data), 65536):
        out += p.feed(data[i : i + 65536])
    assert out == [(OP_PUB, b"big", b"", 0, body)]


def err_of(data: bytes, **kw) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as ei:
        Parser(**kw).feed(data)
    return ei.value


@pytest.mark.parametrize(
    "data,err",
    [
        (b"FOO bar\r\n", ERR_UNKNOWN_PROTOCOL),
        (b"FOO", ERR_UNKNOWN_PROTOCOL),  # rejected before the newline arrives
        (b"\r\n", ERR_UNKNOWN_PROTOCOL),
        (b"MSG foo 1 1\r\nx\r\n", ERR_UNKNOWN_PROTOCOL),
        (b"PUB\r\n", ERR_UNKNOWN_PROTOCOL),
        (b"UNSUB\r\n", ERR_UNKNOWN_PROTOCOL),
        (b"PI\rNG\r\n", ERR_UNKNOWN_PROTOCOL),
        (b"PUB foo 2\r\nabc\r\n", ERR_UNKNOWN_PROTOCOL),  # payload longer than announced
        (b"PUB foo 1\r\nx\nPING\r\n", ERR_UNKNOWN_PROTOCOL),  # payload must end with CRLF
        (b"PUB foo 1048577\r\n", ERR_MAX_PAYLOAD),
        (b"HPUB foo 10 1048577\r\n", ERR_MAX_PAYLOAD),
        (b"PUB " + b"a" * 5000 + b" 1\r\n", ERR_MAX_CONTROL_LINE),
        (b"PUB " + b"a" * 5000, ERR_MAX_CONTROL_LINE),  # even without the newline
    ],
)
def test_errors_with_reference_text(data, err):
    assert err_of(data).err == err


@pytest.mark.parametrize(
    "data",
    [
        b"PUB foo -1\r\n",
        b"PUB foo abc\r\n",
        b"PUB foo +1\r\n",
        b"PUB foo\r\n",
        b"PUB a b c 1\r\n",
        b"PUB \r\n",
        b"HPUB foo 10 5\r\n",
        b"HPUB foo 5\r\n",
        b"SUB foo\r\n",
        b"SUB a b c d\r\n",
        b"SUB \r\n",
        b"UNSUB 1 2 3\r\n",
        b"CONNECT\r\n",
        b"CONNECT {bad\r\n",
        b'CONNECT "x"\r\n',
        b"-ERR 'x'\r\n",
    ],
)
def test_silent_close_cases(data):
    # The reference closes these connections without an -ERR line.
    assert err_of(data).err is None


def test_limits_are_configurable():
    assert err_of(b"PUB foo 11\r\n", max_payload=10).err == ERR_MAX_PAYLOAD
    assert Parser(max_payload=10).feed(b"PUB foo 10\r\n0123456789\r\n")[0][4] == b"0123456789"
    assert err_of(b"SUB " + b"x" * 20 + b" 1\r\n", max_control_line=16).err == ERR_MAX_CONTROL_LINE


def test_events_before_error_are_kept_and_parser_stays_failed():
    p = Parser()
    with pytest.raises(RemoteProtocolError) as ei:
        p.feed(b"SUB a 1\r\nPING\r\nBAD\r\n")
    assert ei.value.events == [(OP_SUB, b"a", None, b"1"), (OP_PING,)]
    with pytest.raises(RemoteProtocolError):
        p.feed(b"PING\r\n")


def test_byte_by_byte_error_is_raised_at_the_offending_byte():
    p = Parser()
    assert p.feed(b"P") == []
    assert p.feed(b"U") == []
    with pytest.raises(RemoteProtocolError):
        p.feed(b"X")


def test_repeated_control_lines_use_the_cached_arguments():
    data = b"PUB a 1\r\nx\r\nPUB a 1\r\ny\r\nPUB b 1\r\nz\r\nPUB a 1\r\nw\r\n"
    expected = [
        (OP_PUB, b"a", b"", 0, b"x"),
        (OP_PUB, b"a", b"", 0, b"y"),
        (OP_PUB, b"b", b"", 0, b"z"),
        (OP_PUB, b"a", b"", 0, b"w"),
    ]
    tr(data, expected)
    # a cached line is still checked: payload length and CRLF, and a lowered max_payload
    p = Parser()
    p.feed(b"PUB a 2\r\nxx\r\n")
    with pytest.raises(RemoteProtocolError) as ei:
        p.feed(b"PUB a 2\r\nxxx\r\n")
    assert ei.value.err == ERR_UNKNOWN_PROTOCOL
    p = Parser()
    p.feed(b"PUB a 2\r\nxx\r\n")
    p.max_payload = 1
    with pytest.raises(RemoteProtocolError) as ei:
        p.feed(b"PUB a 2\r\nxx\r\n")
    assert ei.value.err == ERR_MAX_PAYLOAD


def test_batch_mode_merges_identical_runs():
    from natsd.protocol.events import OP_PUB_BATCH, Run

    data = (
        b"PUB a 1\r\nx\r\nPUB a 1\r\ny\r\nPUB a 1\r\nz\r\nPING\r\nPUB a 1\r\nq\r\n"
        b"HPUB h 12 13\r\nNATS/1.0\r\n\r\n1\r\nHPUB h 12 13\r\nNATS/1.0\r\n\r\n2\r\n"
    )
    got = Parser(batch=True).feed(data)
    assert got == [
        (OP_PUB_BATCH, Run(OP_PUB, b"a", None, b"", 0, [b"x", b"y", b"z"])),
        (OP_PING,),
        (OP_PUB, b"a", b"", 0, b"q"),
        (OP_PUB_BATCH, Run(OP_HPUB, b"h", None, b"", 12, [b"NATS/1.0\r\n\r\n1", b"NATS/1.0\r\n\r\n2"])),
    ]
    # Flattening a batched parse gives exactly the unbatched events, however the bytes are cut.
    plain = Parser().feed(data)
    for cut in range(1, len(data)):
        p = Parser(batch=True)
        assert unbatched(p.feed(data[:cut]) + p.feed(data[cut:])) == plain


def test_batch_mode_merges_a_canonical_stream_from_its_first_message():
    # A publisher streaming canonical "PUB <subject> <size>" lines (the core benchmark's shape):
    # one OP_PUB_BATCH per feed. The compiled build once emitted five OP_PUB events here (the run
    # detection compares tuples by identity; see natsd/_compiled.py), which the test above missed.
    from natsd.protocol.events import OP_PUB_BATCH, Run

    body = b"x" * 128
    data = b"PUB fa 128\r\n" + body + b"\r\n"
    p = Parser(batch=True)
    for _ in range(3):
        assert p.feed(data * 5) == [(OP_PUB_BATCH, Run(OP_PUB, b"fa", None, b"", 0, [body] * 5))]


def test_batch_mode_burst_ends_exactly_where_the_line_changes():
    """A long burst is measured with strided compares (natsd.protocol.runs), not frame by frame:
    a frame whose line differs in one byte, or whose payload contains the line itself, must end
    the batch exactly there, and flattening still gives the unbatched events."""
    import random

    from natsd.protocol.events import OP_PUB_BATCH

    rnd = random.Random(11)
    line = b"PUB bench.leaf 8\r\n"
    for trial in range(80):
        frames = [line + (line[:8] if i % 4 == 0 else b"%08d" % i) + b"\r\n" for i in range(rnd.randint(3, 400))]
        k = rnd.randrange(1, len(frames))
        j = rnd.randrange(4, len(line) - 4)  # a byte of the subject or the size
        odd = bytearray(line)
        odd[j] = ord("7") if j >= len(line) - 3 else ord("q")
        frames[k] = (bytes(odd) + frames[k][len(line) :]) if bytes(odd) != line else frames[k]
        if bytes(odd).endswith(b" 7\r\n"):
            frames[k] = b"PUB bench.leaf 8\r\n" + frames[k][len(line) :]  # keep it a valid frame
        data = b"".join(frames) + b"PING\r\n" + frames[0][: rnd.randrange(len(frames[0]))]
        p = Parser(batch=True)
        got = p.feed(data)
        flat = unbatched(got)
        complete = data[: len(data) - len(bytes(p._pending))] if p._pending else data
        assert flat == Parser().feed(complete), trial
        if frames[k].startswith(line):
            continue
        n_first = len(got[0][1]) if got[0][0] == OP_PUB_BATCH else 1
        assert n_first == k, (trial, k)  # the first burst stops right before the odd frame
