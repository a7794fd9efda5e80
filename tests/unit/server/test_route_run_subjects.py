"""router.route_run over many distinct subjects (issue 31): messages gathered per receiving
connection and framed together write byte for byte what route() writes message by message
(with the connection's no-responders answer where route() finds nobody), with and without
replies, whatever mix of receivers the subjects have."""

from __future__ import annotations

import random

import pytest

from natsd.protocol.encoder import encode_hmsg
from natsd.protocol.events import OP_PUB, Run
from natsd.server.account import Account
from natsd.server.ports import ServerPorts
from natsd.server import router
from natsd.server.router import route, route_run
from natsd.server.subscription import Subscription

from .test_router_many import FakeClient

pytestmark = [pytest.mark.unit, pytest.mark.timeout(120)]


class Publisher(FakeClient):
    """A publishing connection: what route_run and the connection's PUB path read of it."""

    def __init__(self) -> None:
        super().__init__()
        self.no_responders = True

    def send_no_responders(self, subj_b: bytes, reply: bytes) -> None:
        # (a marker frame: where in this connection's output the answer lands)
        self.enqueue(encode_hmsg(reply, b"NR", b"", b"NATS/1.0 503\r\n\r\n", subj_b), 1, 0)


def world(spec, echo=True):
    """An account with client connections subscribed as ``spec``: (connection index, subject,
    queue, sid, max); connection 0 is the publisher."""
    acc = Account("A")
    ports = ServerPorts(acc)
    conns = [Publisher()] + [FakeClient() for _ in range(4)]
    conns[0].echo = echo
    subs = []
    for ci, subject, queue, sid, mx in spec:
        s = Subscription(conns[ci], sid, subject, queue)
        s.max = mx
        acc.sublist.insert(subject, s, queue)
        subs.append(s)
    return acc, ports, conns, subs


def align_rotation() -> None:
    """Advance the router's queue rotation to a multiple of 60, so that both sides of a comparison
    pick the same members of groups of 2 to 6 (each message takes one step per group)."""
    while next(router._rr) % 60 != 59:
        pass


def one_by_one(spec, names, replies, payloads, echo=True):
    acc, ports, conns, subs = world(spec, echo)
    align_rotation()
    src = conns[0]
    for i, n in enumerate(names):
        reply = replies[i] if replies is not None else b""
        if not route(acc, n, n.encode(), reply, 0, payloads[i], src) and reply and src.no_responders:
            src.send_no_responders(n.encode(), reply)
    return conns, subs


def as_run(spec, names, replies, payloads, echo=True):
    acc, ports, conns, subs = world(spec, echo)
    align_rotation()
    run = Run(OP_PUB, b"", [n.encode() for n in names], b"", 0, list(payloads), list(names), replies)
    route_run(acc, run, conns[0])
    return conns, subs


def same(spec, names, with_replies, echo=True):
    payloads = [b"p%d" % i * (i % 3) for i in range(len(names))]
    replies = [b"_INBOX.r.%d" % i for i in range(len(names))] if with_replies else None
    a_conns, a_subs = as_run(spec, names, replies, payloads, echo)
    b_conns, b_subs = one_by_one(spec, names, replies, payloads, echo)
    assert [bytes(c.out) for c in a_conns] == [bytes(c.out) for c in b_conns]
    assert [(c.out_msgs, c.out_bytes) for c in a_conns] == [(c.out_msgs, c.out_bytes) for c in b_conns]
    assert [s.delivered for s in a_subs] == [s.delivered for s in b_subs]
    return a_conns


WILD = [(1 + k % 4, "bench.w.%d.*" % k, None, b"%d" % k, 0) for k in range(10)]
NAMES = ["bench.w.%d.%d" % (i % 10, i) for i in range(200)]


@pytest.mark.parametrize("with_replies", [False, True])
def test_ten_wildcard_subscribers_on_four_connections(with_replies):
    # connections 1-4 hold two or three of the wildcards each: each connection's frames must
    # interleave its subscriptions' messages in publish order
    conns = same(WILD, NAMES, with_replies)
    assert all(c.out for c in conns[1:])
    text = bytes(conns[1].out)
    assert text.startswith(b"MSG bench.w.0.0 0 " + (b"_INBOX.r.0 " if with_replies else b"") + b"0\r\n\r\n")


@pytest.mark.parametrize("with_replies", [False, True])
def test_one_subscription_per_connection_the_fast_shape(with_replies):
    spec = [(1 + k, "bench.w.%d.*" % k, None, b"s%d" % k, 0) for k in range(4)]
    names = ["bench.w.%d.%d" % (i % 4, i) for i in range(50)]
    same(spec, names, with_replies)


