"""natsctl bench: small runs that check the counting and the output, not the speed (speed lives in bench/)."""

from __future__ import annotations

from tests.helpers.cli import close_proc, module_server, ok, spawn_cli, wait_for_line


server = module_server("cli-bench")


def test_core_pub_and_sub(url):
    sub = spawn_cli(url, "bench", "sub", "bench.core", "--msgs", "3000", "--size", "64", "--clients", "2")
    try:
        wait_for_line(sub, "All 2 subscribers are ready", stream="stderr")
        # each sub client counts every message; core NATS may drop under load, so publish until both are done
        while sub.poll() is None:
            ok(url, "bench", "pub", "bench.core", "--msgs", "3000", "--size", "64")
            try:
                out, err = sub.communicate(timeout=3)
            except Exception:  # not finished yet
                continue
    finally:
        close_proc(sub)
    assert sub.returncode == 0, err
    assert "NATS Sub stats:" in out and "msgs/sec" in out and "MB/sec" in out and "[2]" in out


def test_js_pub_and_fetch(url):
    r = ok(
        url,
        "bench",
        "js",
        "pub",
        "bench.js",
        "--msgs",
        "2000",
        "--size",
        "100",
        "--clients",
        "2",
        "--stream",
        "BENCH",
        "--purge",
        "-j",
    )
    res = r.json()
    assert res["msgs"] == 2000 and res["clients"] == 2 and len(res["per_client"]) == 2
    assert res["bytes"] == 200_000 and res["msgs_per_sec"] > 0 and res["mb_per_sec"] > 0
    st = ok(url, "stream", "info", "BENCH", "-j").json()["state"]
    assert st["messages"] == 2000
    r = ok(url, "bench", "js", "fetch", "bench.js", "--msgs", "2000", "--stream", "BENCH", "--batch", "250")
    assert "JetStream Fetch stats:" in r.out and "msgs/sec" in r.out
    ci = ok(url, "con", "info", "BENCH", "natsctl-bench", "-j").json()
    assert ci["num_pending"] == 0 and ci["num_ack_pending"] == 0 and ci["delivered"]["stream_seq"] == 2000
    # sync publishes (--batch 1) in-process
    r = ok(url, "bench", "js", "pub", "bench.js", "--msgs", "200", "--stream", "BENCH", "--batch", "1")
    assert "JetStream Pub stats:" in r.out
    assert ok(url, "stream", "info", "BENCH", "-j").json()["state"]["messages"] == 2200


def test_pubsub_publishers_and_subscribers_at_once(url):
    r = ok(url, "bench", "pubsub", "bench.ps", "--pub", "2", "--sub", "2", "--msgs", "4000", "--size", "32", "-j")
    res = r.json()
    assert res["pub"]["clients"] == 2 and res["pub"]["msgs"] == 4000
    assert [c["msgs"] for c in res["pub"]["per_client"]] == [2000, 2000]
    # every subscriber sees every message
    assert res["sub"]["clients"] == 2 and [c["msgs"] for c in res["sub"]["per_client"]] == [4000, 4000]
    assert res["msgs_per_sec"] > 0 and res["mb_per_sec"] > 0
    r = ok(url, "bench", "pubsub", "bench.ps", "--msgs", "500")
    assert "NATS Pub/Sub stats:" in r.out and " Pub stats:" in r.out and " Sub stats:" in r.out
