"""Parser(batch=True): runs of canonical PUBs to differing subjects, each with its own reply (a
publisher over many subjects sending requests, issue 31), become ``(OP_PUB_RUN, run)`` events
with ``run.replies``; reply-less ones of any payload size up to RUN_MAX_SIZE are cut by the
same regex path. Every event stream equals what ``Parser()`` gives message by message."""

from __future__ import annotations

import pytest

from natsd.protocol import Parser, RemoteProtocolError
from natsd.protocol.errors import ERR_MAX_CONTROL_LINE, ERR_UNKNOWN_PROTOCOL
from natsd.protocol.events import OP_PING, OP_PUB, OP_PUB_RRUN, OP_PUB_RUN, unbatched

pytestmark = [pytest.mark.unit, pytest.mark.timeout(120)]

BODY = b"x" * 128


def reqs(first: int, n: int, body: bytes = BODY) -> bytes:
    """PUBs over 10 wildcard groups of subjects, each with its own reply inbox."""
    return b"".join(
        b"PUB bench.w.%d.%d _INBOX.r.%d %d\r\n%s\r\n" % (i % 10, i, i, len(body), body) for i in range(first, first + n)
    )


def pubs(first: int, n: int, body: bytes = BODY) -> bytes:
    return b"".join(b"PUB bench.w.%d.%d %d\r\n%s\r\n" % (i % 10, i, len(body), body) for i in range(first, first + n))


def feed_all(p: Parser, data: bytes, step: int) -> list:
    got: list = []
    for i in range(0, len(data), step):
        got += p.feed(data[i : i + step])
    return got


def test_a_run_of_requests_to_differing_subjects_is_one_event_after_the_first():
    evs = Parser(batch=True).feed(reqs(0, 6))
    # The first line teaches the parser the shape; the rest form the run.
    assert evs[0] == (OP_PUB, b"bench.w.0.0", b"_INBOX.r.0", 0, BODY)
    assert len(evs) == 2 and evs[1][0] == OP_PUB_RUN
    run = evs[1][1]
    assert run.subjects == [b"bench.w.%d.%d" % (i % 10, i) for i in range(1, 6)]
    assert run.replies == [b"_INBOX.r.%d" % i for i in range(1, 6)]
    assert run.payloads == [BODY] * 5 and run.subject == b"" and run.reply == b""
    assert run.message(2) == (OP_PUB, b"bench.w.3.3", b"_INBOX.r.3", 0, BODY)


def test_reply_less_runs_of_any_size_take_the_regex_path():
    # (sizes above the old 64-byte limit: a device publishing 128-byte events)
    for body in (b"", b"y" * 65, BODY, b"z" * 4000):
        data = pubs(0, 8, body)
        evs = Parser(batch=True).feed(data)
        assert [e[0] for e in evs] == [OP_PUB, OP_PUB_RUN] and evs[1][1].replies is None
        assert unbatched(evs) == Parser().feed(data)


@pytest.mark.parametrize(
    "trailing", [b"", b"PUB bench.w.1", b"PUB bench.w.1.1 _INBOX.r.1 128\r\nxx", b"PUB bench.w.1.1 _INB", b"PI"]
)
def test_same_events_whole_split_everywhere_and_with_trailing_data(trailing):
    data = reqs(0, 7) + b"PING\r\n" + pubs(7, 4) + reqs(11, 5) + b"PUB one 2\r\nhi\r\n" + reqs(16, 3)
    want = Parser().feed(data)
    p = Parser(batch=True)
    assert unbatched(p.feed(data + trailing)) == want
    # (a PUB whose payload has started keeps only the payload bytes)
    assert p.buffered == (2 if trailing.endswith(b"xx") else len(trailing))
    for step in (1, 2, 7, 61, 160, 997):
        assert unbatched(feed_all(Parser(batch=True), data, step)) == want
    for cut in range(1, len(data)):
        p = Parser(batch=True)
        assert unbatched(p.feed(data[:cut]) + p.feed(data[cut:])) == want


def test_a_burst_to_one_subject_stays_a_reply_run_of_its_own():
    # An asynchronous JetStream publisher moving to another subject: its burst to that subject is
    # the OP_PUB_RRUN path's (a stream takes it whole), not a many-subject run.
    one = b"".join(b"PUB js.b _INBOX.6EGG6F6H.%08d 128\r\n%s\r\n" % (i, BODY) for i in range(6))
    data = reqs(0, 4) + one
    evs = Parser(batch=True).feed(data)
    assert [e[0] for e in evs] == [OP_PUB, OP_PUB_RUN, OP_PUB, OP_PUB_RRUN]
    assert unbatched(evs) == Parser().feed(data)


