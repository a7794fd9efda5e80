"""The publish path of a stream (:class:`natsd.jetstream.stream.core.Stream` takes these functions as
its methods): a message in, checks in the reference's order, the store, the PubAck queued.

A message on one of the stream's subjects arrives through an internal subscription
(``Ports.subscribe``) and :func:`process_msg`; a burst of reply-less publishes as a run
(:func:`process_run`), a burst of publishes to one subject with a reply each as a reply run
(:func:`process_rrun`: one ``store_run``). A message without headers on a stream with nothing to
check first (limits retention, not sealed, no ``max_msg_size``, no republish / subject transform,
no account byte limits) takes a fast path straight to ``store_msg``; otherwise the steps are:

0. ``subject_transform`` rewrites the subject;
1. rejects it when sealed / too big (``max_msg_size``, 64 KiB of headers);
2. only if the message has a header block, scans it once for the ``Nats-*`` headers we honour
   (``Nats-Expected-Stream``, ``Nats-TTL``, ``Nats-Expected-Last-Subject-Sequence`` (+``-Subject``),
   ``Nats-Expected-Last-Sequence``, ``Nats-Msg-Id``, ``Nats-Expected-Last-Msg-Id``,
   ``Nats-Rollup``), checked in the reference's order; a reply ending in ``.$FI`` (fast batch,
   natsd.jetstream.stream.fastbatch) or a ``Nats-Batch-Id`` (atomic batch, natsd.jetstream.stream.batch) hands
   the message to those modules; ``Nats-Incr`` and counter streams go through
   natsd.jetstream.stream.counters (the PubAck then carries ``"val"``);
3. appends it to the store (``store_msg``; the store applies discard-old limits and raises on
   discard-new) or, on an interest stream nobody is interested in, skips the sequence;
4. queues the reply (a PubAck built from bytes, never ``json.dumps``); once per loop turn
   natsd.jetstream.stream.turnflush writes the turn's records and then sends the PubAcks.

PubAck bytes (the reference builds them by hand, note the space in ``"duplicate": true``)::

    {"stream":"ORDERS","seq":5}
    {"stream":"ORDERS","seq":2,"duplicate": true}
    {"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 2"},"stream":"ORDERS","seq":0}

``no_ack`` streams never reply, not even errors.

Server-wide limits (``jetstream { max_file_store, max_memory_store }``, defaults computed by the
engine as the reference): before storing, a publish is refused with 10023 when the bytes stored
by every stream of that storage type already exceed the limit (the reference's
``limitsExceeded``).
"""

from __future__ import annotations

import errno
import json
import logging
from typing import TYPE_CHECKING

from natsd.jetstream.errors import ApiError, ApiErrors
from natsd.jetstream.config.constants import FAST_BATCH_SUFFIX
from natsd.jetstream.config.models import SECOND, rfc3339
from natsd.jetstream.stream.subjectrun import process_subject_run, queue_run_acks
from natsd.jetstream.wire import dumps, parse_ttl
from natsd import nats_headers as NH
from natsd.protocol.headers import get_header_bytes, nats_headers, remove_header, replace_header
from natsd.store.base import (
    MaxBytes,
    MaxMsgs,
    MaxMsgsPerSubject,
    MsgNotFound,
    StoreEOF,
    StoreError,
    StoreFull,
    StoreMsg,
    StoreWriteError,
)
from natsd.subjects.tokens import subject_matches
from natsd.subjects.transform import transform as _transform

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.stream.core import Stream
    from natsd.protocol.events import Run

__all__ = [
    "H_MSG_ID",
    "H_EXP_STREAM",
    "H_EXP_LAST_SEQ",
    "H_EXP_LAST_SUBJ_SEQ",
    "H_EXP_LAST_SUBJ_SEQ_SUBJ",
    "H_EXP_LAST_MSG_ID",
    "H_ROLLUP",
    "H_TTL",
    "H_MARKER_REASON",
    "H_STREAM_SOURCE",
    "MAX_HDR_SIZE",
    "COUNTER_CACHE_MAX",
    "process_msg",
    "process_run",
    "process_rrun",
]

log = logging.getLogger("natsd.jetstream.stream")

