"""Consumer state on disk: ``obs/<name>/o.dat`` (snapshot) + ``o.log`` (journal), and the file
ConsumerStore.

A consumer with a million pending acks must not re-encode them all twice a second on the event
loop (0.4 s per write at 150k pending before this format). So small states are still written
whole (atomic replace of ``o.dat``, on the caller's thread: cheap), and large ones as a journal
of what changed (cost follows the changes), folded into a new snapshot from time to time. Both
the journal writes and the snapshots of large states run on one worker thread, in order: the
loop only hands over the keys it touched and the sequence pairs (O(1)); the worker reads the
values from the live maps (each C-level read is atomic under the GIL, which it gives up in
``os.write``/``fsync`` and between slices).

All integers below are unsigned LEB128 varints unless noted; ``i64[k]`` is ``k`` little-endian
signed 64-bit integers (written with :mod:`array`, C speed); crc32 is ``zlib.crc32``, u32
little-endian.

``o.dat`` v2 (natsd; written by :func:`encode_consumer_state` and the checkpoint)::

    0x16 0x82            magic (22, as the reference), version
    gen                  u64 LE: journals with a generation >= gen apply on top of this
    ack_floor.consumer_seq, ack_floor.stream_seq, delivered.consumer_seq, delivered.stream_seq
    pending chunks       repeated: k, i64[k] stream seqs, i64[2k] (consumer seq, timestamp ns)
                         pairs; k = 0 ends them (a checkpoint writes one chunk per slice read)
    redelivered chunks   repeated: k, i64[k] stream seqs, i64[k] counts; k = 0 ends them
    crc32                of every preceding byte

``o.dat`` v1 (older natsd versions; still read, and rewritten as v2 when opened)::

    0x16 0x81, then the four sequences, n_pending, [base_ts, n_pending x (zigzag(sseq -
    ack_floor.stream), zigzag(dseq - ack_floor.consumer), ts - base_ts)], n_redelivered x
    (zigzag(sseq - ack_floor.stream), count), crc32

``o.log`` (and ``o.log.old`` while a checkpoint runs)::

    0x16 0x83            magic, version
    gen                  u64 LE: this journal's generation
    records              repeated: u32 LE body length, body, crc32 of the body
    body                 the four sequences (absolute), then
                         pending set:     k, i64[k] stream seqs, i64[2k] (consumer seq, ts) pairs
                         pending removed: k, i64[k] stream seqs
                         redelivered set: k, i64[k] stream seqs, i64[k] counts
                         redelivered removed: k, i64[k] stream seqs

Every record holds entries' values as they are (not increments), so replaying a record twice
gives the same state. Recovery reads ``o.dat``, then each journal whose generation is at least
the snapshot's in generation order; a torn or damaged record ends its journal (what came before
it is kept, the rest is reported). Checkpoint: the journal is renamed ``o.log.old`` and a new
generation starts in ``o.log``; the worker writes ``o.dat.tmp`` with the new generation from the
live maps (a "fuzzy" snapshot: entries changed while it reads are also in the new journal, which
recovery applies on top), fsyncs it and renames it over ``o.dat``, then removes ``o.log.old``.
A crash at any point leaves a snapshot and the journals it needs. Whole writes (small states,
a reset, migration) replace ``o.dat`` atomically with a new generation and remove the journals.

Encrypted store (natsd.store.file.encryption): the consumer has its own key (``meta.key``,
context ``"<stream>.<consumer>"``), ``meta.inf`` is sealed with it, and ``o.dat``, ``o.log`` (and
``o.log.old``) each start with a random nonce (24 bytes for chachapoly, 16 for aes) followed by
the bytes above XORed with the consumer key's stream cipher under that nonce from offset 0:
the journal is appended to and the checkpoint written as it goes, which a stream cipher allows
and a sealed whole would not. Every file gets a fresh nonce, so no key stream is used twice;
the CRCs above still detect damage and torn tails on the decrypted bytes.
"""

from __future__ import annotations

import logging
import os
import struct
import sys
import threading
import zlib
from array import array
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain, islice
from typing import TYPE_CHECKING, Callable

from natsd.atomicfile import read_whole
from natsd.store.base import ConsumerDelta, ConsumerState, CorruptState, Pending, SequencePair, StoreClosed
from natsd.store.file.keyfiles import open_asset_key
from natsd.store.file.layout import CONSUMER_STATE_FILE
from natsd.store.file.meta import atomic_write, fsync_dir, read_meta, write_meta
from natsd.varint import append_uvarint, read_uvarint

