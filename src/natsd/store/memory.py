"""In-memory stream and consumer stores (``storage: memory``).

All bookkeeping (sequences, limits, per-subject state, deletes, expiry) is the shared
:class:`natsd.store.seqindex.IndexedStreamStore`; this module only keeps the payloads: a dict
sequence -> payload bytes and, for messages with headers, sequence -> header bytes. Plain bytes
are not tracked by the garbage collector, so a large memory stream costs no GC time (a
:class:`StoreMsg` per message would); StoreMsg objects are built on read. Nothing survives a
restart, as in the reference.
"""

from __future__ import annotations

import copy
from itertools import compress, repeat
from typing import Callable, Iterable, Sequence

from natsd.store.seqindex import IndexedStreamStore
from natsd.store.base import (
    ConsumerDelta,
    ConsumerState,
    MsgRun,
    Pending,
    SequencePair,
    StoreClosed,
    StoreConfig,
    StoreMsg,
)

__all__ = ["MemoryStreamStore", "MemoryConsumerStore", "mem_store_msg_size"]

_ZERO = 0  # live index positions are >= 0 (``_ZERO.__le__`` tests that in C)


def mem_store_msg_size(subject: str, hdr: bytes | None, msg: bytes) -> int:
    """Accounted size of one message, as the reference's ``memStoreMsgSize``:
    subject + headers + payload + 16 (sequence and timestamp)."""
    return len(subject) + (len(hdr) if hdr else 0) + len(msg) + 16


class MemoryStreamStore(IndexedStreamStore):
    """A stream kept in memory; see :class:`natsd.store.base.StreamStore`."""

    msg_size = staticmethod(mem_store_msg_size)
    # Every position is 0 (the payloads are found by sequence): -1 / -2 when absent, one byte.
    POS_TYPECODE = "b"

    def __init__(self, config: StoreConfig, clock) -> None:
        self._payloads: dict[int, bytes] = {}
        self._hdrs: dict[int, bytes] = {}
        self._consumers: dict[str, MemoryConsumerStore] = {}
        super().__init__(config, clock)

    # -- payload hooks ------------------------------------------------------------------------
    def _write(self, seq: int, ts: int, subject: str, hdr: bytes | None, msg: bytes, ttl_ns: int) -> int:
        # bytes() makes sure a caller's reusable buffer (bytearray/memoryview) is not aliased.
        self._payloads[seq] = msg if type(msg) is bytes else bytes(msg)
        if hdr:
            self._hdrs[seq] = bytes(hdr)
        return 0

    def _write_run(
        self, seq: int, ts: int, subject: str, msgs: list[bytes], start: int, hdr_len: int = 0
    ) -> tuple[int, Iterable[int]]:
        # All at once (bytes() of a bytes object is that object; other buffers are copied;
        # slices are new bytes).
        k = len(msgs) - start
        seqs = range(seq, seq + k)
        if hdr_len:
            rest = msgs[start:]
            self._hdrs.update(zip(seqs, [bytes(m[:hdr_len]) for m in rest]))
            self._payloads.update(zip(seqs, [bytes(m[hdr_len:]) for m in rest]))
        else:
            self._payloads.update(zip(seqs, map(bytes, msgs[start:])))
        return k, repeat(0, k)

    def _write_many(
        self, seq: int, ts: int, subjects: list[str], msgs: list[bytes], start: int
    ) -> tuple[int, Iterable[int], list[int]]:
        # All at once, as _write_run (subjects live in the index).
        k = len(msgs) - start
        rest = msgs[start:]
        self._payloads.update(zip(range(seq, seq + k), map(bytes, rest)))
        size = self.msg_size
        return k, repeat(0, k), [size(s, None, m) for s, m in zip(subjects[start:], rest)]

    def _read(self, seq: int, pos: int) -> StoreMsg:
        i = seq - self._base
        return StoreMsg(
            self._snames[self._sid[i]],
            self._hdrs.get(seq) if self._hdrs else None,
            self._payloads[seq],
            seq,
            self._ts_at(i),
        )

    def load_run(self, start_seq: int, max_msgs: int) -> MsgRun:
        """The next ``max_msgs`` live messages from ``start_seq`` (see
        :meth:`natsd.store.base.StreamStore.load_run`), gathered column-wise with C-level
        ``map``/``compress`` over the index arrays and the payload dicts: no per-message
        bytecode."""
        self._check_open()
        base = self._base
        pos = self._pos
        i = max(start_seq, self._first) - base
        n = len(pos)
        seqs: list[int] = []
        while len(seqs) < max_msgs and i < n:
            window = pos[i : i + max_msgs - len(seqs)]
            if min(window) >= 0:  # every sequence live (the usual case)
                seqs += range(base + i, base + i + len(window))
            else:
                seqs += compress(range(base + i, base + i + len(window)), map(_ZERO.__le__, window))
            i += len(window)
        if not seqs:
            return MsgRun([], [], [], None, [])
        idx = [s - base for s in seqs] if seqs[-1] - seqs[0] + 1 != len(seqs) else None
        sids: Sequence[int]
        if idx is None:
            lo = seqs[0] - base
            tss = self._ts_list(lo, lo + len(seqs))
            sids = self._sid[lo : lo + len(seqs)]
        else:
            tss = list(map(self._ts_at, idx))
            sids = list(map(self._sid.__getitem__, idx))
        names = self._snames
        sid0 = sids[0]
        if sids.count(sid0) == len(sids):
            subjects = [names[sid0].encode()] * len(seqs)
        else:
            subjects = list(map(str.encode, map(names.__getitem__, sids)))
        hdrs = None
        if self._hdrs:
            hdrs = list(map(self._hdrs.get, seqs))
            if hdrs.count(None) == len(hdrs):
                hdrs = None
        return MsgRun(seqs, tss, subjects, hdrs, list(map(self._payloads.__getitem__, seqs)))

    def _drop(self, seq: int, pos: int, size: int, erase: bool, front: bool) -> None:
        del self._payloads[seq]
        if self._hdrs:
            self._hdrs.pop(seq, None)

    def _drop_all(self, first: int) -> None:
        self._payloads.clear()
        self._hdrs.clear()

    def _on_truncate(self, seq: int) -> None:
        pass

    # -- consumers / lifecycle ------------------------------------------------------------------
    def consumer_store(self, name: str, meta: dict | None) -> "MemoryConsumerStore":
        self._check_open()
        cs = self._consumers.get(name)
        if cs is None or cs._closed:
            cs = MemoryConsumerStore(name, meta or {}, self)
            self._consumers[name] = cs
        elif meta is not None:
            cs.meta = meta
        return cs

    def consumer_names(self) -> list[str]:
        return sorted(self._consumers)

    def stop(self) -> None:
        self._closed = True

    def delete(self) -> None:
        self._closed = True
        self._payloads.clear()
        self._hdrs.clear()
        self._consumers.clear()


