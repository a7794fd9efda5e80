"""Backups move between natsd and nats-server, both ways, with ``natsctl stream backup|restore``.

natsd's snapshot is the NATSARC1 archive Snappy-framed (natsd.jetstream.snapshot.s2), which
nats-server's S2 reader takes; nats-server's S2-framed archive restores into natsd. A backup
written by natsd before it framed its archives (bare ``NATSARC1``) restores into both: natsctl
frames it on the way up. Each direction compares the restored stream with the source, message by
message (sequence, subject, headers, body, time), the deleted sequence and the consumer's state.
"""

from __future__ import annotations

import json

import cramjam
import pytest

from tests.helpers.cli import ok, run_cli, start_kind

pytestmark = [pytest.mark.integration, pytest.mark.reference]


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    base = tmp_path_factory.mktemp("snapshot-interop")
    ref = start_kind("reference", base / "ref")
    natsd = start_kind("natsd", base / "natsd")
    yield {"reference": ref.url, "natsd": natsd.url}
    ref.stop()
    natsd.stop()


def _populate(url: str) -> None:
    for s in ("ORDERS",):
        run_cli(url, "stream", "rm", s, "-f")
    ok(url, "stream", "add", "ORDERS", "--subjects", "ORDERS.*", "--storage", "file")
    ok(url, "pub", "ORDERS.new", "order {{Count}} " + "x" * 200, "--count", "300", "--wait", "-q",
       "-H", "X-Order:{{Count}}")
    ok(url, "stream", "rmm", "ORDERS", "7", "-f")
    ok(url, "con", "add", "ORDERS", "NEW", "--pull", "--ack", "explicit", "--deliver", "all")
    ok(url, "con", "next", "ORDERS", "NEW", "--count", "5")


def _compare(src: str, dst: str) -> None:
    before = ok(src, "stream", "info", "ORDERS", "-j").json()["state"]
    after = ok(dst, "stream", "info", "ORDERS", "-j").json()["state"]
    for k in ("messages", "bytes", "first_seq", "last_seq", "num_deleted", "consumer_count"):
        assert after.get(k) == before.get(k), (k, before, after)
    for seq in (1, 6, 8, 150, 300):
        ma = ok(src, "stream", "get", "ORDERS", str(seq), "-j").json()
        mb = ok(dst, "stream", "get", "ORDERS", str(seq), "-j").json()
        assert (mb["subject"], mb.get("hdrs"), mb.get("data"), mb["time"]) == \
               (ma["subject"], ma.get("hdrs"), ma.get("data"), ma["time"])
    assert run_cli(dst, "stream", "get", "ORDERS", "7").rc == 1
    ca = ok(src, "con", "info", "ORDERS", "NEW", "-j").json()
    cb = ok(dst, "con", "info", "ORDERS", "NEW", "-j").json()
    for k in ("delivered", "ack_floor"):
        assert cb[k]["stream_seq"] == ca[k]["stream_seq"], (k, ca[k], cb[k])
    assert cb["num_ack_pending"] == ca["num_ack_pending"]
    assert ca["ack_floor"]["stream_seq"] == 5  # five fetched (and acked) by `con next`


@pytest.mark.parametrize("src_kind,dst_kind", [("natsd", "reference"), ("reference", "natsd")])
def test_backup_of_one_server_restores_into_the_other(both, tmp_path, src_kind, dst_kind):
    src, dst = both[src_kind], both[dst_kind]
    _populate(src)
    run_cli(dst, "stream", "rm", "ORDERS", "-f")
    d = tmp_path / "ORDERS"
    ok(src, "stream", "backup", "ORDERS", str(d), "--no-progress")
    data = (d / "stream.tar.s2").read_bytes()
    assert data.startswith(b"\xff\x06\x00\x00" + (b"sNaPpY" if src_kind == "natsd" else b"S2sTwO"))
    r = ok(dst, "stream", "restore", str(d), "--no-progress")
    assert 'Restored stream "ORDERS"' in r.out
    _compare(src, dst)


def test_old_unframed_natsd_backup_restores_into_both(both, tmp_path):
    """An archive as natsd wrote it before (bare NATSARC1): natsd reads it as it is, and natsctl
    frames it for any server, so nats-server restores it too."""
    src = both["natsd"]
    _populate(src)
    d = tmp_path / "ORDERS"
    ok(src, "stream", "backup", "ORDERS", str(d), "--no-progress")
    bare = bytes(cramjam.snappy.decompress((d / "stream.tar.s2").read_bytes()))
    assert bare.startswith(b"NATSARC1")
    (d / "stream.tar.s2").write_bytes(bare)
    meta = json.loads((d / "backup.json").read_text())
    assert meta["state"]["messages"] == 299
    for kind in ("reference", "natsd"):
        dst = both[kind]
        if kind == "natsd":
            ok(dst, "stream", "rm", "ORDERS", "-f")
        else:
            run_cli(dst, "stream", "rm", "ORDERS", "-f")
        ok(dst, "stream", "restore", str(d), "--no-progress")
        if kind == "reference":
            _compare(src, dst)
    # natsd restored its own old archive (src == dst): compare with the copy on nats-server
    _compare(both["reference"], src)
