"""Pull consumers with FakePorts + ManualClock: MSG.NEXT bodies, the wait queue and every
status message, without sleeping."""

from __future__ import annotations

from tests.unit.jetstream.test_consumer_harness import MS, SEC, Harness, ack_tokens, data, statuses


def test_empty_body_is_batch_one_and_integer_body_is_batch() -> None:
    h = Harness()
    h.pub("orders.x", "a", n=5)
    h.consumer(durable_name="C", ack_policy="explicit")
    assert len(data(h.pull("C", b""))) == 1
    assert len(data(h.pull("C", 3))) == 3


def test_no_wait_on_empty_consumer_is_404() -> None:
    h = Harness()
    h.consumer(durable_name="C", ack_policy="explicit")
    inbox = h.pull("C", {"batch": 3, "no_wait": True})
    assert statuses(inbox) == ["NATS/1.0 404 No Messages"]


def test_no_wait_delivers_what_there_is_then_404() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=2)
    h.consumer(durable_name="C", ack_policy="explicit")
    inbox = h.pull("C", {"batch": 5, "expires": SEC, "no_wait": True})
    assert len(data(inbox)) == 2
    assert statuses(inbox) == ["NATS/1.0 404 No Messages"]


def test_no_wait_with_expires_on_empty_waits_then_408_with_pending_headers() -> None:
    h = Harness()
    h.consumer(durable_name="C", ack_policy="explicit")
    inbox = h.pull("C", {"batch": 3, "no_wait": True, "expires": 300 * MS})
    assert inbox.msgs == []
    h.advance(299 * MS)
    assert inbox.msgs == []
    h.advance(2 * MS)
    m = inbox.last()
    assert m.status == "408"
    assert m.hdr == b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 3\r\nNats-Pending-Bytes: 0\r\n\r\n"


def test_request_waits_and_gets_later_message() -> None:
    h = Harness()
    h.consumer(durable_name="C", ack_policy="explicit")
    inbox = h.pull("C", {"batch": 2, "expires": 5 * SEC})
    h.pub("orders.1", "late")
    assert [m.payload for m in data(inbox)] == [b"late"]
    h.advance(5 * SEC + MS)
    assert statuses(inbox) == ["NATS/1.0 408 Request Timeout"]
    assert inbox.last().header("Nats-Pending-Messages") == "1"


def test_batch_completed_sends_nothing() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=3)
    h.consumer(durable_name="C", ack_policy="explicit")
    inbox = h.pull("C", {"batch": 2, "expires": SEC})
    h.advance(2 * SEC)
    assert len(data(inbox)) == 2 and statuses(inbox) == []


def test_idle_heartbeats_on_waiting_request() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=3)
    c = h.consumer(durable_name="C", ack_policy="explicit")
    h.pull("C", 3)
    inbox = h.pull("C", {"batch": 3, "expires": 300 * MS, "idle_heartbeat": 100 * MS})
    assert inbox.msgs == []
    h.advance(100 * MS)
    hb = inbox.last()
    assert hb.hdr == b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\nNats-Last-Stream: 3\r\n\r\n"
    assert hb.reply == "" and hb.payload == b""
    h.advance(100 * MS)
    h.advance(101 * MS)
    assert statuses(inbox) == ["NATS/1.0 100 Idle Heartbeat"] * 2 + ["NATS/1.0 408 Request Timeout"]
    assert c.info()["num_waiting"] == 0


def test_heartbeat_too_large_is_400() -> None:
    h = Harness()
    h.consumer(durable_name="C", ack_policy="explicit")
    inbox = h.pull("C", {"batch": 1, "expires": SEC, "idle_heartbeat": 600 * MS})
    assert statuses(inbox) == ["NATS/1.0 400 Bad Request - heartbeat value too large"]


