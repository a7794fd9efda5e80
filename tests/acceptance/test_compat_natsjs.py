"""nats.js v3 (@nats-io/* 3.4.x from npm) works unchanged against natsd.

Each scenario under ``tests/compat/js/*.mjs`` runs with node against a fresh server subprocess of
each kind: the ``reference`` run (nats-server 2.15.1) proves the expectations below are right, the
``natsd`` run proves compatibility. The client packages are installed on first use with
``npm ci`` from the committed lockfile into ``tests/compat/js/node_modules`` (skipped when that is
present and matches the lockfile). The tests skip only when node/npm are missing or the packages
cannot be installed on this machine.

A natsd case that fails while the reference passes is kept and marked
``xfail(strict=True, reason=<symptom>)`` until natsd is fixed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from tests.compat.harness import ScenarioRunner, assert_ok, get, kinds, require_server
from tests.helpers.servers import start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(300)]

JS_DIR = Path(__file__).resolve().parents[1] / "compat" / "js"
NODE_MODULES = JS_DIR / "node_modules"
#: Written into node_modules after a successful `npm ci`: the digest of package.json + lockfile.
STAMP = NODE_MODULES / ".natsd-compat-stamp"
PACKAGES = ("transport-node", "jetstream", "kv", "obj")


def _lock_digest() -> str:
    h = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        h.update((JS_DIR / name).read_bytes())
    return h.hexdigest()


def _installed(digest: str) -> bool:
    try:
        return STAMP.read_text().strip() == digest and all(
            (NODE_MODULES / "@nats-io" / p / "package.json").exists() for p in PACKAGES
        )
    except OSError:
        return False


def ensure_natsjs() -> str:
    """Install the pinned nats.js packages once (``npm ci``); returns the node binary. Skips when impossible."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node/npm not installed on this machine")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    if int(version.lstrip("v").split(".")[0] or 0) < 18:
        pytest.skip(f"node {version} is too old for nats.js v3 (needs 18+)")
    digest = _lock_digest()
    if _installed(digest):
        return node
    # Parallel pytest runs share this directory: one installs while the others wait on the lock.
    with open(JS_DIR / ".npm-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed(digest):
            env = dict(
                os.environ, npm_config_update_notifier="false", npm_config_fund="false", npm_config_audit="false"
            )
            try:
                proc = subprocess.run(
                    [npm, "ci", "--no-audit", "--no-fund"],
                    cwd=JS_DIR,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=240,
                    stdin=subprocess.DEVNULL,
                )
            except subprocess.TimeoutExpired:
                pytest.skip("npm ci for the nats.js packages timed out (registry unreachable?)")
            if proc.returncode != 0:
                pytest.skip(f"npm ci could not install the nats.js packages: {proc.stderr[-600:]}")
            STAMP.write_text(digest + "\n")
    return node


@pytest.fixture(scope="module")
def natsjs(tmp_path_factory) -> ScenarioRunner:
    node = ensure_natsjs()
    return ScenarioRunner(
        command=lambda name: ([node, f"{name}.mjs"], JS_DIR), workdir=tmp_path_factory.mktemp("natsjs")
    )


def _err(res: dict, key: str) -> tuple:
    """(class name, err_code, http status) of an error the scenario recorded."""
    e = get(res, key)
    return e.get("name"), e.get("code"), e.get("status")


# --------------------------------------------------------------------------------------- core


@pytest.mark.parametrize("kind", kinds())
def test_core_pubsub_request_headers(natsjs, kind):
    res = natsjs.result("core", kind, jetstream=False)
    assert_ok(res)
    assert res["wildcard"] == [["core.a", "one"], ["core.b.x", "two"], ["core.c.d.e", "three"]]
    assert res["star"] == ["core.b.x"]
    assert res["queueTotal"] == 20
    assert res["autoUnsub"] == 2
    assert res["reply"] == "HELLO" and res["replyHeader"] == "2"
    assert res["manyReplies"] == 25
    assert res["headers"] == {
        "traceId": "abc 123",
        "multi": ["1", "2"],
        "body": "with-headers",
        "emptyBodyHasHeaders": False,
        "emptyBodyLen": 0,
    }
    assert res["replySubjectSeen"] is True
    assert res["largeOk"] is True
    assert res["rttOk"] is True and res["drained"] == 10
    # verbose + pedantic + noEcho connection: peers see its publishes, it does not; requests work.
    assert (res["noEchoPeer"], res["noEchoSelf"], res["verboseRequest"]) == ("mine", 0, "pong")


@pytest.mark.parametrize("kind", kinds())
def test_core_no_responders(natsjs, kind):
    res = natsjs.result("core", kind, jetstream=False)
    nr = get(res, "noResponders")
    assert nr["name"] == "RequestError" and nr["noResponders"] is True
    assert nr["cause"]["name"] == "NoRespondersError"


# ----------------------------------------------------------------------------- JetStream manager


@pytest.mark.parametrize("kind", kinds())
def test_jsm_streams(natsjs, kind):
    res = natsjs.result("jsm", kind)
    assert_ok(res)
    assert res["account"]["hasLimits"] is True
    assert res["added"] == {
        "name": "ORDERS",
        "subjects": ["orders.>"],
        "retention": "limits",
        "storage": "file",
        "max_msgs": 1000,
        "duplicate_window": 120_000_000_000,
        "discard": "old",
        "num_replicas": 1,
        "messages": 0,
        "first_seq": 0,
        "last_seq": 0,
        "created": True,
    }
    assert res["addIdempotent"] == "ORDERS"
    assert res["info"] == {
        "messages": 4,
        "bytes": True,
        "first_seq": 1,
        "last_seq": 4,
        "num_subjects": 2,
        "subjects": {"orders.new": 2, "orders.old": 2},
        "consumer_count": 0,
    }
    assert res["updated"] == {
        "subjects": ["orders.>", "returns.>"],
        "max_msgs": 500,
        "description": "updated",
        "messages": 4,
    }
    assert res["list"] == ["AUDIT", "ORDERS"] and res["names"] == ["AUDIT", "ORDERS"]
    assert res["namesFiltered"] == ["AUDIT"]
    assert res["find"] == "ORDERS"
    assert res["msg2"] == {"subject": "orders.new", "seq": 2, "data": "o1"}
    assert res["lastOld"] == {"seq": 3, "data": "o2"}
    assert res["msgMissing"] is None
    assert res["deleteMsg"] is True and res["afterDelete"] == 3
    assert res["purgeFiltered"] == 1 and res["purgeAll"] == 2
    assert res["afterPurge"] == {"messages": 0, "first_seq": 5, "last_seq": 4}
    assert res["streamDeleted"] is True and res["remaining"] == ["AUDIT"]


@pytest.mark.parametrize("kind", kinds())
def test_jsm_api_errors(natsjs, kind):
    res = natsjs.result("jsm", kind)
    assert _err(res, "errAddDifferent") == ("JetStreamApiError", 10058, 400)
    assert _err(res, "errOverlap") == ("JetStreamApiError", 10065, 400)
    assert _err(res, "errInfoMissing") == ("StreamNotFoundError", 10059, 404)
    assert _err(res, "errDeleteMissing") == ("StreamNotFoundError", 10059, 404)
    assert _err(res, "errUpdateStorage") == ("JetStreamApiError", 10052, 500)
    assert _err(res, "errUpdateMissing") == ("StreamNotFoundError", 10059, 404)
    assert _err(res, "errFind") == ("StreamNotFoundError", 10059, 404)
    assert _err(res, "errDeleteMsgAgain") == ("JetStreamApiError", 10057, 500)
    assert _err(res, "errConsumerMissing") == ("ConsumerNotFoundError", 10014, 404)
    assert _err(res, "errConsumerStreamMissing") == ("StreamNotFoundError", 10059, 404)
    assert _err(res, "errConsumerDifferent") == ("JetStreamApiError", 10148, 400)
    assert _err(res, "errAfterDelete") == ("StreamNotFoundError", 10059, 404)
    # nats.js surfaces the server's description verbatim.
    assert get(res, "errAddDifferent")["message"] == "stream name already in use with a different configuration"
    assert get(res, "errUpdateStorage")["message"] == "stream configuration update can not change storage type"


@pytest.mark.parametrize("kind", kinds())
def test_jsm_consumers(natsjs, kind):
    res = natsjs.result("jsm", kind)
    assert get(res, "consumer") == {
        "name": "proc",
        "stream_name": "ORDERS",
        "durable_name": "proc",
        "ack_policy": "explicit",
        "deliver_policy": "all",
        "ack_wait": 30_000_000_000,
        "max_deliver": -1,
        "max_ack_pending": 1000,
        "max_waiting": 512,
        "replay_policy": "instant",
        "num_pending": 2,
        "filter_subject": "orders.new",
    }
    assert get(res, "ephemeralNameLen") == 8
    assert get(res, "consumerUpdated") == {"description": "processor", "max_ack_pending": 50}
    consumers = get(res, "consumers")
    assert len(consumers) == 2 and "proc" in consumers
    assert get(res, "streamConsumers") == 2
    assert get(res, "consumerDeleted") is True


# ------------------------------------------------------------------------------------- publish


@pytest.mark.parametrize("kind", kinds())
def test_js_publish_dedupe_and_expectations(natsjs, kind):
    res = natsjs.result("publish", kind)
    assert_ok(res)

    def ack(seq, dup=False):
        return {"stream": "PUB", "seq": seq, "duplicate": dup}

    assert res["first"] == ack(1) and res["second"] == ack(2)
    assert res["idFirst"] == ack(3) and res["idDuplicate"] == ack(3, True) and res["idOther"] == ack(4)
    assert res["expStreamOk"] == ack(5)
    assert _err(res, "errExpStream") == ("JetStreamApiError", 10060, 400)
    assert res["expLastSeqOk"] == ack(6)
    assert _err(res, "errExpLastSeq") == ("JetStreamApiError", 10071, 400)
    assert res["errExpLastSeq"]["message"] == "wrong last sequence: 6"
    assert res["expSubjSeqOk"] == ack(7)
    assert _err(res, "errExpSubjSeq") == ("JetStreamApiError", 10071, 400)
    assert res["expSubjSeqZero"] == ack(8)
    assert res["expLastIdOk"] == ack(9) and res["expLastIdMatch"] == ack(10)
    assert _err(res, "errExpLastId") == ("JetStreamApiError", 10070, 400)
    assert res["errExpLastId"]["message"] == "wrong last msg ID: m-10"
    assert res["storedHeader"] == "blue"
    assert res["state"] == {"messages": 11, "last_seq": 11}


@pytest.mark.parametrize("kind", kinds())
def test_js_publish_without_stream_is_no_responders(natsjs, kind):
    res = natsjs.result("publish", kind)
    err = get(res, "errNoStream")
    # nats.js reports a 503 on a JetStream publish as "jetstream is not enabled", caused by no responders.
    assert err["name"] == "JetStreamNotEnabled"
    assert err["cause"]["noResponders"] is True


# ------------------------------------------------------------------------------ pull consumers


@pytest.mark.parametrize("kind", kinds())
def test_pull_fetch_ack(natsjs, kind):
    res = natsjs.result("pull", kind)
    fetched = get(res, "fetched")
    assert [(m["subject"], m["data"], m["streamSequence"], m["deliverySequence"], m["pending"]) for m in fetched] == [
        (f"smoke.{i}", f"m{i}", i + 1, i + 1, 4 - i) for i in range(5)
    ]
    assert all(m["stream"] == "SMOKE" and m["consumer"] == "pull1" and m["deliveryCount"] == 1 for m in fetched)
    assert [m["msgId"] for m in fetched] == [f"id-{i}" for i in range(5)]
    assert get(res, "afterAck") == {"delivered": 5, "ack_floor": 5, "num_ack_pending": 0, "num_pending": 0}


@pytest.mark.parametrize("kind", kinds())
def test_pull_next_on_empty_consumer_is_null(natsjs, kind):
    res = natsjs.result("pull", kind)
    assert get(res, "nextEmpty") is None
    # The server holds the request until `expires` (1 s) and then answers 408.
    assert 800 <= get(res, "nextEmptyWaitedMs") < 5000


@pytest.mark.parametrize("kind", kinds())
def test_pull_nak_term_ack_ack(natsjs, kind):
    res = natsjs.result("pull", kind)
    assert get(res, "nakFirst") == {"data": "again", "deliveryCount": 1, "redelivered": False}
    assert get(res, "nakSecond") == {"data": "again", "deliveryCount": 2, "redelivered": True, "streamSequence": 6}
    assert get(res, "ackAck") is True
    assert get(res, "afterTerm") is None


@pytest.mark.parametrize("kind", kinds())
def test_pull_consume_with_heartbeats(natsjs, kind):
    res = natsjs.result("pull", kind)
    assert_ok(res)
    assert res["consumed"] == [f"c{i}" for i in range(10)]
    # Idle heartbeats arrived while the pull was parked, none were missed, and the client re-pulled.
    assert res["consumeNotes"] == {"heartbeat": True, "heartbeats_missed": 0, "next": True}
    assert res["workerInfo"] == {"ack_floor": 10, "num_ack_pending": 0, "num_pending": 0}


# ------------------------------------------------------------------- ordered and push consumers


@pytest.mark.parametrize("kind", kinds())
def test_ordered_consumers(natsjs, kind):
    res = natsjs.result("ordered_push", kind)
    assert get(res, "orderedIsPull") is True
    assert get(res, "orderedAll") == list(range(1, 21))
    assert get(res, "orderedFromSeq") == list(range(15, 21))
    assert get(res, "orderedEven") == [f"e{i}" for i in range(2, 21, 2)]
    assert get(res, "orderedPush") == list(range(1, 21))
    assert get(res, "liveSeqs") == [21, 22, 23]


@pytest.mark.parametrize("kind", kinds())
def test_durable_push_consumer(natsjs, kind):
    res = natsjs.result("ordered_push", kind)
    assert_ok(res)
    assert res["pushIsPush"] is True
    assert res["pushed"] == [f"e{i}" for i in range(1, 21, 2)]
    info = res["pushInfo"]
    assert info["num_ack_pending"] == 0 and info["deliver_subject"] is True and info["push_bound"] is False


@pytest.mark.parametrize("kind", kinds())
def test_push_ack_floor_matches_reference(natsjs, kind):
    seqs = get(natsjs.result("ordered_push", kind), "pushSeqs")
    assert seqs["delivered"] == {"consumer_seq": 10, "stream_seq": 19}
    assert (seqs["ack_floor"]["consumer_seq"], seqs["ack_floor"]["stream_seq"]) == (10, 19)


# ------------------------------------------------------------------------------------------ KV


@pytest.mark.parametrize("kind", kinds())
def test_kv_bucket_put_get_update(natsjs, kind):
    res = natsjs.result("kv", kind)
    assert_ok(res)
    assert res["status"] == {
        "bucket": "cfg",
        "history": 5,
        "values": 0,
        "backingStore": "file",
        "streamName": "KV_cfg",
        "allow_direct": True,
        "max_msgs_per_subject": 5,
        "discard": "new",
        "subjects": ["$KV.cfg.>"],
    }
    assert (res["put1"], res["put2"]) == (1, 2)
    assert res["getColor"] == {"key": "color", "value": "blue", "revision": 1, "operation": "PUT"}
    assert res["getMissing"] is None
    assert res["createNew"] == 3
    assert _err(res, "errCreateExisting") == ("JetStreamApiError", 10071, 400)
    assert res["updateOk"] == 4
    assert _err(res, "errUpdateStale") == ("JetStreamApiError", 10071, 400)
    assert res["getRev"] == {"key": "color", "value": "blue", "revision": 1, "operation": "PUT"}
    assert res["reopenedGet"] == {"key": "color", "value": "green", "revision": 4, "operation": "PUT"}
    assert res["bucketList"] == ["cfg"]


@pytest.mark.parametrize("kind", kinds())
def test_kv_watch(natsjs, kind):
    res = natsjs.result("kv", kind)
    assert get(res, "watched") == [
        {"key": "size", "value": "L", "operation": "PUT", "revision": 2},
        {"key": "shape", "value": "round", "operation": "PUT", "revision": 3},
        {"key": "color", "value": "green", "operation": "PUT", "revision": 4},
        {"key": "size", "value": "XL", "operation": "PUT", "revision": 5},
        {"key": "shape", "value": "", "operation": "DEL", "revision": 6},
        {"key": "stop", "value": "1", "operation": "PUT", "revision": 7},
    ]


@pytest.mark.parametrize("kind", kinds())
def test_kv_delete_purge_keys_history_destroy(natsjs, kind):
    res = natsjs.result("kv", kind)
    assert get(res, "getDeleted") == {"key": "shape", "value": "", "revision": 6, "operation": "DEL"}
    assert get(res, "createAfterDelete") == 8
    assert get(res, "getPurged") == {"key": "size", "value": "", "revision": 9, "operation": "PURGE"}
    assert get(res, "keys") == ["color", "shape", "stop"]
    assert get(res, "historyColor") == [
        {"key": "color", "value": "blue", "revision": 1, "operation": "PUT"},
        {"key": "color", "value": "green", "revision": 4, "operation": "PUT"},
    ]
    assert get(res, "destroyed") is True
    assert _err(res, "errOpenDestroyed") == ("StreamNotFoundError", 10059, 404)


# ------------------------------------------------------------------------------- object store


@pytest.mark.parametrize("kind", kinds())
def test_object_store_blobs(natsjs, kind):
    res = natsjs.result("obj", kind)
    assert_ok(res)
    assert res["status"]["bucket"] == "files" and res["status"]["sealed"] is False
    assert res["status"]["streamName"] == "OBJ_files" and res["status"]["allow_direct"] is True
    assert res["status"]["subjects"] == ["$O.files.C.>", "$O.files.M.>"]
    assert res["putSmall"] == {
        "name": "blob",
        "size": 300_000,
        "chunks": 3,
        "deleted": False,
        "digestPrefix": "SHA-256=",
    }
    assert res["putLarge"] == {"size": 5_243_003, "chunks": 41, "description": "five megabytes"}
    assert res["putEmpty"] == {"size": 0, "chunks": 0}
    assert res["getSmall"] == {"len": 300_000, "sameSha": True}
    assert res["getLarge"] == {"len": 5_243_003, "sameSha": True}
    assert res["getEmpty"] == 0
    assert res["info"] == {"name": "dir/large.bin", "size": 5_243_003, "chunks": 41, "bucket": "files"}
    assert res["list"] == ["blob", "dir/large.bin", "empty"]
    assert res["missing"] is None
    assert res["overwritten"] is True


@pytest.mark.parametrize("kind", kinds())
def test_object_store_delete_and_destroy(natsjs, kind):
    res = natsjs.result("obj", kind)
    assert get(res, "deletePurged") == 41
    assert get(res, "afterDelete") is None
    assert get(res, "deletedInfo") == {"deleted": True, "size": 0}
    assert get(res, "listAfterDelete") == ["blob", "empty"]
    assert get(res, "destroyed") is True


# ------------------------------------------------------------- less common paths (extras.mjs)
# extras.mjs runs independent probes; each records its value or {"error": ...} under its own key.


def _probe(natsjs, kind: str, key: str):
    res = natsjs.result("extras", kind)
    value = get(res, key)
    if isinstance(value, dict) and "error" in value:
        pytest.fail(f"{key} raised {value['error']}")
    return value


@pytest.mark.parametrize("kind", kinds())
def test_direct_get_single_batch_multi_last(natsjs, kind):
    assert _probe(natsjs, kind, "directGet") == {
        "last": [5, "d.a", "v5"],
        "bySeq": [2, "v2"],
        "next": [4, "d.b"],
        "missing": None,
    }
    assert _probe(natsjs, kind, "directBatch") == [2, 3, 4]
    assert _probe(natsjs, kind, "directMultiLast") == [["d.a", 5], ["d.b", 6]]


@pytest.mark.parametrize("kind", kinds())
def test_fetch_by_max_bytes(natsjs, kind):
    # Two 100-byte messages (plus subject/reply/headers) fit in 400 bytes; the pull then ends with a 409.
    assert _probe(natsjs, kind, "fetchMaxBytes") == {"received": 2, "status": 409}
    # consume() with a 1 KiB budget per pull keeps re-pulling until all 10 arrived.
    assert _probe(natsjs, kind, "consumeMaxBytes") == 10


@pytest.mark.parametrize("kind", kinds())
def test_consumer_pause_resume(natsjs, kind):
    assert _probe(natsjs, kind, "pauseResume") == {
        "paused": True,
        "infoPaused": True,
        "resumed": False,
        "afterPaused": False,
    }


@pytest.mark.parametrize("kind", kinds())
def test_workqueue_and_interest_retention(natsjs, kind):
    assert _probe(natsjs, kind, "workqueue") == {"messagesAfterAck": 0, "secondUnfiltered": 10099}
    assert _probe(natsjs, kind, "interest") == {"seq": 1, "messages": 0, "last_seq": 1}


@pytest.mark.parametrize("kind", kinds())
def test_per_message_ttl(natsjs, kind):
    assert _probe(natsjs, kind, "msgTtl") == {"seq": 1, "header": "60s", "refusedCode": 10166}


@pytest.mark.parametrize("kind", kinds())
def test_consumer_filters_and_headers_only(natsjs, kind):
    assert _probe(natsjs, kind, "multiFilter") == [1, 2, 4, 5]
    assert _probe(natsjs, kind, "lastPerSubject") == [4, 5, 6]
    assert _probe(natsjs, kind, "headersOnly") == {"len": 0, "size": "4"}


@pytest.mark.parametrize("kind", kinds())
def test_nak_delay_and_ack_wait_redelivery(natsjs, kind):
    assert _probe(natsjs, kind, "nakDelay") == {"redelivered": True, "waitedAtLeast600": True}
    # Unacked past ack_wait (after one +WPI): redelivered with deliveryCount 2; num_redelivered counts it
    # while it is pending and drops it once the ack is confirmed.
    assert _probe(natsjs, kind, "ackWaitRedelivery") == {
        "first": 1,
        "second": 2,
        "acked": True,
        "redeliveredPending": 1,
        "num_ack_pending": 1,
        "redeliveredAfterAck": 0,
    }


@pytest.mark.parametrize("kind", kinds())
def test_consume_reports_consumer_deleted(natsjs, kind):
    assert _probe(natsjs, kind, "consumerDeletedNotice") is True


@pytest.mark.parametrize("kind", kinds())
def test_mirror_stream(natsjs, kind):
    assert _probe(natsjs, kind, "mirror") == {"messages": 3, "third": "s2"}


@pytest.mark.parametrize("kind", kinds())
def test_kv_watch_history_updates_only_keys_filter(natsjs, kind):
    assert _probe(natsjs, kind, "kvWatchVariants") == {"history": ["a=1", "a=2", "b=1"], "updatesOnly": ["a=3"]}
    assert _probe(natsjs, kind, "kvKeysFilterPurgeDeletes") == {
        "filtered": ["x.1", "x.2"],
        "after": ["x.2", "y.1"],
        "values": 2,
    }


@pytest.mark.parametrize("kind", kinds())
def test_object_store_link_and_seal(natsjs, kind):
    assert _probe(natsjs, kind, "objLinkSeal") == {
        "viaLink": "payload",
        "sealed": True,
        "putAfterSeal": "JetStreamApiError",
    }


# ------------------------------------------------------------------------------ volume, restart, auth


@pytest.mark.parametrize("kind", kinds())
def test_volume_burst_publish_consume_watch(natsjs, kind):
    res = natsjs.result("volume", kind)
    assert_ok(res)
    assert res["burst"] == {"received": 20000, "inOrder": True}
    assert res["published"] == {"acks": 2000, "unique": 2000, "max": 2000}
    assert res["streamMessages"] == 2000
    assert res["consumed"] == {"n": 2000, "ordered": True, "num_pending": 0, "delivered": 2000}
    assert res["orderedRead"] == 2000
    assert res["kvWatched"] == 300


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "kill9"])
@pytest.mark.parametrize("kind", kinds())
def test_client_state_survives_restart(natsjs, kind, hard, tmp_path):
    """Streams, consumer ack state, the dedupe window, KV and objects written by nats.js are all there
    after a restart on the same store (SIGTERM; and kill -9, where every acked message survives but
    the newest consumer acks may be redelivered)."""
    require_server(kind)
    store = tmp_path / "store"
    srv = start_server(kind, tmp_path / "run1", store_dir=store)
    try:
        wrote = natsjs.run_against(srv, "restart", "write")
    finally:
        srv.kill() if hard else srv.stop()
    assert_ok(wrote)
    srv = start_server(kind, tmp_path / "run2", store_dir=store)
    try:
        res = natsjs.run_against(srv, "restart", "check")
    finally:
        srv.stop()
    assert_ok(res)
    assert res["stream"] == {"messages": 5, "first_seq": 1, "last_seq": 5, "subjects": ["keep.>"]}
    assert res["dupAfterRestart"] == {"seq": 5, "duplicate": True}
    if hard:
        # kill -9 may lose the newest consumer state on both servers (nats-server writes it
        # asynchronously: observed ack_floor 3, 2, and 0 with the 3 deliveries pending again). That
        # only means redelivery: every message above the kept ack floor is either redelivered at
        # once or pending redelivery after ack_wait; none is skipped.
        c = res["consumer"]
        assert 0 <= c["ack_floor"] <= 3, c
        resumed = res["resumed"]
        assert resumed == [f"k{i}" for i in range(6 - len(resumed), 6)], resumed
        assert c["ack_floor"] + c["num_ack_pending"] + len(resumed) == 5, (c, resumed)
    else:
        assert res["consumer"] == {"ack_floor": 3, "num_pending": 2, "num_ack_pending": 0}
        assert res["resumed"] == ["k4", "k5"]
    assert res["kv"] == {"a": "2", "aRev": 2, "bOp": "DEL"}
    assert res["kvHistory"] == ["1", "2"]
    assert res["kvPutAfter"] == 5
    assert res["obj"] == {"len": 200_000, "same": True}


