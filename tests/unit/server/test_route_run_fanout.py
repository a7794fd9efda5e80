"""router.route_run of one publisher round robin over many subscriber connections (issue 31, the
connections rows of the scaling table): each connection gets byte for byte what route() queues
message by message, one flush is scheduled per connection for the whole run, and a connection
with one or two messages of the run has them framed as route() frames them (no piece layout)."""

from __future__ import annotations

import pytest

from natsd.protocol.events import OP_PUB, Run
from natsd.server import router
from natsd.server.account import Account
from natsd.server.ports import ServerPorts
from natsd.server.router import route, route_run
from natsd.server.subscription import Subscription
from tests.helpers.compiled import python_only

from .test_router_many import FakeClient

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]


def world(m: int):
    acc = Account("A")
    ServerPorts(acc)
    conns = [FakeClient() for _ in range(m)]
    subs = []
    for i, c in enumerate(conns):
        s = Subscription(c, b"%d" % (i % 7 + 1), "sc.%d" % i, None)
        acc.sublist.insert(s.subject, s)
        subs.append(s)
    return acc, conns, subs


def run_of(names, payloads, replies=None):
    return Run(OP_PUB, b"", [n.encode() for n in names], b"", 0, list(payloads), list(names), replies)


@pytest.mark.parametrize("per_conn", [1, 2, 3, 17])
@pytest.mark.parametrize("with_replies", [False, True])
def test_round_robin_over_many_connections_is_route_one_by_one(per_conn, with_replies):
    m = 100
    n = m * per_conn + 13  # (the first 13 connections get one more)
    names = ["sc.%d" % (i % m) for i in range(n)]
    payloads = [b"x" * (i % 5) for i in range(n)]
    replies = [b"_INBOX.r.%d" % i for i in range(n)] if with_replies else None
    src = FakeClient()
    acc, a, a_subs = world(m)
    route_run(acc, run_of(names, payloads, replies), src)
    acc, b, b_subs = world(m)
    for i, name in enumerate(names):
        route(acc, name, name.encode(), replies[i] if replies else b"", 0, payloads[i], src)
    assert [bytes(c.out) for c in a] == [bytes(c.out) for c in b]
    assert [(c.out_msgs, c.out_bytes) for c in a] == [(c.out_msgs, c.out_bytes) for c in b]
    assert [s.delivered for s in a_subs] == [s.delivered for s in b_subs]
    # one flush per receiving connection for the whole run: one transport.write each per turn
    assert [len(c.soon) for c in a] == [1] * m


@python_only
def test_one_or_two_messages_per_connection_are_framed_as_route_frames_them(monkeypatch):
    laid_out = []
    real = router.msg_pieces

    def counting(sid, subjects, replies, payloads):
        laid_out.append(len(payloads))
        return real(sid, subjects, replies, payloads)

    monkeypatch.setattr(router, "msg_pieces", counting)
    acc, conns, _ = world(100)
    names = ["sc.%d" % (i % 100) for i in range(250)]  # 3 messages to sc.0-49, 2 to the rest
    route_run(acc, run_of(names, [b"p"] * 250), FakeClient())
    assert laid_out == [3] * 50
    assert bytes(conns[99].out) == b"MSG sc.99 2 1\r\np\r\nMSG sc.99 2 1\r\np\r\n"  # (sid 99 % 7 + 1)


def test_a_connection_closed_by_its_first_message_gets_no_second():
    acc, conns, subs = world(10)
    victim = conns[4]
    victim.max_pending = 10  # the first frame already exceeds it: a slow consumer
    names = ["sc.%d" % (i % 10) for i in range(20)]
    route_run(acc, run_of(names, [b"payload"] * 20), FakeClient())
    assert victim.closed and victim.out_msgs == 1 and subs[4].delivered == 1
    assert all(c.out_msgs == 2 for i, c in enumerate(conns) if i != 4)


@python_only
def test_requests_to_client_receivers_ask_each_distinct_result_once_for_a_stream(monkeypatch):
    # subjects10k-reply's shape: a run of requests over many subjects; whether a stream takes a
    # stretch of it is asked once per distinct match result, not once per message
    asked = []
    real = router._rrun_sub

    def counting(r):
        asked.append(r)
        return real(r)

    monkeypatch.setattr(router, "_rrun_sub", counting)
    acc, conns, _ = world(10)
    names = ["sc.%d" % (i % 10) for i in range(200)]
    replies = [b"_INBOX.r.%d" % i for i in range(200)]
    src = FakeClient()
    route_run(acc, run_of(names, [b"p"] * 200, replies), src)
    assert len(asked) == 10
    assert all(c.out_msgs == 20 for c in conns)
    assert bytes(conns[3].out).startswith(b"MSG sc.3 4 _INBOX.r.3 1\r\np\r\nMSG sc.3 4 _INBOX.r.13 1\r\n")