def test_limits_409() -> None:
    h = Harness()
    h.consumer(durable_name="C", ack_policy="explicit", max_batch=5, max_expires=SEC, max_bytes=100)
    assert statuses(h.pull("C", {"batch": 10})) == ["NATS/1.0 409 Exceeded MaxRequestBatch of 5"]
    assert statuses(h.pull("C", {"batch": 1, "expires": 2 * SEC})) == ["NATS/1.0 409 Exceeded MaxRequestExpires of 1s"]
    assert statuses(h.pull("C", {"batch": 1, "max_bytes": 200})) == ["NATS/1.0 409 Exceeded MaxRequestMaxBytes of 100"]


def test_max_waiting_409() -> None:
    h = Harness()
    c = h.consumer(durable_name="C", ack_policy="explicit", max_waiting=2)
    h.pull("C", {"batch": 1, "expires": 10 * SEC})
    h.pull("C", {"batch": 1, "expires": 10 * SEC})
    third = h.pull("C", {"batch": 1, "expires": 10 * SEC})
    assert statuses(third) == ["NATS/1.0 409 Exceeded MaxWaiting"]
    assert c.info()["num_waiting"] == 2
    # with a heartbeat the request is dropped silently
    fourth = h.pull("C", {"batch": 1, "expires": 10 * SEC, "idle_heartbeat": SEC})
    assert fourth.msgs == []


def test_max_bytes_too_small_409_and_408_with_bytes() -> None:
    h = Harness()
    h.pub("orders.1", "x" * 50)
    h.consumer(durable_name="C", ack_policy="explicit")
    inbox = h.pull("C", {"batch": 1, "max_bytes": 5, "expires": 300 * MS})
    m = inbox.last()
    assert (
        m.hdr
        == b"NATS/1.0 409 Message Size Exceeds MaxBytes\r\nNats-Pending-Messages: 1\r\nNats-Pending-Bytes: 5\r\n\r\n"
    )


def test_max_bytes_left_over_sends_batch_completed() -> None:
    h = Harness()
    h.pub("orders.1", "x", n=2)
    h.consumer(durable_name="C", ack_policy="explicit")
    inbox = h.pull("C", {"batch": 1, "max_bytes": 10_000, "expires": SEC})
    assert len(data(inbox)) == 1
    assert statuses(inbox) == ["NATS/1.0 409 Batch Completed"]
    assert inbox.last().header("Nats-Pending-Messages") == "0"


def test_requests_share_messages_round_robin() -> None:
    h = Harness()
    h.consumer(durable_name="C", ack_policy="explicit")
    a = h.pull("C", {"batch": 3, "expires": SEC})
    b = h.pull("C", {"batch": 3, "expires": SEC})
    for i in range(4):
        h.stream.publish(f"orders.{i}", b"m")
    h.clock.run_soon()
    assert [m.subject for m in data(a)] == ["orders.0", "orders.2"]
    assert [m.subject for m in data(b)] == ["orders.1", "orders.3"]


def test_push_consumer_answers_409_push_based() -> None:
    h = Harness()
    h.consumer(durable_name="P", deliver_subject="push.p", ack_policy="explicit")
    assert statuses(h.pull("P", 1)) == ["NATS/1.0 409 Consumer is push based"]


def test_delete_answers_waiting_requests_409() -> None:
    h = Harness()
    c = h.consumer(durable_name="C", ack_policy="explicit")
    inbox = h.pull("C", {"batch": 1, "expires": 10 * SEC})
    c.delete_from_stream()
    assert statuses(inbox) == ["NATS/1.0 409 Consumer Deleted"]
    assert "C" not in h.stream.consumers


def test_requester_gone_request_dropped() -> None:
    h = Harness()
    c = h.consumer(durable_name="C", ack_policy="explicit")
    inbox = h.pull("C", {"batch": 1, "expires": 10 * SEC})
    inbox.unsubscribe()
    h.pub("orders.1", "a")
    assert c.info()["num_waiting"] == 0
    assert c.info()["num_pending"] == 1


