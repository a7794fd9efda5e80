"""Acknowledgements with an injected clock: every ack payload, ack policies, ack_wait and
backoff redelivery, max_deliver, ack floor movement, advisories and ack sampling."""

from __future__ import annotations

import json

from tests.unit.jetstream.test_consumer_harness import MS, SEC, Harness, ack_tokens, data


def _fetch(h: Harness, name: str, n: int) -> list:
    return data(h.pull(name, {"batch": n, "expires": 100 * SEC}))


def test_ack_empty_body_and_plus_ack_move_floor() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=3)
    c = h.consumer(durable_name="C", ack_policy="explicit")
    m = _fetch(h, "C", 3)
    h.ack(m[1], b"")
    info = c.info()
    assert info["num_ack_pending"] == 2 and info["ack_floor"] == {"consumer_seq": 0, "stream_seq": 0} | (
        {"last_active": info["ack_floor"]["last_active"]}
    )
    h.ack(m[0], b"+ACK")
    assert c.info()["ack_floor"]["consumer_seq"] == 2 and c.info()["ack_floor"]["stream_seq"] == 2
    h.ack(m[2], b"+OK")
    info = c.info()
    assert info["num_ack_pending"] == 0 and info["ack_floor"]["stream_seq"] == 3
    assert info["delivered"]["consumer_seq"] == 3 and info["delivered"]["stream_seq"] == 3


def test_ack_with_reply_gets_empty_ack_ack() -> None:
    h = Harness()
    h.pub("orders.1", "a")
    h.consumer(durable_name="C", ack_policy="explicit")
    m = _fetch(h, "C", 1)[0]
    inbox = h.listen("_INBOX.ackack")
    h.ack(m, b"", reply="_INBOX.ackack")
    assert len(inbox.msgs) == 1 and inbox.msgs[0].payload == b"" and inbox.msgs[0].hdr is None
    # also for +WPI, -NAK and +TERM
    h.pub("orders.2", "b")
    m2 = _fetch(h, "C", 1)[0]
    for body in (b"+WPI", b"-NAK", b"+TERM"):
        h.ack(m2, body, reply="_INBOX.ackack")
    assert len(inbox.msgs) == 4


def test_ack_wait_redelivers_with_new_consumer_seq_and_higher_count() -> None:
    h = Harness()
    h.pub("orders.1", "a")
    c = h.consumer(durable_name="C", ack_policy="explicit", ack_wait=2 * SEC)
    inbox = h.pull("C", {"batch": 5, "expires": 100 * SEC})
    assert len(data(inbox)) == 1
    h.advance(2 * SEC - 10 * MS)
    assert len(data(inbox)) == 1
    h.advance(20 * MS)
    msgs = data(inbox)
    assert len(msgs) == 2
    t = ack_tokens(msgs[1])
    assert t[4:7] == ["2", "1", "2"]
    info = c.info()
    assert info["num_redelivered"] == 1 and info["num_ack_pending"] == 1
    assert info["delivered"] == {"consumer_seq": 2, "stream_seq": 1, "last_active": info["delivered"]["last_active"]}


def test_one_timer_per_consumer() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=100)
    h.consumer(durable_name="C", ack_policy="explicit", ack_wait=SEC)
    before = h.clock.pending_timers()
    _fetch(h, "C", 100)
    # the ack timer, the pull request's expiry and (durables) the deferred state write
    assert h.clock.pending_timers() - before <= 3


def test_backoff_schedule() -> None:
    h = Harness()
    h.pub("orders.1", "a")
    adv = h.listen("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ORDERS.C")
    c = h.consumer(durable_name="C", ack_policy="explicit", backoff=[500 * MS, 1500 * MS], max_deliver=3)
    assert c.cfg.ack_wait == 500 * MS
    inbox = h.pull("C", {"batch": 10, "expires": 100 * SEC})
    times = [0]
    t = 0
    for _ in range(40):
        h.advance(100 * MS)
        t += 100
        if len(data(inbox)) > len(times):
            times.append(t)
    assert times == [0, 600, 2100]  # 0.5s then 1.5s (+1ms timer slack each, rounded up to 100ms ticks)
    assert len(adv.msgs) == 1
    a = adv.msgs[0].json()
    assert a["type"] == "io.nats.jetstream.advisory.v1.max_deliver"
    assert (a["stream"], a["consumer"], a["stream_seq"], a["deliveries"]) == ("ORDERS", "C", 1, 3)
    info = c.info()
    assert info["num_ack_pending"] == 0 and info["num_redelivered"] == 1
    # As nats-server: the reported floor is the last one an ack produced; exhausting
    # max_deliver does not move it (checked side by side with 2.15.1).
    assert info["ack_floor"]["stream_seq"] == 0
    assert c.t.asflr == 1  # ... while internally the message is out of the way