if TYPE_CHECKING:
    from natsd.store.file.consumer_index import ConsumerIndex
    from natsd.store.file.encryption import AccountKeys, Keystream

__all__ = [
    "encode_consumer_state",
    "encode_consumer_state_v1",
    "decode_consumer_state",
    "decode_snapshot",
    "encode_delta",
    "FileConsumerStore",
    "MAGIC",
    "VERSION",
    "VERSION_V1",
    "JOURNAL_VERSION",
    "JOURNAL_FILE",
    "JOURNAL_OLD_FILE",
]

MAGIC = 22
VERSION_V1 = 0x81
VERSION = 0x82
JOURNAL_VERSION = 0x83
JOURNAL_FILE = "o.log"
JOURNAL_OLD_FILE = "o.log.old"
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
#: A state file that failed to decode is renamed ``o.dat.damaged`` (kept for inspection).
DAMAGED_SUFFIX = ".damaged"
#: A checkpoint starts when the journal outgrows both this and twice the last snapshot, so
#: the snapshot work stays proportional to the journal written (amortised O(1) per change).
JOURNAL_MIN_BYTES = 8 * 1024 * 1024
#: Entries a checkpoint reads from the live maps at once (a short hold of the GIL each).
CHECKPOINT_SLICE = 16384

_LITTLE = sys.byteorder == "little"

log = logging.getLogger("natsd.store")

# The system calls that write consumer state, looked up per call so that fault injection
# (natsd.testing's disk-full and slow-fsync faults) reaches them, as block._pwrite/_fsync.
_write = os.write
_fsync = os.fsync


# -- helpers --------------------------------------------------------------------------------------

_uvarint = append_uvarint


def _zigzag(v: int) -> int:
    return (v << 1) if v >= 0 else ((-v << 1) - 1)


def _unzigzag(v: int) -> int:
    return (v >> 1) if not v & 1 else -((v + 1) >> 1)


def _i64(values) -> bytes:
    a = array("q", values)
    if not _LITTLE:
        a.byteswap()
    return a.tobytes()


def copy_state(st: ConsumerState) -> ConsumerState:
    """A copy of ``st`` sharing nothing mutable (what ``copy.deepcopy`` gave, at a fraction of the
    cost: deepcopy's reflection was a third of recovering a consumer, issue 31)."""
    return ConsumerState(
        SequencePair(st.delivered.consumer_seq, st.delivered.stream_seq),
        SequencePair(st.ack_floor.consumer_seq, st.ack_floor.stream_seq),
        {seq: Pending(p.sequence, p.timestamp) for seq, p in st.pending.items()},
        dict(st.redelivered),
    )


