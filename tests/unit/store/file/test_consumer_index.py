"""natsd.store.file.consumer_index: obs.idx vouches for a consumer's meta.inf only while that very
file is in place. Crash points: between a consumer's meta write and its record, between its
directory's removal and the record of it, a torn append; each falls back to reading meta.inf."""

from __future__ import annotations

import os

import pytest

from natsd.clock import ManualClock
from natsd.store import open_stream_store
from natsd.store.base import StoreConfig
from natsd.store.file import consumer_index, peek
from natsd.store.file.consumer_index import FIELDS, HEADER, ConsumerIndex, facts_of, read_index
from natsd.store.file.layout import CONSUMER_INDEX_FILE

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


class Crash(Exception):
    """The process dies here (what follows in the same call never runs)."""


def meta(name: str, **cfg) -> dict:
    return {"name": name, "config": {"durable_name": name, "ack_policy": "explicit", **cfg}}


def stream(tmp_path, names=("A", "B", "C")):
    d = str(tmp_path / "S")
    s = open_stream_store(StoreConfig(name="S", storage="file"), ManualClock(), d)
    s.store_msg("s.1", None, b"x")
    for n in names:
        s.consumer_store(n, meta(n))
    return d, s


@pytest.fixture
def reads(monkeypatch):
    """The consumers whose meta.inf the peek read (instead of taking obs.idx's record)."""
    seen: list[str] = []
    real = peek.read_meta

    def counting(name, key, asset=None, dir_fd=None):
        seen.append(name)
        return real(name, key, asset, dir_fd=dir_fd)

    monkeypatch.setattr(peek, "read_meta", counting)
    return seen


def test_records_stand_for_the_metas(tmp_path, reads):
    d, s = stream(tmp_path)
    s.stop()
    got = peek.peek_consumer_facts(d, "S")
    assert sorted(got) == [(n, facts_of(meta(n))) for n in "ABC"]
    assert reads == []


def test_a_crash_between_an_update_and_its_record_reads_that_meta(tmp_path, reads, monkeypatch):
    d, s = stream(tmp_path)
    cs = s.consumer_store("B", None)

    def crash(self, name, m):
        raise Crash

    monkeypatch.setattr(ConsumerIndex, "noted", crash)
    with pytest.raises(Crash):  # (meta.inf and meta.sum written, the record not)
        cs.update_config(meta("B", pause_until="2099-01-01T00:00:00Z"))
    s._abandon()  # (kill -9)
    got = dict(peek.peek_consumer_facts(d, "S"))
    assert reads == ["B"]
    assert got["B"] == facts_of(meta("B", pause_until="2099-01-01T00:00:00Z")) != facts_of(meta("B"))
    # The file was written again with what was read: the next start reads nothing.
    reads.clear()
    assert dict(peek.peek_consumer_facts(d, "S")) == got and reads == []


def test_a_crash_between_a_create_and_its_record_reads_that_meta(tmp_path, reads, monkeypatch):
    d, s = stream(tmp_path)
    monkeypatch.setattr(ConsumerIndex, "noted", lambda self, name, m: (_ for _ in ()).throw(Crash))
    with pytest.raises(Crash):
        s.consumer_store("D", meta("D", replay_policy="original"))
    s._abandon()
    got = dict(peek.peek_consumer_facts(d, "S"))
    assert reads == ["D"] and got["D"] == facts_of(meta("D", replay_policy="original"))


def test_a_crash_between_a_delete_and_its_record_drops_the_consumer(tmp_path, reads, monkeypatch):
    d, s = stream(tmp_path)
    monkeypatch.setattr(ConsumerIndex, "deleted", lambda self, name: (_ for _ in ()).throw(Crash))
    with pytest.raises(Crash):
        s.consumer_store("C", None).delete()
    s._abandon()
    assert sorted(n for n, _ in peek.peek_consumer_facts(d, "S")) == ["A", "B"] and reads == []
    assert sorted(read_index(d)[0]) == ["A", "B"]  # (the gone one's record dropped by the rewrite)


def test_a_meta_rewritten_by_another_program_is_read(tmp_path, reads):
    """Same size, even the same mtime: a new file is another inode (and ctime)."""
    d, s = stream(tmp_path)
    s.stop()
    p = os.path.join(d, "obs", "A", "meta.inf")
    st = os.stat(p)
    with open(p, "rb") as f:
        data = f.read()
    os.unlink(p)
    with open(p, "wb") as f:
        f.write(data)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    peek.peek_consumer_facts(d, "S")
    assert reads == ["A"]


