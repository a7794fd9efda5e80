"""Atomic batch publish (``allow_atomic``): several publishes stored all together or not at all.

Wire (headers on ordinary publishes to the stream's subjects, as nats-server 2.12+ takes them)::

    Nats-Batch-Id: <id, at most 64 bytes>
    Nats-Batch-Sequence: 1, 2, 3, ...           (decimal; missing or not a number: 10175)
    Nats-Batch-Commit: 1                        (on the last message: commit, it is stored)
    Nats-Batch-Commit: eob                      (end of batch: commit, this message is dropped)

A message without commit is staged and answered with an empty message (when it has a reply
subject); the commit is answered with ``{"stream":"S","seq":<last>,"batch":"<id>","count":<n>}``
or with the error that abandoned the batch. What is refused, in the reference's order (the
first failing rule answers; a refused batch is forgotten, and later messages of it get 10176):

* per message: sealed (10026), server / account storage limits (10023 / 10002), atomic publish
  disabled (10174), id longer than 64 (10179), no sequence (10175), an unknown batch with a
  sequence other than 1 (10199 when the sequence is beyond ``max_msgs``, else 10176), too many
  open batches on the stream or the server (10210), a commit value other than ``1``/``eob``
  (10200), ``Nats-Required-Api-Level`` above ours (10185), a sequence gap or an ``eob`` on
  message 1 (10176), more than ``max_msgs`` messages (10199);
* at the commit, every staged message in order: ``Nats-Expected-Last-Msg-Id`` (10177), then the
  checks of a normal publish seen through the batch (counters, expected stream, TTL, msg ids --
  a repeat inside the batch or of a stored id is 10201 --, expected last sequence -- only on the
  first message, else 10164 --, expected last subject sequence -- not on a subject the batch
  already wrote, 10164 --, rollups -- ``sub`` only on the subject's first message, ``all`` only
  on the batch's first --, and discard-new limits counted with the staged messages).

Limits (``BatchLimits``, the reference's defaults): 1,000 messages per batch, 50 open batches
per stream, 1,000 per server (process), 10 s without a message abandons a batch; set with
``jetstream { limits { batch { max_msgs, max_inflight_per_stream, max_inflight_total,
timeout } } }`` as in nats-server (the inflight limits and timeout also apply to fast batches). Abandoned
batches are announced on ``$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.<stream>``
(``io.nats.jetstream.advisory.v1.stream_batch_abandoned``, ``reason`` ``timeout`` /
``incomplete`` / ``large`` / ``unsupported``).

Durability. Staged messages live only in memory (the reference R1 file stream stages them in a
scratch file store; a restart forgets an uncommitted batch either way: it was never
acknowledged). The commit stores every message in one synchronous step: they land in the store's
pending buffer together and reach the OS with the loop turn's one ``pwrite``, before the PubAck.
The messages keep their ``Nats-Batch-Id`` / ``Nats-Batch-Sequence`` headers and the last one
carries ``Nats-Batch-Commit: 1`` (as the reference stores them), which lets a restart tell a
torn batch: :func:`repair_torn_batch` removes a batch whose last stored message is not its
commit (a ``kill -9`` inside a large ``pwrite``, or between the blocks of a batch that rolled
the block file over). What a power loss could still do: with ``sync_always`` off the page cache
may reach the disk out of order, so a record in the middle of a batch may be lost while later
ones survive; recovery drops that record (reported in ``lost``) and the rest of that batch
stays. Only ``sync_always`` (one fsync per loop turn) rules that out.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from natsd.jetstream.stream import counters
from natsd.jetstream.advisories import ADVISORY_PREFIX
from natsd.jetstream.errors import ApiError, ApiErrors
from natsd.jetstream.config.batch_limits import DEFAULT_LIMITS, BatchLimits, batch_limits_for
from natsd.jetstream.config.models import SECOND, rfc3339
from natsd.jetstream.wire import dumps, parse_ttl, required_level_too_high
from natsd import nats_headers as NH
from natsd.nuid import nuid
from natsd.protocol.headers import get_header_bytes, nats_headers, remove_header, replace_header
from natsd.store.base import MsgNotFound, StoreEOF, StoreError
from natsd.store.file.record import file_store_msg_size
from natsd.store.memory import mem_store_msg_size
from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Clock, Timer
    from natsd.jetstream.config.models import StreamConfig
    from natsd.jetstream.stream.fastbatch import FastBatches
    from natsd.jetstream.views import AccountView
    from natsd.store.base import StoreError as _StoreError, StreamStore

__all__ = [
    "BatchLimits",
    "DEFAULT_LIMITS",
    "batch_limits_for",
    "AtomicBatches",
    "on_batch_msg",
    "repair_torn_batch",
    "Checks",
    "Duplicate",
    "store_one",
    "kick_flush",
    "H_BATCH_ID",
    "H_BATCH_SEQ",
    "H_BATCH_COMMIT",
    "inflight_total",
]

log = logging.getLogger("natsd.jetstream.batch")

H_BATCH_ID = NH.BATCH_ID
H_BATCH_SEQ = NH.BATCH_SEQ
H_BATCH_COMMIT = NH.BATCH_COMMIT
H_REQUIRED_API_LEVEL = NH.REQUIRED_API_LEVEL
ADVISORY_ABANDONED = ADVISORY_PREFIX + "STREAM.BATCH_ABANDONED."
MAX_ID_LEN = 64
_BATCH_HEADERS = frozenset((H_BATCH_ID, H_BATCH_SEQ, H_BATCH_COMMIT))


# Open batches of the whole process (the reference counts them per process, across accounts).
_inflight = [0]


def inflight_total() -> int:
    return _inflight[0]


class BatchStream(counters.CounterStream, Protocol):
    """What atomic and fast batches need of their stream: the publish path's own members (the
    checks, dedupe, rollups, republish and PubAcks that a message published alone goes
    through, :mod:`natsd.jetstream.stream.ingest`), the turn's flush flags, and the server-wide
    usage figures the storage limit is checked against. Batches are part of the publish path,
    so this view is wider than the others; it still keeps them from naming the class."""

    name: str
    config: "StreamConfig"
    store: "StreamStore"
    clock: "Clock"
    lseq: int
    lmsg_id: str
    batches: "AtomicBatches | None"
    _flush_scheduled: bool
    _new_msgs: bool
    _dedupe_pending: bool
    _counted: int
    _used: list[int]
    _ut: int
    _max_used: int

    @property
    def account(self) -> "AccountView": ...

    @property
    def _ack_prefix(self) -> bytes: ...

    @property
    def _do_ack(self) -> bool: ...

    @property
    def _interest(self) -> bool: ...

    @property
    def _sdm_ttl_s(self) -> int: ...

    @property
    def _call_soon(self) -> Callable[[Callable[[], None]], None]: ...

    def _flush(self) -> None: ...

    def _respond(self, reply: str, data: bytes) -> None: ...

    def _reject(self, reply: str, err: ApiError) -> None: ...

    def _store_failed(self, reply: str, e: "_StoreError") -> None: ...

    def _check_msg_id(self, msg_id: str) -> int: ...

    def _store_msg_id(self, msg_id: str, seq: int, ts: int) -> None: ...

    def _rebuild_dedupe(self) -> None: ...

    def _has_interest(self, subject: str) -> bool: ...

    def skip_uninterested(self, subject: str, msg_id: str, rollup: bytes) -> int: ...

    def _rollup(self, subject: str, kind: bytes, keep: int) -> None: ...

    def _republish(self, subject: str, hdr: bytes | None, payload: bytes, seq: int, ts: int, tlseq: int) -> None: ...


class _Batch:
    __slots__ = ("id", "msgs", "deadline", "timer")

    def __init__(self, batch_id: str, deadline: int) -> None:
        self.id = batch_id
        # (subject, headers, body, its Nats-* headers) as published
        self.msgs: list[tuple[str, bytes, bytes, dict[bytes, bytes]]] = []
        self.deadline = deadline  # monotonic ns; a message moves it on
        self.timer: Timer | None = None


def _parse_seq(v: bytes | None) -> int | None:
    # parseUint64: decimal digits only (an empty value is no sequence)
    return int(v) if v and v.isdigit() else None


class AtomicBatches:
    """The open batches of one stream (``stream.batches``): atomic ones here, fast ones in
    ``fast`` (natsd.jetstream.stream.fastbatch)."""

    def __init__(self, stream: BatchStream, limits: BatchLimits = DEFAULT_LIMITS) -> None:
        self.stream = stream
        self.limits = limits
        self.open: dict[str, _Batch] = {}
        self.fast: FastBatches | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def _forget(self, b: _Batch) -> None:
        if self.open.pop(b.id, None) is b:
            _inflight[0] -= 1
        if b.timer is not None:
            b.timer.cancel()
            b.timer = None

    def clear(self) -> None:
        """Drop every open batch (stream stopped or deleted)."""
        for b in list(self.open.values()):
            self._forget(b)
        if self.fast is not None:
            self.fast.clear()

    def config_changed(self) -> None:
        """The stream's config changed: batches of a kind turned off are dropped."""
        cfg = self.stream.config
        if not cfg.allow_atomic:
            for b in list(self.open.values()):
                self._forget(b)
        if self.fast is not None and not cfg.allow_batched:
            self.fast.clear()

    def _arm(self, b: _Batch) -> None:
        clock = self.stream.clock
        b.timer = clock.call_later(max(b.deadline - clock.monotonic_ns(), 0), lambda: self._expire(b))

    def _expire(self, b: _Batch) -> None:
        b.timer = None
        if self.open.get(b.id) is not b:
            return
        now = self.stream.clock.monotonic_ns()
        if now < b.deadline:  # a message came meanwhile: one timer per batch, re-armed lazily
            self._arm(b)
            return
        self._forget(b)
        self._advise(b.id, "timeout")

    def _advise(self, batch_id: str, reason: str) -> None:
        stream = self.stream
        acct = stream.account

        def build() -> dict:
            adv = {
                "type": "io.nats.jetstream.advisory.v1.stream_batch_abandoned",
                "id": nuid(),
                "timestamp": rfc3339(acct.clock.time_ns()),
                "stream": stream.name,
            }
            if acct.engine.domain:
                adv["domain"] = acct.engine.domain
            adv["batch"] = batch_id
            adv["reason"] = reason
            return adv

        acct.send_advisory(ADVISORY_ABANDONED + stream.name, build)

    # -- one message -------------------------------------------------------------------------------
    def on_msg(self, subject: str, reply: str, hdr: bytes, payload: bytes, h: dict[bytes, bytes]) -> int:
        """A publish carrying ``Nats-Batch-Id`` (``h``: its ``Nats-*`` headers). Returns the
        last sequence stored by a commit, else 0."""
        stream = self.stream
        try:
            return self._on_msg(subject, reply, hdr, payload, h)
        except ApiError as err:
            stream._reject(reply, err)
            return 0

    def _on_msg(self, subject: str, reply: str, hdr: bytes, payload: bytes, h: dict[bytes, bytes]) -> int:
        stream = self.stream
        cfg = stream.config
        lim = self.limits
        if stream._used[stream._ut] + stream.store.bytes_used - stream._counted > stream._max_used:
            stream.account.engine.resources_exceeded(cfg.storage)
            raise ApiErrors.INSUFFICIENT_RESOURCES()
        acct = stream.account
        if acct.limits_enforced:
            err = acct.check_store_limits(cfg.storage, len(subject) + len(hdr) + len(payload))
            if err is not None:
                raise err
        if not cfg.allow_atomic:
            raise ApiErrors.ATOMIC_PUBLISH_DISABLED()
        batch_id = h[H_BATCH_ID].decode("utf-8", "replace")
        if len(h[H_BATCH_ID]) > MAX_ID_LEN:
            raise ApiErrors.ATOMIC_PUBLISH_INVALID_BATCH_ID()
        seq = _parse_seq(h.get(H_BATCH_SEQ))
        if seq is None:
            raise ApiErrors.ATOMIC_PUBLISH_MISSING_SEQ()
        c = h.get(H_BATCH_COMMIT)
        commit = c is not None
        eob = c == b"eob"
        commit_invalid = commit and not eob and c != b"1"

        b = self.open.get(batch_id)
        now = stream.clock.monotonic_ns()
        if b is None:
            if seq != 1:
                if seq - (1 if eob else 0) > lim.max_msgs:
                    raise ApiErrors.ATOMIC_PUBLISH_TOO_LARGE_BATCH(size=lim.max_msgs)
                raise ApiErrors.ATOMIC_PUBLISH_INCOMPLETE_BATCH()
            if len(self.open) + 1 > lim.max_inflight_per_stream or _inflight[0] + 1 > lim.max_inflight_total:
                raise ApiErrors.ATOMIC_PUBLISH_TOO_MANY_INFLIGHT()
            b = _Batch(batch_id, now + lim.timeout_ns)
            self.open[batch_id] = b
            _inflight[0] += 1
            self._arm(b)
        if commit_invalid:
            self._forget(b)
            raise ApiErrors.ATOMIC_PUBLISH_INVALID_BATCH_COMMIT()
        if H_REQUIRED_API_LEVEL in h:
            if required_level_too_high(hdr):
                self._forget(b)
                self._advise(batch_id, "unsupported")
                raise ApiErrors.REQUIRED_API_LEVEL()
            hdr = remove_header(hdr, H_REQUIRED_API_LEVEL)
        b.deadline = now + lim.timeout_ns
        if len(b.msgs) + 1 != seq or (seq == 1 and eob):
            self._forget(b)
            self._advise(batch_id, "incomplete")
            raise ApiErrors.ATOMIC_PUBLISH_INCOMPLETE_BATCH()
        if seq - (1 if eob else 0) > lim.max_msgs:
            self._forget(b)
            self._advise(batch_id, "large")
            raise ApiErrors.ATOMIC_PUBLISH_TOO_LARGE_BATCH(size=lim.max_msgs)
        if not eob:
            b.msgs.append((subject, hdr, payload, h))
        if not commit:
            if reply and stream._do_ack:
                stream._respond(reply, b"")  # staged: the reference answers with an empty message
            return 0
        self._forget(b)
        return self._commit(b, reply, eob)

    # -- the commit --------------------------------------------------------------------------------
    def _commit(self, b: _Batch, reply: str, eob: bool) -> int:
        """Check every staged message as the reference does, then store them all in one step."""
        stream = self.stream
        msgs = b.msgs
        if eob:
            # The last stored message is the commit (as the reference rewrites it).
            subj, hdr, body, h = msgs[-1]
            msgs[-1] = (subj, counters.set_header(hdr, H_BATCH_COMMIT, b"1"), body, h)
        checked = Checks(stream).run(msgs)
        return _store_all(stream, b.id, checked, reply)


