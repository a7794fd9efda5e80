"""The pull consumer's wait queue (issue 14 item 8): intake and serving O(1) amortised, the
queue owning its popping; behaviour as before (round-robin, expiry, heartbeats, no_wait)."""

from __future__ import annotations

from natsd.jetstream.consumer.pull import PullRequest
from natsd.jetstream.consumer.waitqueue import WaitQueue
from tests.unit.jetstream.test_consumer_harness import MS, SEC, Harness, data, statuses


def req(reply: str, n: int = 1, expires: int = 0, hb: int = 0, no_wait: bool = False, now: int = 0) -> PullRequest:
    return PullRequest(reply, n, 0, expires, hb, no_wait, now)


def test_round_robin_pop_and_want():
    wq = WaitQueue(10)
    a, b = req("a", 2), req("b", 1)
    assert wq.add(a) and wq.add(b)
    assert (len(wq), wq.want) == (2, 3)
    assert wq.head() is a and wq.pop() is a  # a wants one more: to the tail
    assert wq.head() is b and wq.pop() is b  # b done: gone
    assert wq.head() is a and wq.pop() is a
    assert (len(wq), wq.want, wq.head()) == (0, 0, None)
    wq.credit(a)  # could not use it after all: back at the head
    assert wq.head() is a and (len(wq), wq.want) == (1, 1)


def test_discard_is_lazy_and_counted_at_once():
    wq = WaitQueue(3)
    rs = [req(str(i), 2) for i in range(3)]
    for r in rs:
        wq.add(r)
    assert wq.is_full()
    wq.discard(rs[1])
    assert (len(wq), wq.want) == (2, 4) and not wq.is_full()
    assert list(wq.live_requests()) == [rs[0], rs[2]]
    wq.discard(rs[0])
    assert wq.head() is rs[2]


def test_deadlines_come_from_a_heap():
    wq = WaitQueue(10)
    a = req("a", expires=50, hb=10, now=0)
    b = req("b", expires=30, now=0)
    wq.add(a)
    wq.add(b)
    assert wq.next_deadline() == 10
    a.hbt = 25  # a delivery pushed the heartbeat later: the stale entry is re-queued
    assert wq.next_deadline() == 25
    assert wq.due(26) == [a]
    a.hbt = 40
    wq.reschedule_hb(a)
    assert wq.next_deadline() == 30
    wq.discard(b)
    assert wq.next_deadline() == 40


def test_many_waiting_requests_cost_linear_work():
    """20,000 requests wait on an empty stream, then 20,000 messages arrive: every request gets
    one, and the interest checks stay linear (each delivery pass used to rescan the whole queue:
    ~N*N/2 checks)."""
    n = 20_000
    h = Harness()
    h.consumer(durable_name="C", ack_policy="none", max_waiting=n)
    calls = 0
    real = h.ports.has_interest

    def counting(subject: str) -> bool:
        nonlocal calls
        calls += 1
        return real(subject)

    h.ports.has_interest = counting
    inboxes = []
    for i in range(n):
        inbox = h.ports.client_subscribe(f"_IN.{i}")
        h.ports.request("$JS.API.CONSUMER.MSG.NEXT.ORDERS.C", b'{"batch":1,"expires":60000000000}', reply=inbox.subject)
        inboxes.append(inbox)
        if i % 100 == 99:
            h.clock.run_soon()  # a loop turn every 100 requests, as reads arrive
    h.clock.run_soon()
    c = h.stream.consumers["C"]
    assert len(c.pull.wq) == n
    for i in range(n):
        h.stream.publish("orders.x", b"%d" % i)
        if i % 100 == 99:
            h.clock.run_soon()
    h.clock.run_soon()
    assert [len(data(x)) for x in inboxes] == [1] * n
    assert len(c.pull.wq) == 0
    assert calls < 5 * n, calls


def test_expiry_and_heartbeats_of_queued_requests():
    h = Harness()
    h.consumer(durable_name="C", ack_policy="explicit", max_waiting=100)
    early = h.pull("C", {"batch": 2, "expires": 100 * MS})
    hb = h.pull("C", {"batch": 2, "expires": SEC, "idle_heartbeat": 300 * MS})
    late = h.pull("C", {"batch": 2, "expires": 2 * SEC})
    h.advance(101 * MS)
    assert statuses(early) == ["NATS/1.0 408 Request Timeout"] and statuses(late) == []
    h.advance(200 * MS)
    assert statuses(hb) == ["NATS/1.0 100 Idle Heartbeat"]
    h.pub("orders.x", "a")
    assert len(data(hb)) == 1  # hb is ahead of late in the queue
    h.advance(300 * MS)  # the delivery pushed the next heartbeat to 301+300 ms from now-ish
    h.advance(300 * MS)
    assert statuses(hb)[0] == "NATS/1.0 100 Idle Heartbeat"
    h.advance(SEC)
    assert statuses(hb)[-1] == "NATS/1.0 408 Request Timeout"
    assert statuses(late) == []  # 1.901 s
    h.advance(100 * MS)
    assert statuses(late) == ["NATS/1.0 408 Request Timeout"]
    assert len(h.stream.consumers["C"].pull.wq) == 0


def test_requester_gone_is_dropped_at_the_head():
    h = Harness()
    h.consumer(durable_name="C", ack_policy="explicit", max_waiting=10)
    gone = h.pull("C", {"batch": 1, "expires": SEC})
    stay = h.pull("C", {"batch": 1, "expires": SEC})
    gone.unsubscribe()
    h.pub("orders.x", "a")
    assert len(data(stay)) == 1
    assert len(h.stream.consumers["C"].pull.wq) == 0
