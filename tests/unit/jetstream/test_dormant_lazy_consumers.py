"""A woken stream recovers a consumer when it is first used (natsd.jetstream.dormant.LazyConsumers):
lookups by name recover that one, counts and names recover none, what needs every consumer
recovers all; consumers with something of their own to do are recovered when the stream wakes."""

from __future__ import annotations

import os

import pytest

from natsd.jetstream import dormant
from tests.helpers.fakeports import JsEnv

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

N = 5


def _durable(env: JsEnv, name: str, **cfg) -> dict:
    out = env.api(
        f"$JS.API.CONSUMER.DURABLE.CREATE.S.{name}",
        {"stream_name": "S", "config": {"durable_name": name, "ack_policy": "explicit", **cfg}},
    )
    assert out is not None and "error" not in out, out
    return out


def _woken(tmp_path, **stream_cfg) -> JsEnv:
    """S with 3 messages and N idle durable pull consumers C0..C4, restarted (asleep), woken by
    a publish (which recovers none of them)."""
    env = JsEnv(str(tmp_path))
    env.create("S", subjects=["s.>"], **stream_cfg)
    for i in range(3):
        env.pub(f"s.{i}")
    for i in range(N):
        _durable(env, f"C{i}")
    env.restart()
    s = env.account.streams["S"]
    assert dormant.is_dormant(s)
    assert env.pub("s.x")["seq"] == 4  # wakes the stream
    assert not dormant.is_dormant(s)
    assert s.consumers == {} and s.lazy is not None and len(s.lazy) == N
    return env


def _stream(env: JsEnv):
    return env.account.streams["S"]


def test_info_recovers_only_the_consumer_asked_for(tmp_path):
    env = _woken(tmp_path)
    s = _stream(env)
    info = env.api("$JS.API.CONSUMER.INFO.S.C3")
    assert info["name"] == "C3" and info["num_pending"] == 4  # counted from the store, with s.x
    assert list(s.consumers) == ["C3"] and sorted(s.lazy.names) == ["C0", "C1", "C2", "C4"]
    # counts and names recover nothing
    assert env.api("$JS.API.STREAM.INFO.S")["state"]["consumer_count"] == N
    assert env.api("$JS.API.INFO")["consumers"] == N
    names = env.api("$JS.API.CONSUMER.NAMES.S")
    assert names["total"] == N and names["consumers"] == [f"C{i}" for i in range(N)]
    assert list(s.consumers) == ["C3"]
    assert env.api("$JS.API.CONSUMER.INFO.S.NOPE")["error"]["err_code"] == 10014
    # LIST: the page's consumers, each as its INFO says
    listed = env.api("$JS.API.CONSUMER.LIST.S")
    assert listed["total"] == N and [c["name"] for c in listed["consumers"]] == [f"C{i}" for i in range(N)]
    assert all(c["num_pending"] == 4 for c in listed["consumers"])
    assert s.lazy is None and len(s.consumers) == N
    env.stop()


def test_pull_of_a_consumer_not_recovered_yet_is_served_once(tmp_path):
    env = _woken(tmp_path)
    s = _stream(env)
    msgs = env.request_msgs("$JS.API.CONSUMER.MSG.NEXT.S.C1", {"batch": 2, "no_wait": True})
    assert [m.shown for m in msgs] == ["s.0", "s.1"]  # (one delivery each: not twice)
    assert "C1" in s.consumers and len(s.lazy) == N - 1
    msgs = env.request_msgs("$JS.API.CONSUMER.MSG.NEXT.S.C1", {"batch": 1, "no_wait": True})
    assert [m.shown for m in msgs] == ["s.2"]  # its own subscription; the wildcard stays out
    # a pull for a consumer that does not exist: no responders, as before
    gone = env.request_msgs("$JS.API.CONSUMER.MSG.NEXT.S.NOPE", {"batch": 1})
    assert len(gone) == 1 and b"503" in (gone[0].hdr or b"")
    env.stop()


def test_ack_delete_and_create_of_a_consumer_not_recovered_yet(tmp_path):
    env = _woken(tmp_path)
    s = _stream(env)
    # an ack for it reaches it (recovered by the ack hub)
    env.ports.request("$JS.ACK.S.C2.1.1.1.0.0", b"+ACK")
    env.clock.run_soon()
    assert "C2" in s.consumers
    # delete of another one: gone with its files
    obs = os.path.join(env.options.jetstream.store_dir, "jetstream", "$G", "streams", "S", "obs")
    assert os.path.isdir(os.path.join(obs, "C4"))
    assert env.api("$JS.API.CONSUMER.DELETE.S.C4") == {
        "type": "io.nats.jetstream.api.v1.consumer_delete_response",
        "success": True,
    }
    assert not os.path.exists(os.path.join(obs, "C4"))
    assert env.api("$JS.API.STREAM.INFO.S")["state"]["consumer_count"] == N - 1
    # a create of a durable of the same name compares with its stored config, as before
    same = _durable(env, "C0")
    assert same["name"] == "C0" and same["num_pending"] == 4
    other = env.api(
        "$JS.API.CONSUMER.CREATE.S.C1",
        {"stream_name": "S", "action": "create", "config": {"durable_name": "C1", "ack_policy": "none"}},
    )
    assert other["error"]["err_code"] == 10148
    env.stop()


