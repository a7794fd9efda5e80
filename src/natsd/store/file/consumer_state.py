"""Consumer state on disk: ``obs/<name>/o.dat`` and the file ConsumerStore.

``o.dat`` layout (after the reference's ``encodeConsumerState``, with nanosecond timestamps and a
checksum; all integers are unsigned LEB128 varints unless noted, "z" = zigzag-encoded signed)::

    0x16                 magic (22, as the reference)
    0x81                 version: natsd v1 (the reference writes 2, whose timestamps are seconds)
    ack_floor.consumer_seq, ack_floor.stream_seq, delivered.consumer_seq, delivered.stream_seq
    n_pending
    if n_pending:  base_ts (the smallest pending timestamp, Unix ns)
                   n_pending x (z(sseq - ack_floor.stream), z(dseq - ack_floor.consumer), ts - base_ts)
                   in ascending stream sequence
    n_redelivered, then n_redelivered x (z(sseq - ack_floor.stream), count)
    crc32        u32 little-endian: zlib.crc32 of every preceding byte

The file is replaced atomically (``o.dat.tmp`` + rename; the tmp file fsynced first when the
stream syncs always and on the stream's periodic ``sync()``), so a crash leaves the previous or
the new state, never a torn one.
"""

from __future__ import annotations

import copy
import logging
import os
import shutil
import struct
import zlib

from natsd.store.base import ConsumerState, CorruptState, Pending, SequencePair, StoreClosed
from natsd.store.file.layout import CONSUMER_STATE_FILE
from natsd.store.file.meta import atomic_write, read_meta, write_meta

__all__ = ["encode_consumer_state", "decode_consumer_state", "FileConsumerStore", "MAGIC", "VERSION"]

MAGIC = 22
VERSION = 0x81
_U32 = struct.Struct("<I")
#: A state file that failed to decode is renamed ``o.dat.damaged`` (kept for inspection).
DAMAGED_SUFFIX = ".damaged"

log = logging.getLogger("natsd.store")


def _uvarint(out: bytearray, v: int) -> None:
    assert v >= 0
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _zigzag(v: int) -> int:
    return (v << 1) if v >= 0 else ((-v << 1) - 1)


def _unzigzag(v: int) -> int:
    return (v >> 1) if not v & 1 else -((v + 1) >> 1)


def encode_consumer_state(state: ConsumerState) -> bytes:
    """Encode ``state`` as documented in the module docstring."""
    out = bytearray((MAGIC, VERSION))
    af, dl = state.ack_floor, state.delivered
    for v in (af.consumer_seq, af.stream_seq, dl.consumer_seq, dl.stream_seq):
        _uvarint(out, v)
    _uvarint(out, len(state.pending))
    if state.pending:
        base = min(p.timestamp for p in state.pending.values())
        _uvarint(out, max(base, 0))
        base = max(base, 0)
        for sseq in sorted(state.pending):
            p = state.pending[sseq]
            _uvarint(out, _zigzag(sseq - af.stream_seq))
            _uvarint(out, _zigzag(p.sequence - af.consumer_seq))
            _uvarint(out, max(p.timestamp - base, 0))
    _uvarint(out, len(state.redelivered))
    for sseq in sorted(state.redelivered):
        _uvarint(out, _zigzag(sseq - af.stream_seq))
        _uvarint(out, state.redelivered[sseq])
    out += _U32.pack(zlib.crc32(out))
    return bytes(out)