def test_nak_redelivers_now_and_advises() -> None:
    h = Harness()
    h.pub("orders.1", "a")
    adv = h.listen("$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.ORDERS.C")
    h.consumer(durable_name="C", ack_policy="explicit")
    inbox = h.pull("C", {"batch": 3, "expires": 100 * SEC})
    h.ack(data(inbox)[0], b"-NAK")
    msgs = data(inbox)
    assert len(msgs) == 2 and ack_tokens(msgs[1])[4] == "2"
    a = adv.msgs[0].json()
    assert a["type"] == "io.nats.jetstream.advisory.v1.nak" and a["consumer_seq"] == 1 and a["deliveries"] == 1


def test_nak_with_delay_json_and_go_duration() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=2)
    h.consumer(durable_name="C", ack_policy="explicit", ack_wait=30 * SEC)
    inbox = h.pull("C", {"batch": 10, "expires": 100 * SEC})
    m1, m2 = data(inbox)
    h.ack(m1, b'-NAK {"delay": 1500000000}')
    h.ack(m2, b"-NAK 3s")
    h.advance(1400 * MS)
    assert len(data(inbox)) == 2
    h.advance(200 * MS)
    assert len(data(inbox)) == 3 and ack_tokens(data(inbox)[2])[5] == "1"
    h.advance(1500 * MS)
    assert len(data(inbox)) == 4 and ack_tokens(data(inbox)[3])[5] == "2"


def test_wpi_resets_ack_timer() -> None:
    h = Harness()
    h.pub("orders.1", "a")
    h.consumer(durable_name="C", ack_policy="explicit", ack_wait=SEC)
    inbox = h.pull("C", {"batch": 3, "expires": 100 * SEC})
    h.advance(800 * MS)
    h.ack(data(inbox)[0], b"+WPI")
    h.advance(800 * MS)
    assert len(data(inbox)) == 1
    h.advance(300 * MS)
    assert len(data(inbox)) == 2


def test_term_stops_redelivery_and_advises_reason() -> None:
    h = Harness()
    h.pub("orders.1", "a")
    adv = h.listen("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.ORDERS.C")
    c = h.consumer(durable_name="C", ack_policy="explicit", ack_wait=SEC)
    inbox = h.pull("C", {"batch": 3, "expires": 100 * SEC})
    h.ack(data(inbox)[0], b"+TERM bad payload")
    h.advance(5 * SEC)
    assert len(data(inbox)) == 1
    a = adv.msgs[0].json()
    assert a["type"] == "io.nats.jetstream.advisory.v1.terminated" and a["reason"] == "bad payload"
    assert c.info()["num_ack_pending"] == 0


def test_nxt_acks_and_requests_more_on_ack_reply() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=3)
    h.consumer(durable_name="C", ack_policy="explicit")
    inbox = h.pull("C", 1)
    m = data(inbox)[0]
    h.ports.publish(m.reply, inbox.subject, None, b'+NXT {"batch": 2}')
    h.clock.run_soon()
    msgs = data(inbox)
    assert [ack_tokens(x)[5] for x in msgs] == ["1", "2", "3"]


def test_ack_all_acks_everything_below() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=4)
    c = h.consumer(durable_name="C", ack_policy="all")
    msgs = _fetch(h, "C", 4)
    h.ack(msgs[2])
    info = c.info()
    assert info["num_ack_pending"] == 1 and info["ack_floor"]["stream_seq"] == 3
    # an ack below the floor is ignored but still answered
    inbox = h.listen("_INBOX.aa")
    h.ack(msgs[0], reply="_INBOX.aa")
    assert len(inbox.msgs) == 1 and c.info()["ack_floor"]["stream_seq"] == 3