@pytest.mark.parametrize("with_replies", [False, True])
def test_a_mix_of_receivers_keeps_every_connections_order(with_replies):
    spec = WILD + [
        (2, "bench.w.3.>", None, b"more", 0),  # a second receiver for some subjects
        (3, "bench.w.5.*", "q", b"q1", 0),  # a queue member (one per group: deterministic)
        (4, "bench.w.7.17", None, b"lim", 2),  # auto-unsubscribe after 2
        (0, "bench.w.9.*", None, b"self", 0),  # the publisher itself
        (1, "bench.%.*", None, b"pct%", 0),  # never matches; a '%' in a sid below does
        (2, "odd.*", None, b"a%sb%d", 0),
    ]
    names = NAMES[:60] + ["nobody.here", "odd.1", "bench.w.7.17", "bench.w.7.17", "bench.w.7.17", "odd.2"]
    names += NAMES[60:80]
    same(spec, names, with_replies)
    same(spec, names, with_replies, echo=False)


def test_no_responders_land_in_order_among_the_publishers_own_messages():
    spec = [(0, "mine.*", None, b"1", 0), (1, "theirs.*", None, b"2", 0)]
    names = ["mine.1", "nobody.1", "mine.2", "theirs.1", "nobody.2", "mine.3"]
    conns = same(spec, names, True)
    out = bytes(conns[0].out)
    assert out.index(b"MSG mine.1 ") < out.index(b"HMSG _INBOX.r.1 NR") < out.index(b"MSG mine.2 ")
    assert out.index(b"HMSG _INBOX.r.4 NR") < out.index(b"MSG mine.3 ")
    # without a reply nobody answers
    conns = same(spec, names, False)
    assert b"NR" not in bytes(conns[0].out)


def test_internal_receivers_and_handlers_keep_their_place():
    acc, ports, conns, subs = world(WILD)
    log = []
    ports.subscribe("bench.w.4.*", lambda subj, reply, hdr, payload: log.append((subj, reply, len(conns[1].out))))
    names = NAMES[:30]
    replies = [b"_INBOX.r.%d" % i for i in range(30)]
    route_run(acc, Run(OP_PUB, b"", [n.encode() for n in names], b"", 0, [b"x"] * 30, list(names), replies), conns[0])
    # the internal subscriber got its messages with their replies, each after the client frames
    # of the messages before it were queued
    assert [e[:2] for e in log] == [
        (n, "_INBOX.r.%d" % int(n.split(".")[-1])) for n in names if n.startswith("bench.w.4.")
    ]
    assert log[0][2] > 0


def test_a_slow_consumer_closed_by_a_gathered_append_gets_nothing_more():
    spec = [(1, "a.*", None, b"1", 0), (2, "b.*", None, b"2", 0)]
    acc, ports, conns, subs = world(spec)
    conns[1].max_pending = 10  # the first append closes it
    names = ["a.%d" % i for i in range(5)] + ["b.%d" % i for i in range(5)]
    route_run(acc, Run(OP_PUB, b"", [n.encode() for n in names], b"", 0, [b"x" * 8] * 10, list(names)), conns[0])
    assert conns[1].closed and conns[2].out_msgs == 5


def test_random_mixes_match_route_one_by_one():
    rnd = random.Random(31)
    for trial in range(60):
        spec = []
        for k in range(rnd.randint(1, 8)):
            subject = rnd.choice(
                ["w.%d.*" % rnd.randint(0, 3), "w.%d.%d" % (rnd.randint(0, 3), rnd.randint(0, 9)), "w.>"]
            )
            queue = rnd.choice(["g1", "g2"]) if rnd.random() < 0.3 else None
            spec.append((rnd.randint(0, 4), subject, queue, b"%d" % k, rnd.choice([0, 0, 0, 3])))
        names = ["w.%d.%d" % (rnd.randint(0, 4), rnd.randint(0, 9)) for _ in range(rnd.randint(1, 40))]
        same(spec, names, trial % 2 == 1, echo=trial % 3 != 0)


@pytest.mark.parametrize("with_replies", [False, True])
def test_queue_groups_take_the_member_route_would_pick(with_replies):
    workers = [(1 + k, "dev.*.temp", "workers", b"w%d" % k, 0) for k in range(3)]
    names = ["dev.%d.%s" % (i, ("temp", "hum")[i % 5 == 0]) for i in range(90)]
    # a group on connections of their own (gathered), with a plain wildcard beside it
    conns = same(workers + [(4, "dev.*.hum", None, b"h", 0)], names, with_replies)
    assert all(c.out_msgs for c in conns[1:4])
    # a member on a connection that also has a plain subscription in the run, two members on one
    # connection, the publisher as a member without echo: route() for that group, same bytes
    same(workers + [(2, "dev.*.hum", None, b"h", 0)], names, with_replies)
    same(workers + [(1, "dev.*.temp", "workers", b"w9", 0)], names, with_replies)
    same(workers + [(0, "dev.*.temp", "workers", b"me", 0)], names, with_replies, echo=False)
    # two groups on one subject, or a group and a plain subscription: route() too
    same(workers + [(4, "dev.*.temp", "other", b"o", 0)], names, with_replies)
    same(workers + [(4, "dev.>", None, b"all", 0)], names, with_replies)