@pytest.mark.parametrize("mode", ["userpass", "token"])
@pytest.mark.parametrize("kind", kinds())
def test_auth_user_password_and_token(natsjs, kind, mode, tmp_path):
    require_server(kind, jetstream=False)
    flags = ("--user", "alice", "--pass", "s3cret") if mode == "userpass" else ("--auth", "t0k3n")
    srv = start_server(kind, tmp_path, *flags, jetstream=False)
    try:
        res = natsjs.run_against(srv, "auth", mode)
    finally:
        srv.stop()
    assert res["right"] == {"connected": True, "roundTrip": True}, res
    for case in ("wrong", "none"):
        assert res[case]["connected"] is False, res
        assert (res[case]["name"], res[case]["message"]) == ("AuthorizationError", "Authorization Violation")


# ------------------------------------------------------------ newer server features (newer.mjs)


def _newer(natsjs, kind: str, key: str):
    value = get(natsjs.result("newer", kind), key)
    if isinstance(value, dict) and "error" in value:
        pytest.fail(f"{key} raised {value['error']}")
    return value


@pytest.mark.parametrize("kind", kinds())
def test_stream_created_advisory(natsjs, kind):
    assert _newer(natsjs, kind, "advisory") == {
        "subject": "$JS.EVENT.ADVISORY.STREAM.CREATED.ADV",
        "type": "io.nats.jetstream.advisory.v1.stream_action",
        "stream": "ADV",
    }


