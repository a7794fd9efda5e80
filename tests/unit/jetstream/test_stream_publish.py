"""The stream publish path without sockets: PubAcks, dedupe, expected-* headers, rollups, TTL,
limits and discard policies, max_age expiry driven by the ManualClock."""

from __future__ import annotations

import json

import pytest

from natsd.jetstream.config.models import SECOND
from tests.helpers.fakeports import JsEnv

pytestmark = pytest.mark.unit


def mk(env: JsEnv, name: str = "ORDERS", **cfg) -> None:
    cfg.setdefault("storage", "memory")
    env.create(name, **cfg)


def test_puback_bytes_exactly_as_reference(env):
    mk(env)
    assert env.raw_pub_reply("orders.1", b"hello") == b'{"stream":"ORDERS","seq":1}'
    assert env.raw_pub_reply("orders.2", b"hello") == b'{"stream":"ORDERS","seq":2}'


def test_pubacks_are_sent_only_after_the_turn_flush(env):
    mk(env)
    stream = env.account.streams["ORDERS"]
    flushed: list[int] = []
    orig = stream.store.flush
    stream.store.flush = lambda: (flushed.append(len(env.ports.published)), orig())[1]
    replies = [env.ports.request("orders.x", b"m") for _ in range(5)]
    # nothing was acknowledged yet: the flush runs at the end of the turn
    assert not any(env.replies(r) for r in replies)
    env.clock.run_soon()
    assert len(flushed) == 1  # one flush for the whole batch
    assert [env.replies(r)[0].json()["seq"] for r in replies] == [1, 2, 3, 4, 5]


def test_duplicate_msg_id_within_window(env):
    mk(env, duplicate_window=2 * SECOND)
    assert env.pub("orders.1", b"a", {"Nats-Msg-Id": "abc"}) == {"stream": "ORDERS", "seq": 1}
    assert (
        env.raw_pub_reply("orders.1", b"a", b"NATS/1.0\r\nNats-Msg-Id: abc\r\n\r\n")
        == b'{"stream":"ORDERS","seq":1,"duplicate": true}'
    )
    assert env.account.streams["ORDERS"].store.state().msgs == 1
    env.clock.advance(3 * SECOND)  # the window has passed: the id is accepted again
    assert env.pub("orders.1", b"a", {"Nats-Msg-Id": "abc"}) == {"stream": "ORDERS", "seq": 2}


def test_dedupe_survives_restart(tmp_path):
    env = JsEnv(str(tmp_path))
    try:
        env.create("ORDERS", storage="memory")
        env.pub("orders.1", b"a", {"Nats-Msg-Id": "abc"})
        stream = env.account.streams["ORDERS"]
        stream._rebuild_dedupe()  # what start() does after a recovery
        assert env.pub("orders.1", b"a", {"Nats-Msg-Id": "abc"})["duplicate"] is True
        assert stream.lmsg_id == "abc"
    finally:
        env.stop()


def test_expected_stream(env):
    mk(env)
    assert env.pub("orders.1", b"x", {"Nats-Expected-Stream": "NOPE"}) == {
        "error": {"code": 400, "err_code": 10060, "description": "expected stream does not match"},
        "stream": "ORDERS",
        "seq": 0,
    }
    assert env.pub("orders.1", b"x", {"Nats-Expected-Stream": "ORDERS"})["seq"] == 1


def test_expected_last_sequence(env):
    mk(env)
    env.pub("orders.1")
    env.pub("orders.1")
    assert (
        env.raw_pub_reply("orders.1", b"x", b"NATS/1.0\r\nNats-Expected-Last-Sequence: 1\r\n\r\n")
        == b'{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 2"},"stream":"ORDERS","seq":0}'
    )
    assert env.pub("orders.1", b"x", {"Nats-Expected-Last-Sequence": "2"})["seq"] == 3


