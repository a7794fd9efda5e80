"""The sequence index both stream stores share: sequences, limits, per-subject state, deletes, expiry.

:class:`IndexedStreamStore` keeps everything a stream needs to know about its messages *except the
payloads* in a few compact parallel arrays indexed by ``seq - base`` (issue 31: 11 bytes per
sequence in a file store of up to 255 subjects, 12 up to 65,535, 14 beyond, where nats-server
spends 13-15 bytes of RSS per stored message; 28 before):

- ``_pos``  (``array(POS_TYPECODE)``: ``'i'`` in a file store, ``'b'`` in a memory store): the low
  32 bits of where the payload lives (implementation-defined, ``>= 0``); negative when the sequence
  is absent: ``-1`` when nothing was ever stored there (skipped) or the dead record is physically
  gone, ``-pos - 2`` for a deleted message whose record still exists at ``pos``. The high bits (a
  file store's block id) are *position segments*: ``_psh[k]`` for the entries from sequence
  ``_pss[k]`` up to the next segment's (``_hi_at``, ``_pos_at``); a new one opens when an append's
  high bits differ from the last segment's, so a file store has one per block;
- ``_sid``  (``array('B')``, ``'H'`` or ``'I'``: the narrowest that holds every subject slot, widened
  when a new slot needs it): the message's subject id (``_dead``, the type's largest value, when
  absent), so filtered scans run in C through ``array.index``/``array.count`` and never touch
  payloads;
- ``_ts``   (``array('I')``): the store time, Unix ns, as a delta from its *time segment*'s base
  (``_tsb[k]`` for the entries from sequence ``_tss[k]``; ``_ts_at``). An append whose time is
  more than 4.29 s after the last segment's base, or before it, opens a new segment: one per
  4.29 s of a busy stream, one per message of a stream written less often than that (then 20
  bytes a message instead of 8: such a stream holds few);
- ``_sz``   (``array('H')``): the accounted size of the message (``state.bytes``); ``SZ_BIG`` for
  64 KiB or more, the size then kept in ``_szx`` (sequence -> size; ``_size``);
- ``_nxt``  (``array('I')``, only with a per-subject limit above 1, else None): distance to the
  next sequence stored with the same subject (0 = none yet, or unknown): a per-subject forward
  chain, so finding a subject's new first message after its first was removed (KV history > 1)
  follows one link instead of searching ``_sid``. Chains run through removed entries too (never
  skipping a live one). Without it (no limit, or history 1, where a subject with one message left
  knows its first) a removed first is found by one C-level ``array.index`` from the old one.

No Python object per message (a 1M-message file stream costs ~14 MB here). The arrays start at
``_base`` <= ``first_seq``; the dead prefix left behind by removals from the front is cut off
lazily (amortised O(1)) once it is large, with the segments that end before it.

Per-subject state is four parallel arrays indexed by subject id, ``_smsgs``/``_sfirst``/``_slast``
(``array('q')``) and ``_sstale`` (``array('B')``): the reference's ``SimpleState`` with
``firstNeedsUpdate``/``lastNeedsUpdate``, 25 bytes per subject instead of a list and its ints (~150
bytes; a 1M-subject stream, issue 31). Removing a subject's first (or last) message only marks it
stale, and it is recomputed on demand with one C-level search of ``_sid``, so limit enforcement does
no scanning on the hot path. A freed slot has no name (``_snames[sid] is None``) and zeros there.
A subject's slot is found through ``_sid_of``, a packed table over ``_snames``
(:mod:`natsd.store.subjtab`: 8-16 bytes per subject where a dict with an int object per slot cost
~65, issue 31), whose dict of hot subjects (``_sid_hot``) the publish path asks first.

Subclasses implement the payload hooks (``_write``, ``_read``, ``_drop``, ``_drop_all``) and the
accounted message size. All public methods follow :class:`natsd.store.base.StreamStore`.
"""

from __future__ import annotations

import heapq
from collections import Counter
from array import array
from bisect import bisect_left, bisect_right
from itertools import compress
from typing import Iterable, Iterator

from natsd import nats_headers as NH
from natsd.subjects.tokens import is_literal, matcher
from natsd.store.subjtab import SubjectTable
from natsd.store.base import (
    DiscardPolicy,
    MaxBytes,
    MaxMsgs,
    MaxMsgsPerSubject,
    MsgNotFound,
    MsgRun,
    SimpleState,
    StorageUpdateHandler,
    StoreClosed,
    StoreConfig,
    StoreEOF,
    StoreError,
    StoreMsg,
    StreamState,
)

__all__ = ["IndexedStreamStore", "DEAD_SIDS", "NEVER_EXPIRES", "SZ_BIG", "TS_MAX"]

#: ``_sid``'s array type -> the subject id that means "absent" (the largest it holds): a stream
#: of up to 255 subject slots keeps one byte per message, up to 65,535 two, more four.
DEAD_SIDS = {"B": 0xFF, "H": 0xFFFF, "I": 0xFFFFFFFF}
# ttl value meaning "never expires, not even by max_age" (Nats-TTL: never).
NEVER_EXPIRES = -1
# Trim the dead prefix of the arrays once it is at least this long and half of them.
_TRIM_MIN = 4096
# Above this many matching subjects a filtered scan walks the arrays instead of searching per subject.
_MULTI_SEARCH_MAX = 16
_FILTER_CACHE_MAX = 256
_ROLLUP_HDR = NH.ROLLUP + b":"

_STALE_FIRST = 1
_STALE_LAST = 2
# _sz holds u16 sizes; a message of this size or more keeps its size in _szx (by sequence).
SZ_BIG = 0xFFFF
# _ts holds u32 nanoseconds from its time segment's base (4.29 s); _NO_SEG: no segment yet,
# so that no time is within reach of it.
TS_MAX = 0xFFFFFFFF
_NO_SEG = -(1 << 80)
_LO = 0xFFFFFFFF
# _nxt holds u32 deltas; a larger gap is stored as 0 ("unknown": fall back to a search).
_NXT_MAX = 0xFFFFFFFF


def _sid_code(slots: int) -> str:
    """The narrowest ``_sid`` array type for subject ids below ``slots``."""
    return "B" if slots <= 0xFF else "H" if slots <= 0xFFFF else "I"


def is_all(filter: str) -> bool:
    """``""`` and ``">"`` mean "every subject" everywhere in the store API."""
    return filter == "" or filter == ">"


def _join_runs(runs: list[MsgRun]) -> MsgRun:
    """One run of ``runs`` back to back."""
    seqs: list[int] = []
    tss: list[int] = []
    subjects: list[bytes] = []
    hdrs: list[bytes | None] | None = None
    msgs: list[bytes] = []
    for r in runs:
        if r.hdrs is not None and hdrs is None:
            hdrs = [None] * len(seqs)
        seqs += r.seqs
        tss += r.tss
        subjects += r.subjects
        if hdrs is not None:
            hdrs += r.hdrs if r.hdrs is not None else [None] * len(r.seqs)
        msgs += r.msgs
    return MsgRun(seqs, tss, subjects, hdrs, msgs)


