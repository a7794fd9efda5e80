"""The server's MSG/HMSG framing (``msg_parts``, ``msg_prefix``, ``append_run``, ``append_msgs``,
``append_templated``)
is byte-identical to the per-message reference encodings (``encode_msg``/``encode_hmsg``, pinned
to nats-server captures in test_encoder_headers.py), and the frames read back whole, byte by byte
and with a partial frame trailing (a small client-side reader below)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.protocol.encoder import (
    CRLF,
    append_msgs,
    append_run,
    append_templated,
    encode_hmsg,
    encode_msg,
    hmsg_head,
    msg_head,
    msg_parts,
    msg_prefix,
)

pytestmark = pytest.mark.unit

token = st.text(alphabet="abcxyz_-$%>*", min_size=1, max_size=6).map(str.encode)
subject = st.lists(token, min_size=1, max_size=4).map(b".".join)
reply = st.one_of(st.just(b""), subject)
sid = st.one_of(st.integers(1, 10**6).map(lambda i: b"%d" % i), token)
hdr = st.one_of(st.none(), st.builds(lambda k, v: b"NATS/1.0\r\n" + k + b": " + v + b"\r\n\r\n", token, token))
payload = st.binary(max_size=64)
item = st.tuples(subject, reply, hdr, payload)


def reference(subj: bytes, sid_: bytes, rep: bytes, h: bytes | None, p: bytes) -> bytes:
    return encode_hmsg(subj, sid_, rep, h, p) if h else encode_msg(subj, sid_, rep, p)


class Reader:
    """Client side: MSG/HMSG frames back to (subject, sid, reply, hdr, payload); keeps partial data."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> list:
        self.buf += data
        out = []
        while True:
            eol = self.buf.find(b"\r\n")
            if eol < 0:
                return out
            args = self.buf[:eol].split(b" ")
            if args[0] == b"HMSG":
                subj, sid_, *rest = args[1:]
                rep = rest[0] if len(rest) == 3 else b""
                hl, total = int(rest[-2]), int(rest[-1])
            else:
                assert args[0] == b"MSG"
                subj, sid_, *rest = args[1:]
                rep = rest[0] if len(rest) == 2 else b""
                hl, total = 0, int(rest[-1])
            end = eol + 2 + total
            if len(self.buf) < end + 2:
                return out
            assert self.buf[end : end + 2] == CRLF
            body = self.buf[eol + 2 : end]
            out.append((subj, sid_, rep, body[:hl] or None, body[hl:]))
            self.buf = self.buf[end + 2 :]


def test_msg_parts_and_prefix_are_the_reference_lines():
    for rep in (b"", b"_INBOX.r"):
        head, mid = msg_parts(b"a.b", rep, 0, 5)
        assert head + b"42" + mid == msg_head(b"a.b", b"42", rep, 5) == msg_prefix(b"a.b", b"42", rep, 0, 5)
        head, mid = msg_parts(b"a.b", rep, 12, 17)
        assert head + b"42" + mid == hmsg_head(b"a.b", b"42", rep, 12, 17) == msg_prefix(b"a.b", b"42", rep, 12, 17)


@settings(max_examples=200, deadline=None)
@given(subject, sid, reply, hdr, st.lists(payload, min_size=1, max_size=8))
def test_a_run_is_the_messages_one_by_one(subj, sid_, rep, h, payloads):
    # append_run frames messages of one size; make them so.
    size = max(map(len, payloads))
    payloads = [p.ljust(size, b"x") for p in payloads]
    datas = [(h or b"") + p for p in payloads]
    hl = len(h) if h else 0
    out = bytearray(b"before")
    append_run(out, msg_prefix(subj, sid_, rep, hl, len(datas[0])), datas)
    assert bytes(out) == b"before" + b"".join(reference(subj, sid_, rep, h, p) for p in payloads)
    # and the router's shared pieces give the same frame per receiver
    head, mid = msg_parts(subj, rep, hl, len(datas[0]))
    assert head + sid_ + mid + datas[0] + CRLF == reference(subj, sid_, rep, h, payloads[0])


@settings(max_examples=200, deadline=None)
@given(sid, st.lists(item, max_size=8))
def test_a_consumer_batch_is_the_messages_one_by_one(sid_, items):
    out = bytearray()
    nbytes = append_msgs(out, sid_, items)
    assert bytes(out) == b"".join(reference(s, sid_, r, h, p) for s, r, h, p in items)
    assert nbytes == sum(len(h or b"") + len(p) for _, _, h, p in items)