def test_a_lone_request_stays_a_pub_event():
    p = Parser(batch=True)
    p.feed(reqs(0, 3))
    # one request per read (a synchronous client): a plain OP_PUB with its reply, every time
    assert p.feed(reqs(3, 1)) == [(OP_PUB, b"bench.w.3.3", b"_INBOX.r.3", 0, BODY)]
    assert p.feed(reqs(4, 1) + b"PING\r\n") == [(OP_PUB, b"bench.w.4.4", b"_INBOX.r.4", 0, BODY), (OP_PING,)]


def test_size_spelling_and_arguments_leave_the_run():
    data = (
        reqs(0, 4)
        + reqs(4, 3, body=b"q" * 9)  # another size
        + b"PUB bench.w.1.1  _INBOX.r.x 128\r\n"
        + BODY
        + b"\r\n"  # two spaces: not canonical
        + reqs(7, 3)
        + b"PUB bench.w.1.1 _INBOX.r.x\t128\r\n"
        + BODY
        + b"\r\n"  # a tab
        + b"pub bench.w.1.1 _INBOX.r.y 128\r\n"
        + BODY
        + b"\r\n"  # lower case
        + reqs(10, 3)
    )
    evs = Parser(batch=True).feed(data)
    assert unbatched(evs) == Parser().feed(data)
    assert [e[0] for e in evs].count(OP_PUB_RUN) >= 3


def test_whitespace_inside_a_reply_fails_as_without_batching():
    good = reqs(0, 4)
    bad = b"PUB bench.w.9.9 _INBOX.r\x0b9 128\r\n" + BODY + b"\r\n"  # four arguments to split()
    with pytest.raises(RemoteProtocolError) as plain:
        Parser().feed(good + bad)
    with pytest.raises(RemoteProtocolError) as batched:
        Parser(batch=True).feed(good + bad)
    assert batched.value.err == plain.value.err
    assert unbatched(batched.value.events) == plain.value.events == Parser().feed(good)


def test_a_line_over_max_control_line_inside_a_run_fails_at_that_message():
    long_reply = b"_INBOX." + b"r" * 60
    data = reqs(0, 5) + b"PUB bench.w.5.5 %s 128\r\n%s\r\n" % (long_reply, BODY) + reqs(6, 3)
    mcl = len(b"PUB bench.w.5.5 %s 128" % long_reply) - 1
    with pytest.raises(RemoteProtocolError) as plain:
        Parser(max_control_line=mcl).feed(data)
    with pytest.raises(RemoteProtocolError) as batched:
        Parser(max_control_line=mcl, batch=True).feed(data)
    assert plain.value.err == batched.value.err == ERR_MAX_CONTROL_LINE
    assert unbatched(batched.value.events) == plain.value.events == Parser().feed(reqs(0, 5))


def test_a_bad_terminator_inside_a_run_keeps_the_events_before_it():
    data = reqs(0, 5) + b"PUB bench.w.5.5 _INBOX.r.5 128\r\n" + BODY + b"XX" + reqs(6, 2)
    with pytest.raises(RemoteProtocolError) as batched:
        Parser(batch=True).feed(data)
    assert batched.value.err == ERR_UNKNOWN_PROTOCOL
    assert unbatched(batched.value.events) == Parser().feed(reqs(0, 5))


def test_the_pattern_cache_stays_bounded():
    from natsd.protocol import parser as parser_mod

    p = Parser(batch=True)
    for size in range(parser_mod._RUN_PATTERNS_MAX + 20):
        body = b"s" * size
        data = pubs(0, 3, body) + reqs(0, 3, body)
        assert unbatched(p.feed(data)) == Parser().feed(data)
    assert 0 < len(parser_mod._RUN_PATTERNS) <= parser_mod._RUN_PATTERNS_MAX
    # above RUN_MAX_SIZE: no pattern; the per-message paths still batch reply-less runs
    body = b"b" * (parser_mod.RUN_MAX_SIZE + 1)
    data = pubs(0, 3, body) + reqs(0, 3, body)
    evs = Parser(batch=True).feed(data)
    assert unbatched(evs) == Parser().feed(data)
    assert OP_PUB_RRUN not in [e[0] for e in evs]


def test_nats_py_spelling_of_reply_less_pubs_forms_runs_too():
    # nats-py writes "PUB <subject>  <size>" (an empty reply between two spaces)
    py = b"".join(b"PUB dev.%d.temp  128\r\n%s\r\n" % (i, BODY) for i in range(8))
    data = py + pubs(0, 4) + py + b"PUB dev.x.temp   128\r\n" + BODY + b"\r\n" + py
    evs = Parser(batch=True).feed(data)
    assert [e[0] for e in evs][:2] == [OP_PUB, OP_PUB_RUN] and len(evs[1][1]) == 7
    want = Parser().feed(data)
    assert unbatched(evs) == want
    for step in (1, 5, 150, 151):
        assert unbatched(feed_all(Parser(batch=True), data, step)) == want
