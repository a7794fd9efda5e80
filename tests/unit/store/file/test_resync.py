"""Recovery resynchronises after damaged bytes in the middle of a block (issue 14, item 4): only
the records the damage touches are lost, exactly those are reported (``lost_msgs``,
``lost_bytes``), every intact record after them in the same block is served. This goes beyond
nats-server, which drops the rest of the block."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from natsd.clock import ManualClock
from natsd.store import open_stream_store
from natsd.store.base import StoreConfig
from natsd.store.file.layout import INDEX_FILE, MSGS_DIR


def cfg(**kw) -> StoreConfig:
    kw.setdefault("name", "S")
    return StoreConfig(storage="file", **kw)


@pytest.fixture
def clock():
    return ManualClock()


def offsets(store) -> dict[int, tuple[int, int]]:
    """seq -> (offset in its block, record size), from the live index."""
    return {seq: (pos & 0xFFFFFFFF, store._sz[seq - store._base]) for seq, pos in store._iter_index()}


def block_path(d: str) -> str:
    names = sorted(n for n in os.listdir(os.path.join(d, MSGS_DIR)) if n.endswith(".blk"))
    assert len(names) == 1
    return os.path.join(d, MSGS_DIR, names[0])


def damage(path: str, start: int, n: int, how: str = "flip") -> None:
    data = bytearray(Path(path).read_bytes())
    for i in range(start, start + n):
        data[i] = 0 if how == "zero" else data[i] ^ 0x5A
    Path(path).write_bytes(bytes(data))


def publish(store, n: int, first: int = 1) -> None:
    for i in range(first, first + n):
        # Varying sizes, a few subjects, some headers: not one uniform run.
        hdr = b"NATS/1.0\r\nK: %d\r\n\r\n" % i if i % 7 == 0 else None
        store.store_msg(f"s.{i % 5}", hdr, b"m%06d" % i + b"." * (i % 40))
    store.flush()


@pytest.mark.parametrize("where", ["payload", "length", "header", "trailer"])
def test_full_scan_loses_only_the_damaged_record(tmp_path, clock, where, caplog):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    publish(s, 2000)
    offs = offsets(s)
    s.stop()
    os.unlink(os.path.join(d, MSGS_DIR, INDEX_FILE))
    off, size = offs[1000]
    at = {"payload": off + size - 20, "length": off + 1, "header": off + 8, "trailer": off + size - 3}[where]
    damage(block_path(d), at, 1)
    with caplog.at_level(logging.ERROR, logger="natsd.store"):
        s = open_stream_store(cfg(), clock, d)
    st = s.state()
    assert st.lost_msgs == [1000]
    assert st.lost_bytes == size
    assert (st.msgs, st.first_seq, st.last_seq) == (1999, 1, 2000)
    msgs = list(s.iter_msgs(1, 2000))
    assert [m.seq for m in msgs] == [q for q in range(1, 2001) if q != 1000]
    assert all(m.msg.startswith(b"m%06d" % m.seq) for m in msgs)
    assert "damaged record" in caplog.text
    # New messages go on after the last sequence; the damage is reported again, not worse.
    s.store_msg("s.1", None, b"new")
    s.flush()
    s.stop()
    os.unlink(os.path.join(d, MSGS_DIR, INDEX_FILE))
    s = open_stream_store(cfg(), clock, d)
    st = s.state()
    assert st.lost_msgs == [1000] and st.last_seq == 2001 and st.msgs == 2000
    s.stop()


def test_damage_across_several_records_reports_exactly_those(tmp_path, clock):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    publish(s, 500)
    offs = offsets(s)
    s.stop()
    os.unlink(os.path.join(d, MSGS_DIR, INDEX_FILE))
    start = offs[200][0] + 10
    end = offs[204][0] + 5  # from inside 200 to inside 204
    damage(block_path(d), start, end - start, how="zero")
    s = open_stream_store(cfg(), clock, d)
    st = s.state()
    assert st.lost_msgs == [200, 201, 202, 203, 204]
    assert st.lost_bytes == offs[205][0] - offs[200][0]
    assert [m.seq for m in s.iter_msgs(1, 500)] == [q for q in range(1, 501) if not 200 <= q <= 204]
    s.stop()


def test_replay_after_the_index_resynchronises_too(tmp_path, clock):
    """kill -9 after index.db: the records appended after it are replayed from its offsets; a
    damaged one among them costs only itself."""
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    publish(s, 100)
    s.write_index()
    publish(s, 100, first=101)
    offs = offsets(s)
    s._abandon()
    off, size = offs[150]
    damage(block_path(d), off + size // 2, 1)
    s = open_stream_store(cfg(), clock, d)
    st = s.state()
    assert st.lost_msgs == [150] and st.lost_bytes == size
    assert (st.msgs, st.last_seq) == (199, 200)
    assert [m.seq for m in s.iter_msgs(1, 200)] == [q for q in range(1, 201) if q != 150]
    s.stop()


def test_damaged_tombstone_loses_no_message(tmp_path, clock):
    """A damaged marker record (a tombstone) is skipped; the messages after it are all intact,
    so no message is reported lost (the delete it recorded may come back: it is logged)."""
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    publish(s, 50)
    s.remove_msg(10)
    s.flush()
    tomb_off = s._lmb.flushed - 30
    publish(s, 50, first=51)
    s.stop()
    os.unlink(os.path.join(d, MSGS_DIR, INDEX_FILE))
    damage(block_path(d), tomb_off + 12, 1)
    s = open_stream_store(cfg(), clock, d)
    st = s.state()
    assert st.lost_msgs is None or st.lost_msgs == []
    assert st.lost_bytes == 30
    assert st.last_seq == 100
    s.stop()


def test_torn_tail_is_still_truncated(tmp_path, clock):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), clock, d)
    publish(s, 20)
    s.stop()
    os.unlink(os.path.join(d, MSGS_DIR, INDEX_FILE))
    path = block_path(d)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 7)
    s = open_stream_store(cfg(), clock, d)
    st = s.state()
    assert st.last_seq == 19 and st.lost_msgs == [20]
    s.stop()
