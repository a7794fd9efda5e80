"""The consumer API (create forms and actions, info, names, list, delete, pause, reset) and
config validation. Expected errors were checked side by side against nats-server 2.15.1."""

from __future__ import annotations

import pytest

from natsd.gotime import format_rfc3339 as format_time, parse_rfc3339 as parse_time
from natsd.jetstream.config.consumer_config import ConsumerConfig
from tests.unit.jetstream.test_consumer_harness import SEC, Harness, data

T = "io.nats.jetstream.api.v1."


def create(h: Harness, subject_tail: str, config: dict, stream: str = "ORDERS", **extra) -> dict:
    body = {"stream_name": stream, "config": config, **extra}
    return h.api(f"$JS.API.CONSUMER.{subject_tail}", body)


def err(r: dict) -> tuple[int, int, str]:
    e = r["error"]
    return e["code"], e["err_code"], e["description"]


def test_create_response_shape_and_defaults() -> None:
    h = Harness()
    h.pub("orders.1", "a")
    r = create(
        h,
        "CREATE.ORDERS.worker.orders.>",
        {
            "name": "worker",
            "durable_name": "worker",
            "deliver_policy": "all",
            "ack_policy": "explicit",
            "filter_subject": "orders.>",
            "replay_policy": "instant",
            "ack_wait": 0,
            "idle_heartbeat": 0,
            "inactive_threshold": 0,
        },
    )
    assert list(r)[:4] == ["type", "stream_name", "name", "created"]
    assert r["type"] == T + "consumer_create_response"
    cfg = r["config"]
    assert list(cfg) == [
        "durable_name",
        "name",
        "deliver_policy",
        "ack_policy",
        "ack_wait",
        "max_deliver",
        "filter_subject",
        "replay_policy",
        "max_waiting",
        "max_ack_pending",
        "num_replicas",
        "metadata",
    ]
    assert (cfg["ack_wait"], cfg["max_deliver"], cfg["max_waiting"], cfg["max_ack_pending"], cfg["num_replicas"]) == (
        30 * SEC,
        -1,
        512,
        1000,
        0,
    )
    assert set(cfg["metadata"]) == {"_nats.level", "_nats.req.level", "_nats.ver"}
    assert r["delivered"] == {"consumer_seq": 0, "stream_seq": 0} and r["ack_floor"] == {
        "consumer_seq": 0,
        "stream_seq": 0,
    }
    assert (r["num_ack_pending"], r["num_redelivered"], r["num_waiting"], r["num_pending"]) == (0, 0, 0, 1)
    assert "ts" in r and "push_bound" not in r


def test_ordered_consumer_config_echo() -> None:
    h = Harness()
    r = create(
        h,
        "CREATE.ORDERS",
        {
            "deliver_policy": "all",
            "ack_policy": "none",
            "ack_wait": 79200000000000,
            "max_deliver": 1,
            "filter_subject": "orders.>",
            "replay_policy": "instant",
            "flow_control": True,
            "idle_heartbeat": 5 * SEC,
            "deliver_subject": "_INBOX.x",
            "num_replicas": 1,
            "mem_storage": True,
            "inactive_threshold": 0,
        },
    )
    assert len(r["name"]) == 8
    cfg = r["config"]
    # The generated name is not echoed in config (as the reference's capture of nats.py's ordered consumer).
    assert list(cfg)[:11] == [
        "deliver_policy",
        "ack_policy",
        "ack_wait",
        "max_deliver",
        "filter_subject",
        "replay_policy",
        "flow_control",
        "deliver_subject",
        "idle_heartbeat",
        "inactive_threshold",
        "num_replicas",
    ]
    assert cfg["inactive_threshold"] == 5 * SEC and cfg["mem_storage"] is True and "max_ack_pending" not in cfg


