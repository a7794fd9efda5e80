"""router.deliver_many / publish_many write exactly the bytes route() would, message by message."""

from __future__ import annotations

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
ITEMS = [(b"orders.1", b"$JS.ACK.S.C.1.1.1.0.2", None, b"one"),
         (b"orders.2", b"", HDR, b"two"),
         (b"orders.3", b"$JS.ACK.S.C.1.3.2.0.0", HDR, b""),
         (b"orders.4", b"", None, b"")]
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