class Duplicate(Exception):
    """A fast-batch message whose ``Nats-Msg-Id`` is already stored (at ``seq``)."""

    def __init__(self, seq: int) -> None:
        super().__init__(seq)
        self.seq = seq


# the header names the per-message checks look up (module globals, as the literals were)
_H_EXPECTED_LAST_MSG_ID = NH.EXPECTED_LAST_MSG_ID
_H_EXPECTED_LAST_SEQ = NH.EXPECTED_LAST_SEQ
_H_EXPECTED_LAST_SUBJ_SEQ = NH.EXPECTED_LAST_SUBJ_SEQ
_H_EXPECTED_LAST_SUBJ_SEQ_SUBJ = NH.EXPECTED_LAST_SUBJ_SEQ_SUBJ
_H_EXPECTED_STREAM = NH.EXPECTED_STREAM
_H_MSG_ID = NH.MSG_ID
_H_ROLLUP = NH.ROLLUP
_H_TTL = NH.TTL
_S_EXPECTED_LAST_MSG_ID = NH.EXPECTED_LAST_MSG_ID.decode()


class Checks:
    """The consistency checks of a whole batch before anything is stored (the reference's
    ``checkMsgHeadersPreClusteredProposal`` seen from a single server). ``atomic`` False: one
    fast-batch message (no 10177 rule; a stored msg id raises :class:`Duplicate`)."""

    def __init__(self, stream: BatchStream, atomic: bool = True) -> None:
        self.stream = stream
        self.atomic = atomic
        self.msg_ids: set[str] = set()
        self.running: counters.Running = {}
        self.inflight: dict[str, list[int]] = {}  # subject -> [count, bytes]
        self.expected: dict[str, int] = {}  # subject -> checked last sequence
        self.last_val = ""  # the counter value of the last message checked
        self.count = 0  # messages checked
        self.nbytes = 0  # their stored size (discard new only)

    def run(
        self, msgs: list[tuple[str, bytes, bytes, dict[bytes, bytes]]]
    ) -> list[tuple[str, bytes | None, bytes, int, str, bytes]]:
        """[(subject, headers, body, ttl seconds, msg id, rollup)] to store, or raises the
        first message's error."""
        out: list[tuple[str, bytes | None, bytes, int, str, bytes]] = []
        one = self.one
        plain = not self.stream.config.allow_msg_counter and self.stream.config.discard != "new"
        for subject, hdr, body, h in msgs:
            if plain and all(k in _BATCH_HEADERS for k in h):
                # nothing but the batch's own headers: no rule applies but the subject's count
                cur = self.inflight.get(subject)
                if cur is None:
                    self.inflight[subject] = [1, 0]
                else:
                    cur[0] += 1
                self.count += 1
                out.append((subject, hdr, body, 0, "", b""))
            else:
                out.append(one(subject, hdr, body, h))
        return out

    def one(
        self, subject: str, hdr: bytes | None, body: bytes, h: dict[bytes, bytes] | None = None
    ) -> tuple[str, bytes | None, bytes, int, str, bytes]:
        stream = self.stream
        cfg = stream.config
        if h is None:
            h = nats_headers(hdr) if hdr else {}
        if self.atomic and h.get(_H_EXPECTED_LAST_MSG_ID):
            raise ApiErrors.ATOMIC_PUBLISH_UNSUPPORTED_HEADER_BATCH(header=_S_EXPECTED_LAST_MSG_ID)
        incr = counters.check_incr(h, body, cfg.allow_msg_counter, False)
        v = h.get(_H_EXPECTED_STREAM)
        if v and v.decode("utf-8", "replace") != stream.name:
            raise ApiErrors.STREAM_NOT_MATCH()
        ttl = 0
        v = h.get(_H_TTL)
        if v:
            try:
                ttl = parse_ttl(v.decode("utf-8", "replace"))
                bad = False
            except ApiError:
                bad = True
            if (ttl != 0 or bad) and not cfg.allow_msg_ttl:
                raise ApiErrors.MESSAGE_TTL_DISABLED()
            if bad:
                raise ApiErrors.MESSAGE_TTL_INVALID()
        msg_id = ""
        v = h.get(_H_MSG_ID)
        if v:
            msg_id = v.decode("utf-8", "replace")
            if msg_id in self.msg_ids:
                raise ApiErrors.ATOMIC_PUBLISH_CONTAINS_DUPLICATE_MESSAGE()
            if stream._dedupe_pending:
                stream._rebuild_dedupe()
            dup = stream._check_msg_id(msg_id)
            if dup:
                if not self.atomic:
                    raise Duplicate(dup)
                raise ApiErrors.ATOMIC_PUBLISH_CONTAINS_DUPLICATE_MESSAGE()
            self.msg_ids.add(msg_id)
        if counters.H_STREAM_SOURCE in h:
            raise ApiErrors.MESSAGE_SOURCE_HDR_NOT_ALLOWED()
        new_hdr: bytes | None = hdr
        if cfg.allow_msg_counter:
            if incr is None:
                raise ApiErrors.MESSAGE_INCR_MISSING()
            new_hdr, body, self.last_val = counters.apply_incr(stream, subject, hdr, b"", incr, self.running)
            mms = cfg.max_msg_size
            if mms >= 0 and (len(new_hdr or b"") > mms or len(body) > mms - len(new_hdr or b"")):
                raise ApiErrors.STREAM_MESSAGE_EXCEEDS_MAXIMUM()
        staged = self.count
        v = h.get(_H_EXPECTED_LAST_SEQ)
        if v:
            want = int(v) if v.isdigit() else -1
            if want != stream.lseq + staged:
                raise ApiErrors.STREAM_WRONG_LAST_SEQUENCE(seq=stream.lseq + staged)
            if staged:
                raise ApiErrors.STREAM_WRONG_LAST_SEQUENCE_CONSTANT()
        v = h.get(_H_EXPECTED_LAST_SUBJ_SEQ)
        if v:
            want = int(v) if v.isdigit() else -1
            ssubj = h.get(_H_EXPECTED_LAST_SUBJ_SEQ_SUBJ)
            check_subj = ssubj.decode("utf-8", "replace") if ssubj else subject
            if check_subj in self.inflight:
                raise ApiErrors.STREAM_WRONG_LAST_SEQUENCE_CONSTANT()
            known = self.expected.get(check_subj)
            if known is not None:
                if known != want:
                    raise ApiErrors.STREAM_WRONG_LAST_SEQUENCE(seq=known)
            else:
                try:
                    fseq = stream.store.load_last_msg(check_subj).seq
                except (MsgNotFound, StoreEOF):
                    fseq = 0
                if fseq != want:
                    raise ApiErrors.STREAM_WRONG_LAST_SEQUENCE(seq=fseq)
                self.expected[check_subj] = fseq
        elif h.get(_H_EXPECTED_LAST_SUBJ_SEQ_SUBJ):
            raise ApiErrors.STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_INVALID()
        rollup = (h.get(_H_ROLLUP) or b"").lower()  # case-insensitive (nats-server's getRollup)
        if rollup:
            if not (cfg.allow_rollup_hdrs and not cfg.deny_purge):
                raise ApiErrors.STREAM_ROLLUP_FAILED(err="rollup not permitted")
            if rollup == b"sub":
                if subject in self.inflight:
                    raise ApiErrors.STREAM_ROLLUP_FAILED(err="batch rollup sub invalid")
            elif rollup == b"all":
                if self.inflight:
                    raise ApiErrors.STREAM_ROLLUP_FAILED(err="batch rollup all invalid")
            else:
                raise ApiErrors.STREAM_ROLLUP_FAILED(
                    err="rollup value invalid: " + dumps(rollup.decode("utf-8", "replace")).decode()
                )
        cur = self.inflight.get(subject)
        if cur is None:
            cur = self.inflight[subject] = [0, 0]
        cur[0] += 1
        self.count += 1
        if cfg.discard == "new":
            size = (mem_store_msg_size if cfg.storage == "memory" else file_store_msg_size)(subject, new_hdr, body)
            cur[1] += size
            self.nbytes += size
            self._discard_new(subject, rollup, cur[0])
        return subject, new_hdr, body, ttl, msg_id, rollup

    def _discard_new(self, subject: str, rollup: bytes, subject_ops: int) -> None:
        cfg = self.stream.config
        if cfg.max_msgs > 0 or cfg.max_bytes > 0:
            st = self.stream.store.state()
            msgs = st.msgs + self.count
            nbytes = st.bytes + self.nbytes
            if cfg.max_msgs > 0 and msgs > cfg.max_msgs:
                raise ApiErrors.STREAM_STORE_FAILED(err="maximum messages exceeded")
            if cfg.max_bytes > 0 and nbytes > cfg.max_bytes:
                raise ApiErrors.STREAM_STORE_FAILED(err="maximum bytes exceeded")
        if cfg.discard_new_per_subject and cfg.max_msgs_per_subject > 0 and not rollup:
            have = self.stream.store.subjects_totals(subject).get(subject, 0)
            if have + subject_ops > cfg.max_msgs_per_subject:
                raise ApiErrors.STREAM_STORE_FAILED(err="maximum messages per subject exceeded")


