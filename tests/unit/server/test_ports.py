"""ServerPorts (the JetStream seam) over an account, without sockets."""

from __future__ import annotations

from natsd.server.account import Account
from natsd.server.ports import ServerPorts


def make():
    acc = Account("A")
    return acc, ServerPorts(acc)


def test_internal_publish_reaches_internal_subscribers_synchronously():
    acc, ports = make()
    got = []
    ports.subscribe("orders.*", lambda s, r, h, p: got.append((s, r, h, p)))
    assert ports.publish("orders.1", "reply.x", None, b"one") == 1
    assert got == [("orders.1", "reply.x", None, b"one")]  # delivered before publish returned
    hdr = b"NATS/1.0\r\nNats-Msg-Id: 1\r\n\r\n"
    ports.publish("orders.2", "", hdr, b"two")
    assert got[-1] == ("orders.2", "", hdr, b"two")
    assert ports.publish("other", "", None, b"x") == 0


def test_has_interest_and_unsubscribe_idempotent():
    acc, ports = make()
    assert ports.account == "A"
    assert not ports.has_interest("$JS.API.INFO")
    sub = ports.subscribe("$JS.API.>", lambda *a: None)
    assert ports.has_interest("$JS.API.INFO")
    sub.unsubscribe()
    sub.unsubscribe()
    assert not ports.has_interest("$JS.API.INFO")
    assert acc.sublist.count() == 0


def test_queue_group_gets_one_delivery_and_rotates():
    _, ports = make()
    hits = {"a": 0, "b": 0}
    ports.subscribe("work", lambda *a: hits.__setitem__("a", hits["a"] + 1), queue="q")
    ports.subscribe("work", lambda *a: hits.__setitem__("b", hits["b"] + 1), queue="q")
    for _ in range(10):
        assert ports.publish("work", "", None, b"") == 1
    assert hits["a"] + hits["b"] == 10 and hits["a"] > 0 and hits["b"] > 0


def test_handler_may_publish_reentrantly_and_errors_are_contained():
    import logging

    records = []
    handler = logging.Handler()
    handler.emit = records.append  # direct, whatever the propagation settings of "natsd"
    logging.getLogger("natsd").addHandler(handler)
    _, ports = make()
    replies = []
    ports.subscribe("req", lambda s, r, h, p: ports.publish(r, "", None, p.upper()))
    ports.subscribe("inbox.1", lambda s, r, h, p: replies.append(p))

    def boom(*a):
        raise RuntimeError("handler bug")

    ports.subscribe("req", boom)
    try:
        ports.publish("req", "inbox.1", None, b"hi")
    finally:
        logging.getLogger("natsd").removeHandler(handler)
    assert replies == [b"HI"]
    assert any(r.exc_info and "handler bug" in str(r.exc_info[1]) for r in records)


def test_deliver_routes_on_one_subject_and_shows_another():
    _, ports = make()
    got = []
    ports.subscribe("_INBOX.pull", lambda s, r, h, p: got.append((s, r, p)))
    assert ports.deliver("_INBOX.pull", "orders.1", "$JS.ACK.x", None, b"m") == 1
    assert got == [("orders.1", "$JS.ACK.x", b"m")]


def test_on_interest_registration():
    acc, ports = make()
    seen = []
    reg = ports.on_interest(lambda s, added: seen.append((s, added)))
    acc.notify_interest("deliver.x", True)
    reg.unsubscribe()
    reg.unsubscribe()
    acc.notify_interest("deliver.x", False)
    assert seen == [("deliver.x", True)]