def test_max_consumers_counts_those_not_recovered(tmp_path):
    env = _woken(tmp_path, max_consumers=N)
    out = env.api("$JS.API.CONSUMER.DURABLE.CREATE.S.X", {"stream_name": "S", "config": {"durable_name": "X"}})
    assert out["error"]["err_code"] == 10026
    assert _stream(env).consumers == {}
    env.stop()


def test_a_purge_recovers_them_all_first(tmp_path):
    env = _woken(tmp_path)
    assert env.api("$JS.API.STREAM.PURGE.S", {"filter": "s.0"})["purged"] == 1
    s = _stream(env)
    assert s.lazy is None and len(s.consumers) == N
    assert env.api("$JS.API.CONSUMER.INFO.S.C0")["num_pending"] == 3
    env.stop()


def test_files_of_consumers_not_recovered_are_left_as_they_were(tmp_path):
    env = _woken(tmp_path)
    obs = os.path.join(env.options.jetstream.store_dir, "jetstream", "$G", "streams", "S", "obs")
    before = {
        n: sorted((f, os.stat(os.path.join(obs, n, f)).st_mtime_ns) for f in os.listdir(os.path.join(obs, n)))
        for n in os.listdir(obs)
    }
    env.api("$JS.API.CONSUMER.INFO.S.C0")
    for i in range(3):
        env.pub("s.more")
    env.restart()  # a clean stop while four of them were never recovered
    s = _stream(env)
    assert dormant.is_dormant(s) and len(s.consumers) == N  # asleep again, the same count
    after = {
        n: sorted((f, os.stat(os.path.join(obs, n, f)).st_mtime_ns) for f in os.listdir(os.path.join(obs, n)))
        for n in os.listdir(obs)
    }
    assert {n: v for n, v in after.items() if n != "C0"} == {n: v for n, v in before.items() if n != "C0"}
    assert env.api("$JS.API.CONSUMER.INFO.S.C4")["num_pending"] == 7
    env.stop()


def test_consumers_with_work_of_their_own_are_recovered_when_the_stream_wakes(tmp_path):
    """A message handed out and not acked (its ack timer, redelivery, a limit terminating it),
    priority groups, replay at original speed, a "last per subject" start, a natsd.* feature:
    recovered with the stream, as before."""
    env = JsEnv(str(tmp_path))
    env.create("S", subjects=["s.>"])
    for i in range(3):
        env.pub(f"s.{i}")
    _durable(env, "IDLE")
    _durable(env, "PENDING", ack_wait=60_000_000_000)
    _durable(env, "GROUPS", priority_groups=["g"], priority_policy="overflow")
    _durable(env, "REPLAY", replay_policy="original")
    _durable(env, "LPS", deliver_policy="last_per_subject", filter_subject="s.>")
    msgs = env.request_msgs("$JS.API.CONSUMER.MSG.NEXT.S.PENDING", {"batch": 1, "no_wait": True})
    assert len(msgs) == 1
    env.restart()
    s = _stream(env)
    assert dormant.is_dormant(s)
    assert s.store.eager == ["GROUPS", "LPS", "PENDING", "REPLAY"]
    env.pub("s.x")
    assert sorted(s.consumers) == ["GROUPS", "LPS", "PENDING", "REPLAY"] and sorted(s.lazy.names) == ["IDLE"]
    env.stop()


def test_a_stream_with_a_push_consumer_has_all_recovered_at_start(tmp_path):
    env = JsEnv(str(tmp_path))
    env.create("S", subjects=["s.>"])
    _durable(env, "PULL")
    _durable(env, "PUSH", deliver_subject="push.S")
    env.restart()
    s = _stream(env)
    assert not dormant.is_dormant(s) and s.lazy is None and sorted(s.consumers) == ["PULL", "PUSH"]
    env.stop()


