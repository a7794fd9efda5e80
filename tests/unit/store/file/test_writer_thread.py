"""The file store's writer thread (natsd.store.file.writer, issue 15 item 3): a turn's buffer is
written off the event loop, and what the owner learns through ``flush_async`` /
``written_token`` / ``take_rollback`` keeps the durability rules of the inline write: a record
counts as written only once it is in the OS, writes keep their order, a read of a record in
flight gets it, and a failed write (disk full) takes back it and every later one.

The writer thread is gated (a pwrite waits for a threading.Event) so that "in flight" is a state
the tests hold on purpose, not a race."""

from __future__ import annotations

import asyncio
import errno
import os
import threading

import pytest

from natsd.clock import SystemClock
from natsd.store.base import StoreConfig
from natsd.store.file import FileStreamStore
from natsd.store.file import block as block_mod
from natsd.store.file.writer import BlockWriter


class GatedDisk:
    """pwrite waits for ``gate`` (set: no wait); ``full`` fails it with ENOSPC; ``calls``
    counts them (the thread's and the inline ones)."""

    def __init__(self, monkeypatch) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.full = False
        self.calls = 0
        real = os.pwrite

        def pwrite(fd, data, off):
            self.calls += 1
            self.entered.set()
            assert self.gate.wait(10)
            if self.full:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(fd, data, off)

        monkeypatch.setattr(block_mod, "_pwrite", pwrite)

    def hold(self) -> None:
        """From now on pwrite waits (``entered`` tells when one does)."""
        self.entered.clear()
        self.gate.clear()


@pytest.fixture
def disk(monkeypatch):
    d = GatedDisk(monkeypatch)
    yield d
    d.gate.set()


def open_store(path, **kw) -> FileStreamStore:
    return FileStreamStore(
        StoreConfig(name="S", storage="file"), SystemClock(), str(path), writer=BlockWriter(threshold=1), **kw
    )


