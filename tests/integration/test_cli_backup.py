"""Backups through natsctl: stream snapshot/restore (chunked $JS.API protocol) and whole-account backup/restore.

Each server kind gets a source and a destination server; a snapshot taken from one is restored into the
other and compared message by message.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import clean_streams, ok, run_cli, server_kinds, start_kind


@pytest.fixture(scope="module", params=server_kinds())
def pair(request, tmp_path_factory):
    base = tmp_path_factory.mktemp(f"cli-backup-{request.param}")
    a = start_kind(request.param, base / "a")
    b = start_kind(request.param, base / "b")
    yield request.param, a.url, b.url
    a.stop()
    b.stop()


@pytest.fixture
def servers(pair):
    kind, a, b = pair
    clean_streams(a)
    clean_streams(b)
    return kind, a, b


def snapshot_or_skip(kind: str, url: str, *argv: str):
    r = run_cli(url, *argv)
    if r.rc != 0 and kind == "natsd" and "not supported" in r.err:
        pytest.skip(f"natsd has no snapshot support yet: {r.err.strip().splitlines()[-1]}")
    assert r.rc == 0, r
    return r


def populate(url: str) -> None:
    ok(url, "stream", "add", "ORDERS", "--subjects", "ORDERS.*", "--max-age", "1y")
    ok(url, "pub", "ORDERS.new", "order {{Count}}", "--count", "200", "--wait", "-q", "-H", "X-Order:{{Count}}")
    ok(url, "stream", "rmm", "ORDERS", "7", "-f")
    ok(url, "con", "add", "ORDERS", "NEW", "--pull", "--ack", "explicit", "--deliver", "all")
    ok(url, "con", "next", "ORDERS", "NEW", "--count", "3")


def test_stream_backup_restore_round_trip(servers, tmp_path):
    kind, a, b = servers
    populate(a)
    before = ok(a, "stream", "info", "ORDERS", "-j").json()
    cons_before = ok(a, "con", "info", "ORDERS", "NEW", "-j").json()
    d = tmp_path / "ORDERS"
    r = snapshot_or_skip(kind, a, "stream", "backup", "ORDERS", str(d), "--no-progress")
    assert 'Starting backup of Stream "ORDERS"' in r.out and "199 messages" in r.out
    meta = json.loads((d / "backup.json").read_text())
    assert meta["config"]["name"] == "ORDERS" and meta["state"]["messages"] == 199
    assert (d / "stream.tar.s2").stat().st_size > 0

    r = ok(b, "stream", "restore", str(d), "--no-progress")
    assert 'Restored stream "ORDERS"' in r.out and "Messages: 199" in r.out
    after = ok(b, "stream", "info", "ORDERS", "-j").json()
    for k in ("messages", "bytes", "first_seq", "last_seq", "num_deleted", "consumer_count"):
        assert after["state"].get(k) == before["state"].get(k), k
    assert after["config"]["subjects"] == ["ORDERS.*"] and after["config"]["max_age"] == before["config"]["max_age"]
    # messages keep their sequence, subject, headers and body; the deleted one stays deleted
    for seq in (1, 8, 200):
        ma = ok(a, "stream", "get", "ORDERS", str(seq), "-j").json()
        mb = ok(b, "stream", "get", "ORDERS", str(seq), "-j").json()
        assert (mb["subject"], mb.get("hdrs"), mb.get("data"), mb["time"]) == (
            ma["subject"],
            ma.get("hdrs"),
            ma.get("data"),
            ma["time"],
        )
    assert run_cli(b, "stream", "get", "ORDERS", "7").rc == 1
    # the consumer and its state came along
    cons_after = ok(b, "con", "info", "ORDERS", "NEW", "-j").json()
    assert cons_after["delivered"]["stream_seq"] == cons_before["delivered"]["stream_seq"] == 3
    assert cons_after["num_ack_pending"] == cons_before["num_ack_pending"] == 0
    assert cons_after["ack_floor"]["stream_seq"] == cons_before["ack_floor"]["stream_seq"]
    assert ok(b, "con", "next", "ORDERS", "NEW", "--raw").out.strip() == "order 4"

    # restoring over an existing stream is the server's error; a renamed restore is refused up front
    r = run_cli(b, "stream", "restore", str(d))
    assert r.rc == 1 and "already in use" in r.err
    r = run_cli(b, "stream", "restore", "OTHER", str(d))
    assert r.rc == 2 and "may not be changed" in r.err
    r = run_cli(b, "stream", "restore", str(tmp_path / "missing"))
    assert r.rc == 2 and "is not a stream backup" in r.err


def test_backup_without_consumers_and_errors(servers, tmp_path):
    kind, a, b = servers
    populate(a)
    d = tmp_path / "nocons"
    snapshot_or_skip(kind, a, "stream", "backup", "ORDERS", str(d), "--no-consumers")
    ok(b, "stream", "restore", str(d))
    assert ok(b, "con", "ls", "ORDERS", "-j").json() == []
    assert ok(b, "stream", "info", "ORDERS", "-j").json()["state"]["messages"] == 199
    r = run_cli(a, "stream", "backup", "NOPE", str(tmp_path / "nope"))
    assert r.rc == 1 and "stream not found" in r.err
    assert not (tmp_path / "nope" / "stream.tar.s2").exists()


def test_account_backup_and_restore_configuration(servers, tmp_path):
    kind, a, b = servers
    populate(a)
    ok(a, "stream", "add", "LOGS", "--subjects", "logs.>", "--max-msgs", "1000")
    d = tmp_path / "acct"
    r = ok(a, "backup", str(d))
    assert "Configuration backup complete" in r.err
    names = sorted(p.name for p in d.iterdir())
    assert names == ["stream_LOGS.json", "stream_ORDERS.json", "stream_ORDERS_consumer_NEW.json"]
    scfg = json.loads((d / "stream_ORDERS.json").read_text())
    assert scfg["name"] == "ORDERS" and scfg["subjects"] == ["ORDERS.*"]
    ccfg = json.loads((d / "stream_ORDERS_consumer_NEW.json").read_text())
    assert ccfg["stream_name"] == "ORDERS" and ccfg["durable_name"] == "NEW"

    r = ok(b, "restore", str(d))
    assert "Restoring Consumer ORDERS > NEW" in r.err
    assert ok(b, "stream", "ls", "-j").json() == ["LOGS", "ORDERS"]
    assert ok(b, "stream", "info", "LOGS", "-j").json()["config"]["max_msgs"] == 1000
    assert ok(b, "con", "ls", "ORDERS", "-j").json() == ["NEW"]
    # configuration only: no data
    assert ok(b, "stream", "info", "ORDERS", "-j").json()["state"]["messages"] == 0

    # a drifted stream is refused unless --update-streams
    ok(b, "stream", "edit", "LOGS", "--max-msgs", "5")
    r = run_cli(b, "restore", str(d))
    assert r.rc == 1 and "use --update-streams" in r.err
    r = ok(b, "restore", str(d), "--update-streams")
    assert "Updating Stream LOGS configuration" in r.err
    assert ok(b, "stream", "info", "LOGS", "-j").json()["config"]["max_msgs"] == 1000


def test_account_backup_with_data(servers, tmp_path):
    kind, a, b = servers
    populate(a)
    d = tmp_path / "full"
    r = run_cli(a, "backup", str(d), "--data")
    if r.rc != 0 and kind == "natsd" and "not supported" in r.err:
        pytest.skip(f"natsd has no snapshot support yet: {r.err.strip().splitlines()[-1]}")
    assert r.rc == 0, r
    assert (d / "stream_ORDERS" / "stream.tar.s2").is_file()
    r = ok(b, "restore", str(d))
    assert "Restoring Stream ORDERS with its data" in r.err
    st = ok(b, "stream", "info", "ORDERS", "-j").json()["state"]
    assert st["messages"] == 199 and st["last_seq"] == 200
    assert ok(b, "con", "info", "ORDERS", "NEW", "-j").json()["delivered"]["stream_seq"] == 3


def _stderr_on_pty(url: str, *argv: str) -> tuple[int, str, bytes]:
    import os
    import pty
    import subprocess

    from tests.helpers.cli import cli_env, natsctl_script

    master, slave = pty.openpty()
    p = subprocess.Popen(
        [natsctl_script(), "-s", url, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=cli_env(),
    )
    os.close(slave)
    data = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the slave side closed: the process is done with stderr
            break
        if not chunk:
            break
        data += chunk
    os.close(master)
    out = p.stdout.read().decode() if p.stdout else ""
    p.wait(30)
    if p.stdout:
        p.stdout.close()
    return p.returncode, out, data


def test_progress_bar_only_on_a_terminal(servers, tmp_path):
    kind, a, _ = servers
    populate(a)
    rc, out, err = _stderr_on_pty(a, "stream", "backup", "ORDERS", str(tmp_path / "p1"))
    if rc != 0 and kind == "natsd" and b"not supported" in err:
        pytest.skip("natsd has no snapshot support yet")
    assert rc == 0 and "Received" in out
    assert b"backup ORDERS" in err and b"\x1b[" in err  # a drawn rich bar on the terminal
    rc, out, err = _stderr_on_pty(a, "stream", "backup", "ORDERS", str(tmp_path / "p2"), "--no-progress")
    assert rc == 0 and b"backup ORDERS" not in err
    rc, out, err = _stderr_on_pty(a, "bench", "pub", "p.x", "--msgs", "500")
    assert rc == 0 and b"NATS Pub" in err and "NATS Pub stats" in out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_round_trip_100k_messages_with_consumers(servers, tmp_path):
    """The issue's scale: 100k messages, consumers with state, restored into a second server."""
    kind, a, b = servers
    ok(a, "stream", "add", "BIG", "--subjects", "big.*")
    snapshot_or_skip(kind, a, "stream", "backup", "BIG", str(tmp_path / "probe"))  # cheap, before filling it
    ok(a, "bench", "js", "pub", "big.x", "--msgs", "100000", "--size", "64", "--stream", "BIG", "--batch", "500")
    ok(a, "stream", "rmm", "BIG", "500", "-f")
    ok(a, "con", "add", "BIG", "C1", "--pull", "--ack", "explicit", "--deliver", "all")
    ok(a, "con", "next", "BIG", "C1", "--count", "5")
    ok(a, "con", "add", "BIG", "C2", "--pull", "--ack", "explicit", "--deliver", "50000")
    before = ok(a, "stream", "info", "BIG", "-j").json()["state"]
    assert before["messages"] == 99999
    d = tmp_path / "big"
    snapshot_or_skip(kind, a, "stream", "backup", "BIG", str(d), "--no-progress")
    ok(b, "stream", "restore", str(d), "--no-progress")
    after = ok(b, "stream", "info", "BIG", "-j").json()["state"]
    for k in ("messages", "bytes", "first_seq", "last_seq", "num_deleted", "consumer_count"):
        assert after.get(k) == before.get(k), k
    assert ok(b, "con", "info", "BIG", "C1", "-j").json()["ack_floor"]["stream_seq"] == 5
    assert ok(b, "con", "info", "BIG", "C2", "-j").json()["config"]["opt_start_seq"] == 50000
    assert ok(b, "stream", "get", "BIG", "100000", "-j").json() == ok(a, "stream", "get", "BIG", "100000", "-j").json()
