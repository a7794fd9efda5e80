"""Dead-letter subjects (natsd.dead_letter): the copy, its headers, exactly once on work queues."""

from __future__ import annotations

import pytest

SEC = 1_000_000_000


def _setup(env, retention="workqueue", max_deliver=2):
    env.create("JOBS", subjects=["jobs.>"], retention=retention)
    env.create("DLQ", subjects=["dlq.>"])
    r = env.api(
        "$JS.API.CONSUMER.CREATE.JOBS.W",
        {
            "stream_name": "JOBS",
            "config": {
                "durable_name": "W",
                "ack_policy": "explicit",
                "ack_wait": SEC,
                "max_deliver": max_deliver,
                "metadata": {"natsd.dead_letter": "dlq.jobs"},
            },
        },
    )
    assert "error" not in r, r


def _fetch(env, n=1):
    msgs = env.request_msgs("$JS.API.CONSUMER.MSG.NEXT.JOBS.W", {"batch": n, "no_wait": True})
    return [m for m in msgs if m.status is None]


def _dlq(env):
    st = env.api("$JS.API.STREAM.INFO.DLQ")["state"]
    out = []
    for seq in range(st["first_seq"], st["last_seq"] + 1):
        r = env.api("$JS.API.STREAM.MSG.GET.DLQ", {"seq": seq})
        if "message" in r:
            out.append(r["message"])
    return out


def _headers(m) -> dict:
    import base64

    raw = base64.b64decode(m["hdrs"]).decode()
    return dict(line.split(": ", 1) for line in raw.split("\r\n")[1:] if ": " in line)


def _state(env, name):
    return env.api(f"$JS.API.STREAM.INFO.{name}")["state"]


@pytest.mark.parametrize("retention", ["workqueue", "interest", "limits"])
def test_max_deliveries_copy_is_stored_once_with_headers(env, retention) -> None:
    _setup(env, retention)
    adv = env.ports.client_subscribe("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>")
    env.pub("jobs.1", b'{"n":1}', headers={"X-Trace": "t1", "Nats-Msg-Id": "orig-1"})
    for _ in range(2):
        assert len(_fetch(env)) == 1
        env.clock.advance(2 * SEC)
        env.clock.run_soon()
    env.clock.advance(2 * SEC)
    env.clock.run_soon()
    assert _fetch(env) == []  # max_deliver reached
    env.clock.run_soon()
    got = _dlq(env)
    assert len(got) == 1
    h = _headers(got[0])
    assert got[0]["subject"] == "dlq.jobs"
    assert h["X-Trace"] == "t1" and h["Natsd-Dlq-Msg-Id"] == "orig-1"
    assert (h["Nats-Stream"], h["Nats-Subject"], h["Nats-Sequence"], h["Nats-Consumer"]) == ("JOBS", "jobs.1", "1", "W")
    assert (h["Natsd-Dlq-Reason"], h["Natsd-Dlq-Deliveries"]) == ("MaxDeliveries", "2")
    assert h["Natsd-Dlq-Last-Delivery"].endswith("Z")
    assert h["Nats-Msg-Id"] == "natsd-dlq.JOBS.W.1"
    assert adv.msgs and adv.last_json()["stream_seq"] == 1  # the reference's advisory still goes
    # The original: removed on work-queue/interest streams once the copy is stored; kept on limits.
    assert _state(env, "JOBS")["messages"] == (1 if retention == "limits" else 0)


@pytest.mark.parametrize("retention", ["workqueue", "limits"])
def test_term_with_reason(env, retention) -> None:
    _setup(env, retention, max_deliver=5)
    adv = env.ports.client_subscribe("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.>")
    env.pub("jobs.2", b"payload")
    m = _fetch(env)[0]
    env.ports.publish(m.reply, "", None, b"+TERM bad input: line 1")
    env.clock.run_soon()
    env.clock.run_soon()
    got = _dlq(env)
    assert len(got) == 1
    h = _headers(got[0])
    assert (h["Natsd-Dlq-Reason"], h["Natsd-Dlq-Term-Reason"], h["Natsd-Dlq-Deliveries"]) == (
        "Terminated",
        "bad input: line 1",
        "1",
    )
    assert adv.last_json()["reason"] == "bad input: line 1"
    assert _state(env, "JOBS")["messages"] == (0 if retention == "workqueue" else 1)
    info = env.api("$JS.API.CONSUMER.INFO.JOBS.W")
    assert info["num_ack_pending"] == 0


