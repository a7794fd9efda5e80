"""Differential test: request bodies nats-server's strict Go decoder refuses or reads in its own way
(unknown fields, wrong JSON kinds, syntax errors with offsets, several values, case-insensitive
names), empty-payload rules, paging offsets, empty-stream state, config echo and the answers to
deleting a missing message, run against the
reference nats-server and natsd; the replies must be equal once values that legitimately differ
(timestamps, ids, version metadata) are normalised."""

from __future__ import annotations

import json

import nats
import pytest

from tests.helpers.inproc import side_by_side
from tests.helpers.servers import reference_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed"),
]

# (subject, body[, headers]); a dict/list body is sent as JSON, bytes as they are.
SCRIPT: list[tuple] = [
    ("$JS.API.STREAM.CREATE.E", {"name": "E", "subjects": ["e.>"]}),
    ("$JS.API.STREAM.INFO.E", b""),
    ("$JS.API.STREAM.INFO.E", {"deleted_details": True}),
    ("$JS.API.STREAM.CREATE.M", {"name": "M", "subjects": ["m.>"], "storage": "memory"}),
    ("$JS.API.STREAM.INFO.M", {"deleted_details": True}),
    ("$JS.API.STREAM.PURGE.M", b""),
    ("$JS.API.STREAM.INFO.M", {"deleted_details": True}),
    ("$JS.API.STREAM.CREATE.F", {"name": "F", "subjects": ["f.>"], "first_seq": 1}),
    ("$JS.API.STREAM.INFO.F", {"deleted_details": True}),
    ("$JS.API.STREAM.CREATE.H", {"name": "H", "subjects": ["h.>"], "storage": "memory", "first_seq": 5}),
    ("$JS.API.STREAM.INFO.H", {"deleted_details": True}),
    ("$JS.API.CONSUMER.LIST.E", b""),
    ("$JS.API.CONSUMER.NAMES.E", b""),
    ("$JS.API.CONSUMER.CREATE.E", {"stream_name": "E", "config": {"ack_policy": "explicit"}}),
    ("$JS.API.CONSUMER.CREATE.E", {"stream_name": "E", "config": {"durable_name": "D", "ack_policy": "explicit"}}),
    ("$JS.API.CONSUMER.INFO.E.D", b"x"),
    ("$JS.API.CONSUMER.INFO.NOPE.D", b"x"),
    ("$JS.API.CONSUMER.DELETE.E.D", b"{"),
    ("$JS.API.CONSUMER.INFO.E.D", b""),
    ("$JS.API.CONSUMER.INFO.E.D", b"{}"),
    ("$JS.API.STREAM.CREATE.G", {"name": "G", "subjects": ["g.>"], "max_msg": 5}),
    ("$JS.API.STREAM.CREATE.G", {"name": "G", "subjects": ["g.>"], "mirror": {"name": "E", "foo": 1}}),
    ("$JS.API.STREAM.CREATE.G", {"name": "G", "subjects": ["g.>"], "consumer_limits": {"foo": 1}}),
    ("$JS.API.STREAM.CREATE.G", {"name": "G", "subjects": ["g.>"], "max_msgs": "5"}),
    ("$JS.API.STREAM.CREATE.G", {"name": "G", "subjects": ["g.>"], "sources": [{"name": 5}]}),
    ("$JS.API.STREAM.CREATE.G", {"name": "G", "subjects": ["g.>"], "metadata": {"k": 5}}),
    ("$JS.API.STREAM.UPDATE.E", {"name": "E", "subjects": ["e.>"], "foo": 1}),
    ("$JS.API.CONSUMER.CREATE.E", {"stream_name": "E", "config": {"Durable": "X"}}),
    ("$JS.API.CONSUMER.CREATE.E", {"stream_name": "E", "config": {"DURABLE_NAME": "x"}}),
    ("$JS.API.CONSUMER.CREATE.E", {"stream_name": "E", "config": {"durable_name": 5}}),
    ("$JS.API.CONSUMER.CREATE.E", {"stream_name": "E", "config": {"max_deliver": "5"}}),
    ("$JS.API.CONSUMER.CREATE.E", {"stream_name": "E", "config": {"max_deliver": 5.5}}),
    ("$JS.API.CONSUMER.CREATE.E", {"stream_name": "E", "config": {"ack_wait": "5s"}}),
    ("$JS.API.CONSUMER.CREATE.E.C1", {"stream_name": "E", "config": {"name": "C1"}, "foo": 1}),
    ("$JS.API.STREAM.INFO.E", {"offset": "5"}),
    ("$JS.API.STREAM.INFO.E", {"offset": 1.5}),
    ("$JS.API.STREAM.INFO.E", {"offset": 500, "subjects_filter": ">"}),
    ("$JS.API.STREAM.INFO.E", {"deleted_details": "yes"}),
    ("$JS.API.STREAM.INFO.E", {"deleted_details": None}),
    ("$JS.API.STREAM.INFO.E", {"foo": 1}),
    ("$JS.API.STREAM.INFO.E", [1]),
    ("$JS.API.STREAM.INFO.E", b"5"),
    ("$JS.API.STREAM.INFO.E", b"{}x"),
    ("$JS.API.STREAM.INFO.E", b"{} {}"),
    ("$JS.API.STREAM.INFO.E", b"  "),
    ("$JS.API.STREAM.INFO.E", b"null"),
    ("$JS.API.STREAM.INFO.E", b'{"offset":}'),
    ("$JS.API.STREAM.INFO.E", b"{'a':1}"),
    ("$JS.API.STREAM.INFO.E", b'{"a":tru}'),
    ("$JS.API.STREAM.INFO.E", b'{"a":1 "b"}'),
    ("$JS.API.STREAM.INFO.E", b'{"a" 1}'),
    ("$JS.API.STREAM.INFO.E", b"[1 2]"),
    ("$JS.API.STREAM.INFO.E", b'{"a":"\\q"}'),
    ("$JS.API.STREAM.INFO.E", b'{"a":"\\u12g4"}'),
    ("$JS.API.STREAM.INFO.E", b'{"a":-x}'),
    ("$JS.API.STREAM.INFO.E", b'{"a":1.x}'),
    ("$JS.API.STREAM.INFO.E", b'{"a":1ex}'),
    ("$JS.API.STREAM.INFO.E", b'{"a":"\x01"}'),
    ("$JS.API.STREAM.INFO.E", b'{"a":NaN}'),
    ("$JS.API.STREAM.INFO.E", b'{"subjects_filter":"e.\xff"}'),
    ("$JS.API.STREAM.INFO.E", b'{"a":\xc3\xa9}'),
    ("$JS.API.STREAM.INFO.E", b'{"a":01}'),
    ("$JS.API.STREAM.INFO.E", b'{"a": [1,]}'),
    ("$JS.API.STREAM.INFO.E", b"{,}"),
    ("$JS.API.STREAM.INFO.E", b'"abc'),
    ("$JS.API.STREAM.INFO.E", b'{"a":{"b":[{"c":x}]}}'),
    ("$JS.API.STREAM.INFO.E", b'{"offset":1}{"offset":"x"}'),
    ("$JS.API.STREAM.INFO.E", b'{"offset":1}]'),
    ("$JS.API.STREAM.INFO.E", {"subjects_filter": 5}),
    ("$JS.API.STREAM.NAMES", {"subject": 5}),
    ("$JS.API.STREAM.NAMES", {"foo": 1}),
    ("$JS.API.STREAM.LIST", {"foo": 1}),
    ("$JS.API.STREAM.NAMES", {"offset": "x"}),
    ("e.a", b"1", {"Nats-Expected-Last-Subject-Sequence": ""}),
    ("e.b", b"2"),
    ("e.a", b"3"),
    ("$JS.API.STREAM.MSG.GET.E", {"seq": 1, "foo": 1}),
    ("$JS.API.STREAM.MSG.GET.E", {"seq": 0}),
    ("$JS.API.STREAM.MSG.GET.E", {"seq": -1}),
    ("$JS.API.STREAM.MSG.GET.E", {"seq": 1.5}),
    ("$JS.API.STREAM.MSG.GET.E", b'{"seq":1e3}'),
    ("$JS.API.STREAM.MSG.GET.E", {"seq": 18446744073709551616}),
    ("$JS.API.STREAM.MSG.GET.E", {"last_by_subj": ["a"]}),
    ("$JS.API.STREAM.MSG.GET.E", {"last_by_subj": {"a": 1}}),
    ("$JS.API.STREAM.MSG.GET.E", {"last_by_subj": True}),
    ("$JS.API.STREAM.MSG.GET.E", b"{"),
    ("$JS.API.STREAM.MSG.GET.E", {"seq": "x"}),
    ("$JS.API.STREAM.MSG.DELETE.E", {"seq": 9, "foo": 1}),
    ("$JS.API.STREAM.MSG.DELETE.E", {"seq": 7}),
    ("$JS.API.STREAM.MSG.DELETE.E", {"seq": 2, "no_erase": "x"}),
    ("$JS.API.STREAM.PURGE.E", {"foo": 1, "keep": 5}),
    ("$JS.API.STREAM.PURGE.E", {"seq": "1"}),
    ("$JS.API.STREAM.PURGE.E", {"keep": -1}),
    ("$JS.API.STREAM.PURGE.E", b"[1]"),
    ("$JS.API.CONSUMER.NAMES.E", {"foo": 1}),
    ("$JS.API.CONSUMER.NAMES.E", {"offset": "x"}),
    ("$JS.API.CONSUMER.LIST.E", {"offset": [1]}),
    ("$JS.API.CONSUMER.LIST.E", {"offset": 100}),
    ("$JS.API.CONSUMER.NAMES.E", {"offset": 100}),
    ("$JS.API.STREAM.NAMES", {"offset": 100}),
    ("$JS.API.CONSUMER.FOO.E", b""),
    ("$JS.API.CONSUMER.FOO.E.X", b""),
    ("$JS.API.DIRECT.FOO", b""),
    ("$JS.API.CONSUMER.MSG.NEXT.E.NOPE", b""),
    ("$JS.API.DIRECT.GET.NOPE", b""),
    ("$JS.API.INFO", b""),
]
# Message deletes: the reference's memory and file stores answer a missing message differently.
for _st, _n in (("memory", "DM"), ("file", "DF")):
    SCRIPT += [
        (f"$JS.API.STREAM.CREATE.{_n}", {"name": _n, "subjects": [_n.lower() + ".>"], "storage": _st}),
        (_n.lower() + ".a", b"1"),
        (_n.lower() + ".a", b"2"),
        (_n.lower() + ".a", b"3"),
        *(
            (f"$JS.API.STREAM.MSG.DELETE.{_n}", body)
            for body in (
                {"seq": 0},
                {"seq": 2},
                {"seq": 2},
                {"seq": 2, "no_erase": True},
                {"seq": 9},
                {"seq": 9, "no_erase": True},
            )
        ),
        (f"$JS.API.STREAM.PURGE.{_n}", b""),
        *((f"$JS.API.STREAM.MSG.DELETE.{_n}", {"seq": seq}) for seq in (1, 3, 4)),
    ]