@pytest.mark.parametrize("kind", kinds())
def test_subject_transform_and_republish(natsjs, kind):
    assert _newer(natsjs, kind, "subjectTransform") == "moved.x"
    assert _newer(natsjs, kind, "republish") == {"subject": "repub.x", "stream": "RP", "data": "r"}


@pytest.mark.parametrize("kind", kinds())
def test_priority_group_overflow_fetch(natsjs, kind):
    assert _newer(natsjs, kind, "priorityOverflow") == {"fetched": 4, "groups": ["A"], "policy": "overflow"}


@pytest.mark.parametrize("kind", kinds())
def test_kv_per_key_ttl(natsjs, kind):
    # create(k, v, "1s") on a bucket with markerTTL: the key expires and leaves a PURGE marker.
    assert _newer(natsjs, kind, "kvKeyTtl") == {"before": "lived", "after": "PURGE"}


@pytest.mark.parametrize("kind", kinds())
def test_stream_sources(natsjs, kind):
    assert _newer(natsjs, kind, "sources") == 2


@pytest.mark.parametrize("kind", kinds())
def test_atomic_batch_publish(natsjs, kind):
    assert _newer(natsjs, kind, "atomicBatch") == {"count": 3, "seq": 3, "messages": 3}


@pytest.mark.parametrize("kind", kinds())
def test_message_counters(natsjs, kind):
    assert _newer(natsjs, kind, "counter") == {"first": "5", "second": "7", "stored": "7"}


