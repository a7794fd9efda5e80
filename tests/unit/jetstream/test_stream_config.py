"""StreamConfig JSON round trip (omitempty, field order), defaults, validation and update rules,
the engine's resources, account limits, sync timers and /jsz -- no sockets."""

from __future__ import annotations

import os

import pytest

from natsd.config.options import AccountJetStreamLimits
from natsd.jetstream.errors import ApiError, ApiErrors
from natsd.jetstream.config.models import SECOND, StreamConfig, parse_rfc3339, rfc3339
from natsd.jetstream.config.stream_checks import check_stream_config, check_update
from natsd.jetstream.stream.core import parse_ttl
from tests.helpers.fakeports import JsEnv

pytestmark = pytest.mark.unit


def test_rfc3339_like_go():
    assert rfc3339(0) == "0001-01-01T00:00:00Z"
    assert rfc3339(1_700_000_000 * SECOND) == "2023-11-14T22:13:20Z"
    assert rfc3339(1_700_000_000 * SECOND + 412183548) == "2023-11-14T22:13:20.412183548Z"
    assert rfc3339(1_700_000_000 * SECOND + 410000000) == "2023-11-14T22:13:20.41Z"
    assert parse_rfc3339("2023-11-14T22:13:20.41Z") == 1_700_000_000 * SECOND + 410000000
    assert parse_rfc3339("2023-11-14T23:13:20+01:00") == 1_700_000_000 * SECOND


def test_durations_and_ttl():
    # the durations themselves: tests/unit/test_gotime.py
    assert parse_ttl("never") == -1 and parse_ttl("5s") == 5 and parse_ttl("30") == 30
    assert parse_ttl("1h2m3.5s") == 3723
    assert parse_ttl("9007199254740993ns") == 9007199
    assert parse_ttl("00") == 0 and parse_ttl("0030") == 30  # integers, as Go's fallback reads them
    # Go's ParseDuration fails on int64 overflow (then it is not an integer either): invalid,
    # where a float-based parser used to take it as a huge TTL
    for bad in ("500ms", "abc", "-1", "99999999999h", "1e3s", "0", "0s"):
        with pytest.raises(ApiError) as ei:
            parse_ttl(bad)
        assert ei.value.err_code == 10165


def test_ttl_header_value_is_taken_as_nats_server_reads_it():
    # the scan itself: tests/unit/protocol/test_encoder_headers.py. nats-server skips the spaces
    # before a value but keeps those after it, so "5s " is no duration and no integer either.
    assert parse_ttl("5s") == 5
    with pytest.raises(ApiError) as ei:
        parse_ttl("5s ")
    assert ei.value.err_code == 10165


def test_config_json_omitempty_and_order():
    cfg = StreamConfig.from_json({"name": "S", "subjects": ["a"], "unknown_field": 1, "description": None})
    out = cfg.to_json()
    assert "description" not in out and "no_ack" not in out and "metadata" not in out
    assert list(out)[:4] == ["name", "subjects", "retention", "max_consumers"]
    assert out["consumer_limits"] == {} and out["allow_direct"] is False
    full = StreamConfig.from_json(
        {
            "name": "S",
            "republish": {"dest": "x.>"},
            "sources": [{"name": "A"}],
            "persist_mode": "async",
            "metadata": {"b": "1", "a": "2"},
        }
    )
    out = full.to_json()
    assert out["republish"] == {"dest": "x.>"} and out["sources"] == [{"name": "A"}]
    assert out["persist_mode"] == "async" and list(out["metadata"]) == ["a", "b"]


def test_defaults_applied():
    cfg = check_stream_config(StreamConfig.from_json({"name": "S", "max_msgs": -5, "max_consumers": 0}))
    assert cfg.subjects == ["S"] and cfg.max_msgs == -1 and cfg.max_consumers == -1
    assert cfg.num_replicas == 1 and cfg.duplicate_window == 120 * SECOND and cfg.max_msg_size == -1
    assert cfg.metadata == {"_nats.req.level": "0"}
    with pytest.raises(ApiError) as ei:
        check_stream_config(StreamConfig.from_json({"name": "S", "max_msgs": -5}), pedantic=True)
    assert ei.value.err_code == 10157