def test_deleted_and_recreated_consumers_follow_the_last_record(tmp_path, reads):
    d, s = stream(tmp_path)
    s.consumer_store("B", None).delete()
    s.consumer_store("B", meta("B", deliver_policy="last_per_subject"))
    s._abandon()
    got = dict(peek.peek_consumer_facts(d, "S"))
    assert reads == [] and got["B"] == facts_of(meta("B", deliver_policy="last_per_subject"))


@pytest.mark.parametrize("damage", ["torn", "bit", "header"])
def test_damaged_records_are_not_used(tmp_path, reads, damage):
    d, s = stream(tmp_path)
    s.stop()
    p = os.path.join(d, CONSUMER_INDEX_FILE)
    with open(p, "rb") as f:
        data = f.read()
    if damage == "torn":
        data = data[:-3]  # (C's record without its end)
        want = ["C"]
    elif damage == "bit":
        i = data.rindex(b'"durable_name":true')
        data = data[:i] + b'"durable_name":fals' + data[i + 19 :]  # (C's facts, its CRC as it was)
        want = ["C"]
    else:
        data = data.replace(b"natsd-consumers 1", b"natsd-consumers 9", 1)
        want = ["A", "B", "C"]
    with open(p, "wb") as f:
        f.write(data)
    peek.peek_consumer_facts(d, "S")
    assert sorted(reads) == want


def test_an_append_that_fails_removes_the_file(tmp_path, monkeypatch):
    d, s = stream(tmp_path)
    p = os.path.join(d, CONSUMER_INDEX_FILE)
    assert os.path.exists(p)
    real = os.write

    def full(fd, data):
        if os.fstat(fd).st_ino == os.stat(p).st_ino:
            raise OSError(28, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(consumer_index.os, "write", full)
    s.consumer_store("D", meta("D"))
    assert not os.path.exists(p)
    s.stop()


def test_the_file_is_compacted_as_it_grows(tmp_path, monkeypatch):
    monkeypatch.setattr(consumer_index, "COMPACT_MIN", 2000)
    d, s = stream(tmp_path, ())
    for i in range(60):
        s.consumer_store("A", meta("A", description=f"v{i}"))
    p = os.path.join(d, CONSUMER_INDEX_FILE)
    assert os.path.getsize(p) < 4200
    records, n = read_index(d)
    assert list(records) == ["A"] and os.stat(os.path.join(d, "obs", "A", "meta.inf")).st_ino == records["A"][0][0]
    s.stop()


def test_an_encrypted_stream_keeps_no_file(tmp_path):
    from natsd.store.file.encryption import AccountKeys, Encryption, StoreCipher

    keys = AccountKeys(Encryption(StoreCipher("chachapoly"), "secret"), "$G")
    d = str(tmp_path / "S")
    s = open_stream_store(StoreConfig(name="S", storage="file"), ManualClock(), d, keys=keys)
    s.consumer_store("A", meta("A"))
    s.stop()
    assert not os.path.exists(os.path.join(d, CONSUMER_INDEX_FILE))


def test_facts_keep_what_the_sleep_decisions_read():
    """dormant.consumer_can_sleep and config_must_wake read only FIELDS (the header names them:
    a change of the list makes older files unused), and decide the same from the facts."""
    import json

    from natsd.jetstream import dormant

    read: set[str] = set()

    class Recording(dict):
        def get(self, k, default=None):
            read.add(k)
            return super().get(k, default)

    for cfg in (
        {"durable_name": "D"},
        {"durable_name": "D", "metadata": {"natsd.dead_letter": "dl.x", "other": "y"}},
        {"durable_name": "D", "priority_policy": "pinned_client", "priority_groups": ["g"]},
        {"durable_name": "D", "deliver_subject": "p", "replay_policy": "original"},
    ):
        dormant.consumer_can_sleep(Recording(cfg))
        dormant.config_must_wake(Recording(cfg))
        named, sub = json.loads(facts_of({"name": "D", "config": cfg}))
        assert named is True
        assert dormant.consumer_can_sleep(sub) == dormant.consumer_can_sleep(cfg)
        assert dormant.config_must_wake(sub) == dormant.config_must_wake(cfg)
    assert read <= set(FIELDS)
    assert HEADER.endswith(b",".join(f.encode() for f in FIELDS) + b"\n")


def test_a_store_without_the_file_is_read_once_then_has_it(tmp_path, reads):
    """A store kept by a version without obs.idx (or one whose file was removed)."""
    d, s = stream(tmp_path)
    s.stop()
    os.unlink(os.path.join(d, CONSUMER_INDEX_FILE))
    first = sorted(peek.peek_consumer_facts(d, "S"))
    assert sorted(reads) == ["A", "B", "C"]
    reads.clear()
    assert sorted(peek.peek_consumer_facts(d, "S")) == first and reads == []
