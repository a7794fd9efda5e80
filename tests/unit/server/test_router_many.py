"""router.deliver_many / deliver_templated / publish_many write exactly the bytes route() would,
message by message."""

from __future__ import annotations

from natsd.jetstream.ports import TemplatedRun
from natsd.server.account import Account
from natsd.server.ports import ServerPorts
from natsd.server.subscription import Subscription
from natsd.server.writer import Writer


class FakeClient(Writer):
    """The attributes of ClientConnection the router reads or writes; the real writer."""

    def __init__(self, headers: bool = True) -> None:
        self.out = bytearray()
        self.echo = True
        self.sub_deny = None
        self.replies = None
        self.headers = headers
        self.closed = False
        self.flush_pending = False
        self.max_pending = 1 << 30
        self.congested = False
        self.out_msgs = 0
        self.out_bytes = 0
        self.soon: list = []

    def _call_soon(self, cb) -> None:
        self.soon.append(cb)

    def _flush_soon(self, c) -> None:
        self.soon.append(c.flush)

    def flush(self) -> None:
        self.flush_pending = False

    def slow_consumer(self) -> None:  # pragma: no cover - not reached here
        self.closed = True

    def deliver(self, sub, head, mid, data, subject, hdr_len, reply, subj_b, src) -> bool:
        if hdr_len and not self.headers:
            return False
        self.enqueue_msg(sub, head, mid, data, len(data), src)
        return True


def setup(subjects_sids, headers=True):
    acc = Account("A")
    ports = ServerPorts(acc)
    c = FakeClient(headers)
    subs = []
    for subject, sid in subjects_sids:
        s = Subscription(c, sid, subject, None)
        acc.sublist.insert(subject, s)
        subs.append(s)
    return acc, ports, c, subs


HDR = b"NATS/1.0\r\nA: b\r\n\r\n"
# deliver_many items: subject and reply as wire bytes (b"": no reply).
ITEMS = [
    (b"orders.1", b"$JS.ACK.S.C.1.1.1.0.2", None, b"one"),
    (b"orders.2", b"", HDR, b"two"),
    (b"orders.3", b"$JS.ACK.S.C.1.3.2.0.0", HDR, b""),
    (b"orders.4", b"", None, b""),
]
# The same messages as deliver() takes them (str subject and reply).
STR_ITEMS = [(s.decode(), r.decode(), h, p) for s, r, h, p in ITEMS]


def _one_by_one(items, subjects_sids, headers=True):
    _, ports, c, subs = setup(subjects_sids, headers)
    for s, r, h, p in items:
        ports.deliver("_INBOX.x", s.decode(), r.decode(), h, p)
    return bytes(c.out), c.out_msgs, c.out_bytes, [s.delivered for s in subs]


def _many(items, subjects_sids, headers=True):
    _, ports, c, subs = setup(subjects_sids, headers)
    ports.deliver_many("_INBOX.x", items)
    assert c.flush_pending or not items
    return bytes(c.out), c.out_msgs, c.out_bytes, [s.delivered for s in subs]


def test_deliver_many_single_subscription_is_byte_identical():
    ss = [("_INBOX.x", b"7")]
    want = _one_by_one(ITEMS, ss)
    assert want[0].startswith(b"MSG orders.1 7 $JS.ACK.S.C.1.1.1.0.2 3\r\none\r\nHMSG orders.2 7 ")
    assert _many(ITEMS, ss) == want


def test_deliver_many_sid_with_percent_sign():
    # The sid is part of the per-run frame format: a '%' in it must stay literal.
    ss = [("_INBOX.x", b"7%d%s")]
    want = _one_by_one(ITEMS, ss)
    assert want[0].startswith(b"MSG orders.1 7%d%s $JS.ACK.S.C.1.1.1.0.2 3\r\none\r\n")
    assert _many(ITEMS, ss) == want


