"""Priority groups (jetstream/consumer/priority.py) with FakePorts + ManualClock: request checks,
the pin and its timeout without sleeping, overflow thresholds, prioritized order, UNPIN, INFO,
advisories, and the pull fast path giving what the general loop gives for a pinned client."""

from __future__ import annotations

import itertools

import pytest

from natsd.jetstream.consumer import priority
from natsd.jetstream.consumer.pull import PullRequest, parse_next_request
from natsd.jetstream.consumer.waitqueue import WaitQueue
from tests.unit.jetstream.test_consumer_harness import MS, SEC, Harness, data, statuses
from tests.unit.jetstream.test_delivery_fastpath import both

PINNED = {"priority_groups": ["A", "B"], "priority_policy": "pinned_client", "priority_timeout": 10 * SEC}


def _h(**kw) -> Harness:
    """A harness with a listener on the advisories (they are only sent when someone listens)."""
    h = Harness(**kw)
    h.listen("$JS.EVENT.ADVISORY.>")
    return h


def pinned(h: Harness, name: str = "P", **extra):
    return h.consumer(durable_name=name, ack_policy="explicit", **{**PINNED, **extra})


def pins(inbox) -> list[str | None]:
    return [m.header("Nats-Pin-Id") for m in data(inbox)]


def advisories(h: Harness, kind: str) -> list[dict]:
    return [a for s, a in h.account.advisories if s.startswith(f"$JS.EVENT.ADVISORY.CONSUMER.{kind}.")]


# -- parsing and checks -----------------------------------------------------------------------------


def test_only_json_bodies_carry_a_priority_part() -> None:
    assert parse_next_request(b"")[5] is None
    assert parse_next_request(b"5")[5] is None
    pg = parse_next_request(b'{"batch":2,"group":"A","min_pending":3,"min_ack_pending":4,"id":"x","priority":7}')[5]
    assert (pg.group, pg.min_pending, pg.min_ack_pending, pg.id, pg.priority) == ("A", 3, 4, "x", 7)


@pytest.mark.parametrize(
    "policy,body,text",
    [
        ("pinned_client", {"batch": 1}, "Bad Request - Priority Group missing"),
        ("pinned_client", {"batch": 1, "group": "C"}, "Bad Request - Invalid Priority Group"),
        ("pinned_client", {"group": "A", "min_pending": 1}, "Bad Request - Not a Overflow Priority consumer"),
        ("prioritized", {"group": "A", "min_ack_pending": 1}, "Bad Request - Not a Overflow Priority consumer"),
        ("overflow", {"group": "A", "id": "x"}, "Bad Request - Not a Pinned Client Priority consumer"),
        ("prioritized", {"group": "A", "priority": 10}, "Bad Request - Priority must be between 0 and 9"),
        ("overflow", {"group": "A", "priority": -1}, "Bad Request - Priority must be between 0 and 9"),
    ],
)
def test_request_checks(policy, body, text) -> None:
    h = _h()
    h.consumer(durable_name="C", ack_policy="explicit", priority_groups=["A", "B"], priority_policy=policy)
    assert statuses(h.pull("C", body)) == [f"NATS/1.0 400 {text}"]


def test_consumer_without_groups_ignores_group_but_refuses_id_and_thresholds() -> None:
    h = _h()
    h.pub("orders.1", "a")
    h.consumer(durable_name="N", ack_policy="explicit")
    assert statuses(h.pull("N", {"batch": 1, "id": "x"})) == [
        "NATS/1.0 400 Bad Request - Not a Pinned Client Priority consumer"
    ]
    assert statuses(h.pull("N", {"batch": 1, "min_pending": 1})) == [
        "NATS/1.0 400 Bad Request - Not a Overflow Priority consumer"
    ]
    inbox = h.pull("N", {"batch": 1, "group": "anything"})
    assert [m.payload for m in data(inbox)] == [b"a"] and pins(inbox) == [None]


# -- pinned client ----------------------------------------------------------------------------------