def test_max_ack_pending_stalls_new_but_not_redeliveries() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=5)
    h.consumer(durable_name="C", ack_policy="explicit", max_ack_pending=2, ack_wait=SEC)
    inbox = h.pull("C", {"batch": 5, "expires": 10 * SEC})
    assert len(data(inbox)) == 2
    h.advance(SEC + 2 * MS)  # both expire -> redelivered although at the limit
    msgs = data(inbox)
    assert len(msgs) == 4
    assert [ack_tokens(m)[4] for m in msgs[2:]] == ["2", "2"]
    h.ack(msgs[2])  # ack seq 1 -> one slot frees -> seq 3 flows
    msgs = data(inbox)
    assert len(msgs) == 5 and ack_tokens(msgs[4])[5] == "3"


def test_inactive_pull_ephemeral_deleted_after_threshold() -> None:
    h = Harness()
    c = h.consumer(name="eph", ack_policy="explicit", inactive_threshold=2 * SEC)
    h.advance(SEC)
    h.pull("eph", {"batch": 1, "no_wait": True})
    h.advance(2 * SEC)
    assert "eph" in h.stream.consumers  # activity reset the clock
    h.advance(2 * SEC)
    assert "eph" not in h.stream.consumers and c.closed


def test_ephemeral_default_threshold_is_5s() -> None:
    h = Harness()
    c = h.consumer(ack_policy="explicit")
    assert c.cfg.inactive_threshold == 5 * SEC
    h.advance(4 * SEC)
    assert c.name in h.stream.consumers
    h.advance(3 * SEC)
    assert c.name not in h.stream.consumers


def test_no_wait_behind_queued_requests_is_408_requests_pending() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=3)
    h.consumer(durable_name="C", ack_policy="explicit", max_ack_pending=1)
    assert len(data(h.pull("C", {"batch": 1, "expires": 10 * SEC}))) == 1
    waiting = h.pull("C", {"batch": 5, "expires": 10 * SEC})  # stalled by max_ack_pending
    assert waiting.msgs == []
    c = h.pull("C", {"batch": 1, "no_wait": True})
    assert statuses(c) == ["NATS/1.0 408 Requests Pending"]


def test_required_api_level_header_is_412() -> None:
    h = Harness()
    h.consumer(durable_name="C", ack_policy="explicit")
    inbox = h.ports.client_subscribe("_INBOX.lvl")
    h.ports.publish(
        "$JS.API.CONSUMER.MSG.NEXT.ORDERS.C", "_INBOX.lvl", b"NATS/1.0\r\nNats-Required-Api-Level: 99\r\n\r\n", b""
    )
    h.clock.run_soon()
    assert statuses(inbox) == ["NATS/1.0 412 Required Api Level"]


def test_num_waiting_and_pending_in_info() -> None:
    h = Harness()
    c = h.consumer(durable_name="C", ack_policy="explicit")
    h.pull("C", {"batch": 2, "expires": 10 * SEC})
    h.pull("C", {"batch": 2, "expires": 10 * SEC})
    assert c.info()["num_waiting"] == 2
    h.pub("orders.1", "a", n=3)
    info = c.info()
    assert info["num_waiting"] == 1 and info["num_pending"] == 0 and info["num_ack_pending"] == 3


def test_filtered_pull_ack_floor_after_lookahead_past_stream_end() -> None:
    # A pull request asking for more than the filter matches makes the consumer look past the
    # stream's last (non-matching) message, as a push consumer does: same reported floor.
    h = Harness("EVENTS", subjects=["ev.>"])
    for i in range(1, 21):
        h.pub("ev.odd" if i % 2 else "ev.even", f"e{i}")
    c = h.consumer(durable_name="pulld", ack_policy="explicit", filter_subject="ev.odd")
    msgs = data(h.pull("pulld", {"batch": 50, "expires": 10 * SEC}, stream="EVENTS"))
    assert len(msgs) == 10
    for m in msgs:
        h.ack(m)
    info = c.info()
    assert (info["delivered"]["consumer_seq"], info["delivered"]["stream_seq"]) == (10, 19)
    assert (info["ack_floor"]["consumer_seq"], info["ack_floor"]["stream_seq"]) == (10, 19)
