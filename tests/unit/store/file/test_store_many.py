"""store_many on a file store: records of a run over many subjects written a block's worth at
a time (``_write_many``, one encode) are byte for byte the files store_msg of each writes, across
block rolls and a big payload, and read back the same after a reopen."""

from __future__ import annotations

import os

import pytest

from natsd.clock import ManualClock
from natsd.store.base import StoreConfig
from natsd.store.file.stream_store import FileStreamStore

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]


def _messages() -> tuple[list[str], list[bytes]]:
    subjects = [f"dev.{i % 13}.ev{i % 3}" for i in range(900)]
    bodies = [b"%04d" % i * (700 if i == 450 else 1 + i % 9) for i in range(900)]
    return subjects, bodies


def _files(directory: str) -> dict[str, bytes]:
    d = os.path.join(directory, "msgs")
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".blk"):
            with open(os.path.join(d, f), "rb") as fh:
                out[f] = fh.read()
    return out


def test_store_many_writes_the_files_store_msg_writes(tmp_path):
    subjects, bodies = _messages()
    stores = {}
    for name in ("many", "one"):
        clock = ManualClock(start_time_ns=5 * 10**9)
        st = FileStreamStore(StoreConfig(name="S", subjects=[">"]), clock, str(tmp_path / name), block_size=4096)
        # (the first lap teaches the subjects: the rest are known, the plain piece path)
        for j, b in zip(subjects[:39], bodies[:39]):
            st.store_msg(j, None, b)
        if name == "many":
            for k in range(39, 900, 200):
                first, _ts, done, err = st.store_many(subjects[k : k + 200], bodies[k : k + 200])
                assert (first, done, err) == (k + 1, min(200, 900 - k), None)
        else:
            for j, b in zip(subjects[39:], bodies[39:]):
                st.store_msg(j, None, b)
        st.flush()
        stores[name] = st
    assert len(_files(str(tmp_path / "many"))) > 3  # (blocks rolled inside runs)
    assert _files(str(tmp_path / "many")) == _files(str(tmp_path / "one"))
    a, b = stores["many"], stores["one"]
    assert a.state() == b.state()
    for j in ("dev.0.ev0", "dev.12.ev2", "dev.5.ev1"):
        assert a.load_last_msg(j).seq == b.load_last_msg(j).seq
        assert a.load_next_msg(j, 400).seq == b.load_next_msg(j, 400).seq
    for st in stores.values():
        st.stop()
    again = FileStreamStore(
        StoreConfig(name="S", subjects=[">"]), ManualClock(), str(tmp_path / "many"), block_size=4096
    )
    for seq in (1, 40, 451, 452, 900):
        m = again.load_msg(seq)
        assert (m.subject, m.msg) == (subjects[seq - 1], bodies[seq - 1])
    again.stop()
