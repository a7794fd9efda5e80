"""Fast batch publish (``allow_batched``, nats-server 2.14, API level 4): a publisher streams
messages without waiting for a PubAck each, and the server paces it with flow-control acks.

Unlike an atomic batch nothing is staged: each message is checked and stored as it arrives,
and the batch is only a way to acknowledge many at once. Everything travels in the reply
subject, which ends in ``.$FI``::

    <prefix>.<batch id>.<initial flow>.<gap mode>.<batch seq>.<operation>.$FI

``initial flow``: acknowledge every N messages (<= 0 or not a number: 10; at most 65535);
``gap mode``: ``fail`` (a missing sequence ends the batch) or ``ok`` (it is reported and the
batch goes on); ``operation``: 0 start (sequence 1), 1 append (sequence > 1), 2 commit (this
message is the last), 3 commit end-of-batch (this message is not stored; not on sequence 1),
4 ping (resend the flow state). Any other shape is 10206; a reply ending in ``.$FI`` always
takes this path, also on streams without ``allow_batched`` (10205).

What the server sends to the message's reply subject (JSON, field order as the reference)::

    {"type":"ack","seq":<batch seq persisted>,"msgs":<ack every N>}   flow control
    {"type":"gap","last_seq":<expected>,"seq":<received>}              a gap was seen
    {"type":"err","seq":<batch seq>,"error":{...}}                     that message was refused
    {"stream":"S","seq":<last stream seq>,"batch":"<id>","count":<n>}  the commit's PubAck

The first message is answered ``{"type":"ack","seq":0,"msgs":N}`` (N = min(500, initial flow),
or 1 while the stream has other fast batches); then an ack goes out each time N more messages
are stored, N doubling up to 500 / (open fast batches of the stream), capped by the client's
value. A refusal of the batch's first message (gap mode ``fail``) is answered like a normal
publish and ends the batch; a duplicate ``Nats-Msg-Id`` is skipped silently. Unknown batch id
with a sequence other than 1: 10208; id over 64 bytes: 10207; more than 1,000 open fast batches
per stream or 50,000 per server: 10211; a batch idle for 10 s is forgotten (no advisory).

All replies are queued like PubAcks (``Stream._respond``) and go out after the loop turn's
write, so an ack never runs ahead of the data it covers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from natsd.jetstream.stream.batch import (
    MAX_ID_LEN,
    AtomicBatches,
    Checks,
    Duplicate,
    kick_flush,
    store_one,
)
from natsd.jetstream.errors import ApiError, ApiErrors
from natsd.jetstream.config.constants import FAST_BATCH_SUFFIX as SUFFIX
from natsd.jetstream.wire import dumps, required_level_too_high
from natsd import nats_headers as NH
from natsd.protocol.headers import get_header_bytes, remove_header
from natsd.store.base import StoreError

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Timer
    from natsd.jetstream.stream.batch import BatchStream

__all__ = ["FastBatches", "FastBatchReply", "parse_reply", "on_fast_batch_msg", "SUFFIX"]

_H_REQUIRED_API_LEVEL = NH.REQUIRED_API_LEVEL
_H_EXPECTED_LAST_MSG_ID = NH.EXPECTED_LAST_MSG_ID

OP_START, OP_APPEND, OP_COMMIT, OP_COMMIT_EOB, OP_PING = range(5)
_MAX_UINT64 = 2**64 - 1

# Open fast batches of the whole process (the reference counts them per process).
_inflight = [0]


class FastBatchReply:
    """A parsed ``.$FI`` reply subject."""

    __slots__ = ("id", "seq", "flow", "gap_ok", "op")

    def __init__(self, batch_id: str, seq: int, flow: int, gap_ok: bool, op: int) -> None:
        self.id = batch_id
        self.seq = seq
        self.flow = flow
        self.gap_ok = gap_ok
        self.op = op


def _go_int(tok: str) -> int:
    # nats-server's parseInt64: decimal digits only, else -1
    return int(tok) if tok.isdigit() and tok.isascii() else -1


def parse_reply(reply: str) -> FastBatchReply | None:
    """The batch a ``.$FI`` reply names, or None when its shape is invalid (10206)."""
    toks = reply[: -len(SUFFIX)].split(".")
    if len(toks) < 6:  # the id needs a prefix before it
        return None
    bid, flow_tok, gap, seq_tok, op_tok = toks[-5:]
    op = _go_int(op_tok)
    if not OP_START <= op <= OP_PING:
        return None
    seq = _go_int(seq_tok)
    if seq <= 0 or seq >= _MAX_UINT64:
        return None
    if (seq == 1 and op == OP_COMMIT_EOB) or (op == OP_START and seq != 1) or (op == OP_APPEND and seq <= 1):
        return None
    if gap not in ("fail", "ok"):
        return None
    flow = _go_int(flow_tok)
    flow = 10 if flow <= 0 else min(flow, 65535)
    return FastBatchReply(bid, seq, flow, gap == "ok", op)


class _Fast:
    __slots__ = (
        "id",
        "lseq",
        "sseq",
        "pseq",
        "fseq",
        "pending",
        "ack_msgs",
        "max_ack",
        "gap_ok",
        "commit",
        "deadline",
        "timer",
    )

    def __init__(self, batch_id: str, gap_ok: bool, max_ack: int, deadline: int) -> None:
        self.id = batch_id
        self.lseq = 0  # highest batch sequence seen
        self.sseq = 0  # last stream sequence stored for this batch
        self.pseq = 0  # highest batch sequence persisted (<= lseq)
        self.fseq = 0  # batch sequence of the last flow-control ack (<= pseq)
        self.pending = 0
        self.ack_msgs = 1
        self.max_ack = max_ack
        self.gap_ok = gap_ok
        self.commit = False
        self.deadline = deadline
        self.timer: Timer | None = None


def _ack(seq: int, msgs: int) -> bytes:
    return b'{"type":"ack","seq":%d,"msgs":%d}' % (seq, msgs)


def _gap(last: int, seq: int) -> bytes:
    return b'{"type":"gap","last_seq":%d,"seq":%d}' % (last, seq)


class FastBatches:
    """The open fast batches of one stream."""

    def __init__(self, stream: "BatchStream") -> None:
        self.stream = stream
        self.open: dict[str, _Fast] = {}
        # the server's batch limits replace these defaults when set (as the reference)
        lim = stream.account.engine.batch_limits
        self.timeout_ns = lim.timeout_ns
        self.max_per_stream = lim.fast_max_inflight_per_stream
        self.max_total = lim.fast_max_inflight_total

    # -- lifecycle -------------------------------------------------------------------------------
    def _forget(self, b: _Fast) -> None:
        if self.open.pop(b.id, None) is b:
            _inflight[0] -= 1
        if b.timer is not None:
            b.timer.cancel()
            b.timer = None

    def clear(self) -> None:
        for b in list(self.open.values()):
            self._forget(b)

    def _arm(self, b: _Fast) -> None:
        clock = self.stream.clock
        b.timer = clock.call_later(max(b.deadline - clock.monotonic_ns(), 0), lambda: self._expire(b))

    def _expire(self, b: _Fast) -> None:
        b.timer = None
        if self.open.get(b.id) is not b:
            return
        if self.stream.clock.monotonic_ns() < b.deadline:
            self._arm(b)
            return
        self._forget(b)

    # -- replies ---------------------------------------------------------------------------------
    def _send(self, reply: str, data: bytes) -> None:
        self.stream._respond(reply, data)

    def _puback(self, reply: str, b: _Fast, seq: int, count: int, dup: bool = False) -> None:
        stream = self.stream
        self._send(
            reply,
            stream._ack_prefix
            + str(seq).encode()
            + (b',"duplicate": true' if dup else b"")
            + b',"batch":'
            + dumps(b.id)
            + b',"count":'
            + str(count).encode()
            + b"}",
        )

    def _commit(self, b: _Fast, reply: str) -> bool:
        """End the batch: PubAck now when everything is stored (True), else at the last store."""
        b.commit = True
        if b.lseq == b.pseq:
            self._forget(b)
            self._puback(reply, b, b.sseq, b.lseq)
            return True
        return False

    def _flow(self, b: _Fast, reply: str) -> bool:
        """Send a flow-control ack when ``ack_msgs`` more messages are stored; adapt the pace."""
        am = b.ack_msgs
        if b.pseq < b.fseq + am:
            return False
        b.fseq += (b.pseq - b.fseq) // am * am
        cap = min(max(500 // len(self.open), 1) if self.open else 500, b.max_ack)
        if b.ack_msgs < cap:
            b.ack_msgs = min(b.ack_msgs * 2, cap)
        elif b.ack_msgs > cap:
            b.ack_msgs = max(b.ack_msgs // 2, cap)
        self._send(reply, _ack(b.fseq, b.ack_msgs))
        return True

    # -- one message -----------------------------------------------------------------------------
    def on_msg(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> int:
        stream = self.stream
        try:
            return self._on_msg(subject, reply, hdr, payload)
        except ApiError as err:
            stream._reject(reply, err)
            return 0

    def _on_msg(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> int:
        stream = self.stream
        cfg = stream.config
        if stream._used[stream._ut] + stream.store.bytes_used - stream._counted > stream._max_used:
            stream.account.engine.resources_exceeded(cfg.storage)
            raise ApiErrors.INSUFFICIENT_RESOURCES()
        acct = stream.account
        if acct.limits_enforced:
            err = acct.check_store_limits(cfg.storage, len(subject) + (len(hdr) if hdr else 0) + len(payload))
            if err is not None:
                raise err
        if not cfg.allow_batched:
            raise ApiErrors.BATCH_PUBLISH_DISABLED()
        fb = parse_reply(reply)
        if fb is None:
            raise ApiErrors.BATCH_PUBLISH_INVALID_PATTERN()
        if len(fb.id.encode()) > MAX_ID_LEN:
            raise ApiErrors.BATCH_PUBLISH_INVALID_BATCH_ID()
        seq = fb.seq
        now = stream.clock.monotonic_ns()
        b = self.open.get(fb.id)
        if b is None:
            if seq != 1:
                raise ApiErrors.BATCH_PUBLISH_UNKNOWN_BATCH_ID()
            if len(self.open) + 1 > self.max_per_stream or _inflight[0] + 1 > self.max_total:
                raise ApiErrors.BATCH_PUBLISH_TOO_MANY_INFLIGHT()
            b = _Fast(fb.id, fb.gap_ok, fb.flow, now + self.timeout_ns)
            self.open[fb.id] = b
            _inflight[0] += 1
            b.ack_msgs = 1 if len(self.open) > 1 else min(500, fb.flow)
            self._arm(b)
        if hdr and get_header_bytes(hdr, _H_REQUIRED_API_LEVEL) is not None:
            if required_level_too_high(hdr):
                self._forget(b)
                raise ApiErrors.REQUIRED_API_LEVEL()
            hdr = remove_header(hdr, _H_REQUIRED_API_LEVEL)
        if not b.commit:
            b.deadline = now + self.timeout_ns

        if fb.op == OP_PING:
            send_flow = True
            if seq > b.lseq:
                self._send(reply, _gap(b.lseq + 1, seq + 1))
                if b.gap_ok:
                    b.lseq = seq
                    if b.pending == 0:
                        b.pseq = b.lseq
                    send_flow = not self._flow(b, reply)
                elif self._commit(b, reply):
                    send_flow = False
            if send_flow:
                self._send(reply, _ack(b.fseq, b.ack_msgs))
            return 0
        if b.commit:
            return 0  # committing: the publisher waits for the PubAck
        commit = fb.op in (OP_COMMIT, OP_COMMIT_EOB)
        eob = fb.op == OP_COMMIT_EOB
        b.lseq += 1
        if b.lseq != seq:
            # nats-server 2.15.1 reports every mismatch, forward or back
            self._send(reply, _gap(b.lseq, seq))
            if b.gap_ok and seq > b.lseq:
                b.lseq = seq
            else:
                b.lseq -= 1
                self._commit(b, reply)
                return 0
        if commit:
            if eob:
                b.lseq -= 1
                if b.pending == 0:
                    b.pseq = b.lseq
            done = self._commit(b, reply)
            if eob or done:
                return 0
        if seq == 1 and not commit and stream._do_ack:
            self._send(reply, _ack(0, b.ack_msgs))

        try:
            subj, nhdr, body, ttl, msg_id, rollup = Checks(stream, atomic=False).one(subject, hdr, payload)
            lmid = hdr and get_header_bytes(hdr, _H_EXPECTED_LAST_MSG_ID)
            if lmid and lmid.decode("utf-8", "replace") != stream.lmsg_id:
                raise ApiErrors.STREAM_WRONG_LAST_MSG_ID(id=stream.lmsg_id)
        except Duplicate as d:
            if b.pending == 0:
                b.pseq = seq
                self._flow(b, reply)
            if not commit:
                return 0
            if not b.gap_ok and b.lseq == 1:
                self._forget(b)
                self._puback(reply, b, d.seq, seq, dup=True)
                return 0
            self._commit(b, reply)
            return 0
        except ApiError as e:
            if not b.gap_ok and b.lseq == 1:
                # the batch's first message: answered as a normal publish, the batch ends
                self._forget(b)
                stream._reject(reply, e)
                return 0
            self._send(reply, b'{"type":"err","seq":%d,"error":' % seq + dumps(e.to_dict()) + b"}")
            if b.gap_ok and not commit:
                return 0
            b.lseq -= 1
            if b.pending == 0:
                b.pseq = b.lseq
            self._commit(b, reply)
            return 0
        try:
            sseq = store_one(stream, subj, nhdr, body, ttl, msg_id, rollup)
        except StoreError as e:
            stream._store_failed(reply, e)
            return 0
        kick_flush(stream)
        # registered as persisted: the store appends in order and the ack waits for the flush
        b.sseq = sseq
        b.pseq = b.lseq
        if b.commit and b.lseq == b.pseq:
            self._forget(b)
            self._puback(reply, b, sseq, b.lseq)
            return sseq
        self._flow(b, reply)
        return sseq


def on_fast_batch_msg(stream: "BatchStream", subject: str, reply: str, hdr: bytes | None, payload: bytes) -> int:
    """The stream's hook for a publish whose reply subject ends in ``.$FI``."""
    batches = stream.batches
    if batches is None:
        batches = stream.batches = AtomicBatches(stream)
    fast = batches.fast
    if fast is None:
        fast = batches.fast = FastBatches(stream)
    return fast.on_msg(subject, reply, hdr, payload)
