"""$JS.API stream calls without sockets: request JSON in, response JSON out, compared with the
shapes nats-server 2.15.1 sends (keys and order taken from recorded reference replies)."""

from __future__ import annotations

import base64

import pytest

from natsd.jetstream.config.models import SECOND
from tests.helpers.fakeports import JsEnv

pytestmark = pytest.mark.unit

T = "io.nats.jetstream.api.v1."

# Key order of reference replies (nats-js-api-samples.json / recorded from nats-server 2.15.1).
INFO_KEYS = [
    "type",
    "memory",
    "storage",
    "reserved_memory",
    "reserved_storage",
    "streams",
    "consumers",
    "limits",
    "api",
]
STREAM_INFO_KEYS = ["type", "total", "offset", "limit", "config", "created", "state", "cluster", "ts"]
CONFIG_KEYS = [
    "name",
    "subjects",
    "retention",
    "max_consumers",
    "max_msgs",
    "max_bytes",
    "max_age",
    "max_msgs_per_subject",
    "max_msg_size",
    "discard",
    "storage",
    "num_replicas",
    "duplicate_window",
    "compression",
    "allow_direct",
    "mirror_direct",
    "sealed",
    "deny_delete",
    "deny_purge",
    "allow_rollup_hdrs",
    "consumer_limits",
    "allow_msg_ttl",
    "metadata",
]
STATE_KEYS = ["messages", "bytes", "first_seq", "first_ts", "last_seq", "last_ts", "num_subjects", "consumer_count"]


@pytest.fixture
def env(tmp_path):
    e = JsEnv(str(tmp_path))
    yield e
    e.stop()


def create(env, name="SAMPLE", **cfg):
    cfg.setdefault("storage", "memory")
    cfg.setdefault("subjects", [name.lower() + ".>"])
    return env.api(f"$JS.API.STREAM.CREATE.{name}", {"name": name, **cfg})


def test_account_info_shape(env):
    out = env.api("$JS.API.INFO")
    # natsd adds one field the reference lacks, last: the features it offers (issue 27).
    assert list(out) == INFO_KEYS + ["natsd"]
    assert out["type"] == T + "account_info_response"
    assert out["limits"] == {
        "max_memory": -1,
        "max_storage": -1,
        "max_streams": -1,
        "max_consumers": -1,
        "max_ack_pending": -1,
        "memory_max_stream_bytes": -1,
        "storage_max_stream_bytes": -1,
        "max_bytes_required": False,
    }
    # The request being answered is not counted yet (as the reference).
    assert out["api"] == {"level": 5, "total": 0, "errors": 0}
    create(env)
    env.api("$JS.API.STREAM.INFO.NOPE")
    out = env.api("$JS.API.INFO")
    assert out["streams"] == 1 and out["api"]["total"] == 3 and out["api"]["errors"] == 1


def test_create_defaults_and_shape(env):
    out = create(env)
    assert out["type"] == T + "stream_create_response"
    assert list(out) == ["type", "config", "created", "state", "ts", "did_create"]
    assert list(out["config"]) == CONFIG_KEYS
    cfg = out["config"]
    assert cfg["max_msgs"] == -1 and cfg["duplicate_window"] == 120 * SECOND and cfg["num_replicas"] == 1
    assert cfg["metadata"] == {"_nats.level": "5", "_nats.req.level": "0", "_nats.ver": cfg["metadata"]["_nats.ver"]}
    assert list(cfg["metadata"]) == ["_nats.level", "_nats.req.level", "_nats.ver"]
    assert out["state"] == {
        "messages": 0,
        "bytes": 0,
        "first_seq": 0,
        "first_ts": "0001-01-01T00:00:00Z",
        "last_seq": 0,
        "last_ts": "0001-01-01T00:00:00Z",
        "consumer_count": 0,
    }
    assert out["did_create"] is True
    # identical config again: success; a different one: 10058
    assert "error" not in create(env)
    assert create(env, subjects=["other.>"])["error"] == {
        "code": 400,
        "err_code": 10058,
        "description": "stream name already in use with a different configuration",
    }


def test_create_subjects_default_to_name(env):
    out = env.api("$JS.API.STREAM.CREATE.S1", {"name": "S1", "storage": "memory"})
    assert out["config"]["subjects"] == ["S1"]