@pytest.mark.parametrize(
    "body,desc",
    [
        ({"name": "a.b"}, "stream name is required and can not contain '.', '*', '>', '\\', '/'"),
        ({"name": "S", "description": "x" * 5000}, "stream description is too long, maximum allowed is 4096"),
        ({"name": "S", "max_age": -1}, "max age can not be negative"),
        (
            {"name": "S", "max_age": SECOND, "duplicate_window": 2 * SECOND},
            "duplicates window can not be larger then max age",
        ),
        ({"name": "S", "duplicate_window": 10}, "duplicates window needs to be >= 100ms"),
        (
            {"name": "S", "discard": "new", "discard_new_per_subject": True},
            "discard new per subject requires max msgs per subject > 0",
        ),
        ({"name": "S", "subjects": ["a..b"]}, "invalid subject"),
        ({"name": "S", "subjects": ["$SYS.x"]}, "subjects that overlap with system api require no-ack to be true"),
        (
            {"name": "S", "republish": {"src": ">", "dest": "a.>"}, "subjects": ["a.>"]},
            "stream configuration for republish destination forms a cycle",
        ),
        ({"name": "S", "placement": {"preferred": "x"}}, "preferred server not permitted in placement"),
    ],
)
def test_invalid_configs(body, desc):
    with pytest.raises(ApiError) as ei:
        check_stream_config(StreamConfig.from_json(body))
    assert ei.value.err_code == 10052 and ei.value.description == desc


def test_event_subjects_allowed_without_no_ack():
    cfg = check_stream_config(StreamConfig.from_json({"name": "S", "subjects": ["$JS.EVENT.ADVISORY.>"]}))
    assert cfg.subjects == ["$JS.EVENT.ADVISORY.>"]


def test_update_rules_one_way_flags_and_seal():
    old = check_stream_config(StreamConfig.from_json({"name": "S", "deny_purge": True, "allow_msg_ttl": True}))
    with pytest.raises(ApiError) as ei:
        check_update(old, StreamConfig.from_json({"name": "S", "allow_msg_ttl": True}))
    assert ei.value.description == "stream configuration update can not cancel deny purge"
    with pytest.raises(ApiError) as ei:
        check_update(old, StreamConfig.from_json({"name": "S", "deny_purge": True}))
    assert ei.value.description == "message TTL status can not be disabled"
    sealed = check_update(
        old,
        StreamConfig.from_json(
            {"name": "S", "deny_purge": True, "allow_msg_ttl": True, "sealed": True, "max_age": SECOND}
        ),
    )
    assert sealed.sealed and sealed.max_age == 0 and sealed.discard == "new" and sealed.deny_delete
    with pytest.raises(ApiError) as ei:
        check_update(
            sealed,
            StreamConfig.from_json({"name": "S", "deny_purge": True, "deny_delete": True, "allow_msg_ttl": True}),
        )
    assert ei.value.description == "stream configuration update can not unseal a sealed stream"
    with pytest.raises(ApiError) as ei:
        check_update(
            old, StreamConfig.from_json({"name": "S", "deny_purge": True, "allow_msg_ttl": True, "num_replicas": 3})
        )
    assert ei.value.err_code == 10074


def test_retention_limits_interest_switch_allowed(tmp_path):
    env = JsEnv(str(tmp_path))
    try:
        env.create("S", storage="memory")
        out = env.api(
            "$JS.API.STREAM.UPDATE.S", {"name": "S", "subjects": ["s.>"], "storage": "memory", "retention": "interest"}
        )
        assert out["config"]["retention"] == "interest"
    finally:
        env.stop()


def test_error_table_is_complete_and_exact():
    from natsd.jetstream.errors import ERROR_TABLE

    assert len(ERROR_TABLE) == 226
    assert len({r.err_code for r in ERROR_TABLE}) == 226
    assert ApiErrors.STREAM_NOT_FOUND().to_dict() == {"code": 404, "err_code": 10059, "description": "stream not found"}
    assert ApiError.new("STREAM_WRONG_LAST_SEQUENCE", seq=7).description == "wrong last sequence: 7"
    assert ApiErrors.by_err_code[10166].description == "per-message TTL is disabled"


# -- engine, limits, timers, /jsz ----------------------------------------------------------------


def test_store_dir_layout_and_defaults(tmp_path):
    env = JsEnv(str(tmp_path), max_memory_store=-1, max_file_store=-1)
    try:
        eng = env.engine
        assert eng.store_dir == os.path.join(str(tmp_path), "jetstream")
        assert eng.max_memory > 0 and eng.max_store > 0
        env.create("ONDISK", storage="file")
        assert os.path.isdir(os.path.join(str(tmp_path), "jetstream", "$G", "streams", "ONDISK"))
    finally:
        env.stop()


def test_default_store_dir_is_temp_nats_jetstream():
    import tempfile

    from natsd.clock import ManualClock
    from natsd.config.options import ServerOptions
    from natsd.jetstream.manager import JetStreamEngine

    opts = ServerOptions()
    opts.jetstream.max_memory_store = 1 << 20
    opts.jetstream.max_file_store = 1 << 20
    eng = JetStreamEngine(opts, ManualClock())
    assert eng.store_dir == os.path.join(tempfile.gettempdir(), "nats", "jetstream")