def test_deliver_many_falls_back_for_two_subscriptions_and_no_header_clients():
    ss = [("_INBOX.x", b"1"), ("_INBOX.*", b"2")]
    assert _many(ITEMS, ss) == _one_by_one(ITEMS, ss)
    ss = [("_INBOX.x", b"1")]
    assert _many(ITEMS, ss, headers=False) == _one_by_one(ITEMS, ss, headers=False)


# A consumer's run with templated replies: what deliver_many of its items gives.
RUN = TemplatedRun(
    [b"orders.1", b"orders.2", b"orders.1"],
    b"$JS.ACK.S%%.C.1.%d.%d.%d.%d",
    ([5, 6, 9], range(1, 4), [17, 18, 19], [2, 1, 0]),
    [b"one", b"", b"three"],
)


def _templated(subjects_sids, headers=True):
    _, ports, c, subs = setup(subjects_sids, headers)
    ports.deliver_templated("_INBOX.x", RUN)
    assert c.flush_pending
    return bytes(c.out), c.out_msgs, c.out_bytes, [s.delivered for s in subs]


def test_deliver_templated_is_deliver_many_of_its_items():
    assert RUN.items()[2] == (b"orders.1", b"$JS.ACK.S%.C.1.9.3.19.0", None, b"three")
    for ss in ([("_INBOX.x", b"7")], [("_INBOX.x", b"7%d")], [("_INBOX.x", b"1"), ("_INBOX.*", b"2")]):
        want = _one_by_one(RUN.items(), ss)
        assert _templated(ss) == want
    assert want[0].startswith(b"MSG orders.1 1 $JS.ACK.S%.C.1.5.1.17.2 3\r\none\r\n")
    ss = [("_INBOX.x", b"1")]
    assert _templated(ss, headers=False) == _one_by_one(RUN.items(), ss, headers=False)


def test_deliver_templated_to_internal_subscription_and_no_interest():
    acc = Account("A")
    ports = ServerPorts(acc)
    got: list = []
    ports.subscribe("_INBOX.>", lambda s, r, h, p: got.append((s, r, h, p)))
    ports.deliver_templated("_INBOX.x", RUN)
    assert got == [(s.decode(), r.decode(), h, p) for s, r, h, p in RUN.items()]
    ports.deliver_templated("nobody", RUN)
    assert len(got) == 3


def test_deliver_many_to_internal_subscription_in_order():
    acc = Account("A")
    ports = ServerPorts(acc)
    got = []
    ports.subscribe("_INBOX.x", lambda s, r, h, p: got.append((s, r, h, p)))
    ports.deliver_many("_INBOX.x", ITEMS)
    assert got == STR_ITEMS
    ports.deliver_many("nobody", ITEMS)  # no interest: nothing happens


def test_publish_many_is_byte_identical_to_publish():
    subjects = ["_INBOX.a.1", "_INBOX.a.2", "_INBOX.b.1", "none.1", "_INBOX.a.3"]
    payloads = [b'{"stream":"S","seq":1}', b"", b"x", b"y", b"z"]
    ss = [("_INBOX.a.*", b"1"), ("_INBOX.b.*", b"2"), ("_INBOX.b.1", b"3")]
    _, ports, c1, subs1 = setup(ss)
    for s, p in zip(subjects, payloads):
        ports.publish(s, "", None, p)
    _, ports2, c2, subs2 = setup(ss)
    ports2.publish_many(subjects, payloads)
    assert bytes(c2.out) == bytes(c1.out)
    assert (c2.out_msgs, c2.out_bytes) == (c1.out_msgs, c1.out_bytes)
    assert [s.delivered for s in subs2] == [s.delivered for s in subs1]
    assert bytes(c1.out).startswith(b'MSG _INBOX.a.1 1 22\r\n{"stream":"S","seq":1}\r\nMSG _INBOX.a.2 1 0\r\n\r\n')