@pytest.mark.parametrize("kind", kinds())
def test_consumer_reset(natsjs, kind):
    assert _newer(natsjs, kind, "consumerReset") == {"nextSeq": 2, "data": "r2"}


@pytest.mark.parametrize("kind", kinds())
def test_consumer_reset_raw_request(natsjs, kind):
    assert _newer(natsjs, kind, "consumerResetRaw") == {
        "type": "io.nats.jetstream.api.v1.consumer_reset_response",
        "apiError": None,
        "nextSeq": 3,
    }


@pytest.mark.parametrize("kind", kinds())
def test_reconnect_through_server_restart(natsjs, kind, tmp_path):
    """A connected nats.js client (core subscription + running consume()) survives a restart of the
    server on the same port and store: it reconnects, replays its subscriptions, and the durable
    consumer continues after the last acked message without redelivering it."""
    require_server(kind)
    store = tmp_path / "store"
    srv = start_server(kind, tmp_path / "run1", store_dir=store)
    node = subprocess.Popen(
        [natsjs.command("reconnect")[0][0], "reconnect.mjs", srv.url],
        cwd=JS_DIR,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in node.stdout], daemon=True).start()
    try:
        ready = json.loads(lines.get(timeout=30))
        assert ready == {"phase": "ready", "seen": 5, "core": 1}, ready
        srv.stop()
        srv = start_server(kind, tmp_path / "run2", store_dir=store, port=srv.port)
        node.stdin.write("go\n")
        node.stdin.flush()
        res = json.loads(lines.get(timeout=60))
    finally:
        if node.poll() is None:
            node.kill()
        node.wait(10)
        node.stdin.close()
        node.stdout.close()
        err = node.stderr.read()
        node.stderr.close()
        srv.stop()
    assert res.get("ok") is True, (res, err[-2000:], srv.log()[-2000:])
    assert res["reconnected"] is True and res["events"] == {"disconnect": True, "reconnect": True}
    assert res["core"] == 2
    assert res["seen"] == list(range(1, 11))
    assert res["consumer"] == {"ack_floor": 10, "num_ack_pending": 0, "num_redelivered": 0}


