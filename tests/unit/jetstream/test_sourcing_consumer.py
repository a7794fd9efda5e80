"""The consumer a sourcing stream on another server asks for (``direct`` + ``sourcing`` under a
stable ``JS_SRC_<hash>`` name, as a nats-server 2.14+ hub sends it): upgraded to a durable
``flow_control`` consumer on interest/work-queue streams, acked by the flow-control replies'
``Nats-Last-*`` headers, and delivering again from its ack floor when it is set up again after a
link drop. Socket-free, ManualClock."""

from __future__ import annotations

from typing import Any

from tests.unit.jetstream.test_consumer_harness import SEC, Harness, ack_tokens, data

#: What a 2.15 hub sends (``trySetupSourceConsumer``), minus the fields that vary per setup.
SRC_NAME = "JS_SRC_abcdefgh"


def src_request(deliver: str, start_seq: int = 0, stream: str = "ORDERS") -> dict:
    cfg: dict[str, Any] = {
        "name": SRC_NAME,
        "deliver_subject": deliver,
        "ack_policy": "none",
        "ack_wait": 22 * 3600 * SEC,
        "max_deliver": 1,
        "idle_heartbeat": SEC,
        "flow_control": True,
        "direct": True,
        "sourcing": True,
        "inactive_threshold": 10 * SEC,
        "deliver_policy": "all",
        "metadata": {"_nats.src.stream": "HQ", "_nats.src.acc": "$G", "_nats.src.domain": "HUB"},
    }
    if start_seq:
        cfg.update(deliver_policy="by_start_sequence", opt_start_seq=start_seq)
    return {"stream_name": stream, "config": cfg}


def create_src(h: Harness, deliver: str, start_seq: int = 0) -> dict:
    return h.api(f"$JS.API.CONSUMER.CREATE.ORDERS.{SRC_NAME}", src_request(deliver, start_seq))


def fc_requests(sub: Any) -> list[Any]:
    return [m for m in sub.msgs if m.status == "100" and m.reply]


def fc_reply(h: Harness, fc: Any, last_dseq: int, last_sseq: int) -> None:
    """What the hub answers a flow-control request with (``handleFlowControl``)."""
    hdr = b"NATS/1.0\r\nNats-Last-Consumer: %d\r\nNats-Last-Stream: %d\r\n\r\n" % (last_dseq, last_sseq)
    h.ports.publish(fc.reply, "", hdr, b"")
    h.clock.run_soon()


def test_work_queue_sourcing_consumer_becomes_a_durable_acked_by_flow_control() -> None:
    h = Harness(retention="workqueue")
    r = create_src(h, "$JS.S.one")
    assert "error" not in r, r
    assert r["name"] == SRC_NAME
    cfg = r["config"]
    assert cfg["durable_name"] == SRC_NAME and cfg["ack_policy"] == "flow_control"
    assert "direct" not in cfg and cfg["sourcing"] is True
    assert cfg["max_deliver"] == -1 and "inactive_threshold" not in cfg and cfg.get("ack_wait", 0) == 0
    assert cfg["flow_control"] is True and cfg["idle_heartbeat"] == SEC
    assert cfg["metadata"]["_nats.src.stream"] == "HQ" and cfg["metadata"]["_nats.req.level"] == "4"
    c = h.stream.consumers[SRC_NAME]
    assert c.cfg.durable_name == SRC_NAME


def test_interest_stream_is_upgraded_too() -> None:
    h = Harness(retention="interest")
    r = create_src(h, "$JS.S.one")
    assert r["config"]["ack_policy"] == "flow_control" and r["config"]["durable_name"] == SRC_NAME


def test_limits_stream_keeps_an_ephemeral_with_a_random_suffix() -> None:
    h = Harness()
    r1 = h.api(f"$JS.API.CONSUMER.CREATE.ORDERS.{SRC_NAME}", src_request("$JS.S.one"))
    r2 = h.api(f"$JS.API.CONSUMER.CREATE.ORDERS.{SRC_NAME}", src_request("$JS.S.two"))
    for r in (r1, r2):
        assert "error" not in r, r
        name = r["name"]
        assert name.startswith(SRC_NAME + "-") and len(name) == len(SRC_NAME) + 9
        assert r["config"]["ack_policy"] == "none" and r["config"]["direct"] is True
        assert "durable_name" not in r["config"]
    assert r1["name"] != r2["name"] and len(h.stream.consumers) == 2


def test_no_upgrade_without_sourcing_or_name() -> None:
    """The hub's last fallback (``sourcing: false``, unique name) stays a plain ephemeral."""
    h = Harness(retention="workqueue")
    req = src_request("$JS.S.one")
    req["config"]["sourcing"] = False
    req["config"]["name"] = SRC_NAME + "_xyz"
    r = h.api(f"$JS.API.CONSUMER.CREATE.ORDERS.{SRC_NAME}_xyz", req)
    assert r["config"]["ack_policy"] == "none" and "durable_name" not in r["config"]


