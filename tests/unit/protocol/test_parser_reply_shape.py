"""The reply-shape fast path (PUB lines that differ from the previous one only in the reply)
yields exactly the events a fresh parser yields for each message, whole and byte by byte."""

from __future__ import annotations

import random

import pytest

from natsd.protocol.errors import RemoteProtocolError
from natsd.protocol.events import OP_HPUB, OP_PUB
from natsd.protocol.parser import Parser


def test_replies_vary_arguments_stay():
    data = b"".join(b"PUB bench.js _INBOX.a.%d 3\r\nabc\r\n" % i for i in range(5))
    data += b"HPUB k r1 12 14\r\nNATS/1.0\r\n\r\nhi\r\nHPUB k r2 12 14\r\nNATS/1.0\r\n\r\nho\r\n"
    data += b"PUB bench.js r\x0bx 3\r\nabc\r\n"  # a vertical tab separates arguments: 4 of them
    want = [(OP_PUB, b"bench.js", b"_INBOX.a.%d" % i, 0, b"abc") for i in range(5)]
    want += [(OP_HPUB, b"k", b"r1", 12, b"NATS/1.0\r\n\r\nhi"), (OP_HPUB, b"k", b"r2", 12, b"NATS/1.0\r\n\r\nho")]
    for chunk in (len(data), 1, 7):
        p = Parser()
        got = []
        with pytest.raises(RemoteProtocolError) as ei:
            for i in range(0, len(data), chunk):
                got += p.feed(data[i : i + chunk])
        got += ei.value.events
        assert got == want


def test_random_streams_match_fresh_parsers():
    rng = random.Random(5)
    for _ in range(60):
        msgs = []
        for i in range(120):
            subj = rng.choice([b"a", b"bench.js"])
            rep = rng.choice([b"_INBOX.a.%d" % i, b"", b"re\tp"])
            sz = rng.choice([0, 3])
            sep = rng.choice([b" ", b" ", b"  "])
            eol = rng.choice([b"\r\n", b"\r\n", b"\n"])
            line = b"PUB " + subj + (sep + rep if rep else b"") + sep + b"%d" % sz + eol
            msgs.append(line + b"x" * sz + b"\r\n")
        ref: list = []
        for m in msgs:
            try:
                ref += Parser().feed(m)
            except RemoteProtocolError as e:
                ref += e.events
                break
        data = b"".join(msgs)
        p = Parser()
        got: list = []
        pos = 0
        try:
            while pos < len(data):
                k = rng.randint(1, 120)
                got += p.feed(data[pos : pos + k])
                pos += k
        except RemoteProtocolError as e:
            got += e.events
        assert got == ref


def test_replyless_lines_with_new_subjects_and_runs_still_batch():
    data = b"".join(b"PUB $JS.ACK.S.C.1.%d.%d.0.0 0\r\n\r\n" % (i, i) for i in range(4))
    data += b"PUB x\x0cy z 0\r\n\r\n"  # form feed separates too: 4 arguments
    want = [(OP_PUB, b"$JS.ACK.S.C.1.%d.%d.0.0" % (i, i), b"", 0, b"") for i in range(4)]
    for chunk in (len(data), 1, 5):
        p = Parser()
        got = []
        with pytest.raises(RemoteProtocolError) as ei:
            for i in range(0, len(data), chunk):
                got += p.feed(data[i : i + chunk])
        got += ei.value.events
        assert got == want
    p = Parser(batch=True)
    evs = p.feed(b"PUB a 1\r\nx\r\n" + b"PUB b 1\r\ny\r\n" * 3)
    assert evs[0] == (OP_PUB, b"a", b"", 0, b"x")
    assert evs[1][0] != OP_PUB and evs[1][1].payloads == [b"y", b"y", b"y"]  # one run