class MemoryConsumerStore:
    """A consumer's config and state held in memory."""

    def __init__(self, name: str, meta: dict, stream: MemoryStreamStore | None = None) -> None:
        self.name = name
        self.meta = meta
        self.state_damaged = ""  # (nothing on disk to be damaged)
        self._stream = stream
        self._state = ConsumerState()
        self._source: Callable[[], tuple] | None = None
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("consumer store is closed")

    def update(self, state: ConsumerState) -> None:
        """Replace the state. The store keeps a reference: callers hand over ownership."""
        self._check_open()
        self._state = state
        self._source = None

    def append_delta(self, delta: ConsumerDelta, source: Callable[[], tuple]) -> None:
        """Nothing to write in memory: keep the owner's live view (``source``) and read the
        state from it when asked, instead of copying a large state at every write."""
        self._check_open()
        self._source = source

    def state(self) -> ConsumerState:
        """A copy of the stored state (the caller may mutate it freely)."""
        self._check_open()
        if self._source is not None:
            pend, rdc, dl, af = self._source()
            return ConsumerState(
                SequencePair(dl.consumer_seq, dl.stream_seq),
                SequencePair(af.consumer_seq, af.stream_seq),
                {s: Pending(p[0], p[1]) for s, p in pend.items()},
                dict(rdc),
            )
        return copy.deepcopy(self._state)

    def update_config(self, meta: dict) -> None:
        self._check_open()
        self.meta = meta

    def flush(self) -> None:
        """Nothing to write."""

    def stop(self) -> None:
        self._closed = True

    def delete(self) -> None:
        self._closed = True
        if self._stream is not None and self._stream._consumers.get(self.name) is self:
            del self._stream._consumers[self.name]