def _store_all(stream: BatchStream, batch_id: str, checked: list, reply: str) -> int:
    """Store a checked batch in one synchronous step (one write at the turn's flush) and answer
    the commit. A store refusal part way (it should not happen after the checks) takes back
    what this batch stored, so nothing partial stays."""
    store = stream.store
    before = stream.lseq
    last = 0
    try:
        for subject, hdr, body, ttl, msg_id, rollup in checked:
            last = store_one(stream, subject, hdr, body, ttl, msg_id, rollup)
    except StoreError as e:
        if stream.lseq > before or store.state().last_seq > before:
            try:
                store.truncate(before)
            except StoreError:
                log.exception("stream %s: taking back a failed batch", stream.name)
            stream.lseq = store.state().last_seq
        stream._store_failed(reply, e)
        return 0
    kick_flush(stream)
    if reply and stream._do_ack:
        stream._respond(
            reply,
            stream._ack_prefix
            + str(last).encode()
            + b',"batch":'
            + dumps(batch_id)
            + b',"count":'
            + str(len(checked)).encode()
            + b"}",
        )
    return last


def kick_flush(stream: BatchStream) -> None:
    """Make sure the stream's end-of-turn flush runs (it writes what was stored, then acks)."""
    if not stream._flush_scheduled:
        stream._flush_scheduled = True
        stream._call_soon(stream._flush)


