"""natsctl stream verbs, replaying the seeds' ORDERS tour, against the reference nats-server and natsd."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import module_server, ok, run_cli

YEAR_NS = 365 * 24 * 3600 * 10**9


server = module_server("cli-streams")


def cli(url, *argv, **kw):
    return run_cli(url, *argv, **kw)


def info(url, name) -> dict:
    return ok(url, "stream", "info", name, "-j").json()


ORDERS_ADD = [
    "stream",
    "add",
    "ORDERS",
    "--subjects",
    "ORDERS.*",
    "--ack",
    "--max-msgs=-1",
    "--max-bytes=-1",
    "--max-age=1y",
    "--storage",
    "file",
    "--retention",
    "limits",
    "--max-msg-size=-1",
    "--discard=old",
]


def test_orders_stream_tour(url, tmp_path):
    # Creating (seed: nats str add ORDERS --subjects "ORDERS.*" --ack --max-msgs=-1 ...)
    r = ok(url, *ORDERS_ADD)
    assert "Stream ORDERS was created" in r.out
    assert "Information for Stream ORDERS" in r.out
    assert "Subjects: ORDERS.*" in r.out
    assert "Retention: File - Limits" in r.out
    assert "Maximum Age: 8760h0m0s" in r.out
    assert "Messages: 0" in r.out

    # Listing
    assert ok(url, "stream", "ls", "-j").json() == ["ORDERS"]
    assert "ORDERS" in ok(url, "stream", "ls").out
    assert ok(url, "str", "ls", "--names").out.split() == ["ORDERS"]

    # Querying: -j gives the server's JSON, and .config is what --config accepts
    i = info(url, "ORDERS")
    cfg = i["config"]
    assert cfg["name"] == "ORDERS" and cfg["subjects"] == ["ORDERS.*"]
    assert cfg["retention"] == "limits" and cfg["storage"] == "file" and cfg["discard"] == "old"
    assert cfg["max_age"] == YEAR_NS and cfg["max_msgs"] == -1 and cfg["max_bytes"] == -1
    assert cfg["max_msg_size"] == -1 and cfg["num_replicas"] == 1 and cfg.get("no_ack", False) is False
    assert i["state"]["messages"] == 0 and "type" not in i

    # Copying with adjustments (seed: nats str cp ORDERS ARCHIVE --subjects "ORDERS_ARCVHIVE.*" --max-age 2y)
    r = ok(url, "stream", "cp", "ORDERS", "ARCHIVE", "--subjects", "ORDERS_ARCHIVE.*", "--max-age", "2y")
    assert "Stream ARCHIVE was created" in r.out and "Maximum Age: 17520h0m0s" in r.out
    arch = info(url, "ARCHIVE")["config"]
    assert arch["subjects"] == ["ORDERS_ARCHIVE.*"] and arch["max_age"] == 2 * YEAR_NS
    assert arch["storage"] == "file" and arch["retention"] == "limits"

    # Editing (seed: subjects were wrong, fix them)
    ok(url, "stream", "rm", "ORDERS", "-f")
    ok(url, "stream", "add", "ORDERS", "--subjects", "ORDERS.new", "--max-age=1y", "--storage", "file")
    assert info(url, "ORDERS")["config"]["subjects"] == ["ORDERS.new"]
    r = ok(url, "stream", "edit", "ORDERS", "--subjects", "ORDERS.*")
    assert "Stream ORDERS was updated" in r.out
    assert '-  subjects: ["ORDERS.new"]' in r.out and '+  subjects: ["ORDERS.*"]' in r.out
    assert info(url, "ORDERS")["config"]["subjects"] == ["ORDERS.*"]

    # ... and from a --config file made of `info -j | jq .config`
    cfg = info(url, "ORDERS")["config"]
    cfg["max_bytes"] = 10 * 1024**3
    f = tmp_path / "orders.json"
    f.write_text(json.dumps(cfg))
    r = ok(url, "stream", "edit", "ORDERS", "--config", str(f))
    assert "max_bytes" in r.out and "Maximum Bytes: 10 GiB" in r.out
    assert info(url, "ORDERS")["config"]["max_bytes"] == 10 * 1024**3
    # the same edit again changes nothing: a clear error, exit 1
    r = cli(url, "stream", "edit", "ORDERS", "--config", str(f))
    assert r.rc == 1 and "no difference" in r.err

    # Publishing into the stream
    for body in ("a", "b", "c"):
        ok(url, "pub", "ORDERS.scratch", body, "--wait")
    st = info(url, "ORDERS")["state"]
    assert st["messages"] == 3 and st["first_seq"] == 1 and st["last_seq"] == 3
    r = ok(url, "stream", "info", "ORDERS")
    assert "Messages: 3" in r.out and "LastSeq: 3" in r.out

    # Reading one message back
    r = ok(url, "stream", "get", "ORDERS", "2")
    assert "ORDERS#2" in r.out and "ORDERS.scratch" in r.out and r.out.rstrip().endswith("b")
    m = ok(url, "stream", "get", "ORDERS", "3", "-j").json()
    assert m["seq"] == 3 and m["subject"] == "ORDERS.scratch"

    # Deleting a message
    r = ok(url, "stream", "rmm", "ORDERS", "1", "-f")
    st = info(url, "ORDERS")["state"]
    assert st["messages"] == 2 and st["first_seq"] == 2
    r = cli(url, "stream", "get", "ORDERS", "1")
    assert r.rc == 1 and "no message found" in r.err

    # Deleting all data
    r = ok(url, "stream", "purge", "ORDERS", "-f")
    assert "Messages: 0" in r.out and "FirstSeq: 4" in r.out
    st = info(url, "ORDERS")["state"]
    assert st["messages"] == 0 and st["first_seq"] == 4 and st["last_seq"] == 3

    # Report
    rep = ok(url, "stream", "report", "-j").json()
    assert sorted(s["config"]["name"] for s in rep) == ["ARCHIVE", "ORDERS"]
    assert "ARCHIVE" in ok(url, "stream", "report").out

    # Deleting sets
    ok(url, "stream", "rm", "ORDERS", "-f")
    ok(url, "stream", "rm", "ARCHIVE", "-f")
    r = cli(url, "stream", "info", "ORDERS")
    assert r.rc == 1 and "stream not found" in r.err
    r = cli(url, "stream", "info")
    assert r.rc == 1 and "no Streams are defined" in r.err
    assert ok(url, "stream", "ls").out.strip() == "No Streams defined"


def test_add_from_config_file_and_seed_json(url, tmp_path):
    # The seed's LOGS example: info -j, rm, re-create from the .config JSON
    ok(
        url,
        "str",
        "add",
        "LOGS",
        "--subjects",
        "logs.>",
        "--storage",
        "file",
        "--retention",
        "limits",
        "--max-msgs=-1",
        "--max-bytes=-1",
        "--max-age",
        "1d",
        "--max-msg-size=-1",
    )
    cfg = info(url, "LOGS")["config"]
    assert cfg["max_age"] == 86400 * 10**9
    f = tmp_path / "LOGS.json"
    f.write_text(ok(url, "stream", "info", "LOGS", "-j").out)  # the whole info: --config takes .config
    ok(url, "stream", "rm", "LOGS", "-f")
    r = ok(url, "stream", "add", "--config", str(f))
    assert "Stream LOGS was created" in r.out and "Maximum Age: 24h0m0s" in r.out
    assert info(url, "LOGS")["config"]["subjects"] == ["logs.>"]
    # stream add with the JSON config shape from the plgd seed (EVENTS, plgd.>)
    ev = {
        "name": "EVENTS",
        "subjects": ["plgd.>"],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs_per_subject": 0,
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 0,
        "max_msg_size": -1,
        "storage": "file",
        "discard": "old",
        "num_replicas": 1,
        "duplicate_window": 600000000000,
    }
    f2 = tmp_path / "events.json"
    f2.write_text(json.dumps(ev))
    ok(url, "str", "add", "EVENTS", "--config", str(f2))
    got = info(url, "EVENTS")["config"]
    assert got["subjects"] == ["plgd.>"] and got["duplicate_window"] == 600000000000


def test_flags_map_to_config(url):
    ok(
        url,
        "stream",
        "add",
        "LIM",
        "--subjects",
        "lim.a,lim.b",
        "--storage",
        "memory",
        "--retention",
        "workqueue",
        "--discard",
        "new",
        "--max-msgs",
        "100",
        "--max-bytes",
        "1MiB",
        "--max-msg-size",
        "1KB",
        "--max-msgs-per-subject",
        "5",
        "--dupe-window",
        "30s",
        "--replicas",
        "1",
        "--max-age",
        "1h",
        "--max-consumers",
        "10",
        "--description",
        "limits here",
    )
    c = info(url, "LIM")["config"]
    assert c["subjects"] == ["lim.a", "lim.b"]
    assert (c["storage"], c["retention"], c["discard"]) == ("memory", "workqueue", "new")
    assert (c["max_msgs"], c["max_bytes"], c["max_msg_size"]) == (100, 1024 * 1024, 1000)
    assert c["max_msgs_per_subject"] == 5 and c["duplicate_window"] == 30 * 10**9
    assert c["max_age"] == 3600 * 10**9 and c["max_consumers"] == 10 and c["description"] == "limits here"
    r = ok(url, "stream", "info", "LIM")
    assert "Retention: Memory - WorkQueue" in r.out and "Discard Policy: New" in r.out
    assert "Maximum Per Subject: 5" in r.out and "Maximum Messages: 100" in r.out


def test_newer_feature_flags_as_the_nats_cli_names_them(url):
    ok(
        url,
        "stream",
        "add",
        "FEAT",
        "--subjects",
        "feat.>",
        "--defaults",
        "--compression",
        "s2",
        "--allow-msg-ttl",
        "--subject-del-markers-ttl",
        "10m",
        "--metadata",
        "team=orders",
        "--metadata",
        "tier=gold",
        "--allow-schedules",
        "--allow-batch",
    )
    c = info(url, "FEAT")["config"]
    assert c["compression"] == "s2" and c["allow_msg_ttl"] is True
    assert c["subject_delete_marker_ttl"] == 600 * 10**9
    assert c["metadata"]["team"] == "orders" and c["metadata"]["tier"] == "gold"
    assert c["allow_msg_schedules"] is True and c["allow_atomic"] is True
    ok(url, "stream", "add", "CNT", "--subjects", "cnt.>", "--defaults", "--allow-counter")
    assert info(url, "CNT")["config"]["allow_msg_counter"] is True
    ok(
        url,
        "stream",
        "add",
        "DPS",
        "--subjects",
        "dps.>",
        "--defaults",
        "--discard-per-subject",
        "--max-msgs-per-subject",
        "2",
    )
    c = info(url, "DPS")["config"]
    assert c["discard"] == "new" and c["discard_new_per_subject"] is True
    r = cli(url, "stream", "add", "BAD", "--subjects", "bad.>", "--defaults", "--metadata", "novalue")
    assert r.rc == 2 and "--metadata: expected KEY=VALUE" in r.err
    help_text = cli(None, "stream", "add", "--help").out
    for flag in ("--compression", "--allow-msg-ttl", "--subject-del-markers-ttl", "--allow-counter", "--metadata"):
        assert flag in help_text


def test_usage_and_api_errors(url):
    # no terminal: a missing value names the flag, exit 2, and nothing is created
    r = cli(url, "stream", "add", "NOSUBJ")
    assert r.rc == 2 and "--subjects is required (no terminal to prompt)" in r.err
    assert ok(url, "stream", "ls", "-j").json() == []
    r = cli(url, "stream", "add", "X", "--subjects", "x", "--max-age", "forever-ish")
    assert r.rc == 2 and "invalid --max-age" in r.err
    r = cli(url, "stream", "add", "X", "--subjects", "x", "--storage", "tape")
    assert r.rc == 2 and "--storage" in r.err
    # destructive verbs need -f without a terminal
    ok(url, "stream", "add", "X", "--subjects", "x")
    r = cli(url, "stream", "rm", "X")
    assert r.rc == 2 and "--force is required" in r.err
    assert info(url, "X")["config"]["name"] == "X"
    # API errors are exit 1 with the server's description
    r = cli(url, "stream", "add", "Y", "--subjects", "x")
    assert r.rc == 1 and "subjects overlap" in r.err
    r = cli(url, "stream", "rm", "NOPE", "-f")
    assert r.rc == 1 and "stream not found" in r.err and "10059" in r.err


def test_purge_filters(url, server):
    ok(url, "stream", "add", "P", "--subjects", "p.*")
    for s in ("p.a", "p.b", "p.a", "p.b", "p.a"):
        ok(url, "pub", s, "x", "--wait", "-q")
    r = ok(url, "stream", "purge", "P", "--subject", "p.a", "-f", "-j").json()
    assert r["success"] is True and r["purged"] == 3
    assert info(url, "P")["state"]["messages"] == 2
    r = ok(url, "stream", "purge", "P", "--keep", "1", "-f", "-j").json()
    if server.kind == "natsd" and r["purged"] != 1:
        pytest.xfail("natsd: purge {keep: 1} after a filtered purge removes every message (reported)")
    assert r["purged"] == 1
    assert info(url, "P")["state"]["messages"] == 1


def test_templates_report_the_servers_answer(url):
    r = cli(
        url,
        "--timeout",
        "300ms",
        "stream",
        "template",
        "add",
        "CLIENTS",
        "--subjects",
        "CLIENT.*",
        "--max-streams",
        "10",
        "--max-msg-size",
        "2048",
    )
    if r.rc == 0:  # a server that implements templates (natsd, issue 5 section 3)
        assert "Stream Template CLIENTS was created" in r.out
        assert "No Streams have been defined by this template" in r.out
        assert ok(url, "stream", "template", "ls", "-j").json() == ["CLIENTS"]
        # the first publish on a new token creates a stream from the template
        ok(url, "pub", "CLIENT.acme", "hello", "--wait")  # acked once the new stream stored it
        made = ok(url, "stream", "ls", "-j").json()
        assert len(made) == 1 and made[0].endswith("acme")  # nats-server named it after the subject
        ti = ok(url, "stream", "template", "info", "CLIENTS", "-j").json()
        assert ti["streams"] == made and ti["config"]["max_streams"] == 10
        assert info(url, made[0])["config"]["max_msg_size"] == 2048
        assert made[0] in ok(url, "stream", "template", "info", "CLIENTS").out
        # deleting the template deletes its streams
        ok(url, "stream", "template", "rm", "CLIENTS", "-f")
        assert ok(url, "stream", "ls", "-j").json() == []
        assert ok(url, "stream", "template", "ls", "-j").json() == []
    else:  # nats-server 2.14+ removed them and does not answer
        assert r.rc == 1 and "stream templates are not supported by this server" in r.err
        r = cli(url, "--timeout", "300ms", "stream", "template", "ls")
        assert r.rc == 1 and "not supported" in r.err


def _interactive(url: str, answers: str, *argv: str):
    """Run the console script with a pseudo-terminal on stdin (so it prompts) and the answers typed ahead."""
    import os
    import pty
    import subprocess

    from tests.helpers.cli import cli_env, natsctl_script

    master, slave = pty.openpty()
    try:
        os.write(master, answers.encode())
        p = subprocess.run(
            [natsctl_script(), "-s", url, *argv], stdin=slave, capture_output=True, text=True, timeout=30, env=cli_env()
        )
    finally:
        os.close(slave)
        os.close(master)
    return p


def test_interactive_prompts_on_a_terminal(url):
    # the seed's `nats str add ORDERS` session: every question answered at the prompt
    p = _interactive(url, "ORDERS.*\nfile\nlimits\nold\n-1\n-1\n1y\n-1\n", "stream", "add", "ORDERS")
    assert p.returncode == 0, p.stderr
    for q in (
        "? Subjects to consume",
        "? Storage backend",
        "? Retention Policy",
        "? Discard Policy",
        "? Message count limit",
        "? Maximum message age limit",
        "? Maximum individual message size",
    ):
        assert q in p.stderr, q
    assert "Stream ORDERS was created" in p.stdout
    c = info(url, "ORDERS")["config"]
    assert c["subjects"] == ["ORDERS.*"] and c["max_age"] == YEAR_NS and c["storage"] == "file"
    # and the consumer session (`nats con add --sample 100`): stream, name, target, start, filter, deliveries
    p = _interactive(url, "ORDERS\nNEW\n\nall\nORDERS.received\n20\n", "consumer", "add", "--sample", "100")
    assert p.returncode == 0, p.stderr
    assert "? Select a Stream" in p.stderr and "? Consumer name" in p.stderr
    assert "Information for Consumer ORDERS > NEW" in p.stdout
    cc = ok(url, "con", "info", "ORDERS", "NEW", "-j").json()["config"]
    assert cc["filter_subject"] == "ORDERS.received" and cc["max_deliver"] == 20
    assert cc.get("deliver_subject") is None and cc["deliver_policy"] == "all"
    # a destructive verb asks for confirmation; "n" keeps the stream
    p = _interactive(url, "n\n", "stream", "rm", "ORDERS")
    assert p.returncode == 1 and "Really delete Stream ORDERS" in p.stderr
    assert info(url, "ORDERS")["config"]["name"] == "ORDERS"
