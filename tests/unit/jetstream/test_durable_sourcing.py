"""natsd as the *sourcing* side of durable sourcing (API level 4), without sockets: the consumer
it asks an origin for carries ``sourcing: true`` under a stable name, a work-queue origin makes
it a durable acked by flow control, our flow-control replies confirm what we stored, a gap in the
deliveries sets the consumer up again, and an origin without level 4 gets the fallback request."""

from __future__ import annotations

import base64

import pytest

from natsd.jetstream import wire
from natsd.jetstream.config.models import SECOND

pytestmark = pytest.mark.unit


def consumers(env, stream):
    return env.api(f"$JS.API.CONSUMER.LIST.{stream}")["consumers"]


def state(env, stream):
    return env.api(f"$JS.API.STREAM.INFO.{stream}")["state"]


def bodies(env, stream):
    st = state(env, stream)
    out = []
    for seq in range(st["first_seq"], st["last_seq"] + 1):
        m = env.api(f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq})
        if "message" in m:
            out.append(base64.b64decode(m["message"]["data"]))
    return out


def settle(env, seconds: float = 3) -> None:
    for _ in range(int(seconds * 10)):
        env.clock.advance(SECOND // 10)


def test_work_queue_origin_is_drained_through_a_durable_acked_by_flow_control(env):
    env.create("Q", storage="file", retention="workqueue")
    for i in range(20):
        env.pub("q.a", b"%d" % i)
    env.create("S", storage="file", subjects=["s.>"], sources=[{"name": "Q"}])
    settle(env)
    (c,) = consumers(env, "Q")
    assert c["name"].startswith("JS_SRC_") and "_" not in c["name"][len("JS_SRC_") :]
    cfg = c["config"]
    assert (cfg["durable_name"], cfg["ack_policy"], cfg["sourcing"]) == (c["name"], "flow_control", True)
    assert cfg["metadata"]["_nats.src.stream"] == "S"
    # Stored at the target, then confirmed by a flow-control reply: the origin empties.
    assert state(env, "S")["messages"] == 20
    assert state(env, "Q")["messages"] == 0
    for i in range(20, 30):
        env.pub("q.a", b"%d" % i)
    settle(env)
    assert state(env, "Q")["messages"] == 0
    assert bodies(env, "S") == [b"%d" % i for i in range(30)]


def test_the_durable_outlives_a_restart_and_is_deleted_with_the_stream(env):
    env.create("Q", storage="file", retention="workqueue")
    env.create("S", storage="file", subjects=["s.>"], sources=[{"name": "Q"}])
    settle(env)
    name = consumers(env, "Q")[0]["name"]
    env.restart()
    assert [c["name"] for c in consumers(env, "Q")] == [name]  # kept over the restart
    for i in range(5):
        env.pub("q.a", b"%d" % i)
    settle(env)
    assert [c["name"] for c in consumers(env, "Q")] == [name]  # the same one set up again
    assert bodies(env, "S") == [b"%d" % i for i in range(5)] and state(env, "Q")["messages"] == 0
    env.api("$JS.API.STREAM.DELETE.S")
    settle(env, 0.5)
    assert consumers(env, "Q") == []


def test_a_gap_in_the_deliveries_sets_the_consumer_up_again(env, monkeypatch):
    """A delivery lost on the way (a link cut abruptly): the next one shows a gap in the consumer
    sequence; the durable is set up again from its ack floor and nothing is lost or doubled."""
    env.create("Q", storage="file", retention="workqueue")
    env.create("S", storage="file", subjects=["s.>"], sources=[{"name": "Q"}])
    settle(env)
    link = env.account.streams["S"]._links[0]
    real = link._on_msg
    dropped = []

    def lossy(subject, reply, hdr, payload):
        if payload == b"3" and not dropped:
            dropped.append(payload)
            return
        real(subject, reply, hdr, payload)

    monkeypatch.setattr(link, "_on_msg", lossy)
    # (the deliver subscription holds the bound method: set the consumer up again to use ours)
    link._create_consumer()
    settle(env, 0.5)
    for i in range(10):
        env.pub("q.a", b"%d" % i)
    settle(env)
    assert dropped == [b"3"]
    assert bodies(env, "S") == [b"%d" % i for i in range(10)]
    assert state(env, "Q")["messages"] == 0


def test_flow_control_reply_names_the_last_sequences_processed(env):
    env.create("Q", storage="file", retention="workqueue")
    env.create("S", storage="file", subjects=["s.>"], sources=[{"name": "Q"}])
    settle(env)
    for i in range(4):
        env.pub("q.a", b"%d" % i)
    env.clock.run_soon()
    link = env.account.streams["S"]._links[0]
    sent = []
    real = env.account.ports.publish

    def spy(subject, reply, hdr, payload):
        sent.append((subject, hdr))
        return real(subject, reply, hdr, payload)

    env.account.ports.publish = spy
    try:
        link._on_msg(link._deliver, "$JS.FC.Q.x.abcd", b"NATS/1.0 100 FlowControl Request\r\n\r\n", b"")
        assert not [s for s in sent if s[0] == "$JS.FC.Q.x.abcd"]  # not before the turn's write
        env.clock.run_soon()
    finally:
        env.account.ports.publish = real
    (hdr,) = [h for s, h in sent if s == "$JS.FC.Q.x.abcd"]
    assert hdr == b"NATS/1.0\r\nNats-Last-Consumer: %d\r\nNats-Last-Stream: 4\r\n\r\n" % link.dseq


def test_an_origin_without_level_4_gets_the_fallback_request(env, monkeypatch):
    """An origin refusing the level-4 request (10185) is asked again without ``sourcing`` and
    with a unique name: an ephemeral ack-none consumer, as the reference falls back."""
    monkeypatch.setattr(wire, "JS_API_LEVEL", 3)
    env.create("Q", storage="file", retention="workqueue")
    env.create("S", storage="file", subjects=["s.>"], sources=[{"name": "Q"}])
    settle(env)
    (c,) = consumers(env, "Q")
    assert c["name"].startswith("JS_SRC_") and c["name"].count("_") == 3
    assert c["config"]["ack_policy"] == "none" and not c["config"].get("sourcing")
    env.pub("q.a", b"x")
    settle(env)
    assert bodies(env, "S") == [b"x"]
    assert "error" not in env.api("$JS.API.STREAM.INFO.S")["sources"][0]
