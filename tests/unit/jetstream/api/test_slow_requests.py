"""Slow API requests (issue 14, item 6): a STREAM.CREATE / UPDATE large enough to hold the loop
is decoded and validated off the loop (Ports.offload) and subscribes its subjects across loop
turns; the account's other API requests wait and are answered in order; the answers are the
same as for the same request handled in one go."""

from __future__ import annotations

import json

import pytest

from natsd.jetstream.api import streams
from natsd.jetstream.api.router import MAX_PENDING_REQUESTS
from tests.helpers.fakeports import JsEnv

pytestmark = pytest.mark.unit

N = 4000  # ~60 KB of config: above SLOW_REQUEST_BYTES


@pytest.fixture
def env(tmp_path):
    e = JsEnv(str(tmp_path))
    yield e
    e.stop()


def _cfg(name: str, subjects: list[str], **kw) -> dict:
    return {"name": name, "subjects": subjects, "storage": "memory", **kw}


def _one_turn(env: JsEnv) -> int:
    """Run the callbacks queued so far (one loop turn); returns how many ran."""
    clock = env.clock
    batch, clock._soon = clock._soon, []
    for cb in batch:
        cb()
    return len(batch)


def _reply(env: JsEnv, inbox: str) -> dict | None:
    got = env.replies(inbox)
    return got[-1].json() if got else None


def test_large_create_is_a_slow_request_answered_in_order(env):
    subjects = [f"ov.{i}.*" for i in range(N)]
    body = json.dumps(_cfg("BIG", subjects)).encode()
    assert len(body) > streams.SLOW_REQUEST_BYTES
    env.ports.defer_offload = True
    create = env.ports.request("$JS.API.STREAM.CREATE.BIG", body)
    info = env.ports.request("$JS.API.STREAM.INFO.BIG", b"")
    names = env.ports.request("$JS.API.STREAM.NAMES", b"")
    # Decoding waits off the loop: nothing answered, the later requests wait behind it.
    assert _reply(env, create) is None and _reply(env, info) is None and _reply(env, names) is None
    assert len(env.ports.offloaded) == 1
    turns = 0
    while _reply(env, create) is None:
        ran = env.ports.run_offloaded() + _one_turn(env)
        assert ran, "the slow request stalled"
        turns += 1
        if _reply(env, create) is None:
            assert _reply(env, info) is None  # still waiting, in order
    # decode, validation, overlap: three offloads; N / SUBSCRIBE_CHUNK subscription turns
    assert turns >= 3 + N // streams.SUBSCRIBE_CHUNK - 1
    got = _reply(env, create)
    assert got["type"] == "io.nats.jetstream.api.v1.stream_create_response"
    assert got["config"]["subjects"] == subjects and got["did_create"] is True
    env.clock.run_soon()
    assert _reply(env, info)["config"]["name"] == "BIG"
    assert _reply(env, names)["streams"] == ["BIG"]
    # every subject captured, the last subscribed as well as the first
    env.ports.defer_offload = False
    assert env.pub("ov.0.x", b"a") == {"stream": "BIG", "seq": 1}
    assert env.pub(f"ov.{N - 1}.x", b"a") == {"stream": "BIG", "seq": 2}


def _both_ways(tmp_path, name: str, subjects: list[str], pad: int, **kw) -> tuple[dict, dict]:
    """The same create, once padded above the slow threshold (extra whitespace), once not."""
    out = []
    for i, extra in enumerate((0, pad)):
        e = JsEnv(str(tmp_path / f"e{i}"))
        try:
            e.create("OTHER", subjects=["taken.>"], storage="memory")
            body = json.dumps(_cfg(name, subjects, **kw)).encode() + b" " * extra
            out.append(e.api(f"$JS.API.STREAM.CREATE.{name}", body))
        finally:
            e.stop()
    return out[0], out[1]