def test_first_request_is_pinned_others_wait_wrong_id_is_423() -> None:
    h = _h()
    h.pub("orders.1", "a", n=4)
    h.pub("orders.2", "b", hdr=b"NATS/1.0\r\nX: 1\r\n\r\n")
    c = pinned(h)
    a = h.pull("P", {"batch": 2, "group": "A", "expires": 5 * SEC})
    pin = c.pull.pin.pin_id
    assert pin and pins(a) == [pin, pin]
    assert [p["pinned_id"] for p in advisories(h, "PINNED")] == [pin]
    b = h.pull("P", {"batch": 1, "group": "A", "expires": 5 * SEC})
    assert b.msgs == [] and c.info()["num_waiting"] == 1
    assert statuses(h.pull("P", {"batch": 1, "group": "A", "id": "other"})) == ["NATS/1.0 423 Nats-Pin-Id mismatch"]
    h.pull("P", {"batch": 3, "group": "B", "id": pin}, inbox=a)
    got = data(a)
    assert pins(a) == [pin] * 5
    # An own header block gets the pin appended; a message without headers gets one of its own.
    assert got[-1].hdr == b"NATS/1.0\r\nX: 1\r\nNats-Pin-Id: " + pin.encode() + b"\r\n\r\n"
    assert got[0].hdr == b"NATS/1.0\r\nNats-Pin-Id: " + pin.encode() + b"\r\n\r\n"
    info = c.info()["priority_groups"]
    assert info == [{"group": "A", "pinned_client_id": pin, "pinned_ts": "2023-11-14T22:13:20Z"}]


def test_pin_lapses_after_priority_timeout_since_the_last_pull_and_the_waiting_client_is_pinned() -> None:
    h = _h()
    h.pub("orders.1", "a", n=6)
    c = pinned(h)
    a = h.pull("P", {"batch": 1, "group": "A"})
    pin1 = c.pull.pin.pin_id
    b = h.pull("P", {"batch": 2, "group": "A", "expires": 60 * SEC})
    h.advance(9 * SEC)
    h.pull("P", {"batch": 1, "group": "A", "id": pin1}, inbox=a)  # restarts the timer
    h.advance(9 * SEC)
    assert c.pull.pin.pin_id == pin1 and b.msgs == []
    h.advance(1 * SEC + MS)
    assert advisories(h, "UNPINNED")[-1]["reason"] == "timeout"
    assert advisories(h, "UNPINNED")[-1]["group"] == "A"
    pin2 = c.pull.pin.pin_id
    assert pin2 and pin2 != pin1 and pins(b) == [pin2, pin2]
    # The old pinned client is refused now.
    assert statuses(h.pull("P", {"batch": 1, "group": "A", "id": pin1})) == ["NATS/1.0 423 Nats-Pin-Id mismatch"]


def test_deliveries_do_not_extend_the_pin() -> None:
    h = _h()
    c = pinned(h)
    h.pull("P", {"batch": 100, "group": "A", "expires": 60 * SEC})
    h.pub("orders.1", "a")
    assert c.pull.pin.pin_id
    for _ in range(5):
        h.advance(2 * SEC)
        h.pub("orders.1", "a")
    assert c.pull.pin.pin_id == ""
    assert [a["reason"] for a in advisories(h, "UNPINNED")] == ["timeout"]


def test_queued_request_with_an_old_pin_gets_423_wrong_pin_with_pending_counts() -> None:
    h = _h()
    h.pub("orders.1", "a", n=2)
    c = pinned(h)
    a = h.pull("P", {"batch": 1, "group": "A"})
    pin = c.pull.pin.pin_id
    assert h.api("$JS.API.CONSUMER.UNPIN.ORDERS.P", {"group": "B"}) == {
        "type": "io.nats.jetstream.api.v1.consumer_unpin_response"
    }
    assert advisories(h, "UNPINNED")[-1]["reason"] == "admin" and advisories(h, "UNPINNED")[-1]["group"] == "B"
    h.pull("P", {"batch": 3, "group": "A", "id": pin, "expires": SEC, "max_bytes": 1000}, inbox=a)
    assert (
        a.msgs[-1].hdr
        == b"NATS/1.0 423 Nats-Wrong-Pin-Id\r\nNats-Pending-Messages: 3\r\nNats-Pending-Bytes: 1000\r\n\r\n"
    )
    assert c.info()["priority_groups"] == [{"group": "A", "pinned_ts": "0001-01-01T00:00:00Z"}]


def test_request_without_priority_part_is_served_with_an_empty_pin_and_pins_nobody() -> None:
    h = _h()
    h.pub("orders.1", "a")
    c = pinned(h)
    inbox = h.pull("P", 1)
    assert pins(inbox) == [""] and c.pull.pin.pin_id == ""