def test_publish_many_reaches_internal_subscribers():
    acc = Account("A")
    ports = ServerPorts(acc)
    got = []
    ports.subscribe("r.*", lambda s, r, h, p: got.append((s, r, h, p)))
    ports.publish_many(["r.1", "r.2"], [b"a", b"b"])
    assert got == [("r.1", "", None, b"a"), ("r.2", "", None, b"b")]


# -- route_batch with queue groups: members take contiguous shares of a run --------------------------


def _queue_setup(n_members, same_conn=False, plain=False):
    from natsd.protocol.events import OP_PUB

    acc = Account("A")
    clients = [FakeClient() for _ in range(1 if same_conn else n_members)]
    members = []
    for i in range(n_members):
        s = Subscription(clients[0 if same_conn else i], b"%d" % (i + 1), "q.x", "workers")
        acc.sublist.insert("q.x", s, "workers")
        members.append(s)
    listener = None
    if plain:
        listener = FakeClient()
        s = Subscription(listener, b"99", "q.x", None)
        acc.sublist.insert("q.x", s)
    return acc, clients, members, listener, OP_PUB


def _frames(c):
    """The MSG frames a client got, as (sid, payload)."""
    out, raw = [], bytes(c.out)
    while raw:
        line, raw = raw.split(b"\r\n", 1)
        parts = line.split(b" ")
        size = int(parts[-1])
        out.append((parts[2], raw[:size]))
        raw = raw[size + 2 :]
    return out


def test_route_batch_splits_a_run_over_queue_members_in_order():
    from natsd.protocol.events import Run
    from natsd.server.router import route_batch

    acc, clients, members, _, op = _queue_setup(3)
    payloads = [b"m%d" % i for i in range(10)]
    route_batch(acc, Run(op, b"q.x", None, b"", 0, payloads), "q.x", None)
    got = [_frames(c) for c in clients]
    # every message exactly once, each member a contiguous, ordered share, the shares as even as can be
    assert sorted(p for frames in got for _, p in frames) == sorted(payloads)
    for frames in got:
        ps = [p for _, p in frames]
        idx = [payloads.index(p) for p in ps]
        assert idx == list(range(idx[0], idx[0] + len(idx)))
    assert sorted(len(f) for f in got) == [3, 3, 4]
    assert sorted(m.delivered for m in members) == [3, 3, 4]
    assert sum(c.out_msgs for c in clients) == 10


def test_route_batch_queue_shares_rotate_so_single_messages_spread():
    from natsd.protocol.events import Run
    from natsd.server.router import route_batch

    acc, clients, members, _, op = _queue_setup(4)
    for i in range(40):
        route_batch(acc, Run(op, b"q.x", None, b"", 0, [b"x%d" % i]), "q.x", None)
    assert [m.delivered for m in members] == [10, 10, 10, 10]


def test_route_batch_members_on_one_connection_see_the_run_in_order():
    from natsd.protocol.events import Run
    from natsd.server.router import route_batch

    acc, clients, members, _, op = _queue_setup(3, same_conn=True)
    payloads = [b"m%d" % i for i in range(7)]
    route_batch(acc, Run(op, b"q.x", None, b"", 0, payloads), "q.x", None)
    assert [p for _, p in _frames(clients[0])] == payloads


def test_route_batch_plain_subscriber_and_queue_members():
    """A plain subscription gets the whole run; the group's members share it; a connection holding
    both a plain subscription and a member falls back to message-by-message routing."""
    from natsd.protocol.events import Run
    from natsd.server.router import route_batch

    acc, clients, members, listener, op = _queue_setup(2, plain=True)
    payloads = [b"m%d" % i for i in range(6)]
    route_batch(acc, Run(op, b"q.x", None, b"", 0, payloads), "q.x", None)
    assert [p for _, p in _frames(listener)] == payloads
    assert sorted(p for c in clients for _, p in _frames(c)) == sorted(payloads)
    # the listener's connection also holds a member: per message, interleaved as route() does it
    acc2, clients2, members2, _, _ = _queue_setup(1)
    both = Subscription(clients2[0], b"50", "q.x", None)
    acc2.sublist.insert("q.x", both)
    route_batch(acc2, Run(op, b"q.x", None, b"", 0, payloads[:2]), "q.x", None)
    assert [(sid, p) for sid, p in _frames(clients2[0])] == [
        (b"50", b"m0"),
        (b"1", b"m0"),
        (b"50", b"m1"),
        (b"1", b"m1"),
    ]