@pytest.mark.parametrize(
    "tail,config,stream,expected",
    [
        (
            "CREATE.ORDERS",
            {"durable_name": "x"},
            "ORDERS",
            (400, 10020, "consumer expected to be ephemeral but a durable name was set in request"),
        ),
        (
            "CREATE.ORDERS.d3.orders.b",
            {"name": "d3", "filter_subject": "orders.a"},
            "ORDERS",
            (400, 10131, "Consumer create request did not match filtered subject from create subject"),
        ),
        (
            "CREATE.ORDERS.d3.orders.b",
            {"name": "d3", "filter_subjects": ["orders.a"]},
            "ORDERS",
            (400, 10137, "consumer with multiple subject filters cannot use subject based API"),
        ),
        ("CREATE.ORDERS.d3", {"name": "d3"}, "X", (400, 10056, "stream name in subject does not match request")),
        (
            "CREATE.ORDERS.d3",
            {"name": "d3", "durable_name": "zz"},
            "ORDERS",
            (400, 10017, "consumer name in subject does not match durable name in request"),
        ),
        (
            "DURABLE.CREATE.ORDERS.d4",
            {"ack_policy": "explicit"},
            "ORDERS",
            (400, 10018, "consumer expected to be durable but a durable name was not set"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"deliver_subject": "a.*"},
            "ORDERS",
            (400, 10079, "consumer deliver subject has wildcards"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"deliver_subject": "orders.loop"},
            "ORDERS",
            (400, 10081, "consumer deliver subject forms a cycle"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"deliver_subject": "dp", "max_waiting": 5},
            "ORDERS",
            (400, 10080, "consumer in push mode can not set max waiting"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"deliver_subject": "dp", "idle_heartbeat": 50_000_000},
            "ORDERS",
            (400, 10083, "consumer idle heartbeat needs to be >= 100ms"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"deliver_subject": "dp", "flow_control": True},
            "ORDERS",
            (400, 10108, "consumer with flow control also needs heartbeats"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"deliver_subject": "dp", "max_ack_pending": 5},
            "ORDERS",
            (400, 10082, "consumer requires ack policy for max ack pending"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"idle_heartbeat": SEC},
            "ORDERS",
            (400, 10088, "consumer idle heartbeat requires a push based consumer"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"flow_control": True},
            "ORDERS",
            (400, 10089, "consumer flow control requires a push based consumer"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"rate_limit_bps": 1000},
            "ORDERS",
            (400, 10086, "consumer in pull mode can not have rate limit set"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"deliver_policy": "by_start_sequence"},
            "ORDERS",
            (
                400,
                10094,
                "consumer delivery policy is deliver by start sequence, but optional start sequence is not set",
            ),
        ),
        (
            "CREATE.ORDERS.p1",
            {"opt_start_seq": 3},
            "ORDERS",
            (400, 10094, "consumer delivery policy is deliver all, but optional start sequence is also set"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"deliver_policy": "last_per_subject"},
            "ORDERS",
            (
                400,
                10094,
                "consumer delivery policy is deliver last per subject, but optional filter subject is not set",
            ),
        ),
        (
            "CREATE.ORDERS.p1",
            {"deliver_policy": "bogus"},
            "ORDERS",
            (400, 10025, 'invalid JSON: can not unmarshal "\\"bogus\\""'),
        ),
        (
            "CREATE.ORDERS.p1",
            {"backoff": [SEC, 2 * SEC], "max_deliver": 1},
            "ORDERS",
            (400, 10116, "max deliver is required to be > length of backoff values"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"filter_subject": "orders.a", "filter_subjects": ["orders.b"]},
            "ORDERS",
            (400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"filter_subjects": ["orders.>", "orders.a"]},
            "ORDERS",
            (400, 10138, "consumer subject filters cannot overlap"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"max_expires": 10},
            "ORDERS",
            (400, 10115, "consumer max request expires needs to be >= 1ms"),
        ),
        (
            "CREATE.ORDERS.p1",
            {"num_replicas": 3},
            "ORDERS",
            (500, 10074, "replicas > 1 not supported in non-clustered mode"),
        ),
        ("CREATE.ORDERS.p1", {"ack_wait": -5}, "ORDERS", (400, 10183, "consumer ack wait needs to be positive")),
        ("CREATE.NOPE.p1", {}, "NOPE", (404, 10059, "stream not found")),
    ],
)
def test_create_errors(tail: str, config: dict, stream: str, expected: tuple) -> None:
    h = Harness()
    r = create(h, tail, config, stream)
    assert r["type"] == T + "consumer_create_response"
    assert err(r) == expected