# "natsd": $JS.API.INFO's list of natsd-only features (issue 27), an extension nats clients ignore
_DROP = {"ts", "created", "first_ts", "last_ts", "time", "cluster", "bytes", "name", "api", "natsd"}


def _normalise(obj):
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in _DROP:
                continue
            if k == "metadata" and isinstance(v, dict):
                v = {mk: mv for mk, mv in v.items() if mk not in ("_nats.ver", "_nats.level")}
            out[k] = _normalise(v)
        return out
    if isinstance(obj, list):
        return [_normalise(v) for v in obj]
    return obj


async def _run(url: str) -> list:
    nc = await nats.connect(url)
    out: list = []
    try:
        for step in SCRIPT:
            subject, body = step[0], step[1]
            headers = step[2] if len(step) > 2 else None
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            try:
                msg = await nc.request(subject, data, timeout=0.5 if "FOO" in subject else 2, headers=headers)
            except nats.errors.NoRespondersError:
                out.append((subject, "no responders"))
                continue
            except nats.errors.TimeoutError:
                out.append((subject, "timeout"))
                continue
            out.append((subject, data, _normalise(json.loads(msg.data))))
    finally:
        await nc.close()
    return out


async def test_request_decoding_matches_reference(tmp_path):
    expected, got = await side_by_side(tmp_path, _run)
    assert len(got) == len(expected) == len(SCRIPT)
    for g, e in zip(got, expected):
        assert g == e