def test_route_run_over_many_subjects_is_byte_identical_to_route():
    """A run of differing subjects to plain client subscriptions (the run's fast path) writes what
    route() writes message by message; a subscription with a delivery limit takes route()'s path."""
    from natsd.protocol.events import OP_PUB, Run
    from natsd.server.router import route, route_run

    def build():
        acc = Account("A")
        cs = [FakeClient() for _ in range(3)]
        subs = [Subscription(cs[k], b"%d" % k, f"w.{k}.*", None) for k in range(3)]
        subs[2].max = 2  # auto-unsubscribe after 2: the general path
        for s in subs:
            acc.sublist.insert(s.subject, s)
        return acc, cs, subs

    names = [f"w.{i % 3}.{i}" for i in range(12)] + ["nobody.here"]
    payloads = [b"p%d" % i for i in range(len(names))]
    acc, cs, subs = build()
    route_run(acc, Run(OP_PUB, b"", [n.encode() for n in names], b"", 0, payloads, list(names)), None)
    acc2, cs2, subs2 = build()
    for n, p in zip(names, payloads):
        route(acc2, n, n.encode(), b"", 0, p, None)
    assert [bytes(c.out) for c in cs] == [bytes(c.out) for c in cs2]
    assert [(c.out_msgs, c.out_bytes) for c in cs] == [(c.out_msgs, c.out_bytes) for c in cs2]
    assert [s.delivered for s in subs] == [s.delivered for s in subs2]  # (FakeClient.deliver ignores max)


def test_publish_many_of_a_runs_replies_is_byte_identical_to_publish():
    # A turn's PubAcks: replies to one inbox (one match for them all, Sublist.sibling_result),
    # interleaved with another inbox, a reply that a literal subscription also wants, and
    # subjects nobody wants.
    subjects = ["_INBOX.a.%04d" % i for i in range(40)]
    subjects[10:10] = ["_INBOX.b.1", "_INBOX.a.special", "none.1"]
    subjects += ["_INBOX.a.x.y", "_INBOX.a.0041"]
    payloads = [b'{"stream":"S","seq":%d}' % i for i in range(len(subjects))]
    ss = [("_INBOX.a.*", b"1"), ("_INBOX.b.*", b"2"), ("_INBOX.a.special", b"3")]
    _, ports, c1, subs1 = setup(ss)
    for s, p in zip(subjects, payloads):
        ports.publish(s, "", None, p)
    acc2, ports2, c2, subs2 = setup(ss)
    ports2.publish_many(subjects, payloads)
    assert bytes(c2.out) == bytes(c1.out)
    assert (c2.out_msgs, c2.out_bytes) == (c1.out_msgs, c1.out_bytes)
    assert [s.delivered for s in subs2] == [s.delivered for s in subs1] == [42, 1, 1]
    assert b"MSG _INBOX.a.special 1 " in c1.out and b"MSG _INBOX.a.special 3 " in c1.out


def test_sibling_result_is_the_inbox_shape_only_when_no_literal_sibling_holds_items():
    acc, _, c, subs = setup([("_INBOX.a.*", b"1")])
    sl = acc.sublist
    r = sl.match("_INBOX.a.1")
    assert sl.sibling_result("_INBOX.a.1") is r and list(r.psubs) == [subs[0]]
    sl.insert("_INBOX.a.7", Subscription(c, b"2", "_INBOX.a.7", None))
    assert sl.sibling_result("_INBOX.a.1") is None  # the subscriptions changed: forgotten
    sl.match("_INBOX.a.1")
    assert sl.sibling_result("_INBOX.a.1") is None  # a literal sibling holds items: no shape
