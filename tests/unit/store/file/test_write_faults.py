"""File store under failing writes (ENOSPC, EIO, short writes), injected through the block's
system-call names (natsd.store.file.block._pwrite/_fsync/_ftruncate): no full disk needed.

What must hold (issue 14, item 1): a failed write consumes no sequence and is never served to a
reader; records about durable messages are kept and written later; the store recovers by itself
once writes work again; after a restart nothing acknowledged (flushed) is lost and no sequence is
used twice on disk."""

from __future__ import annotations

import errno
import functools
import os

import pytest

from natsd.clock import ManualClock
from natsd.store import open_stream_store
from natsd.store.base import MsgNotFound, StoreConfig, StoreEOF, StoreWriteError
from natsd.store.file import block as block_mod
from natsd.store.file.encryption import Encryption, StoreCipher


def cfg(**kw) -> StoreConfig:
    kw.setdefault("name", "S")
    return StoreConfig(storage="file", **kw)


class Disk:
    """Fault injection: ``full`` makes every pwrite fail with ``err`` after writing ``short``
    bytes of it (a partial write, as a filling disk does); ``fsync_err`` fails fsync;
    ``trunc_err`` fails ftruncate."""

    def __init__(self, monkeypatch) -> None:
        self.full = False
        self.err = errno.ENOSPC
        self.short = 0
        self.fsync_err = None
        self.trunc_err = None
        self.writes = 0
        real_pwrite, real_fsync, real_trunc = os.pwrite, os.fsync, os.ftruncate

        def pwrite(fd, data, off):
            self.writes += 1
            if self.full:
                if self.short and len(data) > self.short:
                    n = real_pwrite(fd, bytes(data[: self.short]), off)
                    self.short = 0
                    return n
                raise OSError(self.err, os.strerror(self.err))
            return real_pwrite(fd, data, off)

        def fsync(fd):
            if self.fsync_err:
                raise OSError(self.fsync_err, os.strerror(self.fsync_err))
            return real_fsync(fd)

        def ftruncate(fd, size):
            if self.trunc_err:
                raise OSError(self.trunc_err, os.strerror(self.trunc_err))
            return real_trunc(fd, size)

        monkeypatch.setattr(block_mod, "_pwrite", pwrite)
        monkeypatch.setattr(block_mod, "_fsync", fsync)
        monkeypatch.setattr(block_mod, "_ftruncate", ftruncate)


@pytest.fixture
def disk(monkeypatch):
    return Disk(monkeypatch)


_open_stream_store = open_stream_store


@pytest.fixture(autouse=True, params=["plain", "encrypted"])
def encrypted(request, monkeypatch, tmp_path):
    """Every test also on an encrypted store (natsd.store.file.encryption): a failed write, its
    cut-back and the retry go through the block's key stream at the same offsets."""
    if request.param == "encrypted":
        keys = Encryption(StoreCipher.AES, "write-faults-key").for_account("$G")
        monkeypatch.setitem(globals(), "open_stream_store", functools.partial(_open_stream_store, keys=keys))
    yield request.param
    if request.param == "encrypted":
        assert list(tmp_path.rglob("meta.key")), "the store was not encrypted"


@pytest.fixture
def clock():
    return ManualClock()


def blk_sizes(d):
    m = os.path.join(d, "msgs")
    return {n: os.path.getsize(os.path.join(m, n)) for n in os.listdir(m) if n.endswith(".blk")}