def decode_consumer_state(data: bytes) -> ConsumerState:
    """Decode an ``o.dat``; CorruptState on a bad magic, version, checksum or truncation."""
    if len(data) < 6 or data[0] != MAGIC:
        raise CorruptState("consumer state: bad magic")
    if data[1] != VERSION:
        raise CorruptState(f"consumer state: unsupported version {data[1]}")
    (crc,) = _U32.unpack_from(data, len(data) - 4)
    if zlib.crc32(data[:-4]) != crc:
        raise CorruptState("consumer state: checksum mismatch")
    end = len(data) - 4
    pos = 2

    def uv() -> int:
        nonlocal pos
        shift = v = 0
        while True:
            if pos >= end:
                raise CorruptState("consumer state: truncated")
            b = data[pos]
            pos += 1
            v |= (b & 0x7F) << shift
            if b < 0x80:
                return v
            shift += 7

    afc, afs, dc, ds = uv(), uv(), uv(), uv()
    st = ConsumerState(delivered=SequencePair(dc, ds), ack_floor=SequencePair(afc, afs))
    n = uv()
    if n:
        base = uv()
        for _ in range(n):
            sseq = afs + _unzigzag(uv())
            dseq = afc + _unzigzag(uv())
            st.pending[sseq] = Pending(dseq, base + uv())
    for _ in range(uv()):
        sseq = afs + _unzigzag(uv())
        st.redelivered[sseq] = uv()
    if pos != end:
        raise CorruptState("consumer state: trailing bytes")
    return st


class FileConsumerStore:
    """A consumer's config (``meta.inf``) and state (``o.dat``) in ``obs/<name>/``.

    ``update()`` only records the state (the store keeps a reference: callers hand it over and
    must not mutate it afterwards, or must call update() again); ``flush()`` writes it if it
    changed. The owner calls ``flush()`` from its own timer (the reference writes at most ~10
    times a second); the stream store also flushes its consumers on ``sync()`` and ``stop()``.
    """

    def __init__(self, directory: str, name: str, meta: dict, key: str, fsync: bool,
                 on_close=None) -> None:
        self.name = name
        self._dir = directory
        self._key = key
        self._fsync = fsync
        self._on_close = on_close
        self._closed = False
        self._dirty = False
        existed = os.path.isdir(directory)
        os.makedirs(directory, exist_ok=True)
        if meta:
            self.meta = meta
            write_meta(directory, meta, key)
        elif existed:
            # Recovery: meta None/{} means "use what is on disk".
            self.meta = read_meta(directory, key)
        else:
            self.meta = {}
            write_meta(directory, self.meta, key)
        self._state = ConsumerState()
        #: Why the state on disk could not be used ("" when it could): the consumer is kept
        #: with its state reset (its config is in meta.inf, apart), which only causes
        #: redelivery; the owner picks a safe start (see recover_consumer).
        self.state_damaged = ""
        path = os.path.join(directory, CONSUMER_STATE_FILE)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = None
        if data is not None:
            try:
                if not data:
                    raise CorruptState("consumer state: empty file")
                self._state = decode_consumer_state(data)
            except CorruptState as exc:
                self.state_damaged = str(exc)
                # Keep the damaged bytes for the operator (the next flush writes a new o.dat).
                try:
                    os.replace(path, path + DAMAGED_SUFFIX)
                except OSError:
                    pass
                log.warning("Consumer %r: state file %s is damaged (%s, %d bytes; kept as %s): "
                            "state reset, unacknowledged messages will be redelivered",
                            name, path, exc, len(data), CONSUMER_STATE_FILE + DAMAGED_SUFFIX)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("consumer store is closed")

    def update(self, state: ConsumerState) -> None:
        self._check_open()
        self._state = state
        self._dirty = True

    def state(self) -> ConsumerState:
        """A copy of the current state."""
        self._check_open()
        return copy.deepcopy(self._state)

    def update_config(self, meta: dict) -> None:
        self._check_open()
        self.meta = meta
        write_meta(self._dir, meta, self._key)

    def flush(self, fsync: bool = False) -> None:
        """Write the state if it changed since the last flush (atomic replace: tmp + rename).
        The tmp file is fsynced before the rename when the stream syncs always, or when
        ``fsync`` (the stream's periodic ``sync()``); a crash of the process alone never loses
        a flushed state either way, since the rename is atomic."""
        if self._dirty and not self._closed:
            atomic_write(os.path.join(self._dir, CONSUMER_STATE_FILE), encode_consumer_state(self._state),
                         fsync=self._fsync or fsync)
            self._dirty = False

    def stop(self) -> None:
        if not self._closed:
            self.flush()
            self._closed = True
            if self._on_close:
                self._on_close(self)

    def delete(self) -> None:
        self._closed = True
        self._dirty = False
        shutil.rmtree(self._dir, ignore_errors=True)
        if self._on_close:
            self._on_close(self)