def test_an_entry_without_the_eager_list_recovers_all_at_wake(tmp_path):
    """A restart file written before the eager list existed (five fields) or a stream asleep
    since a kill -9 (peek_asleep: no entry): every consumer is recovered at wake, as before."""
    env = JsEnv(str(tmp_path))
    env.create("S", subjects=["s.>"])
    _durable(env, "A")
    _durable(env, "B")
    env.engine.stop()
    acc_dir = os.path.join(env.options.jetstream.store_dir, "jetstream", "$G")
    entries = dormant.read_restart_file(acc_dir)
    assert entries["S"][5] == []
    entries["S"] = entries["S"][:5]
    dormant.write_restart_file(acc_dir, entries)
    env.engine.stop = lambda: None  # (stopped above)
    env.restart()
    s = _stream(env)
    assert dormant.is_dormant(s) and s.store.eager is None
    env.pub("s.1")
    assert sorted(s.consumers) == ["A", "B"] and s.lazy is None
    env.stop()


def test_after_a_kill_the_config_and_the_state_decide_which_wait(tmp_path):
    """Asleep since a kill -9 (no restart file, natsd.jetstream.dormant.peek_asleep): a consumer
    is recovered at wake when its meta.inf's config says so, or its o.dat has a message pending,
    or the o.dat is not one a recovery takes as it is (damaged: reset and reported at wake)."""
    env = JsEnv(str(tmp_path))
    env.create("S", subjects=["s.>"])
    for i in range(3):
        env.pub(f"s.{i}")
    for name in ("IDLE", "IDLE2", "BROKEN"):
        _durable(env, name)
    _durable(env, "PENDING", ack_wait=60_000_000_000)
    _durable(env, "GROUPS", priority_groups=["g"], priority_policy="overflow")
    assert len(env.request_msgs("$JS.API.CONSUMER.MSG.NEXT.S.PENDING", {"batch": 1, "no_wait": True})) == 1
    for m in env.request_msgs("$JS.API.CONSUMER.MSG.NEXT.S.IDLE2", {"batch": 2, "no_wait": True}):
        env.ports.request(m.reply, b"+ACK")  # (delivered and acked: its o.dat has nothing pending)
    env.clock.run_soon()
    env.engine.stop()
    acc_dir = os.path.join(env.options.jetstream.store_dir, "jetstream", "$G")
    os.unlink(os.path.join(acc_dir, dormant.RESTART_FILE))  # (what a killed server leaves: none)
    odat = os.path.join(acc_dir, "streams", "S", "obs", "BROKEN", "o.dat")
    with open(odat, "wb") as f:
        f.write(b"\x16\x82 torn")
    env.engine.stop = lambda: None  # (stopped above)
    env.restart()
    s = _stream(env)
    assert dormant.is_dormant(s) and s.store.eager is None and s.store.state_check == ["GROUPS"]
    env.restart()  # a clean stop before it woke: the restart file carries the same decision
    s = _stream(env)
    assert dormant.is_dormant(s) and s.store.eager is None and s.store.state_check == ["GROUPS"]
    env.pub("s.x")
    assert sorted(s.consumers) == ["BROKEN", "GROUPS", "PENDING"] and sorted(s.lazy.names) == ["IDLE", "IDLE2"]
    assert os.path.exists(odat + ".damaged")
    info = env.api("$JS.API.CONSUMER.INFO.S.IDLE2")
    assert (info["delivered"]["stream_seq"], info["ack_floor"]["stream_seq"], info["num_pending"]) == (2, 2, 2)
    assert info["num_ack_pending"] == 0
    env.stop()


def test_a_consumer_recovered_later_answers_as_one_recovered_at_the_wake(tmp_path):
    """Limits remove messages between the wake and a consumer's first use: it is clamped to the
    stream's first sequence of the wake, as a consumer recovered then was (same floors, same
    num_pending)."""
    env = JsEnv(str(tmp_path))
    env.create("S", subjects=["s.>"], max_msgs=3)
    for i in range(3):
        env.pub(f"s.{i}")
    _durable(env, "A")
    _durable(env, "B")
    env.restart()
    s = _stream(env)
    before = env.api("$JS.API.CONSUMER.INFO.S.A")  # wakes the stream, recovers A alone
    assert list(s.consumers) == ["A"]
    for i in range(3):
        env.pub(f"s.n{i}")  # seqs 4..6: 1..3 removed by max_msgs
    assert env.api("$JS.API.STREAM.INFO.S")["state"]["first_seq"] == 4
    a = env.api("$JS.API.CONSUMER.INFO.S.A")
    b = env.api("$JS.API.CONSUMER.INFO.S.B")
    keys = ("delivered", "ack_floor", "num_pending", "num_ack_pending", "num_redelivered")
    assert {k: a[k] for k in keys} == {k: b[k] for k in keys}
    assert a["num_pending"] == 3 and before["num_pending"] == 3
    env.stop()


def test_restart_file_entries_check_their_consumer_lists(tmp_path):
    env = JsEnv(str(tmp_path))
    env.create("S", subjects=["s.>"])
    _durable(env, "A")
    env.engine.stop()
    acc_dir = os.path.join(env.options.jetstream.store_dir, "jetstream", "$G")
    entry = dormant.read_restart_file(acc_dir)["S"]
    d = os.path.join(acc_dir, "streams", "S")
    assert dormant.sleeping_state(entry, d) is not None
    assert dormant.sleeping_state([*entry[:5], ["A"], ["B"]], d) is not None
    assert dormant.sleeping_state([*entry[:5], "A"], d) is None
    assert dormant.sleeping_state([*entry[:5], None, [1]], d) is None