def test_failed_flush_rolls_back_and_consumes_no_sequence(tmp_path, clock, disk):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    for i in range(5):
        s.store_msg("a", None, b"ok%d" % i)
    s.flush()
    sizes = blk_sizes(d)
    disk.full = True
    disk.short = 7  # part of the batch reaches the file before ENOSPC
    assert s.store_msg("a", None, b"lost1") == (6, clock.time_ns())
    s.store_msg("b", None, b"lost2")
    with pytest.raises(StoreWriteError) as ei:
        s.flush()
    assert ei.value.errno == errno.ENOSPC
    rb = s.take_rollback()
    assert rb is not None and rb[0] == 5
    assert s.take_rollback() is None
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (5, 1, 5)
    assert s.subjects_totals(">") == {"a": 5}
    with pytest.raises(StoreEOF):
        s.load_msg(6)
    # The partial write was cut back: the file ends where the last good flush ended.
    assert blk_sizes(d) == sizes
    # Space returns: the next store reuses sequence 6 and the write goes through.
    disk.full = False
    assert s.store_msg("c", None, b"after")[0] == 6
    s.flush()
    assert s.take_rollback() is None
    s.stop()
    s2 = open_stream_store(cfg(), clock, d)
    st = s2.state()
    assert (st.msgs, st.last_seq, st.lost_msgs) == (6, 6, None)
    assert [m.msg for m in s2.iter_msgs(1, 6)] == [b"ok0", b"ok1", b"ok2", b"ok3", b"ok4", b"after"]
    s2.stop()


def test_reader_never_sees_an_unwritten_message(tmp_path, clock, disk):
    """A consumer reading in the same loop turn as the publish: the read writes first; if that
    write fails the message does not exist."""
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    s.store_msg("a", None, b"one")
    s.flush()
    disk.full = True
    s.store_msg("a", None, b"two")
    with pytest.raises(MsgNotFound):
        s.load_msg(2)
    assert s.state().last_seq == 1
    assert len(s.load_run(1, 10)) == 1
    assert [m.seq for m in s.iter_msgs(1, 10)] == [1]
    assert s.take_rollback()[0] == 1
    # When the write works, a read of a pending record writes it first.
    disk.full = False
    s.store_msg("a", None, b"three")
    w = disk.writes
    assert s.load_msg(2).msg == b"three"
    assert disk.writes == w + 1
    s._abandon()  # kill -9: it was written before it was read
    s2 = open_stream_store(cfg(), clock, d)
    assert s2.load_msg(2).msg == b"three"
    s2.stop()


def test_tombstones_of_durable_messages_survive_a_failed_write(tmp_path, clock, disk):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    for i in range(6):
        s.store_msg("a", None, b"m%d" % i)
    s.flush()
    disk.full = True
    s.remove_msg(3)  # interior: a tombstone in the pending buffer
    s.store_msg("a", None, b"lost")
    with pytest.raises(StoreWriteError):
        s.flush()
    assert s.take_rollback()[0] == 6
    disk.full = False
    s.flush()  # writes the kept tombstone
    s._abandon()
    s2 = open_stream_store(cfg(), clock, d)
    st = s2.state(deleted_details=True)
    assert (st.msgs, st.last_seq, st.deleted) == (5, 6, [3])
    s2.stop()


def test_front_removals_are_rewritten_after_a_failed_write(tmp_path, clock, disk):
    """max_msgs (discard old) removes from the front: the FIRST marker lost with the failed
    write is written again by the next flush."""
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(max_msgs=3), clock, d)
    for i in range(3):
        s.store_msg("a", None, b"m%d" % i)
    s.flush()
    disk.full = True
    s.store_msg("a", None, b"lost")  # removes seq 1 in memory
    with pytest.raises(StoreWriteError):
        s.flush()
    st = s.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (2, 2, 3)
    disk.full = False
    s.flush()
    s._abandon()
    s2 = open_stream_store(cfg(max_msgs=3), clock, d)
    st = s2.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (2, 2, 3)
    s2.stop()


def test_fsync_failure_with_sync_always_rolls_back(tmp_path, clock, disk):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d, sync_always=True)
    s.store_msg("a", None, b"one")
    s.flush()
    disk.fsync_err = errno.EIO
    s.store_msg("a", None, b"two")
    with pytest.raises(StoreWriteError) as ei:
        s.flush()
    assert ei.value.errno == errno.EIO
    assert s.take_rollback()[0] == 1 and s.state().last_seq == 1
    disk.fsync_err = None
    s.store_msg("a", None, b"again")
    s.flush()
    s._abandon()
    s2 = open_stream_store(cfg(), clock, d)
    assert [m.msg for m in s2.iter_msgs(1, 5)] == [b"one", b"again"]
    s2.stop()