def test_expected_last_subject_sequence_and_subject(env):
    mk(env)
    assert env.pub("orders.b", b"x", {"Nats-Expected-Last-Subject-Sequence": "0"})["seq"] == 1
    r = env.pub("orders.b", b"x", {"Nats-Expected-Last-Subject-Sequence": "0"})
    assert r["error"]["err_code"] == 10071 and r["error"]["description"] == "wrong last sequence: 1"
    r = env.pub("orders.c", b"x", {"Nats-Expected-Last-Subject-Sequence-Subject": "orders.b"})
    assert r["error"] == {
        "code": 400,
        "err_code": 10193,
        "description": "missing sequence for expected last sequence per subject",
    }
    ok = env.pub(
        "orders.c",
        b"x",
        {"Nats-Expected-Last-Subject-Sequence": "1", "Nats-Expected-Last-Subject-Sequence-Subject": "orders.*"},
    )
    assert ok == {"stream": "ORDERS", "seq": 2}


def test_expected_last_msg_id(env):
    mk(env)
    env.pub("orders.a", b"x", {"Nats-Msg-Id": "one"})
    r = env.pub("orders.a", b"x", {"Nats-Expected-Last-Msg-Id": "zzz"})
    assert r["error"] == {"code": 400, "err_code": 10070, "description": "wrong last msg ID: one"}
    assert env.pub("orders.a", b"x", {"Nats-Expected-Last-Msg-Id": "one"})["seq"] == 2


def test_rollup_not_permitted_and_invalid(env):
    mk(env)
    r = env.pub("orders.a", b"x", {"Nats-Rollup": "sub"})
    assert r["error"] == {"code": 500, "err_code": 10111, "description": "rollup not permitted"}
    mk(env, "R", allow_rollup_hdrs=True)
    r = env.pub("r.a", b"x", {"Nats-Rollup": "bogus"})
    assert r["error"]["description"] == 'rollup value invalid: "bogus"'


def test_rollup_sub_and_all(env):
    mk(env, allow_rollup_hdrs=True)
    for s in ("orders.a", "orders.a", "orders.b", "orders.b"):
        env.pub(s)
    env.pub("orders.a", b"new", {"Nats-Rollup": "sub"})
    st = env.account.streams["ORDERS"].store.state()
    assert st.msgs == 3  # a: only the rollup message; b: both
    env.pub("orders.b", b"all", {"Nats-Rollup": "all"})
    st = env.account.streams["ORDERS"].store.state()
    assert st.msgs == 1 and st.last_seq == 6


def test_ttl_rules(env):
    mk(env)
    assert env.pub("orders.a", b"x", {"Nats-TTL": "5s"})["error"]["err_code"] == 10166
    assert env.pub("orders.a", b"x", {"Nats-TTL": "abc"})["error"]["err_code"] == 10165
    mk(env, "T", allow_msg_ttl=True)
    assert env.pub("t.a", b"x", {"Nats-TTL": "500ms"})["error"]["err_code"] == 10165
    assert env.pub("t.a", b"x", {"Nats-TTL": "2s"})["seq"] == 1
    assert env.pub("t.a", b"x", {"Nats-TTL": "never"})["seq"] == 2
    env.clock.advance(3 * SECOND)
    st = env.account.streams["T"].store.state()
    assert st.msgs == 1 and st.first_seq == 2