class _Reader:
    """Varints and i64 arrays from ``data[pos:end]``; CorruptState on any overrun."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes, pos: int, end: int) -> None:
        self.data, self.pos, self.end = data, pos, end

    def uv(self) -> int:
        try:
            v, pos = read_uvarint(self.data, self.pos, self.end)
        except ValueError:
            raise CorruptState("consumer state: bad varint") from None
        if pos < 0:
            raise CorruptState("consumer state: truncated")
        self.pos = pos
        return v

    def i64(self, k: int) -> array:
        n = 8 * k
        if self.pos + n > self.end:
            raise CorruptState("consumer state: truncated")
        a = array("q")
        a.frombytes(self.data[self.pos : self.pos + n])
        if not _LITTLE:
            a.byteswap()
        self.pos += n
        return a

    def seqs(self) -> tuple[SequencePair, SequencePair]:
        afc, afs, dc, ds = self.uv(), self.uv(), self.uv(), self.uv()
        return SequencePair(dc, ds), SequencePair(afc, afs)


def _pairs(out: bytearray, delivered: SequencePair, ack_floor: SequencePair) -> None:
    for v in (ack_floor.consumer_seq, ack_floor.stream_seq, delivered.consumer_seq, delivered.stream_seq):
        _uvarint(out, v)


def _pend_chunk(out: bytearray, seqs: list, vals: list) -> None:
    """k, i64[k] seqs, i64[2k] (dseq, ts) pairs; ``vals`` are 2-sequences (Pending-like
    lists/tuples)."""
    _uvarint(out, len(seqs))
    if seqs:
        out += _i64(seqs)
        out += _i64(chain.from_iterable(vals))


def _read_pend_chunk(r: _Reader, into: dict) -> int:
    k = r.uv()
    if k:
        seqs = r.i64(k)
        flat = r.i64(2 * k)
        into.update(zip(seqs, map(Pending, flat[0::2], flat[1::2])))
    return k


def _read_rdc_chunk(r: _Reader, into: dict) -> int:
    k = r.uv()
    if k:
        seqs = r.i64(k)
        into.update(zip(seqs, r.i64(k)))
    return k


# -- snapshot -------------------------------------------------------------------------------------


def encode_consumer_state(state: ConsumerState, gen: int = 0) -> bytes:
    """A v2 ``o.dat`` of ``state`` (module docstring), journals from generation ``gen`` on top."""
    out = bytearray((MAGIC, VERSION))
    out += _U64.pack(gen)
    _pairs(out, state.delivered, state.ack_floor)
    seqs = sorted(state.pending)
    pend = state.pending
    _pend_chunk(out, seqs, [(pend[s].sequence, pend[s].timestamp) for s in seqs])
    if seqs:
        _uvarint(out, 0)
    rseqs = sorted(state.redelivered)
    _uvarint(out, len(rseqs))
    if rseqs:
        out += _i64(rseqs)
        out += _i64(state.redelivered[s] for s in rseqs)
        _uvarint(out, 0)
    out += _U32.pack(zlib.crc32(out))
    return bytes(out)


def encode_consumer_state_v1(state: ConsumerState) -> bytes:
    """The v1 ``o.dat`` (only to test that old files are still read)."""
    out = bytearray((MAGIC, VERSION_V1))
    af = state.ack_floor
    _pairs(out, state.delivered, af)
    _uvarint(out, len(state.pending))
    if state.pending:
        base = max(min(p.timestamp for p in state.pending.values()), 0)
        _uvarint(out, base)
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


def _check_crc(data: bytes, what: str) -> int:
    if len(data) < 6 or data[0] != MAGIC:
        raise CorruptState(f"{what}: bad magic")
    (crc,) = _U32.unpack_from(data, len(data) - 4)
    if zlib.crc32(memoryview(data)[:-4]) != crc:
        raise CorruptState(f"{what}: checksum mismatch")
    return len(data) - 4


def _decode_v1(data: bytes, end: int) -> ConsumerState:
    r = _Reader(data, 2, end)
    dl, af = r.seqs()
    st = ConsumerState(delivered=dl, ack_floor=af)
    n = r.uv()
    if n:
        base = r.uv()
        for _ in range(n):
            sseq = af.stream_seq + _unzigzag(r.uv())
            dseq = af.consumer_seq + _unzigzag(r.uv())
            st.pending[sseq] = Pending(dseq, base + r.uv())
    for _ in range(r.uv()):
        sseq = af.stream_seq + _unzigzag(r.uv())
        st.redelivered[sseq] = r.uv()
    if r.pos != end:
        raise CorruptState("consumer state: trailing bytes")
    return st


def decode_snapshot(data: bytes) -> tuple[int, ConsumerState]:
    """``(generation, state)`` of an ``o.dat`` of either version (v1: generation 0);
    CorruptState on a bad magic, version, checksum or truncation."""
    end = _check_crc(data, "consumer state")
    if data[1] == VERSION_V1:
        return 0, _decode_v1(data, end)
    if data[1] != VERSION:
        raise CorruptState(f"consumer state: unsupported version {data[1]}")
    if end < 10:
        raise CorruptState("consumer state: truncated")
    (gen,) = _U64.unpack_from(data, 2)
    r = _Reader(data, 10, end)
    dl, af = r.seqs()
    st = ConsumerState(delivered=dl, ack_floor=af)
    while _read_pend_chunk(r, st.pending):
        pass
    while _read_rdc_chunk(r, st.redelivered):
        pass
    if r.pos != end:
        raise CorruptState("consumer state: trailing bytes")
    return gen, st


def decode_consumer_state(data: bytes) -> ConsumerState:
    """Decode an ``o.dat`` (v1 or v2)."""
    return decode_snapshot(data)[1]


# -- journal --------------------------------------------------------------------------------------


def journal_header(gen: int) -> bytes:
    return bytes((MAGIC, JOURNAL_VERSION)) + _U64.pack(gen)


def encode_delta(d: ConsumerDelta) -> bytes:
    """One journal record (length, body, crc32) of ``d``."""
    body = bytearray()
    _pairs(body, d.delivered, d.ack_floor)
    _pend_chunk(body, d.pend_set, d.pend_vals)
    _uvarint(body, len(d.pend_del))
    if d.pend_del:
        body += _i64(d.pend_del)
    _uvarint(body, len(d.rdc_set))
    if d.rdc_set:
        body += _i64(d.rdc_set)
        body += _i64(d.rdc_vals)
    _uvarint(body, len(d.rdc_del))
    if d.rdc_del:
        body += _i64(d.rdc_del)
    return _U32.pack(len(body)) + bytes(body) + _U32.pack(zlib.crc32(body))


def _apply_journal(data: bytes, st: ConsumerState, name: str) -> tuple[int, int]:
    """Apply the records of one journal file (after its header) to ``st``; returns
    ``(records applied, valid length)``. A torn or damaged record ends the replay."""
    pos, n, size = 10, 0, len(data)
    while pos < size:
        if pos + 4 > size:
            break
        (blen,) = _U32.unpack_from(data, pos)
        if pos + 8 + blen > size:
            break
        body = data[pos + 4 : pos + 4 + blen]
        (crc,) = _U32.unpack_from(data, pos + 4 + blen)
        if zlib.crc32(body) != crc:
            break
        try:
            r = _Reader(body, 0, blen)
            dl, af = r.seqs()
            pend: dict = {}
            _read_pend_chunk(r, pend)
            pdel = r.i64(r.uv())
            rdc: dict = {}
            _read_rdc_chunk(r, rdc)
            rdel = r.i64(r.uv())
        except CorruptState:
            break
        st.delivered, st.ack_floor = dl, af
        sp, sr = st.pending, st.redelivered
        for s in pdel:
            sp.pop(s, None)
        sp.update(pend)
        for s in rdel:
            sr.pop(s, None)
        sr.update(rdc)
        pos += 8 + blen
        n += 1
    if pos < size:
        log.warning(
            "Consumer %r: journal %s damaged or torn after %d records (%d bytes dropped): "
            "the state is older there, which only causes redelivery",
            name,
            JOURNAL_FILE,
            n,
            size - pos,
        )
    return n, pos


# -- the store ------------------------------------------------------------------------------------

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


#: GIL switch interval once the worker thread exists. While the worker runs Python code, the
#: event loop waits up to this long to get the GIL back after each system call it makes (the
#: "convoy" effect); CPython's 5 ms default turned a loop turn with a dozen socket calls into
#: ~100 ms of request/reply latency during a checkpoint of a million entries.
SWITCH_INTERVAL = 0.0005


def _worker() -> ThreadPoolExecutor:
    """One thread for every consumer's large state writes, in order."""
    global _executor
    with _executor_lock:
        if _executor is None:
            if sys.getswitchinterval() > SWITCH_INTERVAL:
                sys.setswitchinterval(SWITCH_INTERVAL)
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="natsd-consumer-state")
        return _executor


