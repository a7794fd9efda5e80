"""natsd.jetstream.dormant without a server: the restart file is read once, fingerprints see a
changed stream directory, the sleeping store answers state without opening the real one."""

from __future__ import annotations

import os

import pytest

from natsd.jetstream import dormant
from natsd.store.base import StoreConfig, StreamState

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


def make_stream_dir(root) -> str:
    d = root / "S"
    (d / "msgs").mkdir(parents=True)
    (d / "obs").mkdir()
    (d / "meta.inf").write_bytes(b"{}")
    (d / "msgs" / "index.db").write_bytes(b"i" * 10)
    (d / "msgs" / "1.blk").write_bytes(b"a" * 100)
    (d / "msgs" / "2.blk").write_bytes(b"b" * 50)
    return str(d)


def test_fingerprint_names_the_last_block_and_sees_changes(tmp_path):
    d = make_stream_dir(tmp_path)
    fp = dormant.fingerprint(d)
    assert fp is not None and fp[0] == 2
    assert dormant.fingerprint(d, 2) == fp  # (start knows the last block: no listing)
    with open(os.path.join(d, "msgs", "2.blk"), "ab") as f:
        f.write(b"more")  # an append (another server ran on the directory)
    assert dormant.fingerprint(d, 2) != fp
    fp = dormant.fingerprint(d)
    os.mkdir(os.path.join(d, "obs", "NEW"))  # a consumer appeared
    assert dormant.fingerprint(d, 2) != fp
    assert dormant.fingerprint(str(tmp_path / "missing")) is None


def test_restart_file_is_read_once_and_entries_checked(tmp_path):
    d = make_stream_dir(tmp_path)
    st = StreamState(msgs=3, bytes=99, first_seq=1, first_ts=5, last_seq=4, last_ts=9, num_deleted=1, num_subjects=2)
    entry = [[getattr(st, f) for f in dormant._FIELDS], [], 2, dormant.fingerprint(d), {"config": {"name": "S"}}]
    dormant.write_restart_file(str(tmp_path), {"S": entry})
    got = dormant.read_restart_file(str(tmp_path))
    assert got == {"S": entry}
    assert not (tmp_path / dormant.RESTART_FILE).exists()
    assert dormant.read_restart_file(str(tmp_path)) == {}  # used once
    state, consumers, meta = dormant.sleeping_state(got["S"], d)
    assert (state.msgs, state.bytes, state.last_seq, state.num_deleted, consumers) == (3, 99, 4, 1, 2)
    assert meta == {"config": {"name": "S"}}
    os.utime(os.path.join(d, "meta.inf"), ns=(1, 1))  # changed meanwhile: not trusted
    assert dormant.sleeping_state(got["S"], d) is None
    assert dormant.sleeping_state(["garbage"], d) is None


def test_a_restart_file_of_another_version_is_ignored(tmp_path):
    (tmp_path / dormant.RESTART_FILE).write_text('{"version": 1, "streams": {"S": []}}')
    assert dormant.read_restart_file(str(tmp_path)) == {}
    (tmp_path / dormant.RESTART_FILE).write_text("not json")
    assert dormant.read_restart_file(str(tmp_path)) == {}


class FakeStore:
    def __init__(self) -> None:
        self.stopped = False

    def state(self, deleted_details: bool = False) -> StreamState:
        return StreamState(msgs=3, last_seq=4, deleted=[2] if deleted_details else None)

    def load_msg(self, seq: int) -> str:
        return f"msg {seq}"

    def stop(self) -> None:
        self.stopped = True


def test_dormant_store_answers_counters_and_opens_for_anything_else():
    opened: list[FakeStore] = []
    woken: list[bool] = []

    def opener() -> FakeStore:
        opened.append(FakeStore())
        return opened[-1]

    cfg_calls: list[int] = []

    def config() -> StoreConfig:
        cfg_calls.append(1)
        return StoreConfig(name="S")

    st = StreamState(msgs=3, bytes=10, last_seq=4, num_deleted=1)
    store = dormant.DormantStorage(config, st, opener, [])  # type: ignore[arg-type]
    store.waker = lambda: woken.append(True)
    assert store.state().msgs == 3 and store.bytes_used == 10 and store.recovered_lost == (0, 0)
    store.sync()
    store.stop()
    assert not opened and not cfg_calls  # nothing opened, the store config not even built
    assert store.config.name == "S" and len(cfg_calls) == 1
    assert store.state(deleted_details=True).deleted == [2]  # details need the real store
    assert len(opened) == 1 and woken == [True]
    assert store.load_msg(7) == "msg 7"
    assert len(opened) == 1  # opened once
    store.stop()
    assert opened[0].stopped


