"""FileStreamStore.load_run: column-wise reads of uniform stretches with one CRC per stretch,
and every damaged record still found, reported lost and never served."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest

from natsd.clock import ManualClock
from natsd.store import open_stream_store
from natsd.store.base import MsgNotFound, StoreConfig
from natsd.store.file import reads
from natsd.store.file.layout import MSGS_DIR
from natsd.store.file.record import encode_msg_into

HDR = b"NATS/1.0\r\nK: v\r\n\r\n"


def cfg() -> StoreConfig:
    return StoreConfig(name="S", storage="file")


def first_block(d) -> str:
    m = os.path.join(d, MSGS_DIR)
    names = sorted((n for n in os.listdir(m) if n.endswith(".blk")), key=lambda n: int(n.split(".")[0]))
    return os.path.join(m, names[0])


def rows(run) -> list[tuple]:
    hdrs = run.hdrs if run.hdrs is not None else [None] * len(run)
    return list(zip(run.seqs, run.tss, run.subjects, hdrs, run.msgs))


def iter_rows(s, start, n) -> list[tuple]:
    out = []
    for m in s.iter_msgs(start, 1 << 62):
        if len(out) == n:
            break
        out.append((m.seq, m.ts, m.subject.encode(), m.hdr, m.msg))
    return out


@pytest.fixture
def clock():
    return ManualClock()


def test_run_crc_is_the_crc_of_real_records():
    buf = bytearray()
    sizes = []
    for i in range(1, 40):
        sizes.append(encode_msg_into(buf, i, 10**18 + i, b"a.b", HDR if i % 2 else None, b"%05d" % i))
    # Equal sizes only: the odd ones (with headers) have one size, the even ones another.
    odd = bytearray()
    for i in range(1, 40, 2):
        encode_msg_into(odd, i, 77 * i, b"x.y", HDR, os.urandom(16))
    size = len(odd) // 20
    for k in (0, 1, 2, 7, 20):
        assert reads._run_crc(size, k) == zlib.crc32(bytes(odd[: k * size]))


def _store_with(d, clock, n, hdr=None, payload=lambda i: b"%06d" % i):
    s = open_stream_store(cfg(), clock, d)
    for i in range(1, n + 1):
        s.store_msg("s.x", hdr, payload(i))
    s.flush()
    return s


@pytest.mark.parametrize("hdr", [None, HDR], ids=["plain", "headers"])
def test_uniform_stretch_matches_iter_msgs(tmp_path, clock, hdr):
    d = str(tmp_path / "S")
    s = _store_with(d, clock, 3000, hdr)
    for start, n in [(1, 1), (1, 2), (1, 500), (7, 2048), (2900, 500), (2999, 5)]:
        assert rows(s.load_run(start, n)) == iter_rows(s, start, n)
    run = s.load_run(1, 400)
    assert type(run.seqs) is tuple  # one stretch: the columns come straight from iter_unpack
    assert (run.hdrs is None) == (hdr is None)
    s.stop()


@pytest.mark.parametrize("where", ["payload", "sequence", "checksum", "misplaced"])
def test_damaged_record_inside_a_stretch_is_reported_and_skipped(tmp_path, clock, where):
    d = str(tmp_path / "S")
    s = _store_with(d, clock, 200)
    size = s._sz[0]
    s.stop()
    path = first_block(d)
    data = bytearray(Path(path).read_bytes())
    off = 99 * size  # record 100
    if where == "payload":
        data[off + size - 10] ^= 0x01
    elif where == "sequence":
        data[off + 4] ^= 0x02  # the seq field reads 102 now (the CRC fails as well)
    elif where == "checksum":
        data[off + size - 7] ^= 0x40
    else:  # an intact record of another sequence where 100's should be (checksum fine)
        data[off : off + size] = data[off + size : off + 2 * size]
    Path(path).write_bytes(bytes(data))
    s = open_stream_store(cfg(), clock, d)
    removed = []
    s.register_storage_updates(lambda *a: removed.append(a))
    run = s.load_run(1, 150)
    assert list(run.seqs) == list(range(1, 100)) + list(range(101, 152))
    assert [m[-1] for m in rows(run)] == [b"%06d" % q for q in run.seqs]
    st = s.state()
    assert st.lost_msgs == [100] and st.msgs == 199
    assert [r[2] for r in removed] == [100]
    with pytest.raises(MsgNotFound):
        s.load_msg(100)
    assert rows(s.load_run(95, 10)) == iter_rows(s, 95, 10)
    s.stop()


def test_two_damaged_records_are_both_found(tmp_path, clock):
    # Two identical flips in two records of one stretch: the stretch check fails, the record by
    # record pass finds and reports each.
    d = str(tmp_path / "S")
    s = _store_with(d, clock, 100)
    size = s._sz[0]
    s.stop()
    path = first_block(d)
    data = bytearray(Path(path).read_bytes())
    for q in (10, 50):
        data[(q - 1) * size + 25] ^= 0x80
    Path(path).write_bytes(bytes(data))
    s = open_stream_store(cfg(), clock, d)
    run = s.load_run(1, 100)
    assert list(run.seqs) == [q for q in range(1, 101) if q not in (10, 50)]
    assert s.state().lost_msgs == [10, 50]
    s.stop()


def test_mixed_sizes_gaps_and_unflushed_tail(tmp_path, clock):
    d = str(tmp_path / "S")
    s = _store_with(d, clock, 300, payload=lambda i: b"x" * (i % 5 if i > 100 else 4))
    s.remove_msg(50)
    s.remove_msg(51)
    s.erase_msg(150)
    for i in range(5):  # not flushed: read from the write buffer
        s.store_msg("tail.%d" % i, HDR if i == 2 else None, b"t%d" % i)
    for start, n in [(1, 1000), (40, 20), (49, 3), (100, 60), (290, 20), (301, 5), (303, 1)]:
        assert rows(s.load_run(start, n)) == iter_rows(s, start, n), (start, n)
    tail = s.load_run(301, 5)
    assert tail.subjects[2] == b"tail.2" and tail.hdrs is not None and tail.hdrs[2] == HDR
    assert len(s.load_run(306, 5)) == 0
    s.stop()


def test_stretch_spanning_blocks_and_read_ahead_chunks(tmp_path, clock):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d, block_size=4096)
    for i in range(1, 2001):
        s.store_msg("s.x", None, b"%07d" % i)
    s.flush()
    assert len(s._blocks) > 10
    got = []
    seq = 1
    while True:
        run = s.load_run(seq, 333)
        if not len(run):
            break
        got += rows(run)
        seq = run.seqs[-1] + 1
    assert got == iter_rows(s, 1, 5000)
    s.stop()
