"""Parser(batch=True): runs of canonical reply-less PUBs to differing subjects (a client acking
JetStream messages one at a time) become one ``(OP_PUB_RUN, run)`` event (``run.subjects``)."""

from __future__ import annotations

import pytest

from natsd.protocol import Parser, RemoteProtocolError
from natsd.protocol.errors import ERR_MAX_PAYLOAD, ERR_UNKNOWN_PROTOCOL
from natsd.protocol.events import OP_HPUB, OP_PING, OP_PUB, OP_PUB_BATCH, OP_PUB_RUN, Run

pytestmark = pytest.mark.unit


def acks(first: int, n: int) -> bytes:
    return b"".join(b"PUB $JS.ACK.S.C.1.%d.%d.1700000000.0 4\r\n+ACK\r\n" % (i, i) for i in range(first, first + n))


def flat(events: list) -> list:
    out = []
    for e in events:
        if e[0] == OP_PUB_RUN:
            run = e[1]
            assert len(run.subjects) == len(run.payloads) > 0 and run.subject == b"" and run.reply == b""
            out += [run.message(i) for i in range(len(run))]
        elif e[0] == OP_PUB_BATCH:
            run = e[1]
            assert run.subjects is None
            out += [run.message(i) for i in range(len(run))]
        else:
            out.append(e)
    return out


def test_a_run_of_acks_is_one_event_after_the_first():
    evs = Parser(batch=True).feed(acks(1, 5))
    # The first line teaches the parser the shape; the rest form the run.
    assert evs[0] == (OP_PUB, b"$JS.ACK.S.C.1.1.1.1700000000.0", b"", 0, b"+ACK")
    assert len(evs) == 2 and evs[1][0] == OP_PUB_RUN
    assert evs[1][1].subjects == [b"$JS.ACK.S.C.1.%d.%d.1700000000.0" % (i, i) for i in range(2, 6)]
    assert evs[1][1].payloads == [b"+ACK"] * 4


def test_without_batch_mode_every_ack_is_its_own_event():
    evs = Parser().feed(acks(1, 5))
    assert [e[0] for e in evs] == [OP_PUB] * 5


def test_other_events_split_runs_and_order_is_kept():
    data = acks(1, 3) + b"PING\r\n" + acks(4, 2) + b"PUB x _INBOX.1 2\r\nhi\r\n" + acks(6, 2)
    evs = Parser(batch=True).feed(data)
    assert [e[0] for e in evs] == [OP_PUB, OP_PUB_RUN, OP_PING, OP_PUB_RUN, OP_PUB, OP_PUB_RUN]
    assert flat(evs) == Parser().feed(data)


def test_a_different_size_leaves_the_run():
    data = acks(1, 3) + b"PUB $JS.ACK.S.C.1.9.9.1.0 0\r\n\r\n" + acks(4, 2)
    evs = Parser(batch=True).feed(data)
    assert flat(evs) == Parser().feed(data)
    assert evs[-1][0] == OP_PUB_RUN  # size 4 came back; the shape was re-learnt


def test_identical_lines_inside_a_run():
    one = b"PUB $JS.ACK.S.C.1.1.1.1.0 4\r\n+ACK\r\n"
    data = acks(1, 2) + one + one + one + acks(5, 2)
    assert flat(Parser(batch=True).feed(data)) == Parser().feed(data)


@pytest.mark.parametrize("trailing", [b"", b"PUB $JS.ACK.S", b"PUB $JS.ACK.S.C.1.9.9.1.0 4\r\n+A", b"PI"])
def test_byte_by_byte_and_with_trailing_data(trailing):
    data = acks(1, 6) + b"PING\r\n" + acks(7, 3)
    expected = Parser().feed(data)
    # whole, with an incomplete operation after it
    p = Parser(batch=True)
    assert flat(p.feed(data + trailing)) == expected
    # (a PUB whose payload has started keeps only the payload bytes)
    assert p.buffered == (2 if trailing.endswith(b"+A") else len(trailing))
    # byte by byte
    p = Parser(batch=True)
    got = []
    for i in range(len(data)):
        got += p.feed(data[i : i + 1])
    assert flat(got) == expected
    # every two-piece cut
    for cut in range(1, len(data), 7):
        p = Parser(batch=True)
        assert flat(p.feed(data[:cut]) + p.feed(data[cut:])) == expected