def test_create_update_actions() -> None:
    h = Harness()
    base = {"durable_name": "d1", "ack_policy": "explicit"}
    assert create(h, "CREATE.ORDERS.d1", base)["name"] == "d1"
    assert create(h, "CREATE.ORDERS.d1", base, action="create")["name"] == "d1"  # same config: fine
    assert err(create(h, "CREATE.ORDERS.d1", {**base, "ack_policy": "all"}, action="create")) == (
        400,
        10148,
        "consumer already exists",
    )
    assert err(create(h, "CREATE.ORDERS.d1", {**base, "ack_policy": "all"})) == (
        500,
        10012,
        "ack policy can not be updated",
    )
    r = create(h, "CREATE.ORDERS.d1", {**base, "max_deliver": 5, "description": "hi"})
    assert r["config"]["max_deliver"] == 5 and r["config"]["description"] == "hi"
    assert err(create(h, "CREATE.ORDERS.d2", {"name": "d2"}, action="update")) == (
        400,
        10149,
        "consumer does not exist",
    )


def test_workqueue_rules() -> None:
    h = Harness("WQ", ["wq.>"], retention="workqueue")
    c = lambda tail, cfg: create(h, tail, cfg, "WQ")  # noqa: E731
    assert err(c("CREATE.WQ.w1", {"ack_policy": "none"})) == (
        400,
        10084,
        "consumer in pull mode requires explicit ack policy on workqueue stream",
    )
    assert err(c("CREATE.WQ.w1", {"ack_policy": "all", "deliver_subject": "ddd"})) == (
        400,
        10098,
        "workqueue stream requires explicit ack",
    )
    assert err(c("CREATE.WQ.w1", {"ack_policy": "explicit", "deliver_policy": "new"})) == (
        400,
        10101,
        "consumer must be deliver all on workqueue stream",
    )
    assert c("CREATE.WQ.w1", {"ack_policy": "explicit"})["name"] == "w1"
    assert err(c("CREATE.WQ.w2", {"ack_policy": "explicit"})) == (
        400,
        10099,
        "multiple non-filtered consumers not allowed on workqueue stream",
    )
    assert err(c("CREATE.WQ.w2", {"ack_policy": "explicit", "filter_subject": "wq.a"})) == (
        400,
        10100,
        "filtered consumer not unique on workqueue stream",
    )


def test_info_names_list_delete() -> None:
    h = Harness()
    for n in ("b", "a", "c"):
        create(h, f"CREATE.ORDERS.{n}", {"durable_name": n, "ack_policy": "explicit"})
    r = h.api("$JS.API.CONSUMER.NAMES.ORDERS")
    assert r == {
        "type": T + "consumer_names_response",
        "total": 3,
        "offset": 0,
        "limit": 1024,
        "consumers": ["a", "b", "c"],
    }
    r = h.api("$JS.API.CONSUMER.NAMES.ORDERS", {"offset": 2})
    assert r["consumers"] == ["c"] and r["offset"] == 2
    r = h.api("$JS.API.CONSUMER.LIST.ORDERS")
    assert r["limit"] == 256 and [c["name"] for c in r["consumers"]] == ["a", "b", "c"]
    assert r["consumers"][0]["config"]["metadata"] == {"_nats.req.level": "0"}
    assert err(h.api("$JS.API.CONSUMER.INFO.ORDERS.nope")) == (404, 10014, "consumer not found")
    assert err(h.api("$JS.API.CONSUMER.INFO.NOPE.nope")) == (404, 10059, "stream not found")
    deleted = h.listen("$JS.EVENT.ADVISORY.CONSUMER.DELETED.ORDERS.a")
    assert h.api("$JS.API.CONSUMER.DELETE.ORDERS.a") == {"type": T + "consumer_delete_response", "success": True}
    assert err(h.api("$JS.API.CONSUMER.DELETE.ORDERS.a")) == (404, 10014, "consumer not found")
    adv = deleted.msgs[0].json()
    assert adv["type"] == "io.nats.jetstream.advisory.v1.consumer_action" and adv["action"] == "delete"