@pytest.mark.parametrize("trailing", [b"", b"MSG a 1 5\r\nab", b"HMSG a 1 r 12 1", b"M"])
def test_frames_read_back_whole_bytewise_and_with_trailing_data(trailing):
    items = [
        (b"o.1", b"$JS.ACK.S.C.1.1.1.0.0", None, b"one"),
        (b"o.2", b"", b"NATS/1.0\r\nA: b\r\n\r\n", b"two"),
        (b"o.3", b"r", b"NATS/1.0\r\n\r\n", b""),
        (b"o.4", b"", None, b""),
    ]
    out = bytearray()
    append_msgs(out, b"9", items)
    append_run(out, msg_prefix(b"x", b"9", b"", 0, 2), [b"p1", b"p2"])
    head, mid = msg_parts(b"y", b"q", 0, 3)
    out += head + b"9" + mid + b"abc" + CRLF
    data = bytes(out)
    want = [(s, b"9", r, h, p) for s, r, h, p in items] + [
        (b"x", b"9", b"", None, b"p1"),
        (b"x", b"9", b"", None, b"p2"),
        (b"y", b"9", b"q", None, b"abc"),
    ]
    r = Reader()
    assert r.feed(data + trailing) == want and r.buf == trailing
    r = Reader()
    got = []
    for i in range(len(data)):
        got += r.feed(data[i : i + 1])
    assert got == want and r.buf == b""


def test_a_sid_with_a_percent_sign_is_not_a_format():
    out = bytearray()
    append_msgs(out, b"%s%d", [(b"a", b"r", None, b"x"), (b"a", b"", None, b"y")])
    assert bytes(out) == b"MSG a %s%d r 1\r\nx\r\nMSG a %s%d 1\r\ny\r\n"


def test_the_head_is_a_new_object_per_message():
    # natsd.server.leaf.node tells messages apart by the identity of their head.
    assert msg_parts(b"a", b"", 0, 1)[0] is not msg_parts(b"a", b"", 0, 1)[0]
    assert msg_parts(b"a", b"", 3, 4)[0] is not msg_parts(b"a", b"", 3, 4)[0]


def test_the_precomputed_pieces_stay_right_past_their_bound():
    for i in range(2500):  # more subjects and sizes than the caches hold: they are cleared, not wrong
        subj, size = b"s.%d" % i, i
        head, mid = msg_parts(subj, b"", 0, size)
        assert head + b"1" + mid == msg_head(subj, b"1", b"", size)
        head, mid = msg_parts(subj, b"r", 0, size)
        assert head + b"1" + mid == msg_head(subj, b"1", b"r", size)
        head, mid = msg_parts(subj, b"", 12, size + 12)
        assert head + b"1" + mid == hmsg_head(subj, b"1", b"", 12, size + 12)


@settings(max_examples=200, deadline=None)
@given(
    sid,
    st.lists(st.tuples(subject, st.integers(0, 1 << 64), st.integers(0, 10**19), st.binary(max_size=20)), max_size=8),
    st.text(alphabet="ABC%_", min_size=1, max_size=4).map(str.encode),
)
def test_a_templated_run_is_the_messages_one_by_one(sid_, rows, name):
    # a consumer's run: the reply made by the frame's own format from columns; the stream and
    # consumer names in the template may hold '%' (escaped in the template, literal on the wire)
    tmpl = b"$JS.ACK." + name.replace(b"%", b"%%") + b".C.1.%d.%d.0"
    subjects = [r[0] for r in rows]
    cols = ([r[1] for r in rows], [r[2] for r in rows])
    payloads = [r[3] for r in rows]
    out = bytearray(b"x")
    nbytes = append_templated(out, sid_, subjects, tmpl, cols, payloads)
    want = [(s, b"$JS.ACK." + name + b".C.1.%d.%d.0" % (a, b), None, p) for s, a, b, p in rows]
    assert bytes(out) == b"x" + b"".join(reference(s, sid_, r, h, p) for s, r, h, p in want)
    assert nbytes == sum(map(len, payloads))


def test_msg_pieces_join_to_the_frames_msg_head_gives():
    from natsd.protocol.encoder import msg_head, msg_pieces

    subjects = [b"dev.%d.temp" % i for i in range(5)]
    replies = [b"_INBOX.r.%d" % i for i in range(5)]
    for sid in (b"1", b"a%sb%d%%"):  # a '%' in a sid is literal
        for payloads in ([b"x" * 8] * 5, [b"", b"a", b"bb", b"", b"ccc"], [b""] * 5, [b"one"]):
            k = len(payloads)
            for reps in (None, replies[:k]):
                pieces, nbytes = msg_pieces(sid, tuple(subjects[:k]), None if reps is None else tuple(reps), payloads)
                want = b"".join(
                    msg_head(subjects[i], sid, b"" if reps is None else reps[i], len(payloads[i]))
                    + payloads[i]
                    + b"\r\n"
                    for i in range(k)
                )
                assert b"".join(pieces) == want and nbytes == sum(map(len, payloads))
