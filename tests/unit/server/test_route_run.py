"""router.route_run: a run of reply-less messages (OP_PUB_RUN) is routed exactly as the same
messages one by one; runs to one internal subscription with a run handler go to it at once."""

from __future__ import annotations

import logging

import pytest

from natsd.protocol.events import OP_PUB, Run
from natsd.server.account import Account
from natsd.server.ports import ServerPorts
from natsd.server.router import route_run

pytestmark = pytest.mark.unit


def run(acc: Account, subjects: list[str], payloads: list[bytes] | None = None) -> None:
    payloads = payloads if payloads is not None else [s.encode() for s in subjects]
    route_run(acc, Run(OP_PUB, b"", [s.encode() for s in subjects], b"", 0, payloads, list(subjects)), None)


def setup():
    acc = Account("A")
    return acc, ServerPorts(acc), []


def test_a_run_to_one_run_handler_is_one_call_in_order():
    acc, ports, log = setup()
    sub = ports.subscribe(
        "$JS.ACK.>",
        lambda *a: log.append(("one", a[0])),
        many=lambda r: log.append(("many", list(r.names), list(r.payloads))),
    )
    subjects = ["$JS.ACK.S.C.1.%d.%d.0.0" % (i, i) for i in range(1, 6)]
    run(acc, subjects, [b"+ACK"] * 5)
    assert log == [("many", subjects, [b"+ACK"] * 5)]
    assert sub.delivered == 5


def test_other_receivers_keep_their_place_in_the_run():
    acc, ports, log = setup()
    ports.subscribe("ack.>", lambda *a: log.append(("one", a[0])), many=lambda r: log.append(("many", list(r.names))))
    ports.subscribe("other.*", lambda subj, reply, hdr, payload: log.append(("plain", subj, reply, hdr, payload)))
    run(acc, ["ack.1", "ack.2", "other.x", "nobody.here", "ack.3", "other.y", "ack.4"])
    assert log == [
        ("many", ["ack.1", "ack.2"]),
        ("plain", "other.x", "", None, b"other.x"),
        ("many", ["ack.3"]),
        ("plain", "other.y", "", None, b"other.y"),
        ("many", ["ack.4"]),
    ]


def test_without_a_run_handler_every_message_goes_to_the_handler():
    acc, ports, log = setup()
    sub = ports.subscribe("a.*", lambda subj, *rest: log.append(subj))
    run(acc, ["a.1", "a.2", "a.3"])
    assert log == ["a.1", "a.2", "a.3"] and sub.delivered == 3


def test_two_receivers_or_a_queue_group_take_the_per_message_path():
    acc, ports, log = setup()
    ports.subscribe("a.*", lambda subj, *rest: log.append(("x", subj)), many=lambda r: log.append(("xm", r.names)))
    ports.subscribe("a.>", lambda subj, *rest: log.append(("y", subj)))
    run(acc, ["a.1", "a.2"])
    assert sorted(log) == [("x", "a.1"), ("x", "a.2"), ("y", "a.1"), ("y", "a.2")]
    acc, ports, log = setup()
    ports.subscribe("q.*", lambda subj, *rest: log.append(subj), queue="g", many=lambda r: log.append(r.names))
    run(acc, ["q.1", "q.2"])
    assert log == ["q.1", "q.2"]


def test_subscriptions_made_by_a_handler_apply_to_the_rest_of_the_run():
    # As if published one by one: the handler of ack.1 subscribes to later.*, so later.1 (matched
    # to nobody when the run was first matched) must reach the new subscription.
    acc, ports, log = setup()
    made = []

    def many(run):
        log.append(("many", list(run.names)))
        if not made:
            made.append(ports.subscribe("later.*", lambda subj, *rest: log.append(("later", subj))))

    ports.subscribe("ack.>", lambda *a: None, many=many)
    run(acc, ["ack.1", "later.1", "ack.2", "later.2"])
    assert log == [("many", ["ack.1"]), ("later", "later.1"), ("many", ["ack.2"]), ("later", "later.2")]
    # and an unsubscribe by a plain handler stops the rest of the run reaching it
    acc, ports, log = setup()
    subs = {}

    def once(subj, *rest):
        log.append(subj)
        subs["b"].unsubscribe()

    ports.subscribe("a.*", once)
    subs["b"] = ports.subscribe("b.*", lambda subj, *rest: log.append(subj), many=lambda r: log.append(list(r.names)))
    run(acc, ["a.1", "b.1", "b.2"])
    assert log == ["a.1"]


def test_a_failing_run_handler_is_logged_and_the_run_goes_on(caplog):
    acc, ports, log = setup()

    def boom(run):
        raise RuntimeError("boom")

    ports.subscribe("bad.>", lambda *a: None, many=boom)
    ports.subscribe("good.*", lambda subj, *rest: log.append(subj))
    with caplog.at_level(logging.ERROR, logger="natsd"):
        run(acc, ["bad.1", "bad.2", "good.1"])
    assert log == ["good.1"]
    assert "internal subscription handler" in caplog.text