def test_account_limits(tmp_path):
    lim = AccountJetStreamLimits(max_streams=1, max_consumers=5, max_memory=1000, max_storage=-1)
    env = JsEnv(str(tmp_path), account_limits=lim)
    try:
        out = env.api("$JS.API.INFO")
        assert out["limits"]["max_streams"] == 1 and out["limits"]["max_memory"] == 1000
        big = env.api("$JS.API.STREAM.CREATE.A", {"name": "A", "storage": "memory", "max_bytes": 5000})
        assert big["error"] == {
            "code": 500,
            "err_code": 10028,
            "description": "insufficient memory resources available",
        }
        assert "error" not in env.api("$JS.API.STREAM.CREATE.A", {"name": "A", "storage": "memory"})
        second = env.api("$JS.API.STREAM.CREATE.B", {"name": "B", "storage": "memory"})
        assert second["error"] == {"code": 400, "err_code": 10027, "description": "maximum number of streams reached"}
        mc = env.api("$JS.API.STREAM.UPDATE.A", {"name": "A", "storage": "memory", "max_consumers": 10})
        assert mc["error"]["err_code"] == 10026
        r = None
        for _ in range(20):
            r = env.pub("A", b"x" * 200)
            if "error" in r:
                break
        assert r["error"] == {"code": 400, "err_code": 10002, "description": "resource limits exceeded for account"}
    finally:
        env.stop()


def test_sync_interval_timer_fsyncs(tmp_path):
    env = JsEnv(str(tmp_path), sync_interval_ns=10 * SECOND)
    try:
        env.create("S", storage="memory")
        stream = env.account.streams["S"]
        calls = []
        orig = stream.store.sync
        stream.store.sync = lambda: (calls.append(1), orig())[1]
        env.clock.advance(9 * SECOND)
        assert calls == []
        env.clock.advance(2 * SECOND)
        assert calls == [1]
        env.clock.advance(10 * SECOND)
        assert calls == [1, 1]
    finally:
        env.stop()


def test_sync_always_syncs_before_acking(tmp_path):
    env = JsEnv(str(tmp_path), sync_always=True)
    try:
        env.create("S", storage="memory")
        stream = env.account.streams["S"]
        order = []
        orig = stream.store.sync
        stream.store.sync = lambda: (order.append("sync"), orig())[1]
        orig_pub = env.ports.publish

        def pub(subject, reply, hdr, payload):
            if subject.startswith("_INBOX."):
                order.append("ack")
            orig_pub(subject, reply, hdr, payload)

        env.ports.publish = pub
        for _ in range(3):
            env.ports.request("s.x", b"x")
        env.clock.run_soon()
        assert order == ["sync", "ack", "ack", "ack"]
    finally:
        env.stop()


def test_jsz_shapes(tmp_path):
    env = JsEnv(str(tmp_path))
    try:
        env.create("ORDERS", storage="file")
        env.pub("orders.1", b"hello")
        out = env.engine.jsz({})
        assert list(out) == [
            "memory",
            "storage",
            "reserved_memory",
            "reserved_storage",
            "accounts",
            "ha_assets",
            "api",
            "server_id",
            "now",
            "config",
            "limits",
            "streams",
            "consumers",
            "messages",
            "bytes",
            "total",
            "natsd",
        ]  # natsd: its own features (issue 27), last
        assert out["streams"] == 1 and out["messages"] == 1 and out["accounts"] == 1
        assert list(out["config"]) == ["max_memory", "max_storage", "store_dir", "sync_interval", "strict"]
        detail = env.engine.jsz({"accounts": "1", "streams": "1", "consumers": "1", "config": "1"})
        acc = detail["account_details"][0]
        assert acc["name"] == "$G" and acc["stream_detail"][0]["name"] == "ORDERS"
        sd = acc["stream_detail"][0]
        assert list(sd) == ["name", "created", "cluster", "config", "state"]
        assert sd["config"]["metadata"] == {"_nats.req.level": "0"}
    finally:
        env.stop()


def test_streams_recovered_on_start(tmp_path):
    env = JsEnv(str(tmp_path))
    try:
        env.create("F1", storage="file", max_msgs=100)
        env.create("M1", storage="memory")
        for i in range(5):
            env.pub("f1.x", str(i).encode(), {"Nats-Msg-Id": f"m{i}"})
        env.restart()
        assert sorted(env.account.streams) == ["F1"]  # memory streams do not survive a restart
        info = env.api("$JS.API.STREAM.INFO.F1")
        assert info["config"]["max_msgs"] == 100 and info["state"]["messages"] == 5
        assert env.pub("f1.x", b"4", {"Nats-Msg-Id": "m4"})["duplicate"] is True
        assert env.pub("f1.x", b"5")["seq"] == 6
    finally:
        env.stop()


