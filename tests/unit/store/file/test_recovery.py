"""File store recovery: torn tails, flipped bits, missing/stale/corrupt index, missing blocks,
secure erase, block lifecycle and config files."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from natsd.clock import ManualClock
from natsd.store import open_stream_store
from natsd.store.base import CorruptState, MsgNotFound, StoreConfig
from natsd.store.file import MsgCorrupt, read_meta
from natsd.store.file.layout import INDEX_FILE, META_FILE, META_SUM_FILE, MSGS_DIR


def cfg(**kw) -> StoreConfig:
    kw.setdefault("name", "S")
    return StoreConfig(storage="file", **kw)


def blocks(d) -> list[str]:
    m = os.path.join(d, MSGS_DIR)
    return sorted((n for n in os.listdir(m) if n.endswith(".blk")), key=lambda n: int(n.split(".")[0]))


def blk_path(d, name) -> str:
    return os.path.join(d, MSGS_DIR, name)


def fill(store, n, subject=lambda i: f"s.{i % 3}"):
    for i in range(1, n + 1):
        store.store_msg(subject(i), None, b"payload-%04d" % i)
    store.flush()


def crash(store):
    """What kill -9 leaves: flushed bytes, nothing else."""
    store.flush()
    store._abandon()


@pytest.fixture
def clock():
    return ManualClock()


def test_restart_from_index_keeps_everything(tmp_path, clock):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d, block_size=300)
    fill(s, 50)
    s.remove_msg(10)
    s.remove_msg(11)
    s.erase_msg(30)
    before = (s.state(deleted_details=True), s.subjects_state(">"))
    s.stop()
    assert os.path.exists(blk_path(d, INDEX_FILE))
    s = open_stream_store(cfg(), clock, d, block_size=300)
    assert (s.state(deleted_details=True), s.subjects_state(">")) == before
    assert [m.msg for m in s.iter_msgs(1, 3)] == [b"payload-0001", b"payload-0002", b"payload-0003"]
    assert s.store_msg("s.0", None, b"next")[0] == 51
    s.stop()


def test_missing_index_full_scan_gives_same_state(tmp_path, clock):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(max_msgs_per_subject=5), clock, d, block_size=300)
    fill(s, 60)
    s.remove_msg(50)
    before = (s.state(deleted_details=True), s.subjects_state(">"))
    s.stop()
    os.unlink(blk_path(d, INDEX_FILE))
    s = open_stream_store(cfg(max_msgs_per_subject=5), clock, d, block_size=300)
    assert (s.state(deleted_details=True), s.subjects_state(">")) == before
    s.stop()


def test_index_older_than_blocks_replays_the_tail(tmp_path, clock):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d, block_size=400)
    fill(s, 20)
    s.write_index()
    for i in range(21, 41):
        s.store_msg("t", None, b"%d" % i)
    s.remove_msg(5)
    s.purge_ex("s.1", 0, 0)
    expect = s.state(deleted_details=True)
    crash(s)
    s = open_stream_store(cfg(), clock, d, block_size=400)
    assert s.state(deleted_details=True) == expect
    assert s.load_msg(40).msg == b"40"
    s.stop()


@pytest.mark.parametrize("how", ["shrunk", "corrupt"])
def test_stale_or_corrupt_index_falls_back_to_scan(tmp_path, clock, how, caplog):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    fill(s, 10)
    s.stop()
    idx = blk_path(d, INDEX_FILE)
    if how == "corrupt":
        data = bytearray(Path(idx).read_bytes())
        data[40] ^= 0xFF
        Path(idx).write_bytes(bytes(data))
        expect_msgs = 10
    else:
        # The block lost its last record after the index was written: the index is stale.
        path = blk_path(d, blocks(d)[-1])
        os.truncate(path, os.path.getsize(path) - 20)
        expect_msgs = 9
    with caplog.at_level(logging.WARNING, logger="natsd.store"):
        s = open_stream_store(cfg(), clock, d)
    st = s.state()
    assert st.msgs == expect_msgs
    assert "index" in caplog.text
    for seq in range(1, expect_msgs + 1):
        assert s.load_msg(seq).msg == b"payload-%04d" % seq
    s.stop()


def test_torn_tail_is_truncated_and_reported(tmp_path, clock, caplog):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    fill(s, 10)
    crash(s)
    path = blk_path(d, blocks(d)[-1])
    full = os.path.getsize(path)
    os.truncate(path, full - 7)  # the last record loses its trailer
    with caplog.at_level(logging.ERROR, logger="natsd.store"):
        s = open_stream_store(cfg(), clock, d)
    st = s.state()
    assert (st.msgs, st.last_seq) == (9, 9)
    assert st.lost_msgs == [10] and st.lost_bytes == file_record_size(10) - 7
    assert "torn tail" in caplog.text
    assert [m.seq for m in s.iter_msgs(1, 100)] == list(range(1, 10))
    # The file was cut at the last good record; new writes continue cleanly after it.
    assert s.store_msg("new", None, b"x")[0] == 10
    crash(s)
    s = open_stream_store(cfg(), clock, d)
    assert s.load_msg(10).subject == "new"
    s.stop()


def file_record_size(i: int) -> int:
    return 30 + len("s.%d" % (i % 3)) + len(b"payload-%04d" % i)


def test_flipped_bit_with_index_is_detected_on_read(tmp_path, clock):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    fill(s, 10)
    s.stop()
    path = blk_path(d, blocks(d)[0])
    data = bytearray(Path(path).read_bytes())
    off = sum(file_record_size(i) for i in range(1, 5))  # record 5
    data[off + 30] ^= 0x10  # inside the payload
    Path(path).write_bytes(bytes(data))
    s = open_stream_store(cfg(), clock, d)
    removed = []
    s.register_storage_updates(lambda *a: removed.append(a))
    with pytest.raises(MsgCorrupt):
        s.load_msg(5)
    assert isinstance(MsgCorrupt("x"), MsgNotFound) and isinstance(MsgCorrupt("x"), CorruptState)
    st = s.state()
    assert st.msgs == 9 and st.lost_msgs == [5] and st.lost_bytes == file_record_size(5)
    assert removed and removed[0][2] == 5
    # Never served: scans skip it, and it stays gone after a restart.
    assert [m.seq for m in s.iter_msgs(1, 10)] == [1, 2, 3, 4, 6, 7, 8, 9, 10]
    with pytest.raises(MsgNotFound):
        s.load_msg(5)
    s.stop()
    s = open_stream_store(cfg(), clock, d)
    with pytest.raises(MsgNotFound):
        s.load_msg(5)
    assert s.state().lost_msgs == [5]
    s.stop()


def test_flipped_bit_without_index_loses_only_that_record(tmp_path, clock, caplog):
    """Issue 14 item 4: the scan resynchronises after the damaged record (every record carries
    its length and checksum): the intact records after it in the same block are kept."""
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d, block_size=150)  # ~4 records per block
    fill(s, 20)
    s.stop()
    os.unlink(blk_path(d, INDEX_FILE))
    names = blocks(d)
    assert len(names) >= 4
    # Corrupt the second record of the first block.
    data = bytearray(Path(blk_path(d, names[0])).read_bytes())
    data[file_record_size(1) + 25] ^= 0x01
    Path(blk_path(d, names[0])).write_bytes(bytes(data))
    with caplog.at_level(logging.ERROR, logger="natsd.store"):
        s = open_stream_store(cfg(), clock, d, block_size=150)
    st = s.state(deleted_details=True)
    assert st.lost_msgs == [2] and st.lost_bytes == file_record_size(2)
    assert st.msgs == 19 and st.last_seq == 20
    assert "damaged record" in caplog.text
    served = [m.seq for m in s.iter_msgs(1, 100)]
    assert served == [1] + list(range(3, 21))
    s.stop()


@pytest.mark.parametrize("with_index", [True, False])
def test_deleted_block_file(tmp_path, clock, with_index, caplog):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d, block_size=150)
    fill(s, 20)
    positions = {seq: s._hi_at(seq - s._base) for seq in range(1, 21)}
    s.stop()
    if not with_index:
        os.unlink(blk_path(d, INDEX_FILE))
    victim = blocks(d)[1]
    victim_id = int(victim.split(".")[0])
    os.unlink(blk_path(d, victim))
    gone = [seq for seq, bid in positions.items() if bid == victim_id]
    assert gone
    with caplog.at_level(logging.ERROR, logger="natsd.store"):
        s = open_stream_store(cfg(), clock, d, block_size=150)
    st = s.state()
    assert st.lost_msgs == gone
    assert (st.msgs, st.first_seq, st.last_seq) == (20 - len(gone), 1, 20)
    assert [m.seq for m in s.iter_msgs(1, 100)] == [q for q in range(1, 21) if q not in gone]
    assert "missing" in caplog.text
    s.stop()


def test_missing_last_block_keeps_sequences_when_index_knows(tmp_path, clock):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d, block_size=150)
    fill(s, 20)
    positions = {seq: s._hi_at(seq - s._base) for seq in range(1, 21)}
    s.stop()
    last = blocks(d)[-1]
    os.unlink(blk_path(d, last))
    gone = [q for q, b in positions.items() if b == int(last.split(".")[0])]
    s = open_stream_store(cfg(), clock, d, block_size=150)
    st = s.state()
    assert st.lost_msgs == gone and st.last_seq == 20
    assert s.store_msg("x", None, b"y")[0] == 21
    s.stop()


def test_secure_erase_overwrites_payload_on_disk(tmp_path, clock):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    s.store_msg("a", None, b"public-one")
    s.store_msg("secret.subject", b"NATS/1.0\r\nX: hidden-header\r\n\r\n", b"TOP-SECRET-PAYLOAD")
    s.flush()
    s.store_msg("a", None, b"unflushed-secret")
    assert s.erase_msg(2) and s.erase_msg(3)
    s.flush()
    raw = b"".join(Path(blk_path(d, b)).read_bytes() for b in blocks(d))
    for secret in (b"TOP-SECRET-PAYLOAD", b"hidden-header", b"secret.subject", b"unflushed-secret"):
        assert secret not in raw
    assert b"public-one" in raw
    s.stop()
    s = open_stream_store(cfg(), clock, d)
    st = s.state(deleted_details=True)
    assert (st.msgs, st.last_seq) == (1, 3)
    s.stop()


def test_dead_front_blocks_are_unlinked(tmp_path, clock):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(max_msgs=5), clock, d, block_size=200)
    for i in range(200):
        s.store_msg("x", None, b"0123456789")
        s.flush()
    assert len(blocks(d)) <= 5
    s.stop()
    s = open_stream_store(cfg(max_msgs=5), clock, d, block_size=200)
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (5, 196, 200)
    s.stop()


def test_purge_replaces_blocks(tmp_path, clock):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d, block_size=200)
    fill(s, 30)
    assert len(blocks(d)) > 3
    s.purge()
    assert len(blocks(d)) == 1
    crash(s)
    s = open_stream_store(cfg(), clock, d, block_size=200)
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 31, 30)
    s.stop()


def test_meta_files_written_with_checksum(tmp_path, clock):
    d = str(tmp_path / "S")
    meta = {"name": "S", "subjects": ["a.>"], "retention": "limits"}
    s = open_stream_store(cfg(meta=meta), clock, d)
    assert read_meta(d, "S") == meta
    s.update_config(cfg(meta={**meta, "max_msgs": 5}, max_msgs=5))
    assert read_meta(d, "S")["max_msgs"] == 5
    s.stop()
    assert json.loads(Path(d, META_FILE).read_text())["max_msgs"] == 5
    # An edited meta.inf no longer matches meta.sum.
    with open(os.path.join(d, META_FILE), "a") as f:
        f.write(" ")
    with pytest.raises(CorruptState):
        read_meta(d, "S")
    os.unlink(os.path.join(d, META_SUM_FILE))
    with pytest.raises(CorruptState):
        read_meta(d, "S")


def test_list_stream_dirs(tmp_path, clock):
    from natsd.store import list_stream_dirs

    acc = tmp_path / "$G"
    for name in ("B", "A"):
        open_stream_store(cfg(name=name), clock, str(acc / "streams" / name)).stop()
    (acc / "streams" / "junk").mkdir()
    assert list_stream_dirs(str(acc)) == [str(acc / "streams" / "A"), str(acc / "streams" / "B")]
    assert list_stream_dirs(str(tmp_path / "nope")) == []


def test_sync_always_and_sync(tmp_path, clock):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d, sync_always=True)
    s.store_msg("a", None, b"x")
    s.flush()
    assert not s._lmb.dirty_sync
    s.stop()
    s = open_stream_store(cfg(), clock, d, index_interval_ns=10)
    s.store_msg("a", None, b"y")
    os.unlink(blk_path(d, INDEX_FILE))
    clock.advance(100)
    s.sync()  # fsyncs and, the interval having passed, rewrites index.db
    assert os.path.exists(blk_path(d, INDEX_FILE))
    assert not s._lmb.dirty_sync
    s.stop()


@pytest.mark.parametrize("reopen", ["stop", "crash", "noindex"])
def test_sparse_blocks_are_compacted(tmp_path, clock, reopen):
    """A KV-like stream: one old key pins first_seq while another key is rewritten over and
    over (history 1). Without compaction the dead revisions would stay on disk forever."""
    d = str(tmp_path / "S")
    c = cfg(max_msgs_per_subject=1)
    s = open_stream_store(c, clock, d, block_size=4096)
    s.store_msg("kv.pinned", None, b"first")
    for i in range(1500):
        s.store_msg(f"kv.hot.{i % 3}", None, b"value-%06d" % i)
        if i == 1000:
            s.remove_msg(999)  # an interior delete whose tombstone must survive compaction
        s.flush()
    before_disk = sum(os.path.getsize(blk_path(d, b)) for b in blocks(d))
    expect = (s.state(deleted_details=True), s.subjects_state(">"))
    s.sync()
    after_disk = sum(os.path.getsize(blk_path(d, b)) for b in blocks(d))
    assert after_disk < before_disk / 10
    assert (s.state(deleted_details=True), s.subjects_state(">")) == expect
    assert s.load_msg(1).msg == b"first"
    assert s.load_last_msg("kv.hot.2").msg == b"value-001499"
    if reopen == "crash":
        s.store_msg("kv.hot.0", None, b"after-compaction")
        expect = (s.state(deleted_details=True), s.subjects_state(">"))
        crash(s)
    else:
        s.stop()
        if reopen == "noindex":
            os.unlink(blk_path(d, INDEX_FILE))
    s = open_stream_store(c, clock, d, block_size=4096)
    assert (s.state(deleted_details=True), s.subjects_state(">")) == expect
    assert not s.state().lost_msgs
    for seq in [1] + [q for q in range(2, expect[0].last_seq + 1) if q not in expect[0].deleted]:
        s.load_msg(seq)
    s.stop()


def test_iter_msgs_run_read_detects_corruption_and_follows_removals(tmp_path, clock):
    # iter_msgs reads runs of records with one pread and checks each with the CRC residue: a
    # corrupt record in the middle of a run is reported lost (never served), and messages
    # removed while the iterator is suspended are not served either.
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    fill(s, 10)
    s.stop()
    path = blk_path(d, blocks(d)[0])
    data = bytearray(Path(path).read_bytes())
    off = sum(file_record_size(i) for i in range(1, 5))  # record 5
    data[off + 30] ^= 0x10
    Path(path).write_bytes(bytes(data))
    s = open_stream_store(cfg(), clock, d)
    it = s.iter_msgs(1, 10)
    assert next(it).seq == 1
    s.remove_msg(3)
    assert [m.seq for m in it] == [2, 4, 6, 7, 8, 9, 10]
    assert s.state().lost_msgs == [5]
    with pytest.raises(MsgNotFound):
        s.load_msg(5)
    # Unflushed records (still in the write buffer) are served too, in order.
    s.store_msg("foo", None, b"x")
    assert [m.seq for m in s.iter_msgs(9, 11)] == [9, 10, 11]
    assert [(m.seq, m.msg) for m in s.iter_msgs(11, 11)] == [(11, b"x")]
    s.flush()
    # Truncated or purged under a suspended iterator: nothing past the cut is served.
    it = s.iter_msgs(1, 100)
    assert next(it).seq == 1
    s.truncate(4)
    assert [m.seq for m in it] == [2, 4]
    it = s.iter_msgs(1, 100)
    assert next(it).seq == 1
    s.purge()
    assert list(it) == []
    s.stop()


def test_recovered_lost_is_what_this_open_dropped(tmp_path, clock):
    """``recovered_lost``: what the last crash cost (for the start-up log), while state() keeps
    the total of every recovery."""
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    assert s.recovered_lost == (0, 0)
    fill(s, 10)
    crash(s)
    path = blk_path(d, blocks(d)[-1])
    os.truncate(path, os.path.getsize(path) - 7)
    s = open_stream_store(cfg(), clock, d)
    assert s.recovered_lost == (1, file_record_size(10) - 7)
    s.stop()  # a clean stop: the index keeps the loss, the next open finds nothing new
    s = open_stream_store(cfg(), clock, d)
    assert s.recovered_lost == (0, 0)
    assert s.state().lost_msgs == [10]
    s.stop()
    mem = open_stream_store(StoreConfig(name="M", storage="memory"), clock, None)
    assert mem.recovered_lost == (0, 0)
