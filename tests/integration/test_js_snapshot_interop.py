"""Backups move between natsd and nats-server, both ways, with ``natsctl stream backup|restore``.

natsd's snapshot is the NATSARC1 archive Snappy-framed (natsd.jetstream.snapshot.s2), which
nats-server's S2 reader takes; nats-server's S2-framed archive restores into natsd. A backup
written by natsd before it framed its archives (bare ``NATSARC1``) restores into both: natsctl
frames it on the way up. Each direction compares the restored stream with the source, message by
message (sequence, subject, headers, body, time), the deleted sequence and the consumer's state.
"""

from __future__ import annotations

import json
import time

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
    ok(
        url,
        "pub",
        "ORDERS.new",
        "order {{Count}} " + "x" * 200,
        "--count",
        "300",
        "--wait",
        "-q",
        "-H",
        "X-Order:{{Count}}",
    )
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
        assert (mb["subject"], mb.get("hdrs"), mb.get("data"), mb["time"]) == (
            ma["subject"],
            ma.get("hdrs"),
            ma.get("data"),
            ma["time"],
        )
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


def _block_files(store_dir, stream: str) -> list:
    return sorted(p for p in store_dir.rglob("*.blk") if f"/streams/{stream}/msgs/" in str(p))


def test_s2_stream_stores_compressed_blocks_and_its_backup_restores_into_nats_server(both, tmp_path_factory):
    """``compression: s2`` through the server: natsd's sealed blocks are compressed on disk (the
    documented header, far fewer bytes than ``state.bytes``), the stream reads back whole, and its
    backup restores into nats-server with every message."""
    import asyncio

    import nats

    from natsd.store.file.compress import MAGIC

    base = tmp_path_factory.mktemp("s2-stream")
    srv = start_kind("natsd", base / "natsd")
    n = 24_000
    body = b'{"order":%d,"status":"pending","region":"eu-west","note":"the quick brown fox"}' + b" pad" * 100

    async def fill_and_read() -> dict:
        nc = await nats.connect(srv.url)
        try:
            cfg = {"name": "ZORDERS", "subjects": ["zorders.>"], "storage": "file", "compression": "s2"}
            msg = await nc.request("$JS.API.STREAM.CREATE.ZORDERS", json.dumps(cfg).encode(), timeout=10)
            assert json.loads(msg.data)["config"]["compression"] == "s2"
            for i in range(n):
                await nc.publish(f"zorders.{i % 5}", body % i)
                if i % 2000 == 1999:
                    await nc.flush()
            await nc.flush()
            js = nc.jetstream()
            for _ in range(100):
                info = await js.stream_info("ZORDERS")
                if info.state.messages == n:
                    break
                await asyncio.sleep(0.1)
            assert info.state.messages == n
            for seq in (1, 9_000, n):  # in compressed blocks and in the last, plain one
                m = await js.get_msg("ZORDERS", seq)
                assert m.data == body % (seq - 1)
            return {"bytes": info.state.bytes}
        finally:
            await nc.close()

    try:
        state = asyncio.run(fill_and_read())
        blocks = _block_files(srv.store_dir, "ZORDERS")
        assert len(blocks) >= 2
        for _ in range(50):  # compression runs in the background once a block is sealed
            if all(p.read_bytes()[:8] == MAGIC for p in blocks[:-1]):
                break
            time.sleep(0.1)
        assert all(p.read_bytes()[:8] == MAGIC for p in blocks[:-1])
        assert sum(p.stat().st_size for p in blocks[:-1]) * 4 < state["bytes"]

        d = base / "bk"
        ok(srv.url, "stream", "backup", "ZORDERS", str(d), "--no-progress")
        ref = both["reference"]
        run_cli(ref, "stream", "rm", "ZORDERS", "-f")
        ok(ref, "stream", "restore", str(d), "--no-progress")
        after = ok(ref, "stream", "info", "ZORDERS", "-j").json()
        assert after["state"]["messages"] == n and after["state"]["bytes"] == state["bytes"]
        assert after["config"]["compression"] == "s2"
        for seq in (1, 12_345, n):
            ma = ok(srv.url, "stream", "get", "ZORDERS", str(seq), "-j").json()
            mb = ok(ref, "stream", "get", "ZORDERS", str(seq), "-j").json()
            assert (mb["subject"], mb.get("data"), mb["time"]) == (ma["subject"], ma.get("data"), ma["time"])
    finally:
        srv.stop()