class IndexedStreamStore:
    """Shared implementation of the StreamStore protocol over compact arrays (see module doc)."""

    #: ``_pos``'s array type: wide enough for ``-pos - 2`` of the largest position a subclass
    #: writes (a memory store's positions are all 0: one byte).
    POS_TYPECODE = "q"
    # The last time and position segments' bases (see _rebase).
    _tsc: int
    _psc: int

    #: Accounted size of a message; subclasses use the reference's formula for their kind.
    @staticmethod
    def msg_size(subject: str, hdr: bytes | None, msg: bytes) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def __init__(self, config: StoreConfig, clock) -> None:
        self._pos = array(self.POS_TYPECODE)
        self._nxt: array | None = None
        self.config = config
        self._clock = clock
        self._time_ns = clock.time_ns
        self._closed = False
        self._cb: StorageUpdateHandler | None = None
        # A freed subject slot holds None in both lists until it is reused. Slots are reached
        # through ``_sid_of`` and the per-message sids, which never name a freed one, so the
        # lists are typed by what readers get (the freeing stores in _free_subject are marked).
        self._snames: list[str] = []
        # subject -> slot id over _snames, packed (natsd.store.subjtab); its ``hot`` dict answers
        # the subjects in use first (the publish path reads it directly: _sid_hot).
        self._sid_of = SubjectTable(self._snames)
        self._sid_hot = self._sid_of.hot
        self._smsgs = array("q")
        self._sfirst = array("q")
        self._slast = array("q")
        self._sstale = array("B")
        self._free_sids: list[int] = []
        # Wildcard filter -> [_sgen, number of subject slots examined, matching sids, the same
        # as a set or None until a scan needs one (_next_match over many subjects)]. _sgen
        # moves only when a subject slot is freed or reused, so a stream that keeps gaining new
        # subjects (KV keys) extends cached matches incrementally instead of rescanning them.
        self._sgen = 0
        self._fcache: dict[str, list] = {}
        self._ttl: dict[int, int] = {}
        self._ttl_heap: list[tuple[int, int]] = []
        self._lost_msgs: list[int] = []
        self._lost_bytes = 0
        #: (messages, bytes) found lost by this open's recovery (a torn tail after kill -9...);
        #: state() keeps the total of every recovery, this is what the last crash cost.
        self.recovered_lost: tuple[int, int] = (0, 0)
        first = config.first_seq if config.first_seq > 0 else 1
        self._last_ts = 0
        self._reset_index(first)

    @property
    def config(self) -> StoreConfig:
        return self._config

    @config.setter
    def config(self, config: StoreConfig) -> None:
        # The limits are read once per stored message: keep them in plain attributes, and
        # whether any applies at all, so an unlimited stream skips the checks.
        self._config = config
        self._discard_new = config.discard == DiscardPolicy.NEW
        self._max_per_subj = config.max_msgs_per_subject if config.max_msgs_per_subject > 0 else 0
        old = not self._discard_new
        self._old_max_msgs = config.max_msgs if old and config.max_msgs > 0 else 0
        self._old_max_bytes = config.max_bytes if old and config.max_bytes > 0 else 0
        self._any_limit = bool(self._max_per_subj or self._old_max_msgs or self._old_max_bytes)
        # The per-subject chains (_nxt) pay off only where a subject keeps more than one
        # message under a limit (KV history > 1): elsewhere they would cost 4 bytes per message
        # for nothing (a limit of 1 finds the new first in O(1) without them, and other removals
        # leave a search to the next message of the subject). Started all "unknown" (0) when a
        # limit appears on a stream that has messages already; dropped when it goes.
        self._fit_chains()
        # keep_last_under_max_age: age expiry skips each subject's last message. Invariant: every
        # live message below _kl_from is its subject's last, never expires, or is in the heap
        # _kl_due (a kept message a newer one on its subject made ordinary again, pushed by
        # _index_add). So expiry walks neither the kept messages again and again (a KV bucket
        # of many keys) nor from the start after each put; anything else that could break the
        # invariant (truncate, a reset) sets _kl_from to 0.
        self._age_keep_last = config.keep_last_under_max_age and config.max_age_ns > 0
        self._kl_from = 0
        self._kl_due: list[int] = []
        # discard "new" refuses only through max_msgs, max_bytes or discard_new_per_subject: a
        # KV bucket (discard new, a per-subject limit alone) skips the check per message.
        self._check_new = self._discard_new and (
            config.max_msgs > 0 or config.max_bytes > 0 or (config.discard_new_per_subject and self._max_per_subj > 0)
        )

    def _ts_at(self, i: int) -> int:
        """The store time (Unix ns) of the entry at index ``i``."""
        tss = self._tss
        seq = self._base + i
        if seq >= tss[-1]:
            return self._tsc + self._ts[i]
        return self._tsb[bisect_right(tss, seq) - 1] + self._ts[i]

    def _ts_list(self, lo: int, hi: int) -> list[int]:
        """The store times of the entries at indexes ``lo`` .. ``hi - 1`` (one C-level map per
        time segment)."""
        base = self._base
        tss, tsb, ts = self._tss, self._tsb, self._ts
        k = bisect_right(tss, base + lo) - 1
        out: list[int] = []
        while lo < hi:
            end = hi if k + 1 >= len(tss) else min(hi, tss[k + 1] - base)
            out += map(tsb[k].__add__, ts[lo:end])
            lo = end
            k += 1
        return out

    def _ts_extend(self, ts: int, n: int) -> None:
        """Append ``n`` entries stored at ``ts``, opening a time segment when it does not fit
        the last one (the first entry, a gap of more than 4.29 s, a time going backwards)."""
        d = ts - self._tsc
        if not 0 <= d <= TS_MAX:
            self._tss.append(self._base + len(self._ts))
            self._tsb.append(ts)
            self._tsc = ts
            d = 0
        self._ts.extend(array("I", [d]) * n)

    def _hi_at(self, i: int) -> int:
        """The high 32 bits of the position at index ``i`` (its position segment's)."""
        pss = self._pss
        if self._base + i >= pss[-1]:
            return self._psc
        return self._psh[bisect_right(pss, self._base + i) - 1]

    def _pos_at(self, i: int) -> int:
        """The position of the live entry at index ``i``."""
        return self._hi_at(i) << 32 | self._pos[i]

    def _pos_end(self, i: int) -> int:
        """The index where the position segment of index ``i`` ends (a huge one for the last):
        a run of positions read from ``_pos`` shares its high bits up to there."""
        pss = self._pss
        k = bisect_right(pss, self._base + i)
        return pss[k] - self._base if k < len(pss) else 1 << 62

    def _pos_open(self, hi: int) -> None:
        """Open a position segment for high bits ``hi`` at the next entry."""
        self._pss.append(self._base + len(self._pos))
        self._psh.append(hi)
        self._psc = hi

    def _pos_extend(self, positions: Iterable[int]) -> None:
        """Append the positions of the next entries (one subclass write: one block)."""
        ps: list[int] | range = positions if isinstance(positions, (list, range)) else list(positions)
        if not ps:
            return
        hi = ps[0] >> 32
        if ps[-1] >> 32 != hi:  # (not one block: one at a time)
            for p in ps:
                self._pos_extend((p,))
            return
        if hi != self._psc:
            self._pos_open(hi)
        self._pos.extend(map(_LO.__and__, ps) if hi else ps)

    def _size(self, i: int) -> int:
        """The accounted size of the message at index ``i`` (live)."""
        v = self._sz[i]
        return v if v != SZ_BIG else self._szx[self._base + i]

    def _big_size(self, seq: int, size: int) -> int:
        """Keep the size of a message too large for ``_sz`` aside; returns the marker."""
        self._szx[seq] = size
        return SZ_BIG

    def _extend_sizes(self, seq: int, sizes: list[int]) -> None:
        """Append the sizes of sequences ``seq``, ``seq + 1``... (the common case in C)."""
        if sizes and max(sizes) < SZ_BIG:
            self._sz.extend(array("H", sizes))
        else:
            self._sz.extend(array("H", [n if n < SZ_BIG else self._big_size(q, n) for q, n in enumerate(sizes, seq)]))

    def _fit_chains(self) -> None:
        """Keep ``_nxt`` exactly when the limits need it (see the config setter); a new one
        starts all "unknown" (0), which the searches fall back from."""
        if self._max_per_subj > 1:
            if self._nxt is None or len(self._nxt) != len(self._pos):
                self._nxt = array("I", bytes(4 * len(self._pos)))
        else:
            self._nxt = None

    # ------------------------------------------------------------------ payload hooks
    def _write(self, seq: int, ts: int, subject: str, hdr: bytes | None, msg: bytes, ttl_ns: int) -> int:
        """Persist one message; return its position (>= 0)."""
        raise NotImplementedError

    def _write_run(
        self, seq: int, ts: int, subject: str, msgs: list[bytes], start: int, hdr_len: int = 0
    ) -> tuple[int, Iterable[int]]:
        """Persist ``msgs[start:]`` (header blocks of ``hdr_len`` bytes in front, see
        ``store_run``; as many as this store takes in one go, at least one) as sequences
        ``seq``, ``seq + 1``...; returns (how many, their positions). A StoreError means none of
        them was written. By default one message through ``_write``."""
        m = msgs[start]
        if hdr_len:
            return 1, (self._write(seq, ts, subject, m[:hdr_len], m[hdr_len:], 0),)
        return 1, (self._write(seq, ts, subject, None, m, 0),)

    def _write_many(
        self, seq: int, ts: int, subjects: list[str], msgs: list[bytes], start: int
    ) -> tuple[int, Iterable[int], list[int]]:
        """Persist header-less ``msgs[start:]``, each to its ``subjects[i]`` (as many as this
        store takes in one go, at least one) as sequences ``seq``...; returns (how many, their
        positions, their sizes as ``msg_size``). A StoreError means none of them was written.
        By default one message."""
        subject = subjects[start]
        m = msgs[start]
        return 1, (self._write(seq, ts, subject, None, m, 0),), [self.msg_size(subject, None, m)]

    def _read(self, seq: int, pos: int) -> StoreMsg:
        raise NotImplementedError

    def _drop(self, seq: int, pos: int, size: int, erase: bool, front: bool) -> None:
        """The message at ``seq`` (record size ``size``) was removed (``front``: it was the
        first message; ``erase``: its bytes must be overwritten)."""

    def _drop_all(self, first: int) -> None:
        """Every message was removed (purge / compact past the end); the stream restarts,
        empty, at sequence ``first``."""

    def _on_skip(self, seq: int, num: int, ts: int) -> None:
        """Sequences ``seq .. seq+num-1`` were consumed without a message."""

    def _on_truncate(self, seq: int) -> None:
        """Everything above ``seq`` was removed."""

    # ------------------------------------------------------------------ index primitives
    def _reset_index(self, first: int) -> None:
        self._first = first
        self._last = first - 1
        self._first_ts = 0
        self._msgs = 0
        self._bytes = 0
        self._rebase(first)
        self._snames.clear()
        self._sid_of.clear()
        # Emptied in place: recovery's replay loop holds them.
        del self._smsgs[:], self._sfirst[:], self._slast[:], self._sstale[:]
        self._free_sids.clear()
        self._sgen += 1
        self._fcache.clear()
        self._ttl.clear()
        self._ttl_heap.clear()
        self._kl_from = 0
        self._kl_due.clear()

    def _rebase(self, base: int) -> None:
        """Empty arrays starting at ``base`` (only valid when no message is live)."""
        self._base = base
        self._pos = array(self.POS_TYPECODE)
        # Position segments, as the time segments: the entries from sequence _pss[k] on hold
        # the low 32 bits of their positions, the high ones are _psh[k] (a file store's
        # block id: one segment per block). _psc: the last segment's, _NO_SEG: none yet.
        self._pss = array("q")
        self._psh = array("q")
        self._psc = _NO_SEG
        # (as narrow as the subject slots allow; _new_sid widens it when they outgrow it)
        self._sid = array(_sid_code(len(self._snames)))
        self._dead = DEAD_SIDS[self._sid.typecode]
        self._ts = array("I")
        # Time segments: segment k starts at sequence _tss[k]; its entries' times are
        # _tsb[k] + their _ts delta. _tsc is the last segment's base (_NO_SEG: none yet).
        self._tss = array("q")
        self._tsb = array("q")
        self._tsc = _NO_SEG
        self._sz = array("H")
        self._szx: dict[int, int] = {}
        self._nxt = array("I") if self._max_per_subj > 1 else None

    def _fill_absent(self, upto_seq: int) -> None:
        """Extend the arrays with absent entries so that they end just before ``upto_seq``."""
        n = upto_seq - self._base - len(self._pos)
        if n <= 0:
            return
        if self._msgs == 0:
            self._rebase(upto_seq)
            return
        self._pos.extend(array(self.POS_TYPECODE, [-1]) * n)
        self._sid.extend(array(self._sid.typecode, [self._dead]) * n)
        # Absent entries repeat the last timestamp so the times stay sorted (get_seq_from_time).
        self._ts_extend(self._last_ts, n)
        self._sz.extend(array("H", bytes(2 * n)))
        if self._nxt is not None:
            self._nxt.extend(array("I", bytes(4 * n)))

    def _new_sid(self, subject: str, seq: int) -> int:
        if self._free_sids:
            sid = self._free_sids.pop()
            self._snames[sid] = subject
            self._smsgs[sid] = 1
            self._sfirst[sid] = self._slast[sid] = seq
            self._sstale[sid] = 0
            self._sgen += 1
        else:
            sid = len(self._snames)
            self._snames.append(subject)
            self._smsgs.append(1)
            self._sfirst.append(seq)
            self._slast.append(seq)
            self._sstale.append(0)
        self._sid_of.add(subject, sid)
        if sid >= self._dead:
            self._widen_sids(sid)
        return sid

    def _widen_sids(self, sid: int) -> None:
        """``_sid`` to the next array type that holds ``sid`` (absent entries translated)."""
        old, dead = self._sid, self._dead
        wide = array(_sid_code(sid + 1), old)
        self._dead = DEAD_SIDS[wide.typecode]
        i = -1
        for _ in range(old.count(dead)):
            i = old.index(dead, i + 1)
            wide[i] = self._dead
        self._sid = wide

    def _index_add(self, seq: int, ts: int, subject: str, size: int, pos: int, sid: int | None = -1) -> int:
        """Record a stored message in the index; returns its subject id. ``sid``: the
        subject's id when the caller has looked it up already (None: a new subject)."""
        if self._msgs == 0:
            self._rebase(seq)
            self._first = seq
            self._first_ts = ts
        elif seq != self._base + len(self._pos):
            self._fill_absent(seq)
        if sid == -1:
            sid = self._sid_of.get(subject)
        if sid is None:
            sid = self._new_sid(subject, seq)
        else:
            self._smsgs[sid] += 1
            slast = self._slast
            prev = slast[sid]
            slast[sid] = seq
            stale = self._sstale
            if self._age_keep_last and prev < self._kl_from:  # (keep_last_under_max_age)
                if stale[sid] & _STALE_LAST:
                    self._kl_from = 0  # (the subject's last is not known here: scan again)
                else:
                    heapq.heappush(self._kl_due, prev)
            if stale[sid]:
                stale[sid] &= ~_STALE_LAST
            j = prev - self._base
            if j >= 0 and seq - prev <= _NXT_MAX and self._nxt is not None:
                self._nxt[j] = seq - prev
        if pos >> 32 != self._psc:
            self._pos_open(pos >> 32)
        self._pos.append(pos & _LO)
        self._sid.append(sid)
        d = ts - self._tsc
        if 0 <= d <= TS_MAX:
            self._ts.append(d)
        else:
            self._ts_extend(ts, 1)
        self._sz.append(size if size < SZ_BIG else self._big_size(seq, size))
        if self._nxt is not None:
            self._nxt.append(0)
        self._msgs += 1
        self._bytes += size
        self._last = seq
        self._last_ts = ts
        return sid

    def _remove(self, seq: int, erase: bool = False, notify: bool = True) -> bool:
        """Remove one message from the index (and its payload through ``_drop``)."""
        i = seq - self._base
        parr = self._pos
        if seq < self._first or i < 0 or i >= len(parr):
            return False
        pos = parr[i]
        if pos < 0:
            return False
        sarr = self._sid
        sid = sarr[i]
        size = self._sz[i]
        if size == SZ_BIG:
            size = self._szx.pop(seq)
        # Keep where the dead record physically is (-pos - 2, still < 0 = absent): the file
        # store's compaction uses it to know when a tombstone is no longer needed.
        parr[i] = -pos - 2
        # (the high bits inline when in the last position segment: a KV put removes one)
        hi = self._psc if seq >= self._pss[-1] else self._hi_at(i)
        if hi:
            pos |= hi << 32
        sarr[i] = self._dead
        self._msgs -= 1
        self._bytes -= size
        subject = self._snames[sid]
        smsgs = self._smsgs
        n = smsgs[sid] - 1
        smsgs[sid] = n
        if n == 0:
            self._free_subject(sid)
        else:
            # (each read of _sfirst/_slast makes an int: read them once)
            first, last = self._sfirst[sid], self._slast[sid]
            old = stale = self._sstale[sid]
            if seq == first:
                stale |= _STALE_FIRST
            if seq == last:
                stale |= _STALE_LAST
            if n == 1 and stale:
                # One message left: a known end is the other end too (KV history 1: O(1)).
                if not stale & _STALE_LAST:
                    self._sfirst[sid] = last
                    stale = 0
                elif not stale & _STALE_FIRST:
                    self._slast[sid] = first
                    stale = 0
            if stale != old:
                self._sstale[sid] = stale
        if self._ttl:
            self._ttl.pop(seq, None)
        front = seq == self._first
        self._drop(seq, pos, size, erase, front)
        if front:
            j = i + 1
            # Common case inline (limits remove from the front): the next slot is live.
            if self._msgs and j < len(parr) and parr[j] >= 0:
                self._first = seq + 1
                # (the time inline when in the last time segment)
                self._first_ts = self._tsc + self._ts[j] if seq + 1 >= self._tss[-1] else self._ts_at(j)
                if j >= _TRIM_MIN and j * 2 >= len(parr):
                    self._trim(j)
            else:
                self._advance_first(j)
        if notify and self._cb is not None:
            self._cb(-1, -size, seq, subject)
        return True

    def _free_subject(self, sid: int) -> None:
        name = self._snames[sid]
        self._sid_of.remove(name, sid)
        self._snames[sid] = None  # type: ignore[call-overload]
        self._smsgs[sid] = self._sfirst[sid] = self._slast[sid] = self._sstale[sid] = 0
        self._free_sids.append(sid)
        self._sgen += 1

    def _advance_first(self, i: int) -> None:
        """The first message was removed: move first to the next live sequence at index >= i."""
        if self._msgs == 0:
            self._first = self._last + 1
            self._first_ts = 0
            self._rebase(self._first)
            return
        pos = self._pos
        n = len(pos)
        while i < n and pos[i] < 0:
            i += 1
        assert i < n, "live message count says a message exists after first"
        self._first = self._base + i
        self._first_ts = self._ts_at(i)
        if i >= _TRIM_MIN and i * 2 >= n:
            self._trim(i)

    def _trim(self, i: int) -> None:
        """Cut the first ``i`` (dead) entries off the arrays."""
        del self._pos[:i]
        del self._sid[:i]
        del self._ts[:i]
        del self._sz[:i]
        if self._nxt is not None:
            del self._nxt[:i]
        self._base += i
        # (the segment holding the new first entry stays: its start may be below the base)
        k = bisect_right(self._tss, self._base) - 1
        if k > 0:
            del self._tss[:k], self._tsb[:k]
        k = bisect_right(self._pss, self._base) - 1
        if k > 0:
            del self._pss[:k], self._psh[:k]

    def _subject_first(self, sid: int) -> int:
        stale = self._sstale[sid]
        if stale & _STALE_FIRST:
            i = self._sfirst[sid] - self._base
            arr = self._sid
            nxt = self._nxt
            if i < 0:
                i = arr.index(sid)
            elif nxt is None:
                i = arr.index(sid, i)
            else:
                # Follow the subject's chain from its old (removed) first message.
                while arr[i] != sid:
                    d = nxt[i]
                    if not d:
                        i = arr.index(sid, i)
                        break
                    i += d
            self._sfirst[sid] = self._base + i
            self._sstale[sid] = stale & ~_STALE_FIRST
        return self._sfirst[sid]

    def _subject_last(self, sid: int) -> int:
        stale = self._sstale[sid]
        if stale & _STALE_LAST:
            i = min(self._slast[sid], self._last) - self._base
            arr = self._sid
            while arr[i] != sid:
                i -= 1
            self._slast[sid] = self._base + i
            self._sstale[sid] = stale & ~_STALE_LAST
        return self._slast[sid]

    def _last_live(self, upto: int) -> int:
        """Highest live sequence <= upto, or 0."""
        i = min(upto, self._last) - self._base
        pos = self._pos
        lo = self._first - self._base
        while i >= lo:
            if pos[i] >= 0:
                return self._base + i
            i -= 1
        return 0

    def _next_live(self, seq: int) -> int:
        """Lowest live sequence >= seq, or 0."""
        if seq < self._first:
            seq = self._first
        i = seq - self._base
        pos = self._pos
        n = len(pos)
        while i < n:
            if pos[i] >= 0:
                return self._base + i
            i += 1
        return 0

    def _match_sids(self, filter: str) -> list[int] | tuple[int, ...]:
        if is_literal(filter):
            sid = self._sid_of.get(filter)
            return () if sid is None else (sid,)
        return self._match_entry(filter)[2]

    def _match_entry(self, filter: str) -> list:
        """The cache entry of a wildcard filter (see ``_fcache``), brought up to date."""
        names = self._snames
        hit = self._fcache.get(filter)
        if hit is None or hit[0] != self._sgen:
            if len(self._fcache) >= _FILTER_CACHE_MAX:
                self._fcache.clear()
            hit = [self._sgen, 0, [], None]
            self._fcache[filter] = hit
        if hit[1] < len(names):
            sids = hit[2]
            have = len(sids)
            match = matcher(filter)
            for sid in range(hit[1], len(names)):
                name = names[sid]
                if name is not None and match(name):
                    sids.append(sid)
            hit[1] = len(names)
            if hit[3] is not None and len(sids) > have:
                hit[3].update(sids[have:])
        return hit

    def _next_match(self, filter: str, start: int) -> int:
        """Lowest live sequence >= start whose subject matches filter, or 0."""
        if start < self._first:
            start = self._first
        if start > self._last or self._msgs == 0:
            return 0
        if is_all(filter):
            return self._next_live(start)
        if is_literal(filter):
            sid = self._sid_of.get(filter)
            if sid is None:
                return 0
            sids: list[int] | tuple[int, ...] = (sid,)
        else:
            hit = self._match_entry(filter)
            sids = hit[2]
            if not sids:
                return 0
        base = self._base
        arr = self._sid
        if len(sids) <= _MULTI_SEARCH_MAX:
            best = 0
            for sid in sids:
                if self._slast[sid] < start:
                    continue
                f = self._subject_first(sid)
                if f >= start:
                    cand = f
                else:
                    stop = (best - base) if best else len(arr)
                    try:
                        cand = base + arr.index(sid, start - base, stop)
                    except ValueError:
                        continue
                if not best or cand < best:
                    best = cand
            return best
        # A consumer filtered on many subjects (plgd.*.<event> over 10,000 devices) asks per
        # message: the set is kept with the cached list (building it each time cost ~60 µs).
        want = hit[3]
        if want is None:
            want = hit[3] = set(sids)
        for i in range(start - base, len(arr)):
            if arr[i] in want:
                return base + i
        return 0

    # ------------------------------------------------------------------ writing
    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("store is closed")

    def _check_discard_new(self, subject: str, hdr: bytes | None, size: int) -> None:
        """discard "new" as the reference's storeRawMsg: at a subject limit the message replaces
        the subject's oldest, which counts as room. O(1): counters, and the subject's first
        message through its chain (``_subject_first``)."""
        cfg = self._config
        maxp = self._max_per_subj
        asl = False
        sid = None
        if maxp:
            sid = self._sid_of.get(subject)
            if sid is not None:
                asl = self._smsgs[sid] >= maxp
        if asl and cfg.discard_new_per_subject and not (hdr and _ROLLUP_HDR in hdr):
            raise MaxMsgsPerSubject("maximum messages per subject exceeded")
        if cfg.max_msgs > 0 and self._msgs >= cfg.max_msgs and not asl:
            raise MaxMsgs("maximum messages exceeded")
        if cfg.max_bytes > 0 and self._bytes + size > cfg.max_bytes:
            if not asl:
                raise MaxBytes("maximum bytes exceeded")
            assert sid is not None  # asl: the subject exists
            first = self._subject_first(sid)
            if self._size(first - self._base) < size:
                raise MaxBytes("maximum bytes exceeded")

    def store_msg(self, subject: str, hdr: bytes | None, msg: bytes, ttl_ns: int = 0) -> tuple[int, int]:
        """Append one message; see :meth:`natsd.store.base.StreamStore.store_msg`.

        The hot path: the common case (next slot, known subject, no TTL) updates the index
        inline; limits are only looked at when some are configured."""
        if self._closed:
            raise StoreClosed("store is closed")
        size = self.msg_size(subject, hdr, msg)
        if self._check_new:
            self._check_discard_new(subject, hdr, size)
        seq = self._last + 1
        ts = self._time_ns()
        pos = self._write(seq, ts, subject, hdr, msg, ttl_ns)
        sid = self._sid_hot.get(subject)
        if sid is None:
            sid = self._sid_of.probe(subject)
        parr = self._pos
        base = self._base
        # (keep_last_under_max_age takes _index_add, which keeps its expiry bound _kl_from)
        if sid is None or ttl_ns or not self._msgs or seq != base + len(parr) or self._age_keep_last:
            sid = self._index_add(seq, ts, subject, size, pos, sid)
            if ttl_ns:
                self._set_ttl(seq, ts, ttl_ns)
        else:
            self._smsgs[sid] += 1
            slast = self._slast
            prev = slast[sid]
            slast[sid] = seq
            stale = self._sstale
            if stale[sid]:
                stale[sid] &= ~_STALE_LAST
            nxt = self._nxt
            if nxt is not None:
                if prev >= base and seq - prev <= _NXT_MAX:
                    nxt[prev - base] = seq - prev
                nxt.append(0)
            # (literals: TS_MAX, SZ_BIG and the low 32 bits' mask, read per message)
            if pos >> 32 != self._psc:
                self._pos_open(pos >> 32)
            parr.append(pos & 0xFFFFFFFF)
            self._sid.append(sid)
            d = ts - self._tsc
            if 0 <= d <= 0xFFFFFFFF:
                self._ts.append(d)
            else:
                self._ts_extend(ts, 1)
            self._sz.append(size if size < 0xFFFF else self._big_size(seq, size))
            self._msgs += 1
            self._bytes += size
            self._last = seq
            self._last_ts = ts
        if self._any_limit:
            self._enforce_limits(sid)
        return seq, ts

    def store_run(self, subject: str, msgs: list[bytes], hdr_len: int = 0) -> tuple[int, int, int, StoreError | None]:
        """Append messages to one subject, in order, with one timestamp; see
        :meth:`natsd.store.base.StreamStore.store_run`. Written and indexed a piece at a time
        (``_write_run``: a file store's piece is what fits in its last block), so the index
        names every written message before the next piece can roll (and flush) a block."""
        if self._closed:
            raise StoreClosed("store is closed")
        n = len(msgs)
        first = self._last + 1
        if self._check_new or n == 1:
            # Discard new with a limit that can refuse: each message is checked before it is
            # stored, one at a time (a KV bucket's per-subject limit alone refuses nothing).
            ts = 0
            for i in range(n):
                m = msgs[i]
                try:
                    if hdr_len:
                        seq, ts = self.store_msg(subject, m[:hdr_len], m[hdr_len:])
                    else:
                        seq, ts = self.store_msg(subject, None, m)
                except StoreError as e:
                    return first, ts, i, e
            return first, ts, n, None
        ts = self._time_ns()
        done = 0
        sid = 0
        while done < n:
            seq = self._last + 1
            try:
                k, positions = self._write_run(seq, ts, subject, msgs, done, hdr_len)
            except StoreError as e:
                if self._any_limit and done:
                    self._enforce_limits(sid)
                return first, ts, done, e
            sid = self._index_run(seq, ts, subject, msgs, done, k, positions, hdr_len)
            done += k
        if self._any_limit:
            # Discard-old limits once for the run: the same messages go, oldest first, as after
            # each store_msg (those of the run itself included when it outgrows max_msgs).
            self._enforce_limits(sid)
        return first, ts, n, None

    def store_many(self, subjects: list[str], msgs: list[bytes]) -> tuple[int, int, int, StoreError | None]:
        """Append header-less messages each to its own subject, in order, with one timestamp;
        see :meth:`natsd.store.base.StreamStore.store_many`. Each is stored and its limits
        applied as :meth:`store_msg` would (discard new checked before, discard old after it)."""
        if self._closed:
            raise StoreClosed("store is closed")
        n = len(msgs)
        first = self._last + 1
        ts = self._time_ns()
        if not (self._check_new or self._any_limit or self._age_keep_last) and self._msgs:
            return first, ts, *self._store_many_plain(subjects, msgs, ts)
        check_new = self._check_new
        msg_size = self.msg_size
        store = self._store
        for i in range(n):
            subject = subjects[i]
            m = msgs[i]
            size = msg_size(subject, None, m)
            try:
                if check_new:
                    self._check_discard_new(subject, None, size)
                store(subject, None, m, self._last + 1, ts, 0, size)
            except StoreError as e:
                return first, ts, i, e
        return first, ts, n, None

    def _store_many_plain(self, subjects: list[str], msgs: list[bytes], ts: int) -> tuple[int, StoreError | None]:
        """:meth:`store_many` without limits to apply, on a non-empty stream: written a piece at
        a time (``_write_many``) and each piece indexed before the next can roll a block."""
        n = len(msgs)
        done = 0
        sid_of = self._sid_of
        while done < n:
            seq = self._last + 1
            try:
                k, positions, sizes = self._write_many(seq, ts, subjects, msgs, done)
            except StoreError as e:
                return done, e
            names = subjects[done : done + k]
            known = all(map(self._sid_hot.__contains__, names)) or all(map(sid_of.__contains__, names))
            if seq != self._base + len(self._pos) or not known:
                # (a new subject or a gap: the general bookkeeping, one at a time)
                for s, size, pos in zip(names, sizes, positions):
                    self._index_add(seq, ts, s, size, pos)
                    seq += 1
            else:
                self._index_known(seq, ts, names, sizes, positions)
            done += k
        return n, None

    def _index_known(self, seq: int, ts: int, names: list[str], sizes: list[int], positions: Iterable[int]) -> None:
        """Index messages to known subjects written at ``positions`` as sequences ``seq``...
        right after the last (what :meth:`store_msg`'s inline path does for each)."""
        k = len(names)
        base = self._base
        sids = self._sid_of.sids(names)
        smsgs = self._smsgs
        slast = self._slast
        stale = self._sstale
        nxt = self._nxt
        if nxt is not None:
            nxt.extend(array("I", [0]) * k)
        for s, sid in enumerate(sids, seq):
            smsgs[sid] += 1
            prev = slast[sid]
            slast[sid] = s
            if stale[sid]:
                stale[sid] &= ~_STALE_LAST
            if nxt is not None and prev >= base and s - prev <= _NXT_MAX:
                nxt[prev - base] = s - prev
        self._pos_extend(positions)
        self._sid.extend(array(self._sid.typecode, sids))
        self._ts_extend(ts, k)
        self._extend_sizes(seq, sizes)
        self._msgs += k
        self._bytes += sum(sizes)
        self._last = seq + k - 1
        self._last_ts = ts

    def _index_run(
        self,
        seq: int,
        ts: int,
        subject: str,
        msgs: list[bytes],
        start: int,
        k: int,
        positions: Iterable[int],
        hdr_len: int = 0,
    ) -> int:
        """Index ``msgs[start:start + k]``, written at ``positions`` as sequences ``seq``...;
        returns the subject id. The first goes through :meth:`_index_add` (new subject, empty
        stream, gap); the rest extend the arrays at once: same subject, so each one's next
        same-subject message is the following sequence."""
        it = iter(positions)
        m0 = msgs[start]
        size = self.msg_size(subject, m0[:hdr_len], m0[hdr_len:]) if hdr_len else self.msg_size(subject, None, m0)
        sid = self._index_add(seq, ts, subject, size, next(it))
        if k == 1:
            return sid
        rest = k - 1
        # A message's accounted size is a per-subject constant plus its length (header block
        # included: with headers the constant is larger, but still one per run).
        lens = list(map(len, msgs[start + 1 : start + k]))
        if lens.count(len(m0)) == rest and size < SZ_BIG:
            self._sz.extend(array("H", [size]) * rest)
            total = size * rest
        else:
            d = size - len(m0)
            sizes = [d + n for n in lens]
            self._extend_sizes(seq + 1, sizes)
            total = sum(sizes)
        self._smsgs[sid] += rest
        self._slast[sid] = seq + rest
        nxt = self._nxt
        if nxt is not None:
            nxt[seq - self._base] = 1
            nxt.extend(array("I", [1]) * (rest - 1))
            nxt.append(0)
        self._pos_extend(it)
        self._sid.extend(array(self._sid.typecode, [sid]) * rest)
        self._ts_extend(ts, rest)
        self._msgs += rest
        self._bytes += total
        self._last = seq + rest
        return sid

    def store_raw_msg(self, subject: str, hdr: bytes | None, msg: bytes, seq: int, ts: int, ttl_ns: int = 0) -> None:
        """Store with a given sequence (> last_seq) and timestamp; the gap counts as deleted."""
        self._check_open()
        if seq <= self._last:
            raise ValueError(f"sequence {seq} is not above the last sequence {self._last}")
        if seq > self._last + 1:
            self._skip_range(self._last + 1, seq - self._last - 1, ts)
        self._store(subject, hdr, msg, seq, ts, ttl_ns, self.msg_size(subject, hdr, msg))

    def _store(self, subject: str, hdr: bytes | None, msg: bytes, seq: int, ts: int, ttl_ns: int, size: int) -> None:
        pos = self._write(seq, ts, subject, hdr, msg, ttl_ns)
        sid = self._index_add(seq, ts, subject, size, pos)
        if ttl_ns:
            self._set_ttl(seq, ts, ttl_ns)
        if self._any_limit:
            self._enforce_limits(sid)

    def _enforce_limits(self, sid: int) -> None:
        """Limits after storing a message of subject ``sid``: per subject (any discard policy:
        the subject's oldest goes), then max_msgs / max_bytes with discard old."""
        maxp = self._max_per_subj
        if maxp:
            smsgs = self._smsgs
            while smsgs[sid] > maxp:
                # (the subject's first inline when known: a KV put removes one message per put)
                stale = self._sstale[sid] & _STALE_FIRST
                self._remove(self._subject_first(sid) if stale else self._sfirst[sid])
        limit = self._old_max_msgs
        if limit:
            while self._msgs > limit:
                self._remove(self._first)
        limit = self._old_max_bytes
        if limit:
            while self._bytes > limit:
                self._remove(self._first)

    def _set_ttl(self, seq: int, ts: int, ttl_ns: int) -> None:
        if ttl_ns < 0:
            self._ttl[seq] = NEVER_EXPIRES
        else:
            exp = ts + ttl_ns
            self._ttl[seq] = exp
            heapq.heappush(self._ttl_heap, (exp, seq))

    def skip_msg(self) -> int:
        """Consume the next sequence without a message; returns it."""
        self._check_open()
        seq = self._last + 1
        self._skip_range(seq, 1, self._clock.time_ns())
        return seq

    def skip_msgs(self, seq: int, num: int) -> None:
        """Skip ``num`` sequences starting at ``seq`` (which must be last_seq + 1)."""
        self._check_open()
        if seq != self._last + 1:
            raise ValueError(f"skip_msgs: sequence {seq} is not last_seq + 1 ({self._last + 1})")
        if num > 0:
            self._skip_range(seq, num, self._clock.time_ns())

    def _skip_range(self, seq: int, num: int, ts: int) -> None:
        self._on_skip(seq, num, ts)
        self._last = seq + num - 1
        self._last_ts = ts
        if self._msgs == 0:
            self._first = self._last + 1
            self._first_ts = 0
            self._rebase(self._first)
        else:
            self._fill_absent(self._last + 1)

    def flush(self) -> None:
        """Nothing is buffered by default."""

    def flush_async(self, on_written) -> int:
        """``flush()`` inline (0): nothing to hand to a writer thread by default."""
        self.flush()
        return 0

    @property
    def written_token(self) -> int:
        return 0

    def take_rollback(self):
        """What a failed write took back since the last call: ``(last durable sequence,
        StoreWriteError)`` or None (see the file store). A store that never fails returns None."""
        return None

    @property
    def bytes_used(self) -> int:
        """Accounted bytes of the live messages (``state().bytes`` without building a state)."""
        return self._bytes

    def sync(self) -> None:
        self.flush()

    # ------------------------------------------------------------------ reading
    def load_msg(self, seq: int) -> StoreMsg:
        """The message at ``seq``: MsgNotFound (deleted / below first) or StoreEOF (above last)."""
        self._check_open()
        if seq > self._last:
            raise StoreEOF(f"sequence {seq} is above the last sequence")
        i = seq - self._base
        if seq < self._first or i < 0:
            raise MsgNotFound(f"no message at sequence {seq}")
        if self._pos[i] < 0:
            raise MsgNotFound(f"no message at sequence {seq}")
        return self._read(seq, self._pos_at(i))

    def load_next_msg(self, filter: str, start_seq: int) -> StoreMsg:
        """First message with seq >= start_seq matching ``filter``; StoreEOF when none."""
        self._check_open()
        while True:
            seq = self._next_match(filter, start_seq)
            if not seq:
                raise StoreEOF("no message found")
            try:
                return self._read(seq, self._pos_at(seq - self._base))
            except MsgNotFound:
                # A message found corrupt on read is reported lost and skipped.
                start_seq = seq + 1

    def load_last_msg(self, subject: str) -> StoreMsg:
        """Last message matching ``subject`` (wildcards allowed); MsgNotFound if none."""
        self._check_open()
        if self._msgs == 0:
            raise MsgNotFound("no message found")
        if is_all(subject):
            seq = self._last_live(self._last)
        else:
            seq = 0
            for sid in self._match_sids(subject):
                last = self._subject_last(sid)
                if last > seq:
                    seq = last
        if not seq:
            raise MsgNotFound("no message found")
        return self._read(seq, self._pos_at(seq - self._base))

    def last_seq_of(self, subject: str) -> int:
        """Sequence of the last message of the literal ``subject`` (0: none), without reading it."""
        if self._msgs == 0:
            return 0
        sid = self._sid_of.get(subject)
        return self._subject_last(sid) if sid is not None else 0

    def load_prev_msg(self, start_seq: int) -> StoreMsg:
        """Last message with seq <= start_seq; MsgNotFound if none."""
        self._check_open()
        seq = self._last_live(start_seq) if self._msgs else 0
        if not seq:
            raise MsgNotFound("no message found")
        return self._read(seq, self._pos_at(seq - self._base))

    def get_seq_from_time(self, ts_ns: int) -> int:
        """First live sequence stored at or after wall time ``ts_ns``; last_seq + 1 when none
        (the reference's GetSeqFromTime; deliver_policy by_start_time, dedupe rebuild).
        A binary search over the timestamps, which are stored in time order."""
        self._check_open()
        if self._msgs == 0:
            return self._last + 1
        lo = self._first - self._base
        n = len(self._ts)
        i = lo + bisect_left(range(lo, n), ts_ns, key=self._ts_at)
        seq = self._next_live(self._base + i) if i < n else 0
        return seq or self._last + 1

    def iter_msgs(self, start_seq: int, end_seq: int) -> Iterator[StoreMsg]:
        """Live messages with start_seq <= seq <= end_seq, in order."""
        self._check_open()
        seq = max(start_seq, self._first)
        while True:
            seq = self._next_live(seq)
            if not seq or seq > end_seq:
                return
            try:
                yield self._read(seq, self._pos_at(seq - self._base))
            except MsgNotFound:
                pass
            seq += 1

    def load_filtered_run(self, start_seq: int, max_msgs: int, filters: list[str]) -> MsgRun:
        """The first ``max_msgs`` live messages at or after ``start_seq`` whose subject matches
        one of ``filters``, as one :class:`MsgRun` (a filtered consumer's delivery pass, as
        ``load_next_msg`` message after message would find them; a message found corrupt on
        read is skipped)."""
        self._check_open()
        runs: list[MsgRun] = []
        got = 0
        while got < max_msgs:
            cand = self._filtered_seqs(filters, start_seq, max_msgs - got)
            if not cand:
                break
            run = self._read_run(cand)
            runs.append(run)
            got += len(run.seqs)
            start_seq = cand[-1] + 1
        if len(runs) == 1:
            return runs[0]
        return _join_runs(runs)

    def _read_run(self, seqs: list[int]) -> MsgRun:
        """The messages at ``seqs`` (ascending), as ``_read`` reads them; one found corrupt (or
        gone) is left out. Stores that can read a run faster override this."""
        sms = []
        for seq in seqs:
            i = seq - self._base
            if self._pos[i] < 0:
                continue
            try:
                sms.append(self._read(seq, self._pos_at(i)))
            except MsgNotFound:
                continue
        hdrs = [sm.hdr for sm in sms]
        return MsgRun(
            [sm.seq for sm in sms],
            [sm.ts for sm in sms],
            [sm.subject.encode() for sm in sms],
            hdrs if hdrs.count(None) != len(hdrs) else None,
            [sm.msg for sm in sms],
        )

    def _filtered_seqs(self, filters: list[str], start: int, n: int) -> list[int]:
        """Up to ``n`` live sequences >= ``start`` whose subject matches one of ``filters``,
        ascending. A filter on a few subjects follows them (``_next_match``: C-level searches);
        on many (``plgd.*.<event>`` over 10,000 devices), windows of ``_sid`` are tested against
        the set of their ids in C (``compress``), not one entry per bytecode step."""
        if start < self._first:
            start = self._first
        if start > self._last or self._msgs == 0:
            return []
        if len(filters) == 1 and not is_all(filters[0]) and len(self._match_sids(filters[0])) <= _MULTI_SEARCH_MAX:
            out: list[int] = []
            f = filters[0]
            while len(out) < n:
                seq = self._next_match(f, start)
                if not seq:
                    break
                out.append(seq)
                start = seq + 1
            return out
        if any(map(is_all, filters)):
            arr, pred = self._pos, (-1).__lt__  # live: pos >= 0
        else:
            if len(filters) == 1 and not is_literal(filters[0]):
                want = self._want(filters[0])
            else:
                want = set()
                for f in filters:
                    want.update(self._match_sids(f))
            if not want:
                return []
            arr, pred = self._sid, want.__contains__
        base = self._base
        i = start - base
        end = min(self._last - base + 1, len(arr))
        step = max(8 * n, 4096)
        out = []
        while i < end and len(out) < n:
            j = min(i + step, end)
            out += compress(range(base + i, base + j), map(pred, arr[i:j]))
            i = j
        del out[n:]
        return out

    # ------------------------------------------------------------------ removing
    def remove_msg(self, seq: int) -> bool:
        self._check_open()
        return self._remove(seq)

    def erase_msg(self, seq: int) -> bool:
        self._check_open()
        return self._remove(seq, erase=True)

    def purge(self) -> int:
        """Remove everything; sequences continue at last_seq + 1."""
        self._check_open()
        return self._purge_to(self._last + 1)

    def _purge_to(self, first: int) -> int:
        """Remove every message and restart the (empty) stream at ``first`` (>= last + 1)."""
        purged, nbytes = self._msgs, self._bytes
        self._drop_all(first)
        last, last_ts = max(self._last, first - 1), self._last_ts
        self._reset_index(first)
        self._last = last
        self._last_ts = last_ts
        if self._cb is not None and (purged or nbytes):
            self._cb(-purged, -nbytes, 0, "")
        return purged

    def purge_ex(self, subject: str, seq: int, keep: int) -> int:
        """STREAM.PURGE with options (reference PurgeEx semantics)."""
        self._check_open()
        if is_all(subject):
            if keep == 0 and seq == 0:
                return self.purge()
            if seq > 1:
                return self.compact(seq)
            if keep > 0:
                if keep >= self._msgs:
                    return 0
                return self.compact(self._keep_newest_boundary(keep))
            return 0
        fs = self.filtered_state(1, subject)
        if fs.msgs == 0:
            return 0
        todo = fs.msgs
        if keep > 0:
            if keep >= fs.msgs:
                return 0
            todo -= keep
        last = seq - 1 if seq > 1 else fs.last
        purged = 0
        cur = fs.first
        while purged < todo:
            cur = self._next_match(subject, cur)
            if not cur or cur > last:
                break
            if self._remove(cur):
                purged += 1
            cur += 1
        return purged

    def _keep_newest_boundary(self, keep: int) -> int:
        """Sequence of the ``keep``-th newest live message (0 < keep < msgs). Counts messages,
        not sequences: with deleted sequences in the tail the newest ``keep`` messages span more
        than ``keep`` sequences. Each round counts the absent entries of the tail in C and widens
        it by what is missing; it converges in a few rounds."""
        base = self._base
        sid = self._sid
        b = self._last - keep + 1
        while True:
            i = b - base
            live = len(sid) - i - sid[i:].count(self._dead)
            if live >= keep:
                break
            b -= keep - live
        return self._next_live(b)

    def compact(self, seq: int) -> int:
        """Remove every message below ``seq``; returns how many."""
        self._check_open()
        if seq == 0:
            return self.purge()
        if self._first > seq:
            return 0
        if seq > self._last:
            return self._purge_to(seq)
        purged = nbytes = 0
        cur = self._first
        while self._msgs:
            cur = self._next_live(cur)
            if not cur or cur >= seq:
                break
            nbytes += self._size(cur - self._base)
            self._remove(cur, notify=False)
            purged += 1
            cur += 1
        if self._msgs == 0:
            self._first = max(self._first, seq)
            self._rebase(self._first)
        self._after_compact(seq)
        if self._cb is not None and purged:
            self._cb(-purged, -nbytes, 0, "")
        return purged

    def _after_compact(self, seq: int) -> None:
        """Hook: every sequence below ``seq`` is gone."""

    def truncate(self, seq: int) -> None:
        """Remove every message above ``seq``; last_seq becomes ``seq``."""
        self._check_open()
        if seq >= self._last:
            return
        purged = nbytes = 0
        i = self._last_live(self._last) if self._msgs else 0
        while i and i > seq:
            nbytes += self._size(i - self._base)
            self._remove(i, notify=False)
            purged += 1
            i = self._last_live(i - 1) if self._msgs else 0
        live_at = seq - self._base
        last_ts = self._last_ts
        if seq >= self._first and 0 <= live_at < len(self._pos) and self._pos[live_at] >= 0:
            last_ts = self._ts_at(live_at)
        self._last = seq
        self._last_ts = last_ts
        self._kl_from = 0
        keep = max(seq + 1 - self._base, 0)
        if self._msgs == 0:
            self._first = seq + 1
            self._first_ts = 0
            self._rebase(self._first)
        else:
            del self._pos[keep:]
            del self._sid[keep:]
            del self._ts[keep:]
            k = bisect_left(self._tss, self._base + keep)
            del self._tss[k:], self._tsb[k:]
            self._tsc = self._tsb[-1] if self._tsb else _NO_SEG
            k = bisect_left(self._pss, self._base + keep)
            del self._pss[k:], self._psh[k:]
            self._psc = self._psh[-1] if self._psh else _NO_SEG
            del self._sz[keep:]
            if self._nxt is not None:
                del self._nxt[keep:]
        slast, stale = self._slast, self._sstale
        for sid, name in enumerate(self._snames):
            if name is not None and slast[sid] > seq:
                stale[sid] |= _STALE_LAST
                # Recompute now: the next append links the chain from _slast, which must be a
                # slot that still exists.
                self._subject_last(sid)
        self._on_truncate(seq)
        if self._cb is not None and purged:
            self._cb(-purged, -nbytes, 0, "")

    def expire(self, now_ns: int) -> int:
        """Remove messages past max_age or their own TTL at wall time ``now_ns``."""
        self._check_open()
        removed = 0
        max_age = self.config.max_age_ns
        if max_age > 0 and self._msgs:
            cutoff = now_ns - max_age
            keep_last = self._age_keep_last
            seq = max(self._first, self._kl_from) if keep_last else self._first
            ttl = self._ttl
            if keep_last:
                removed += self._expire_due(cutoff)
            while self._msgs:
                seq = self._next_live(seq)
                if not seq or self._ts_at(seq - self._base) > cutoff:
                    break
                if ttl and ttl.get(seq) == NEVER_EXPIRES:
                    seq += 1
                    continue
                if keep_last and self._subject_last(self._sid[seq - self._base]) == seq:
                    seq += 1
                    continue
                self._remove(seq)
                removed += 1
                seq += 1
            if keep_last:
                self._kl_from = seq or self._last + 1
        heap = self._ttl_heap
        while heap and heap[0][0] <= now_ns:
            exp, seq = heapq.heappop(heap)
            if self._ttl.get(seq) == exp and self._remove(seq):
                removed += 1
        return removed

    def _next_due(self) -> int:
        """The lowest live, no longer kept, sequence of _kl_due (0: none); drops the others."""
        due = self._kl_due
        base = self._base
        pos = self._pos
        ttl = self._ttl
        while due:
            s0 = due[0]
            i = s0 - base
            if (
                i < 0
                or i >= len(pos)
                or pos[i] < 0
                or (ttl and ttl.get(s0) == NEVER_EXPIRES)
                or self._subject_last(self._sid[i]) == s0
            ):
                heapq.heappop(due)  # gone, or kept again (a newer message pushes it back)
                continue
            return s0
        return 0

    def _expire_due(self, cutoff: int) -> int:
        """Remove the messages of _kl_due stored at or before ``cutoff``."""
        n = 0
        while True:
            s0 = self._next_due()
            if not s0 or self._ts_at(s0 - self._base) > cutoff:
                return n
            heapq.heappop(self._kl_due)
            self._remove(s0)
            n += 1

    def next_expiry(self) -> int:
        """Wall time (Unix ns) of the next expiry, 0 when nothing will expire."""
        nxt = 0
        max_age = self.config.max_age_ns
        if max_age > 0 and self._msgs:
            seq = self._first
            if self._age_keep_last:
                seq = self._next_live(max(seq, self._kl_from))
                ttl = self._ttl
                while seq and (
                    (ttl and ttl.get(seq) == NEVER_EXPIRES) or self._subject_last(self._sid[seq - self._base]) == seq
                ):
                    seq = self._next_live(seq + 1)
                self._kl_from = seq or self._last + 1
                due = self._next_due()
                if due and (not seq or due < seq):
                    seq = due
            elif self._ttl:
                while seq and self._ttl.get(seq) == NEVER_EXPIRES:
                    seq = self._next_live(seq + 1)
            if seq:
                nxt = self._ts_at(seq - self._base) + max_age
        heap = self._ttl_heap
        while heap and self._ttl.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        if heap and (not nxt or heap[0][0] < nxt):
            nxt = heap[0][0]
        return nxt

    # ------------------------------------------------------------------ state
    def state(self, deleted_details: bool = False) -> StreamState:
        """Counters only (cheap); ``deleted`` is computed only when asked for."""
        st = StreamState(
            msgs=self._msgs,
            bytes=self._bytes,
            first_seq=self._first,
            first_ts=self._first_ts,
            last_seq=self._last,
            last_ts=self._last_ts,
            num_subjects=len(self._sid_of),
        )
        if self._msgs:
            st.num_deleted = self._last - self._first + 1 - self._msgs
        if deleted_details:
            st.deleted = self._deleted_list() if st.num_deleted else []
        if self._lost_msgs or self._lost_bytes:
            st.lost_msgs = list(self._lost_msgs)
            st.lost_bytes = self._lost_bytes
        return st

    def _deleted_list(self) -> list[int]:
        base = self._base
        pos = self._pos
        lo = self._first - base
        hi = min(self._last - base + 1, len(pos))
        out = [base + i for i in range(lo, hi) if pos[i] < 0]
        # Sequences above the arrays (trailing skips) are absent too.
        out.extend(range(base + max(hi, lo), self._last + 1))
        return out

    def filtered_state(self, seq: int, subject: str) -> SimpleState:
        """Count/first/last of live messages with seq >= ``seq`` matching ``subject``."""
        self._check_open()
        out = SimpleState()
        if self._msgs == 0:
            return out
        if seq < self._first:
            seq = self._first
        if seq > self._last:
            return out
        base = self._base
        if is_all(subject):
            first = self._next_live(seq)
            if not first:
                return out
            if first == self._first:
                out.msgs = self._msgs
            else:
                tail = self._sid[first - base :]
                out.msgs = len(tail) - tail.count(self._dead)
            out.first = first
            out.last = self._last_live(self._last)
            return out
        sids = self._match_sids(subject)
        if len(sids) > _MULTI_SEARCH_MAX and (self._last - seq + 1) < 8 * len(sids):
            # Many subjects, few sequences to look at (a consumer on plgd.*.<event> counting
            # what arrived since it last counted): one C-level pass over that stretch of _sid
            # instead of a look at every subject's first and last.
            self._count_stretch(out, seq, self._want(subject))
            return out
        partial = []  # subjects with messages before seq too: counted in the tail
        for sid in sids:
            last = self._subject_last(sid)
            if last < seq:
                continue
            if last > out.last:
                out.last = last
            first = self._subject_first(sid)
            if first < seq:
                partial.append(sid)
                continue
            out.msgs += self._smsgs[sid]
            if not out.first or first < out.first:
                out.first = first
        if partial:
            self._count_tail(out, seq, partial)
        return out

    def _want(self, filter: str) -> set[int]:
        """The ids of the subjects matching wildcard ``filter``, as a set kept with the cached
        list (``_match_entry``)."""
        hit = self._match_entry(filter)
        if hit[3] is None:
            hit[3] = set(hit[2])
        return hit[3]

    def _count_stretch(self, out: SimpleState, seq: int, want: set[int]) -> None:
        """``out``: count, first and last of the sequences from ``seq`` to the last whose
        subject id is in ``want`` (dead entries have none)."""
        base = self._base
        hits = list(
            compress(range(seq, self._last + 1), map(want.__contains__, self._sid[seq - base : self._last - base + 1]))
        )
        if hits:
            out.msgs = len(hits)
            out.first = hits[0]
            out.last = hits[-1]

    def _count_tail(self, out: SimpleState, seq: int, sids: list[int]) -> None:
        """Add to ``out`` the messages from ``seq`` on of subjects ``sids`` (each has some
        before ``seq`` too). A few: a scan of the tail each; many (a consumer on
        ``plgd.*.<event>`` over thousands of devices, asked for its pending count): one count of
        the whole tail and a scan to the first match, not a scan per subject."""
        base = self._base
        arr = self._sid
        first = 0
        if len(sids) <= 8:
            for sid in sids:
                f = base + arr.index(sid, seq - base)
                out.msgs += arr[seq - base :].count(sid)
                if not first or f < first:
                    first = f
        else:
            tail = arr[seq - base :]
            counts = Counter(tail)
            out.msgs += sum(map(counts.__getitem__, sids))
            want = set(sids)
            for i, sid in enumerate(tail):
                if sid in want:
                    first = seq + i
                    break
        if first and (not out.first or first < out.first):
            out.first = first

    def subjects_state(self, filter: str) -> dict[str, SimpleState]:
        self._check_open()
        out: dict[str, SimpleState] = {}
        sids = self._sid_of.values() if is_all(filter) else self._match_sids(filter)
        for sid in list(sids):
            out[self._snames[sid]] = SimpleState(self._smsgs[sid], self._subject_first(sid), self._subject_last(sid))
        return out

    def subjects_totals(self, filter: str) -> dict[str, int]:
        self._check_open()
        if is_all(filter):
            smsgs = self._smsgs
            return {name: smsgs[sid] for name, sid in self._sid_of.items()}
        return {self._snames[sid]: self._smsgs[sid] for sid in self._match_sids(filter)}

    def num_pending(self, start_seq: int, filter: str, last_per_subject: bool) -> int:
        self._check_open()
        if not last_per_subject:
            return self.filtered_state(start_seq, filter).msgs
        sids = self._sid_of.values() if is_all(filter) else self._match_sids(filter)
        return sum(1 for sid in list(sids) if self._subject_last(sid) >= start_seq)

    def multi_last_seqs(self, filters: list[str], max_seq: int) -> list[int]:
        self._check_open()
        sids: set[int] = set()
        for f in filters:
            if is_all(f):
                sids.update(self._sid_of.values())
            else:
                sids.update(self._match_sids(f))
        out = []
        for sid in sids:
            last = self._subject_last(sid)
            if max_seq and last > max_seq:
                first = self._subject_first(sid)
                if first > max_seq:
                    continue
                i = max_seq - self._base
                while self._sid[i] != sid:
                    i -= 1
                last = self._base + i
            out.append(last)
        out.sort()
        return out

    # ------------------------------------------------------------------ lifecycle
    def update_config(self, config: StoreConfig) -> None:
        """Apply new limits now (discard old)."""
        self._check_open()
        self.config = config
        maxp = config.max_msgs_per_subject
        if maxp > 0:
            for sid in list(self._sid_of.values()):
                # (a subject emptied is freed: its count is 0 then)
                while self._smsgs[sid] > maxp:
                    self._remove(self._subject_first(sid))
        if config.discard == DiscardPolicy.OLD:
            if config.max_msgs > 0:
                while self._msgs > config.max_msgs:
                    self._remove(self._first)
            if config.max_bytes > 0:
                while self._bytes > config.max_bytes:
                    self._remove(self._first)

    def register_storage_updates(self, handler: StorageUpdateHandler) -> None:
        self._cb = handler

    def _iter_index(self) -> Iterable[tuple[int, int]]:
        """(seq, pos) of every live message, in order."""
        base = self._base
        for i, pos in enumerate(self._pos):
            if pos >= 0:
                yield base + i, self._hi_at(i) << 32 | pos
