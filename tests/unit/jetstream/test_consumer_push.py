"""Push consumers: waiting for interest, idle heartbeats, flow control, headers_only, replay
original, rate limit, deliver policies and inactive ephemerals; driven by a ManualClock."""

from __future__ import annotations

from tests.unit.jetstream.test_consumer_harness import MS, SEC, Harness, ack_tokens, data, statuses


def test_push_waits_for_interest_then_delivers_with_original_subject() -> None:
    h = Harness()
    h.pub("orders.1", "a", hdr=b"NATS/1.0\r\nX-Id: 7\r\n\r\n")
    c = h.consumer(durable_name="P", deliver_subject="push.p", ack_policy="explicit")
    assert c.info()["delivered"]["consumer_seq"] == 0 and "push_bound" not in c.info()
    sub = h.listen("push.p")
    h.clock.run_soon()
    msgs = data(sub)
    assert len(msgs) == 1 and msgs[0].subject == "orders.1"
    assert msgs[0].hdr == b"NATS/1.0\r\nX-Id: 7\r\n\r\n" and msgs[0].payload == b"a"
    assert c.info()["push_bound"] is True


def test_idle_heartbeat_and_stalled_flow_control() -> None:
    h = Harness()
    sub = h.listen("push.hb")
    h.consumer(deliver_subject="push.hb", ack_policy="none", flow_control=True, idle_heartbeat=SEC)
    h.pub("orders.1", "a", n=3)
    assert len(data(sub)) == 3
    h.advance(SEC + MS)
    hb = sub.last()
    assert hb.hdr == b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\nNats-Last-Stream: 3\r\n\r\n"
    h.advance(SEC)
    assert statuses(sub) == ["NATS/1.0 100 Idle Heartbeat"] * 2


def test_flow_control_pauses_until_answered_and_window_doubles() -> None:
    h = Harness()
    sub = h.listen("push.fc")
    c = h.consumer(deliver_subject="push.fc", ack_policy="none", flow_control=True, idle_heartbeat=5 * SEC)
    big = b"x" * 60_000
    for _ in range(80):
        h.stream.publish("orders.big", big)
    h.clock.run_soon()
    fc = [m for m in sub.msgs if m.status == "100" and m.reply]
    assert len(fc) == 1
    assert fc[0].hdr == b"NATS/1.0 100 FlowControl Request\r\n\r\n"
    assert fc[0].reply.startswith("$JS.FC.ORDERS." + c.name + ".") and len(fc[0].reply.split(".")[-1]) == 4
    n1 = len(data(sub))
    assert 18 <= n1 <= 40  # stalls at about 2 MiB outstanding
    # stalled: heartbeat carries Nats-Consumer-Stalled
    h.advance(5 * SEC + MS)
    assert sub.last().header("Nats-Consumer-Stalled") == fc[0].reply
    assert len(data(sub)) == n1
    h.ports.publish(fc[0].reply, "", None, b"")
    h.clock.run_soon()
    assert len(data(sub)) > n1
    assert c.push.maxpb == 4 * 1024 * 1024


def test_headers_only_adds_msg_size() -> None:
    h = Harness()
    h.pub("orders.1", "hello")
    h.pub("orders.2", "x", hdr=b"NATS/1.0\r\nA: b\r\n\r\n")
    sub = h.listen("push.ho")
    h.consumer(deliver_subject="push.ho", ack_policy="none", headers_only=True)
    m1, m2 = data(sub)
    assert m1.hdr == b"NATS/1.0\r\nNats-Msg-Size: 5\r\n\r\n" and m1.payload == b""
    assert m2.hdr == b"NATS/1.0\r\nA: b\r\nNats-Msg-Size: 1\r\n\r\n"


def test_replay_original_spaces_messages() -> None:
    h = Harness()
    h.pub("orders.1", "a")
    h.advance(500 * MS)
    h.pub("orders.1", "b")
    h.advance(SEC)
    h.pub("orders.1", "c")
    sub = h.listen("push.r")
    h.consumer(deliver_subject="push.r", ack_policy="none", replay_policy="original")
    assert len(data(sub)) == 1
    h.advance(499 * MS)
    assert len(data(sub)) == 1
    h.advance(2 * MS)
    assert len(data(sub)) == 2
    h.advance(SEC)
    assert len(data(sub)) == 3
    # caught up: new messages go out at once
    h.pub("orders.1", "d")
    assert len(data(sub)) == 4


def test_rate_limit_paces_delivery() -> None:
    h = Harness()
    for _ in range(10):
        h.stream.publish("orders.1", b"x" * 1000)
    sub = h.listen("push.rl")
    h.consumer(deliver_subject="push.rl", ack_policy="none", rate_limit_bps=8 * 2000)  # 2000 B/s
    n0 = len(data(sub))
    assert n0 < 10
    h.advance(2 * SEC)
    n1 = len(data(sub))
    assert n0 < n1 < 10
    h.advance(10 * SEC)
    assert len(data(sub)) == 10


def test_push_ephemeral_deleted_after_interest_lost() -> None:
    h = Harness()
    sub = h.listen("push.eph")
    c = h.consumer(deliver_subject="push.eph", ack_policy="none")
    h.advance(30 * SEC)
    assert c.name in h.stream.consumers
    sub.unsubscribe()
    h.advance(5 * SEC + 100 * MS + 900 * MS)
    assert c.name not in h.stream.consumers


def test_deliver_group_interest_via_queue_subscription() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=4)
    q1 = h.ports.client_subscribe("push.q", queue="workers")
    h.consumer(durable_name="Q", deliver_subject="push.q", deliver_group="workers", ack_policy="explicit")
    assert len(data(q1)) == 4


