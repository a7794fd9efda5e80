"""Stream templates without sockets: API shapes and errors, auto-creation on publish, max_streams,
delete cascade, persistence and recovery (checksum), update refusal on owned streams."""

from __future__ import annotations

import json
import os

import pytest

from natsd.jetstream.templates import canonical_name
from tests.helpers.fakeports import JsEnv

pytestmark = pytest.mark.unit

TPL = {"subjects": ["CLIENT.*"], "storage": "file", "max_msg_size": 2048, "max_age": 365 * 86400 * 10**9}


def _create(env: JsEnv, name: str = "CLIENTS", max_streams: int = 1024, config: dict | None = None) -> dict:
    return env.api(
        f"$JS.API.STREAM.TEMPLATE.CREATE.{name}",
        {"name": name, "config": config if config is not None else TPL, "max_streams": max_streams},
    )


def test_canonical_name():
    assert canonical_name("CLIENT.acme") == "CLIENT_acme"
    assert canonical_name("a.b.c") == "a_b_c"


def test_create_info_names_shapes(env):
    out = _create(env)
    assert out["type"] == "io.nats.jetstream.api.v1.stream_template_create_response"
    assert out["config"]["name"] == "CLIENTS" and out["config"]["max_streams"] == 1024
    assert out["config"]["config"]["name"] == "_"
    assert out["config"]["config"]["subjects"] == ["CLIENT.*"]
    assert out["config"]["config"]["max_msg_size"] == 2048
    assert out["streams"] == []
    info = env.api("$JS.API.STREAM.TEMPLATE.INFO.CLIENTS")
    assert info["type"] == "io.nats.jetstream.api.v1.stream_template_info_response"
    assert info["config"] == out["config"] and info["streams"] == []
    names = env.api("$JS.API.STREAM.TEMPLATE.NAMES")
    assert names == {
        "type": "io.nats.jetstream.api.v1.stream_template_names_response",
        "total": 1,
        "offset": 0,
        "limit": 1024,
        "streams": ["CLIENTS"],
    }


def test_create_errors(env):
    out = env.api("$JS.API.STREAM.TEMPLATE.CREATE.X", {"name": "Y", "config": TPL, "max_streams": 1})
    assert out["error"] == {
        "code": 400,
        "err_code": 10073,
        "description": "template name in subject does not match request",
    }
    assert _create(env, "T", config={**TPL, "name": "foo"})["error"] == {
        "code": 500,
        "err_code": 10066,
        "description": "template config name should be empty",
    }
    assert _create(env)["type"].endswith("create_response")
    assert _create(env)["error"] == {
        "code": 500,
        "err_code": 10066,
        "description": 'template with name "CLIENTS" already exists',
    }
    assert env.api("$JS.API.STREAM.TEMPLATE.CREATE.T")["error"]["err_code"] == 10073  # empty body: no name
    neg = _create(env, "T", max_streams=-1)
    assert neg["error"]["description"] == (
        "invalid JSON: json: cannot unmarshal number -1 into Go struct field "
        "StreamTemplateConfig.max_streams of type uint32"
    )
    bad = _create(env, "T2", config={**TPL, "retention": "nope"})
    assert bad["error"]["err_code"] == 10025
    assert env.api("$JS.API.STREAM.TEMPLATE.INFO.NOPE")["error"] == {
        "code": 404,
        "err_code": 10068,
        "description": "template not found",
    }
    assert env.api("$JS.API.STREAM.TEMPLATE.DELETE.NOPE")["error"]["err_code"] == 10068
    assert env.api("$JS.API.STREAM.TEMPLATE.INFO.CLIENTS", {"x": 1})["error"]["err_code"] == 10038
    assert "error" not in env.api("$JS.API.STREAM.TEMPLATE.INFO.CLIENTS", b"{}")  # {} counts as empty


def test_first_publish_creates_stream_and_stores_message(env):
    _create(env)
    ack = env.pub("CLIENT.acme", b"hello")
    assert ack == {"stream": "CLIENT_acme", "seq": 1}
    assert env.pub("CLIENT.acme", b"again") == {"stream": "CLIENT_acme", "seq": 2}
    s = env.account.streams["CLIENT_acme"]
    assert s.config.subjects == ["CLIENT.acme"]
    assert s.config.max_msg_size == 2048 and s.store.state().msgs == 2
    assert env.api("$JS.API.STREAM.TEMPLATE.INFO.CLIENTS")["streams"] == ["CLIENT_acme"]
    # owned streams may not be edited
    upd = env.api("$JS.API.STREAM.UPDATE.CLIENT_acme", {"name": "CLIENT_acme", "subjects": ["CLIENT.acme"]})
    assert upd["error"] == {
        "code": 500,
        "err_code": 10052,
        "description": "stream configuration update not allowed on template owned stream",
    }


