"""The natsd.* metadata switch: parsing, the 19xxx errors at create/update, INFO and /jsz."""

from __future__ import annotations

import pytest

from natsd.jetstream.errors import ERROR_TABLE, ApiError, NatsdErrors
from natsd.jetstream.features import metadata as M

SEC = 1_000_000_000


def test_parse_stream_keys() -> None:
    f = M.parse_stream(
        {
            "natsd.keep_last_under_max_age": "true",
            "owner": "x",
            "natsd.schema.orders.*": '{"type": "object", "required": ["id"]}',
            "natsd.schema.users.>": "kv:schemas/users",
        }
    )
    assert f.keep_last_under_max_age is True
    assert [(s.pattern, s.name, s.bucket, s.key) for s in f.schemas] == [
        ("orders.*", "inline:orders.*", "", ""),
        ("users.>", "kv:schemas/users", "schemas", "users"),
    ]
    assert M.parse_stream({"owner": "x"}) is M.NO_STREAM_FEATURES
    assert M.parse_stream({"natsd.keep_last_under_max_age": "false"}) is M.NO_STREAM_FEATURES


@pytest.mark.parametrize(
    "md, code, text",
    [
        ({"natsd.keep_last_under_max_age": "maybe"}, 19001, '"maybe" is not a boolean'),
        ({"natsd.keep_lastt": "true"}, 19002, "natsd metadata natsd.keep_lastt is not a natsd feature"),
        ({"natsd.schema.orders.*": "{not json"}, 19001, "schema is not JSON"),
        ({"natsd.schema.orders.*": '{"type": 5}'}, 19001, "invalid JSON Schema"),
        ({"natsd.schema.orders..x": "{}"}, 19001, "is not a valid subject pattern"),
        ({"natsd.schema.orders.*": "kv:nobucket"}, 19001, "is not kv:<bucket>/<key>"),
        ({"natsd.dead_letter": "DLQ"}, 19001, "a dead-letter subject is a consumer setting"),
    ],
)
def test_parse_stream_refuses(md, code, text) -> None:
    with pytest.raises(ApiError) as ei:
        M.parse_stream(md)
    assert ei.value.err_code == code and text in ei.value.description


@pytest.mark.parametrize(
    "md, text",
    [
        ({"natsd.dead_letter": "dlq.*"}, "is not a literal subject"),
        ({"natsd.dead_letter": "$JS.API.x"}, "is a reserved subject"),
        ({"natsd.keep_last_under_max_age": "true"}, "this is a stream setting"),
        ({"natsd.partition": "x"}, "is not a natsd feature"),
    ],
)
def test_parse_consumer_refuses(md, text) -> None:
    with pytest.raises(ApiError) as ei:
        M.parse_consumer(md)
    assert text in ei.value.description and 19000 <= ei.value.err_code < 20000


def test_natsd_codes_stay_out_of_the_reference_table() -> None:
    codes = {d.err_code for d in vars(NatsdErrors).values() if hasattr(d, "err_code")}
    assert codes and all(19000 <= c < 20000 for c in codes)
    assert not codes & {d.err_code for d in ERROR_TABLE}


def test_stream_create_and_update_refuse_bad_settings(env) -> None:
    r = env.api(
        "$JS.API.STREAM.CREATE.S",
        {"name": "S", "subjects": ["s.>"], "metadata": {"natsd.keep_last_under_max_age": "sometimes"}},
    )
    assert r["error"] == {
        "code": 400,
        "err_code": 19001,
        "description": 'natsd metadata natsd.keep_last_under_max_age: "sometimes" is not a boolean '
        '(use "true" or "false")',
    }
    assert env.api("$JS.API.STREAM.INFO.S")["error"]["err_code"] == 10059  # nothing created
    env.create("S", metadata={"natsd.keep_last_under_max_age": "true"}, max_age=10 * SEC)
    r = env.api(
        "$JS.API.STREAM.UPDATE.S",
        {"name": "S", "subjects": ["s.>"], "max_age": 10 * SEC, "metadata": {"natsd.nope": "1"}},
    )
    assert r["error"]["err_code"] == 19002
    info = env.api("$JS.API.STREAM.INFO.S")
    assert info["config"]["metadata"]["natsd.keep_last_under_max_age"] == "true"


