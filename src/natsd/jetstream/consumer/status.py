"""Wire bytes a consumer sends besides the stored messages themselves: status messages
(header-only ``NATS/1.0 <code> <text>`` blocks with an empty body) and the headers-only form of
a delivery.

Every string here is nats-server's, byte for byte (``server/consumer.go``); clients match some of
them by substring (nats-py: "Exceeded MaxWaiting", nats.go: "Idle Heartbeat").

Status block layout (what is written on the wire, as the HMSG header section)::

    NATS/1.0 <code> <description>\\r\\n
    <Header>: <value>\\r\\n          (zero or more)
    \\r\\n
"""

from __future__ import annotations

from natsd import nats_headers as NH

__all__ = [
    "HDR_LINE",
    "LAST_CONSUMER",
    "LAST_STREAM",
    "CONSUMER_STALLED",
    "MSG_SIZE",
    "PENDING_MSGS",
    "PENDING_BYTES",
    "FC_REQUEST",
    "idle_heartbeat",
    "status",
    "pending_status",
    "headers_only",
    "NO_MESSAGES",
    "CONSUMER_DELETED",
    "PUSH_BASED",
    "EXCEEDED_MAX_WAITING",
    "REQUESTS_PENDING",
]

HDR_LINE = b"NATS/1.0\r\n"
LAST_CONSUMER = NH.LAST_CONSUMER.decode()
LAST_STREAM = NH.LAST_STREAM.decode()
CONSUMER_STALLED = NH.CONSUMER_STALLED.decode()
MSG_SIZE = NH.MSG_SIZE.decode()
PENDING_MSGS = NH.PENDING_MESSAGES.decode()
PENDING_BYTES = NH.PENDING_BYTES.decode()
_MSG_SIZE_LINE = NH.MSG_SIZE + b": %d\r\n\r\n"

#: Sent on the deliver subject with reply ``$JS.FC.<stream>.<consumer>.<rand4>``.
FC_REQUEST = b"NATS/1.0 100 FlowControl Request\r\n\r\n"


def status(code: int, description: str) -> bytes:
    """``NATS/1.0 <code> <description>\\r\\n\\r\\n``."""
    return b"NATS/1.0 %d %s\r\n\r\n" % (code, description.encode())


NO_MESSAGES = status(404, "No Messages")
CONSUMER_DELETED = status(409, "Consumer Deleted")
PUSH_BASED = status(409, "Consumer is push based")
EXCEEDED_MAX_WAITING = status(409, "Exceeded MaxWaiting")
REQUESTS_PENDING = status(408, "Requests Pending")


def pending_status(code: int, description: str, msgs: int, nbytes: int) -> bytes:
    """A status with ``Nats-Pending-Messages`` / ``Nats-Pending-Bytes`` (408 Request Timeout,
    409 Message Size Exceeds MaxBytes, 409 Batch Completed)."""
    return b"NATS/1.0 %d %s\r\nNats-Pending-Messages: %d\r\nNats-Pending-Bytes: %d\r\n\r\n" % (
        code,
        description.encode(),
        msgs,
        nbytes,
    )


def idle_heartbeat(last_dseq: int, last_sseq: int, stalled_fc: str = "") -> bytes:
    """``100 Idle Heartbeat`` with the last consumer/stream sequences, plus
    ``Nats-Consumer-Stalled: <fc reply subject>`` while a flow-control request is unanswered."""
    if stalled_fc:
        return (
            b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: %d\r\nNats-Last-Stream: "
            b"%d\r\nNats-Consumer-Stalled: %s\r\n\r\n" % (last_dseq, last_sseq, stalled_fc.encode())
        )
    return b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: %d\r\nNats-Last-Stream: %d\r\n\r\n" % (
        last_dseq,
        last_sseq,
    )


def headers_only(hdr: bytes | None, payload_len: int) -> bytes:
    """The header block of a ``headers_only`` delivery: the stored headers (or a bare
    ``NATS/1.0``) with ``Nats-Msg-Size: <len(payload)>`` appended before the final CRLF."""
    base = hdr[:-2] if hdr else HDR_LINE  # drop the terminating empty line
    return base + _MSG_SIZE_LINE % payload_len
