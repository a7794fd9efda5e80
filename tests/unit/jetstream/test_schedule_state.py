"""Restarting with pending message schedules (natsd.jetstream.stream.schedules + schedule_state), without
sockets: ``schedules.db`` written at a clean stop and read once at the next start, the full rebuild
when it is missing (kill -9), stale or damaged, and the rebuild's fast header path giving what
the full header parse gives. Every case checks that each schedule fires exactly once."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from natsd.gotime import format_rfc3339
from natsd.jetstream.stream import schedules as sched_mod
from natsd.jetstream.config.models import SECOND
from natsd.jetstream.stream.schedule_state import STATE_FILE, decode_state, encode_state
from natsd.jetstream.stream.schedules import _rebuilt_when, _schedule_of
from natsd.protocol.headers import nats_headers
from tests.helpers.fakeports import JsEnv

pytestmark = pytest.mark.unit


def state_path(env: JsEnv) -> Path:
    return Path(env.account.stream_dir("S")) / STATE_FILE


def mk(env: JsEnv, storage: str = "file") -> None:
    env.create("S", subjects=["s.>"], storage=storage, allow_msg_schedules=True)


def at(env: JsEnv, delta_s: float) -> str:
    return "@at " + format_rfc3339(env.clock.time_ns() + int(delta_s * SECOND)).split(".")[0].rstrip("Z") + "Z"


def subjects(env: JsEnv) -> dict:
    return env.api("$JS.API.STREAM.INFO.S", {"subjects_filter": ">"})["state"].get("subjects") or {}


def pending(env: JsEnv) -> int:
    return len(env.account.streams["S"]._sched)


def crash_restart(env: JsEnv) -> None:
    """A restart after kill -9: the stop writes nothing the next start could use."""
    env.restart()  # a clean stop writes schedules.db ...
    env.engine.stop()
    p = state_path(env)
    if p.exists():
        p.unlink()  # ... which a killed server never wrote
    restart_keep(env)


def restart_keep(env: JsEnv) -> None:
    """Start a new engine on the directory as it is (the previous one is stopped)."""
    from natsd.jetstream.api import JetStreamApi
    from natsd.jetstream.manager import JetStreamEngine
    from tests.helpers.fakeports import FakePorts

    env.ports = FakePorts()
    env.engine = JetStreamEngine(env.options, env.clock, server_id="NTESTSERVER", api=JetStreamApi())
    env.account = env.engine.enable_account("$G", env.ports, env.account.limits)
    env.engine.start()
    env.inbox = env.ports.client_subscribe("_INBOX.>")


def fill(env: JsEnv, n: int, first_delay: int = 100) -> None:
    for i in range(n):
        ack = env.pub(
            f"s.sched.{i}", b"p%d" % i, {"Nats-Schedule": at(env, first_delay + i), "Nats-Schedule-Target": "s.t"}
        )
        assert ack and "error" not in ack, ack


def no_rebuild(monkeypatch) -> None:
    def boom(*a, **k):
        raise AssertionError("the schedules were rebuilt from the messages")

    monkeypatch.setattr(sched_mod, "_rebuilt_when", boom)


# -- the file --------------------------------------------------------------------------------------


def test_encode_decode_round_trip_and_damage():
    entries = [(5 * SECOND, 3, "a.b"), (-1, 2**63, "ünï.cödé"), (7, 9, "x")]
    data = encode_state((1, 10, 7), entries)
    assert decode_state(data) == ((1, 10, 7), entries)
    assert decode_state(encode_state((0, 0, 0), [])) == ((0, 0, 0), [])
    for bad in (data[:-1], data[:20], b"", data[:30] + bytes([data[30] ^ 1]) + data[31:], b"XXXX" + data[4:]):
        with pytest.raises(ValueError):
            decode_state(bad)
    # a subject string equal to one of ``names`` is that object (the store's)
    name = "".join(["a", ".b"])
    (_, got) = decode_state(data, {name: name})
    assert got[0][2] is name


# -- clean restart: the file is used, once -------------------------------------------------------------


def test_clean_restart_loads_the_state_file_and_fires_each_once(env, monkeypatch):
    mk(env)
    fill(env, 50)
    env.pub("s.every", b"tick", {"Nats-Schedule": "@every 1m", "Nats-Schedule-Target": "s.e"})
    env.engine.stop()
    assert state_path(env).exists()
    no_rebuild(monkeypatch)
    restart_keep(env)
    assert not state_path(env).exists()  # valid for one start only
    assert pending(env) == 51
    env.clock.advance(60 * SECOND + SECOND // 2)
    assert subjects(env).get("s.e") == 1 and "s.t" not in subjects(env)
    env.clock.advance(100 * SECOND)
    got = subjects(env)
    assert got.get("s.t") == 50 and not any(k.startswith("s.sched.") for k in got), got
    env.clock.advance(3600 * SECOND)
    assert subjects(env).get("s.t") == 50


def test_clean_restart_keeps_a_repeating_schedules_cadence(env, monkeypatch):
    mk(env)
    env.pub("s.every", b"tick", {"Nats-Schedule": "@every 1m", "Nats-Schedule-Target": "s.e"})
    env.clock.advance(61 * SECOND)
    assert subjects(env).get("s.e") == 1
    start = env.clock.time_ns()
    env.restart()
    assert not state_path(env).exists()
    # next due one minute after the first firing (as in memory), not one minute after the restart
    nxt = env.account.streams["S"]._sched.next_due()
    assert start < nxt <= start + 60 * SECOND
    env.clock.advance(60 * SECOND)
    assert subjects(env).get("s.e") == 2


def test_schedule_due_while_stopped_fires_once_after_restart(env):
    mk(env)
    env.pub("s.sched", b"x", {"Nats-Schedule": at(env, 5), "Nats-Schedule-Target": "s.t"})
    env.engine.stop()
    env.clock.advance(30 * SECOND)  # the server is down when it is due
    restart_keep(env)
    env.clock.advance(SECOND)
    assert subjects(env) == {"s.t": 1}
    env.restart()
    env.clock.advance(60 * SECOND)
    assert subjects(env) == {"s.t": 1}


def test_restart_after_restart_without_changes(env, monkeypatch):
    mk(env)
    fill(env, 5)
    env.restart()
    env.restart()  # the second clean stop writes the file again
    assert pending(env) == 5
    env.clock.advance(200 * SECOND)
    assert subjects(env).get("s.t") == 5


def test_memory_stream_writes_no_file(env):
    mk(env, storage="memory")
    fill(env, 3)
    env.engine.stop()
    assert not state_path(env).exists()
    restart_keep(env)


# -- kill -9, stale, damaged: the full rebuild ---------------------------------------------------------


def test_kill9_rebuilds_from_the_messages(env):
    mk(env)
    fill(env, 20)
    env.pub("s.sched.3", b"plain")  # a plain message ends that schedule; the rebuild agrees
    env.pub("s.every", b"tick", {"Nats-Schedule": "@every 10s", "Nats-Schedule-Target": "s.e"})
    crash_restart(env)
    assert pending(env) == 20
    env.clock.advance(200 * SECOND)
    got = subjects(env)
    assert got.get("s.t") == 19 and got.get("s.sched.3") == 2, got  # the schedule and the plain one


def test_stale_state_file_is_not_used(env, caplog):
    """A file from an earlier clean stop, found after a run that changed the stream and was
    killed (its removal at start was lost, or the directory was copied back): rebuilt."""
    mk(env)
    fill(env, 3)
    env.engine.stop()
    old = state_path(env).read_bytes()
    restart_keep(env)
    fill(env, 6, first_delay=300)  # replaces s.sched.0-2, adds 3-5
    env.pub("s.sched.0", b"plain")  # and ends one
    env.engine.stop()
    state_path(env).write_bytes(old)
    with caplog.at_level(logging.WARNING, logger="natsd.jetstream.schedules"):
        restart_keep(env)
    assert "stale" in caplog.text
    assert not state_path(env).exists()
    assert pending(env) == 5
    env.clock.advance(200 * SECOND)
    assert "s.t" not in subjects(env)  # the old times (100-102 s) are gone with their messages
    env.clock.advance(200 * SECOND)
    assert subjects(env).get("s.t") == 5


def test_damaged_state_file_is_not_used(env, caplog):
    mk(env)
    fill(env, 4)
    env.engine.stop()
    p = state_path(env)
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="natsd.jetstream.schedules"):
        restart_keep(env)
    assert "checksum" in caplog.text
    assert pending(env) == 4
    env.clock.advance(200 * SECOND)
    assert subjects(env).get("s.t") == 4


def test_refused_firing_writes_no_state_file(env):
    """A schedule dropped from memory while its message stays (a refused firing) comes back at
    the next start, as the reference: the stop writes no file, so the start rebuilds."""
    mk(env)
    fill(env, 2)
    s = env.account.streams["S"]._sched
    s._produce = lambda target, hdr, msg: 0
    env.clock.advance(100 * SECOND + SECOND // 2)
    assert pending(env) == 1
    env.engine.stop()
    assert not state_path(env).exists()
    restart_keep(env)
    assert pending(env) == 2


# -- the rebuild's fast path -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hdr",
    [
        b"NATS/1.0\r\nNats-Schedule: @at 2026-05-01T00:00:00Z\r\nNats-Schedule-Target: s.t\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule:@at 2026-05-01T00:00:00Z\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule:    @at 2030-12-31T23:59:59Z\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule: @at 2026-05-01T00:00:00.5Z\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule: @at 2026-05-01T02:00:00+02:00\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule: @at 2026-02-30T00:00:00Z\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule: @at 2026-05-01T24:00:00Z\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule: @at 2026-05-01T23:59:60Z\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule: @at 1970-01-01T00:00:00Z\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule: @at 2026-05-01T00:00:00Z \r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule: @at 2026-05-01T00:00:00Z\r\nNats-Schedule-Time-Zone: UTC\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule: @at 2026-05-01T00:00:00Z\r\nNats-Schedule-Time-Zone: \r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule: @at 2026-05-01T00:00:00Z\r\nNats-Schedule: @at 2027-05-01T00:00:00Z\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule-Target: s.t\r\nNats-Schedule: @every 5m\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule: 0 30 9 * * *\r\nNats-Schedule-Time-Zone: Europe/Paris\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule: bogus\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule: \r\n\r\n",
        b"NATS/1.0\r\nNats-Scheduler: s.x\r\nNats-Schedule-Next: purge\r\n\r\n",
        b"NATS/1.0\r\nX-Nats-Schedule: @at 2026-05-01T00:00:00Z\r\n\r\n",
        b"NATS/1.0\r\nNats-Schedule: @at 2026-05-01T00:00:00Z",
    ],
)
def test_rebuild_fast_path_equals_the_full_parse(hdr):
    ts, now = 1_770_000_000 * SECOND, 1_770_000_100 * SECOND
    try:
        want = _schedule_of(nats_headers(hdr), ts, now)[0]
    except Exception:
        want = 0
    cache: dict[bytes, int] = {}
    assert _rebuilt_when(hdr, ts, now, cache) == want
    assert _rebuilt_when(hdr, ts, now, cache) == want  # from the cache


def test_state_file_that_cannot_be_removed_is_not_used(env, monkeypatch, caplog):
    """Left in place it could outlive a later change of the stream: rebuild instead."""
    import natsd.jetstream.stream.schedule_state as st

    mk(env)
    fill(env, 3)
    env.engine.stop()
    calls = []

    def no_unlink(path):
        calls.append(path)
        raise PermissionError(13, "read-only")

    monkeypatch.setattr(st.os, "unlink", no_unlink)
    with caplog.at_level(logging.WARNING, logger="natsd.jetstream.schedules"):
        restart_keep(env)
    assert calls and "could not be removed" in caplog.text
    assert pending(env) == 3
    env.clock.advance(200 * SECOND)
    assert subjects(env).get("s.t") == 3