class FileConsumerStore:
    """A consumer's config (``meta.inf``) and state (``o.dat`` + ``o.log``) in ``obs/<name>/``.

    ``update()`` records a whole state (the store keeps a reference: callers hand it over);
    ``append_delta()`` records what changed since the last one; ``flush()`` writes: a whole
    state replaces ``o.dat``, deltas are appended to the journal (and may start a checkpoint in
    the worker thread). The owner calls ``flush()`` from its own timer (the reference writes at
    most ~10 times a second); the stream store also flushes its consumers on ``sync()`` and
    ``stop()``.
    """

    def __init__(
        self,
        directory: str,
        name: str,
        meta: dict | None,
        key: str,
        fsync: bool,
        on_close=None,
        keys: AccountKeys | None = None,
        index: ConsumerIndex | None = None,
    ) -> None:
        self.name = name
        # The stream's obs.idx (plain streams): told of every meta write and of the delete.
        self._index = index
        self._dir = directory
        self._key = key
        self._fsync = fsync
        self._on_close = on_close
        self._closed = False
        self._dirty = False
        self._full: ConsumerState | None = None  # a whole state to write
        self._deltas: list[ConsumerDelta] = []
        self._source: Callable[[], tuple] | None = None
        self._jfd = -1  # the open journal (o.log), -1 = none yet
        self._jbytes = 0  # its size
        self._snap_bytes = 0  # size of the last snapshot written
        self._ckpt: Future | None = None  # the last job queued on the worker thread
        self._ckpt_token = 0  # bumped by whole writes: a stale checkpoint is dropped
        self._lock = threading.Lock()  # a checkpoint's rename vs. a whole write
        self._journal_failed = False  # a journal write failed: the next flush writes the whole state
        self._failing = False  # a state write failed and none worked since (logged once)
        self._jks: Keystream | None = None  # the open journal's key stream (encrypted store)
        existed = self._open_directory(keys)
        if meta or not existed:
            self.meta = meta or {}
            # (a new plain consumer's directory was made above: nothing to compare or replace)
            write_meta(directory, self.meta, key, fsync=fsync, asset=self._asset, new=not existed and keys is None)
            if index is not None:
                index.noted(name, self.meta)
        else:
            # Recovery: meta None/{} means "use what is on disk".
            self.meta = read_meta(directory, key, self._asset)
        #: Why the state on disk could not be used ("" when it could): the consumer is kept
        #: with its state reset (its config is in meta.inf, apart), which only causes
        #: redelivery; the owner picks a safe start (see recover_consumer).
        self.state_damaged = ""
        self._gen = 0  # generation of the current journal
        # (a directory made now holds no state file to look for)
        self._state = self._load() if existed else ConsumerState()

    def _open_directory(self, keys: AccountKeys | None) -> bool:
        """Open the consumer's key (a key that does not open it stops here, nothing written) and
        make its directory when there is none; returns whether it existed.

        A new plain consumer (no directory, no keys) has no key, meta or state to look for: its
        directory is made with one ``mkdir`` and :meth:`__init__` writes its meta files in place
        (``write_meta(new=True)``) and loads no state. That is 10 of a create's 20 system calls
        (issue 31). A crash before the create answered leaves at worst a meta.inf without its
        meta.sum, as the two renames of a replacing write could."""
        directory = self._dir
        existed = os.path.isdir(directory)
        if keys is None and not existed:
            self._asset = None
            try:
                os.mkdir(directory)
            except FileNotFoundError:  # (obs/ itself is new)
                os.makedirs(directory)
            return False
        self._asset = open_asset_key(
            directory, keys, f"{self._key}.{self.name}", f"consumer {self._key!r} > {self.name!r}", fsync=self._fsync
        )
        if not existed:
            os.makedirs(directory, exist_ok=True)
        return existed

    # -- paths and loading ---------------------------------------------------------------------
    def _path(self, name: str) -> str:
        return os.path.join(self._dir, name)

    def _file_keystream(self) -> tuple[bytes, Keystream | None]:
        """A new file's nonce and key stream (encrypted store; see the module docstring)."""
        asset = self._asset
        if asset is None:
            return b"", None
        nonce = os.urandom(asset.cipher.nonce_size)
        return nonce, asset.keystream(nonce)

    def _read_file(self, path: str) -> bytes:
        """A state file's plain bytes (FileNotFoundError when absent)."""
        data = read_whole(path)  # (four system calls: a restart reads every consumer's o.dat)
        asset = self._asset
        if asset is None:
            return data
        ns = asset.cipher.nonce_size
        return asset.keystream(data[:ns]).xor(data[ns:], 0) if len(data) > ns else b""

    def _load(self) -> ConsumerState:
        path = self._path(CONSUMER_STATE_FILE)
        try:
            data = self._read_file(path)
        except FileNotFoundError:
            data = None
        st = ConsumerState()
        gen = 0
        rewrite = False
        if data is not None:
            try:
                if not data:
                    raise CorruptState("consumer state: empty file")
                gen, st = decode_snapshot(data)
                rewrite = data[1] == VERSION_V1  # migrate to v2 now
                self._snap_bytes = len(data)
            except CorruptState as exc:
                self.state_damaged = str(exc)
                # Keep the damaged bytes for the operator (a new o.dat is written below).
                try:
                    os.replace(path, path + DAMAGED_SUFFIX)
                except OSError:
                    pass
                log.warning(
                    "Consumer %r: state file %s is damaged (%s, %d bytes; kept as %s): "
                    "state reset, unacknowledged messages will be redelivered",
                    self.name,
                    path,
                    exc,
                    len(data),
                    CONSUMER_STATE_FILE + DAMAGED_SUFFIX,
                )
                st, gen = ConsumerState(), 0
        journals = []
        for jname in (JOURNAL_OLD_FILE, JOURNAL_FILE):
            try:
                jdata = self._read_file(self._path(jname))
            except FileNotFoundError:
                continue
            rewrite = True
            if len(jdata) < 10 or jdata[0] != MAGIC or jdata[1] != JOURNAL_VERSION:
                log.warning(
                    "Consumer %r: journal %s has a bad header (%d bytes): ignored", self.name, jname, len(jdata)
                )
                continue
            (jgen,) = _U64.unpack_from(jdata, 2)
            journals.append((jgen, jname, jdata))
        if not self.state_damaged:
            for jgen, _jname, jdata in sorted(journals, key=lambda j: j[0]):
                if jgen >= gen:
                    _apply_journal(jdata, st, self.name)
        if journals:
            gen = max(gen, max(j[0] for j in journals))
        if st.pending and any(a > b for a, b in zip(st.pending, islice(st.pending, 1, None))):
            st.pending = dict(sorted(st.pending.items()))  # ascending stream sequence, as written
        self._gen = gen
        if rewrite or self.state_damaged:
            # One whole snapshot now (new generation, journals removed): later journals start
            # from a single clean file.
            self._write_whole(st)
        return st

    # -- the ConsumerStore protocol ------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("consumer store is closed")

    def update(self, state: ConsumerState) -> None:
        self._check_open()
        self._state = state
        self._full = state
        self._deltas.clear()
        self._dirty = True

    def append_delta(self, delta: ConsumerDelta, source: Callable[[], tuple]) -> None:
        """Record a delta. ``pend_vals``/``rdc_vals`` None means "lazy": ``pend_set``/``rdc_set``
        are the keys touched, and the worker thread reads their values from the live maps when
        it writes (values at least as new as the sequence pairs, which recovery tolerates: an
        entry newer than the floors is only redelivered), so the loop does no per-entry work."""
        self._check_open()
        self._deltas.append(delta)
        self._source = source
        self._dirty = True

    def state(self) -> ConsumerState:
        """A copy of the current state (after deltas: read back from disk, so call it rarely:
        recovery and tests)."""
        self._check_open()
        if self._source is not None or self._deltas:
            self.flush()
            self.wait()
            self._state = self._load()
            self._source = None
        return copy_state(self._state)

    def update_config(self, meta: dict) -> None:
        self._check_open()
        self.meta = meta
        write_meta(self._dir, meta, self._key, fsync=self._fsync, asset=self._asset)
        if self._index is not None:
            self._index.noted(self.name, meta)  # (after the write: see natsd.store.file.consumer_index)

    def flush(self, fsync: bool = False) -> None:
        """Write what changed since the last flush: a whole state replaces ``o.dat`` (tmp +
        rename), deltas are appended to ``o.log``. fsync when the stream syncs always or when
        ``fsync`` (the stream's periodic ``sync()``); a crash of the process alone never loses
        a flushed state either way."""
        if self._closed:
            return
        if self._journal_failed and self._source is not None:
            # A journal write failed (the worker thread): the file may end in a torn record
            # that would hide every later one at recovery. Write the whole state instead (it
            # drops the journals), as nats-server writes its whole state on the next flush.
            pend, rdc, dl, af = self._source()
            self._full = ConsumerState(dl, af, {s: Pending(v[0], v[1]) for s, v in list(pend.items())}, dict(rdc))
            self._deltas.clear()
            self._dirty = True
        if not self._dirty:
            if fsync and self._jfd >= 0:
                try:
                    _fsync(self._jfd)
                except OSError as e:
                    self._write_failed(e)
            return
        if self._full is not None:
            st, self._full = self._full, None
            try:
                self._write_whole(st, fsync=self._fsync or fsync)
            except OSError as e:
                # nats-server's consumer store: the old state stays on disk (the write went to
                # a temporary file), the state stays dirty and the next flush tries again; the
                # consumer goes on in memory (a crash meanwhile means redelivery, nothing lost).
                self._full = st
                self._write_failed(e)
                return
            self._journal_failed = False
            self._write_ok()
        if self._deltas:
            deltas, self._deltas = self._deltas, []
            maps = self._source()[:2] if self._source is not None else ({}, {})
            self._submit(self._write_deltas, deltas, maps, self._fsync or fsync)
        elif fsync:
            self._submit(self._fsync_journal)
        self._dirty = False

    def _submit(self, fn, *args) -> None:
        """Journal writes and checkpoints run in order on the worker thread."""
        self._ckpt = _worker().submit(self._guard, fn, args)

    def _guard(self, fn, args) -> None:
        try:
            fn(*args)
        except OSError as e:
            if fn != self._fsync_journal:
                # Whatever the journal holds past its last whole record is not to be appended
                # to: the next flush writes the whole state (see flush).
                self._close_journal()
                self._journal_failed = True
            self._write_failed(e)
        else:
            if not self._journal_failed:
                self._write_ok()

    def _write_failed(self, e: OSError) -> None:
        """Logged once per outage (a full disk fails every write until space returns)."""
        (log.debug if self._failing else log.error)(
            "Consumer %r: writing its state failed: %s (older state on disk: redelivery after a crash; "
            "written again with the next flush)",
            self.name,
            e,
        )
        self._failing = True

    def _write_ok(self) -> None:
        if self._failing:
            self._failing = False
            log.info("Consumer %r: its state is written again", self.name)

    def _fsync_journal(self) -> None:
        if self._jfd >= 0:
            _fsync(self._jfd)

    def _write_deltas(self, deltas: list, maps: tuple, fsync: bool) -> None:
        """Worker thread: resolve lazy deltas from the live maps, append them to the journal."""
        pend, rdc = maps
        for d in deltas:
            if d.pend_vals is None:
                keys = list(d.pend_set)
                vals = list(map(pend.get, keys))
                d.pend_set = [k for k, v in zip(keys, vals) if v is not None]
                d.pend_del = [k for k, v in zip(keys, vals) if v is None]
                d.pend_vals = [v for v in vals if v is not None]
            if d.rdc_vals is None:
                keys = list(d.rdc_set)
                vals = list(map(rdc.get, keys))
                d.rdc_set = [k for k, v in zip(keys, vals) if v is not None]
                d.rdc_del = [k for k, v in zip(keys, vals) if v is None]
                d.rdc_vals = [v for v in vals if v is not None]
        self._append(b"".join(map(encode_delta, deltas)), fsync)

    def wait(self) -> None:
        """Wait until the worker thread has written everything queued (tests, stop, delete,
        whole writes)."""
        f = self._ckpt
        if f is not None:
            try:
                f.result()
            except Exception:  # logged by the worker
                pass
            self._ckpt = None

    def stop(self) -> None:
        if not self._closed:
            self.flush()
            self.wait()
            self._close_journal()
            self._closed = True
            if self._on_close:
                self._on_close(self)

    def _abandon(self) -> None:
        """Close without writing what is still in memory: what a ``kill -9`` leaves behind
        (natsd.testing's crash; the stream store's ``_abandon`` calls it)."""
        if self._closed:
            return
        self._closed = True
        self._dirty = False
        self.wait()  # a write the worker already started reaches the OS, as it would in a crash
        self._close_journal()
        if self._on_close:
            self._on_close(self)

    def delete(self) -> None:
        self._closed = True
        self._dirty = False
        self._ckpt_token += 1
        self.wait()
        self._close_journal()
        import shutil  # (shutil, with its compression modules, loads with the first delete: ADR 0015)

        shutil.rmtree(self._dir, ignore_errors=True)
        if self._index is not None:
            self._index.deleted(self.name)
        if self._on_close:
            self._on_close(self)

    # -- writing -------------------------------------------------------------------------------
    def _close_journal(self) -> None:
        if self._jfd >= 0:
            os.close(self._jfd)
            self._jfd = -1
        self._jbytes = 0

    def _write_whole(self, st: ConsumerState, fsync: bool = True) -> None:
        """Replace o.dat with ``st`` under a new generation and drop the journals."""
        self._ckpt_token += 1
        self.wait()
        self._close_journal()
        self._gen += 1
        data = encode_consumer_state(st, self._gen)
        nonce, ks = self._file_keystream()
        with self._lock:
            atomic_write(
                self._path(CONSUMER_STATE_FILE),
                data if ks is None else nonce + ks.xor(data, 0),
                fsync=fsync,
                write=_write,
                sync=_fsync,
            )
            for jname in (JOURNAL_FILE, JOURNAL_OLD_FILE):
                try:
                    os.unlink(self._path(jname))
                except FileNotFoundError:
                    pass
        self._snap_bytes = len(data)

    def _append(self, data: bytes, fsync: bool) -> None:
        if self._jfd < 0:
            path = self._path(JOURNAL_FILE)
            self._jfd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            hdr = journal_header(self._gen)
            nonce, self._jks = self._file_keystream()
            _write(self._jfd, hdr if self._jks is None else nonce + self._jks.xor(hdr, 0))
            self._jbytes = len(hdr)  # (the plain offset: the nonce is not counted)
            fsync_dir(self._dir)
        if self._jks is not None:
            data = self._jks.xor(data, self._jbytes)
        view = memoryview(data)
        while view:
            n = _write(self._jfd, view)
            view = view[n:]
        self._jbytes += len(data)
        if fsync:
            _fsync(self._jfd)
        if self._jbytes > max(JOURNAL_MIN_BYTES, 2 * self._snap_bytes) and self._source is not None:
            self._checkpoint()

    def _checkpoint(self) -> None:
        """Worker thread: fold the journal into a new snapshot. The journal becomes
        ``o.log.old``; the next delta opens a new ``o.log`` one generation up. (Deltas queued
        meanwhile wait: one worker thread keeps every write in order.)"""
        if os.path.exists(self._path(JOURNAL_OLD_FILE)):
            return  # a previous checkpoint failed: the journals stay until a whole write
        self._close_journal()
        os.replace(self._path(JOURNAL_FILE), self._path(JOURNAL_OLD_FILE))
        self._gen += 1
        pend, rdc, dl, af = self._source()  # type: ignore[misc]
        self._write_checkpoint(self._ckpt_token, self._gen, pend, rdc, dl, af)

    def _write_checkpoint(
        self, token: int, gen: int, pend: dict, rdc: dict, dl: SequencePair, af: SequencePair
    ) -> None:
        """Worker thread: the fuzzy snapshot (module docstring), read from the live maps a slice
        at a time (each slice one short hold of the GIL) and written as it goes."""
        path = self._path(CONSUMER_STATE_FILE)
        tmp = path + ".ckpt"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                crc = 0
                size = 0
                nonce, ks = self._file_keystream()
                if nonce:
                    _write(fd, nonce)

                def emit(b: bytes) -> None:
                    nonlocal crc, size
                    crc = zlib.crc32(b, crc)
                    if ks is not None:
                        b = ks.xor(b, size)
                    size += len(b)
                    view = memoryview(b)
                    while view:
                        view = view[_write(fd, view) :]

                head = bytearray((MAGIC, VERSION))
                head += _U64.pack(gen)
                _pairs(head, dl, af)
                emit(bytes(head))
                for table, is_pend in ((pend, True), (rdc, False)):
                    keys = list(table)
                    for i in range(0, len(keys), CHECKPOINT_SLICE):
                        if token != self._ckpt_token:
                            raise _Stale()
                        chunk = keys[i : i + CHECKPOINT_SLICE]
                        vals = list(map(table.get, chunk))
                        present = [k for k, v in zip(chunk, vals) if v is not None]
                        out = bytearray()
                        if is_pend:
                            _pend_chunk(out, present, [(v[0], v[1]) for v in vals if v is not None])
                        else:
                            _uvarint(out, len(present))
                            if present:
                                out += _i64(present)
                                out += _i64(v for v in vals if v is not None)
                        if present:
                            emit(bytes(out))
                    emit(b"\x00")
                tail = _U32.pack(crc)
                _write(fd, tail if ks is None else ks.xor(tail, size))
                _fsync(fd)
            finally:
                os.close(fd)
            with self._lock:
                if token != self._ckpt_token:
                    raise _Stale()
                os.replace(tmp, path)
                try:
                    os.unlink(self._path(JOURNAL_OLD_FILE))
                except FileNotFoundError:
                    pass
                fsync_dir(self._dir)
                self._snap_bytes = size + 4
        except _Stale:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        except OSError as e:
            log.error("Consumer %r: checkpoint of its state failed: %s (the journal is kept)", self.name, e)
            try:
                os.unlink(tmp)
            except OSError:
                pass


class _Stale(Exception):
    """A whole write or a delete superseded the checkpoint in progress."""