def test_payload_split_across_reads_completes_as_a_plain_pub():
    data = acks(1, 3)
    p = Parser(batch=True)
    head = p.feed(data + b"PUB $JS.ACK.S.C.1.4.4.1.0 4\r\n+A")
    tail = p.feed(b"CK\r\n")
    assert tail == [(OP_PUB, b"$JS.ACK.S.C.1.4.4.1.0", b"", 0, b"+ACK")]
    assert flat(head + tail) == Parser().feed(data + b"PUB $JS.ACK.S.C.1.4.4.1.0 4\r\n+ACK\r\n")


def test_whitespace_in_a_run_line_takes_the_general_path():
    # A tab inside the subject position means two arguments: subject + reply, as split() sees it.
    data = acks(1, 2) + b"PUB a\tb 4\r\n+ACK\r\n" + acks(3, 2)
    evs = Parser(batch=True).feed(data)
    assert (OP_PUB, b"a", b"b", 0, b"+ACK") in evs
    assert flat(evs) == Parser().feed(data)


def test_errors_in_a_run_keep_the_events_before_them():
    p = Parser(batch=True)
    with pytest.raises(RemoteProtocolError) as ei:
        p.feed(acks(1, 3) + b"PUB $JS.ACK.S.C.1.4.4.1.0 4\r\n+ACKxx")
    assert ei.value.err == ERR_UNKNOWN_PROTOCOL
    assert flat(ei.value.events) == Parser().feed(acks(1, 3))
    p = Parser(batch=True)
    p.feed(acks(1, 2))
    p.max_payload = 3  # lowered by a reload: the run path checks it too
    with pytest.raises(RemoteProtocolError) as ei:
        p.feed(acks(3, 1))
    assert ei.value.err == ERR_MAX_PAYLOAD


def test_large_payloads_form_runs_without_the_regex_path():
    from natsd.protocol.parser import RUN_MAX_SIZE

    body = b"y" * (RUN_MAX_SIZE + 36)
    data = b"".join(b"PUB big.%d %d\r\n%s\r\n" % (i, len(body), body) for i in range(6))
    evs = Parser(batch=True).feed(data)
    assert [e[0] for e in evs] == [OP_PUB, OP_PUB_RUN] and len(evs[1][1]) == 5
    assert flat(evs) == Parser().feed(data)
    p = Parser(batch=True)
    got = []
    for i in range(len(data)):
        got += p.feed(data[i : i + 1])
    assert flat(got) == Parser().feed(data)


def test_an_identical_line_batch_ends_when_a_run_starts():
    # Found by the property test: a non-canonical repeated line (an OP_PUB_BATCH), then a run,
    # then that line again must not append to the old batch.
    data = (b"PUB _ 4\r\n+ACK\r\n" + b"PUB _  0\r\n\r\n" * 2) * 2
    assert flat(Parser(batch=True).feed(data)) == Parser().feed(data)


def test_the_shared_empty_run_lists_are_never_extended():
    # feed() starts without a run on a shared empty list (no allocation per call); runs of every
    # kind, split anywhere, must leave it empty.
    from natsd.protocol import parser as parser_mod

    data = acks(1, 40) + b"PING\r\n" + acks(41, 3) + b"PUB a 1\r\nx\r\n" + acks(44, 5)
    for step in (1, 7, 64, len(data)):
        p = Parser(batch=True)
        evs = []
        for i in range(0, len(data), step):
            evs += p.feed(data[i : i + step])
        assert sum(1 for e in flat(evs) if e[0] == OP_PUB) == 49
        assert parser_mod._NO_RUN == []


def test_the_run_value_slices_and_spells_its_messages():
    run = Run(OP_PUB, b"", [b"a", b"b", b"c"], b"", 0, [b"1", b"2", b"3"], ["a", "b", "c"])
    assert len(run) == 3 and run.message(1) == (OP_PUB, b"b", b"", 0, b"2")
    part = run.slice(1, 3)
    assert part == Run(OP_PUB, b"", [b"b", b"c"], b"", 0, [b"2", b"3"]) and part.names == ["b", "c"]
    same = Run(OP_HPUB, b"h", None, b"r", 12, [b"NATS/1.0\r\n\r\nx", b"NATS/1.0\r\n\r\ny"])
    assert same.message(0) == (OP_HPUB, b"h", b"r", 12, b"NATS/1.0\r\n\r\nx")
    assert same.slice(1, 2).payloads == [b"NATS/1.0\r\n\r\ny"] and same.slice(1, 2).subject == b"h"
    assert "subject=b'h'" in repr(same) and run != same