def test_failed_cut_back_is_retried_and_clears(tmp_path, clock, disk):
    """When even the cut-back fails the block's tail is unknown: the error is kept, the next
    flush cuts first, and it all clears once the file system answers again."""
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    s.store_msg("a", None, b"one")
    s.flush()
    disk.full = True
    disk.short = 5
    disk.trunc_err = errno.EIO
    s.store_msg("a", None, b"two")
    with pytest.raises(StoreWriteError):
        s.flush()
    assert s._lmb.werr is not None
    disk.full = False
    s.store_msg("a", None, b"three")
    with pytest.raises(StoreWriteError):
        s.flush()  # the cut still fails: nothing is appended after an unknown tail
    assert s.state().last_seq == 1
    disk.trunc_err = None
    s.store_msg("a", None, b"four")
    s.flush()
    assert s._lmb.werr is None
    s._abandon()
    s2 = open_stream_store(cfg(), clock, d)
    st = s2.state()
    assert (st.msgs, st.last_seq, st.lost_msgs) == (2, 2, None)
    assert s2.load_msg(2).msg == b"four"
    s2.stop()


def test_block_roll_over_failure_rolls_back(tmp_path, clock, disk):
    """The write that fails is the old block's flush when a new block starts (inside store_msg)."""
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d, block_size=200)
    s.store_msg("a", None, b"x" * 50)
    s.flush()
    disk.full = True
    s.store_msg("a", None, b"y" * 50)
    with pytest.raises(StoreWriteError):
        for _ in range(10):
            s.store_msg("a", None, b"z" * 50)
    assert s.take_rollback()[0] == 1
    assert s.state().last_seq == 1
    disk.full = False
    assert s.store_msg("a", None, b"w" * 50)[0] == 2
    s.stop()
    s2 = open_stream_store(cfg(), clock, d)
    assert [m.seq for m in s2.iter_msgs(1, 10)] == [1, 2]
    s2.stop()


def test_new_block_that_can_not_be_created_refuses_the_write(tmp_path, clock, monkeypatch):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d, block_size=200)
    s.store_msg("a", None, b"x" * 50)
    s.flush()
    real_open = os.open

    def no_inode(path, flags, mode=0o777):
        if flags & os.O_CREAT:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", no_inode)
    with pytest.raises(StoreWriteError) as ei:
        for _ in range(10):
            s.store_msg("a", None, b"y" * 50)
    assert ei.value.errno == errno.ENOSPC
    monkeypatch.setattr(os, "open", real_open)
    last = s.state().last_seq
    assert s.store_msg("a", None, b"z" * 50)[0] == last + 1
    s.stop()
    s2 = open_stream_store(cfg(), clock, d)
    assert s2.state().last_seq == last + 1 and s2.state().lost_msgs is None
    s2.stop()


def test_stop_on_a_full_disk_closes_and_recovers(tmp_path, clock, disk):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    for i in range(3):
        s.store_msg("a", None, b"m%d" % i)
    s.flush()
    disk.full = True
    s.remove_msg(2)  # a pending tombstone that can not be written
    s.stop()  # no exception: files closed
    assert all(b.fd == -1 for b in s._blocks.values())
    disk.full = False
    s2 = open_stream_store(cfg(), clock, d)
    st = s2.state()
    # The delete was not written (a resurrected message, never a lost one).
    assert (st.msgs, st.last_seq, st.lost_msgs) == (3, 3, None)
    s2.stop()