def test_flow_control_replies_ack_and_a_recreate_redelivers_the_rest() -> None:
    """Messages are removed from the work queue only when a flow-control reply confirms them;
    after the link drops (the deliver subject loses interest) and the hub sets the consumer up
    again under a new deliver subject, the unconfirmed ones come again, consumer sequence 1 on,
    delivery count 1 (the hub drops redeliveries, dc > 1)."""
    h = Harness(retention="workqueue")
    sub = h.listen("$JS.S.one")
    create_src(h, "$JS.S.one")
    for i in range(10):
        h.pub(f"orders.{i}", f"m{i}")
    msgs = data(sub)
    assert len(msgs) == 10
    # The heartbeat while messages are pending asks for their acks.
    h.advance(SEC + 1)
    fcs = fc_requests(sub)
    assert len(fcs) == 1
    fc_reply(h, fcs[0], 6, 6)  # the hub stored 1..6
    assert h.store.state().msgs == 4 and h.store.state().first_seq == 7
    c = h.stream.consumers[SRC_NAME]
    assert c.info()["ack_floor"]["stream_seq"] == 6 and c.info()["num_ack_pending"] == 4

    # Abrupt cut: the hub's subscription is gone; it creates the consumer again later with a
    # new deliver subject and its own resume point (which the durable ignores).
    sub.unsubscribe()
    h.clock.run_soon()
    h.advance(30 * SEC)  # no inactive threshold: the durable stays
    assert SRC_NAME in h.stream.consumers
    sub2 = h.listen("$JS.S.two")
    r = create_src(h, "$JS.S.two", start_seq=11)
    assert "error" not in r, r
    assert r["delivered"] == {"consumer_seq": 0, "stream_seq": 6}
    assert r["config"]["deliver_policy"] == "all" and "opt_start_seq" not in r["config"]
    again = data(sub2)
    assert [m.payload for m in again] == [b"m6", b"m7", b"m8", b"m9"]
    toks = [ack_tokens(m) for m in again]
    assert [int(t[5]) for t in toks] == [7, 8, 9, 10]  # stream sequences
    assert [int(t[6]) for t in toks] == [1, 2, 3, 4]  # consumer sequences start over
    assert {t[4] for t in toks} == {"1"}  # delivered once as far as the hub knows
    h.advance(SEC + 1)
    fcs = fc_requests(sub2)
    assert len(fcs) == 1
    fc_reply(h, fcs[0], 4, 10)
    assert h.store.state().msgs == 0


def test_flow_control_request_when_max_ack_pending_is_reached() -> None:
    h = Harness(retention="workqueue")
    sub = h.listen("$JS.S.one")
    req = src_request("$JS.S.one")
    req["config"]["max_ack_pending"] = 5
    r = h.api(f"$JS.API.CONSUMER.CREATE.ORDERS.{SRC_NAME}", req)
    assert r["config"]["max_ack_pending"] == 5
    for i in range(12):
        h.pub(f"orders.{i}", f"m{i}")
    assert len(data(sub)) == 5  # stopped at max_ack_pending
    fcs = fc_requests(sub)
    assert len(fcs) == 1  # and asked for acks right away, not at the next heartbeat
    fc_reply(h, fcs[0], 5, 5)
    assert len(data(sub)) == 10
    assert h.store.state().first_seq == 6


def test_unanswered_flow_control_request_is_forgotten_on_recreate() -> None:
    """A request sent to the subscription the cut removed never gets its reply; the consumer
    set up again must not wait for it (nor for the stalled-heartbeat round trip)."""
    h = Harness(retention="workqueue")
    sub = h.listen("$JS.S.one")
    create_src(h, "$JS.S.one")
    big = b"x" * 60_000
    for _ in range(60):
        h.stream.publish("orders.big", big)
    h.clock.run_soon()
    assert len(fc_requests(sub)) == 1
    n1 = len(data(sub))
    assert n1 < 60  # stalled on the flow-control window
    sub.unsubscribe()
    h.clock.run_soon()
    sub2 = h.listen("$JS.S.two")
    create_src(h, "$JS.S.two")
    assert len(data(sub2)) >= n1  # from the ack floor (1) again, without any reply


def test_recreated_durable_survives_a_restart(tmp_path) -> None:
    h = Harness(retention="workqueue", store_dir=str(tmp_path))
    sub = h.listen("$JS.S.one")
    create_src(h, "$JS.S.one")
    for i in range(4):
        h.pub(f"orders.{i}", f"m{i}")
    h.advance(SEC + 1)
    fc_reply(h, fc_requests(sub)[0], 2, 2)
    sub.unsubscribe()
    h.restart()
    c = h.stream.consumers[SRC_NAME]
    assert c.cfg.ack_policy == "flow_control" and c.info()["ack_floor"]["stream_seq"] == 2
    sub2 = h.listen("$JS.S.two")
    create_src(h, "$JS.S.two", start_seq=5)
    assert [m.payload for m in data(sub2)] == [b"m2", b"m3"]
