"""The sans-IO leafnode protocol: every operation whole, byte by byte, with trailing data and split
at every point; the encoder round-trips through the parser; malformed input fails the parser."""

from __future__ import annotations

import pytest

from natsd.protocol.errors import ERR_MAX_PAYLOAD, ERR_UNKNOWN_PROTOCOL, RemoteProtocolError
from natsd.protocol.leaf import (
    L_CONNECT,
    L_ERR,
    L_INFO,
    L_MSG,
    L_MSG_RUN,
    L_OK,
    L_PING,
    L_PONG,
    L_SUB,
    L_UNSUB,
    LeafParser,
    encode_connect,
    encode_ls_minus,
    encode_ls_plus,
    msg_line,
    split_js_ack_deliver,
)

pytestmark = pytest.mark.unit

TRAILING = b"PING\r\n"

CASES = [
    (b"PING\r\n", [(L_PING,)]),
    (b"PONG\r\n", [(L_PONG,)]),
    (b"+OK\r\n", [(L_OK,)]),
    (b"-ERR 'Loop detected for leafnode account=\"$G\"'\r\n", [(L_ERR, 'Loop detected for leafnode account="$G"')]),
    (
        b'INFO {"server_id":"N1","leafnode_urls":["h:1"]} \r\n',
        [(L_INFO, {"server_id": "N1", "leafnode_urls": ["h:1"]})],
    ),
    (b'CONNECT {"name":"e","headers":true}\r\n', [(L_CONNECT, {"name": "e", "headers": True})]),
    (b"LS+ foo.>\r\n", [(L_SUB, b"foo.>", None, 1)]),
    (b"LS+ foo bar 3\r\n", [(L_SUB, b"foo", b"bar", 3)]),
    (b"LS- foo.>\r\n", [(L_UNSUB, b"foo.>", None)]),
    (b"LS- foo bar\r\n", [(L_UNSUB, b"foo", b"bar")]),
    (b"LMSG foo 5\r\nhello\r\n", [(L_MSG, b"foo", b"", (), 0, b"hello")]),
    (b"LMSG foo _INBOX.1 0\r\n\r\n", [(L_MSG, b"foo", b"_INBOX.1", (), 0, b"")]),
    (b"LMSG foo + r q1 q2 2\r\nhi\r\n", [(L_MSG, b"foo", b"r", (b"q1", b"q2"), 0, b"hi")]),
    (b"LMSG foo | q1 2\r\nhi\r\n", [(L_MSG, b"foo", b"", (b"q1",), 0, b"hi")]),
    (b"HMSG foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", [(L_MSG, b"foo", b"", (), 12, b"NATS/1.0\r\n\r\nhi")]),
    (b"HMSG foo r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", [(L_MSG, b"foo", b"r", (), 12, b"NATS/1.0\r\n\r\nhi")]),
    (b"HMSG foo + r q 12 12\r\nNATS/1.0\r\n\r\n\r\n", [(L_MSG, b"foo", b"r", (b"q",), 12, b"NATS/1.0\r\n\r\n")]),
    (b"LMSG a 3\r\n\r\n\r\r\n", [(L_MSG, b"a", b"", (), 0, b"\r\n\r")]),  # CRLF inside the payload
]


@pytest.mark.parametrize("data,expected", CASES, ids=[c[0][:20].decode(errors="replace") for c in CASES])
def test_case_whole_bytewise_trailing_and_split(data, expected):
    assert LeafParser().feed(data) == expected
    p = LeafParser()
    got: list = []
    for i in range(len(data) - 1):
        got += p.feed(data[i : i + 1])
        assert got == [], f"event emitted early at byte {i}"
    got += p.feed(data[-1:])
    assert got == expected
    assert LeafParser().feed(data + TRAILING) == expected + [(L_PING,)]
    for cut in range(1, len(data)):
        p = LeafParser()
        assert p.feed(data[:cut]) + p.feed(data[cut:]) == expected, f"split at {cut}"


def _expand(events: list) -> list:
    """``L_MSG_RUN`` events as the ``L_MSG`` events they stand for."""
    out: list = []
    for ev in events:
        if ev[0] == L_MSG_RUN:
            out += [(L_MSG,) + ev[1:5] + (d,) for d in ev[5]]
        else:
            out.append(ev)
    return out


def _one_by_one(data: bytes) -> list:
    """Events of ``data`` parsed one frame per feed (no run can form across feeds)."""
    out: list = []
    p = LeafParser()
    for i in range(len(data)):
        out += p.feed(data[i : i + 1])
    return out


def test_runs_of_identical_lines_parse_like_single_frames():
    """A burst repeating one control line takes the run fast path; whatever breaks the run (another
    line, the same line with a payload of another size, a payload whose CRLF is missing, an
    incomplete last frame) is parsed as usual."""
    same = b"".join(b"LMSG foo r 3\r\n%03d\r\n" % i for i in range(50))
    frame = len(b"LMSG foo r 3\r\n000\r\n")
    data = (
        same
        + b"LMSG foo r 4\r\nabcd\r\n"
        + same[: 10 * frame]
        + b"HMSG foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
        + b"HMSG foo 12 14\r\nNATS/1.0\r\n\r\nho\r\n"
        + b"LMSG foo r 3\r\nxyz\r\n"
        + TRAILING
    )
    events = LeafParser().feed(data)
    # The 50 identical frames are one run; then a single frame, a run of 10, a run of 2 HMSG of
    # one size, a single frame, PING.
    assert [(e[0], len(e[5]) if e[0] == L_MSG_RUN else 1) for e in events] == [
        (L_MSG_RUN, 50),
        (L_MSG, 1),
        (L_MSG_RUN, 10),
        (L_MSG_RUN, 2),
        (L_MSG, 1),
        (L_PING, 1),
    ]
    whole = _expand(events)
    assert whole == _one_by_one(data)  # one frame per feed: never a run
    assert len(whole) == 50 + 1 + 10 + 2 + 1 + 1
    assert whole[49] == (L_MSG, b"foo", b"r", (), 0, b"049")
    for cut in range(1, len(data), 7):
        p = LeafParser()
        assert _expand(p.feed(data[:cut]) + p.feed(data[cut:])) == whole, f"split at {cut}"
    # The line repeats but the frame after it is not CRLF-terminated: the error of the usual path.
    bad = same[:40] + b"LMSG foo r 3\r\n000XX"
    with pytest.raises(RemoteProtocolError):
        LeafParser().feed(bad + b"\r\n")


