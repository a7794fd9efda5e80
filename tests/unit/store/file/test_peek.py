"""natsd.store.file.peek: a stream's state without opening its store, given only when index.db
is exactly current; anything a recovery would have to replay, cut or report answers None."""

from __future__ import annotations

import os

import pytest

from natsd.clock import ManualClock
from natsd.store import open_stream_store, peek_stream
from natsd.store.base import StoreConfig
from natsd.store.file.layout import INDEX_FILE, MSGS_DIR
from natsd.store.file.consumer_index import facts_of
from natsd.store.file.peek import peek_consumer_facts, peek_stream_state

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


def cfg(**kw) -> StoreConfig:
    kw.setdefault("name", "S")
    return StoreConfig(storage="file", **kw)


def filled(tmp_path, n=40, stop=True):
    d = str(tmp_path / "S")
    s = open_stream_store(cfg(), ManualClock(), d, block_size=300)
    for i in range(1, n + 1):
        s.store_msg(f"s.{i % 3}", None, b"payload-%04d" % i)
    s.remove_msg(1)
    s.remove_msg(7)
    if stop:
        s.stop()
    return d, s


def test_a_current_index_gives_the_recovered_state(tmp_path):
    d, s = filled(tmp_path)
    st, lost = peek_stream_state(d)
    assert len([n for n in os.listdir(os.path.join(d, MSGS_DIR)) if n.endswith(".blk")]) > 1
    s = open_stream_store(cfg(), ManualClock(), d, block_size=300)
    try:
        assert st == s.state() and lost == []
        assert (st.msgs, st.first_seq, st.last_seq, st.num_deleted, st.num_subjects) == (38, 2, 40, 1, 3)
    finally:
        s.stop()


def test_a_block_that_grew_after_the_index_is_left_to_recovery(tmp_path):
    """What a kill -9 leaves after writes newer than index.db (and a torn tail lies there too)."""
    d, s = filled(tmp_path)
    s = open_stream_store(cfg(), ManualClock(), d, block_size=300)
    s.store_msg("s.x", None, b"after the index")
    s.flush()
    s._abandon()  # (kill -9: flushed bytes, no index.db write)
    assert peek_stream_state(d) is None


@pytest.mark.parametrize(
    "damage",
    ["torn", "changed-tail", "shrunk", "missing-block", "extra-block", "index-bits", "no-index", "tmp-left"],
)
def test_anything_a_recovery_would_repair_answers_none(tmp_path, damage):
    d, _ = filled(tmp_path)
    msgs = os.path.join(d, MSGS_DIR)
    blks = sorted((n for n in os.listdir(msgs) if n.endswith(".blk")), key=lambda n: int(n[:-4]))
    last = os.path.join(msgs, blks[-1])
    if damage == "torn":
        with open(last, "ab") as f:
            f.write(b"\x01\x02\x03")
    elif damage == "changed-tail":
        with open(last, "r+b") as f:
            f.seek(-1, os.SEEK_END)
            b = f.read(1)
            f.seek(-1, os.SEEK_END)
            f.write(bytes([b[0] ^ 0xFF]))
    elif damage == "shrunk":
        os.truncate(last, os.path.getsize(last) - 1)
    elif damage == "missing-block":
        os.unlink(os.path.join(msgs, blks[0]))
    elif damage == "extra-block":
        with open(os.path.join(msgs, f"{int(blks[-1][:-4]) + 1}.blk"), "wb"):
            pass
    elif damage == "index-bits":
        p = os.path.join(msgs, INDEX_FILE)
        with open(p, "rb") as f:
            data = bytearray(f.read())
        data[20] ^= 0x10
        with open(p, "wb") as f:
            f.write(bytes(data))
    elif damage == "no-index":
        os.unlink(os.path.join(msgs, INDEX_FILE))
    elif damage == "tmp-left":
        with open(os.path.join(msgs, INDEX_FILE + ".tmp"), "wb"):
            pass
    assert peek_stream_state(d) is None


def test_consumer_metas_are_verified(tmp_path):
    d, _ = filled(tmp_path)
    s = open_stream_store(cfg(), ManualClock(), d, block_size=300)
    meta = {"name": "C", "config": {"durable_name": "C"}}
    s.consumer_store("C", meta)
    s.stop()
    os.makedirs(os.path.join(d, "obs", "not-a-consumer"))
    assert peek_consumer_facts(d, "S") == [("C", facts_of(meta))]
    st, lost, consumers = peek_stream(d, "S")
    assert st.msgs == 38 and consumers == [("C", facts_of(meta))]
    with open(os.path.join(d, "obs", "C", "meta.inf"), "ab") as f:
        f.write(b" ")  # (no longer what its checksum says, nor what obs.idx recorded)
    assert peek_consumer_facts(d, "S") is None
    assert peek_stream(d, "S") is None


def test_a_big_index_is_not_peeked(tmp_path, monkeypatch):
    from natsd.store.file import peek

    d, _ = filled(tmp_path)
    assert peek_stream_state(d) is not None
    monkeypatch.setattr(peek, "PEEK_MAX_INDEX", os.path.getsize(os.path.join(d, MSGS_DIR, INDEX_FILE)) - 1)
    assert peek_stream_state(d) is None