def store_one(
    stream: BatchStream, subject: str, hdr: bytes | None, body: bytes, ttl: int, msg_id: str, rollup: bytes
) -> int:
    """Store one checked message of a batch as the stream's publish path stores a message
    (interest skip, delete-marker TTL floor, msg id, rollup, republish)."""
    cfg = stream.config
    if stream._interest and not stream._has_interest(subject):
        return stream.skip_uninterested(subject, msg_id, rollup)
    if ttl > 0 and stream._sdm_ttl_s and cfg.max_msgs_per_subject != 1 and ttl < stream._sdm_ttl_s:
        ttl = stream._sdm_ttl_s
        hdr = replace_header(hdr, _H_TTL, str(ttl).encode())
    tlseq = 0
    if cfg.republish:
        try:
            tlseq = stream.store.load_last_msg(subject).seq
        except (MsgNotFound, StoreEOF):
            tlseq = 0
    seq, ts = stream.store.store_msg(subject, hdr, body, ttl * SECOND if ttl > 0 else ttl)
    stream.lseq = seq
    stream.lmsg_id = msg_id
    if msg_id:
        stream._store_msg_id(msg_id, seq, ts)
    stream.account.note_stored(cfg.storage, len(subject) + (len(hdr) if hdr else 0) + len(body))
    if rollup:
        stream._rollup(subject, rollup, 1)
    if cfg.republish:
        stream._republish(subject, hdr, body, seq, ts, tlseq)
    stream._new_msgs = True
    return seq


