"""Restore without sockets (natsd.jetstream.snapshot.restore): an upload into a second engine gives
the same stream and consumers, across a restart too; errors, stalls, limits and interrupted
uploads leave nothing behind."""

from __future__ import annotations

import os

import cramjam

import pytest

from natsd.jetstream.config.models import SECOND
from tests.helpers.fakeports import JsEnv
from tests.unit.jetstream.snapshot.flows import setup_orders, take_snapshot, upload_restore

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("storage", ["file", "memory"])
def test_restore_into_second_engine_is_identical(env, env2, storage):
    setup_orders(env, storage=storage)
    # consumer state: deliver 5, ack 3 of them
    msgs = env.request_msgs("$JS.API.CONSUMER.MSG.NEXT.ORDERS.C1", {"batch": 5, "no_wait": True})
    for m in msgs[:3]:
        env.ports.publish(m.reply, "", None, b"+ACK")
    env.clock.run_soon()
    env.api("$JS.API.STREAM.MSG.DELETE.ORDERS", {"seq": 50})  # a trailing deleted sequence
    reply, _, data = take_snapshot(env)
    final = upload_restore(env2, reply, data)
    assert final["type"] == "io.nats.jetstream.api.v1.stream_create_response", final
    a = env.api("$JS.API.STREAM.INFO.ORDERS", {"deleted_details": True})["state"]
    b = env2.api("$JS.API.STREAM.INFO.ORDERS", {"deleted_details": True})["state"]
    for k in (
        "messages",
        "bytes",
        "first_seq",
        "first_ts",
        "last_seq",
        "num_deleted",
        "deleted",
        "num_subjects",
        "consumer_count",
    ):
        assert a.get(k) == b.get(k), k
    for seq in (1, 3, 12, 49):
        ma = env.api("$JS.API.STREAM.MSG.GET.ORDERS", {"seq": seq})["message"]
        mb = env2.api("$JS.API.STREAM.MSG.GET.ORDERS", {"seq": seq})["message"]
        assert ma == mb
    ca = env.api("$JS.API.CONSUMER.INFO.ORDERS.C1")
    cb = env2.api("$JS.API.CONSUMER.INFO.ORDERS.C1")
    for k in ("delivered", "ack_floor"):
        assert {x: y for x, y in ca[k].items() if x != "last_active"} == {
            x: y for x, y in cb[k].items() if x != "last_active"
        }, k
    for k in ("num_ack_pending", "num_redelivered"):
        assert ca[k] == cb[k], (k, ca[k], cb[k])
    # 6..49 without the deleted 10 and 11 (the source's own num_pending may lag a deletion on a
    # limits stream: engine issue reported separately)
    assert cb["num_pending"] == 42
    # the restored stream takes new messages after the old last sequence
    assert env2.pub("orders.9", b"new")["seq"] == 51


def test_restore_errors(env, env2):
    setup_orders(env, n=5)
    reply, _, data = take_snapshot(env)
    assert env2.api("$JS.API.STREAM.RESTORE.ORDERS")["error"]["err_code"] == 10003
    out = env2.api("$JS.API.STREAM.RESTORE.OTHER", {"config": reply["config"]})
    assert out["error"]["err_code"] == 10056
    # the name exists already
    assert env.api("$JS.API.STREAM.RESTORE.ORDERS", {"config": reply["config"]})["error"] == {
        "code": 400,
        "err_code": 10130,
        "description": "stream name already in use, cannot restore",
    }
    # a truncated upload fails and leaves nothing behind
    out = env2.api("$JS.API.STREAM.RESTORE.ORDERS", {"config": reply["config"], "state": reply["state"]})
    r = env2.ports.request(out["deliver_subject"], data[:-5])
    env2.clock.run_soon()
    assert env2.replies(r)[-1].payload == b""
    r = env2.ports.request(out["deliver_subject"], b"")
    env2.clock.run_soon()
    err = env2.replies(r)[-1].json()
    assert err["type"] == "io.nats.jetstream.api.v1.stream_create_response"
    assert err["error"] == {"code": 500, "err_code": 10062, "description": "restore failed: backup was truncated"}
    assert "ORDERS" not in env2.account.streams
    # garbage
    out = env2.api("$JS.API.STREAM.RESTORE.ORDERS", {"config": reply["config"], "state": reply["state"]})
    r = env2.ports.request(out["deliver_subject"], b"this is not an archive")
    env2.clock.run_soon()
    assert env2.replies(r)[-1].json()["error"]["description"] == "restore failed: unsupported snapshot format"


def test_restore_stalls_after_five_seconds(env2):
    out = env2.api("$JS.API.STREAM.RESTORE.ORDERS", {"config": {"name": "ORDERS", "subjects": ["orders.>"]}})
    deliver = out["deliver_subject"]
    assert env2.ports.has_interest(deliver)
    env2.clock.advance(5 * SECOND + 1)
    assert not env2.ports.has_interest(deliver)
    assert "ORDERS" not in env2.account.streams


def test_restored_stream_and_consumer_state_survive_restart(env, env2):
    setup_orders(env)
    msgs = env.request_msgs("$JS.API.CONSUMER.MSG.NEXT.ORDERS.C1", {"batch": 4, "no_wait": True})
    for m in msgs[:2]:
        env.ports.publish(m.reply, "", None, b"+ACK")
    env.clock.run_soon()
    reply, _, data = take_snapshot(env)
    assert "error" not in upload_restore(env2, reply, data)
    before = env2.api("$JS.API.CONSUMER.INFO.ORDERS.C1")
    env2.restart()
    after = env2.api("$JS.API.CONSUMER.INFO.ORDERS.C1")
    assert after["ack_floor"]["stream_seq"] == before["ack_floor"]["stream_seq"] == 2
    assert after["delivered"]["stream_seq"] == before["delivered"]["stream_seq"] == 4
    assert after["num_ack_pending"] == 2
    assert env2.api("$JS.API.STREAM.INFO.ORDERS")["state"]["messages"] == 48


