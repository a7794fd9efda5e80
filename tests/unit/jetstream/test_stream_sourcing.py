"""Mirrors and sources in one account, without sockets: an ephemeral push consumer on the
origin feeds the target; sequences (mirror) or Nats-Stream-Source headers (source); restart
resumes where it stopped; a missing origin is retried by the health check."""

from __future__ import annotations

import base64

import pytest

from natsd.jetstream.config.models import SECOND

pytestmark = pytest.mark.unit


def info(env, name):
    return env.api(f"$JS.API.STREAM.INFO.{name}")


def test_mirror_keeps_origin_sequences_and_skips_gaps(env):
    env.create("O", storage="file")
    for i in range(4):
        env.pub("o.x", b"m%d" % i)
    env.api("$JS.API.STREAM.MSG.DELETE.O", {"seq": 2})
    out = env.api("$JS.API.STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}, "storage": "file"})
    assert "error" not in out and "subjects" not in out["config"] and "duplicate_window" not in out["config"]
    env.clock.advance(SECOND // 10)
    st = info(env, "M")["state"]
    assert (st["messages"], st["first_seq"], st["last_seq"]) == (3, 1, 4)
    assert env.api("$JS.API.STREAM.MSG.GET.M", {"seq": 2})["error"]["err_code"] == 10037
    m = env.api("$JS.API.STREAM.MSG.GET.M", {"seq": 4})["message"]
    o = env.api("$JS.API.STREAM.MSG.GET.O", {"seq": 4})["message"]
    assert m == o  # same subject, data and timestamp
    env.pub("o.y", b"later")
    env.clock.advance(SECOND // 10)
    assert info(env, "M")["state"]["last_seq"] == 5
    assert info(env, "M")["mirror"]["name"] == "O"


def test_source_adds_header_and_follows_filter(env):
    env.create("O", storage="memory")
    env.create("S", storage="memory", subjects=["s.>"], sources=[{"name": "O", "filter_subject": "o.b"}])
    env.pub("o.a", b"1")
    env.pub("o.b", b"2")
    env.pub("s.local", b"3")
    env.clock.advance(SECOND // 10)
    st = info(env, "S")["state"]
    assert st["messages"] == 2
    got = env.api("$JS.API.STREAM.MSG.GET.S", {"last_by_subj": "o.b"})["message"]
    assert base64.b64decode(got["hdrs"]) == b"NATS/1.0\r\nNats-Stream-Source: O 2 o.b > o.b\r\n\r\n"
    assert [s["name"] for s in info(env, "S")["sources"]] == ["O"]


def test_missing_origin_is_retried_and_restart_resumes(env):
    out = env.api("$JS.API.STREAM.CREATE.M", {"name": "M", "mirror": {"name": "LATER"}, "storage": "file"})
    assert "error" not in out
    env.clock.advance(SECOND // 10)
    assert info(env, "M")["mirror"]["error"]["err_code"] == 10059
    env.create("LATER", storage="file")
    env.pub("later.a", b"x")
    env.clock.advance(11 * SECOND)  # health check re-creates the consumer
    assert info(env, "M")["state"]["last_seq"] == 1
    assert "error" not in info(env, "M")["mirror"]
    env.restart()
    env.pub("later.a", b"y")
    env.clock.advance(SECOND // 10)
    st = info(env, "M")["state"]
    assert (st["messages"], st["last_seq"]) == (2, 2)


def test_mirror_consumer_removed_with_the_mirror(env):
    env.create("O", storage="memory")
    env.api("$JS.API.STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}, "storage": "memory"})
    env.clock.advance(SECOND // 10)
    assert len(env.api("$JS.API.CONSUMER.NAMES.O")["consumers"]) == 1
    env.api("$JS.API.STREAM.DELETE.M")
    env.clock.advance(SECOND // 10)
    assert not env.api("$JS.API.CONSUMER.NAMES.O")["consumers"]


def test_promote_mirror_by_removing_it(env):
    env.create("O", storage="memory")
    env.pub("o.a")
    env.api("$JS.API.STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}, "storage": "memory"})
    env.clock.advance(SECOND // 10)
    bad = env.api(
        "$JS.API.STREAM.UPDATE.M", {"name": "M", "mirror": {"name": "O", "opt_start_seq": 5}, "storage": "memory"}
    )
    assert bad["error"]["err_code"] == 10055
    out = env.api("$JS.API.STREAM.UPDATE.M", {"name": "M", "storage": "memory", "subjects": ["m.>"]})
    assert "error" not in out and "mirror" not in out
    assert env.pub("m.x") == {"stream": "M", "seq": 2}


def test_sourced_messages_do_not_repeat_origin_checks(env):
    env.create("O", storage="memory", allow_msg_ttl=True)
    env.create("S", storage="memory", subjects=["s.>"], sources=[{"name": "O"}])
    env.pub("s.first")  # target last seq 1, origin will be 1 too
    env.pub("o.a", b"x", {"Nats-Expected-Last-Sequence": "0", "Nats-TTL": "10s", "H": "keep"})
    env.clock.advance(SECOND // 10)
    got = env.api("$JS.API.STREAM.MSG.GET.S", {"last_by_subj": "o.a"})["message"]
    hdr = base64.b64decode(got["hdrs"])
    assert hdr == b"NATS/1.0\r\nH: keep\r\nNats-Stream-Source: O 1 > > o.a\r\n\r\n"