def test_run_ends_exactly_where_the_line_changes():
    """The run's length is found with one strided compare per byte of the line (bisection when
    the burst ends inside the buffer): a frame differing in any one byte of its line, or whose
    payload contains the line itself, must cut the run exactly there."""
    import random

    rnd = random.Random(7)
    line = b"LMSG bench.leaf 8\r\n"
    for trial in range(60):
        frames = [line + (line[:8] if i % 5 == 0 else b"%08d" % i) + b"\r\n" for i in range(rnd.randint(2, 300))]
        k = rnd.randrange(len(frames))
        j = rnd.randrange(len(line) - 2)  # one byte of the line (never its CRLF) changes
        odd = bytearray(frames[k][: len(line)])
        odd[j] = ord("x") if odd[j] != ord("x") else ord("y")
        if (
            odd[:5].upper() in (b"LMSG ", b"HMSG ")
            and bytes(odd).split()[-1].isdigit()
            and int(bytes(odd).split()[-1]) == 8
        ):
            frames[k] = bytes(odd) + frames[k][len(line) :]  # still a valid 8-byte frame
        else:
            frames[k] = b"LMSG other 8\r\n" + frames[k][len(line) :]
        data = b"".join(frames) + TRAILING + frames[0][: rnd.randrange(len(frames[0]))]
        p = LeafParser()
        events = p.feed(data)
        assert _expand(events) == _one_by_one(data[: len(data) - len(p._buf)]), trial
        runs = [len(e[5]) if e[0] == L_MSG_RUN else 1 for e in events if e[0] in (L_MSG, L_MSG_RUN)]
        assert sum(runs) == len(frames), (trial, runs)
        if k:
            assert runs[0] == k, (trial, k, runs)  # the first burst stops right before the odd frame


@pytest.mark.parametrize(
    "subject,reply,queues,hdr_len,payload",
    [
        (b"foo", b"", (), 0, b"x"),
        (b"foo", b"bar", (), 0, b""),
        (b"foo", b"bar", (b"q1", b"q2"), 0, b"payload"),
        (b"foo", b"", (b"q",), 0, b"p"),
        (b"foo", b"", (), 12, b"NATS/1.0\r\n\r\nbody"),
        (b"foo", b"r", (b"q",), 12, b"NATS/1.0\r\n\r\nbody"),
    ],
)
def test_msg_line_round_trips(subject, reply, queues, hdr_len, payload):
    frame = msg_line(subject, reply, queues, hdr_len, len(payload)) + payload + b"\r\n"
    assert LeafParser().feed(frame) == [(L_MSG, subject, reply, queues, hdr_len, payload)]


def test_interest_and_connect_encoders_round_trip():
    data = encode_ls_plus("a.*") + encode_ls_plus("a", "g", 4) + encode_ls_minus("a.*") + encode_ls_minus("a", "g")
    assert LeafParser().feed(data) == [
        (L_SUB, b"a.*", None, 1),
        (L_SUB, b"a", b"g", 4),
        (L_UNSUB, b"a.*", None),
        (L_UNSUB, b"a", b"g"),
    ]
    assert LeafParser().feed(encode_connect({"name": "x", "jetstream": True})) == [
        (L_CONNECT, {"name": "x", "jetstream": True})
    ]


@pytest.mark.parametrize(
    "data,err",
    [
        (b"GARBAGE here\r\n", ERR_UNKNOWN_PROTOCOL),
        (b"LMSG foo 5\r\nhelloXX", ERR_UNKNOWN_PROTOCOL),  # payload not followed by CRLF
        (b"LMSG foo 2000000\r\n", ERR_MAX_PAYLOAD),
        (b"LMSG foo\r\n", None),
        (b"LMSG foo bar baz 5\r\n", None),  # bad reply indicator
        (b"HMSG foo 20 10\r\n", None),  # header larger than the message
        (b"LS+ a b\r\n", None),
        (b"INFO {not json\r\n", None),
    ],
)
def test_malformed_input_fails_the_parser(data, err):
    p = LeafParser()
    with pytest.raises(RemoteProtocolError) as ei:
        p.feed(b"PING\r\n" + data)
    assert ei.value.err == err
    assert ei.value.events == [(L_PING,)]  # what came before the bad bytes is kept
    with pytest.raises(RemoteProtocolError):
        p.feed(b"PING\r\n")


def test_js_ack_deliver_suffix():
    r = b"$JS.ACK.S.C.1.5.5.1700000000.0@orders.1"
    assert split_js_ack_deliver(r) == (b"$JS.ACK.S.C.1.5.5.1700000000.0", b"orders.1")
    # an '@' inside the first eight tokens is part of a name, not the suffix
    assert split_js_ack_deliver(b"$JS.ACK.S@x.C.1.5.5.17.0") == (b"$JS.ACK.S@x.C.1.5.5.17.0", b"")
    assert split_js_ack_deliver(b"_INBOX.a@b") == (b"_INBOX.a@b", b"")