def test_short_writes_are_completed(tmp_path, clock, monkeypatch):
    """pwrite may write less than asked without an error: the flush writes the rest, and a
    restart reads back every record whole."""
    real_pwrite = os.pwrite
    calls = []

    def pwrite(fd, data, off):
        calls.append(len(data))
        return real_pwrite(fd, bytes(data[: max(1, len(data) // 3)]), off)  # a third at a time

    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    monkeypatch.setattr(block_mod, "_pwrite", pwrite)
    for i in range(4):
        s.store_msg("a", None, b"payload-%d" % i)
    s.flush()
    assert len(calls) > 1  # it took several writes
    monkeypatch.setattr(block_mod, "_pwrite", real_pwrite)
    s.stop()
    s = open_stream_store(cfg(), clock, d)
    assert [s.load_msg(q).msg for q in range(1, 5)] == [b"payload-%d" % i for i in range(4)]
    s.stop()


# -- a big turn is written as it fills (EAGER_WRITE_BYTES) -------------------------------------


def test_a_big_turn_is_written_as_its_buffer_fills(tmp_path, clock, monkeypatch):
    """One loop turn can carry megabytes (libuv reads a socket up to 32 times per turn): past
    EAGER_WRITE_BYTES the buffer is written before the next record, so no pwrite is bigger than
    that plus one record, and flush() writes only the rest."""
    from natsd.store.file import stream_store as ss_mod

    monkeypatch.setattr(ss_mod, "EAGER_WRITE_BYTES", 4096)
    sizes = []
    real = block_mod._pwrite

    def pwrite(fd, data, off):
        sizes.append(len(data))
        return real(fd, data, off)

    monkeypatch.setattr(block_mod, "_pwrite", pwrite)
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    for i in range(40):  # 40 records of ~1 KB: ten writes' worth, no flush() yet
        s.store_msg("a", None, b"x" * 1000)
    assert len(sizes) >= 9 and max(sizes) < 4096 + 1100
    on_disk = sum(blk_sizes(d).values())
    assert on_disk == sum(sizes) and on_disk >= 36 * 1000
    # A run too: each piece starts with the write of what is buffered.
    s.store_run("b", [b"y" * 1000] * 20)
    assert max(sizes) < 4096 + 1100
    s.flush()
    assert sum(blk_sizes(d).values()) == sum(sizes)
    s.stop()
    s2 = open_stream_store(cfg(), clock, d)
    got = list(s2.iter_msgs(1, 100))
    assert [m.seq for m in got] == list(range(1, 61))
    assert got[0].msg == b"x" * 1000 and got[-1].msg == b"y" * 1000
    s2.stop()


def test_a_failed_early_write_refuses_that_message_and_rolls_back_the_turn(tmp_path, clock, disk, monkeypatch):
    """The early write fails like a block roll's: store_msg raises, every message not on disk is
    rolled back (take_rollback), no sequence is used, and the store goes on once writes work."""
    from natsd.store.file import stream_store as ss_mod

    monkeypatch.setattr(ss_mod, "EAGER_WRITE_BYTES", 4096)
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    s.store_msg("a", None, b"x" * 1000)
    s.flush()
    disk.full = True
    with pytest.raises(StoreWriteError):
        for _ in range(10):
            s.store_msg("a", None, b"y" * 1000)
    assert s.take_rollback()[0] == 1
    assert s.state().last_seq == 1
    disk.full = False
    assert s.store_msg("a", None, b"w" * 1000)[0] == 2
    s.flush()
    s.stop()
    s2 = open_stream_store(cfg(), clock, d)
    assert [(m.seq, m.msg[:1]) for m in s2.iter_msgs(1, 10)] == [(1, b"x"), (2, b"w")]
    s2.stop()


def test_a_run_of_big_payloads_across_blocks_reads_back_after_a_restart(tmp_path, clock):
    """A run of payloads past BIG_RECORD is encoded record by record into the block's buffer
    (encode_msgs_into); with small blocks it spans several, and reads back whole after a restart."""
    from natsd.store.file.record import BIG_RECORD

    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d, block_size=16 * 1024)
    msgs = [bytes([i]) * (BIG_RECORD + 100) for i in range(20)]
    first, _ts, done, err = s.store_run("big", msgs)
    assert (first, done, err) == (1, 20, None)
    s.flush()
    assert len(blk_sizes(d)) == 3  # (7 records of ~2.2 KB per 16 KB block)
    s.stop()
    s2 = open_stream_store(cfg(), clock, d)
    assert [(m.seq, m.msg) for m in s2.iter_msgs(1, 100)] == list(zip(range(1, 21), msgs))
    s2.stop()
