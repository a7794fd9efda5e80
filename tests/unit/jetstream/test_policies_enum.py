"""Stream and consumer policies are StrEnums whose values are the wire spellings.

What a client sees must not change: every way natsd turns a value into text (the API's JSON encoder,
``json.dumps``, ``str()``, f-strings, ``format`` with a spec, ``%s``, ``.encode()``) gives the bare
spelling, exactly as the plain strings did; decoding a config gives members, and unknown spellings
keep the reference's error texts.
"""

from __future__ import annotations

import json

import pytest

from natsd.jetstream.errors import ApiError
from natsd.jetstream.api.router import dumps
from natsd.jetstream.config.consumer_config import ConsumerConfig
from natsd.jetstream.config.models import (
    AckPolicy,
    DeliverPolicy,
    DiscardPolicy,
    PersistMode,
    PriorityPolicy,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StreamConfig,
)
from natsd.store import base as store_base

ENUMS = [
    RetentionPolicy,
    DiscardPolicy,
    StorageType,
    StoreCompression,
    PersistMode,
    DeliverPolicy,
    AckPolicy,
    ReplayPolicy,
    PriorityPolicy,
]
MEMBERS = [m for e in ENUMS for m in e]


@pytest.mark.parametrize("member", MEMBERS, ids=lambda m: f"{type(m).__name__}.{m.name}")
def test_every_text_form_is_the_wire_spelling(member):
    plain = member.value
    assert type(plain) is str
    assert member == plain and hash(member) == hash(plain)
    assert str(member) == plain
    assert f"{member}" == plain and "{}".format(member) == plain and "%s" % member == plain
    assert format(member, ">20") == format(plain, ">20")  # a format spec pads the value, not the name
    assert member.encode() == plain.encode()
    assert json.dumps(member) == json.dumps(plain)
    assert json.dumps({member: member}) == json.dumps({plain: plain})
    assert dumps({"v": member, member: [member]}) == dumps({"v": plain, plain: [plain]})


def test_the_store_and_the_domain_share_one_storage_and_discard_type():
    assert StorageType is store_base.StorageType and DiscardPolicy is store_base.DiscardPolicy


def test_stream_config_decodes_to_members_and_encodes_as_before():
    d = {
        "name": "S",
        "retention": "workqueue",
        "discard": "NEW",
        "storage": "memory",
        "compression": "s2",
        "persist_mode": "default",
    }
    cfg = StreamConfig.from_json(d)
    assert cfg.retention is RetentionPolicy.WORKQUEUE
    assert cfg.discard is DiscardPolicy.NEW  # Go's decoder lower-cases discard
    assert cfg.storage is StorageType.MEMORY
    assert cfg.compression is StoreCompression.S2
    assert cfg.persist_mode is PersistMode.DEFAULT
    out = cfg.to_json()
    assert "persist_mode" not in out  # the default is omitted (omitempty), as before
    assert dumps(out).startswith(b'{"name":"S","retention":"workqueue",')
    assert b'"discard":"new","storage":"memory"' in dumps(out) and b'"compression":"s2"' in dumps(out)
    assert StreamConfig.from_json(json.loads(dumps(out))) == cfg  # round trip through the wire


@pytest.mark.parametrize("field,value", [("retention", "forever"), ("storage", 1), ("discard", [])])
def test_stream_config_unknown_spelling_keeps_the_error(field, value):
    with pytest.raises(ApiError) as ei:
        StreamConfig.from_json({"name": "S", field: value})
    assert ei.value.err_code == 10025 and "can not unmarshal" in ei.value.description


def test_consumer_config_decodes_to_members_and_encodes_as_before():
    cfg = ConsumerConfig.from_json(
        {
            "ack_policy": "explicit",
            "deliver_policy": "undefined",
            "replay_policy": "original",
            "priority_policy": "pinned_client",
        }
    )
    assert cfg.ack_policy is AckPolicy.EXPLICIT
    assert cfg.deliver_policy is DeliverPolicy.ALL  # "undefined" reads as "all", as in the reference
    assert cfg.replay_policy is ReplayPolicy.ORIGINAL
    assert cfg.priority_policy is PriorityPolicy.PINNED_CLIENT
    assert dumps(cfg.to_json()) == (
        b'{"deliver_policy":"all","ack_policy":"explicit","replay_policy":"original",'
        b'"num_replicas":0,"priority_policy":"pinned_client"}'
    )


def test_consumer_config_unknown_spelling_keeps_the_errors():
    with pytest.raises(ApiError) as ei:
        ConsumerConfig.from_json({"ack_policy": "sometimes"})
    assert ei.value.description == 'invalid JSON: can not unmarshal "\\"sometimes\\""'
    with pytest.raises(ApiError) as ei:
        ConsumerConfig.from_json({"priority_policy": "loudest"})
    assert 'unknown priority policy: "loudest"' in ei.value.description
