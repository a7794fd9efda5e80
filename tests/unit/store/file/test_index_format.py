"""``msgs/index.db`` version 6 (the subject table's cells, adopted at a restart), version 5 (u16
sizes with the large ones aside, per-subject chains only when kept), version 4 (subject slots in
columns, names split at "\\n") and the versions before them, still read."""

from __future__ import annotations

import os
import struct
import zlib
from array import array

import pytest

from natsd.clock import ManualClock
from natsd.store.base import StoreConfig
from natsd.store.file.index import _SS, _U16, _U32, _times, _wide_positions, decode_index, encode_index
from natsd.store.file.index import encode_index_parts
from natsd.store.file.stream_store import FileStreamStore
from natsd.store.seqindex import DEAD_SIDS

pytestmark = pytest.mark.unit


def _store(path: str, clock: ManualClock) -> FileStreamStore:
    return FileStreamStore(StoreConfig(name="S", subjects=[">"]), clock, path)


def _fill(path: str) -> dict:
    clock = ManualClock()
    st = _store(path, clock)
    for i in range(40):
        clock.advance(1000)
        st.store_msg(f"k.{i % 9}", None, b"v%d" % i)
    st.store_msg("k.é.ü", None, b"non-ascii")  # names are UTF-8: byte and character offsets differ
    st.store_msg("gone", None, b"x")
    st.store_msg("k.last", None, b"y")
    st.purge_ex("gone", 0, 0)  # frees its subject slot (the next new subject would reuse it)
    st.stop()
    st = _store(path, clock)
    totals = st.subjects_state(">")
    st.stop()
    return totals


def _as_version_5(data: bytes) -> bytes:
    """The same snapshot (version 6 ``data``) without the subject table's cells."""
    snap = decode_index(data)
    cells = snap.scells if snap.scells is not None else []
    body = bytearray(data[: -4 - (8 + 4 * len(cells) + 4 * len(snap.sover))])
    struct.pack_into("<I", body, 4, 5)
    return bytes(body) + _U32.pack(zlib.crc32(body))


def _as_version_4(data: bytes) -> bytes:
    """The same snapshot (version 6 ``data``) with version 4's per-message section: i64
    positions and times, u32 sizes, then the chains, always (all zeros when none are kept)."""
    data = _as_version_5(data)
    snap = decode_index(data)
    n, t, b = len(snap.pos), len(snap.tss), len(snap.pss)
    fixed = struct.calcsize("<4sI10q")
    chains = 4 * n if snap.nxt is not None else 0
    w = snap.sid.itemsize
    v5_end = fixed + n * (10 + w) + 4 + 16 * b + 1 + 4 + 16 * t + 4 + 16 * len(snap.szx) + 1 + chains
    pos = array("q", _wide_positions(snap.pos, snap.pss, snap.psh, snap.base))
    ts = array("q", _times(snap.ts, snap.tss, snap.tsb, snap.base))
    sz = array("I", snap.sz)
    for q, z in snap.szx.items():
        sz[q - snap.base] = z
    nxt = snap.nxt if snap.nxt is not None else array("I", bytes(4 * n))
    sid = array("I", [x if x != DEAD_SIDS[snap.sid.typecode] else 0xFFFFFFFF for x in snap.sid])
    head = data[:fixed] + pos.tobytes() + sid.tobytes() + ts.tobytes() + sz.tobytes() + nxt.tobytes()
    body = bytearray(head + data[v5_end:-4])
    struct.pack_into("<I", body, 4, 4)
    return bytes(body) + _U32.pack(zlib.crc32(body))


def _with_slots(data: bytes, version: int, slots: list[bytes]) -> bytes:
    """The same snapshot (version 6 ``data``) with its subject slots replaced by ``slots``."""
    snap = decode_index(data)
    v4 = _as_version_4(encode_index(snap))[:-4]
    head = struct.calcsize("<4sI10q") + len(snap.pos) * 28
    names = sum(len(n.encode()) for n in snap.snames if n is not None)
    tail_start = head + 4 + 4 + names + max(len(snap.snames) - 1, 0) + len(snap.snames) * (8 * 3 + 1)
    body = bytearray(v4[:head] + _U32.pack(len(snap.snames)) + b"".join(slots) + v4[tail_start:])
    struct.pack_into("<I", body, 4, version)
    return bytes(body) + _U32.pack(zlib.crc32(body))


def _live_sids(sids: array) -> list:
    return [None if x == DEAD_SIDS[sids.typecode] else x for x in sids]