@pytest.mark.parametrize(
    "subject,body,err",
    [
        ("S1", b"", (400, 10056, "stream name in subject does not match request")),
        ("S2", {"name": "S3"}, (400, 10056, "stream name in subject does not match request")),
        ("S2", {"name": "S2", "num_replicas": 3}, (500, 10074, "replicas > 1 not supported in non-clustered mode")),
        ("S2", {"name": "S2", "retention": "bogus"}, (400, 10025, 'invalid JSON: can not unmarshal "\\"bogus\\""')),
        (
            "S2",
            {"name": "S2", "max_msgs": "x"},
            (
                400,
                10025,
                "invalid JSON: json: cannot unmarshal string into Go struct field StreamConfigRequest.max_msgs of "
                "type int64",
            ),
        ),
        ("S2", {"name": "S2", "subjects": ["a", "a"]}, (500, 10052, 'subject "a" overlaps with "a"')),
        ("S2", {"name": "S2", "subjects": ["a.*", "a.b"]}, (500, 10052, 'subject "a.*" overlaps with "a.b"')),
        ("S2", {"name": "S2", "max_age": 1000}, (500, 10052, "max age needs to be >= 100ms")),
        ("S2", {"name": "S2", "sealed": True}, (500, 10052, "stream configuration for create can not be sealed")),
        (
            "S2",
            {"name": "S2", "deny_purge": True, "allow_rollup_hdrs": True},
            (500, 10052, "roll-ups require the purge permission"),
        ),
        (
            "S2",
            {"name": "S2", "subjects": ["$JS.API.>"]},
            (500, 10052, "subjects that overlap with jetstream api require no-ack to be true"),
        ),
        ("S2", {"name": "S2", "subjects": [">"]}, (500, 10052, "capturing all subjects requires no-ack to be true")),
        (
            "S2",
            {"name": "S2", "discard_new_per_subject": True},
            (500, 10052, "discard new per subject requires discard new policy to be set"),
        ),
        ("S2", {"name": "S2", "compression": ""}, (400, 10025, "invalid JSON: unknown compression algorithm")),
        (
            "S2",
            {"name": "S2", "subject_delete_marker_ttl": 10},
            (500, 10052, "subject delete marker TTL must be at least 1 second"),
        ),
    ],
)
def test_create_errors(env, subject, body, err):
    out = env.api(f"$JS.API.STREAM.CREATE.{subject}", body)
    assert out == {
        "type": T + "stream_create_response",
        "error": {"code": err[0], "err_code": err[1], "description": err[2]},
    }


def test_create_invalid_json(env):
    out = env.api("$JS.API.STREAM.CREATE.S1", b"{bad")
    assert out["error"]["err_code"] == 10025 and out["error"]["description"].startswith("invalid JSON: ")
    assert set(out["error"]) == {"code", "err_code", "description"}


def test_subject_overlap_between_streams(env):
    create(env, "S1", subjects=["s1.>"])
    out = create(env, "S2", subjects=["s1.a"])
    assert out["error"] == {"code": 400, "err_code": 10065, "description": "subjects overlap with an existing stream"}


def test_subject_delete_marker_turns_on_ttl_and_rollup(env):
    out = create(env, "M5", subject_delete_marker_ttl=SECOND)
    cfg = out["config"]
    assert cfg["allow_msg_ttl"] is True and cfg["allow_rollup_hdrs"] is True
    assert cfg["subject_delete_marker_ttl"] == SECOND and cfg["metadata"]["_nats.req.level"] == "1"


def test_duplicate_window_capped_by_max_age(env):
    out = create(env, "M6", max_age=SECOND)
    assert out["config"]["duplicate_window"] == SECOND


def test_placement_accepted_and_echoed(env):
    out = create(env, "P", placement={"cluster": "X"})
    assert out["config"]["placement"] == {"cluster": "X"}


def test_unsupported_features_are_refused_not_ignored(env):
    create(env, "O1")
    # (external mirrors/sources are supported: tests/integration/test_leafnodes.py)
    for body in ({"name": "M7", "num_replicas": 3},):
        out = env.api(f"$JS.API.STREAM.CREATE.{body['name']}", {**body, "storage": "file"})
        assert "error" in out, body
    assert sorted(env.account.streams) == ["O1"]