def test_ack_none_floor_moves_on_delivery() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=3)
    c = h.consumer(durable_name="C", ack_policy="none")
    _fetch(h, "C", 3)
    info = c.info()
    assert info["ack_floor"]["stream_seq"] == 3 and info["num_ack_pending"] == 0


def test_ack_sampling_metric() -> None:
    h = Harness()
    h.pub("orders.1", "a")
    metric = h.listen("$JS.EVENT.METRIC.CONSUMER.ACK.ORDERS.C")
    h.consumer(durable_name="C", ack_policy="explicit", sample_freq="100%")
    m = _fetch(h, "C", 1)[0]
    h.advance(5 * MS)
    h.ack(m)
    j = metric.msgs[0].json()
    assert j["type"] == "io.nats.jetstream.metric.v1.consumer_ack"
    assert (j["stream"], j["consumer"], j["consumer_seq"], j["stream_seq"], j["deliveries"]) == ("ORDERS", "C", 1, 1, 1)
    assert j["ack_time"] == 5 * MS
    assert set(j) >= {"id", "timestamp"}


def test_ack_above_delivered_is_ignored_without_reply() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=2)
    c = h.consumer(durable_name="C", ack_policy="explicit")
    m = _fetch(h, "C", 1)[0]
    inbox = h.listen("_INBOX.x")
    h.ports.publish(m.reply.replace(".1.1.1.", ".1.2.2.", 1), "_INBOX.x", None, b"")
    h.clock.run_soon()
    assert inbox.msgs == [] and c.info()["num_ack_pending"] == 1


def test_state_handed_to_store_once_per_write_gap() -> None:
    """The durable state is handed to the store when it is written (at most every
    STATE_WRITE_GAP), not at every loop turn: a large state costs nothing between writes."""
    from natsd.jetstream.consumer import STATE_WRITE_GAP

    h = Harness()
    h.pub("orders.1", "a", n=3)
    c = h.consumer(durable_name="C", ack_policy="explicit")
    calls = []

    class Spy:
        meta: dict = {}

        def update(self, st):
            calls.append(st)

        def flush(self) -> None: ...

        def stop(self) -> None: ...

        def delete(self) -> None: ...

        def update_config(self, meta) -> None: ...

        def append_delta(self, delta, source) -> None:
            raise AssertionError("a 3-message state is written whole")

    c.store = Spy()
    h.advance(STATE_WRITE_GAP)
    msgs = _fetch(h, "C", 3)
    n = len(calls)
    for m in msgs:
        h.ports.publish(m.reply, "", None, b"")
        h.clock.run_soon()  # one loop turn per ack
    assert len(calls) == n  # within the gap of the delivery's write: nothing yet
    h.advance(STATE_WRITE_GAP)
    assert len(calls) == n + 1
    st = calls[-1]
    assert st.ack_floor.stream_seq == 3 and st.pending == {}
    assert json.dumps(c.info())
    h.advance(10 * STATE_WRITE_GAP)
    assert len(calls) == n + 1  # nothing changed: nothing written


def test_flow_control_ack_policy_acks_through_fc_replies() -> None:
    h = Harness()
    sub = h.listen("push.afc")
    c = h.consumer(durable_name="F", deliver_subject="push.afc", ack_policy="flow_control", max_ack_pending=3)
    assert c.cfg.flow_control is True and c.cfg.idle_heartbeat == SEC
    h.pub("orders.1", "a", n=5)
    assert len(data(sub)) == 3  # max_ack_pending reached -> an FC request asks for acks
    fc = [m for m in sub.msgs if m.reply.startswith("$JS.FC.")]
    assert len(fc) == 1
    h.ports.publish(fc[0].reply, "", b"NATS/1.0\r\nNats-Last-Consumer: 3\r\nNats-Last-Stream: 3\r\n\r\n", b"")
    h.clock.run_soon()
    assert c.info()["ack_floor"]["stream_seq"] == 3
    assert len(data(sub)) == 5