def test_max_age_expiry_without_sleeping(env):
    mk(env, max_age=SECOND)
    env.pub("orders.a")
    env.clock.advance(SECOND // 2)
    env.pub("orders.b")
    env.clock.advance(SECOND // 2 + 1)
    st = env.account.streams["ORDERS"].store.state()
    assert st.msgs == 1 and st.first_seq == 2
    env.clock.advance(SECOND)
    assert env.account.streams["ORDERS"].store.state().msgs == 0


def test_subject_delete_marker_on_max_age(env):
    mk(env, max_age=SECOND, subject_delete_marker_ttl=SECOND)
    env.pub("orders.a", b"payload")
    env.clock.advance(SECOND + 1)
    stream = env.account.streams["ORDERS"]
    sm = stream.store.load_last_msg("orders.a")
    assert sm.seq == 2 and sm.msg == b""
    assert b"Nats-Marker-Reason: MaxAge\r\n" in sm.hdr and b"Nats-TTL: 1s\r\n" in sm.hdr
    # the marker expires by itself and does not create another marker
    env.clock.advance(2 * SECOND)
    assert stream.store.state().msgs == 0
    assert stream.store.state().last_seq == 2


def test_delete_markers_alive_at_a_restart_leave_no_marker_of_their_own(env):
    # the stream's Expiry finds the markers still alive when it starts again (recover_markers)
    mk(env, storage="file", max_age=SECOND, subject_delete_marker_ttl=SECOND)
    env.pub("orders.a", b"payload")
    env.clock.advance(SECOND + 1)
    assert env.account.streams["ORDERS"].store.state().last_seq == 2  # the marker
    env.restart()
    stream = env.account.streams["ORDERS"]
    env.clock.advance(2 * SECOND)
    assert stream.store.state().msgs == 0
    assert stream.store.state().last_seq == 2


def test_a_delete_marker_reaches_consumers(env):
    mk(env, max_age=SECOND, subject_delete_marker_ttl=SECOND)
    env.api(
        "$JS.API.CONSUMER.CREATE.ORDERS.C",
        {"stream_name": "ORDERS", "config": {"durable_name": "C", "deliver_subject": "out", "ack_policy": "none"}},
    )
    inbox = env.ports.client_subscribe("out")
    env.pub("orders.a", b"payload")
    env.clock.run_soon()
    env.clock.advance(SECOND + 1)
    env.clock.run_soon()
    assert [m.payload for m in inbox.msgs] == [b"payload", b""]
    assert b"Nats-Marker-Reason: MaxAge\r\n" in inbox.msgs[1].hdr


def test_max_msg_size(env):
    mk(env, max_msg_size=4)
    assert env.pub("orders.a", b"12345")["error"] == {
        "code": 400,
        "err_code": 10054,
        "description": "message size exceeds maximum allowed",
    }
    assert env.pub("orders.a", b"1234")["seq"] == 1


def test_discard_new_limits(env):
    mk(env, max_msgs=2, discard="new")
    env.pub("orders.a")
    env.pub("orders.a")
    r = env.pub("orders.a")
    assert r["error"] == {"code": 503, "err_code": 10077, "description": "maximum messages exceeded"}
    mk(env, "B", max_bytes=100, discard="new")
    r = None
    for _ in range(10):
        r = env.pub("b.a", b"x" * 30)
        if "error" in r:
            break
    assert r["error"]["description"] == "maximum bytes exceeded"


def test_discard_new_per_subject(env):
    mk(env, max_msgs_per_subject=1, discard="new", discard_new_per_subject=True)
    env.pub("orders.a")
    r = env.pub("orders.a")
    assert r["error"]["description"] == "maximum messages per subject exceeded"
    assert env.pub("orders.b")["seq"] == 2


def test_discard_old_limits(env):
    mk(env, max_msgs=3, max_msgs_per_subject=2)
    for _ in range(3):
        env.pub("orders.a")
    st = env.account.streams["ORDERS"].store.state()
    assert st.msgs == 2 and st.first_seq == 2
    for s in ("orders.b", "orders.c"):
        env.pub(s)
    st = env.account.streams["ORDERS"].store.state()
    assert st.msgs == 3 and st.first_seq == 3


def test_sealed_stream_rejects(env):
    mk(env)
    env.pub("orders.a")
    out = env.api(
        "$JS.API.STREAM.UPDATE.ORDERS",
        {"name": "ORDERS", "subjects": ["orders.>"], "storage": "memory", "sealed": True},
    )
    assert out["config"]["sealed"] is True and out["config"]["deny_purge"] is True
    assert env.pub("orders.a")["error"] == {
        "code": 400,
        "err_code": 10109,
        "description": "invalid operation on sealed stream",
    }


def test_no_ack_stream_never_replies(env):
    mk(env, no_ack=True)
    assert env.pub("orders.a") is None
    assert env.pub("orders.a", b"x", {"Nats-Expected-Stream": "NOPE"}) is None
    assert env.account.streams["ORDERS"].store.state().msgs == 1


def test_interest_stream_without_consumers_acks_but_does_not_store(env):
    mk(env, retention="interest")
    assert env.pub("orders.a") == {"stream": "ORDERS", "seq": 1}
    st = env.account.streams["ORDERS"].store.state()
    assert st.msgs == 0 and st.last_seq == 1


class _FakeConsumer:
    def __init__(self, name: str, filt: str = "") -> None:
        from natsd.jetstream.config.consumer_config import ConsumerConfig

        self.name = name
        self.config = ConsumerConfig(filter_subject=filt)  # a plain (not internal) consumer
        self.filters = [filt] if filt else []
        self.acked: set[int] = set()
        self.new: list[int] = []
        self.purged: list[int] = []
        self.removed: list[int] = []
        self.closed = False
        self.waiting = True  # as a push consumer, or a pull consumer with requests waiting

    def filter_matches(self, subject: str) -> bool:
        from natsd.subjects.tokens import subject_matches

        return not self.filters or any(subject_matches(f, subject) for f in self.filters)

    def is_acked(self, seq: int) -> bool:
        return seq in self.acked

    def on_new_messages(self, last_seq: int) -> None:
        self.new.append(last_seq)

    def wants_new(self) -> bool:
        return self.waiting

    def on_purge(self, first_seq: int) -> None:
        self.purged.append(first_seq)

    def on_msg_removed(self, seq: int, subject: str | None = None) -> None:
        self.removed.append(seq)

    def stop(self) -> None:
        pass

    def delete(self) -> None:
        pass


def test_consumers_are_told_once_per_turn(env):
    mk(env)
    stream = env.account.streams["ORDERS"]
    c = _FakeConsumer("C")
    stream.add_consumer(c)
    stream.wake_on_new(c)
    for _ in range(3):
        env.ports.request("orders.a", b"x")
    env.clock.run_soon()
    assert c.new == [3]
    stream.purge()
    assert c.purged == [4]


def test_only_consumers_that_can_take_messages_are_told(env):
    # issue 31: with thousands of idle pull consumers a publish touches only the woken ones;
    # the idle ones read notified_seq when they next need it.
    mk(env)
    stream = env.account.streams["ORDERS"]
    idle = [_FakeConsumer(f"I{i}") for i in range(50)]
    for c in idle:
        stream.add_consumer(c)
    busy = _FakeConsumer("B")
    stream.add_consumer(busy)
    stream.wake_on_new(busy)
    env.ports.request("orders.a", b"x")
    env.clock.run_soon()
    assert busy.new == [1] and all(c.new == [] for c in idle)
    assert stream.notified_seq == 1
    busy.waiting = False  # its requests were served: dropped after this turn's notice
    env.ports.request("orders.a", b"x")
    env.clock.run_soon()
    assert busy.new == [1, 2] and stream.wakers == {}
    env.ports.request("orders.a", b"x")
    env.clock.run_soon()
    assert busy.new == [1, 2] and stream.notified_seq == 3


def test_interest_retention_with_consumers(env):
    mk(env, retention="interest")
    stream = env.account.streams["ORDERS"]
    a, b = _FakeConsumer("A", "orders.a"), _FakeConsumer("B")
    stream.add_consumer(a)
    stream.add_consumer(b)
    env.pub("orders.a")
    env.pub("orders.b")
    a.acked.add(1)
    stream.ack_processed(a, 1)
    assert stream.store.state().msgs == 2  # B still needs 1
    b.acked.add(1)
    stream.ack_processed(b, 1)
    assert stream.store.state().msgs == 1
    stream.remove_consumer("B")  # 2 was only B's
    assert stream.store.state().msgs == 0


def test_workqueue_ack_removes_and_filters_must_not_overlap(env):
    mk(env, retention="workqueue")
    stream = env.account.streams["ORDERS"]
    c = _FakeConsumer("W", "orders.a")
    stream.add_consumer(c)
    env.pub("orders.a")
    stream.ack_processed(c, 1)
    assert stream.store.state().msgs == 0
    with pytest.raises(Exception) as ei:
        stream.check_workqueue_filters(["orders.*"], None)
    assert ei.value.err_code == 10100
    stream.check_workqueue_filters(["orders.b"], None)
    stream.add_consumer(_FakeConsumer("U"))
    with pytest.raises(Exception) as ei:
        stream.check_workqueue_filters([], None)
    assert ei.value.err_code == 10099


def test_max_consumers(env):
    mk(env, max_consumers=1)
    stream = env.account.streams["ORDERS"]
    stream.add_consumer(_FakeConsumer("A"))
    with pytest.raises(Exception) as ei:
        stream.add_consumer(_FakeConsumer("B"))
    assert ei.value.err_code == 10026


def test_republish(env):
    mk(env, republish={"src": "orders.>", "dest": "rp.>"})
    sub = env.ports.client_subscribe("rp.>")
    env.pub("orders.a", b"body", {"H1": "v"})
    m = sub.last()
    assert m.subject == "rp.a" and m.payload == b"body"
    assert m.header("H1") == "v" and m.header("Nats-Stream") == "ORDERS"
    assert m.header("Nats-Sequence") == "1" and m.header("Nats-Last-Sequence") == "0"


def test_republish_headers_only_bytes(env):
    mk(env, republish={"src": "orders.>", "dest": "rp.>", "headers_only": True})
    sub = env.ports.client_subscribe("rp.>")
    env.pub("orders.a", b"first")
    env.pub("orders.a", b"12345")
    m = sub.last()
    ts = env.account.streams["ORDERS"].store.load_msg(2).ts
    from natsd.jetstream.config.models import rfc3339

    assert m.payload == b""
    assert m.hdr == (
        b"NATS/1.0\r\nNats-Stream: ORDERS\r\nNats-Subject: orders.a\r\nNats-Sequence: 2\r\n"
        b"Nats-Time-Stamp: " + rfc3339(ts).encode() + b"\r\nNats-Last-Sequence: 1\r\n"
        b"Nats-Msg-Size: 5\r\n\r\n"
    )


def test_header_scan_ignores_application_headers(env):
    mk(env)
    # "X-Nats-Msg-Id" must not be taken for "Nats-Msg-Id"
    hdr = b"NATS/1.0\r\nX-Nats-Msg-Id: abc\r\n\r\n"
    assert json.loads(env.raw_pub_reply("orders.a", b"x", hdr))["seq"] == 1
    assert json.loads(env.raw_pub_reply("orders.a", b"x", hdr))["seq"] == 2


def test_subject_transform_applied_before_storing(env):
    mk(
        env,
        "TR",
        subjects=["tr.*.*"],
        subject_transform={"src": "tr.*.*", "dest": "tr.{{wildcard(2)}}.{{wildcard(1)}}"},
    )
    assert env.pub("tr.a.b") == {"stream": "TR", "seq": 1}
    assert env.account.streams["TR"].store.load_msg(1).subject == "tr.b.a"
    out = env.api(
        "$JS.API.STREAM.CREATE.T2",
        {
            "name": "T2",
            "storage": "memory",
            "subjects": ["t2.*"],
            "subject_transform": {"src": "t2.*", "dest": "x.{{partition(3,1)}}"},
        },
    )
    assert out["error"]["err_code"] == 10156


def test_update_changes_subscriptions_by_difference(env):
    """STREAM.UPDATE keeps the subscriptions of subjects it keeps (a stream with tens of thousands
    of subjects that gains one must not re-insert all of them) and still routes exactly the new set."""
    subjects = [f"ov.{i}.*" for i in range(2000)]
    mk(env, subjects=subjects)
    stream = env.account.streams["ORDERS"]
    before = dict(stream._subs)
    subscribes = env.ports.subscribe
    made: list[str] = []

    def counting_subscribe(subject, handler, *a, **kw):
        made.append(subject)
        return subscribes(subject, handler, *a, **kw)

    env.ports.subscribe = counting_subscribe
    new = subjects[1:] + ["new.*"]
    info = env.api("$JS.API.STREAM.UPDATE.ORDERS", {"name": "ORDERS", "subjects": new, "storage": "memory"})
    assert info["config"]["subjects"] == new, info
    assert made == ["new.*"]  # only the added subject is subscribed
    assert all(stream._subs[s] is before[s] for s in subjects[1:])  # the kept ones stay as they were
    assert set(stream._subs) == set(new)
    assert env.pub("new.x", b"a") == {"stream": "ORDERS", "seq": 1}
    assert env.pub("ov.1999.x", b"a") == {"stream": "ORDERS", "seq": 2}
    assert env.pub("ov.0.x", b"a") is None  # no longer captured: no PubAck (no responders)


# -- persist_mode: async ------------------------------------------------------------------------------


def test_async_persist_acks_before_the_write_and_writes_soon_after(tmp_path):
    from natsd.jetstream.stream.turnflush import ASYNC_PERSIST_DELAY_NS

    env = JsEnv(str(tmp_path), sync_always=True)
    try:
        env.create("A", subjects=["a.>"], storage="file", persist_mode="async")
        env.create("D", subjects=["d.>"], storage="file")
        a, d = env.account.streams["A"], env.account.streams["D"]
        assert a.store._sync_always is False and d.store._sync_always is True  # async: no fsync per write
        writes: list[str] = []
        for s in (a, d):
            orig = s.store.flush
            s.store.flush = (lambda o, n: lambda: (writes.append(n), o())[1])(orig, s.name)
        acks = [env.pub("a.x", b"m%d" % i) for i in range(3)]
        assert [x["seq"] for x in acks] == [1, 2, 3]
        assert writes == []  # acknowledged, not written yet
        assert a.store._lmb.pending  # the records wait in the store's buffer
        env.clock.advance(ASYNC_PERSIST_DELAY_NS)
        assert writes == ["A"] and not a.store._lmb.pending  # one write for the three
        assert env.api("$JS.API.STREAM.MSG.GET.A", {"seq": 3})["message"]["seq"] == 3
        assert env.pub("d.x")["seq"] == 1 and writes == ["A", "D"]  # default mode: written before the PubAck
        env.pub("a.x")
        env.restart()  # a clean stop writes what is pending
        assert env.api("$JS.API.STREAM.INFO.A")["state"]["messages"] == 4
    finally:
        env.stop()


def test_light_header_paths_answer_and_store_as_the_full_path(env):
    """A stream with nothing to check takes the light paths for headers without ``Nats-*`` names
    and for a lone ``Nats-Msg-Id`` (Stream.process_msg); a stream with a ``max_msg_size`` takes
    the full path for the same publishes. Answers and stored messages must not differ."""
    mk(env, "L", subjects=["l.>"], duplicate_window=2 * SECOND)
    mk(env, "F", subjects=["f.>"], duplicate_window=2 * SECOND, max_msg_size=1 << 20)
    light, full = env.account.streams["L"], env.account.streams["F"]
    assert light._fast and not full._fast
    blocks = [
        b"NATS/1.0\r\nX-Trace: 1\r\n\r\n",
        b"NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n",
        b"NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n",  # a duplicate
        b"NATS/1.0\r\nNats-Msg-Id:\r\n\r\n",  # an empty id is no id
        b"NATS/1.0\r\nX-Nats-Msg-Id: a\r\nApp: v\r\n\r\n",
        b"NATS/1.0\r\nApp: v\r\nNats-Msg-Id: b\r\n\r\n",
        b"NATS/1.0\r\nNats-Msg-Id: b\r\n\r\n",
        b"NATS/1.0\r\nNats-Msg-Id: c\r\nNats-Expected-Last-Msg-Id: b\r\n\r\n",  # not light: full path
        b"NATS/1.0\r\nNats-Msg-Id: d\r\nNats-Expected-Last-Msg-Id: zzz\r\n\r\n",
    ]
    answers = {}
    for name, stream in (("l", light), ("f", full)):
        answers[name] = [env.raw_pub_reply(f"{name}.1", b"x", b) for b in blocks]
        env.clock.advance(3 * SECOND)  # past the window: "a" is new again
        answers[name].append(env.raw_pub_reply(f"{name}.1", b"x", blocks[1]))
        assert stream.lmsg_id == "a"
    assert answers["l"] == [a.replace(b'"F"', b'"L"') for a in answers["f"]]
    assert b'"duplicate": true' in answers["l"][2] and b"10070" in answers["l"][-2]
    stored = {
        n: [(m.subject[2:], m.hdr, m.msg) for m in (s.store.load_msg(q) for q in range(1, s.lseq + 1))]
        for n, s in (("l", light), ("f", full))
    }
    assert stored["l"] == stored["f"] and len(stored["l"]) == 7


def test_light_msg_id_path_rebuilds_dedupe_after_restart(tmp_path):
    env = JsEnv(str(tmp_path))
    try:
        env.create("ORDERS", storage="file", duplicate_window=60 * SECOND)
        assert env.account.streams["ORDERS"]._fast
        env.pub("orders.1", b"a", {"Nats-Msg-Id": "abc"})
    finally:
        env.stop()
    env = JsEnv(str(tmp_path))
    try:
        assert (
            env.raw_pub_reply("orders.1", b"a", b"NATS/1.0\r\nNats-Msg-Id: abc\r\n\r\n")
            == b'{"stream":"ORDERS","seq":1,"duplicate": true}'
        )
        assert env.account.streams["ORDERS"].lmsg_id == "abc"
    finally:
        env.stop()


def test_msg_ids_older_than_the_window_are_no_duplicates_before_their_expiry_sweep(env):
    """A lookup checks the entry's age itself: the sweep runs only every 1,024 inserts."""
    mk(env, duplicate_window=SECOND)
    stream = env.account.streams["ORDERS"]
    env.pub("orders.1", b"a", {"Nats-Msg-Id": "old"})
    env.clock.advance(SECOND)  # exactly the window: expired, as the reference (ts <= now - window)
    assert "old" in stream._ddmap  # not swept yet
    assert env.pub("orders.1", b"a", {"Nats-Msg-Id": "old"}) == {"stream": "ORDERS", "seq": 2}
    assert env.pub("orders.1", b"a", {"Nats-Msg-Id": "old"})["duplicate"] is True


def _rrun_twins(
    tmp_path, n: int, replies=None, storage: str = "file", tweak=None, hdrs=None, runs=None, after=None, **cfg
):
    """The same messages through Stream.process_rrun (one run) and through process_msg one by one,
    on two fresh engines: (PubAcks of the run, PubAcks one by one, state of each). ``hdrs``: a
    header block of one length per message (an HPUB run). ``runs``: a list that gets the
    ``hdr_len`` of each store_run the run side made. ``after``: more messages (hdr, payload),
    published one by one on both sides after the run (their PubAcks are compared too)."""
    from natsd.protocol.events import OP_HPUB, OP_PUB, Run

    replies = replies or [b"_INBOX.t.%04d" % i for i in range(n)]
    payloads = [b"m%03d" % i for i in range(n)]
    hl = len(hdrs[0]) if hdrs else 0
    out = []
    for mode in ("run", "one"):
        env = JsEnv(str(tmp_path / mode))
        try:
            mk(env, storage=storage, **cfg)
            stream = env.account.streams["ORDERS"]
            if tweak:
                tweak(stream)
            if mode == "run":
                if runs is not None:
                    real = stream.store.store_run

                    def spy(subject, msgs, hdr_len=0, real=real):
                        runs.append(hdr_len)
                        return real(subject, msgs, hdr_len)

                    stream.store.store_run = spy
                if hdrs:
                    run = Run(
                        OP_HPUB, b"orders.1", None, b"", hl, [h + p for h, p in zip(hdrs, payloads)], None, replies
                    )
                else:
                    run = Run(OP_PUB, b"orders.1", None, b"", 0, payloads, None, replies)
                stream.process_rrun("orders.1", run)
            else:
                for i, (r, p) in enumerate(zip(replies, payloads)):
                    stream.process_msg("orders.1", r.decode(), hdrs[i] if hdrs else None, p)
            for i, (h, p) in enumerate(after or ()):
                stream.process_msg("orders.1", "_INBOX.t.after%d" % i, h, p)
            env.clock.run_soon()
            acks = [(m.subject, m.payload) for m in env.inbox.msgs if m.subject.startswith("_INBOX.t.")]
            st = stream.store.state()
            stored = [(m.hdr, m.msg) for m in stream.store.iter_msgs(1, 10**6)] if hdrs else None
            out.append((acks, (st.msgs, st.bytes, st.first_seq, st.last_seq), stream.lseq, stream.lmsg_id, stored))
        finally:
            env.stop()
    return out


@pytest.mark.parametrize("storage", ["file", "memory"])
def test_a_reply_run_is_stored_and_acknowledged_as_one_by_one(tmp_path, storage):
    (acks, state, lseq, _, _), one = _rrun_twins(tmp_path, 50, storage=storage)
    assert (acks, state, lseq, "", None) == one
    assert acks[0] == ("_INBOX.t.0000", b'{"stream":"ORDERS","seq":1}') and len(acks) == 50 and lseq == 50


@pytest.mark.parametrize("case", ["discard_new", "server_full", "fast_batch_reply", "no_ack", "discard_old"])
def test_a_reply_run_that_cannot_be_taken_whole_answers_each_message_as_alone(tmp_path, case):
    replies = None
    tweak = None
    cfg: dict = {}
    if case == "discard_new":
        cfg = {"max_msgs": 7, "discard": "new"}
    elif case == "discard_old":
        cfg = {"max_msgs": 7}
    elif case == "no_ack":
        cfg = {"no_ack": True}
    elif case == "fast_batch_reply":
        replies = [b"_INBOX.t.%04d" % i for i in range(20)]
        replies[5] = b"_INBOX.t.x.1.0.$FI"
    else:

        def tweak(stream):
            stream._max_used = stream._used[stream._ut] + 200  # room for a few messages only

    run, one = _rrun_twins(tmp_path, 20, replies=replies, tweak=tweak, **cfg)
    assert run == one
    errors = [a for a in run[0] if b'"error"' in a[1]]
    assert bool(errors) == (case in ("discard_new", "server_full", "fast_batch_reply"))
    assert bool(run[0]) == (case != "no_ack")


def _id_hdr(i) -> bytes:
    return b"NATS/1.0\r\nNats-Msg-Id: id-%04d\r\n\r\n" % i


@pytest.mark.parametrize("storage", ["file", "memory"])
def test_an_hpub_run_of_new_msg_ids_is_stored_as_a_run_and_deduplicates_as_one_by_one(tmp_path, storage):
    """An HPUB run whose headers hold only new Nats-Msg-Ids (the Spark sink's idempotent writes)
    takes one store_run: same PubAcks, state, stored headers and lmsg_id as one by one, and its
    ids are remembered (a later publish of one is a duplicate on both sides)."""
    runs: list = []
    hdrs = [_id_hdr(i) for i in range(30)]
    after = [(_id_hdr(7), b"again"), (_id_hdr(99), b"new"), (None, b"plain")]
    run, one = _rrun_twins(tmp_path, 30, storage=storage, hdrs=hdrs, runs=runs, after=after)
    assert run == one
    assert runs == [len(hdrs[0])]  # the run path, not 30 process_msg calls
    acks = dict(run[0])
    assert acks["_INBOX.t.0029"] == b'{"stream":"ORDERS","seq":30}'
    assert acks["_INBOX.t.after0"] == b'{"stream":"ORDERS","seq":8,"duplicate": true}'
    assert acks["_INBOX.t.after1"] == b'{"stream":"ORDERS","seq":31}'
    assert run[4][7] == (_id_hdr(7), b"m007")


@pytest.mark.parametrize("case", ["dup_in_run", "dup_of_stored", "other_nats_header", "app_header", "empty_id"])
def test_an_hpub_run_the_light_path_cannot_take_answers_as_one_by_one(tmp_path, case):
    runs: list = []
    hdrs = [_id_hdr(i) for i in range(12)]
    tweak = None
    if case == "dup_in_run":
        hdrs[9] = _id_hdr(3)
    elif case == "dup_of_stored":

        def tweak(stream):
            stream.process_msg("orders.1", "", _id_hdr(5), b"first")
    elif case == "other_nats_header":
        hdrs = [b"NATS/1.0\r\nNats-Expected-Stream: ORDERS\r\n\r\n"] * 12
    elif case == "app_header":  # no Nats-* name at all: the run path, ids ""
        hdrs = [b"NATS/1.0\r\nX-Trace: %04d\r\n\r\n" % i for i in range(12)]
    else:
        hdrs = [b"NATS/1.0\r\nNats-Msg-Id:      \r\n\r\n"] * 12
    run, one = _rrun_twins(tmp_path, 12, hdrs=hdrs, runs=runs, tweak=tweak)
    assert run == one
    assert runs == ([len(hdrs[0])] if case in ("app_header", "empty_id") else [])
    if case == "dup_in_run":
        assert dict(run[0])["_INBOX.t.0009"] == b'{"stream":"ORDERS","seq":4,"duplicate": true}'