def test_restore_larger_than_the_account_limit_is_refused(env, tmp_path):
    from natsd.config.options import AccountJetStreamLimits

    setup_orders(env, n=200)
    reply, _, data = take_snapshot(env)
    small = JsEnv(str(tmp_path / "small"), account_limits=AccountJetStreamLimits(max_storage=2000))
    try:
        out = small.api("$JS.API.STREAM.RESTORE.ORDERS", {"config": reply["config"], "state": reply["state"]})
        r = small.ports.request(out["deliver_subject"], data)
        small.clock.run_soon()
        assert small.replies(r)[-1].json()["error"] == {
            "code": 500,
            "err_code": 10047,
            "description": "insufficient storage resources available",
        }
        assert "ORDERS" not in small.account.streams
    finally:
        small.stop()


def test_interrupted_restore_leaves_no_stream_behind(env, env2):
    import os

    setup_orders(env)
    reply, _, data = take_snapshot(env)
    # Half of natsd's older unframed archive (still restorable): it yields entries at once,
    # where the Snappy frame of this small stream would decode only when complete.
    bare = bytes(cramjam.snappy.decompress(data))
    out = env2.api("$JS.API.STREAM.RESTORE.ORDERS", {"config": reply["config"], "state": reply["state"]})
    r = env2.ports.request(out["deliver_subject"], bare[: len(bare) // 2])
    env2.clock.run_soon()
    assert env2.replies(r)[-1].payload == b""
    streams_dir = env2.account.directory
    hidden = [n for n in os.listdir(streams_dir) if n.startswith(".restore.")]
    assert len(hidden) == 1 and not os.path.exists(os.path.join(streams_dir, "ORDERS"))
    # "crash": restart without finishing; the half upload is neither recovered nor kept
    env2.restart()
    assert "ORDERS" not in env2.account.streams
    assert [n for n in os.listdir(streams_dir) if n.startswith(".restore.")] == []
    # a complete restore ends up in the stream's own directory
    final = upload_restore(env2, reply, data)
    assert "error" not in final, final
    assert os.path.isdir(os.path.join(streams_dir, "ORDERS"))
    assert [n for n in os.listdir(streams_dir) if n.startswith(".")] == []


def test_restore_that_cannot_add_the_stream_fails_as_the_reference(env):
    setup_orders(env, n=3)
    reply, _, data = take_snapshot(env)
    # another name, same subjects as the live ORDERS: the upload fails when the stream is added
    cfg = dict(reply["config"], name="ORDERS2")
    out = env.api("$JS.API.STREAM.RESTORE.ORDERS2", {"config": cfg, "state": reply["state"]})
    assert out["deliver_subject"].startswith("$JS.SNAPSHOT.RESTORE.ORDERS2.")
    r = env.ports.request(out["deliver_subject"], data)
    env.clock.run_soon()
    assert env.replies(r)[-1].json() == {
        "type": "io.nats.jetstream.api.v1.stream_create_response",
        "error": {
            "code": 500,
            "err_code": 10062,
            "description": "restore failed: error adding stream: subjects overlap with an existing stream (10065)",
        },
    }
    assert "ORDERS2" not in env.account.streams
    # with its own subjects it restores fine next to the original
    cfg["subjects"] = ["orders2.>"]
    out = env.api("$JS.API.STREAM.RESTORE.ORDERS2", {"config": cfg, "state": reply["state"]})
    env.ports.request(out["deliver_subject"], data)
    r = env.ports.request(out["deliver_subject"], b"")
    env.clock.run_soon()
    final = env.replies(r)[-1].json()
    assert final["config"]["name"] == "ORDERS2" and final["state"]["messages"] == 3


def test_a_stream_that_never_stored_a_message_snapshots_restores_and_restarts(env, env2):
    """A file stream without a block (no msgs/: its first write makes it) backs up and restores as
    an empty stream; the restored one has no block either until it is used, and keeps across a
    restart (a kill -9 too: no restart file)."""
    env.create("ORDERS", subjects=["orders.>"], storage="file")
    reply, _, data = take_snapshot(env)
    final = upload_restore(env2, reply, data)
    assert final["type"] == "io.nats.jetstream.api.v1.stream_create_response", final
    d = env2.account.stream_dir("ORDERS")
    assert sorted(os.listdir(d)) == ["meta.inf", "meta.sum"]
    state = env2.api("$JS.API.STREAM.INFO.ORDERS")["state"]
    assert (state["messages"], state["first_seq"], state["last_seq"]) == (0, 0, 0), state
    env2.restart()  # clean: asleep from the restart file
    assert env2.api("$JS.API.STREAM.INFO.ORDERS")["state"]["messages"] == 0
    env2.engine.stop()
    os.remove(os.path.join(os.path.dirname(os.path.dirname(d)), "natsd-restart.json"))
    env2.restart()  # (no restart file: as after a kill -9)
    assert env2.api("$JS.API.STREAM.INFO.ORDERS")["state"]["messages"] == 0
    assert env2.pub("orders.1", b"first")["seq"] == 1
    assert os.listdir(os.path.join(d, "msgs")) == ["1.blk"]