# ------------------------------------------------------ secure transports: TLS and WebSocket (secure.mjs)


def _secure_conf(tmp_path, kind: str, mode: str):
    """A config for ``mode`` (tls, tlsfirst, ws, wss) with fresh test certificates; returns
    (config path, CA file, URL builder from the started server handle)."""
    from tests.helpers.certs import make_pki
    from tests.helpers.servers import free_port

    pki = make_pki(tmp_path / "pki")
    tls = f'{{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", ca_file: "{pki.ca_file}"'
    conf = tmp_path / f"{mode}.conf"
    if mode in ("tls", "tlsfirst"):
        # (tlsfirst: with a fallback delay so the start helper, which waits for INFO, sees it up)
        hf = ', handshake_first: "300ms"' if mode == "tlsfirst" else ""
        conf.write_text(f"tls {tls}{hf} }}\n")
        return conf, pki.ca_file, lambda srv: f"tls://localhost:{srv.port}"
    wsport = free_port()
    ws_tls = f"tls {tls} }}" if mode == "wss" else "no_tls: true"
    conf.write_text(f"websocket {{ port: {wsport}, {ws_tls} }}\n")
    scheme = "wss" if mode == "wss" else "ws"
    return conf, pki.ca_file, lambda srv: f"{scheme}://localhost:{wsport}"