def test_update_rules(env):
    create(env, "S2")
    base = {"name": "S2", "subjects": ["s2.>"], "storage": "memory"}
    ok = env.api("$JS.API.STREAM.UPDATE.S2", {**base, "max_msgs": 10, "description": "d"})
    assert ok["type"] == T + "stream_update_response" and ok["config"]["max_msgs"] == 10
    assert "did_create" not in ok
    bad = env.api("$JS.API.STREAM.UPDATE.S2", {**base, "storage": "file"})
    assert bad["error"]["description"] == "stream configuration update can not change storage type"
    bad = env.api("$JS.API.STREAM.UPDATE.S2", {**base, "retention": "workqueue"})
    assert (
        bad["error"]["description"] == "stream configuration update can not change retention policy to/from workqueue"
    )
    assert env.api("$JS.API.STREAM.UPDATE.S9", {"name": "S9"})["error"]["err_code"] == 10059
    assert env.api("$JS.API.STREAM.UPDATE.S9", {"name": "S2"})["error"]["err_code"] == 10056
    env.api("$JS.API.STREAM.UPDATE.S2", {**base, "deny_delete": True})
    bad = env.api("$JS.API.STREAM.UPDATE.S2", base)
    assert bad["error"]["description"] == "stream configuration update can not cancel deny message deletes"


def test_update_subjects_moves_subscriptions(env):
    create(env, "S2")
    env.api("$JS.API.STREAM.UPDATE.S2", {"name": "S2", "subjects": ["new.>"], "storage": "memory"})
    assert env.pub("new.a") == {"stream": "S2", "seq": 1}
    assert env.pub("s2.a") is None


def test_stream_info_paging_and_subjects(env):
    create(env)
    env.pub("sample.a", b"hello")
    env.pub("sample.b", b"hello")
    out = env.api("$JS.API.STREAM.INFO.SAMPLE")
    assert list(out) == STREAM_INFO_KEYS
    assert (out["total"], out["offset"], out["limit"]) == (0, 0, 0)
    assert list(out["state"]) == STATE_KEYS
    assert out["cluster"] == {"leader": "NTESTSERVER"}
    out = env.api("$JS.API.STREAM.INFO.SAMPLE", {"subjects_filter": ">"})
    assert (out["total"], out["offset"], out["limit"]) == (2, 0, 100000)
    assert out["state"]["subjects"] == {"sample.a": 1, "sample.b": 1}
    out = env.api("$JS.API.STREAM.INFO.SAMPLE", {"subjects_filter": "sample.a"})
    assert out["state"]["subjects"] == {"sample.a": 1}
    out = env.api("$JS.API.STREAM.INFO.SAMPLE", {"subjects_filter": "nomatch"})
    assert (out["total"], out["limit"]) == (0, 0) and "subjects" not in out["state"]
    # a body that is not a JSON object is ignored
    assert "error" not in env.api("$JS.API.STREAM.INFO.SAMPLE", b"garbage")


def test_stream_info_deleted_details(env):
    create(env)
    for _ in range(4):
        env.pub("sample.a")
    assert env.api("$JS.API.STREAM.MSG.DELETE.SAMPLE", {"seq": 2})["success"] is True
    out = env.api("$JS.API.STREAM.INFO.SAMPLE", {"deleted_details": True})
    assert out["state"]["num_deleted"] == 1 and out["state"]["deleted"] == [2]
    out = env.api("$JS.API.STREAM.INFO.SAMPLE")
    assert "deleted" not in out["state"] and out["state"]["num_deleted"] == 1


def test_stream_info_not_found_envelope(env):
    assert env.api("$JS.API.STREAM.INFO.SAMPLE") == {
        "type": T + "stream_info_response",
        "error": {"code": 404, "err_code": 10059, "description": "stream not found"},
        "total": 0,
        "offset": 0,
        "limit": 0,
    }