def _as_version_2(data: bytes) -> bytes:
    """The same snapshot with its subject slots one record each (what versions 1-2 wrote)."""
    snap = decode_index(data)
    slots = []
    for sid, name in enumerate(snap.snames):
        if name is None:
            slots.append(_U16.pack(0xFFFF))
        else:
            nb = name.encode()
            ss = (snap.smsgs[sid], snap.sfirst[sid], snap.slast[sid], snap.sstale[sid])
            slots.append(_U16.pack(len(nb)) + nb + _SS.pack(*ss))
    return _with_slots(data, 2, slots)


def _as_version_3(data: bytes) -> bytes:
    """The same snapshot with version 3's columns (name lengths, then the names)."""
    snap = decode_index(data)
    encoded = [None if n is None else n.encode() for n in snap.snames]
    lens = array("H", [0xFFFF if b is None else len(b) for b in encoded])
    cols = [snap.smsgs.tobytes(), snap.sfirst.tobytes(), snap.slast.tobytes(), snap.sstale.tobytes()]
    return _with_slots(data, 3, [lens.tobytes(), b"".join(b for b in encoded if b is not None), *cols])


def test_version_6_round_trips_free_slots_and_utf8(tmp_path):
    _fill(str(tmp_path))
    data = (tmp_path / "msgs" / "index.db").read_bytes()
    assert struct.unpack_from("<I", data, 4)[0] == 6
    snap = decode_index(data)
    assert snap.scells is not None and len(snap.scells) >= 2 * (len(snap.snames) - 1)
    assert None in snap.snames and "k.é.ü" in snap.snames
    free = snap.snames.index(None)
    assert (snap.smsgs[free], snap.sfirst[free], snap.slast[free], snap.sstale[free]) == (0, 0, 0, 0)
    assert snap.smsgs[snap.snames.index("k.é.ü")] == 1
    assert encode_index(snap) == data


def test_the_index_is_written_as_its_body_then_its_crc(tmp_path):
    """(issue 31: the store writes the two parts one after the other, the body copied once)"""
    _fill(str(tmp_path))
    data = (tmp_path / "msgs" / "index.db").read_bytes()
    body, crc = encode_index_parts(decode_index(data))
    assert type(body) is bytes and body + crc == data and crc == struct.pack("<I", zlib.crc32(body))


@pytest.mark.parametrize("version", [2, 3, 4, 5])
def test_an_older_index_is_still_used(tmp_path, version):
    totals = _fill(str(tmp_path))
    path = tmp_path / "msgs" / "index.db"
    v5 = decode_index(path.read_bytes())
    convert = {2: _as_version_2, 3: _as_version_3, 4: _as_version_4, 5: _as_version_5}[version]
    old = convert(path.read_bytes())
    assert struct.unpack_from("<I", old, 4)[0] == version
    snap = decode_index(old)
    cols = ("snames", "smsgs", "sfirst", "slast", "sstale", "pos", "pss", "psh", "ts", "tss", "tsb", "sz")
    cols += ("szx", "blocks")
    assert [getattr(snap, c) for c in cols] == [getattr(v5, c) for c in cols]
    if version < 5:
        assert snap.sid.typecode == "I" and v5.sid.typecode == "B"  # (an older index keeps 4 bytes until a rebase)
    assert _live_sids(snap.sid) == _live_sids(v5.sid)
    assert snap.scells is None  # (no table before version 6: the names are hashed into a new one)
    path.write_bytes(old)
    st = _store(str(tmp_path), ManualClock())
    try:
        assert st.subjects_state(">") == totals
        assert st.load_last_msg("k.é.ü").msg == b"non-ascii"
    finally:
        st.stop()
    assert struct.unpack_from("<I", path.read_bytes(), 4)[0] == 6  # rewritten at the stop


def test_a_name_holding_the_separator_is_written_as_version_3(tmp_path):
    _fill(str(tmp_path))
    snap = decode_index((tmp_path / "msgs" / "index.db").read_bytes())
    snap.snames[0] = "odd\nname"
    data = encode_index(snap)
    assert struct.unpack_from("<I", data, 4)[0] == 3
    assert decode_index(data).snames == snap.snames


def test_truncated_subject_columns_are_refused(tmp_path):
    from natsd.store.base import CorruptState

    _fill(str(tmp_path))
    data = (tmp_path / "msgs" / "index.db").read_bytes()
    body = data[:-40]
    with pytest.raises(CorruptState):
        decode_index(body + _U32.pack(zlib.crc32(body)))
    assert os.path.exists(tmp_path / "msgs" / "index.db")