# Header names we look at on ingest (exact spelling as the reference; compared case-sensitively
# like nats-server's getHeader).
H_MSG_ID = NH.MSG_ID
H_EXP_STREAM = NH.EXPECTED_STREAM
H_EXP_LAST_SEQ = NH.EXPECTED_LAST_SEQ
H_EXP_LAST_SUBJ_SEQ = NH.EXPECTED_LAST_SUBJ_SEQ
H_EXP_LAST_SUBJ_SEQ_SUBJ = NH.EXPECTED_LAST_SUBJ_SEQ_SUBJ
H_EXP_LAST_MSG_ID = NH.EXPECTED_LAST_MSG_ID
H_ROLLUP = NH.ROLLUP
H_TTL = NH.TTL
H_MARKER_REASON = NH.MARKER_REASON
H_STREAM_SOURCE = NH.STREAM_SOURCE
#: natsd.jetstream.stream.schedules.SCHEDULE_MARK, here so that a stream without schedules never
#: loads the schedule layer (and datetime): a restart's first request pays for neither (issue 31).
SCHEDULE_MARK = NH.SCHEDULE_PREFIX
# The batch and counter layers load with the first message that uses them (a batch header, a
# fast batch reply, a Nats-Incr, a counter stream: issue 31), so a plain stream's first create
# does not import them; the marks they are looked for by are here.
H_BATCH_ID = NH.BATCH_ID
H_INCR = NH.INCR

MAX_HDR_SIZE = 65535  # math.MaxUint16 in the reference
_NO_SOURCES: dict = {}  # (the counter sources of a counter message stored without any; never changed)
COUNTER_CACHE_MAX = 100_000  # counter totals kept in memory per stream (see Stream.counter_stored)