def test_names_and_list(env):
    for n in ("B", "A", "C"):
        create(env, n)
    out = env.api("$JS.API.STREAM.NAMES")
    assert out == {
        "type": T + "stream_names_response",
        "total": 3,
        "offset": 0,
        "limit": 1024,
        "streams": ["A", "B", "C"],
    }
    assert env.api("$JS.API.STREAM.NAMES", {"subject": "b.x"})["streams"] == ["B"]
    out = env.api("$JS.API.STREAM.NAMES", {"offset": 5})
    assert (out["total"], out["offset"], out["streams"]) == (3, 3, None)
    out = env.api("$JS.API.STREAM.LIST", {"offset": 1})
    assert (out["total"], out["offset"], out["limit"]) == (3, 1, 256)
    assert [s["config"]["name"] for s in out["streams"]] == ["B", "C"]
    assert list(out["streams"][0]) == ["config", "created", "state", "ts"]
    assert out["streams"][0]["config"]["metadata"] == {"_nats.req.level": "0"}
    assert env.api("$JS.API.STREAM.LIST", {"subject": "nomatch"})["streams"] == []


def test_delete(env):
    create(env)
    assert env.api("$JS.API.STREAM.DELETE.SAMPLE", b"x")["error"] == {
        "code": 400,
        "err_code": 10038,
        "description": "expected an empty request payload",
    }
    assert env.api("$JS.API.STREAM.DELETE.SAMPLE") == {"type": T + "stream_delete_response", "success": True}
    assert env.api("$JS.API.STREAM.DELETE.SAMPLE")["error"]["err_code"] == 10059
    assert env.pub("sample.a") is None  # no longer captured


def test_purge_variants(env):
    create(env)
    for s in ("sample.a", "sample.a", "sample.b", "sample.b", "sample.b"):
        env.pub(s)
    assert env.api("$JS.API.STREAM.PURGE.SAMPLE", {"seq": 1, "keep": 1}) == {
        "type": T + "stream_purge_response",
        "error": {"code": 400, "err_code": 10003, "description": "bad request"},
        "purged": 0,
    }
    assert env.api("$JS.API.STREAM.PURGE.SAMPLE", {"filter": "sample.zzz"}) == {
        "type": T + "stream_purge_response",
        "success": True,
        "purged": 0,
    }
    assert env.api("$JS.API.STREAM.PURGE.SAMPLE", {"filter": "sample.b", "keep": 1})["purged"] == 2
    assert env.api("$JS.API.STREAM.PURGE.SAMPLE", {"seq": 2})["purged"] == 1
    assert env.api("$JS.API.STREAM.PURGE.SAMPLE", b"notjson")["purged"] == 2
    st = env.api("$JS.API.STREAM.INFO.SAMPLE")["state"]
    assert (st["messages"], st["first_seq"], st["last_seq"]) == (0, 6, 5)


def test_purge_and_delete_denied(env):
    create(env, deny_purge=True, deny_delete=True)
    env.pub("sample.a")
    assert env.api("$JS.API.STREAM.PURGE.SAMPLE")["error"] == {
        "code": 500,
        "err_code": 10110,
        "description": "stream purge not permitted",
    }
    assert env.api("$JS.API.STREAM.MSG.DELETE.SAMPLE", {"seq": 1})["error"] == {
        "code": 500,
        "err_code": 10057,
        "description": "message delete not permitted",
    }


def test_msg_get(env):
    create(env)
    env.pub("sample.a", b"hello", {"H1": "v1"})
    env.pub("sample.b", b"two")
    out = env.api("$JS.API.STREAM.MSG.GET.SAMPLE", {"seq": 1})
    assert list(out) == ["type", "message"]
    m = out["message"]
    assert list(m) == ["subject", "seq", "hdrs", "data", "time"]
    assert m["subject"] == "sample.a" and m["seq"] == 1
    assert base64.b64decode(m["hdrs"]) == b"NATS/1.0\r\nH1: v1\r\n\r\n"
    assert base64.b64decode(m["data"]) == b"hello"
    assert env.api("$JS.API.STREAM.MSG.GET.SAMPLE", {"last_by_subj": "sample.*"})["message"]["seq"] == 2
    assert env.api("$JS.API.STREAM.MSG.GET.SAMPLE", {"next_by_subj": "sample.b", "seq": 1})["message"]["seq"] == 2
    assert "hdrs" not in env.api("$JS.API.STREAM.MSG.GET.SAMPLE", {"seq": 2})["message"]
    assert env.api("$JS.API.STREAM.MSG.GET.SAMPLE", {"seq": 99}) == {
        "type": T + "stream_msg_get_response",
        "error": {"code": 404, "err_code": 10037, "description": "no message found"},
    }
    for bad in (b"", {"seq": 1, "last_by_subj": "a"}, {"batch": 2, "seq": 1}):
        assert env.api("$JS.API.STREAM.MSG.GET.SAMPLE", bad)["error"]["err_code"] == 10003


