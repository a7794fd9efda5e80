"""natsctl argument handling and usage errors that never reach the network (no sockets)."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys

import pytest

from natsd.cli import consumers, streams
from natsd.cli.main import main


def run(*argv, stdin=""):
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(list(argv))
    finally:
        sys.stdin = old
    return rc, out.getvalue(), err.getvalue()


def test_help_documents_exit_codes():
    rc, out, _ = run("--help")
    assert rc == 0
    assert "exit codes:" in out and "0  success" in out and "2  usage error" in out and "NATS_URL" in out


def test_unknown_verb_is_usage_error():
    rc, _, err = run("stream", "frobnicate")
    assert rc == 2 and "natsctl: error:" in err


def test_missing_subjects_without_terminal_names_the_flag():
    # fails before connecting: nothing listens on this address, and no socket is opened
    rc, _, err = run("-s", "nats://127.0.0.1:1", "stream", "add", "ORDERS")
    assert rc == 2 and "natsctl: error: --subjects is required (no terminal to prompt)" in err


def test_bad_values_are_usage_errors():
    rc, _, err = run("stream", "add", "X", "--subjects", "x", "--max-age", "soon")
    assert rc == 2 and "invalid --max-age" in err
    rc, _, err = run("stream", "add", "X", "--subjects", "x", "--retention", "forever")
    assert rc == 2 and "--retention" in err
    rc, _, err = run("--timeout", "never-ish", "stream", "ls")
    assert rc == 2 and "--timeout" in err


def test_shared_flags_anywhere():
    parser = __import__("natsd.cli.main", fromlist=["build_parser"]).build_parser()
    a = parser.parse_args(["-s", "nats://x:1", "stream", "info", "ORDERS", "-j"])
    assert a.server == "nats://x:1" and a.json is True and a.stream == "ORDERS"
    a = parser.parse_args(["stream", "rm", "ORDERS", "-f", "--server", "nats://y:2"])
    assert a.force is True and a.server == "nats://y:2"


def _ns(parser_fn, argv):
    p = argparse.ArgumentParser()
    parser_fn(p)
    return p.parse_args(argv)


def test_stream_flags_build_config():
    a = _ns(
        streams.config_flags,
        [
            "--subjects",
            "ORDERS.*",
            "--subjects",
            "a b,c",
            "--ack",
            "--max-msgs=-1",
            "--max-bytes=-1",
            "--max-age=1y",
            "--storage",
            "file",
            "--retention",
            "work",
            "--max-msg-size=-1",
            "--discard=old",
            "--dupe-window",
            "2m",
        ],
    )
    cfg = streams.apply_flags({"name": "ORDERS"}, a)
    assert cfg == {
        "name": "ORDERS",
        "subjects": ["ORDERS.*", "a", "b", "c"],
        "no_ack": False,
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 365 * 86400 * 10**9,
        "storage": "file",
        "retention": "workqueue",
        "max_msg_size": -1,
        "discard": "old",
        "duplicate_window": 120 * 10**9,
    }
    # edit: flags not given leave fields alone
    a = _ns(streams.config_flags, ["--max-age", "2y"])
    cfg = streams.apply_flags({"name": "A", "subjects": ["x"], "max_msgs": 5}, a)
    assert cfg == {"name": "A", "subjects": ["x"], "max_msgs": 5, "max_age": 2 * 365 * 86400 * 10**9}


def test_consumer_flags_build_config():
    a = _ns(
        consumers.config_flags,
        [
            "--filter",
            "ORDERS.received",
            "--ack",
            "explicit",
            "--pull",
            "--deliver",
            "all",
            "--max-deliver=-1",
            "--sample",
            "100",
        ],
    )
    cfg = consumers.apply_flags({}, a)
    assert cfg == {
        "filter_subject": "ORDERS.received",
        "ack_policy": "explicit",
        "deliver_policy": "all",
        "max_deliver": -1,
        "sample_freq": "100%",
    }
    a = _ns(
        consumers.config_flags,
        ["--target", "monitor.ORDERS", "--deliver", "10", "--replay", "original", "--filter", ""],
    )
    cfg = consumers.apply_flags({"filter_subject": "old"}, a)
    assert cfg == {
        "deliver_subject": "monitor.ORDERS",
        "deliver_policy": "by_start_sequence",
        "opt_start_seq": 10,
        "replay_policy": "original",
    }
    a = _ns(consumers.config_flags, ["--deliver", "2m"])
    cfg = consumers.apply_flags({}, a)
    assert cfg["deliver_policy"] == "by_start_time" and cfg["opt_start_time"].endswith("Z")
    with pytest.raises(Exception, match="--sample"):
        consumers.apply_flags({}, _ns(consumers.config_flags, ["--sample", "150"]))


def test_config_diff():
    lines = streams.config_diff(
        {"subjects": ["ORDERS.new"], "max_msgs": -1}, {"subjects": ["ORDERS.*"], "max_msgs": -1}
    )
    assert lines == ['-  subjects: ["ORDERS.new"]', '+  subjects: ["ORDERS.*"]']


def test_version_and_cli_imports_no_server_code():
    rc, out, _ = run("--version")
    assert rc == 0 and out.startswith("natsctl ")
    import subprocess

    code = (
        "import sys, natsd.cli.main; "
        "bad = [m for m in sys.modules if m.split('.')[:2] in (['natsd', 'server'], ['natsd', 'store'], "
        "['natsd', 'jetstream'], ['natsd', 'protocol'])]; print(bad)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "[]", p.stderr


def test_connection_flags_before_the_verb_survive_every_subcommand():
    # (a subcommand's own defaults must not shadow the shared --user given before the verb)
    from natsd.cli.main import build_parser

    for verb in (
        ["pub", "x", "y"],
        ["server", "report", "accounts"],
        ["server", "report", "connections"],
        ["stream", "ls"],
    ):
        a = build_parser().parse_args(["-s", "nats://h:1", "--user", "u", "--password", "p", *verb])
        assert (a.user, a.password) == ("u", "p"), verb