async def until(pred, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():
        assert loop.time() < end, "timed out"
        await asyncio.sleep(0.001)


def reopen(path) -> FileStreamStore:
    """After a kill -9 (``_abandon``): what a restart finds."""
    return FileStreamStore(StoreConfig(name="S", storage="file"), SystemClock(), str(path))


def test_written_only_once_in_the_os_and_kept_across_kill9(tmp_path, disk):
    async def main():
        s = open_store(tmp_path)
        calls = []
        blk = s._lmb
        assert not os.path.exists(blk.path)  # (a new stream's first block: made by its first write)
        disk.hold()
        for i in range(50):
            s.store_msg("a", None, b"x%d" % i)
        token = s.flush_async(lambda: calls.append(s.written_token))
        assert token > 0
        assert disk.entered.wait(5)
        await asyncio.sleep(0.01)
        # In flight: not reported written, not on disk, the owner not called.
        assert s.written_token < token and calls == []
        assert os.path.getsize(blk.path) == 0  # (made on the loop, written by the thread)
        disk.gate.set()
        await until(lambda: calls)
        assert s.written_token >= token
        assert s.take_rollback() is None
        s._abandon()

    asyncio.run(main())
    r = reopen(tmp_path)
    assert r.state().msgs == 50
    assert r.load_msg(50).msg == b"x49"
    r.stop()


def test_a_read_of_a_record_in_flight_waits_for_it(tmp_path, disk):
    async def main():
        s = open_store(tmp_path)
        s.store_msg("a", None, b"one")
        disk.hold()
        assert s.flush_async(lambda: None) > 0
        assert disk.entered.wait(5)
        threading.Timer(0.05, disk.gate.set).start()
        sm = s.load_msg(1)  # waits for the thread, then reads the file
        assert sm.msg == b"one"
        assert s._lmb.flushed == s._lmb.size
        s.stop()

    asyncio.run(main())


def test_a_failed_write_takes_back_it_and_every_later_one(tmp_path, disk):
    async def main():
        s = open_store(tmp_path)
        for i in range(3):
            s.store_msg("a", None, b"ok%d" % i)
        s.flush()  # 1..3 durable
        size = os.path.getsize(s._lmb.path)
        called = []
        disk.hold()
        s.store_msg("a", None, b"lost4")
        t1 = s.flush_async(lambda: called.append(1))
        assert disk.entered.wait(5)
        s.store_msg("a", None, b"lost5")
        s.remove_msg(2)  # a tombstone about a durable message: kept and written later
        t2 = s.flush_async(lambda: called.append(2))
        assert t2 > t1  # waits for the next write, after the first
        calls_before = disk.calls
        disk.full = True
        disk.gate.set()
        await until(lambda: called)
        assert s.written_token < t2
        assert disk.calls == calls_before  # the second write was never attempted
        durable, err = s.take_rollback()
        assert durable == 3 and err.errno == errno.ENOSPC
        st = s.state()
        assert (st.msgs, st.last_seq) == (2, 3)
        assert os.path.getsize(s._lmb.path) == size  # cut back, no hole
        # Space again: the sequences taken back are used again, the tombstone is written.
        disk.full = False
        assert s.store_msg("a", None, b"new4")[0] == 4
        s.flush()
        s._abandon()

    asyncio.run(main())
    r = reopen(tmp_path)
    st = r.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (3, 1, 4)
    assert [r.load_msg(q).msg for q in (1, 3, 4)] == [b"ok0", b"ok2", b"new4"]
    r.stop()


def test_writes_keep_their_order_across_block_rolls(tmp_path, disk):
    async def main():
        s = open_store(tmp_path, block_size=4096)
        disk.hold()
        tokens = []
        for turn in range(10):
            for i in range(7):
                s.store_msg("a.%d" % i, None, bytes([turn]) * 700)
            tokens.append(s.flush_async(lambda: None))
        assert tokens == sorted(tokens) and tokens[-1] > 0
        assert len(s._blocks) > 5
        disk.gate.set()
        await until(lambda: s.written_token >= tokens[-1])
        assert s.take_rollback() is None
        assert all(not b.jobs and not b.pending for b in s._blocks.values())
        s._abandon()

    asyncio.run(main())
    r = reopen(tmp_path)
    assert r.state().msgs == 70
    assert [m.msg[0] for m in r.iter_msgs(1, 70)] == [q // 7 for q in range(70)]
    r.stop()


def test_purge_waits_for_the_write_in_flight(tmp_path, disk):
    async def main():
        s = open_store(tmp_path)
        for i in range(20):
            s.store_msg("a", None, b"m")
        disk.hold()
        assert s.flush_async(lambda: None) > 0
        assert disk.entered.wait(5)
        threading.Timer(0.05, disk.gate.set).start()
        assert s.purge() == 20
        s.store_msg("a", None, b"after")
        s.flush()
        s._abandon()

    asyncio.run(main())
    r = reopen(tmp_path)
    st = r.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (1, 21, 21)
    r.stop()


def test_without_a_loop_everything_is_inline(tmp_path, disk):
    s = open_store(tmp_path)
    s.store_msg("a", None, b"x")
    assert s.flush_async(lambda: None) == 0
    assert s._lmb.flushed == s._lmb.size
    s.stop()


def test_a_turn_with_nothing_new_to_write_waits_only_for_the_write_in_flight(tmp_path, disk):
    async def main():
        s = open_store(tmp_path)
        disk.hold()
        s.store_msg("a", None, b"x")
        t1 = s.flush_async(lambda: None)
        assert t1 > 0
        # A turn with replies but no record (a duplicate, an error): nothing more to write.
        assert s.flush_async(lambda: None) == t1
        disk.gate.set()
        await until(lambda: s.written_token >= t1)
        s.stop()

    asyncio.run(main())


def test_a_failed_write_of_a_sealed_block_takes_back_what_the_new_block_holds(tmp_path, disk):
    async def main():
        s = open_store(tmp_path, block_size=4096)
        s.store_msg("a", None, b"one")
        s.flush()
        disk.hold()
        s.store_msg("a", None, b"2" * 1000)
        assert s.flush_async(lambda: None) > 0
        assert disk.entered.wait(5)
        for i in range(3, 7):  # fills block 1 (its tail goes to the thread) and starts block 2
            s.store_msg("a", None, b"%d" % i * 1000)
        assert len(s._blocks) == 2 and s._lmb.pending
        disk.full = True
        disk.gate.set()
        await until(lambda: not s._writes.jobs)
        durable, _err = s.take_rollback()
        assert durable == 1 and s.state().last_seq == 1
        assert not s._lmb.pending  # the new block's records were taken back too
        disk.full = False
        assert s.store_msg("a", None, b"new")[0] == 2
        s.flush()
        s._abandon()

    asyncio.run(main())
    r = reopen(tmp_path)
    st = r.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (2, 1, 2)
    assert [r.load_msg(q).msg for q in (1, 2)] == [b"one", b"new"]
    r.stop()