def _write_error(e: StoreWriteError) -> ApiError:
    """The PubAck error for a failed store write: a full disk (or quota) is "insufficient
    resources", as the reference answers when its storage limit is reached; any other I/O error
    is "stream store failed" with the OS error."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return ApiErrors.INSUFFICIENT_RESOURCES()
    return ApiErrors.STREAM_STORE_FAILED(err=str(e))


def _err_ack(stream: bytes, err: ApiError) -> bytes:
    # {"error":{...},"stream":"S","seq":0} -- field order of the reference's JSPubAckResponse.
    return b'{"error":' + dumps(err.to_dict()) + b',"stream":' + stream + b',"seq":0}'


def _parse_uint(v: bytes) -> int | None:
    v = v.strip()
    return int(v) if v.isdigit() else None


def _respond(self: Stream, reply: str, data: bytes) -> None:
    self._ack_subjects.append(reply)
    self._ack_payloads.append(data)
    if not self._flush_scheduled:
        self._flush_scheduled = True
        self.clock.call_soon(self._flush)


def _reject(self: Stream, reply: str, err: ApiError) -> None:
    if reply and self._do_ack:
        self._respond(reply, _err_ack(self._name_json, err))


def process_run(self: Stream, run: "Run") -> None:
    """Ingest a run of reply-less, header-less publishes (``Ports.subscribe(many=...)``: a
    ``natsd.protocol.events.Run`` read through ``names``/``payloads``), in order."""
    process = self.process_msg
    names = run.names
    assert names is not None  # (the router fills them in before a run is matched; once per run)
    for subject, payload in zip(names, run.payloads):
        process(subject, "", None, payload)


def process_rrun(self: Stream, subject: str | None, run: "Run") -> None:
    """Ingest a run of publishes to ``subject`` with a reply each (``Ports.subscribe(rrun=...)``:
    an asynchronous publisher's burst, ``run.replies``/``run.payloads``), in order; ``subject``
    None: each message to its own subject, ``run.names`` (:func:`process_subject_run`).

    Runs on a ``_fast`` stream (see :meth:`process_msg`) that leave the server's storage limit
    alone and hold no fast-batch reply are stored with one ``store_run`` and answered with the
    turn's PubAcks, as :meth:`process_msg` would answer each: header-less runs, and HPUB runs
    whose headers hold no ``Nats-*`` name but ``Nats-Msg-Id`` with ids that are all new
    (:func:`_run_msg_ids`: the Spark sink's idempotent writes, a deduplicating publisher).
    Anything else (other headers, a duplicate, a refusal on the way) goes through
    :meth:`process_msg` message by message, from the first message the run path did not
    store, which answers each as alone."""
    if subject is None:  # a run over many subjects (natsd.jetstream.stream.subjectrun)
        return process_subject_run(self, run)
    replies = run.replies
    assert replies is not None  # (an rrun is a run with a reply each; once per run)
    payloads = run.payloads
    n = len(payloads)
    done = 0
    hl = run.hdr_len
    if (
        self._fast
        and b".$FI\n" not in b"\n".join(replies) + b"\n"
        and self._used[self._ut] + self.store.bytes_used - self._counted + n * (len(payloads[0]) + len(subject) + 64)
        <= self._max_used
    ):
        ids = self._run_msg_ids(payloads, hl) if hl else None
        if hl and ids is None:
            first, ts, done, err = 0, 0, 0, None
        else:
            try:
                first, ts, done, err = self.store.store_run(subject, payloads, hl)
            except StoreError:
                done, err = 0, None  # (closed: each message is refused below, as alone)
        if done:
            last = first + done
            self.lseq = last - 1
            self.lmsg_id = ""
            if ids is not None:
                self.lmsg_id = ids[done - 1]
                if self._dup_window > 0:
                    ddmap = self._ddmap
                    q = self._ddq
                    for seq, mid in zip(range(first, last), ids):
                        if mid:
                            ddmap[mid] = (seq, ts)
                            q.append((ts, mid))
                            if len(q) & 1023 == 0:
                                self._expire_msg_ids()
            queue_run_acks(self, replies, first, done)
        if err is not None:
            self._store_failed(replies[done].decode(), err)
            done += 1
    if done < n:
        process = self.process_msg
        for i in range(done, n):
            data = payloads[i]
            process(subject, replies[i].decode(), data[:hl] if hl else None, data[hl:] if hl else data)


def _light_msg_id(data: bytes, hl: int) -> bytes | None:
    """The light path's test of a header block (``data[:hl]``): one scan instead of
    nats_headers(). The first ``Nats-*`` line must be ``Nats-Msg-Id`` and no other may follow
    (the rules of get_header_bytes: the name starts a line, the value runs to the CRLF, leading
    spaces skipped). Returns the id's raw value (b"" when there is none or it is empty), or
    None when the block names another ``Nats-*`` header (then the full checks apply)."""
    i = data.find(b"\r\nNats-", 0, hl)
    if i < 0:
        return b""
    if not data.startswith(b"Msg-Id:", i + 7, hl):
        return None
    j = data.find(b"\r\n", i + 14, hl)
    if j < 0:
        j = hl
    if data.find(b"\r\nNats-", j, hl) >= 0:
        return None
    return data[i + 14 : j].lstrip(b" ")


def _run_msg_ids(self: Stream, payloads: list[bytes], hl: int) -> list[str] | None:
    """The ``Nats-Msg-Id`` of each message of an HPUB run (header blocks of ``hl`` bytes in
    front of the payloads; "" for none), when every header block passes :meth:`process_msg`'s
    light-path test (no ``Nats-*`` name but at most ``Nats-Msg-Id``, not over MAX_HDR_SIZE)
    and no id is a duplicate, of a stored message within the window or of one earlier in the
    run; else None (the run then goes message by message, which answers duplicates)."""
    if hl > MAX_HDR_SIZE:
        return None
    if self._dedupe_pending:
        self._rebuild_dedupe()
    ddmap = self._ddmap
    since = self.clock.time_ns() - self._dup_window
    seen: set[str] = set()
    ids = []
    for data in payloads:
        v = _light_msg_id(data, hl)
        if v is None:
            return None
        if not v:
            ids.append("")
            continue
        try:
            mid = v.decode()
        except UnicodeDecodeError:
            return None
        dup = ddmap.get(mid)
        if (dup is not None and dup[1] > since) or mid in seen:
            return None
        seen.add(mid)
        ids.append(mid)
    return ids


def process_msg(
    self: Stream, subject: str, reply: str, hdr: bytes | None, payload: bytes, sourced: bool = False
) -> int:
    """Ingest one message; returns its sequence (0 when rejected or a duplicate). ``sourced``:
    stored by a source link (``Nats-Stream-Source`` is its own, counters aggregate).

    Three light paths come first, for a stream with nothing to check before storing (not
    sealed, no ``max_msg_size``, limits retention, no account byte limits, no republish, no
    subject transform, no schedules; ``_fast``) and no fast batch publish (a reply ending
    in ``.$FI``, natsd.jetstream.stream.fastbatch): a message without headers; one whose headers
    hold no ``Nats-*`` name but at most ``Nats-Msg-Id`` (one scan of the block finds that
    out, :func:`nats_headers`); and, on such a counter stream (``_counter_fast``), a lone
    ``Nats-Incr`` whose subject's last total is known (:meth:`_incr_light`). Everything
    else, and every refusal, takes :meth:`_process`, which checks in the reference's order.
    """
    if self._fast and not reply.endswith(FAST_BATCH_SUFFIX):
        msg_id = ""
        if hdr:
            hl = len(hdr)
            v = _light_msg_id(hdr, hl) if hl <= MAX_HDR_SIZE else None
            if v is None:
                return self._process(subject, reply, hdr, payload, sourced, None)
            if v:  # Nats-Msg-Id alone
                if self._dedupe_pending:
                    self._rebuild_dedupe()
                msg_id = v.decode()
                dup = self._ddmap.get(msg_id)
                if dup is not None and dup[1] > self.clock.time_ns() - self._dup_window:
                    if reply and self._do_ack:
                        self._respond(reply, self._ack_prefix + str(dup[0]).encode() + b',"duplicate": true}')
                    return 0
        # (a message without Nats-* headers, or with a new msg id)
        if self._used[self._ut] + self.store.bytes_used - self._counted > self._max_used:
            self._server_full(reply)
            return 0
        try:
            seq, ts = self._store_msg(subject, hdr or None, payload, 0)
        except StoreError as e:
            self._store_failed(reply, e)
            return 0
        self.lseq = seq
        self.lmsg_id = msg_id
        if msg_id and self._dup_window > 0:
            self._ddmap[msg_id] = (seq, ts)
            q = self._ddq
            q.append((ts, msg_id))
            if len(q) & 1023 == 0:
                self._expire_msg_ids()
        self._new_msgs = True
        if reply and self._do_ack:
            self._ack_subjects.append(reply)
            self._ack_payloads.append(self._ack_prefix + b"%d}" % seq)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._call_soon(self._flush)
        return seq
    if self._counter_fast and hdr and not payload and not sourced and not reply.endswith(FAST_BATCH_SUFFIX):
        h = nats_headers(hdr)
        if len(h) == 1 and len(hdr) <= MAX_HDR_SIZE:
            iv = h.get(H_INCR)
            if iv:
                seq = self._incr_light(subject, reply, hdr, iv)
                if seq >= 0:
                    return seq
        return self._process(subject, reply, hdr, payload, sourced, h)
    return self._process(subject, reply, hdr, payload, sourced, None)


def _incr_light(self: Stream, subject: str, reply: str, hdr: bytes, v: bytes) -> int:
    """A lone ``Nats-Incr: <v>`` on a ``_counter_fast`` stream, when the subject has no
    message yet or its last total is the one this stream stored (``counter_cache``, valid
    while the index still names that sequence last) without counter sources: the new total
    is stored with the publisher's headers as they are. Returns the sequence (0: refused by
    the store), or -1 when the case needs :meth:`_process` (a bad value, an unknown last
    total, a stored message over the size limit: it checks and answers)."""
    incr: int | None
    if v.isdigit():  # (ASCII digits only, as bytes.isdigit is: the usual "1")
        incr = int(v)
    else:
        from natsd.jetstream.stream.counters import parse_incr

        incr = parse_incr(v)
        if incr is None:
            return -1
    last = self.store.last_seq_of(subject)
    if last:
        hit = self.counter_cache.get(subject)
        if hit is None or hit[0] != last or hit[2]:
            return -1
        total = hit[1] + incr
    else:
        total = incr
    val = str(total).encode()
    body = b'{"val":"' + val + b'"}'
    if len(hdr) + len(body) > self._engine_options.max_payload:  # (no max_msg_size here)
        return -1
    if self._used[self._ut] + self.store.bytes_used - self._counted > self._max_used:
        self._server_full(reply)
        return 0
    try:
        seq = self._store_msg(subject, hdr, body, 0)[0]
    except StoreError as e:
        self._store_failed(reply, e)
        return 0
    self.lseq = seq
    self.lmsg_id = ""
    self._new_msgs = True
    cache = self.counter_cache
    if len(cache) >= COUNTER_CACHE_MAX and subject not in cache:
        cache.clear()
    cache[subject] = (seq, total, _NO_SOURCES)
    if reply and self._do_ack:
        self._ack_subjects.append(reply)
        self._ack_payloads.append(self._ack_prefix + str(seq).encode() + b',"val":"' + val + b'"}')
    if not self._flush_scheduled:
        self._flush_scheduled = True
        self._call_soon(self._flush)
    return seq


def _counter_max_size(self: Stream) -> int:
    """The size limit of a stored counter message (headers + ``{"val":"N"}`` body): the
    stream's ``max_msg_size``, or without one the server's ``max_payload``, as the reference
    refuses (10054) a total whose message outgrows it although the increment itself fit."""
    mms = self._max_msg_size
    return mms if mms >= 0 else self._engine_options.max_payload


def _process(
    self: Stream,
    subject: str,
    reply: str,
    hdr: bytes | None,
    payload: bytes,
    sourced: bool,
    h: dict[bytes, bytes] | None,
) -> int:
    """:meth:`process_msg` for everything the light paths do not take; ``h``: the block's
    ``Nats-*`` headers when the caller already scanned it."""
    if self.closed:
        return 0
    if self._transform is not None:
        # subject_transform is applied before anything else, as the reference
        tsrc, tdest = self._transform
        if subject_matches(tsrc, subject):
            subject = _transform(tsrc, tdest, subject) or subject
    cfg = self.config
    if cfg.sealed:
        self._reject(reply, ApiErrors.STREAM_SEALED())
        return 0
    hlen = len(hdr) if hdr else 0
    mms = self._max_msg_size
    if mms >= 0 and (hlen > mms or len(payload) > mms - hlen):
        self._reject(reply, ApiErrors.STREAM_MESSAGE_EXCEEDS_MAXIMUM())
        return 0
    if hlen > MAX_HDR_SIZE:
        self._reject(reply, ApiErrors.STREAM_HEADER_EXCEEDS_MAXIMUM())
        return 0
    if self._schemas is not None and not sourced:
        # natsd feature (natsd.schema.<subject>): a payload its schema refuses is not stored.
        serr = self._schemas.check(subject, payload)
        if serr is not None:
            self._reject(reply, serr)
            return 0

    if reply.endswith(FAST_BATCH_SUFFIX):
        from natsd.jetstream.stream.fastbatch import on_fast_batch_msg

        return on_fast_batch_msg(self, subject, reply, hdr, payload)
    msg_id = ""
    ttl = 0
    bad_ttl = False
    rollup = b""
    incr: int | None = None
    if hdr:
        if h is None:
            h = nats_headers(hdr)
        if h and NH.REQUEST_INFO in h:
            hdr, h = _drop_request_info(hdr, h)
            hlen = len(hdr) if hdr else 0
        if h and hdr:
            if h.get(H_BATCH_ID):
                from natsd.jetstream.stream.batch import on_batch_msg

                return on_batch_msg(self, subject, reply, hdr, payload, h)
            if H_INCR in h or self._counter:
                from natsd.jetstream.stream.counters import check_incr

                try:
                    incr = check_incr(h, payload, self._counter, sourced)
                except ApiError as e:
                    self._reject(reply, e)
                    return 0
            v = h.get(H_EXP_STREAM)
            if v and v.decode() != self.name:
                self._reject(reply, ApiErrors.STREAM_NOT_MATCH())
                return 0
            v = h.get(H_TTL)
            if v:  # an empty value is no TTL (the reference ignores it)
                # An unparsable TTL is reported later (after the other checks), as the
                # reference does; a valid one on a stream without TTLs fails right here.
                try:
                    ttl = parse_ttl(v.decode())
                except ApiError:
                    ttl = 0
                    bad_ttl = True
                if ttl != 0 and not cfg.allow_msg_ttl:
                    self._reject(reply, ApiErrors.MESSAGE_TTL_DISABLED())
                    return 0
            v = h.get(H_EXP_LAST_SUBJ_SEQ)
            if v:  # an empty value is no expectation (the reference ignores it)
                want = _parse_uint(v)
                ssubj = h.get(H_EXP_LAST_SUBJ_SEQ_SUBJ)
                check_subj = ssubj.decode() if ssubj else subject
                try:
                    fseq = self.store.load_last_msg(check_subj).seq
                except (MsgNotFound, StoreEOF):
                    fseq = 0
                if want is None or fseq != want:
                    self._reject(reply, ApiErrors.STREAM_WRONG_LAST_SEQUENCE(seq=fseq))
                    return 0
            elif h.get(H_EXP_LAST_SUBJ_SEQ_SUBJ):
                self._reject(reply, ApiErrors.STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_INVALID())
                return 0
            v = h.get(H_EXP_LAST_SEQ)
            if v:  # an empty value is no expectation (nats-server's getExpectedLastSeq)
                want = _parse_uint(v)
                if want is None or want != self.lseq:
                    self._reject(reply, ApiErrors.STREAM_WRONG_LAST_SEQUENCE(seq=self.lseq))
                    return 0
            if not sourced and H_STREAM_SOURCE in h:
                self._reject(reply, ApiErrors.MESSAGE_SOURCE_HDR_NOT_ALLOWED())
                return 0
            if SCHEDULE_MARK in hdr and not self._sched_exempt(h):
                # (the schedule layer, with datetime, loads with the first schedule header: issue 31)
                from natsd.jetstream.stream.schedules import check_publish as check_schedule

                try:
                    nh = check_schedule(
                        subject,
                        hdr,
                        h,
                        cfg.allow_msg_schedules,
                        cfg.allow_msg_ttl,
                        cfg.subjects,
                        self._last_or_none,
                        parse_ttl,
                    )
                except ApiError as e:
                    self._reject(reply, e)
                    return 0
                if nh is not hdr:  # a schedule: Nats-Rollup: sub was added
                    hdr, h = nh, nats_headers(nh)
                    hlen = len(hdr)
            if self._dedupe_pending and (H_MSG_ID in h or H_EXP_LAST_MSG_ID in h):
                self._rebuild_dedupe()
            v = h.get(H_MSG_ID)
            if v:
                msg_id = v.decode()
                dup = self._check_msg_id(msg_id)
                if dup:
                    if reply and self._do_ack:
                        self._respond(reply, self._ack_prefix + str(dup).encode() + b',"duplicate": true}')
                    return 0
            v = h.get(H_EXP_LAST_MSG_ID)
            if v:
                if v.decode() != self.lmsg_id:
                    self._reject(reply, ApiErrors.STREAM_WRONG_LAST_MSG_ID(id=self.lmsg_id))
                    return 0
            v = h.get(H_ROLLUP)
            if v:
                v = v.lower()  # nats-server's getRollup: "SUB" is "sub"
                if not self._allow_rollup:
                    self._reject(reply, ApiErrors.STREAM_ROLLUP_FAILED(err="rollup not permitted"))
                    return 0
                if v not in (b"sub", b"all"):
                    self._reject(
                        reply,
                        ApiErrors.STREAM_ROLLUP_FAILED(
                            err="rollup value invalid: " + json.dumps(v.decode(errors="replace"))
                        ),
                    )
                    return 0
                rollup = v

    ack_tail = b"}"
    if self._counter:
        if incr is None:
            self._reject(reply, ApiErrors.MESSAGE_INCR_MISSING())
            return 0
        from natsd.jetstream.stream.counters import apply_incr

        try:
            hdr, payload, val = apply_incr(self, subject, hdr, payload, incr)
        except ApiError as e:
            self._reject(reply, e)
            return 0
        hlen = len(hdr) if hdr else 0
        if hlen + len(payload) > self._counter_max_size():
            self._reject(reply, ApiErrors.STREAM_MESSAGE_EXCEEDS_MAXIMUM())
            return 0
        ack_tail = b',"val":"' + val.encode() + b'"}'
    if bad_ttl and not (self._interest and not self._has_interest(subject)):
        # (the reference reads the TTL after skipping a message nobody is interested in)
        self._reject(reply, ApiErrors.MESSAGE_TTL_INVALID())
        return 0
    if self._used[self._ut] + self.store.bytes_used - self._counted > self._max_used:
        self._server_full(reply)
        return 0
    acct = self.account
    if acct.limits_enforced:
        err = acct.check_store_limits(self.config.storage, len(subject) + hlen + len(payload))
        if err is not None:
            self._reject(reply, err)
            return 0

    if self._interest and not self._has_interest(subject):
        seq = self.skip_uninterested(subject, msg_id, rollup)
        if self._sched is not None or (hdr and self._allow_rollup and SCHEDULE_MARK in hdr):
            self._schedule_stored(seq, subject, hdr, self.clock.time_ns())
        if reply and self._do_ack:
            self._respond(reply, self._ack_prefix + str(seq).encode() + b"}")
        return seq

    # TTLs shorter than the delete-marker TTL are raised to it (reference behaviour).
    if ttl > 0 and self._sdm_ttl_s and cfg.max_msgs_per_subject != 1 and ttl < self._sdm_ttl_s:
        ttl = self._sdm_ttl_s
        hdr = replace_header(hdr, H_TTL, str(ttl).encode())
    tlseq = 0
    if cfg.republish:
        try:
            tlseq = self.store.load_last_msg(subject).seq
        except (MsgNotFound, StoreEOF):
            tlseq = 0
    try:
        seq, ts = self.store.store_msg(subject, hdr, payload, ttl * SECOND if ttl > 0 else ttl)
    except StoreError as e:
        self._store_failed(reply, e)
        return 0
    self.lseq = seq
    self.lmsg_id = msg_id
    if self._counter:
        self.counter_stored(seq)
    if msg_id:
        self._store_msg_id(msg_id, seq, ts)
    acct.note_stored(self.config.storage, len(subject) + hlen + len(payload))
    if rollup:
        self._rollup(subject, rollup, 1)
    if self._sched is not None or (hdr and self._allow_rollup and SCHEDULE_MARK in hdr):
        self._schedule_stored(seq, subject, hdr, ts)
    if cfg.republish:
        self._republish(subject, hdr, payload, seq, ts, tlseq)
    self._new_msgs = True
    if reply and self._do_ack:
        self._respond(reply, self._ack_prefix + str(seq).encode() + ack_tail)
    elif not self._flush_scheduled:
        self._flush_scheduled = True
        self.clock.call_soon(self._flush)
    return seq


def _drop_request_info(hdr: bytes, h: dict[bytes, bytes]) -> tuple[bytes | None, dict[bytes, bytes]]:
    """A request that crossed a service import is stored without ``Nats-Request-Info`` (its
    requester), and without a header block when that was all of it, as nats-server's
    removeHeaderIfPresent."""
    out = remove_header(hdr, NH.REQUEST_INFO)
    h = {k: v for k, v in h.items() if k != NH.REQUEST_INFO}
    return (out if len(out) > len(_EMPTY_HDR) else None), h


_EMPTY_HDR = b"NATS/1.0\r\n\r\n"


# -- message schedules (natsd.jetstream.stream.schedules) --------------------------------------------
def _sched_exempt(self: Stream, h: dict[bytes, bytes]) -> bool:
    """Messages the server itself writes skip the schedule header checks, as the reference
    skips them for sourced messages: produced messages, and sourced copies."""
    if self._sched is not None and self._sched.producing:
        return True
    return bool(self.config.sources) and H_STREAM_SOURCE in h


def _schedule_stored(self: Stream, seq: int, subject: str, hdr: bytes | None, ts: int) -> None:
    """After storing (or interest-skipping) a message: schedule bookkeeping, and
    ``Nats-Schedule-Next: purge`` (a one-shot schedule fired, or a cancel) purges the
    schedule's subject on any stream that allows roll-ups (a sourced copy too), as the
    reference."""
    if self._sched is not None:
        self._sched.on_stored(seq, subject, hdr, ts)
    if hdr and self._allow_rollup and SCHEDULE_MARK in hdr:
        from natsd.jetstream.stream.schedules import schedule_to_purge  # (first schedule header: issue 31)

        done = schedule_to_purge(hdr)
        if done:
            self._rollup(done, b"sub", 0)


def _last_or_none(self: Stream, subject: str) -> StoreMsg | None:
    try:
        return self.store.load_last_msg(subject)
    except (MsgNotFound, StoreEOF):
        return None


def _produce_scheduled(self: Stream, target: str, hdr: bytes | None, payload: bytes) -> int:
    """A schedule is due: its produced message goes through the publish path."""
    return self.process_msg(target, "", hdr, payload)


def _server_full(self: Stream, reply: str) -> None:
    """The server-wide limit of this storage type is exceeded: 10023, as the reference."""
    self.account.engine.resources_exceeded(self.config.storage)
    self._reject(reply, ApiErrors.INSUFFICIENT_RESOURCES())


def _store_failed(self: Stream, reply: str, e: StoreError) -> None:
    """Map a store refusal to the reference's PubAck error."""
    if isinstance(e, StoreWriteError):
        err = _write_error(e)
    elif isinstance(e, MaxMsgs):
        err = ApiErrors.STREAM_STORE_FAILED(err="maximum messages exceeded")
    elif isinstance(e, MaxBytes):
        err = ApiErrors.STREAM_STORE_FAILED(err="maximum bytes exceeded")
    elif isinstance(e, MaxMsgsPerSubject):
        err = ApiErrors.STREAM_STORE_FAILED(err="maximum messages per subject exceeded")
    elif isinstance(e, StoreFull):
        err = ApiErrors.INSUFFICIENT_RESOURCES()
    else:
        log.error("JetStream failed to store a msg on stream '%s > %s': %s", self.account.name, self.name, e)
        err = ApiErrors.STREAM_STORE_FAILED(err=str(e) or type(e).__name__)
    self._reject(reply, err)


def counter_stored(self: Stream, seq: int) -> None:
    """The counter message apply_incr computed was stored as ``seq``: remember its total."""
    nxt, self.counter_next = self.counter_next, None
    if nxt is not None:
        cache = self.counter_cache
        if len(cache) >= COUNTER_CACHE_MAX and nxt[0] not in cache:
            cache.clear()
        cache[nxt[0]] = (seq, nxt[1], nxt[2])


def skip_uninterested(self: Stream, subject: str, msg_id: str, rollup: bytes) -> int:
    """An interest stream's message no consumer wants: its sequence is used, nothing stored
    (the msg id still counts for dedupe, a rollup still applies). Returns the sequence."""
    seq = self.store.skip_msg()
    self.lseq = seq
    self.lmsg_id = msg_id
    if msg_id:
        self._store_msg_id(msg_id, seq, self.clock.time_ns())
    if rollup:
        self._rollup(subject, rollup, 0)
    return seq


def _has_interest(self: Stream, subject: str) -> bool:
    for c in self.consumers.values():
        if c.filter_matches(subject):
            return True
    return False


# -- dedupe ---------------------------------------------------------------------------------
def _check_msg_id(self: Stream, msg_id: str) -> int:
    """Sequence of a live duplicate of ``msg_id`` or 0. One lookup: an entry older than the
    window is no duplicate even before :meth:`_expire_msg_ids` (every 1,024 inserts, see
    :meth:`_store_msg_id`) removes it."""
    e = self._ddmap.get(msg_id)
    if e is None or e[1] <= self.clock.time_ns() - self._dup_window:
        return 0
    return e[0]


def _store_msg_id(self: Stream, msg_id: str, seq: int, ts: int) -> None:
    if self._dup_window <= 0:
        return
    self._ddmap[msg_id] = (seq, ts)
    self._ddq.append((ts, msg_id))
    if len(self._ddq) & 1023 == 0:
        self._expire_msg_ids()


def _expire_msg_ids(self: Stream) -> None:
    cutoff = self.clock.time_ns() - self._dup_window
    q = self._ddq
    m = self._ddmap
    while q and q[0][0] <= cutoff:
        ts, mid = q.popleft()
        e = m.get(mid)
        if e is not None and e[1] == ts:
            del m[mid]


def _rebuild_dedupe(self: Stream) -> None:
    """After recovery: msg ids stored within the duplicate window (read back from the end)
    and the msg id of the last message."""
    self._dedupe_pending = False
    self._ddmap.clear()
    self._ddq.clear()
    if self.lseq == 0:
        return
    try:
        last = self.store.load_prev_msg(self.lseq)
        v = get_header_bytes(last.hdr, H_MSG_ID)
        self.lmsg_id = v.decode() if v else ""
    except StoreError:
        self.lmsg_id = ""
    cutoff = self.clock.time_ns() - self._dup_window
    found: list[tuple[int, str, int]] = []
    seq = self.lseq
    while seq > 0 and self._dup_window > 0:
        try:
            sm = self.store.load_prev_msg(seq)
        except StoreError:
            break
        if sm.ts <= cutoff:
            break
        if sm.hdr:
            v = get_header_bytes(sm.hdr, H_MSG_ID)
            if v:
                found.append((sm.ts, v.decode(), sm.seq))
        seq = sm.seq - 1
    for ts, mid, sq in reversed(found):  # oldest first: the expiry queue stays in time order
        self._ddmap[mid] = (sq, ts)
        self._ddq.append((ts, mid))


# -- rollup / republish ------------------------------------------------------------------------
def _rollup(self: Stream, subject: str, kind: bytes, keep: int) -> None:
    if self.lazy is not None:
        self.all_consumers()  # (a purge moves the consumers it concerns: _after_purge)
    self._purging = []
    try:
        if kind == b"sub":
            self.store.purge_ex(subject, 0, keep)
        elif keep:
            # The store keeps the newest ``keep`` messages (not sequences).
            self.store.purge_ex("", 0, keep)
        else:
            self.store.purge()
    finally:
        removed, self._purging = self._purging, None
    self._after_purge(subject if kind == b"sub" else "", removed)  # the reference purges like this too


# republish's header lines, built once (one concatenation per value, as literals would be)
_RP_STREAM = b"NATS/1.0\r\n" + NH.STREAM + b": "
_RP_SUBJECT = b"\r\n" + NH.SUBJECT + b": "
_RP_SEQUENCE = b"\r\n" + NH.SEQUENCE + b": "
_RP_TIME_STAMP = b"\r\n" + NH.TIME_STAMP + b": "
_RP_LAST_SEQUENCE = b"\r\n" + NH.LAST_SEQUENCE + b": "
_RP_MSG_SIZE = NH.MSG_SIZE + b": "


def _republish(self: Stream, subject: str, hdr: bytes | None, payload: bytes, seq: int, ts: int, tlseq: int) -> None:
    """republish: a copy of the stored message to the mapped subject, with the headers
    ``Nats-Stream``, ``Nats-Subject``, ``Nats-Sequence``, ``Nats-Time-Stamp``,
    ``Nats-Last-Sequence`` (previous seq on the subject) and, headers-only, ``Nats-Msg-Size``
    appended after the message's own headers."""
    rp = self.config.republish or {}
    src = rp.get("src") or ">"
    if not subject_matches(src, subject):
        return
    dest = _transform(src, rp.get("dest", ""), subject)
    if not dest:
        return
    base = (
        _RP_STREAM
        + self.name.encode()
        + _RP_SUBJECT
        + subject.encode()
        + _RP_SEQUENCE
        + str(seq).encode()
        + _RP_TIME_STAMP
        + rfc3339(ts).encode()
        + _RP_LAST_SEQUENCE
        + str(tlseq).encode()
        + b"\r\n"
    )
    if rp.get("headers_only"):
        base += _RP_MSG_SIZE + str(len(payload)).encode() + b"\r\n"
        body = b""
    else:
        body = payload
    if hdr:
        # original headers first (without the trailing CRLF), then ours
        nh = hdr[: len(hdr) - 2] + base[len(b"NATS/1.0\r\n") :] + b"\r\n"
    else:
        nh = base + b"\r\n"
    self.account.ports.publish(dest, "", nh, body)
