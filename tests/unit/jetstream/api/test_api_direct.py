"""DIRECT.GET in both forms, without sockets: raw message replies with Nats-* headers, status
replies on misses and bad requests, no subscription at all without allow_direct."""

from __future__ import annotations

import pytest

from tests.helpers.fakeports import JsEnv

pytestmark = pytest.mark.unit


@pytest.fixture
def env(tmp_path):
    e = JsEnv(str(tmp_path))
    e.create("KV", storage="memory", subjects=["kv.>"], allow_direct=True, max_msgs_per_subject=5)
    e.pub("kv.a", b"one", {"H1": "v"})
    e.pub("kv.a", b"two")
    e.pub("kv.b", b"three")
    yield e
    e.stop()


def test_no_direct_get_without_allow_direct(env):
    env.create("PLAIN", storage="memory")
    assert not env.ports.would_have_responders("$JS.API.DIRECT.GET.PLAIN")
    assert not env.ports.would_have_responders("$JS.API.DIRECT.GET.PLAIN.plain.a")
    assert env.ports.would_have_responders("$JS.API.DIRECT.GET.KV")
    assert env.ports.would_have_responders("$JS.API.DIRECT.GET.KV.kv.a")


def test_get_by_seq_keeps_own_headers_and_adds_ours(env):
    [m] = env.request_msgs("$JS.API.DIRECT.GET.KV", {"seq": 1})
    assert m.payload == b"one"
    assert m.hdr.startswith(b"NATS/1.0\r\nH1: v\r\nNats-Stream: KV\r\nNats-Subject: kv.a\r\nNats-Sequence: 1\r\n")
    assert m.header("Nats-Time-Stamp").endswith("Z")
    assert m.hdr.endswith(b"\r\n\r\n")


def test_last_by_subject_forms(env):
    [m] = env.request_msgs("$JS.API.DIRECT.GET.KV", {"last_by_subj": "kv.a"})
    assert m.payload == b"two" and m.header("Nats-Sequence") == "2"
    assert m.hdr.startswith(b"NATS/1.0\r\nNats-Stream: KV\r\n")
    [m] = env.request_msgs("$JS.API.DIRECT.GET.KV.kv.b")
    assert m.payload == b"three" and m.header("Nats-Subject") == "kv.b"
    [m] = env.request_msgs("$JS.API.DIRECT.GET.KV", {"next_by_subj": "kv.b", "seq": 1})
    assert m.header("Nats-Sequence") == "3"


def test_statuses(env):
    [m] = env.request_msgs("$JS.API.DIRECT.GET.KV", {"seq": 99})
    assert m.hdr == b"NATS/1.0 404 Message Not Found\r\n\r\n" and m.payload == b""
    [m] = env.request_msgs("$JS.API.DIRECT.GET.KV", b"")
    assert m.hdr == b"NATS/1.0 408 Empty Request\r\n\r\n"
    [m] = env.request_msgs("$JS.API.DIRECT.GET.KV", b"bad")
    assert m.hdr == b"NATS/1.0 408 Malformed Request\r\n\r\n"
    [m] = env.request_msgs("$JS.API.DIRECT.GET.KV", {"seq": 1, "last_by_subj": "kv.a"})
    assert m.hdr == b"NATS/1.0 408 Bad Request\r\n\r\n"
    [m] = env.request_msgs("$JS.API.DIRECT.GET.KV.kv.zzz")
    assert m.status == "404"


def test_batch_ends_with_eob(env):
    msgs = env.request_msgs("$JS.API.DIRECT.GET.KV", {"seq": 1, "batch": 2})
    assert [m.header("Nats-Sequence") for m in msgs[:2]] == ["1", "2"]
    assert [m.header("Nats-Num-Pending") for m in msgs[:2]] == ["2", "1"]
    assert [m.header("Nats-Last-Sequence") for m in msgs[:2]] == ["0", "1"]
    assert msgs[2].hdr == b"NATS/1.0 204 EOB\r\nNats-Num-Pending: 1\r\nNats-Last-Sequence: 2\r\n\r\n"


def test_multi_last(env):
    msgs = env.request_msgs("$JS.API.DIRECT.GET.KV", {"multi_last": ["kv.*"]})
    assert [m.payload for m in msgs[:2]] == [b"two", b"three"]
    assert msgs[-1].status == "204" and msgs[-1].header("Nats-UpTo-Sequence") == "3"


def test_start_time_and_up_to_time_go_through_the_stores_time_index(tmp_path):
    # the time -> sequence step is StreamStore.get_seq_from_time (no search of its own here)
    from natsd.gotime import format_rfc3339

    e = JsEnv(str(tmp_path))
    try:
        e.create("T", storage="memory", subjects=["t.>"], allow_direct=True)
        stamps = []
        for i in range(5):
            stamps.append(e.clock.time_ns())
            e.pub(f"t.{i}", str(i).encode())
            e.clock.advance(1_000_000_000)
        [m] = e.request_msgs("$JS.API.DIRECT.GET.T", {"start_time": format_rfc3339(stamps[2])})
        assert m.header("Nats-Sequence") == "3"
        [m] = e.request_msgs("$JS.API.DIRECT.GET.T", {"start_time": format_rfc3339(stamps[2] - 1)})
        assert m.header("Nats-Sequence") == "3"
        [m] = e.request_msgs("$JS.API.DIRECT.GET.T", {"start_time": format_rfc3339(stamps[2] + 1)})
        assert m.header("Nats-Sequence") == "4"
        [m] = e.request_msgs("$JS.API.DIRECT.GET.T", {"start_time": format_rfc3339(stamps[4] + 1)})
        assert m.status == "404"
        msgs = e.request_msgs("$JS.API.DIRECT.GET.T", {"multi_last": ["t.*"], "up_to_time": format_rfc3339(stamps[3])})
        assert [x.payload for x in msgs[:-1]] == [b"0", b"1", b"2"]
        assert msgs[-1].status == "204" and msgs[-1].header("Nats-UpTo-Sequence") == "3"
        [m] = e.request_msgs("$JS.API.DIRECT.GET.T", {"start_time": "yesterday"})
        assert m.hdr == b"NATS/1.0 408 Malformed Request\r\n\r\n"
    finally:
        e.stop()


@pytest.mark.parametrize(
    "value,refused",
    [
        ("", False),
        ("+1", False),
        ("1", False),
        ("-1", False),
        ("99", True),
        ("x", True),
        ("1 ", True),
    ],
)
def test_required_api_level_is_read_as_every_other_request_reads_it(env, value, refused):
    # nats-server's processDirectGetRequest / processDirectGetLastBySubjectRequest use the same
    # errorOnRequiredApiLevel as the API and the publish path: an empty value is no requirement
    # and "+1" is level 1 (strconv.Atoi); only a level above ours or a non-integer is refused.
    hdr = f"NATS/1.0\r\nNats-Required-Api-Level: {value}\r\n\r\n".encode()
    for subject, body in (("$JS.API.DIRECT.GET.KV", b'{"seq":1}'), ("$JS.API.DIRECT.GET.KV.kv.a", b"")):
        reply = env.ports.request(subject, body, hdr=hdr)
        env.clock.run_soon()
        [m] = env.replies(reply)
        if refused:
            assert m.hdr == b"NATS/1.0 412 Required Api Level\r\n\r\n" and m.payload == b""
        else:
            assert m.header("Nats-Stream") == "KV" and m.payload in (b"one", b"two")
