"""``$JS.API.DIRECT.GET.<stream>`` and ``$JS.API.DIRECT.GET.<stream>.<subject>``.

Subscribed by the stream itself only when ``allow_direct`` is set (otherwise the client gets
no responders, as the reference). Replies are the stored message, not JSON: its own headers
(if any) with these appended, or a fresh block::

    NATS/1.0\\r\\nNats-Stream: S\\r\\nNats-Subject: a.b\\r\\nNats-Sequence: 5\\r\\nNats-Time-Stamp:
    <RFC3339>\\r\\n\\r\\n

Batch requests (``batch``/``multi_last``) add ``Nats-Num-Pending`` and ``Nats-Last-Sequence`` to
every message and end with ``NATS/1.0 204 EOB`` (+ the same two headers, + ``Nats-UpTo-Sequence``
for multi_last). Failures are status-only replies: ``404 Message Not Found``, ``404 No Results``,
``408 Empty Request``, ``408 Malformed Request``, ``408 Bad Request``, ``413 Too Many Results``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from natsd import nats_headers as NH
from natsd.jetstream import gojson
from natsd.jetstream.config.models import parse_rfc3339, rfc3339
from natsd.jetstream.config.requests import MSG_GET_REQUEST
from natsd.jetstream.wire import required_level_too_high
from natsd.store.base import MsgNotFound, StoreEOF, StoreError

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.views import StreamView

__all__ = ["direct_get_handlers", "STATUS_NOT_FOUND", "STATUS_EMPTY", "STATUS_MALFORMED", "STATUS_BAD"]

STATUS_NOT_FOUND = b"NATS/1.0 404 Message Not Found\r\n\r\n"
STATUS_NO_RESULTS = b"NATS/1.0 404 No Results\r\n\r\n"
STATUS_EMPTY = b"NATS/1.0 408 Empty Request\r\n\r\n"
STATUS_MALFORMED = b"NATS/1.0 408 Malformed Request\r\n\r\n"
STATUS_BAD = b"NATS/1.0 408 Bad Request\r\n\r\n"
STATUS_TOO_MANY = b"NATS/1.0 413 Too Many Results\r\n\r\n"
MAX_MULTI_RESULTS = 1024
DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # the reference falls back to max_pending


def _append_headers(hdr: bytes | None, pairs: list[tuple[bytes, bytes]]) -> bytes:
    extra = b"".join(k + b": " + v + b"\r\n" for k, v in pairs)
    if hdr:
        # drop the final CRLF of the block, append, close it again
        return hdr[: len(hdr) - 2] + extra + b"\r\n"
    return b"NATS/1.0\r\n" + extra + b"\r\n"


def direct_get_handlers(stream: "StreamView") -> tuple[Callable, Callable]:
    """(handler for DIRECT.GET.<s>, handler for DIRECT.GET.<s>.<subject...>)."""
    publish = stream.account.ports.publish

    def send_status(reply: str, status: bytes) -> None:
        publish(reply, "", status, b"")

    def on_request(subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        if not reply:
            return
        if required_level_too_high(hdr):
            send_status(reply, b"NATS/1.0 412 Required Api Level\r\n\r\n")
            return
        if not payload:
            send_status(reply, STATUS_EMPTY)
            return
        try:  # a plain json.Unmarshal, as nats-server: unknown fields pass, wrong kinds do not
            req = gojson.decode(payload, MSG_GET_REQUEST, strict=False)
        except gojson.GoError:
            send_status(reply, STATUS_MALFORMED)
            return
        seq = req.get("seq") or 0
        last_for = req.get("last_by_subj") or ""
        next_for = req.get("next_by_subj") or ""
        multi = req.get("multi_last") or []
        start_time = req.get("start_time")
        batch = req.get("batch") or 0
        if not isinstance(seq, int) or not isinstance(batch, int):
            send_status(reply, STATUS_MALFORMED)
            return
        if not seq and not last_for and not next_for and not multi and not start_time:
            send_status(reply, STATUS_EMPTY)
            return
        if (
            (seq and last_for)
            or (seq and start_time)
            or (start_time and last_for)
            or (last_for and next_for)
            or (last_for and batch > 0)
            or (last_for and multi)
            or (next_for and multi)
            or (req.get("up_to_seq") and req.get("up_to_time"))
        ):
            send_status(reply, STATUS_BAD)
            return
        get(req, reply)

    def on_last(subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        if not reply:
            return
        if required_level_too_high(hdr):
            send_status(reply, b"NATS/1.0 412 Required Api Level\r\n\r\n")
            return
        req: dict = {}
        if payload:
            try:
                req = gojson.decode(payload, MSG_GET_REQUEST, strict=False)
            except gojson.GoError:
                send_status(reply, STATUS_MALFORMED)
                return
        # the key is everything after the stream token: $JS[.<domain>].API.DIRECT.GET.<stream>.<key...>
        n = 5 if subject.startswith("$JS.API.") else 6
        parts = subject.split(".", n)
        key = parts[n] if len(parts) > n else ""
        if not key:
            send_status(reply, STATUS_BAD)
            return
        if any(
            req.get(k)
            for k in (
                "last_by_subj",
                "next_by_subj",
                "multi_last",
                "seq",
                "batch",
                "start_time",
                "up_to_seq",
                "up_to_time",
            )
        ):
            send_status(reply, STATUS_BAD)
            return
        req["last_by_subj"] = key
        get(req, reply)

    def get(req: dict, reply: str) -> None:
        store = stream.store
        name = stream.name.encode()
        no_hdr = req.get("no_hdr") is True
        if req.get("multi_last"):
            get_multi(req, reply)
            return
        seq = req.get("seq") or 0
        if req.get("start_time"):
            try:
                seq = store.get_seq_from_time(parse_rfc3339(req["start_time"]))
            except ValueError:
                send_status(reply, STATUS_MALFORMED)
                return
        next_for = req.get("next_by_subj") or ""
        last_for = req.get("last_by_subj") or ""
        batch = req.get("batch") or 0
        # Any non-zero batch is a batch request, as the reference; a negative one sends no
        # message, only the end-of-batch status.
        is_batch = batch != 0
        if not is_batch:
            batch = 1
        np = 0
        if is_batch:
            np = store.num_pending(seq, next_for or ">", False)
        mb = req.get("max_bytes") or DEFAULT_MAX_BYTES
        sent_bytes = 0
        lseq = 0
        for i in range(batch):
            try:
                if seq > 0 and not next_for:
                    if i == 0 and not is_batch:
                        sm = store.load_msg(seq)
                    else:
                        sm = store.load_next_msg(">", seq)
                    seq = sm.seq + 1
                elif next_for:
                    sm = store.load_next_msg(next_for, seq)
                    seq = sm.seq + 1
                else:
                    sm = store.load_last_msg(last_for)
            except (MsgNotFound, StoreEOF, StoreError):
                if batch > 1 and i > 0:
                    break
                send_status(reply, STATUS_NOT_FOUND)
                return
            hdr: bytes | None = None
            if not no_hdr:
                pairs = [
                    (NH.STREAM, name),
                    (NH.SUBJECT, sm.subject.encode()),
                    (NH.SEQUENCE, str(sm.seq).encode()),
                    (NH.TIME_STAMP, rfc3339(sm.ts).encode()),
                ]
                if is_batch:
                    if np > 0:
                        np -= 1
                    pairs.append((NH.NUM_PENDING, str(np).encode()))
                    pairs.append((NH.LAST_SEQUENCE, str(lseq).encode()))
                hdr = _append_headers(sm.hdr, pairs)
            lseq = sm.seq
            publish(reply, "", hdr, sm.msg)
            sent_bytes += len(sm.subject) + (len(sm.hdr) if sm.hdr else 0) + len(sm.msg)
            if sent_bytes >= mb:
                break
        if is_batch:
            publish(
                reply,
                "",
                b"NATS/1.0 204 EOB\r\nNats-Num-Pending: "
                + str(np).encode()
                + b"\r\nNats-Last-Sequence: "
                + str(lseq).encode()
                + b"\r\n\r\n",
                b"",
            )

    def get_multi(req: dict, reply: str) -> None:
        store = stream.store
        name = stream.name.encode()
        up_to = req.get("up_to_seq") or 0
        if req.get("up_to_time"):
            try:
                up_to = store.get_seq_from_time(parse_rfc3339(req["up_to_time"]))
            except ValueError:
                send_status(reply, STATUS_MALFORMED)
                return
            if up_to <= store.state().first_seq:
                send_status(reply, STATUS_NO_RESULTS)
                return
            up_to -= 1
        if not up_to:
            up_to = store.state().last_seq
        seqs = [s for s in store.multi_last_seqs(list(req["multi_last"]), up_to) if s >= (req.get("seq") or 0)]
        if len(seqs) > MAX_MULTI_RESULTS:
            send_status(reply, STATUS_TOO_MANY)
            return
        if not seqs:
            send_status(reply, STATUS_NO_RESULTS)
            return
        batch = req.get("batch") or 0
        mb = req.get("max_bytes") or DEFAULT_MAX_BYTES
        lseq = 0
        sent = sent_bytes = 0
        np = len(seqs)
        for s in seqs:
            try:
                sm = store.load_msg(s)
            except (MsgNotFound, StoreEOF):
                continue
            np -= 1
            hdr = _append_headers(
                sm.hdr,
                [
                    (NH.STREAM, name),
                    (NH.SUBJECT, sm.subject.encode()),
                    (NH.SEQUENCE, str(sm.seq).encode()),
                    (NH.TIME_STAMP, rfc3339(sm.ts).encode()),
                    (NH.NUM_PENDING, str(np).encode()),
                    (NH.LAST_SEQUENCE, str(lseq).encode()),
                ],
            )
            lseq = sm.seq
            publish(reply, "", hdr, sm.msg)
            sent_bytes += len(sm.subject) + (len(sm.hdr) if sm.hdr else 0) + len(sm.msg)
            sent += 1
            if sent_bytes >= mb or (batch > 0 and sent >= batch):
                break
        publish(
            reply,
            "",
            b"NATS/1.0 204 EOB\r\nNats-Num-Pending: "
            + str(np).encode()
            + b"\r\nNats-Last-Sequence: "
            + str(lseq).encode()
            + b"\r\nNats-UpTo-Sequence: "
            + str(up_to).encode()
            + b"\r\n\r\n",
            b"",
        )

    return on_request, on_last