def test_deliver_policies() -> None:
    h = Harness()
    h.pub("orders.a", "1")
    h.pub("orders.b", "2")
    h.advance(SEC)
    h.pub("orders.a", "3")
    h.pub("orders.b", "4")
    t_start = h.store.load_msg(3).ts

    def got(**cfg) -> list[int]:
        sub = h.listen(f"push.dp.{len(h.stream.consumers)}")
        h.consumer(deliver_subject=sub.subject, ack_policy="none", **cfg)
        return [int(ack_tokens(m)[5]) for m in data(sub)]

    assert got(deliver_policy="all") == [1, 2, 3, 4]
    assert got(deliver_policy="last") == [4]
    assert got(deliver_policy="new") == []
    assert got(deliver_policy="by_start_sequence", opt_start_seq=2) == [2, 3, 4]
    from natsd.gotime import format_rfc3339 as format_time

    assert got(deliver_policy="by_start_time", opt_start_time=format_time(t_start)) == [3, 4]
    assert got(deliver_policy="last_per_subject", filter_subject="orders.*") == [3, 4]
    assert got(deliver_policy="last", filter_subject="orders.a") == [3]
    assert got(filter_subjects=["orders.a", "orders.c"]) == [1, 3]


def test_last_per_subject_pending_in_ack_tokens() -> None:
    h = Harness()
    h.pub("orders.a", "1")
    h.pub("orders.a", "2")
    h.pub("orders.c", "x")
    h.pub("orders.b", "3")
    sub = h.listen("push.lps")
    h.consumer(
        deliver_subject="push.lps", ack_policy="none", deliver_policy="last_per_subject", filter_subject="orders.>"
    )
    toks = [ack_tokens(m) for m in data(sub)]
    assert [(t[5], t[6], t[8]) for t in toks] == [("2", "1", "2"), ("3", "2", "1"), ("4", "3", "0")]
    h.pub("orders.a", "new")
    assert ack_tokens(data(sub)[-1])[5:7] == ["5", "4"]


def test_start_time_search_with_gaps() -> None:
    from natsd.gotime import format_rfc3339 as format_time

    h = Harness()
    times = []
    for i in range(20):
        h.pub(f"orders.{i}", "x")
        times.append(h.store.load_msg(i + 1).ts)
        h.advance(SEC)
    for seq in (3, 4, 10):
        h.store.remove_msg(seq)
    sub = h.listen("push.t")
    h.consumer(
        deliver_subject="push.t",
        ack_policy="none",
        deliver_policy="by_start_time",
        opt_start_time=format_time(times[2]),
    )
    assert ack_tokens(data(sub)[0])[5] == "5"  # 3 and 4 are gone
    first_live = lambda seq: h.store.load_next_msg("", seq).seq  # noqa: E731
    assert first_live(h.store.get_seq_from_time(times[8] + 1)) == 11  # seq 10 (ts[9]) was removed
    assert first_live(h.store.get_seq_from_time(times[14])) == 15
    assert h.store.get_seq_from_time(times[19] + 1) == 21
    assert h.store.get_seq_from_time(0) == 1


def _floor(c) -> tuple[tuple[int, int], tuple[int, int]]:
    i = c.info()
    return (
        (i["delivered"]["consumer_seq"], i["delivered"]["stream_seq"]),
        (i["ack_floor"]["consumer_seq"], i["ack_floor"]["stream_seq"]),
    )


def test_filtered_push_ack_floor_stops_at_last_delivered() -> None:
    # nats.js compat finding: the stream ends with a message the filter skips. Looking for the
    # next match moves sseq past it, but nats-server reports (and persists) its consumer store's
    # floor: the last delivered message, (10, 19), not (10, 20).
    h = Harness("EVENTS", subjects=["ev.>"])
    for i in range(1, 21):
        h.pub("ev.odd" if i % 2 else "ev.even", f"e{i}")
    sub = h.listen("push.odd")
    c = h.consumer(
        durable_name="pushd",
        deliver_subject="push.odd",
        ack_policy="explicit",
        filter_subject="ev.odd",
        flow_control=True,
        idle_heartbeat=SEC,
    )
    msgs = data(sub)
    assert [m.payload for m in msgs] == [f"e{i}".encode() for i in range(1, 21, 2)]
    for m in msgs:
        h.ack(m)
    assert _floor(c) == ((10, 19), (10, 19))
    assert c.info()["num_ack_pending"] == 0 and c.info()["num_pending"] == 0
    assert c.state().ack_floor.stream_seq == 19  # persisted as reported
    # More non-matching messages change nothing; the next delivered and acked match moves both.
    h.pub("ev.even", "e21")
    assert _floor(c) == ((10, 19), (10, 19))
    h.pub("ev.odd", "e22")
    m = data(sub)[-1]
    assert m.payload == b"e22"
    h.ack(m)
    assert _floor(c) == ((11, 22), (11, 22))


def test_flow_control_request_follows_the_messages_it_covers() -> None:
    """Deliveries are handed over in batches; the flow-control request goes out right after the
    message that took the outstanding bytes past half the window, never before messages it covers."""
    h = Harness()
    sub = h.listen("push.fco")
    h.consumer(deliver_subject="push.fco", ack_policy="none", flow_control=True, idle_heartbeat=5 * SEC)
    big = b"x" * 60_000
    for _ in range(40):
        h.stream.publish("orders.big", big)
    h.clock.run_soon()
    kinds = ["fc" if m.status == "100" and m.reply else "msg" for m in sub.msgs]
    at = kinds.index("fc")
    # 2 MiB window at first: half is 1 MiB, crossed by the 18th message of ~60 KB
    assert at == 18 and kinds[:at] == ["msg"] * 18 and kinds.count("fc") == 1
