"""Consumer state writes on a full disk (issue 26: natsd.testing's disk-full fault reaches them).

nats-server's consumer store writes its whole state through a temporary file: when that fails the
old file stays, the state stays dirty and the next flush writes it again; the consumer goes on in
memory. natsd does the same for a small state (written whole), and for a large one (a journal of
deltas) a failed append, which may leave a torn record that would hide every later one at recovery,
makes the next flush write the whole state, which drops the journal. The faults are injected
through the store's own system-call names by :class:`natsd.testing.faults.DiskFaults`."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest

from natsd.store.base import ConsumerState, Pending, SequencePair
from natsd.store.file.consumer_state import decode_consumer_state
from natsd.testing.faults import DiskFaults
from tests.unit.store.file.test_consumer_state import KEYS, Live, _open

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def disk(tmp_path):
    rule = DiskFaults.rule(str(tmp_path))
    yield rule
    DiskFaults.forget(str(tmp_path))


def _state(n: int) -> ConsumerState:
    return ConsumerState(
        delivered=SequencePair(n, n), ack_floor=SequencePair(n - 1, n - 1), pending={n: Pending(n, 1_000 + n)}
    )


def test_a_failed_whole_write_keeps_the_old_state_and_is_written_by_the_next_flush(tmp_path, disk, caplog):
    s, d = _open(tmp_path)
    cs = s.consumer_store("C", {"config": {"durable_name": "C"}})
    odat = Path(d, "obs", "C", "o.dat")
    cs.update(_state(5))
    cs.flush()
    assert decode_consumer_state(odat.read_bytes()) == _state(5)

    disk.errno = errno.ENOSPC
    with caplog.at_level(logging.DEBUG, "natsd.store"):
        cs.update(_state(6))
        cs.flush()  # no exception for the caller: the consumer goes on
        cs.update(_state(7))
        cs.flush()
    assert decode_consumer_state(odat.read_bytes()) == _state(5)  # the old state, whole
    assert not Path(d, "obs", "C", "o.dat.tmp").exists()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "No space left on device" in errors[0].getMessage()  # once per outage

    disk.errno = 0
    with caplog.at_level(logging.INFO, "natsd.store"):
        s.sync()  # the stream's periodic sync flushes its consumers: the dirty state goes out now
    assert decode_consumer_state(odat.read_bytes()) == _state(7)
    assert any("written again" in r.getMessage() for r in caplog.records)
    s.stop()
    s, d = _open(tmp_path)
    assert s.consumer_store("C", None).state() == _state(7)
    s.stop()


def test_a_failed_fsync_is_a_failed_write_too(tmp_path, disk):
    s, d = _open(tmp_path)
    cs = s.consumer_store("C", {"config": {"durable_name": "C"}})
    disk.errno = errno.EIO
    cs.update(_state(3))
    cs.flush(fsync=True)  # (what the stream's sync asks): fails, the state stays to write
    disk.errno = 0
    cs.flush()
    assert decode_consumer_state(Path(d, "obs", "C", "o.dat").read_bytes()) == _state(3)
    s.stop()


@KEYS
def test_a_failed_journal_append_is_replaced_by_a_whole_write(tmp_path, disk, keys):
    s, d = _open(tmp_path, keys)
    cs = s.consumer_store("C", {"config": {"durable_name": "C"}})
    live = Live()
    for i in range(1, 5001):
        live.deliver(i, i, 1_700_000_000_000_000_000 + i)
    cs.append_delta(live.delta(), live.source)
    cs.flush()
    cs.wait()
    olog = Path(d, "obs", "C", "o.log")
    assert olog.exists()

    disk.errno = errno.ENOSPC
    for i in range(1, 200):
        live.ack(i)
    cs.append_delta(live.delta(), live.source)
    cs.flush()
    cs.wait()  # the worker's append failed
    disk.errno = 0
    for i in range(200, 300):
        live.ack(i)
    cs.append_delta(live.delta(), live.source)
    cs.flush()  # the whole state from the live maps, instead of appending after what failed
    cs.wait()
    assert not olog.exists()
    live.ack(300)  # and the journal goes on from the new snapshot
    cs.append_delta(live.delta(), live.source)
    cs.flush()
    cs.wait()
    assert olog.exists()
    s.stop()
    s, d = _open(tmp_path, keys)
    assert s.consumer_store("C", None).state() == live.state()
    s.stop()


def test_a_failed_journal_append_is_written_whole_by_the_streams_sync_alone(tmp_path, disk):
    """No further change to the consumer: the periodic sync is what writes it again."""
    s, d = _open(tmp_path)
    cs = s.consumer_store("C", {"config": {"durable_name": "C"}})
    live = Live()
    for i in range(1, 3001):
        live.deliver(i, i, i)
    cs.append_delta(live.delta(), live.source)
    cs.flush()
    cs.wait()
    disk.errno = errno.ENOSPC
    live.ack(1)
    cs.append_delta(live.delta(), live.source)
    cs.flush()
    cs.wait()
    disk.errno = 0
    s.sync()
    cs.wait()
    assert decode_consumer_state(Path(d, "obs", "C", "o.dat").read_bytes()) == live.state()
    s.stop()
