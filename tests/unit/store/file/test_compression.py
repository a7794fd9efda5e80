"""Compressed blocks (``compression: s2``, natsd.store.file.compress): smaller on disk, read the
same, mixed with plain blocks across config updates, compressed off the store's thread, and a
damaged compressed block costs only what it held, reported lost."""

from __future__ import annotations

import os

import pytest

from natsd.clock import ManualClock
from natsd.store import open_stream_store
from natsd.store.base import StorageType, StoreConfig
from natsd.store.file import FileStreamStore, MsgCorrupt
from natsd.store.file.compress import COMPRESS_TMP, HEADER, MAGIC, CompressedView, ChunkCache, compress_block

pytestmark = pytest.mark.unit

BLOCK = 16 * 1024


def _cfg(compression: str = "s2") -> StoreConfig:
    return StoreConfig(name="S", subjects=["s.>"], compression=compression)


def _open(d, compression: str = "s2", **kw) -> FileStreamStore:
    kw.setdefault("compress_inline", True)
    return FileStreamStore(_cfg(compression), ManualClock(), str(d), block_size=BLOCK, **kw)


def _fill(st, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        hdr = b"NATS/1.0\r\nK: %d\r\n\r\n" % i if i % 4 == 0 else None
        st.store_msg(f"s.{i % 7}", hdr, b"payload %06d " % i * 8)
    st.flush()


def _expect(i: int) -> bytes:
    return b"payload %06d " % i * 8


def _blocks(st):
    return [st._blocks[b] for b in sorted(st._blocks)]


def test_compressed_blocks_are_smaller_and_read_the_same(tmp_path):
    plain, comp = _open(tmp_path / "p", "none"), _open(tmp_path / "c")
    for st in (plain, comp):
        _fill(st, 2000)
    sealed = _blocks(comp)[:-1]
    assert len(sealed) > 5 and all(b.compressed for b in sealed) and not _blocks(comp)[-1].compressed
    assert not any(b.compressed for b in _blocks(plain))
    assert comp.disk_bytes() * 3 < plain.disk_bytes()
    assert comp.state() == plain.state()  # state.bytes counts plain records, as the reference
    for seq in (1, 2, 777, 1999, 2000):
        a, b = plain.load_msg(seq), comp.load_msg(seq)
        assert (a.subject, a.hdr, a.msg, a.ts) == (b.subject, b.hdr, b.msg, b.ts)
    assert [m.msg for m in comp.iter_msgs(1, 2000)] == [m.msg for m in plain.iter_msgs(1, 2000)]
    run_p, run_c = plain.load_run(300, 900), comp.load_run(300, 900)
    assert list(run_c.seqs) == list(run_p.seqs) and list(run_c.msgs) == list(run_p.msgs)
    # the file really is the documented format
    with open(sealed[0].path, "rb") as f:
        assert f.read(8) == MAGIC
    plain.stop()
    comp.stop()
    again = _open(tmp_path / "c")
    assert again.load_msg(10).msg == _expect(9) and again.state().msgs == 2000
    again.stop()


def test_removals_erase_and_compaction_on_compressed_blocks(tmp_path):
    st = _open(tmp_path)
    _fill(st, 1500)
    first = _blocks(st)[0]
    assert first.compressed
    st.erase_msg(3)  # in a compressed block: made plain, erased, compressed again
    assert first.compressed
    with pytest.raises(Exception):
        st.load_msg(3)
    for seq in range(100, 700):  # half of the early blocks dead: compaction rewrites them
        st.remove_msg(seq)
    st.flush()
    assert st.compact_blocks() > 0
    assert all(b.compressed for b in _blocks(st)[:-1] if b.flushed)
    assert st.load_msg(99).msg == _expect(98) and st.load_msg(700).msg == _expect(699)
    st.stop()
    os.unlink(tmp_path / "msgs" / "index.db")
    again = _open(tmp_path)  # full scan of compressed, compacted blocks
    s = again.state()
    assert (s.msgs, s.first_seq, s.last_seq, s.lost_msgs) == (1500 - 601, 1, 1500, None)
    assert again.load_msg(1500).msg == _expect(1499)
    again.stop()


def test_update_none_to_s2_and_back_mixes_block_kinds(tmp_path):
    st = _open(tmp_path, "none")
    _fill(st, 600)
    st.update_config(_cfg("s2"))
    _fill(st, 600, 600)
    st.update_config(_cfg("none"))
    _fill(st, 600, 1200)
    kinds = [b.compressed for b in _blocks(st)]
    assert True in kinds and kinds.count(False) > 2
    # blocks sealed while s2 was asked for are compressed; the ones before and after are not
    assert kinds[0] is False and kinds[-2] is False
    st.stop()
    for cfg in ("none", "s2"):
        again = _open(tmp_path, cfg)
        assert [m.msg for m in again.iter_msgs(1, 1800)] == [_expect(i) for i in range(1800)]
        again.stop()


def test_compression_runs_off_the_store_thread_and_stale_results_are_dropped(tmp_path, monkeypatch):
    st = _open(tmp_path, compress_inline=False)
    _fill(st, 300)
    st._compression.install(wait=True)  # the real compression thread
    assert all(b.compressed for b in _blocks(st)[:-1])
    # a block changed while its compression ran: the stale copy is dropped, the change kept,
    # and the block compressed again from what it holds now
    from concurrent.futures import Future

    import natsd.store.file.compressing as ss

    def at_once(fn, *args):
        fut: Future = Future()
        fut.set_result(fn(*args))
        return fut

    monkeypatch.setattr(ss, "submit", at_once)
    st._compression.install()
    _fill(st, 200, 300)
    # (flush put the finished ones in place; queue one by hand to have one in flight)
    blk = _blocks(st)[-2]
    assert blk.compressed
    blk._decompress_file()
    st._compression.queue(blk)
    assert blk.id in st._compression.running
    blk.gen += 1  # as an erase or a compaction would
    st._compression.install()
    assert not blk.compressed and blk.id in st._compression.running  # dropped, and queued again
    st._compression.install()
    assert blk.compressed
    assert not [n for n in os.listdir(tmp_path / "msgs") if n.endswith(COMPRESS_TMP)]
    assert [m.msg for m in st.iter_msgs(1, 500)] == [_expect(i) for i in range(500)]
    st.stop()


def test_an_idle_stream_gets_its_compressed_blocks_through_the_clock(tmp_path, monkeypatch):
    """No further write needed: while a compression runs the store looks every 50 ms (injected
    clock) and puts the finished block in place; nothing stays armed afterwards."""
    from concurrent.futures import Future

    import natsd.store.file.compressing as ss

    jobs: list = []

    def held(fn, *args):  # the compression thread, run when the test says so
        fut: Future = Future()
        jobs.append((fut, fn, args))
        return fut

    monkeypatch.setattr(ss, "submit", held)
    clock = ManualClock()
    st = FileStreamStore(_cfg(), clock, str(tmp_path), block_size=BLOCK)
    _fill(st, 300)
    assert jobs and clock.pending_timers() == 1
    clock.advance(50 * 10**6)  # nothing done yet: looks again later
    assert clock.pending_timers() == 1 and not any(b.compressed for b in _blocks(st))
    for fut, fn, args in jobs:
        fut.set_result(fn(*args))
    clock.advance(50 * 10**6)
    assert all(b.compressed for b in _blocks(st)[:-1]) and not st._compression.running
    assert clock.pending_timers() == 0
    st.stop()


def test_leftover_compression_tmp_is_removed_and_plain_blocks_compressed_at_start(tmp_path):
    st = _open(tmp_path, "none")
    _fill(st, 400)
    st.stop()
    blk1 = tmp_path / "msgs" / "1.blk"
    (tmp_path / "msgs" / ("1.blk" + COMPRESS_TMP)).write_bytes(b"half written")  # a crash mid-compression
    again = _open(tmp_path)
    assert not (tmp_path / "msgs" / ("1.blk" + COMPRESS_TMP)).exists()
    assert blk1.read_bytes()[:8] == MAGIC  # sealed plain blocks of an s2 stream get compressed
    assert [m.msg for m in again.iter_msgs(1, 400)] == [_expect(i) for i in range(400)]
    again.stop()


def test_a_compressed_last_block_is_never_appended_to(tmp_path):
    st = _open(tmp_path)
    _fill(st, 600)
    st.stop()
    last = _blocks(st)[-1]
    os.unlink(last.path)  # the plain last block lost: the last one left is compressed
    os.unlink(tmp_path / "msgs" / "index.db")
    again = _open(tmp_path)
    assert not again._lmb.compressed and again._blocks[again._lmb.id - 1].compressed
    top = again.state().last_seq
    _fill(again, 50, top)
    again.stop()
    third = _open(tmp_path)
    assert third.load_msg(top + 50).msg == _expect(top + 49) and third.load_msg(1).msg == _expect(0)
    third.stop()


def _damage(path, at: int, n: int = 1) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(n)
        f.seek(at)
        f.write(bytes(x ^ 0xFF for x in b))


@pytest.mark.parametrize("index", [True, False])
def test_damaged_chunk_loses_only_its_messages(tmp_path, index):
    big = 200 * 1024  # blocks of 4 chunks; the damage goes into the second chunk of block 2
    st = FileStreamStore(_cfg(), ManualClock(), str(tmp_path), block_size=big, compress_inline=True)
    for i in range(1200):
        st.store_msg("s.x", None, os.urandom(16) + b"%06d" % i + b"z" * 300)
    st.flush()
    st.stop()
    blk = _blocks(st)[1]
    view = CompressedView(os.open(blk.path, os.O_RDONLY), ChunkCache())
    try:
        off, ln = view._table()[1]
    finally:
        os.close(view.fd)
    if not index:
        os.unlink(tmp_path / "msgs" / "index.db")
    # 32 bytes, not one: a single flipped byte can land in the offset of a copy inside a run of
    # 'z' and decode to the very same bytes (nothing is damaged then, and nothing must be lost)
    _damage(blk.path, off + ln // 2, 32)
    again = FileStreamStore(_cfg(), ManualClock(), str(tmp_path), block_size=big, compress_inline=True)
    if index:
        # index.db still matches the block's size and tail: the damage is found when read,
        # and each message in the damaged chunk is reported lost then
        for seq in range(1, 1201):
            try:
                again.load_msg(seq)
            except MsgCorrupt:
                pass
    s = again.state()
    assert s.lost_msgs and 100 < len(s.lost_msgs) < 250, s  # one 64 KiB chunk's worth
    kept = [int(m.msg[16:22]) for m in again.iter_msgs(1, 1200)]
    assert len(kept) + len(s.lost_msgs) == 1200
    assert set(kept).isdisjoint(q - 1 for q in s.lost_msgs)
    assert s.first_seq == 1 and s.last_seq == 1200
    again.stop()


def test_damaged_header_loses_the_block_and_reports_it(tmp_path):
    st = _open(tmp_path)
    _fill(st, 600)
    st.stop()
    second = _blocks(st)[1]
    in_second = [seq for seq in range(1, 601) if st._hi_at(seq - st._base) == second.id]
    _damage(second.path, 9)  # raw_len: the header checksum fails
    os.unlink(tmp_path / "msgs" / "index.db")
    again = _open(tmp_path)
    s = again.state()
    assert s.lost_msgs == in_second and s.lost_bytes > 0
    assert s.msgs == 600 - len(in_second) and again.load_msg(600).msg == _expect(599)
    again.stop()
    third = _open(tmp_path)  # reported once: the block was emptied
    assert third.state().msgs == 600 - len(in_second)
    third.stop()


def test_chunk_reads_decode_only_what_they_touch():
    data = b"".join(b"%08d" % i for i in range(100_000))  # 800 KB: 13 chunks
    blob = compress_block(data)
    import tempfile

    with tempfile.TemporaryFile() as f:
        f.write(blob)
        f.flush()
        cache = ChunkCache(max_chunks=4)
        view = CompressedView(f.fileno(), cache)
        assert view.raw_len == len(data) and len(blob) > HEADER
        assert view.read(65530, 20) == data[65530:65550]  # across two chunks
        assert len(cache._d) == 2
        assert view.read_all() == data and len(cache._d) == 4
        assert view.read(len(data) - 3, 10) == data[-3:]


def test_memory_streams_ignore_compression():
    cfg = _cfg()
    cfg.storage = StorageType.MEMORY
    st = open_stream_store(cfg, ManualClock())
    st.store_msg("s.x", None, b"abc")
    assert st.load_msg(1).msg == b"abc"