def test_reset_pause_jsz_and_stream_delete_reach_consumers_not_recovered(tmp_path):
    env = _woken(tmp_path)
    s = _stream(env)
    reset = env.api("$JS.API.CONSUMER.RESET.S.C0", {"seq": 2})  # through the stream's wildcard, once
    assert "error" not in reset and reset["num_pending"] == 3, reset
    assert len([m for m in env.inbox.msgs if m.payload and b"consumer_reset_response" in m.payload]) == 1
    paused = env.api("$JS.API.CONSUMER.PAUSE.S.C1", {"pause_until": "2099-01-01T00:00:00Z"})
    assert paused["paused"] is True
    assert sorted(s.consumers) == ["C0", "C1"]
    jsz = env.engine.jsz({"streams": "1", "consumers": "1"})
    assert jsz["consumers"] == N
    detail = jsz["account_details"][0]["stream_detail"][0]["consumer_detail"]
    assert sorted(c["name"] for c in detail) == [f"C{i}" for i in range(N)] and s.lazy is None
    stream_dir = os.path.join(env.options.jetstream.store_dir, "jetstream", "$G", "streams", "S")
    assert env.api("$JS.API.STREAM.DELETE.S")["success"] is True
    assert not os.path.exists(stream_dir)
    env.stop()


def _asleep(tmp_path, woken: bool) -> JsEnv:
    """S with 3 messages and N durables, none acked: restarted asleep, or woken (none recovered)."""
    if woken:
        return _woken(tmp_path)
    env = JsEnv(str(tmp_path))
    env.create("S", subjects=["s.>"])
    for i in range(3):
        env.pub(f"s.{i}")
    for i in range(N):
        _durable(env, f"C{i}")
    env.restart()
    assert dormant.is_dormant(_stream(env))
    return env


@pytest.mark.parametrize("woken", [False, True], ids=["asleep", "woken"])
def test_an_update_to_interest_counts_every_consumer(tmp_path, woken):
    """Switching to interest retention drops what every matching consumer acked; consumers not
    recovered yet (asleep: all of them) acked nothing, so every message stays."""
    env = _asleep(tmp_path, woken)
    msgs = 4 if woken else 3
    cfg = env.api("$JS.API.STREAM.INFO.S")["config"]
    out = env.api("$JS.API.STREAM.UPDATE.S", {**cfg, "retention": "interest"})
    assert "error" not in out, out
    assert out["state"]["messages"] == msgs and out["state"]["consumer_count"] == N
    s = _stream(env)
    assert s.lazy is None and len(s.consumers) == N
    env.stop()


@pytest.mark.parametrize("woken", [False, True], ids=["asleep", "woken"])
def test_a_stream_delete_deletes_consumers_not_recovered(tmp_path, woken):
    """Each consumer goes as a recovered one would: its advisory, its files (with the stream's),
    the account's count."""
    env = _asleep(tmp_path, woken)
    deleted = env.ports.client_subscribe("$JS.EVENT.ADVISORY.CONSUMER.DELETED.S.*")
    stream_dir = os.path.join(env.options.jetstream.store_dir, "jetstream", "$G", "streams", "S")
    assert env.api("$JS.API.INFO")["consumers"] == N
    assert env.api("$JS.API.STREAM.DELETE.S")["success"] is True
    env.clock.run_soon()
    assert sorted(m.json()["consumer"] for m in deleted.msgs) == [f"C{i}" for i in range(N)]
    assert not os.path.exists(stream_dir)
    info = env.api("$JS.API.INFO")
    assert (info["streams"], info["consumers"]) == (0, 0)
    env.stop()


@pytest.mark.parametrize("woken", [False, True], ids=["asleep", "woken"])
def test_a_purge_moves_consumers_not_recovered(tmp_path, woken):
    """A whole purge moves every consumer past what it removed (nats-server: delivered and ack
    floor at the last purged sequence), recovered or not, asleep or woken."""
    env = _asleep(tmp_path, woken)
    last = 4 if woken else 3
    assert env.api("$JS.API.STREAM.PURGE.S")["purged"] == last
    s = _stream(env)
    for i in range(N):
        info = env.api(f"$JS.API.CONSUMER.INFO.S.C{i}")
        assert (info["delivered"]["stream_seq"], info["ack_floor"]["stream_seq"], info["num_pending"]) == (
            last,
            last,
            0,
        )
    assert s.lazy is None and len(s.consumers) == N
    env.stop()
