"""libnats (nats.c, Debian's libnats-dev) works unchanged against natsd.

The C programs in ``tests/compat/c/`` are compiled here with
``cc ... $(pkg-config --cflags --libs libnats)`` into a temporary directory, then each runs against a
fresh server subprocess of each kind: the ``reference`` run (nats-server 2.15.1) proves the
expectations below are right, the ``natsd`` run proves compatibility. ``scripts/ensure-system-deps.sh``
(run by ``make``) installs libnats-dev and pkg-config; the tests skip only when they are missing.

A natsd case that fails while the reference passes is kept and marked
``xfail(strict=True, reason=<symptom>)`` until natsd is fixed.
"""

from __future__ import annotations

import json
import queue
import shlex
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from tests.compat.harness import ScenarioRunner, assert_ok, get, kinds, require_server
from tests.helpers.servers import start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(180)]

C_DIR = Path(__file__).resolve().parents[1] / "compat" / "c"
PROGRAMS = ("core", "js_pull", "js_async_push", "kv", "js_extras", "reconnect", "identities")


def _libnats_flags() -> list[str]:
    cc = shutil.which("cc") or shutil.which("gcc")
    pkg = shutil.which("pkg-config")
    if cc is None or pkg is None:
        pytest.skip("no C compiler or pkg-config on this machine")
    proc = subprocess.run([pkg, "--cflags", "--libs", "libnats"], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        pytest.skip(f"libnats-dev not installed (pkg-config: {proc.stderr.strip()[:200]})")
    return [cc, *shlex.split(proc.stdout)]


@pytest.fixture(scope="module")
def libnats(tmp_path_factory) -> ScenarioRunner:
    cc, *flags = _libnats_flags()
    bindir = tmp_path_factory.mktemp("libnats-bin")
    for name in PROGRAMS:
        src = C_DIR / f"{name}.c"
        # Link flags after the source: the linker resolves libraries left to right.
        proc = subprocess.run(
            [cc, "-std=gnu11", "-O1", "-Wall", "-o", str(bindir / name), str(src), *flags],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, f"compiling {src.name} failed:\n{proc.stderr[-3000:]}"
    return ScenarioRunner(
        command=lambda name: ([str(bindir / name)], bindir), workdir=tmp_path_factory.mktemp("libnats")
    )


# --------------------------------------------------------------------------------------- core


@pytest.mark.parametrize("kind", kinds())
def test_core_pubsub_request(libnats, kind):
    res = libnats.result("core", kind, jetstream=False)
    assert_ok(res)
    assert res["headerSupport"] is True
    assert res["wildcard"] == [["core.a", "one"], ["core.b.c", "two"]]
    assert res["queueTotal"] == 20
    assert (res["traceId"], res["multiCount"], res["headerBody"]) == ("abc 123", 2, "body")
    assert res["reply"] == "echo:hi" and res["manyReplies"] == 20
    assert res["largeOk"] is True
    assert res["noResponders"] is True
    assert res["autoUnsub"] == 2


@pytest.mark.parametrize("kind", kinds())
def test_core_verbose_pedantic_no_echo_old_requests(libnats, kind):
    res = libnats.result("core", kind, jetstream=False)
    assert_ok(res)
    # verbose+pedantic connection (+OK after each op), one inbox SUB + UNSUB 1 per old-style request.
    assert res["oldStyleReplies"] == 5
    assert (res["noEchoPeerGot"], res["noEchoSelfGot"]) == (True, False)


# ------------------------------------------------------------------------------- JetStream pull


@pytest.mark.parametrize("kind", kinds())
def test_js_stream_publish(libnats, kind):
    res = libnats.result("js_pull", kind)
    # libnats sends max_msgs_per_subject:0, which the server must read as "unlimited" (-1).
    assert (get(res, "streamName"), res["maxMsgsPerSubject"], res["duplicates"]) == ("CSMOKE", -1, 120_000_000_000)
    assert get(res, "pub3") == {"stream": "CSMOKE", "seq": 3, "duplicate": False}
    assert get(res, "idFirst") == {"stream": "CSMOKE", "seq": 4, "duplicate": False}
    assert get(res, "idDuplicate") == {"stream": "CSMOKE", "seq": 4, "duplicate": True}
    assert (get(res, "expectLastSeqStatus"), res["expectLastSeqErrCode"]) == ("Error", 10071)
    assert get(res, "expectOk") == {"stream": "CSMOKE", "seq": 5, "duplicate": False}
    assert get(res, "noStreamStatus") == "No responders available for request"


@pytest.mark.parametrize("kind", kinds())
def test_js_pull_fetch_ack(libnats, kind):
    res = libnats.result("js_pull", kind)
    assert_ok(res)
    assert res["fetched"] == 3
    assert [
        (m["stream"], m["consumer"], m["sseq"], m["dseq"], m["delivered"], m["pending"], m["data"])
        for m in res["fetchedMeta"]
    ] == [("CSMOKE", "cdur", i, i, 1, 3 - i, "hello") for i in (1, 2, 3)]
    assert (res["ackFloorStream"], res["numAckPending"], res["numPending"], res["ackPolicy"]) == (3, 0, 0, "explicit")
    assert (res["emptyFetchStatus"], res["emptyFetchCount"]) == ("Timeout", 0)
    assert (res["nakRedelivered"], res["nakSeq"]) == (2, 6)
    assert res["getMsgSubject"] == "csmoke.b" and res["lastBySubjSeq"] == 5
    assert (res["msgs"], res["lastSeq"], res["consumers"]) == (6, 6, 1)


@pytest.mark.parametrize("kind", kinds())
def test_js_api_errors(libnats, kind):
    res = libnats.result("js_pull", kind)
    assert (get(res, "missingStreamStatus"), res["missingStreamErrCode"]) == ("Not Found", 10059)
    assert (get(res, "missingConsumerStatus"), res["missingConsumerErrCode"]) == ("Not Found", 10014)
    assert get(res, "deleteAgainErrCode") == 10059


# ------------------------------------------------------------------------ async publish, push


@pytest.mark.parametrize("kind", kinds())
def test_js_publish_async(libnats, kind):
    res = libnats.result("js_async_push", kind)
    assert (get(res, "asyncAcked"), res["asyncFailed"], res["streamMsgs"]) == (500, 0, 500)


@pytest.mark.parametrize("kind", kinds())
def test_js_push_subscribe_with_acks(libnats, kind):
    res = libnats.result("js_async_push", kind)
    assert (get(res, "pushReceived"), res["pushInOrder"]) == (500, True)
    assert (get(res, "pushAckFloor"), res["pushNumAckPending"]) == (500, 0)
    assert res["pushBound"] is True and res["pushHasDeliverSubject"] is True
    assert get(res, "syncLast") == "m499"


@pytest.mark.parametrize("kind", kinds())
def test_js_push_deliver_group(libnats, kind):
    res = libnats.result("js_async_push", kind)
    # 40 messages split between two queue members, none lost and none delivered twice.
    assert get(res, "queueTotal") == 40


@pytest.mark.parametrize("kind", kinds())
def test_js_ordered_push_consumer(libnats, kind):
    res = libnats.result("js_async_push", kind)
    assert_ok(res)
    assert (res["orderedReceived"], res["orderedInOrder"], res["orderedLastSeq"]) == (250, True, 499)


# ------------------------------------------------------------------------------------------ KV


@pytest.mark.parametrize("kind", kinds())
def test_kv_put_get_update(libnats, kind):
    res = libnats.result("kv", kind)
    assert_ok(res)
    assert res["bucket"] == "ckv"
    assert (res["put1"], res["put2"]) == (1, 2)
    assert res["get1"] == {"key": "k1", "value": "v1", "rev": 1, "op": "PUT"}
    assert res["getMissingStatus"] == "Not Found"
    assert (res["create"], res["createExistingStatus"]) == (3, "Error")
    assert (res["update"], res["updateStaleStatus"]) == (4, "Error")
    assert res["getRev1"] == {"key": "k1", "value": "v1", "rev": 1, "op": "PUT"}
    assert (res["statusValues"], res["statusHistory"]) == (6, 5)


@pytest.mark.parametrize("kind", kinds())
def test_kv_watch(libnats, kind):
    res = libnats.result("kv", kind)
    assert get(res, "watchInitial") == [
        {"key": "k2", "value": "v2", "rev": 2, "op": "PUT"},
        {"key": "k3", "value": "new", "rev": 3, "op": "PUT"},
        {"key": "k1", "value": "v1b", "rev": 4, "op": "PUT"},
    ]
    assert get(res, "watchLive") == [
        {"key": "k2", "value": "v2b", "rev": 5, "op": "PUT"},
        {"key": "k3", "value": "", "rev": 6, "op": "DEL"},
    ]


@pytest.mark.parametrize("kind", kinds())
def test_kv_delete_keys_history(libnats, kind):
    res = libnats.result("kv", kind)
    assert get(res, "getDeletedStatus") == "Not Found"
    assert get(res, "keys") == ["k1", "k2"]
    assert get(res, "history") == [
        {"key": "k1", "value": "v1", "rev": 1, "op": "PUT"},
        {"key": "k1", "value": "v1b", "rev": 4, "op": "PUT"},
    ]
    assert get(res, "openDeletedStatus") == "Not Found"


# ------------------------------------------------------------- less common paths (js_extras.c)


@pytest.mark.parametrize("kind", kinds())
def test_js_update_list_and_headers(libnats, kind):
    res = libnats.result("js_extras", kind)
    assert (get(res, "updateStatus"), res["updateMaxMsgs"], res["updateDescription"]) == (
        "OK",
        1000,
        "updated by libnats",
    )
    assert (get(res, "namesStatus"), res["names"], res["listStatus"], res["listCount"]) == ("OK", ["CX"], "OK", 1)
    assert (get(res, "hdrSeq"), res["getMsgStatus"], res["getMsgHeader"]) == (1, "OK", "red")


@pytest.mark.parametrize("kind", kinds())
def test_js_direct_get(libnats, kind):
    res = libnats.result("js_extras", kind)
    assert (get(res, "directSeqStatus"), res["directSeqSubject"]) == ("OK", "cx.a")
    assert (get(res, "directLastStatus"), res["directLastSeq"]) == ("OK", 4)
    assert (get(res, "directNextStatus"), res["directNextSeq"]) == ("OK", 5)
    assert get(res, "directMissingStatus") == "Not Found"


@pytest.mark.parametrize("kind", kinds())
def test_js_fetch_request_bytes_nowait_heartbeat(libnats, kind):
    res = libnats.result("js_extras", kind)
    # 150 bytes hold two of the 4-byte records (size counts subject, reply and headers too); the rest
    # come with no_wait; an empty consumer with heartbeats times out cleanly (no heartbeat error).
    assert (get(res, "fetchBytesStatus"), res["fetchBytesCount"]) == ("OK", 2)
    assert (get(res, "fetchNoWaitStatus"), res["fetchNoWaitCount"]) == ("OK", 3)
    assert (get(res, "fetchHeartbeatEmptyStatus"), res["fetchHeartbeatEmptyCount"]) == ("Timeout", 0)


@pytest.mark.parametrize("kind", kinds())
def test_js_term_purge_filtered(libnats, kind):
    res = libnats.result("js_extras", kind)
    assert (get(res, "afterTermStatus"), res["afterTermAckPending"], res["afterTermAckFloor"]) == ("Timeout", 0, 6)
    assert (get(res, "purgeStatus"), res["afterPurgeMsgs"]) == ("OK", 4)


@pytest.mark.parametrize("kind", kinds())
def test_kv_purge_and_purge_deletes(libnats, kind):
    res = libnats.result("js_extras", kind)
    assert get(res, "kvPurgeStatus") == "OK"
    # After a purge only the PURGE marker (kvOp_Purge = 3) is left in the key's history.
    assert (res["kvHistoryAfterPurgeStatus"], res["kvHistoryAfterPurge"], res["kvHistoryOp"]) == ("OK", 1, 3)
    assert (get(res, "kvPurgeDeletesStatus"), res["kvValuesAfterPurgeDeletes"]) == ("OK", 0)


@pytest.mark.parametrize("kind", kinds())
def test_connection_drain(libnats, kind):
    res = libnats.result("js_extras", kind)
    assert_ok(res)
    assert (res["drainPending"], res["drainStatus"], res["drainClosed"]) == (5, "OK", True)


# ------------------------------------------------------------------------------------ reconnect


@pytest.mark.parametrize("kind", kinds())
def test_reconnect_through_server_restart(libnats, kind, tmp_path):
    """libnats reconnects after the server restarts on the same port and store, replays its core
    subscription, and its durable pull consumer continues at the next stream sequence."""
    require_server(kind)
    store = tmp_path / "store"
    srv = start_server(kind, tmp_path / "run1", store_dir=store)
    argv, cwd = libnats.command("reconnect")
    prog = subprocess.Popen(
        [*argv, srv.url], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in prog.stdout], daemon=True).start()
    try:
        ready = json.loads(lines.get(timeout=30))
        assert ready == {"phase": "ready", "fetched": 3}, ready
        srv.stop()
        srv = start_server(kind, tmp_path / "run2", store_dir=store, port=srv.port)
        prog.stdin.write("go\n")
        prog.stdin.flush()
        res = json.loads(lines.get(timeout=60))
    finally:
        if prog.poll() is None:
            prog.kill()
        prog.wait(10)
        prog.stdin.close()
        prog.stdout.close()
        err = prog.stderr.read()
        prog.stderr.close()
        srv.stop()
    assert res.get("ok") is True, (res, err[-2000:], srv.log()[-2000:])
    assert (res["reconnected"], res["disconnected"], res["coreReplayed"]) == (True, True, True)
    assert res["afterSeqs"] == [4, 5, 6]


# ------------------------------------------------------------------------------------ TLS (tls.c)


@pytest.mark.parametrize("kind", kinds())
def test_tls_mutual_hostname_and_refusals(kind, tmp_path):
    """libnats with a CA and a client certificate against tls { verify: true }; an expected
    hostname; and the refusals (no client certificate, wrong CA, plaintext)."""
    from tests.compat.harness import _last_json
    from tests.helpers.certs import make_pki

    require_server(kind, jetstream=False)
    cc, *flags = _libnats_flags()
    binary = tmp_path / "tls"
    proc = subprocess.run(
        [cc, "-std=gnu11", "-O1", "-Wall", "-o", str(binary), str(C_DIR / "tls.c"), *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    pki = make_pki(tmp_path / "pki")
    conf = tmp_path / "tls.conf"
    conf.write_text(
        f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", '
        f'ca_file: "{pki.ca_file}", verify: true }}\n'
    )
    srv = start_server(kind, tmp_path / "srv", jetstream=False, config=conf)
    try:
        run = subprocess.run(
            [str(binary), str(pki.dir), f"tls://localhost:{srv.port}"],
            capture_output=True,
            text=True,
            timeout=90,
            stdin=subprocess.DEVNULL,
        )
    finally:
        srv.stop()
    res = _last_json(run.stdout) or {"ok": False}
    assert res.get("ok") is True, (res, run.stderr[-2000:], srv.log()[-2000:])
    assert (res["subject"], res["trace"], res["largeOk"], res["reply"]) == ("tls.h", "c-1", True, True)
    assert res["expectedHostname"] == "OK"
    assert res["noClientCertRefused"] is True and res["wrongCaRefused"] is True
    # without TLS options libnats follows INFO's tls_required and fails verifying the server
    assert res["plaintext"] == "SSL Error"


@pytest.mark.parametrize("mode", ["nkey", "creds", "creds+token"])
@pytest.mark.parametrize("kind", kinds())
def test_nkeys_and_creds(libnats, kind, mode, tmp_path):
    """natsOptions_SetNKeyFromSeed / SetUserCredentialsFromFiles (operator mode, MEMORY resolver),
    also with a token set; a stranger's seed / an expired user JWT are refused with the server's text."""
    from tests.helpers.identities import identity_files

    require_server(kind, jetstream=False)
    conf, good, bad = identity_files("nkey" if mode == "nkey" else "creds", tmp_path / "ids")
    conf_path = tmp_path / "server.conf"
    conf_path.write_text(conf)
    srv = start_server(kind, tmp_path / "srv", config=conf_path, jetstream=False)
    try:
        res = libnats.run_against(srv, "identities", mode, good, bad)
        if res.get("stage") == "good" and "Authorization Violation" in res.get("last_error", ""):
            # libnats 3.4.1 sends no "sig" when the Ed25519 signature of the nonce starts with a
            # zero byte (it treats the raw signature as a C string): 1 login in 256 fails against
            # either server. A new connection gets a new nonce, hence another signature.
            res = libnats.run_against(srv, "identities", mode, good, bad)
    finally:
        srv.stop()
    assert_ok(res)
    assert res["good"] == "ping"
    assert res["badStatus"] == "Authentication Violation", res
    assert "authorization violation" in res["badError"].lower(), res