def on_batch_msg(
    stream: BatchStream, subject: str, reply: str, hdr: bytes, payload: bytes, h: dict[bytes, bytes]
) -> int:
    """The stream's hook for a publish with ``Nats-Batch-Id``."""
    batches = stream.batches
    if batches is None:
        batches = stream.batches = AtomicBatches(stream, stream.account.engine.batch_limits)
    return batches.on_msg(subject, reply, hdr, payload, h)


def repair_torn_batch(stream: BatchStream) -> int:
    """At start: when the stream's last message belongs to a batch but is not its commit, the
    batch was torn by a crash inside its write; remove it (it was never acknowledged). Returns
    the number of messages removed."""
    store = stream.store
    st = store.state()
    if st.msgs == 0:
        return 0
    try:
        last = store.load_prev_msg(st.last_seq)
    except StoreError:
        return 0
    if not last.hdr or get_header_bytes(last.hdr, H_BATCH_ID) is None:
        return 0
    if get_header_bytes(last.hdr, H_BATCH_COMMIT) is not None:
        return 0
    bseq = _parse_seq(get_header_bytes(last.hdr, H_BATCH_SEQ))
    if not bseq:
        return 0
    keep = last.seq - bseq  # the batch's first message was at last.seq - bseq + 1
    removed = last.seq - keep
    store.truncate(keep)
    store.flush()
    log.warning(
        "stream %s: removed %d message(s) of a batch torn by a crash (sequences %d-%d)",
        stream.name,
        removed,
        keep + 1,
        last.seq,
    )
    return removed