def test_pause_and_resume() -> None:
    h = Harness()
    h.pub("orders.1", "a")
    create(h, "CREATE.ORDERS.d1", {"durable_name": "d1", "ack_policy": "explicit"})
    until = format_time(h.clock.time_ns() + 10 * SEC)
    r = h.api("$JS.API.CONSUMER.PAUSE.ORDERS.d1", {"pause_until": until})
    assert r["type"] == T + "consumer_pause_response" and r["paused"] is True and r["pause_until"] == until
    assert r["pause_remaining"] == 10 * SEC
    info = h.api("$JS.API.CONSUMER.INFO.ORDERS.d1")
    assert info["paused"] is True and info["config"]["pause_until"] == until
    assert info["config"]["metadata"]["_nats.req.level"] == "1"
    inbox = h.pull("d1", {"batch": 1, "expires": 60 * SEC})
    assert data(inbox) == []
    h.advance(10 * SEC + 1)
    assert len(data(inbox)) == 1
    r = h.api("$JS.API.CONSUMER.PAUSE.ORDERS.d1", {"pause_until": "1970-01-01T00:00:00Z"})
    assert r == {"type": T + "consumer_pause_response", "paused": False, "pause_until": "1970-01-01T00:00:00Z"}
    r = h.api("$JS.API.CONSUMER.PAUSE.ORDERS.d1", b"")
    assert r["paused"] is False and r["pause_until"] == "0001-01-01T00:00:00Z"


def test_reset() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=5)
    c = h.consumer(durable_name="d1", ack_policy="explicit")
    msgs = data(h.pull("d1", {"batch": 3, "expires": SEC}))
    h.ack(msgs[0])
    inbox = h.listen("_INBOX.reset")
    h.ports.publish("$JS.API.CONSUMER.RESET.ORDERS.d1", "_INBOX.reset", None, b"")
    h.clock.run_soon()
    r = inbox.last_json()
    assert r["type"] == T + "consumer_reset_response" and r["reset_seq"] == 2
    assert (
        r["delivered"] == {"consumer_seq": 0, "stream_seq": 1} and r["num_ack_pending"] == 0 and r["num_pending"] == 4
    )
    h.ports.publish("$JS.API.CONSUMER.RESET.ORDERS.d1", "_INBOX.reset", None, b'{"seq": 4}')
    h.clock.run_soon()
    assert inbox.last_json()["reset_seq"] == 4 and c.t.sseq == 4
    h.consumer(durable_name="d2", ack_policy="explicit", deliver_policy="new")
    h.ports.publish("$JS.API.CONSUMER.RESET.ORDERS.d2", "_INBOX.reset", None, b'{"seq": 2}')
    h.clock.run_soon()
    assert err(inbox.last_json()) == (400, 10204, "invalid reset: not allowed")


def test_config_round_trip_and_times() -> None:
    js = {
        "durable_name": "x",
        "deliver_policy": "by_start_time",
        "opt_start_time": "2026-01-02T03:04:05.5+01:00",
        "ack_policy": "explicit",
        "backoff": [SEC],
        "metadata": {"b": "2", "a": "1"},
    }
    c = ConsumerConfig.from_json(js)
    assert c.opt_start_time == parse_time("2026-01-02T02:04:05.5Z")
    out = c.to_json()
    assert out["opt_start_time"] == "2026-01-02T02:04:05.5Z" and list(out["metadata"]) == ["a", "b"]
    assert ConsumerConfig.from_json(out) == c


def test_max_consumers() -> None:
    h = Harness(max_consumers=1)
    create(h, "CREATE.ORDERS.a", {"durable_name": "a"})
    assert err(create(h, "CREATE.ORDERS.b", {"durable_name": "b"})) == (400, 10026, "maximum consumers limit reached")
