"""Parser(batch=True): bursts of publishes to one subject that differ only in a fixed-width
reply token (asynchronous JetStream publishers) become ``(OP_PUB_RRUN, run)`` events
(``run.replies``), found column-wise (natsd.protocol.runs.reply_run_length)."""

from __future__ import annotations

import pytest

from natsd.protocol import Parser, RemoteProtocolError
from natsd.protocol.errors import ERR_MAX_PAYLOAD, ERR_UNKNOWN_PROTOCOL
from natsd.protocol.events import OP_HPUB, OP_PUB, OP_PUB_RRUN, Run
from natsd.protocol.runs import reply_run_length

pytestmark = pytest.mark.unit

BODY = b"x" * 16


def apubs(first: int, n: int, subject: bytes = b"bench.js", body: bytes = BODY) -> bytes:
    # nats.c's shape: "_INBOX.<nuid>.<8 characters>"
    return b"".join(
        b"PUB %s _INBOX.6EGG6F6H.%08d %d\r\n%s\r\n" % (subject, i, len(body), body) for i in range(first, first + n)
    )


def flat(events: list) -> list:
    out = []
    for e in events:
        if e[0] == OP_PUB_RRUN:
            run = e[1]
            assert run.subjects is None and run.reply == b"" and len(run.replies) == len(run.payloads) > 1
            out += [run.message(i) for i in range(len(run))]
        else:
            out.append(e)
    return out


def feed_cut(data: bytes, cuts) -> list:
    p = Parser(batch=True)
    got: list = []
    last = 0
    for c in cuts:
        got += p.feed(data[last:c])
        last = c
    got += p.feed(data[last:])
    assert p.buffered == 0
    return got


def test_a_burst_is_one_event_after_the_first():
    evs = Parser(batch=True).feed(apubs(0, 6))
    # The first line teaches the parser the shape; the rest are one run.
    assert evs[0] == (OP_PUB, b"bench.js", b"_INBOX.6EGG6F6H.00000000", 0, BODY)
    assert len(evs) == 2 and evs[1][0] == OP_PUB_RRUN
    run = evs[1][1]
    assert run == Run(
        OP_PUB, b"bench.js", None, b"", 0, [BODY] * 5, None, [b"_INBOX.6EGG6F6H.%08d" % i for i in range(1, 6)]
    )
    assert run.message(0) == (OP_PUB, b"bench.js", b"_INBOX.6EGG6F6H.00000001", 0, BODY)


def test_same_events_as_without_batching_whole_byte_by_byte_and_with_trailing_data():
    data = apubs(0, 40) + b"PING\r\n" + apubs(40, 3) + b"PUB bench.js _INBOX.x 2\r\nhi\r\n" + apubs(43, 5)
    want = Parser().feed(data)
    assert flat(Parser(batch=True).feed(data)) == want
    assert flat(feed_cut(data, range(1, len(data)))) == want
    # trailing partial frame: the run stops before it, the rest completes on the next read
    p = Parser(batch=True)
    evs = p.feed(data[: len(apubs(0, 40)) - 7])
    assert flat(evs) == want[:39]
    assert flat(evs + p.feed(data[len(apubs(0, 40)) - 7 :])) == want


def test_every_cut_of_a_burst():
    data = apubs(0, 12)
    want = Parser().feed(data)
    for c in range(len(data)):
        for d in (c + 1, c + 57, len(data)):
            assert flat(feed_cut(data, [c, min(d, len(data))])) == want


def test_whitespace_inside_a_token_is_not_a_run_message():
    # "\x0b" is whitespace to the argument split: that line has 4 arguments and must fail as it
    # does without batching, after the good messages before it.
    good = apubs(0, 4)
    bad = b"PUB bench.js _INBOX.6EGG6F6H.0000\x0b000 16\r\n" + BODY + b"\r\n"
    with pytest.raises(RemoteProtocolError) as plain:
        Parser().feed(good + bad)
    with pytest.raises(RemoteProtocolError) as batched:
        Parser(batch=True).feed(good + bad)
    assert batched.value.err == plain.value.err
    assert flat(batched.value.events) == plain.value.events == Parser().feed(good)


def test_a_token_of_another_width_or_another_subject_or_size_leaves_the_run():
    data = (
        apubs(0, 5)
        + b"PUB bench.js _INBOX.6EGG6F6H.123 16\r\n"
        + BODY
        + b"\r\n"
        + apubs(5, 5)
        + apubs(10, 4, subject=b"other.js")
        + apubs(14, 4, body=b"y" * 9)
    )
    evs = Parser(batch=True).feed(data)
    assert flat(evs) == Parser().feed(data)
    assert [e[0] for e in evs].count(OP_PUB_RRUN) == 4


def test_hpub_bursts_keep_their_header_length():
    hdr = b"NATS/1.0\r\nNats-Msg-Id: 1\r\n\r\n"
    data = b"".join(
        b"HPUB s _INBOX.ab.%04d %d %d\r\n%s%s\r\n" % (i, len(hdr), len(hdr) + 3, hdr, b"abc") for i in range(6)
    )
    evs = Parser(batch=True).feed(data)
    assert [e[0] for e in evs] == [OP_HPUB, OP_PUB_RRUN]
    assert evs[1][1].hdr_len == len(hdr) and evs[1][1].op == OP_HPUB
    assert flat(evs) == Parser().feed(data)


def test_a_bad_terminator_inside_a_burst_fails_at_that_message():
    data = bytearray(apubs(0, 8))
    frame = len(apubs(0, 1))
    data[5 * frame + frame - 2] = ord("X")  # message 5's CRLF
    with pytest.raises(RemoteProtocolError) as plain:
        Parser().feed(bytes(data))
    with pytest.raises(RemoteProtocolError) as batched:
        Parser(batch=True).feed(bytes(data))
    assert batched.value.err == plain.value.err == ERR_UNKNOWN_PROTOCOL
    assert flat(batched.value.events) == plain.value.events


def test_max_payload_lowered_between_reads_is_enforced():
    p = Parser(batch=True)
    p.feed(apubs(0, 3))
    p.max_payload = 8
    with pytest.raises(RemoteProtocolError) as e:
        p.feed(apubs(3, 3))
    assert e.value.err == ERR_MAX_PAYLOAD


def test_reply_run_length_counts_frames_and_checks_every_column():
    one = b"PUB s _I.ab 1\r\nx\r\n"
    step = len(one)
    buf = b"".join(b"PUB s _I.%s 1\r\nx\r\n" % t for t in (b"ab", b"cd", b"ef", b"g h", b"ij"))
    assert reply_run_length(buf, 0, b"PUB s _I.", 2, b" 1\r\n", step, len(buf)) == 3
    assert reply_run_length(buf, 0, b"PUB s _I.", 2, b" 1\r\n", step, 2 * step + 3) == 2
    tab = b"PUB s _I.a\t 1\r\nx\r\n"
    assert reply_run_length(one + tab, 0, b"PUB s _I.", 2, b" 1\r\n", step, 2 * step) == 1
    assert reply_run_length(one, 0, b"PUB s _I.", 2, b" 1\r\n", step, step - 1) == 0