def test_max_bytes_refusal_gives_the_new_pin_back() -> None:
    h = _h()
    h.pub("orders.1", "x" * 100)
    c = pinned(h)
    inbox = h.pull("P", {"batch": 1, "group": "A", "max_bytes": 10})
    assert statuses(inbox) == ["NATS/1.0 409 Message Size Exceeds MaxBytes"]
    assert c.pull.pin.pin_id == "" and len(advisories(h, "PINNED")) == 1


def test_unpin_errors() -> None:
    h = _h()
    pinned(h)
    h.consumer(durable_name="N", ack_policy="explicit")

    def err(subject, body):
        return h.api(subject, body)["error"]

    assert err("$JS.API.CONSUMER.UNPIN.ORDERS.P", {"group": "Z"})["err_code"] == 10160
    assert err("$JS.API.CONSUMER.UNPIN.ORDERS.N", {"group": "A"})["err_code"] == 10160
    assert err("$JS.API.CONSUMER.UNPIN.ORDERS.P", {})["description"] == "invalid JSON: consumer group not specified"
    assert err("$JS.API.CONSUMER.UNPIN.ORDERS.P", b"")["description"] == "invalid JSON: unexpected end of JSON input"
    assert err("$JS.API.CONSUMER.UNPIN.ORDERS.P", {"group": "A!"})["err_code"] == 10162
    assert err("$JS.API.CONSUMER.UNPIN.ORDERS.X", {"group": "A"})["err_code"] == 10014
    assert err("$JS.API.CONSUMER.UNPIN.NOPE.X", {"group": "A"})["err_code"] == 10059


def test_pin_is_not_kept_across_a_restart(tmp_path) -> None:
    h = _h(store_dir=str(tmp_path))
    h.pub("orders.1", "a", n=3)
    c = pinned(h)
    h.pull("P", {"batch": 1, "group": "A"})
    pin = c.pull.pin.pin_id
    h.restart()
    c = h.stream.consumers["P"]
    assert c.pull.pin.pin_id == ""
    assert c.info()["priority_groups"] == [{"group": "A", "pinned_ts": "0001-01-01T00:00:00Z"}]
    old = h.pull("P", {"batch": 1, "group": "A", "id": pin, "expires": SEC})
    assert statuses(old) == ["NATS/1.0 423 Nats-Wrong-Pin-Id"]
    new = h.pull("P", {"batch": 1, "group": "A"})
    assert pins(new) == [c.pull.pin.pin_id] and c.pull.pin.pin_id not in ("", pin)


def test_stopped_consumer_cancels_the_pin_timer() -> None:
    h = _h()
    h.pub("orders.1", "a")
    c = pinned(h)
    h.pull("P", {"batch": 1, "group": "A"})
    c.stop()
    h.advance(20 * SEC)
    assert advisories(h, "UNPINNED") == []


def test_update_to_no_policy_stops_pin_headers() -> None:
    h = _h()
    h.pub("orders.1", "a", n=2)
    pinned(h)
    assert pins(h.pull("P", {"batch": 1, "group": "A"}))[0]
    h.consumer(durable_name="P", ack_policy="explicit")
    assert pins(h.pull("P", {"batch": 1})) == [None]


# -- overflow ---------------------------------------------------------------------------------------


def test_overflow_min_pending_and_min_ack_pending() -> None:
    h = _h()
    h.pub("orders.1", "a", n=4)
    c = h.consumer(durable_name="O", ack_policy="explicit", priority_groups=["A"], priority_policy="overflow")
    a = h.pull("O", {"batch": 1, "group": "A", "min_pending": 10, "expires": 10 * SEC})
    assert a.msgs == []
    b = h.pull("O", {"batch": 1, "group": "A", "expires": 10 * SEC})
    assert len(data(b)) == 1
    h.pub("orders.2", "b", n=6)  # 3 + 6 = 9 pending: still below 10
    assert a.msgs == []
    h.pub("orders.2", "c")  # 10: served, counting the message handed out
    assert len(data(a)) == 1
    # min_ack_pending: 2 unacknowledged now.
    d = h.pull("O", {"batch": 1, "group": "A", "min_ack_pending": 3, "expires": SEC})
    assert d.msgs == []
    h.advance(SEC + MS)
    assert statuses(d) == ["NATS/1.0 408 Request Timeout"]
    e = h.pull("O", {"batch": 5, "group": "A", "min_ack_pending": 2, "expires": SEC})
    assert len(data(e)) == 5
    assert c.info()["priority_groups"] == [{"group": "A", "pinned_ts": "0001-01-01T00:00:00Z"}]