def test_consumer_create_refuses_bad_settings(env) -> None:
    env.create("S")
    r = env.api(
        "$JS.API.CONSUMER.CREATE.S.C",
        {
            "stream_name": "S",
            "config": {"durable_name": "C", "ack_policy": "explicit", "metadata": {"natsd.dead_letter": "bad subject"}},
        },
    )
    assert r["error"]["err_code"] == 19001
    r = env.api(
        "$JS.API.CONSUMER.CREATE.S.C",
        {
            "stream_name": "S",
            "config": {"durable_name": "C", "ack_policy": "explicit", "metadata": {"natsd.dead_letter": "dlq.s"}},
        },
    )
    assert "error" not in r and r["config"]["metadata"]["natsd.dead_letter"] == "dlq.s"
    # A dead-letter subject the consumer itself would read back is refused.
    r = env.api(
        "$JS.API.CONSUMER.CREATE.S.D",
        {
            "stream_name": "S",
            "config": {"durable_name": "D", "ack_policy": "explicit", "metadata": {"natsd.dead_letter": "s.dead"}},
        },
    )
    assert r["error"]["err_code"] == 19001 and "would read back" in r["error"]["description"]
    r = env.api(
        "$JS.API.CONSUMER.CREATE.S.E",
        {
            "stream_name": "S",
            "config": {
                "durable_name": "E",
                "ack_policy": "explicit",
                "filter_subject": "s.work",
                "metadata": {"natsd.dead_letter": "s.dead"},
            },
        },
    )
    assert "error" not in r, r  # (another filter: the copy stays in the stream for others)


def test_info_and_jsz_advertise_the_features(env) -> None:
    info = env.api("$JS.API.INFO")
    assert info["type"] == "io.nats.jetstream.api.v1.account_info_response"
    assert set(info["natsd"]["features"]) == {"dead_letter", "keep_last_under_max_age", "partition_key", "schemas"}
    assert info["natsd"]["metadata_prefix"] == "natsd."
    assert env.engine.jsz()["natsd"] == info["natsd"]


def test_keep_last_under_max_age_through_the_stream(env) -> None:
    env.create("KV", subjects=["kv.>"], max_age=10 * SEC, metadata={"natsd.keep_last_under_max_age": "true"})
    env.pub("kv.a", b"a1")
    env.pub("kv.b", b"b1")
    env.pub("kv.a", b"a2")
    env.clock.advance(11 * SEC)
    env.clock.run_soon()
    st = env.api("$JS.API.STREAM.INFO.KV")["state"]
    assert (st["messages"], st["first_seq"]) == (2, 2)
    env.clock.advance(3600 * SEC)
    env.restart()
    env.clock.advance(3600 * SEC)
    env.clock.run_soon()
    st = env.api("$JS.API.STREAM.INFO.KV")["state"]
    assert st["messages"] == 2
    env.pub("kv.b", b"b2")
    env.clock.advance(1)
    env.clock.run_soon()
    got = env.api("$JS.API.STREAM.MSG.GET.KV", {"last_by_subj": "kv.b"})
    assert got["message"]["seq"] == 4
    assert env.api("$JS.API.STREAM.INFO.KV")["state"]["messages"] == 2  # b1 went, b2 stays
    # Switched off by an update: age expiry applies to everything again.
    r = env.api("$JS.API.STREAM.UPDATE.KV", {"name": "KV", "subjects": ["kv.>"], "max_age": 10 * SEC})
    assert "error" not in r
    env.clock.advance(11 * SEC)
    env.clock.run_soon()
    assert env.api("$JS.API.STREAM.INFO.KV")["state"]["messages"] == 0
