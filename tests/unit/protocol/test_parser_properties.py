"""Property tests: however a valid stream is cut into reads, the parser yields the same events;
random garbage never crashes it (it either parses or raises a protocol error)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.protocol import Parser, RemoteProtocolError
from natsd.protocol.events import OP_HPUB, OP_PING, OP_PONG, OP_PUB, OP_SUB, OP_UNSUB, unbatched

token = st.text(alphabet="abcxyz_-$", min_size=1, max_size=6)
subject = st.lists(token, min_size=1, max_size=4).map(".".join)
payload = st.binary(max_size=40)


@st.composite
def op(draw):
    kind = draw(st.sampled_from(["pub", "ack", "apub", "apub", "hpub", "sub", "unsub", "ping", "pong"]))
    if kind == "apub":
        # an asynchronous JetStream publisher: one subject, a fixed-width reply token each, one of
        # two sizes: the parser's OP_PUB_RRUN path
        t = draw(st.text(alphabet="abcXYZ09", min_size=4, max_size=4)).encode()
        p = draw(st.sampled_from([b"x" * 7, b"hello world"]))
        return (b"PUB js.s _INBOX.ab.%s %d\r\n%s\r\n" % (t, len(p), p), (OP_PUB, b"js.s", b"_INBOX.ab." + t, 0, p))
    if kind == "ack":
        # canonical reply-less PUBs of one of two sizes to varying subjects (JetStream acks):
        # the parser's OP_PUB_RUN path
        s, p = draw(subject), draw(st.sampled_from([b"+ACK", b"-NAK", b"", b"+TERM x"]))
        return b"PUB %s %d\r\n%s\r\n" % (s.encode(), len(p), p), (OP_PUB, s.encode(), b"", 0, p)
    if kind == "pub":
        s, r, p = draw(subject), draw(st.one_of(st.just(""), subject)), draw(payload)
        return (b"PUB %s %s %d\r\n%s\r\n" % (s.encode(), r.encode(), len(p), p), (OP_PUB, s.encode(), r.encode(), 0, p))
    if kind == "hpub":
        s, p = draw(subject), draw(payload)
        h = b"NATS/1.0\r\nK: " + draw(token).encode() + b"\r\n\r\n"
        return (
            b"HPUB %s %d %d\r\n%s%s\r\n" % (s.encode(), len(h), len(h) + len(p), h, p),
            (OP_HPUB, s.encode(), b"", len(h), h + p),
        )
    if kind == "sub":
        s, sid = draw(subject), draw(st.integers(1, 999))
        return b"SUB %s %d\r\n" % (s.encode(), sid), (OP_SUB, s.encode(), None, b"%d" % sid)
    if kind == "unsub":
        sid = draw(st.integers(1, 999))
        return b"UNSUB %d\r\n" % sid, (OP_UNSUB, b"%d" % sid, None)
    return (b"PING\r\n", (OP_PING,)) if kind == "ping" else (b"PONG\r\n", (OP_PONG,))


@settings(max_examples=150, deadline=None)
@given(st.lists(op(), max_size=12), st.lists(st.integers(0, 400), max_size=8), st.booleans())
def test_any_split_gives_the_same_events(ops, cuts, batch):
    # Repeat some ops so the repeated-line and batching paths are exercised too.
    ops = ops + ops[:3] + [o for o in ops if o[1][:2] == (OP_PUB, b"js.s")] * 3
    data = b"".join(o[0] for o in ops)
    expected = [o[1] for o in ops]
    p = Parser(batch=batch)
    got = []
    last = 0
    for c in sorted(set(min(c, len(data)) for c in cuts)):
        got += p.feed(data[last:c])
        last = c
    got += p.feed(data[last:])
    assert unbatched(got) == expected
    assert p.buffered == 0


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_never_crashes(data):
    p = Parser(max_control_line=64, max_payload=128)
    try:
        p.feed(data)
    except RemoteProtocolError as e:
        assert e.err is None or isinstance(e.err, str)