def test_max_streams_caps_creation(env):
    _create(env, max_streams=2)
    assert env.pub("CLIENT.a")["stream"] == "CLIENT_a"
    assert env.pub("CLIENT.b")["stream"] == "CLIENT_b"
    # at the cap: no stream, no reply (the reference only logs a warning)
    assert env.pub("CLIENT.c") is None
    assert "CLIENT_c" not in env.account.streams
    # existing streams still take messages
    assert env.pub("CLIENT.a")["seq"] == 2
    # deleting an owned stream frees a slot
    env.api("$JS.API.STREAM.DELETE.CLIENT_b")
    assert env.pub("CLIENT.c")["stream"] == "CLIENT_c"


def test_max_streams_zero_creates_nothing(env):
    _create(env, max_streams=0)
    assert env.pub("CLIENT.a") is None
    assert not env.account.streams


def test_delete_cascades_to_streams(env):
    _create(env)
    env.create("OTHER", subjects=["other.>"], storage="memory")
    for t in ("a", "b", "c"):
        env.pub(f"CLIENT.{t}")
    out = env.api("$JS.API.STREAM.TEMPLATE.DELETE.CLIENTS")
    assert out == {"type": "io.nats.jetstream.api.v1.stream_template_delete_response", "success": True}
    assert sorted(env.account.streams) == ["OTHER"]
    assert env.api("$JS.API.STREAM.TEMPLATE.NAMES")["streams"] == []
    assert env.pub("CLIENT.d") is None  # the subject space is no longer captured


def test_templates_and_their_streams_survive_restart(env):
    _create(env, max_streams=2)
    env.pub("CLIENT.a", b"1")
    d = os.path.join(env.options.jetstream.store_dir, "jetstream", "$G", "templates", "CLIENTS")
    with open(os.path.join(d, "meta.inf"), "rb") as f:
        meta = json.loads(f.read())
    assert meta["name"] == "CLIENTS" and meta["max_streams"] == 2
    env.restart()
    info = env.api("$JS.API.STREAM.TEMPLATE.INFO.CLIENTS")
    assert info["streams"] == ["CLIENT_a"] and info["config"]["max_streams"] == 2
    assert env.pub("CLIENT.a", b"2") == {"stream": "CLIENT_a", "seq": 2}
    assert env.pub("CLIENT.b")["stream"] == "CLIENT_b"
    assert env.pub("CLIENT.c") is None  # still capped at 2 after the restart
    env.api("$JS.API.STREAM.TEMPLATE.DELETE.CLIENTS")
    assert not os.path.exists(d)
    env.restart()
    assert env.api("$JS.API.STREAM.TEMPLATE.NAMES")["total"] == 0
    assert not env.account.streams


def test_corrupt_template_is_skipped_at_recovery(env, caplog):
    _create(env)
    d = os.path.join(env.options.jetstream.store_dir, "jetstream", "$G", "templates", "CLIENTS")
    with open(os.path.join(d, "meta.inf"), "ab") as f:
        f.write(b" ")
    with caplog.at_level("WARNING", logger="natsd.jetstream.templates"):
        env.restart()  # the account recovers its templates when it starts
    assert "checksums do not match" in caplog.text
    assert env.api("$JS.API.STREAM.TEMPLATE.NAMES")["total"] == 0


def test_memory_template_is_not_persisted(env):
    _create(env, "MEM", config={**TPL, "subjects": ["mem.*"], "storage": "memory"})
    assert env.pub("mem.x")["stream"] == "mem_x"
    env.restart()
    assert env.api("$JS.API.STREAM.TEMPLATE.NAMES")["total"] == 0


def test_account_stream_limit_stops_template(tmp_path):
    from natsd.config.options import AccountJetStreamLimits

    e = JsEnv(str(tmp_path), account_limits=AccountJetStreamLimits(max_streams=1))
    try:
        _create(e)
        assert e.pub("CLIENT.a")["stream"] == "CLIENT_a"
        assert e.pub("CLIENT.b") is None
        assert sorted(e.account.streams) == ["CLIENT_a"]
    finally:
        e.stop()