def test_msg_delete(env):
    # A memory stream reports any missing message as 400 10043 (the reference's memory store
    # answers "not removed"); a file stream answers 500 10057 with the store's reason outside
    # first..last (side by side with nats-server: tests/integration/test_js_api_decoding_reference.py).
    create(env)
    env.pub("sample.a")
    assert env.api("$JS.API.STREAM.MSG.DELETE.SAMPLE", {"seq": 99})["error"] == {
        "code": 400,
        "err_code": 10043,
        "description": "sequence 99 not found",
    }
    assert env.api("$JS.API.STREAM.MSG.DELETE.SAMPLE", b"")["error"]["err_code"] == 10003
    assert env.api("$JS.API.STREAM.MSG.DELETE.SAMPLE", {"seq": 1, "no_erase": True}) == {
        "type": T + "stream_msg_delete_response",
        "success": True,
    }
    assert env.api("$JS.API.STREAM.MSG.DELETE.SAMPLE", {"seq": 1})["error"] == {
        "code": 400,
        "err_code": 10043,
        "description": "sequence 1 not found",
    }
    create(env, "FILE", storage="file")
    for _ in range(3):
        env.pub("file.a")
    assert env.api("$JS.API.STREAM.MSG.DELETE.FILE", {"seq": 99})["error"] == {
        "code": 500,
        "err_code": 10057,
        "description": "stream store EOF",
    }
    assert env.api("$JS.API.STREAM.MSG.DELETE.FILE", {"seq": 2})["success"] is True
    assert env.api("$JS.API.STREAM.MSG.DELETE.FILE", {"seq": 2})["error"] == {
        "code": 400,
        "err_code": 10043,
        "description": "sequence 2 not found",
    }
    assert env.api("$JS.API.STREAM.MSG.DELETE.FILE", {"seq": 1})["success"] is True
    assert env.api("$JS.API.STREAM.MSG.DELETE.FILE", {"seq": 1})["error"] == {
        "code": 500,
        "err_code": 10057,
        "description": "no message found",
    }


def test_cluster_only_calls(env):
    create(env)
    out = env.api("$JS.API.STREAM.LEADER.STEPDOWN.SAMPLE")
    assert out == {
        "type": T + "stream_leader_stepdown_response",
        "error": {"code": 503, "err_code": 10010, "description": "JetStream clustering support required"},
    }


def test_unknown_api_subject_gets_no_reply(env):
    assert env.api("$JS.API.FOO") is None
    assert env.api("$JS.API.STREAM.NOPE") is None


def test_advisories_only_when_someone_listens(env, monkeypatch):
    import natsd.jetstream.api.streams as streams_mod

    built = []
    orig = streams_mod.stream_action

    def spy(*a):
        built.append(a)
        return orig(*a)

    monkeypatch.setattr(streams_mod, "stream_action", spy)
    create(env, "Q1")
    assert built == []  # nobody listening: the advisory is not even built
    sub = env.ports.client_subscribe("$JS.EVENT.ADVISORY.>")
    create(env, "Q2")
    env.api("$JS.API.STREAM.DELETE.Q2")
    assert len(built) == 2
    created = [m.json() for m in sub.msgs if m.subject == "$JS.EVENT.ADVISORY.STREAM.CREATED.Q2"]
    assert created and created[0]["type"] == "io.nats.jetstream.advisory.v1.stream_action"
    assert created[0]["action"] == "create" and created[0]["stream"] == "Q2"
    assert len(created[0]["id"]) == 22
    deleted = [m.json() for m in sub.msgs if m.subject == "$JS.EVENT.ADVISORY.STREAM.DELETED.Q2"]
    assert deleted and deleted[0]["action"] == "delete"
    audits = [m.json() for m in sub.msgs if m.subject == "$JS.EVENT.ADVISORY.API"]
    assert audits and audits[0]["type"] == "io.nats.jetstream.advisory.v1.api_audit"
    assert audits[0]["subject"] == "$JS.API.STREAM.CREATE.Q2"


