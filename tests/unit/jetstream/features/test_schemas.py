"""JSON Schemas at publish (natsd.schema.<subject>): inline and KV-referenced, PubAck errors."""

from __future__ import annotations

import json

ORDER = {
    "type": "object",
    "required": ["id", "qty"],
    "properties": {"id": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
}


def test_inline_schema_refuses_and_stores_nothing(env) -> None:
    env.create("ORD", subjects=["orders.>", "other.>"], metadata={"natsd.schema.orders.*": json.dumps(ORDER)})
    ok = env.pub("orders.new", b'{"id": "a", "qty": 2}')
    assert ok == {"stream": "ORD", "seq": 1}
    bad = env.pub("orders.new", b'{"id": "a", "qty": 0}')
    assert bad["error"]["err_code"] == 19010 and bad["error"]["code"] == 400
    d = bad["error"]["description"]
    assert d.startswith("message on orders.new does not match schema inline:orders.*: ")
    assert "qty" in d and "1" in d  # the first violation, named
    notjson = env.pub("orders.new", b"hello")
    assert "payload is not JSON" in notjson["error"]["description"]
    assert env.pub("other.x", b"anything")["seq"] == 2  # no schema for this subject
    assert env.api("$JS.API.STREAM.INFO.ORD")["state"]["messages"] == 2


def test_kv_schema_changes_without_a_stream_update(env) -> None:
    env.create("KV_schemas", subjects=["$KV.schemas.>"], max_msgs_per_subject=5, allow_direct=True)
    env.create("ORD", subjects=["orders.>"], metadata={"natsd.schema.orders.>": "kv:schemas/orders"})
    missing = env.pub("orders.1", b"{}")
    assert missing["error"]["err_code"] == 19011
    assert "kv:schemas/orders" in missing["error"]["description"]
    env.pub("$KV.schemas.orders", json.dumps(ORDER).encode())
    assert "error" in env.pub("orders.1", b'{"id": "a"}')
    assert env.pub("orders.1", b'{"id": "a", "qty": 1}')["seq"] == 1
    # The schema changes with a KV put; the stream picks it up at the next publish.
    env.pub("$KV.schemas.orders", json.dumps({"type": "object", "required": ["id"]}).encode())
    assert env.pub("orders.1", b'{"id": "a"}')["seq"] == 2
    env.pub("$KV.schemas.orders", b"", headers={"KV-Operation": "DEL"})
    assert env.pub("orders.1", b'{"id": "a"}')["error"]["err_code"] == 19011


def test_schema_survives_restart_and_update_removes_it(env) -> None:
    md = {"natsd.schema.orders.*": json.dumps(ORDER)}
    env.create("ORD", subjects=["orders.>"], metadata=md)
    env.restart()
    assert env.pub("orders.x", b'{"id": 1}')["error"]["err_code"] == 19010
    r = env.api("$JS.API.STREAM.UPDATE.ORD", {"name": "ORD", "subjects": ["orders.>"]})
    assert "error" not in r
    assert env.pub("orders.x", b'{"id": 1}')["seq"] == 1
