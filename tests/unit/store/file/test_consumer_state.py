"""o.dat encoding and the file consumer store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from natsd.clock import ManualClock
from natsd.store import load_stream_meta, open_stream_store
from natsd.store.base import ConsumerState, CorruptState, Pending, SequencePair, StoreConfig
from natsd.store.file.consumer_state import (
    decode_consumer_state,
    decode_snapshot,
    encode_consumer_state,
    encode_consumer_state_v1,
)


def sample() -> ConsumerState:
    t = 1_700_000_000_123_456_789
    return ConsumerState(
        delivered=SequencePair(120, 150),
        ack_floor=SequencePair(100, 130),
        pending={131: Pending(101, t), 140: Pending(110, t + 7), 149: Pending(119, t + 999_999_999)},
        redelivered={131: 3, 140: 1},
    )


def test_round_trip_exact_including_nanoseconds():
    st = sample()
    data = encode_consumer_state(st, gen=7)
    assert data[:2] == bytes((22, 0x82))
    assert decode_snapshot(data) == (7, st)
    assert decode_consumer_state(encode_consumer_state(ConsumerState())) == ConsumerState()


def test_v1_files_are_still_read():
    st = sample()
    data = encode_consumer_state_v1(st)
    assert data[:2] == bytes((22, 0x81))
    assert decode_snapshot(data) == (0, st)


def test_pending_below_ack_floor_still_round_trips():
    st = ConsumerState(ack_floor=SequencePair(10, 10), pending={5: Pending(3, 1)})
    assert decode_consumer_state(encode_consumer_state(st)) == st
    assert decode_consumer_state(encode_consumer_state_v1(st)) == st


@pytest.mark.parametrize("enc", [encode_consumer_state, encode_consumer_state_v1])
def test_every_corruption_detected(enc):
    data = enc(sample())
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


@pytest.mark.parametrize("sync_always", [False, True])
def test_consumer_meta_is_fsynced_only_when_the_stream_syncs_always(tmp_path, monkeypatch, sync_always):
    """As nats-server's writeFileWithOptionalSync: a consumer's meta files reach the OS (written and
    renamed) on create and update, and are forced to the disk only under sync_always."""
    import natsd.atomicfile as af

    calls = []
    real = os.fsync
    monkeypatch.setattr(af.os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    d = str(tmp_path / "S")
    s = open_stream_store(StoreConfig(name="S", storage="file"), ManualClock(), d, sync_always=sync_always)
    calls.clear()
    cs = s.consumer_store("C", {"config": {"durable_name": "C"}})
    cs.update_config({"config": {"durable_name": "C", "description": "x"}})
    assert (len(calls) > 0) is sync_always
    assert json.loads(Path(d, "obs", "C", "meta.inf").read_bytes())["config"]["description"] == "x"
    s.stop()
    s = open_stream_store(StoreConfig(name="S", storage="file"), ManualClock(), d)
    assert s.consumer_store("C", None).meta == {"config": {"durable_name": "C", "description": "x"}}
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
    assert any(
        "o.dat" in r.getMessage() and "damaged" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records
    )
    cs.update(sample())
    s.stop()
    s = open_stream_store(StoreConfig(name="S", storage="file"), clock, d)
    cs = s.consumer_store("C", None)
    assert not cs.state_damaged and cs.state() == sample()
    s.stop()


# -- journal (issue 14 item 7) ---------------------------------------------------------------------

from natsd.store.base import ConsumerDelta  # noqa: E402
from natsd.store.file import consumer_state as CS  # noqa: E402
from natsd.store.file.encryption import Encryption, StoreCipher  # noqa: E402


def _open(tmp_path, keys=None):
    clock = ManualClock()
    d = str(tmp_path / "S")
    s = open_stream_store(StoreConfig(name="S", storage="file"), clock, d, keys=keys)
    return s, d


#: The journal tests run on a plain and on an encrypted store (natsd.store.file.encryption: the
#: consumer's files then carry a nonce and its key stream; the records and their checks are the same).
KEYS = pytest.mark.parametrize(
    "keys", [None, Encryption(StoreCipher.CHACHA, "consumer-state-key").for_account("$G")], ids=["plain", "encrypted"]
)


class Live:
    """What a consumer hands to append_delta: its live maps and sequence pairs."""

    def __init__(self) -> None:
        self.pend: dict = {}
        self.rdc: dict = {}
        self.dl = SequencePair()
        self.af = SequencePair()
        self.touched: set = set()
        self.rtouched: set = set()

    def deliver(self, sseq: int, dseq: int, ts: int) -> None:
        self.pend[sseq] = [dseq, ts]
        self.touched.add(sseq)
        self.dl = SequencePair(dseq, sseq)

    def ack(self, sseq: int) -> None:
        self.pend.pop(sseq, None)
        self.touched.add(sseq)
        lo = min(self.pend) - 1 if self.pend else self.dl.stream_seq
        self.af = SequencePair(lo, lo)

    def redeliver(self, sseq: int, ts: int) -> None:
        self.pend[sseq][1] = ts
        self.rdc[sseq] = self.rdc.get(sseq, 0) + 1
        self.touched.add(sseq)
        self.rtouched.add(sseq)

    def delta(self) -> ConsumerDelta:
        t, self.touched = self.touched, set()
        r, self.rtouched = self.rtouched, set()
        ps = [s for s in t if s in self.pend]
        rs = [s for s in r if s in self.rdc]
        return ConsumerDelta(
            self.dl,
            self.af,
            ps,
            [self.pend[s] for s in ps],
            [s for s in t if s not in self.pend],
            rs,
            [self.rdc[s] for s in rs],
            [s for s in r if s not in self.rdc],
        )

    def source(self):
        return self.pend, self.rdc, self.dl, self.af

    def state(self) -> ConsumerState:
        return ConsumerState(
            self.dl, self.af, {s: Pending(*p) for s, p in sorted(self.pend.items())}, dict(sorted(self.rdc.items()))
        )


@KEYS
def test_deltas_are_appended_and_recovered(tmp_path, keys):
    s, d = _open(tmp_path, keys)
    cs = s.consumer_store("C", {"config": {"durable_name": "C"}})
    live = Live()
    for i in range(1, 5001):
        live.deliver(i, i, 1_700_000_000_000_000_000 + i)
    cs.append_delta(live.delta(), live.source)
    cs.flush()
    cs.wait()  # journal writes run on the worker thread
    odat = Path(d, "obs", "C", "o.dat")
    olog = Path(d, "obs", "C", "o.log")
    snap = odat.read_bytes() if odat.exists() else None
    size = olog.stat().st_size
    live.ack(1)
    cs.append_delta(live.delta(), live.source)
    cs.flush()
    cs.wait()
    # One ack with 5,000 pending: a record of a few dozen bytes, the snapshot untouched.
    assert (odat.read_bytes() if odat.exists() else None) == snap
    assert 0 < olog.stat().st_size - size < 100
    live.redeliver(7, 5)
    for i in range(2, 100):
        live.ack(i)
    cs.append_delta(live.delta(), live.source)
    s.stop()
    s, d = _open(tmp_path, keys)
    cs = s.consumer_store("C", None)
    assert cs.state() == live.state()
    assert not olog.exists()  # folded into a new snapshot at open
    s.stop()


@KEYS
def test_checkpoint_in_the_worker_and_crash_points(tmp_path, monkeypatch, keys):
    import shutil as sh

    monkeypatch.setattr(CS, "JOURNAL_MIN_BYTES", 4096)
    monkeypatch.setattr(CS, "CHECKPOINT_SLICE", 100)
    from concurrent.futures import Future

    class Now:
        """The worker thread, run inline (deterministic)."""

        def submit(self, fn, *args):
            f = Future()
            f.set_result(fn(*args))
            return f

    monkeypatch.setattr(CS, "_worker", lambda: Now())
    held = []  # the checkpoint, held back: the "crash during a checkpoint" point
    real_checkpoint = CS.FileConsumerStore._write_checkpoint
    monkeypatch.setattr(CS.FileConsumerStore, "_write_checkpoint", lambda self, *a: held.append((self, a)))
    s, d = _open(tmp_path, keys)
    cs = s.consumer_store("C", {"config": {"durable_name": "C"}})
    live = Live()
    seq = 0
    while not held:
        for _ in range(50):
            seq += 1
            live.deliver(seq, seq, seq * 10)
        live.ack(seq - 10)
        cs.append_delta(live.delta(), live.source)
        cs.flush()
    obs = Path(d, "obs", "C")
    assert (obs / "o.log.old").exists() and not (obs / "o.log").exists()
    # Changes after the checkpoint started go to the new journal (one generation up).
    live.ack(5)
    live.redeliver(9, 99)
    cs.append_delta(live.delta(), live.source)
    cs.flush()
    assert (obs / "o.log").exists()
    crash1 = tmp_path / "crash1"
    sh.copytree(d, crash1 / "S")
    # The worker runs (the live maps change meanwhile: a fuzzy snapshot, the journal covers it).
    store, args = held.pop()
    live.ack(11)
    real_checkpoint(store, *args)
    assert not (obs / "o.log.old").exists()
    assert decode_snapshot(store._read_file(str(obs / "o.dat")))[0] == args[1]
    cs.append_delta(live.delta(), live.source)
    cs.flush()
    want = live.state()
    crash2 = tmp_path / "crash2"
    sh.copytree(d, crash2 / "S")
    # A stale o.log.old left by a crash between the rename and the unlink is skipped (generation).
    (crash2 / "S" / "obs" / "C" / "o.log.old").write_bytes((crash1 / "S" / "obs" / "C" / "o.log.old").read_bytes())
    s.stop()
    for where, expect in ((tmp_path, want), (crash2, want)):
        s2, _ = _open(where, keys)
        assert s2.consumer_store("C", None).state() == expect, where
        s2.stop()
    # crash1: before the checkpoint finished: the old snapshot and both journals.
    s3, _ = _open(crash1, keys)
    st = s3.consumer_store("C", None).state()
    s3.stop()
    assert 5 not in st.pending and st.redelivered == {9: 1} and st.pending[9] == Pending(9, 99)
    assert 11 in st.pending  # acked after that copy was taken


@KEYS
def test_torn_journal_tail_keeps_the_records_before_it(tmp_path, caplog, keys):
    s, d = _open(tmp_path, keys)
    cs = s.consumer_store("C", {"config": {"durable_name": "C"}})
    live = Live()
    for i in range(1, 3001):
        live.deliver(i, i, i)
    cs.append_delta(live.delta(), live.source)
    cs.flush()
    live.ack(1)
    cs.append_delta(live.delta(), live.source)
    cs.flush()
    want = live.state()
    live.ack(2)
    cs.append_delta(live.delta(), live.source)
    cs.flush()
    cs.wait()  # the worker thread wrote the three records
    s._abandon()  # kill -9: nothing more written
    olog = Path(d, "obs", "C", "o.log")
    olog.write_bytes(olog.read_bytes()[:-3])
    s, d = _open(tmp_path, keys)
    assert s.consumer_store("C", None).state() == want
    assert any("torn" in r.getMessage() for r in caplog.records)
    s.stop()


def test_v1_state_file_is_migrated_at_open(tmp_path):
    s, d = _open(tmp_path)
    s.consumer_store("C", {"config": {"durable_name": "C"}})
    s.stop()
    odat = Path(d, "obs", "C", "o.dat")
    odat.write_bytes(encode_consumer_state_v1(sample()))
    s, d = _open(tmp_path)
    assert s.consumer_store("C", None).state() == sample()
    assert odat.read_bytes()[:2] == bytes((22, 0x82))
    s.stop()