def test_account_without_jetstream_gets_10039(env):
    from tests.helpers.fakeports import FakePorts

    other = FakePorts("OTHER")
    env.engine.disable_account_api(other)
    inbox = other.client_subscribe("_INBOX.>")
    reply = other.request("$JS.API.INFO", b"")
    got = [m.json() for m in inbox.msgs if m.subject == reply]
    assert got == [
        {
            "type": T + "account_info_response",
            "error": {"code": 503, "err_code": 10039, "description": "JetStream not enabled for account"},
        }
    ]
    reply = other.request("$JS.API.STREAM.INFO.X", b"")
    assert [m.json()["error"]["err_code"] for m in inbox.msgs if m.subject == reply] == [10039]


def test_json_bytes_use_go_html_safe_escapes(env):
    reply = env.ports.request("$JS.API.STREAM.CREATE.GT", {"name": "GT", "subjects": ["gt.>"], "storage": "memory"})
    env.clock.run_soon()
    raw = env.replies(reply)[-1].payload
    assert b'"subjects":["gt.\\u003e"]' in raw and b">" not in raw


def test_empty_request_means_no_bytes_or_empty_object(env):
    create(env)
    assert env.api("$JS.API.STREAM.MSG.DELETE.SAMPLE", b"{}")["error"]["err_code"] == 10003
    assert env.api("$JS.API.STREAM.MSG.GET.SAMPLE", b" { } ")["error"]["err_code"] == 10003
    assert env.api("$JS.API.STREAM.DELETE.SAMPLE", b" ")["error"]["err_code"] == 10038
    assert env.api("$JS.API.STREAM.DELETE.SAMPLE", b"{}")["success"] is True


def test_update_toggles_direct_get_and_checks_overlap(env):
    create(env, "U1")
    create(env, "U2")
    base = {"name": "U1", "subjects": ["u1.>"], "storage": "memory"}
    assert not env.ports.would_have_responders("$JS.API.DIRECT.GET.U1")
    env.api("$JS.API.STREAM.UPDATE.U1", {**base, "allow_direct": True})
    assert env.ports.would_have_responders("$JS.API.DIRECT.GET.U1")
    env.api("$JS.API.STREAM.UPDATE.U1", {**base, "allow_direct": False})
    assert not env.ports.would_have_responders("$JS.API.DIRECT.GET.U1")
    out = env.api("$JS.API.STREAM.UPDATE.U1", {**base, "subjects": ["u1.>", "u2.x"]})
    assert out["error"]["err_code"] == 10065


def test_account_max_consumers_across_streams(tmp_path):
    from natsd.config.options import AccountJetStreamLimits
    from tests.unit.jetstream.test_stream_publish import _FakeConsumer

    env = JsEnv(str(tmp_path), account_limits=AccountJetStreamLimits(max_consumers=1))
    try:
        create(env, "A")
        create(env, "B")
        env.account.streams["A"].add_consumer(_FakeConsumer("C1"))
        with pytest.raises(Exception) as ei:
            env.account.streams["B"].add_consumer(_FakeConsumer("C2"))
        assert ei.value.err_code == 10026
        assert env.api("$JS.API.INFO")["consumers"] == 1
    finally:
        env.stop()


@pytest.mark.parametrize("storage", ["memory", "file"])
def test_purge_keep_counts_messages_not_sequences(env, storage):
    create(env, "P", subjects=["p.*"], storage=storage)
    for s in ("p.a", "p.b", "p.a", "p.b", "p.a"):
        env.pub(s)
    assert env.api("$JS.API.STREAM.PURGE.P", {"filter": "p.a"})["purged"] == 3
    assert env.api("$JS.API.STREAM.PURGE.P", {"keep": 1})["purged"] == 1
    st = env.api("$JS.API.STREAM.INFO.P")["state"]
    assert (st["messages"], st["first_seq"], st["last_seq"]) == (1, 4, 5)
