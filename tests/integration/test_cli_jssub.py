"""``natsctl sub --stream S`` and its delivery flags (``--last``, ``--all``, ``--new``, ``--start-sequence``,
``--since``, ``--last-per-subject``, ``-T``) against the reference nats-server and natsd: what the nats CLI's
``sub`` does, through an ephemeral consumer that is gone when the command ends."""

from __future__ import annotations

import subprocess

from tests.helpers.cli import cli_env, close_proc, module_server, natsctl_script, ok, run_cli, spawn_cli, wait_for_line

server = module_server("cli-jssub")


def orders(url: str) -> None:
    ok(url, "stream", "add", "ORDERS", "--subjects", "orders.*", "--defaults")
    for i, subj in enumerate(["orders.new", "orders.paid", "orders.new", "orders.paid", "orders.new"], 1):
        ok(url, "pub", subj, f"order {i}")


def lines(r) -> list[dict]:
    import json

    return [json.loads(x) for x in r.out.splitlines() if x.strip()]


def no_consumers_left(url: str) -> None:
    assert ok(url, "con", "ls", "ORDERS", "-j").json() == []


def test_last_and_all_by_stream_or_subject(url):
    orders(url)
    last = lines(ok(url, "sub", "--stream", "ORDERS", "--last", "--count", "1", "-j"))
    assert [(d["stream"], d["seq"], d["subject"], d["data"], d["pending"]) for d in last] == [
        ("ORDERS", 5, "orders.new", "order 5", 0)
    ]
    # a subject alone finds its stream and filters it; -T stops once nothing is pending
    paid = lines(ok(url, "sub", "orders.paid", "--all", "-T", "-j"))
    assert [(d["seq"], d["data"]) for d in paid] == [(2, "order 2"), (4, "order 4")]
    text = ok(url, "sub", "--stream", "ORDERS", "--last", "--count", "1").out
    assert "[#1] Received JetStream message: stream: ORDERS seq: 5 / pending: 0 / subject: orders.new" in text
    assert "order 5" in text
    no_consumers_left(url)


def test_start_sequence_since_and_last_per_subject(url):
    orders(url)
    assert [d["seq"] for d in lines(ok(url, "sub", "--stream", "ORDERS", "--start-sequence", "3", "-T", "-j"))] == [
        3,
        4,
        5,
    ]
    assert [d["seq"] for d in lines(ok(url, "sub", "--stream", "ORDERS", "--since", "1h", "-T", "-j"))] == [
        1,
        2,
        3,
        4,
        5,
    ]
    per = lines(ok(url, "sub", "--stream", "ORDERS", "--last-per-subject", "-T", "-j"))
    assert sorted((d["subject"], d["seq"]) for d in per) == [("orders.new", 5), ("orders.paid", 4)]
    p = subprocess.run(
        [natsctl_script(), "-s", url, "sub", "--stream", "ORDERS", "--start-sequence", "4", "-T", "--raw"],
        capture_output=True,
        env=cli_env(),
        timeout=30,
    )
    assert p.returncode == 0 and p.stdout == b"order 4\norder 5\n", p
    no_consumers_left(url)


def test_new_waits_for_messages_published_after_it(url):
    orders(url)
    proc = spawn_cli(url, "sub", "--stream", "ORDERS", "--new", "--count", "2", "-j")
    try:
        wait_for_line(proc, "Subscribing to JetStream Stream ORDERS", stream="stderr")
        ok(url, "pub", "orders.new", "order 6")
        ok(url, "pub", "orders.paid", "order 7")
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        assert [x for x in out.splitlines() if x] and '"seq":6' in out and '"seq":7' in out and '"seq":5' not in out
    finally:
        close_proc(proc)
    no_consumers_left(url)


def test_refusals(url):
    orders(url)
    r = run_cli(url, "sub", "nope.x", "--last")
    assert r.rc == 1 and "no stream found with subject: nope.x" in r.err, r
    r = run_cli(url, "sub")
    assert r.rc == 2 and "--stream" in r.err, r
    r = run_cli(url, "sub", "--stream", "ORDERS", "--queue", "q")
    assert r.rc == 2 and "queue group" in r.err, r
    r = run_cli(url, "sub", "--stream", "NOPE", "--last", "--count", "1")
    assert r.rc == 1 and "stream not found" in r.err, r