def test_dormant_consumers_count_without_waking():
    real = {"C": "consumer"}
    wakes: list[int] = []

    def waker() -> dict:
        wakes.append(1)
        return real

    cs = dormant.DormantConsumers(1, waker)
    assert len(cs) == 1 and bool(cs) and not wakes
    assert cs.get("C") == "consumer" and "C" in cs and list(cs.values()) == ["consumer"]
    assert wakes


def test_a_store_that_fails_to_open_is_a_store_error():
    from natsd.store.base import StoreError

    def opener() -> FakeStore:
        raise OSError("gone")

    store = dormant.DormantStorage(lambda: StoreConfig(name="S"), StreamState(), opener, [])  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="gone"):
        store.load_msg(1)
    assert store.real is None


def _stored_stream(tmp_path, consumers: dict[str, dict]) -> str:
    from natsd.clock import ManualClock
    from natsd.store import open_stream_store

    d = str(tmp_path / "P")
    s = open_stream_store(StoreConfig(name="P", storage="file"), ManualClock(), d)
    for i in range(4):
        s.store_msg(f"p.{i}", None, b"x")
    for name, config in consumers.items():
        s.consumer_store(name, {"name": name, "config": config})
    s.stop()
    return d


def test_after_a_kill_a_stream_sleeps_only_if_its_files_and_every_consumer_allow_it(tmp_path):
    """peek_asleep: no restart file entry (kill -9); the config and each consumer's meta.inf
    decide as can_sleep does for a clean stop, the files as natsd.store.file.peek does."""
    from natsd.jetstream.config.models import StreamConfig

    cfg = StreamConfig.from_json({"name": "P", "subjects": ["p.>"], "storage": "file"})
    d = _stored_stream(tmp_path, {"D": {"durable_name": "D", "ack_policy": "explicit"}})
    st, consumers, entry = dormant.peek_asleep(cfg, d)
    assert (st.msgs, st.last_seq, st.num_subjects, consumers) == (4, 4, 4, 1)
    assert entry[3] is None  # (fingerprinted when a stop finds it still asleep)
    assert dormant.peek_asleep(StreamConfig.from_json({**cfg.to_json(), "allow_msg_ttl": True}), d) is None
    for n, other in enumerate(
        (
            {"durable_name": "E", "deliver_subject": "push"},
            {"durable_name": "E", "inactive_threshold": 5_000_000_000},
            {"durable_name": "E", "pause_until": "2099-01-01T00:00:00Z"},
            {"name": "E"},  # (an ephemeral)
        )
    ):
        other_dir = _stored_stream(tmp_path / str(n), {"D": {"durable_name": "D"}, "E": other})
        assert dormant.peek_asleep(cfg, other_dir) is None, other
    with open(os.path.join(d, "msgs", "1.blk"), "ab") as f:
        f.write(b"torn")  # (what a recovery must cut and report: at start)
    assert dormant.peek_asleep(cfg, d) is None


def test_consumer_can_sleep_reads_a_config_or_its_json():
    from natsd.jetstream.config.consumer_config import ConsumerConfig

    assert dormant.consumer_can_sleep(ConsumerConfig(durable_name="D"))
    assert dormant.consumer_can_sleep({"durable_name": "D", "ack_policy": "explicit"})
    assert not dormant.consumer_can_sleep(ConsumerConfig(durable_name="D", deliver_subject="x"))
    assert not dormant.consumer_can_sleep({"durable_name": "D", "metadata": "not an object"})


def test_a_start_settles_encryptions_only_for_the_streams_the_listing_shows_cut(tmp_path, monkeypatch):
    """The streams directory's listing (list_stream_dirs) shows which streams an encryption in
    place was cut for (``.<name>.enc``/``.plain``): only those are settled; the others' leftovers
    are not looked for (two stats a stream at every start after a kill -9)."""
    from natsd.store.file import keyfiles
    from tests.helpers.fakeports import JsEnv

    env = JsEnv(str(tmp_path))
    for name in ("A", "B"):
        env.create(name, subjects=[f"{name}.>"], storage="file")
    env.pub("A.x", b"a")
    env.stop()
    os.remove(tmp_path / "jetstream" / "$G" / dormant.RESTART_FILE)  # (what a kill -9 leaves)
    (tmp_path / "jetstream" / "$G" / "streams" / ".B.enc").mkdir()  # (a copy a crash left)
    settled: list[str] = []
    real = keyfiles.settle_conversion

    def spy(directory: str) -> None:
        settled.append(os.path.basename(directory))
        real(directory)

    monkeypatch.setattr(keyfiles, "settle_conversion", spy)
    env = JsEnv(str(tmp_path))
    try:
        assert settled == ["B"]
        assert not (tmp_path / "jetstream" / "$G" / "streams" / ".B.enc").exists()
        assert env.api("$JS.API.STREAM.INFO.A")["state"]["messages"] == 1
        assert env.api("$JS.API.STREAM.INFO.B")["state"]["messages"] == 0
    finally:
        env.stop()
