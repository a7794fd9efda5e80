"""Message schedules (natsd.jetstream.stream.schedules) without sockets: pattern parsing as the
reference's parser takes it, firing on the ManualClock (no sleeping), the produced message's
headers, cancelling, restarts, and the errors (nothing stored)."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from natsd.gotime import format_rfc3339, parse_rfc3339
from natsd.jetstream.config.models import SECOND
from natsd.jetstream.stream.schedules import format_rfc3339nano, parse_schedule
from tests.helpers.fakeports import JsEnv

pytestmark = pytest.mark.unit

T0 = parse_rfc3339("2026-03-04T10:20:30.4Z")


def ns(s: str) -> int:
    return parse_rfc3339(s)


# -- parsing ------------------------------------------------------------------------------------------


def test_at_and_every():
    assert parse_schedule("", None, T0, T0) == (0, False)
    assert parse_schedule("@at 2026-05-01T00:00:00Z", None, T0, T0) == (ns("2026-05-01T00:00:00Z"), False)
    assert parse_schedule("@at 2026-05-01T02:00:00+02:00", None, T0, T0) == (ns("2026-05-01T00:00:00Z"), False)
    # @every: from the stored time rounded to the second
    assert parse_schedule("@every 5s", None, T0, T0) == (ns("2026-03-04T10:20:35Z"), True)
    assert parse_schedule("@every 1m30s", None, T0, T0) == (ns("2026-03-04T10:22:00Z"), True)
    # missed firings (a restart): once, one interval from now
    later = T0 + 3600 * SECOND
    assert parse_schedule("@every 5s", None, T0, later) == (ns("2026-03-04T11:20:35Z"), True)
    for bad in ("@at tomorrow", "@at 2026-05-01", "@every 500ms", "@every 0s", "@every x", "bogus", "@every"):
        assert parse_schedule(bad, None, T0, T0) is None, bad
    # a time zone is for cron patterns only
    assert parse_schedule("@at 2026-05-01T00:00:00Z", ZoneInfo("Europe/Paris"), T0, T0) is None
    assert parse_schedule("@every 5s", ZoneInfo("Europe/Paris"), T0, T0) is None


@pytest.mark.parametrize(
    "pattern,expected",
    [
        ("* * * * * *", "2026-03-04T10:20:31Z"),
        ("*/15 * * * * *", "2026-03-04T10:20:45Z"),
        ("0 0 * * * *", "2026-03-04T11:00:00Z"),
        ("@hourly", "2026-03-04T11:00:00Z"),
        ("@daily", "2026-03-05T00:00:00Z"),
        ("@midnight", "2026-03-05T00:00:00Z"),
        ("@weekly", "2026-03-08T00:00:00Z"),  # 2026-03-04 is a Wednesday: next Sunday
        ("@monthly", "2026-04-01T00:00:00Z"),
        ("@yearly", "2027-01-01T00:00:00Z"),
        ("@annually", "2027-01-01T00:00:00Z"),
        ("0 30 9 * * mon-fri", "2026-03-05T09:30:00Z"),
        ("0 30 9 * * MON", "2026-03-09T09:30:00Z"),
        ("0 0 0 1 jan,jul ?", "2026-07-01T00:00:00Z"),
        ("5/20 * * * * *", "2026-03-04T10:20:45Z"),  # N/step: N through 59
        ("0 0 12 15 * 1", "2026-03-09T12:00:00Z"),  # day of month OR day of week (neither is *)
        ("0 0 12 */10 * *", "2026-03-11T12:00:00Z"),  # */10 is not a star: days 1, 11, 21, 31
    ],
)
def test_cron_next(pattern, expected):
    assert parse_schedule(pattern, None, T0, T0) == (ns(expected), True)


@pytest.mark.parametrize(
    "pattern",
    [
        "* * * * *",
        "* * * * * * *",
        "61 * * * * *",
        "0 0 0 * * 7",
        "0 0 0 L * *",
        "0 0 0 * * -1",
        "0 0 0 30 2 *",
        "0 0 0 0 * *",
        "0 0 0 * 13 *",
        "5-1 * * * * *",
        "*/0 * * * * *",
        "1-2-3 * * * * *",
        "1/2/3 * * * * *",
        "x * * * * *",
        "0 0 0 * * 1#2",
        "@every5s",
        "@reboot",
    ],
)
def test_cron_invalid(pattern):
    assert parse_schedule(pattern, None, T0, T0) is None


def test_cron_time_zone_and_next_format():
    paris = ZoneInfo("Europe/Paris")
    nxt, rep = parse_schedule("0 0 9 * * *", paris, T0, T0)
    assert rep and nxt == ns("2026-03-05T08:00:00Z")
    assert format_rfc3339nano(nxt, paris) == "2026-03-05T09:00:00+01:00"
    assert format_rfc3339nano(nxt) == "2026-03-05T08:00:00Z"
    assert format_rfc3339nano(nxt + 1500) == "2026-03-05T08:00:00.0000015Z"


def test_cron_missed_firings_skip_to_now():
    later = ns("2026-06-01T12:00:00.7Z")
    assert parse_schedule("0 0 * * * *", None, T0, later) == (ns("2026-06-01T13:00:00Z"), True)


# -- on a stream ----------------------------------------------------------------------------------------


def mk(env: JsEnv, storage: str = "file", **cfg) -> None:
    env.create("S", subjects=["s.>"], storage=storage, allow_msg_schedules=True, allow_msg_ttl=True, **cfg)


def at(env: JsEnv, delta_s: float) -> str:
    return "@at " + format_rfc3339(env.clock.time_ns() + int(delta_s * SECOND)).split(".")[0].rstrip("Z") + "Z"


def get_last(env: JsEnv, subject: str) -> dict | None:
    r = env.api("$JS.API.STREAM.MSG.GET.S", {"last_by_subj": subject})
    return r.get("message") if r and "message" in r else None


def hdrs(m: dict) -> bytes:
    import base64

    return base64.b64decode(m.get("hdrs", ""))


def subjects(env: JsEnv) -> dict:
    return env.api("$JS.API.STREAM.INFO.S", {"subjects_filter": ">"})["state"].get("subjects") or {}


def test_config_defaults_rollup_on(env):
    r = env.create("S", subjects=["s.>"], allow_msg_schedules=True)
    assert r["config"]["allow_msg_schedules"] is True and r["config"]["allow_rollup_hdrs"] is True
    assert env.api("$JS.API.STREAM.UPDATE.S", {"name": "S", "subjects": ["s.>"]})["error"] == {
        "code": 500,
        "err_code": 10052,
        "description": "message schedules can not be disabled",
    }


@pytest.mark.parametrize("storage", ["file", "memory"])
def test_at_fires_once_with_reference_headers(env, storage):
    mk(env, storage)
    env.pub("s.src", b"x")
    ack = env.pub(
        "s.sched",
        b"hello",
        {
            "Nats-Schedule": at(env, 10),
            "Nats-Schedule-Target": "s.target",
            "Foo": "bar",
            "Nats-Schedule-TTL": "5m",
            "Nats-Msg-Id": "m1",
            "Nats-Expected-Stream": "S",
        },
    )
    assert ack == {"stream": "S", "seq": 2}
    stored = hdrs(get_last(env, "s.sched"))
    assert stored.endswith(b"Nats-Rollup: sub\r\n\r\n")  # the reference adds it to the schedule
    env.clock.advance(9 * SECOND)
    assert get_last(env, "s.target") is None
    env.clock.advance(2 * SECOND)
    m = get_last(env, "s.target")
    assert m is not None and m["seq"] == 3
    assert (
        hdrs(m)
        == b"NATS/1.0\r\nFoo: bar\r\nNats-Scheduler: s.sched\r\nNats-Schedule-Next: purge\r\nNats-TTL: 5m\r\n\r\n"
    )
    import base64

    assert base64.b64decode(m["data"]) == b"hello"
    # the one-shot schedule is gone; nothing fires again
    assert subjects(env) == {"s.src": 1, "s.target": 1}
    env.clock.advance(60 * SECOND)
    assert subjects(env) == {"s.src": 1, "s.target": 1}
    env.clock.advance(300 * SECOND)  # the produced message's Nats-TTL (5m)
    assert subjects(env) == {"s.src": 1}


def test_every_repeats_and_cancel(env):
    mk(env)
    env.pub("s.every", b"tick", {"Nats-Schedule": "@every 10s", "Nats-Schedule-Target": "s.t"})
    for i in range(1, 4):
        env.clock.advance(10 * SECOND)
        assert subjects(env).get("s.t") == i
    m = get_last(env, "s.t")
    nxt = hdrs(m).split(b"Nats-Schedule-Next: ")[1].split(b"\r\n")[0].decode()
    assert parse_rfc3339(nxt) > env.clock.time_ns() and nxt.endswith("Z")
    # cancel: a purge marker naming the schedule
    assert env.pub("s.cancel", b"", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "s.every"})["seq"]
    assert "s.every" not in subjects(env)
    env.clock.advance(60 * SECOND)
    assert subjects(env).get("s.t") == 3


def test_cron_fires_on_the_second(env):
    mk(env)
    env.pub("s.cron", b"c", {"Nats-Schedule": "*/5 * * * * *", "Nats-Schedule-Target": "s.t"})
    env.clock.advance(21 * SECOND)
    assert 4 <= subjects(env).get("s.t", 0) <= 5


def test_source_and_rollup(env):
    mk(env)
    env.pub("s.src", b"latest", {"Src": "1", "Nats-Msg-Id": "x"})
    env.pub(
        "s.sched",
        b"own",
        {
            "Nats-Schedule": at(env, 1),
            "Nats-Schedule-Target": "s.t",
            "Nats-Schedule-Source": "s.src",
            "Nats-Schedule-Rollup": "sub",
        },
    )
    env.clock.advance(2 * SECOND)
    m = get_last(env, "s.t")
    assert (
        hdrs(m)
        == b"NATS/1.0\r\nSrc: 1\r\nNats-Scheduler: s.sched\r\nNats-Schedule-Next: purge\r\nNats-Rollup: sub\r\n\r\n"
    )


def test_replacing_the_schedule_message_replaces_the_schedule(env):
    mk(env)
    env.pub("s.sched", b"1", {"Nats-Schedule": at(env, 5), "Nats-Schedule-Target": "s.t"})
    env.pub("s.sched", b"2", {"Nats-Schedule": at(env, 20), "Nats-Schedule-Target": "s.t"})
    env.clock.advance(10 * SECOND)
    assert "s.t" not in subjects(env)
    env.clock.advance(11 * SECOND)
    import base64

    assert base64.b64decode(get_last(env, "s.t")["data"]) == b"2"
    # a plain message on a schedule's subject ends it
    env.pub("s.sched2", b"1", {"Nats-Schedule": at(env, 5), "Nats-Schedule-Target": "s.t2"})
    env.pub("s.sched2", b"plain")
    env.clock.advance(10 * SECOND)
    assert "s.t2" not in subjects(env)


def test_deleted_schedule_message_never_fires(env):
    mk(env)
    seq = env.pub("s.sched", b"1", {"Nats-Schedule": at(env, 5), "Nats-Schedule-Target": "s.t"})["seq"]
    assert env.api("$JS.API.STREAM.MSG.DELETE.S", {"seq": seq})["success"] is True
    env.clock.advance(10 * SECOND)
    assert "s.t" not in subjects(env)


ERR = {
    10188: "message schedules is disabled",
    10189: "message schedules pattern is invalid",
    10190: "message schedules target is invalid",
    10191: "message schedules invalid per-message TTL",
    10192: "message schedules invalid rollup",
    10203: "message schedules source is invalid",
    10212: "message schedules invalid scheduler",
    10223: "message schedules time zone is invalid",
    10166: "per-message TTL is disabled",
}


def test_errors_store_nothing(env):
    mk(env)
    env.create("N", subjects=["n.>"])
    env.create("NT", subjects=["nt.>"], allow_msg_schedules=True)
    fut = at(env, 3600)
    t = {"Nats-Schedule-Target": "s.t"}
    cases = [
        ("s.x", {"Nats-Schedule": "bogus", **t}, 10189),
        ("s.x", {"Nats-Schedule": "@every 500ms", **t}, 10189),
        ("s.x", {"Nats-Schedule": "0 0 0 30 2 *", **t}, 10189),
        ("s.x", {"Nats-Schedule": fut}, 10190),
        ("s.x", {"Nats-Schedule": fut, "Nats-Schedule-Target": "s.x"}, 10190),
        ("s.x", {"Nats-Schedule": fut, "Nats-Schedule-Target": "other.t"}, 10190),
        ("s.x", {"Nats-Schedule": fut, "Nats-Schedule-Target": "s.*"}, 10190),
        ("s.x", {"Nats-Schedule": fut, **t, "Nats-Schedule-TTL": "bad"}, 10191),
        ("s.x", {"Nats-Schedule": fut, **t, "Nats-Schedule-Rollup": "all"}, 10192),
        ("s.x", {"Nats-Schedule": fut, **t, "Nats-Rollup": "all"}, 10192),
        ("s.x", {"Nats-Schedule": fut, **t, "Nats-Schedule-Source": "s.t"}, 10203),
        ("s.x", {"Nats-Schedule": fut, **t, "Nats-Schedule-Source": "other.s"}, 10203),
        ("s.x", {"Nats-Schedule": "0 0 0 * * *", **t, "Nats-Schedule-Time-Zone": "Mars/Olympus"}, 10223),
        ("s.x", {"Nats-Schedule": "0 0 0 * * *", **t, "Nats-Schedule-Time-Zone": ""}, 10223),
        ("s.x", {"Nats-Schedule": fut, **t, "Nats-Schedule-Time-Zone": "Europe/Paris"}, 10189),
        ("s.x", {"Nats-Scheduler": "s.y"}, 10212),
        ("s.x", {"Nats-Schedule-Next": "x", "Nats-Scheduler": "s.y"}, 10212),
        ("s.x", {"Nats-Schedule-Next": "purge"}, 10212),
        ("n.x", {"Nats-Schedule": fut, "Nats-Schedule-Target": "n.t"}, 10188),
        ("n.x", {"Nats-Schedule": "bogus"}, 10188),
        ("n.x", {"Nats-Scheduler": "n.y"}, 10212),
        ("nt.x", {"Nats-Schedule": fut, "Nats-Schedule-Target": "nt.t", "Nats-Schedule-TTL": "5m"}, 10166),
    ]
    for subj, h, code in cases:
        r = env.pub(subj, b"x", h)
        assert r["error"] == {"code": 400, "err_code": code, "description": ERR[code]}, (h, r)
    env.pub("s.plain", b"x")
    r = env.pub("s.c", b"", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "s.plain"})
    assert r["error"]["err_code"] == 10212
    for name in ("S", "N", "NT"):
        assert env.api(f"$JS.API.STREAM.INFO.{name}")["state"]["messages"] == (1 if name == "S" else 0)


def test_pending_schedules_share_one_timer(env):
    mk(env, storage="memory")
    base = env.clock.pending_timers()
    for i in range(200):
        env.pub(f"s.sched.{i}", b"x", {"Nats-Schedule": at(env, 100 + i), "Nats-Schedule-Target": "s.t"})
    assert env.clock.pending_timers() - base <= 1
    env.clock.advance(400 * SECOND)
    assert subjects(env) == {"s.t": 200}


def test_pending_schedule_survives_restart(env):
    mk(env)
    env.pub("s.sched", b"later", {"Nats-Schedule": at(env, 30), "Nats-Schedule-Target": "s.t"})
    env.pub("s.every", b"tick", {"Nats-Schedule": "@every 1m", "Nats-Schedule-Target": "s.e"})
    env.restart()
    env.clock.advance(31 * SECOND)
    assert subjects(env).get("s.t") == 1 and "s.sched" not in subjects(env)
    env.clock.advance(30 * SECOND)
    assert subjects(env).get("s.e") == 1


def test_sourced_schedule_messages_are_stored_verbatim(env):
    mk(env)
    env.create("AGG", subjects=[], sources=[{"name": "S"}])
    env.pub("s.sched", b"x", {"Nats-Schedule": at(env, 3600), "Nats-Schedule-Target": "s.t"})
    for _ in range(5):
        env.clock.advance(SECOND // 10)
        env.ports.run_offloaded()
    info = env.api("$JS.API.STREAM.INFO.AGG")
    assert info["state"]["messages"] == 1, info


def test_wall_time_is_used(env):
    # the ManualClock's wall time moves with its monotonic time: an @at 1 s ahead fires after ~1 s
    mk(env)
    now = datetime.fromtimestamp(env.clock.time_ns() / 1e9, timezone.utc)
    assert now.year >= 2023
    env.pub("s.sched", b"x", {"Nats-Schedule": at(env, 1), "Nats-Schedule-Target": "s.t"})
    env.clock.advance(SECOND + SECOND // 2)
    assert subjects(env).get("s.t") == 1


def test_next_format_zero_offset_is_z_and_local_zone(monkeypatch):
    from natsd.jetstream.stream.schedules import load_zone

    london = ZoneInfo("Europe/London")
    winter = ns("2026-01-10T12:00:00Z")
    assert format_rfc3339nano(winter, london) == "2026-01-10T12:00:00Z"
    assert format_rfc3339nano(ns("2026-07-10T12:00:00Z"), london) == "2026-07-10T13:00:00+01:00"
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    assert format_rfc3339nano(winter, load_zone(b"Local")) == "2026-01-10T21:00:00+09:00"
    assert load_zone(b"UTC") is timezone.utc and load_zone(None) is None


def test_interest_stream_without_interest_keeps_repeating(env):
    # the produced messages are skipped (nobody is interested) but the schedule goes on
    env.create("S", subjects=["s.>"], storage="memory", allow_msg_schedules=True, retention="interest")
    env.api(
        "$JS.API.CONSUMER.CREATE.S.C",
        {"stream_name": "S", "config": {"durable_name": "C", "filter_subject": "s.every", "ack_policy": "explicit"}},
    )
    env.pub("s.every", b"tick", {"Nats-Schedule": "@every 10s", "Nats-Schedule-Target": "s.t"})
    first = env.api("$JS.API.STREAM.INFO.S")["state"]["last_seq"]
    env.clock.advance(10 * SECOND)
    env.clock.advance(10 * SECOND)
    assert env.api("$JS.API.STREAM.INFO.S")["state"]["last_seq"] == first + 2