# Pull request bodies: nats-server reads them with a plain json.Unmarshal (unknown fields ignored,
# no offsets, a body not starting with "{" read as a batch size or ignored).
PULL_BODIES = [
    b"{",
    b"[1]",
    b'{"batch":"x"}',
    b'{"batch":1,"foo":1}',
    b'{"expires":"1s"}',
    b'"s"',
    b"5",
    b'{"batch":-1}',
    b'{"batch":1.5}',
    b'{"batch":1} x',
    b'{"batch":1}{"batch":2}',
    b'{"BATCH":1}',
    b'{"batch":1,"no_wait":"yes"}',
    b'{"idle_heartbeat":2000000000,"expires":1000000000}',
]


async def _pulls(url: str) -> list:
    nc = await nats.connect(url)
    out: list = []
    try:
        await nc.request("$JS.API.STREAM.CREATE.P", json.dumps({"name": "P", "subjects": ["p.>"]}).encode())
        for i in range(len(PULL_BODIES)):
            await nc.request("p.a", str(i).encode())
        await nc.request(
            "$JS.API.CONSUMER.CREATE.P.D",
            json.dumps({"stream_name": "P", "config": {"durable_name": "D", "ack_policy": "none"}}).encode(),
        )
        for body in PULL_BODIES:
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            await nc.publish("$JS.API.CONSUMER.MSG.NEXT.P.D", body, reply=inbox)
            try:
                m = await sub.next_msg(timeout=0.5)
                hdrs = m.headers or {}
                out.append((body, hdrs.get("Status"), hdrs.get("Description"), bool(m.data)))
            except nats.errors.TimeoutError:
                out.append((body, "timeout"))
            await sub.unsubscribe()
    finally:
        await nc.close()
    return out


async def test_pull_request_bodies_match_reference(tmp_path):
    expected, got = await side_by_side(tmp_path, _pulls)
    assert got == expected
