"""router.route_run hands a run of requests over many subjects to a stream (an internal
subscription with a reply-run handler, ``rrun``) a stretch at a time, as ``rrun(None, stretch)``:
each stretch is the consecutive messages whose lone receiver is that subscription; the rest
(client receivers, nobody: no responders) is routed as before, in order, and a handler that
changes the subscriptions has the rest of the run matched again."""

from __future__ import annotations

import pytest

from natsd.protocol.events import OP_PUB, Run
from natsd.server.router import route_run

from .test_route_run_subjects import world

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]


def _run(names: list[str]) -> Run:
    replies = [b"_INBOX.r.%d" % i for i in range(len(names))]
    payloads = [b"p%d" % i for i in range(len(names))]
    return Run(OP_PUB, b"", [n.encode() for n in names], b"", 0, payloads, list(names), replies)


def _stream(ports, subject: str, log: list, on_run=None):
    def one(subj, reply, hdr, payload):
        log.append(("one", subj, reply))

    def rrun(subject, run):
        log.append(("run", subject, list(run.names), [r.decode() for r in run.replies], list(run.payloads)))
        if on_run is not None:
            on_run()

    return ports.subscribe(subject, one, rrun=rrun)


def test_stretches_captured_by_a_stream_are_handed_at_once_and_the_rest_in_order():
    acc, ports, conns, subs = world([(1, "c.*", None, b"9", 0)])
    log: list = []
    s = _stream(ports, "s.>", log)
    t = _stream(ports, "t.>", log)
    names = ["s.a", "s.b", "s.c", "c.x", "nobody", "s.d", "t.a", "t.b", "s.e"]
    route_run(acc, _run(names), conns[0])
    assert [e[:3] for e in log] == [
        ("run", None, ["s.a", "s.b", "s.c"]),
        ("run", None, ["s.d"]),
        ("run", None, ["t.a", "t.b"]),
        ("run", None, ["s.e"]),
    ]
    assert log[1][3:] == (["_INBOX.r.5"], [b"p5"]) and log[2][3] == ["_INBOX.r.6", "_INBOX.r.7"]
    assert (s.delivered, t.delivered, subs[0].delivered) == (5, 2, 1)
    out = bytes(conns[1].out)
    assert out == b"MSG c.x 9 _INBOX.r.3 2\r\np3\r\n"
    assert b"_INBOX.r.4" in bytes(conns[0].out)  # (no responders for "nobody")


def test_a_lone_client_subscriber_beside_the_stream_sends_messages_one_at_a_time():
    acc, ports, conns, subs = world([(1, "s.b", None, b"9", 0)])
    log: list = []
    _stream(ports, "s.>", log)
    route_run(acc, _run(["s.a", "s.b", "s.c"]), conns[0])
    assert [e[:3] for e in log] == [("run", None, ["s.a"]), ("one", "s.b", "_INBOX.r.1"), ("run", None, ["s.c"])]
    assert bytes(conns[1].out) == b"MSG s.b 9 _INBOX.r.1 2\r\np1\r\n"


def test_a_handler_that_changes_the_subscriptions_has_the_rest_matched_again():
    acc, ports, conns, subs = world([])
    log: list = []
    added = []

    def subscribe_client():
        if not added:
            added.append(_stream(ports, "s.late", log))

    _stream(ports, "s.*", log, on_run=subscribe_client)
    route_run(acc, _run(["s.a", "x.1", "s.late", "s.b"]), conns[0])
    # "s.late" now has two receivers: routed alone to both; then "s.b" a stretch again
    kinds = [e[:3] for e in log]
    assert kinds[0] == ("run", None, ["s.a"])
    assert sorted(kinds[1:3]) == [("one", "s.late", "_INBOX.r.2"), ("one", "s.late", "_INBOX.r.2")]
    assert kinds[3] == ("run", None, ["s.b"])