def test_unused():
    # The error namespace raises AttributeError for names not in the table.
    with pytest.raises(AttributeError):
        ApiErrors.NOT_A_REAL_ERROR


def test_dedupe_rebuilt_lazily_after_restart(tmp_path):
    env = JsEnv(str(tmp_path))
    try:
        env.create("F", storage="file")
        env.pub("f.a", b"1", {"Nats-Msg-Id": "one"})
        env.pub("f.a", b"2")
        env.restart()
        stream = env.account.streams["F"]
        reads = []
        orig = stream.store.load_prev_msg
        stream.store.load_prev_msg = lambda seq: (reads.append(seq), orig(seq))[1]
        assert env.pub("f.a", b"3") == {"stream": "F", "seq": 3}
        assert reads == []  # no msg id involved: nothing read back
        assert env.pub("f.a", b"1", {"Nats-Msg-Id": "one"}) == {"stream": "F", "seq": 1, "duplicate": True}
        assert reads  # the first msg id triggered the rebuild
        r = env.pub("f.a", b"x", {"Nats-Expected-Last-Msg-Id": "one"})
        assert r["error"]["description"] == "wrong last msg ID: "
    finally:
        env.stop()


def test_delete_marker_alive_across_restart_is_not_re_marked(tmp_path):
    env = JsEnv(str(tmp_path))
    try:
        env.create("D", storage="file", max_age=SECOND, subject_delete_marker_ttl=5 * SECOND)
        env.pub("d.a", b"x")
        env.clock.advance(SECOND + 1)
        stream = env.account.streams["D"]
        assert stream.store.state().last_seq == 2  # the marker
        env.restart()
        env.clock.advance(6 * SECOND)  # the marker expires: no new marker for it
        st = env.account.streams["D"].store.state()
        assert (st.msgs, st.last_seq) == (0, 2)
    finally:
        env.stop()


def test_domain_api_prefix(tmp_path):
    env = JsEnv(str(tmp_path), domain="hub")
    try:
        out = env.api("$JS.hub.API.STREAM.CREATE.DOM", {"name": "DOM", "storage": "memory", "allow_direct": True})
        assert out["config"]["name"] == "DOM"
        env.pub("DOM", b"v")
        assert env.api("$JS.hub.API.INFO")["domain"] == "hub"
        assert env.api("$JS.API.STREAM.INFO.DOM")["domain"] == "hub"
        [m] = env.request_msgs("$JS.hub.API.DIRECT.GET.DOM.DOM")
        assert m.payload == b"v" and m.header("Nats-Sequence") == "1"
        [m] = env.request_msgs("$JS.API.DIRECT.GET.DOM.DOM")
        assert m.payload == b"v"
    finally:
        env.stop()


def test_overlap_checks_are_not_pairwise(monkeypatch):
    """Issue 14 item 6: 3,000 subjects used to be compared pair by pair (4.5M subjects_collide
    calls on the event loop); inside the list and against other streams the checks now go
    through a trie, so the pairwise function is only called a few times per subject."""
    import natsd.jetstream.config.stream_checks as P
    from natsd.jetstream.config.models import StreamConfig as SC

    calls = 0
    real = P.subjects_collide

    def counting(a, b):
        nonlocal calls
        calls += 1
        return real(a, b)

    monkeypatch.setattr(P, "subjects_collide", counting)
    n = 3000
    cfg = SC.from_json({"name": "BIG", "subjects": [f"big.{i}.*" for i in range(n)]})
    P.check_stream_config(cfg, False, lambda name: None)
    others = {f"O{k}": SC.from_json({"name": f"O{k}", "subjects": [f"o{k}.{i}" for i in range(n)]}) for k in range(3)}
    P.check_subject_overlap(cfg, others)
    assert calls < 10 * n, calls
    dup = SC.from_json({"name": "D", "subjects": [f"d.{i}" for i in range(n)] + ["d.*"]})
    with pytest.raises(ApiError) as e:
        P.check_stream_config(dup, False, lambda name: None)
    assert e.value.description == 'subject "d.0" overlaps with "d.*"'
    clash = {"O": SC.from_json({"name": "O", "subjects": [f"o.{i}" for i in range(n)] + ["big.7.x"]})}
    with pytest.raises(ApiError) as e:
        P.check_subject_overlap(cfg, clash)
    assert e.value.err_code == 10065