@pytest.mark.parametrize(
    "subjects,kw",
    [
        (["a.*", "b.>", "a.x"], {}),  # overlap inside the request (10052)
        (["x.1", "taken.1"], {}),  # overlap with another stream (10065)
        (["x.1", "x..y"], {}),  # invalid subject
        (["x.1"], {"max_age": -1}),  # invalid config
        (["x.1"], {"num_replicas": 3}),  # replicas refused
    ],
)
def test_slow_and_inline_requests_answer_alike(tmp_path, subjects, kw):
    small, big = _both_ways(tmp_path, "S", subjects, streams.SLOW_REQUEST_BYTES + 1, **kw)
    assert small == big
    assert "error" in small


def test_slow_create_of_an_existing_stream_and_bad_json(env):
    subjects = [f"ov.{i}" for i in range(N)]
    body = json.dumps(_cfg("BIG", subjects)).encode()
    first = env.api("$JS.API.STREAM.CREATE.BIG", body)
    again = env.api("$JS.API.STREAM.CREATE.BIG", body)
    assert first["config"] == again["config"]
    bad = env.api("$JS.API.STREAM.CREATE.BIG", b"{" + b" " * streams.SLOW_REQUEST_BYTES)
    assert bad["error"]["err_code"] == 10025  # invalid JSON, as the inline path answers


def test_slow_update_adds_a_subject(env):
    subjects = [f"ov.{i}" for i in range(N)]
    env.api("$JS.API.STREAM.CREATE.BIG", json.dumps(_cfg("BIG", subjects)).encode())
    env.ports.defer_offload = True
    upd = env.ports.request("$JS.API.STREAM.UPDATE.BIG", json.dumps(_cfg("BIG", subjects + ["new"])).encode())
    assert _reply(env, upd) is None
    while env.ports.run_offloaded() + _one_turn(env):
        pass
    assert _reply(env, upd)["config"]["subjects"][-1] == "new"
    env.ports.defer_offload = False
    assert env.pub("new", b"a") == {"stream": "BIG", "seq": 1}


def test_waiting_requests_are_bounded(env, monkeypatch):
    from natsd.jetstream.api import router

    monkeypatch.setattr(router, "MAX_PENDING_REQUESTS", 3)
    assert MAX_PENDING_REQUESTS == 10_000  # the real bound (nats-server's API queue)
    env.ports.defer_offload = True
    body = json.dumps(_cfg("BIG", [f"ov.{i}" for i in range(N)])).encode()
    create = env.ports.request("$JS.API.STREAM.CREATE.BIG", body)
    waiting = [env.ports.request("$JS.API.STREAM.NAMES", b"") for _ in range(5)]
    env.ports.defer_offload = False
    while env.ports.run_offloaded() + _one_turn(env):
        pass
    assert _reply(env, create)["did_create"] is True
    assert [_reply(env, w) is not None for w in waiting] == [True, True, True, False, False]


def test_no_automatic_collection_while_a_slow_request_runs(env):
    import gc

    assert gc.isenabled()
    env.ports.defer_offload = True
    body = json.dumps(_cfg("BIG", [f"ov.{i}" for i in range(N)])).encode()
    create = env.ports.request("$JS.API.STREAM.CREATE.BIG", body)
    try:
        assert not gc.isenabled()  # the collector's full-heap scans were the long pauses
        while env.ports.run_offloaded() + _one_turn(env):
            pass
        assert _reply(env, create)["did_create"] is True
        assert gc.isenabled()
    finally:
        gc.enable()


def test_collection_resumes_when_the_last_of_overlapping_slow_requests_ends(tmp_path):
    import gc

    envs = [JsEnv(str(tmp_path / f"a{i}")) for i in range(2)]
    body = json.dumps(_cfg("BIG", [f"ov.{i}" for i in range(N)])).encode()
    try:
        inboxes = []
        for e in envs:
            e.ports.defer_offload = True
            inboxes.append(e.ports.request("$JS.API.STREAM.CREATE.BIG", body))
        assert not gc.isenabled()
        first, second = envs
        while first.ports.run_offloaded() + _one_turn(first):
            pass
        assert _reply(first, inboxes[0])["did_create"] is True
        assert not gc.isenabled()  # the other account's request still runs
        while second.ports.run_offloaded() + _one_turn(second):
            pass
        assert _reply(second, inboxes[1])["did_create"] is True
        assert gc.isenabled()
    finally:
        gc.enable()
        for e in envs:
            e.stop()