# -- prioritized ------------------------------------------------------------------------------------


def test_prioritized_lower_number_first_round_robin_among_equals() -> None:
    h = _h()
    h.consumer(durable_name="R", ack_policy="explicit", priority_groups=["A"], priority_policy="prioritized")
    x = h.pull("R", {"batch": 2, "group": "A", "priority": 5, "expires": 10 * SEC})
    y = h.pull("R", {"batch": 2, "group": "A", "priority": 1, "expires": 10 * SEC})
    z = h.pull("R", {"batch": 1, "group": "A", "priority": 3, "expires": 10 * SEC})
    w = h.pull("R", {"batch": 1, "group": "A", "priority": 1, "expires": 10 * SEC})
    order = []
    for i in range(6):
        h.pub("orders.1", b"%d" % i)
        for name, sub in (("x", x), ("y", y), ("z", z), ("w", w)):
            if len(data(sub)) > order.count(name):
                order.append(name)
    assert order == ["y", "w", "y", "z", "x", "x"]


def test_waitqueue_sorted_insert_and_requeue() -> None:
    def req(name, n, prio):
        pg = priority.PullPriority("A", priority=prio) if prio is not None else None
        return PullRequest(name, n, 0, 0, 0, False, 0, pg)

    wq = WaitQueue(10)
    for r in (req("a", 1, 5), req("b", 2, 1), req("c", 1, None), req("d", 1, 1), req("e", 1, 0)):
        wq.add_sorted(r)
    assert [r.reply for r in wq.live_requests()] == ["e", "b", "d", "a", "c"]
    served = []
    while wq:
        wq.head()
        served.append(wq.pop_requeue().reply)
    assert served == ["e", "b", "d", "b", "a", "c"]
    assert wq.want == 0


# -- the fast path ----------------------------------------------------------------------------------


@pytest.mark.parametrize("store", ["memory", "file"])
def test_pinned_fast_path_gives_what_the_general_loop_gives(tmp_path, monkeypatch, store):
    def scenario(r) -> None:
        ids = itertools.count(1)
        monkeypatch.setattr(priority, "nuid", lambda: f"PIN{next(ids)}")
        h = r.h
        for i in range(60):
            h.stream.publish(f"orders.{i % 3}", b"m%d" % i, b"NATS/1.0\r\nK: v\r\n\r\n" if i % 4 == 0 else None)
        h.clock.run_soon()
        r.consumer(durable_name="P", ack_policy="explicit", **PINNED)
        a = h.pull("P", {"batch": 25, "group": "A", "expires": 5 * SEC})
        b = h.pull("P", {"batch": 5, "group": "A", "expires": 30 * SEC})
        h.pull("P", {"batch": 20, "group": "A", "id": "PIN1", "expires": 5 * SEC}, inbox=a)
        h.advance(11 * SEC)  # the pin lapses: b is pinned
        assert pins(a) == ["PIN1"] * 45 and pins(b) == ["PIN2"] * 5

    both(tmp_path, monkeypatch, scenario, store)


def test_pinned_client_with_several_requests_outstanding_shares_nothing_with_others() -> None:
    """The delivery loop's inline path (the pinned client's own requests, interest known) and
    next_waiting (everyone else) together: only the pinned client's requests are served."""
    h = _h()
    h.pub("orders.1", "a")
    c = pinned(h)
    a = h.pull("P", {"batch": 1, "group": "A"})
    pin = c.pull.pin.pin_id
    b = h.pull("P", {"batch": 50, "group": "A", "expires": 60 * SEC})
    for _ in range(3):
        h.pull("P", {"batch": 20, "group": "A", "id": pin, "expires": 60 * SEC}, inbox=a)
    h.pub("orders.2", "b", n=70)
    assert b.msgs == [] and len(data(a)) == 61 and set(pins(a)) == {pin}
    assert c.info()["num_waiting"] == 1
