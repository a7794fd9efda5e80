"""o.dat encoding and the file consumer store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from natsd.clock import ManualClock
from natsd.store import load_stream_meta, open_stream_store
from natsd.store.base import ConsumerState, CorruptState, Pending, SequencePair, StoreConfig
from natsd.store.file.consumer_state import decode_consumer_state, encode_consumer_state


def sample() -> ConsumerState:
    t = 1_700_000_000_123_456_789
    return ConsumerState(
        delivered=SequencePair(120, 150), ack_floor=SequencePair(100, 130),
        pending={131: Pending(101, t), 140: Pending(110, t + 7), 149: Pending(119, t + 999_999_999)},
        redelivered={131: 3, 140: 1})


def test_round_trip_exact_including_nanoseconds():
    st = sample()
    data = encode_consumer_state(st)
    assert data[:2] == bytes((22, 0x81))
    assert decode_consumer_state(data) == st
    assert decode_consumer_state(encode_consumer_state(ConsumerState())) == ConsumerState()


def test_pending_below_ack_floor_still_round_trips():
    st = ConsumerState(ack_floor=SequencePair(10, 10), pending={5: Pending(3, 1)})
    assert decode_consumer_state(encode_consumer_state(st)) == st


def test_every_corruption_detected():
    data = encode_consumer_state(sample())
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x04
        with pytest.raises(CorruptState):
            decode_consumer_state(bytes(bad))
    for cut in range(len(data)):
        with pytest.raises(CorruptState):
            decode_consumer_state(data[:cut])


def test_file_consumer_store_batches_until_flush(tmp_path):
    clock = ManualClock()
    d = str(tmp_path / "S")
    s = open_stream_store(StoreConfig(name="S", storage="file"), clock, d)
    cs = s.consumer_store("C", {"config": {"durable_name": "C"}})
    odat = Path(d, "obs", "C", "o.dat")
    cs.update(sample())
    assert not odat.exists()  # batched: nothing written until flush()
    cs.flush()
    assert decode_consumer_state(odat.read_bytes()) == sample()
    assert not Path(d, "obs", "C", "o.dat.tmp").exists()
    cs.update(ConsumerState(delivered=SequencePair(1, 1)))
    s.sync()  # the stream's sync writes its consumers too
    assert decode_consumer_state(odat.read_bytes()).delivered == SequencePair(1, 1)
    s.stop()
    s = open_stream_store(StoreConfig(name="S", storage="file"), clock, d)
    assert s.consumer_names() == ["C"]
    cs = s.consumer_store("C", None)
    assert cs.meta == {"config": {"durable_name": "C"}}
    cs.delete()
    assert s.consumer_names() == [] and not os.path.exists(os.path.join(d, "obs", "C"))
    s.stop()


def test_load_stream_meta(tmp_path):
    clock = ManualClock()
    d = str(tmp_path / "ORDERS")
    meta = {"config": {"name": "ORDERS"}, "created": "2024-01-01T00:00:00Z"}
    open_stream_store(StoreConfig(name="ORDERS", storage="file", meta=meta), clock, d).stop()
    assert load_stream_meta(d) == meta
    Path(d, "meta.inf").write_bytes(b'{"config": {}}')
    assert load_stream_meta(d) is None
    assert load_stream_meta(str(tmp_path / "none")) is None


@pytest.mark.parametrize("damage", ["flip", "empty", "truncate"])
def test_damaged_state_file_keeps_the_consumer_with_its_state_reset(tmp_path, caplog, damage):
    """Issue 14 item 3: the config (meta.inf) is apart from the state; a damaged o.dat resets the
    state, says why (state_damaged, a warning naming the file) and keeps the bytes aside."""
    clock = ManualClock()
    d = str(tmp_path / "S")
    s = open_stream_store(StoreConfig(name="S", storage="file"), clock, d)
    cs = s.consumer_store("C", {"config": {"durable_name": "C"}})
    cs.update(sample())
    s.stop()
    odat = Path(d, "obs", "C", "o.dat")
    data = bytearray(odat.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x10
    elif damage == "empty":
        data = bytearray()
    else:
        data = data[: len(data) - 3]
    odat.write_bytes(bytes(data))
    s = open_stream_store(StoreConfig(name="S", storage="file"), clock, d)
    assert s.consumer_names() == ["C"]
    cs = s.consumer_store("C", None)
    assert cs.meta == {"config": {"durable_name": "C"}}
    assert cs.state() == ConsumerState()
    assert cs.state_damaged
    assert Path(d, "obs", "C", "o.dat.damaged").read_bytes() == bytes(data)
    assert any("o.dat" in r.getMessage() and "damaged" in r.getMessage() and r.levelname == "WARNING"
               for r in caplog.records)
    cs.update(sample())
    s.stop()
    s = open_stream_store(StoreConfig(name="S", storage="file"), clock, d)
    cs = s.consumer_store("C", None)
    assert not cs.state_damaged and cs.state() == sample()
    s.stop()