def test_copy_not_stored_keeps_the_original(env) -> None:
    # No stream captures the dead-letter subject: nothing answers, the work-queue original stays.
    env.create("JOBS", subjects=["jobs.>"], retention="workqueue")
    env.api(
        "$JS.API.CONSUMER.CREATE.JOBS.W",
        {
            "stream_name": "JOBS",
            "config": {
                "durable_name": "W",
                "ack_policy": "explicit",
                "ack_wait": SEC,
                "max_deliver": 1,
                "metadata": {"natsd.dead_letter": "nowhere.jobs"},
            },
        },
    )
    seen = env.ports.client_subscribe("nowhere.jobs")
    env.pub("jobs.1", b"x")
    assert len(_fetch(env)) == 1
    env.clock.advance(2 * SEC)
    env.clock.run_soon()
    env.clock.run_soon()
    assert len(seen.msgs) == 1  # published (a plain subscriber sees it)
    assert _state(env, "JOBS")["messages"] == 1


def test_duplicate_publish_after_restart_is_deduplicated(env) -> None:
    # The copy was stored but the original not yet removed (a crash): at start the consumer
    # publishes again and the dead-letter stream's duplicate window keeps one copy.
    _setup(env, "workqueue", max_deliver=1)
    env.pub("jobs.1", b"x")
    assert len(_fetch(env)) == 1
    dl = env.account.streams["JOBS"].consumers["W"].dead_letters
    # Make the PubAck handler forget its work: the original stays, as after a crash.
    dl._on_puback = lambda *a: None  # type: ignore[method-assign]
    dl.stop()
    env.clock.advance(2 * SEC)
    env.clock.run_soon()
    env.clock.run_soon()
    assert len(_dlq(env)) == 1 and _state(env, "JOBS")["messages"] == 1
    env.restart()
    env.clock.run_soon()
    env.clock.run_soon()
    assert len(_dlq(env)) == 1  # the second publish was a duplicate
    assert _state(env, "JOBS")["messages"] == 0


def test_update_switches_dead_letter_off(env) -> None:
    _setup(env, "limits", max_deliver=1)
    r = env.api(
        "$JS.API.CONSUMER.CREATE.JOBS.W",
        {
            "stream_name": "JOBS",
            "action": "update",
            "config": {"durable_name": "W", "ack_policy": "explicit", "ack_wait": SEC, "max_deliver": 1},
        },
    )
    assert "error" not in r, r
    assert env.account.streams["JOBS"].consumers["W"].dead_letters is None
    env.pub("jobs.1", b"x")
    assert len(_fetch(env)) == 1
    env.clock.advance(2 * SEC)
    env.clock.run_soon()
    assert _dlq(env) == []


@pytest.mark.parametrize("seed", range(6))
def test_random_acks_naks_terms_and_restarts_dead_letter_each_message_at_most_once(env, seed) -> None:
    """A seeded mix of acks, naks, terms, silent drops (ack wait runs out) and restarts on a
    work-queue stream with max_deliver 3: at the end every message is either acked away, still
    in the queue, or dead-lettered, exactly one of the three, and never copied twice."""
    import random

    rng = random.Random(seed)
    _setup(env, "workqueue", max_deliver=3)
    n = 40
    for i in range(n):
        env.pub(f"jobs.{i}", str(i).encode())
    acked: set[int] = set()
    for step in range(120):
        msgs = _fetch(env, rng.randrange(1, 6))
        for m in msgs:
            seq = int(m.reply.split(".")[5])
            r = rng.random()
            if r < 0.25:
                env.ports.publish(m.reply, "", None, b"+ACK")
                acked.add(seq)
            elif r < 0.45:
                env.ports.publish(m.reply, "", None, b"-NAK")
            elif r < 0.55:
                env.ports.publish(m.reply, "", None, b"+TERM r" + str(step).encode())
            # else: dropped, the ack wait runs out
        env.clock.run_soon()
        env.clock.advance(rng.choice([0, SEC // 2, 2 * SEC]))
        env.clock.run_soon()
        if rng.random() < 0.05:
            env.restart()
            env.clock.run_soon()
    env.clock.advance(10 * SEC)
    env.clock.run_soon()
    for _ in range(5):  # drain: the rest reach max_deliver
        _fetch(env, 50)  # delivered again, never acked
        env.clock.advance(2 * SEC)
        env.clock.run_soon()
    env.clock.run_soon()
    copies = [int(_headers(m)["Nats-Sequence"]) for m in _dlq(env)]
    assert len(copies) == len(set(copies)), sorted(copies)
    st = _state(env, "JOBS")
    left = set()
    for seq in range(st["first_seq"], st["last_seq"] + 1):
        r = env.api("$JS.API.STREAM.MSG.GET.JOBS", {"seq": seq})
        if "message" in r:
            left.add(seq)
    assert not (set(copies) & acked), "an acked message was dead-lettered"
    assert not (set(copies) & left), "a dead-lettered message is still in the work queue"
    assert not (acked & left)
    assert acked | set(copies) | left == set(range(1, n + 1)), "a message was lost"
    assert copies  # the mix does reach max_deliver / terms
