"""natsctl as natscli users expect it (issue 16): binary-safe bodies, Ctrl-C, ``-j`` everywhere, behaviour
without a terminal, and error texts, against the reference nats-server and natsd."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import time

import pytest

from tests.helpers.cli import cli_env, close_proc, module_server, natsctl_script, ok, run_cli, spawn_cli, wait_for_line

server = module_server("cli-operator")

#: Every byte value, including ones that are never valid UTF-8 (0xff) and a CR LF pair.
BINARY = bytes(range(256)) + b"\r\n\xff\xfe\x00tail"


def run_bytes(url: str, *argv: str, stdin: bytes = b"", timeout: float = 30) -> subprocess.CompletedProcess:
    """The real console script with binary stdin and binary stdout."""
    return subprocess.run(
        [natsctl_script(), "-s", url, *argv], input=stdin, capture_output=True, timeout=timeout, env=cli_env()
    )


def test_pub_from_stdin_and_sub_raw_are_byte_exact(url):
    sub = subprocess.Popen(
        [natsctl_script(), "-s", url, "sub", "bin.x", "--count", "1", "--raw", "--wait", "10s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    try:
        assert b"Listening on [bin.x]" in sub.stderr.readline()
        p = run_bytes(url, "pub", "bin.x", stdin=BINARY)
        assert p.returncode == 0, p.stderr
        out, err = sub.communicate(timeout=15)
    finally:
        close_proc(sub)
    assert sub.returncode == 0, err
    assert out == BINARY + b"\n"  # the body byte for byte, then the newline --raw adds after each message


def test_sub_json_base64_and_req_raw_binary(url):
    sub = spawn_cli(url, "sub", "bin.j", "--count", "2", "-j", "--wait", "10s")
    rep = subprocess.Popen(
        [natsctl_script(), "-s", url, "reply", "bin.echo", "--echo", "--count", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    try:
        wait_for_line(sub, "Listening on [bin.j]", stream="stderr")
        assert b"Listening on [bin.echo]" in rep.stdout.readline()
        assert run_bytes(url, "pub", "bin.j", stdin=b"\xff\x00binary").returncode == 0
        ok(url, "pub", "bin.j", "text body")
        out, _ = sub.communicate(timeout=15)
        # reply answers a request that is not UTF-8, and req --raw prints the reply's bytes exactly
        r = run_bytes(url, "req", "bin.echo", "--raw", stdin=BINARY)
        assert r.returncode == 0, r.stderr
        assert r.stdout == BINARY + b"\n"
        rep.communicate(timeout=10)
    finally:
        close_proc(sub)
        close_proc(rep)
    lines = out.splitlines()
    assert len(lines) == 2  # streaming -j: one JSON object per line
    first, second = (json.loads(line) for line in lines)
    assert first["encoding"] == "base64" and base64.b64decode(first["data"]) == b"\xff\x00binary"
    assert second["data"] == "text body" and "encoding" not in second


def test_kv_get_str_get_and_con_next_raw_are_byte_exact(url):
    ok(url, "kv", "add", "BINKV")
    assert run_bytes(url, "kv", "put", "BINKV", "k", stdin=BINARY).returncode == 0
    r = run_bytes(url, "kv", "get", "BINKV", "k", "--raw")
    assert r.returncode == 0 and r.stdout == BINARY
    j = ok(url, "kv", "get", "BINKV", "k", "-j").json()
    assert j["encoding"] == "base64" and base64.b64decode(j["value"]) == BINARY

    ok(url, "stream", "add", "BIN", "--subjects", "binstr.>", "--defaults")
    assert run_bytes(url, "pub", "binstr.a", stdin=BINARY).returncode == 0
    assert run_bytes(url, "pub", "binstr.a", stdin=b"\xfe second").returncode == 0
    r = run_bytes(url, "stream", "get", "BIN", "1", "--raw")
    assert r.returncode == 0 and r.stdout == BINARY + b"\n"
    ok(url, "con", "add", "BIN", "C", "--pull", "--defaults")
    r = run_bytes(url, "con", "next", "BIN", "C", "--raw")
    assert r.returncode == 0 and r.stdout == BINARY + b"\n"
    # --count N -j: one message per line, the body by the same base64 rule
    ok(url, "pub", "binstr.b", "plain")
    r = ok(url, "con", "next", "BIN", "C", "--count", "2", "-j")
    docs = [json.loads(line) for line in r.out.splitlines()]
    assert [d["subject"] for d in docs] == ["binstr.a", "binstr.b"]
    assert base64.b64decode(docs[0]["data"]) == b"\xfe second" and docs[1]["data"] == "plain"


def _interrupt(proc: subprocess.Popen, ready: str, stream: str = "stderr", pause: float = 0.5) -> tuple[str, str]:
    seen = "".join(wait_for_line(proc, ready, stream=stream))
    time.sleep(pause)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=20)  # (not communicate(): the test closed stdin itself, which communicate() trips over)
    out, err = proc.stdout.read(), proc.stderr.read()
    return (seen + out, err) if stream == "stdout" else (out, seen + err)


@pytest.mark.parametrize(
    "argv, ready, summary",
    [
        (["pub", "spin.x", "--count", "100000000", "-q"], "Reading payload from STDIN", "published"),
        (["bench", "pub", "spin.y", "--msgs", "100000000", "--no-progress"], "Starting", "benchmark stopped after"),
        (
            ["bench", "pub", "spin.z", "--msgs", "100000000", "--clients", "2", "--no-progress"],
            "Starting",
            "benchmark stopped after",
        ),
        (["sub", "spin.>"], "Listening", "received 0 messages"),
    ],
)
def test_ctrl_c_stops_with_a_summary_and_exit_130(url, argv, ready, summary):
    if argv[0] == "pub":
        # the body comes from stdin, so the "Reading payload" log line says the command has started
        proc = subprocess.Popen(
            [natsctl_script(), "-s", url, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(),
        )
        proc.stdin.write("body")
        proc.stdin.close()
        stream = "stderr"
    else:
        proc = spawn_cli(url, *argv)
        stream = "stderr" if argv[0] == "pub" else "stdout"
    try:
        t0 = time.monotonic()
        out, err = _interrupt(proc, ready, stream=stream)
        assert time.monotonic() - t0 < 15  # promptly, not after 100 million messages
    finally:
        close_proc(proc)
    assert proc.returncode == 130, (out, err)
    assert "natsctl: interrupted:" in err and summary in err, err
    assert "Traceback" not in err
    if argv[0] == "bench":
        assert "stats:" in out  # the partial result is still reported


@pytest.mark.parametrize(
    "setup, argv, ready, summary",
    [
        ([], ["reply", "cc.r", "--echo"], ("stdout", "Listening on [cc.r]"), "answered 0 requests on cc.r"),
        (
            [["kv", "add", "CCKV"], ["kv", "put", "CCKV", "k", "v1"]],
            ["kv", "watch", "CCKV"],
            ("stdout", "PUT CCKV > k: v1"),
            "1 updates of CCKV",
        ),
        (
            [["object", "add", "CCOBJ"], ["object", "put", "CCOBJ", "-", "--name", "o1"]],
            ["object", "watch", "CCOBJ"],
            ("stdout", "PUT CCOBJ > o1"),
            "1 changes in CCOBJ",
        ),
        ([], ["events"], ("stderr", "Listening for events"), "0 events"),
        (
            [],
            ["bench", "pubsub", "cc.ps", "--msgs", "100000000", "--no-progress"],
            ("stdout", "Starting"),
            "pub/sub benchmark stopped after",
        ),
    ],
)
def test_ctrl_c_every_watching_command(url, setup, argv, ready, summary):
    for step in setup:
        ok(url, *step, stdin="data")
    proc = spawn_cli(url, *argv)
    try:
        t0 = time.monotonic()
        out, err = _interrupt(proc, ready[1], stream=ready[0], pause=0.3)
        assert time.monotonic() - t0 < 20
    finally:
        close_proc(proc)
    assert proc.returncode == 130, (out, err)
    assert f"natsctl: interrupted: {summary}" in err, err
    assert "Traceback" not in err


def test_ctrl_c_stops_js_fetch_bench_while_messages_flow(url):
    # nats-py's fetch can lose the cancellation that arrives with a message; before the fix the benchmark kept
    # fetching every stored message and only then stopped
    ok(url, "bench", "js", "pub", "ccf.x", "--msgs", "20000", "--no-progress")
    proc = spawn_cli(url, "bench", "js", "fetch", "ccf.x", "--msgs", "100000000", "--no-progress")
    try:
        out, err = _interrupt(proc, "Starting", stream="stdout", pause=0.5)
    finally:
        close_proc(proc)
    assert proc.returncode == 130, (out, err)
    done = int(err.split("stopped after ")[1].split(" of ")[0].replace(",", ""))
    assert done < 20000, err  # stopped part way, not after fetching everything stored


def test_json_everywhere(url):
    r = ok(url, "pub", "j.one", "hello", "-j")
    assert r.json() == {"subject": "j.one", "messages": 1, "bytes": 5}
    r = ok(url, "pub", "j.many", "x{{Count}}", "--count", "3", "-j")
    assert r.json() == {"subject": "j.many", "messages": 3, "bytes": 6}
    ok(url, "kv", "add", "JKV")
    ok(url, "kv", "put", "JKV", "k", "v")
    assert ok(url, "kv", "del", "JKV", "k", "-f", "-j").json() == {"bucket": "JKV", "key": "k", "operation": "DEL"}
    assert ok(url, "kv", "rm", "JKV", "-f", "-j").json() == {"bucket": "JKV", "deleted": True}
    ok(url, "object", "add", "JOBJ")
    ok(url, "object", "put", "JOBJ", "-", "--name", "o", stdin="data")
    assert ok(url, "object", "rm", "JOBJ", "o", "-f", "-j").json() == {"bucket": "JOBJ", "name": "o", "deleted": True}
    assert ok(url, "object", "rm", "JOBJ", "-f", "-j").json() == {"bucket": "JOBJ", "deleted": True}


def test_without_a_terminal(url, tmp_path, monkeypatch):
    ok(url, "stream", "add", "NT", "--subjects", "nt.>", "--defaults")
    # con add must be told pull or push; it does not silently create a default consumer
    r = run_cli(url, "con", "add", "NT", "C1")
    assert r.rc == 2 and "--pull or --target" in r.err
    assert ok(url, "con", "ls", "NT", "-j").json() == []
    ok(url, "con", "add", "NT", "C1", "--defaults")
    assert ok(url, "con", "ls", "NT", "-j").json() == ["C1"]
    # object get does not overwrite a file without -f
    monkeypatch.chdir(tmp_path)
    ok(url, "object", "add", "NTO")
    ok(url, "object", "put", "NTO", "-", "--name", "f.txt", stdin="new")
    (tmp_path / "f.txt").write_text("mine")
    r = run_cli(url, "object", "get", "NTO", "f.txt")
    assert r.rc == 2 and "-f" in r.err and (tmp_path / "f.txt").read_text() == "mine"
    ok(url, "object", "get", "NTO", "f.txt", "-f")
    assert (tmp_path / "f.txt").read_text() == "new"


def test_interactive_picker_lists_choices_and_accepts_ctrl_d(url):
    import os
    import pty

    ok(url, "stream", "add", "PICK1", "--subjects", "p1", "--defaults")
    ok(url, "stream", "add", "PICK2", "--subjects", "p2", "--defaults")
    for answers, rc in (("2\n", 0), ("\x04", 2)):  # a number picks; Ctrl-D (end of input) gives up
        master, slave = pty.openpty()
        try:
            os.write(master, answers.encode())
            p = subprocess.run(
                [natsctl_script(), "-s", url, "stream", "info"],
                stdin=slave,
                capture_output=True,
                text=True,
                timeout=30,
                env=cli_env(),
            )
        finally:
            os.close(slave)
            os.close(master)
        assert "  1) PICK1\n  2) PICK2\n" in p.stderr  # one choice per line
        assert p.returncode == rc, p.stderr
        if rc == 0:
            assert "Information for Stream PICK2" in p.stdout
        else:
            assert "STREAM is required" in p.stderr


def test_error_texts_have_no_python_internals(url, tmp_path):
    for argv in (["pub", "a..b", "x"], ["sub", "a.>.b", "--count", "1"], ["req", "a b", "x"]):
        r = run_cli(url, *argv)
        assert r.rc == 2 and f"invalid subject '{argv[1]}'" in r.err, r
        assert "Error" not in r.err and "nats:" not in r.err
    cfg = tmp_path / "s.json"
    cfg.write_text('{\n  // the orders stream\n  "name": "C", "subjects": ["c"]\n}\n')
    r = run_cli(url, "stream", "add", "--config", str(cfg))
    assert r.rc == 2 and "JSON does not allow comments" in r.err


def test_connection_and_file_errors_in_words(url, tmp_path):
    # what the OS said, without Python's [Errno N] or tuples, naming the file
    r = run_cli("nats://127.0.0.1:1", "stream", "ls")
    assert r.rc == 1 and r.err.strip() == "natsctl: error: could not connect to nats://127.0.0.1:1: connection refused"
    missing = tmp_path / "missing"
    for flag, words in (
        ("--creds", "cannot read the credentials file"),
        ("--nkey", "cannot read the nkey file"),
        ("--tlsca", "cannot load the TLS files"),
    ):
        r = run_cli(url, flag, str(missing), "stream", "ls")  # even when the server asks for no credentials
        assert r.rc == 2 and f"{words}: {missing}: no such file or directory" in r.err, r
        assert "Errno" not in r.err
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("hello")
    r = run_cli(url, "--tlsca", str(not_pem), "stream", "ls")
    assert r.rc == 2 and "cannot load the TLS files: no certificate or crl found" in r.err, r
    # nats-py's errors that only name their class
    ok(url, "kv", "add", "WORDS")
    r = run_cli(url, "kv", "put", "bad bucket", "k", "v")
    assert r.rc == 2 and r.err.strip() == "natsctl: error: invalid bucket name 'bad bucket'", r
    r = run_cli(url, "kv", "put", "WORDS", "bad key", "v")
    assert r.rc == 2 and r.err.strip() == "natsctl: error: invalid key 'bad key'", r
    r = run_cli(url, "object", "get", "bad bucket", "x")
    assert r.rc == 2 and "invalid bucket name 'bad bucket'" in r.err and "JetStream." not in r.err, r


def test_plain_error_words():
    from nats.errors import BadSubjectError, ConnectionClosedError

    from natsd.cli.main import plain_error

    assert plain_error(BadSubjectError()) == "invalid subject"
    assert plain_error(ConnectionClosedError()) == "connection closed"
    assert plain_error(KeyError()) == "key"
    from nats.js.errors import InvalidObjectNameError

    assert plain_error(InvalidObjectNameError()) == "invalid object name"  # its text is only "JetStream.<class>"
    assert plain_error(FileNotFoundError(2, "No such file or directory", "/x")) == "/x: no such file or directory"