@pytest.mark.parametrize("mode", ["tls", "tlsfirst", "ws", "wss"])
@pytest.mark.parametrize("kind", kinds())
def test_secure_transports(natsjs, kind, mode, tmp_path):
    """nats.js over TLS (upgrade after INFO, handshake first) and WebSocket (wsconnect, ws:// and
    wss://): pub/sub with headers, request/reply, a 300 kB message and JetStream publish + fetch."""
    from tests.compat.harness import _last_json

    require_server(kind)
    conf, ca, url_of = _secure_conf(tmp_path, kind, mode)
    srv = start_server(kind, tmp_path / "srv", config=conf)
    node = natsjs.command("secure")[0][0]
    # wsconnect uses node's built-in WebSocket (behind a flag before node 22); it trusts extra CAs
    # from the environment.
    env = dict(os.environ, NODE_EXTRA_CA_CERTS=ca)
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
    major = int(version.strip().lstrip("v").split(".")[0])
    flags = ["--experimental-websocket"] if major < 22 else []
    try:
        proc = subprocess.run(
            [node, *flags, "secure.mjs", mode, ca, url_of(srv)],
            cwd=JS_DIR,
            capture_output=True,
            text=True,
            timeout=90,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    finally:
        srv.stop()
    res = _last_json(proc.stdout) or {"ok": False, "stderr": proc.stderr[-2000:]}
    assert res.get("ok") is True, (res, proc.stderr[-2000:], srv.log()[-2000:])
    assert res["tlsRequired"] == (True if mode in ("tls", "tlsfirst", "wss") else None)
    assert res["pubsub"] == [["sec.a", "one", "t-1"], ["sec.b", "two", None]]
    assert res["reply"] == "HELLO" and res["largeOk"] is True
    assert res["acks"] == [1, 2, 3, 4, 5] and res["fetched"] == ["m0", "m1", "m2", "m3", "m4"]


@pytest.mark.parametrize("mode", ["nkey", "creds"])
@pytest.mark.parametrize("kind", kinds())
def test_nkeys_and_creds(natsjs, kind, mode, tmp_path):
    """nkeyAuthenticator with a user seed, credsAuthenticator with a .creds file (operator mode,
    MEMORY resolver); a stranger's seed / an expired user JWT are refused."""
    from tests.helpers.identities import identity_files

    require_server(kind, jetstream=False)
    conf, good, bad = identity_files(mode, tmp_path / "ids")
    conf_path = tmp_path / "server.conf"
    conf_path.write_text(conf)
    srv = start_server(kind, tmp_path / "srv", config=conf_path, jetstream=False)
    try:
        res = natsjs.run_against(srv, "identities", mode, good, bad)
    finally:
        srv.stop()
    assert res["good"] == {"connected": True, "roundTrip": True}, res
    assert res["bad"]["connected"] is False, res
    assert (res["bad"]["name"], res["bad"]["message"]) == ("AuthorizationError", "Authorization Violation"), res
