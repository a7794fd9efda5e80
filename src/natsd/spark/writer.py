"""Publish rows to JetStream with acks, pipelined: a window of outstanding PubAcks.

Each message is ``PUB <subject> <reply> <n>`` or, when it carries headers (``Nats-Msg-Id`` and/or
user headers), ``HPUB <subject> <reply> <hdr_len> <total_len>`` with a ``NATS/1.0`` header block.
Replies go to ``<inbox>.<n>`` (``n`` numbers the task's messages from 0, i.e. its rows) under one
wildcard subscription, so a failure names the row it belongs to. A PubAck is the JSON
``{"stream":"S","seq":N}``, ``{"stream":"S","seq":N,"duplicate": true}`` (nats-server writes the
space) or ``{"error":{"code","err_code","description"},...}``; a ``503`` status (``HMSG`` with an
empty body) means no stream stores the subject.

Two costs dominated a task's CPU, and both are paid per batch here instead of per row:

* **Encoding.** :func:`encode_frames` builds every frame of an Arrow batch with Arrow compute
  kernels (``binary_join_element_wise`` over the subject, reply number, lengths, the
  ``Nats-Msg-Id`` header block and the payload), giving one contiguous buffer whose offsets are the
  frame boundaries; slices of it go to ``sendall`` as they are. Rows with user headers take the
  per-row path (:meth:`Publisher.publish`).
* **Acks.** PubAcks carry no CR/LF, so a run of plain acks is exactly two CRLF-terminated lines
  per ack. :meth:`Publisher._read_acks` counts complete acks in what was received with
  ``bytes.count`` and counts duplicates the same way; only a run that contains anything else
  (``"error"``, a status ``HMSG``, ``PING``, ``-ERR``) is parsed message by message.

Publishes are sent in slices of ``chunk`` frames, and the task stops sending while ``window`` acks
are outstanding, reading acks until half the window is free.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from natsd import nats_headers as NH
from natsd.spark.wire import ConnectOptions, NatsError, SyncConnection, parse_headers

_MSG_ID = NH.MSG_ID.decode()

__all__ = ["PublishStats", "Publisher", "encode_frames", "NoStreamError"]

_CRLF = b"\r\n"
# Anything in a run of received bytes that is not a plain PubAck (the bulk ack path's guard).
_NOT_PLAIN_ACK = re.compile(rb'"error"|HMSG|\r\n(?:INFO|PING|PONG|\+OK|-ERR)')
_BIN = pa.binary()


class NoStreamError(NatsError):
    """The server answered 503 (no responders): no stream stores the subject."""


@dataclass
class PublishStats:
    """What one task published: acked messages and how many the server reported as duplicates."""

    published: int = 0
    duplicates: int = 0


def _digits(ints: pa.Array) -> pa.Array:
    return pc.cast(pc.cast(ints, pa.string()), _BIN)


def encode_frames(
    first_n: int, reply_prefix: bytes, subject, data: pa.Array, ids: pa.Array | None, id_prefix: bytes | None = None
) -> pa.Array:
    """The PUB/HPUB frames of ``len(data)`` messages as one binary array (one frame per element).

    ``subject`` is a ``bytes`` subject for every row or a binary array; ``data`` a binary array
    without nulls; ``ids`` (binary, no nulls) the ``Nats-Msg-Id`` values, or ``id_prefix`` for ids
    ``<id_prefix><n>`` (positional: the digits are shared with the reply subjects), or neither.
    Message ``n`` (its reply ``<reply_prefix><n>``) runs from ``first_n``.
    """
    n = len(data)
    nums = _digits(pa.array(np.arange(first_n, first_n + n, dtype=np.int64)))
    dlen = pc.binary_length(data)
    if id_prefix is not None:
        hdr = pc.binary_join_element_wise(b"NATS/1.0\r\nNats-Msg-Id: ", id_prefix, nums, b"\r\n\r\n", b"")
    elif ids is not None:
        hdr = pc.binary_join_element_wise(b"NATS/1.0\r\nNats-Msg-Id: ", ids, b"\r\n\r\n", b"")
    else:
        hdr = None
    if hdr is None:
        parts = [b"PUB ", subject, b" ", reply_prefix, nums, b" ", _digits(dlen), _CRLF, data, _CRLF]
    else:
        hlen = pc.binary_length(hdr)
        parts = [
            b"HPUB ",
            subject,
            b" ",
            reply_prefix,
            nums,
            b" ",
            _digits(hlen),
            b" ",
            _digits(pc.add(hlen, dlen)),
            _CRLF,
            hdr,
            data,
            _CRLF,
        ]
    parts = [pa.scalar(p, _BIN) if isinstance(p, bytes) else p for p in parts]
    return pc.binary_join_element_wise(*parts, pa.scalar(b"", _BIN))


class Publisher:
    """Pipelined JetStream publisher over one connection (one per Spark task)."""

    def __init__(self, opts: ConnectOptions, window: int = 2048, chunk: int = 512, ack_timeout: float = 30.0):
        self.conn = SyncConnection(opts).connect()
        self.reply_prefix = self.conn.inbox_prefix + "."
        self._reply_prefix_b = self.reply_prefix.encode()
        self.conn.subscribe(self.conn.inbox_prefix + ".*", sid=1)
        self.window = window
        self.chunk = chunk
        self.ack_timeout = ack_timeout
        self.stats = PublishStats()
        self.outstanding = 0
        self._n = 0
        self._pending: list[bytes] = []
        self._buf = self.conn.take_buffered()  # what followed the handshake's PONG
        # (first reply number, count, subject or subjects) of recent sends, to name the subject of a
        # failed publish; at most window + chunk messages are unacknowledged, so that many entries do.
        self._recent: deque = deque(maxlen=window + chunk + 1)

    # -------------------------------------------------------------------------------- sending
    @property
    def count(self) -> int:
        """Messages queued so far; the next message is number ``count`` (reply ``<inbox>.<count>``)."""
        return self._n

    def publish(self, subject: str, data: bytes, headers: bytes = b"") -> None:
        """Queue one message; ``headers`` is a complete NATS/1.0 header block or ``b""``."""
        self._recent.append((self._n, 1, subject))
        reply = self._reply_prefix_b + b"%d" % self._n
        self._n += 1
        s = subject.encode()
        if headers:
            hl = len(headers)
            self._pending.append(b"HPUB %s %s %d %d\r\n%s%s\r\n" % (s, reply, hl, hl + len(data), headers, data))
        else:
            self._pending.append(b"PUB %s %s %d\r\n%s\r\n" % (s, reply, len(data), data))
        if len(self._pending) >= self.chunk:
            self._send_pending()

    def publish_batch(self, subject, data: pa.Array, ids: pa.Array | None, id_prefix: bytes | None = None) -> None:
        """Publish ``len(data)`` messages encoded in bulk (see :func:`encode_frames`); with
        ``id_prefix`` each message's id is ``<id_prefix><its number in this task>``."""
        self._send_pending()
        n = len(data)
        first = self._n
        self._n += n
        self._recent.append((first, n, subject))
        frames = encode_frames(
            first,
            self._reply_prefix_b,
            subject if isinstance(subject, bytes) else pc.cast(subject, _BIN),
            data,
            ids,
            id_prefix,
        )
        offsets = np.frombuffer(frames.buffers()[1], dtype=np.int32, count=n + 1, offset=frames.offset * 4)
        values = memoryview(frames.buffers()[2])
        for a in range(0, n, self.chunk):
            b = min(a + self.chunk, n)
            self._send(values[offsets[a] : offsets[b]], b - a)

    def _send_pending(self) -> None:
        if self._pending:
            n = len(self._pending)
            data = b"".join(self._pending)
            self._pending.clear()
            self._send(data, n)

    def _send(self, data, count: int) -> None:
        self.conn.send(data)
        self.outstanding += count
        if self.outstanding >= self.window:
            self._read_acks(self.window // 2)

    # --------------------------------------------------------------------------------- acks
    def _subject_of(self, n: int) -> str:
        for first, count, subj in reversed(self._recent):
            if first <= n < first + count:
                if isinstance(subj, bytes):
                    return subj.decode()
                if isinstance(subj, str):
                    return subj
                one = subj[n - first].as_py() if hasattr(subj, "type") else subj[n - first]
                return one.decode("utf-8", "replace") if isinstance(one, bytes) else str(one)
        return "?"

    def _failure(self, reply: bytes, message: str) -> NatsError:
        n = int(reply.rsplit(b".", 1)[-1])
        return NatsError(f"row {n} of this task (subject {self._subject_of(n)!r}): {message}")

    def _read_acks(self, until: int) -> None:
        """Read PubAcks until at most ``until`` remain outstanding."""
        sock = self.conn.sock
        assert sock is not None  # connected when the writer was made
        sock.settimeout(self.ack_timeout)
        buf = self._buf
        pos = 0
        while self.outstanding > until:
            # Bulk path: a run of plain acks is two CRLF lines per ack (see the module docstring).
            if buf.startswith(b"MSG ", pos):
                cut = len(buf) if buf.endswith(_CRLF) else buf.rfind(_CRLF, pos) + 2
                lines = buf.count(_CRLF, pos, cut) if cut > pos + 1 else 0
                if lines % 2:
                    cut = buf.rfind(_CRLF, pos, cut - 2) + 2
                    lines -= 1
                k = lines // 2
                if k and buf.count(b"MSG ", pos, cut) == k and not _NOT_PLAIN_ACK.search(buf, pos, cut):
                    self.outstanding -= k
                    self.stats.published += k
                    self.stats.duplicates += buf.count(b'"duplicate": true', pos, cut) + buf.count(
                        b'"duplicate":true', pos, cut
                    )
                    pos = cut
                    continue
            i = buf.find(_CRLF, pos)
            if i < 0:
                buf = self._recv(buf, pos)
                pos = 0
                continue
            c = buf[pos]
            if c == 77 or c == 72:  # 'M'SG / 'H'MSG: parse one message
                parts = buf[pos:i].split(b" ")
                tlen = int(parts[-1])
                hlen = int(parts[-2]) if c == 72 else 0
                start = i + 2
                end = start + tlen
                if end + 2 > len(buf):
                    buf = self._recv(buf, pos)
                    pos = 0
                    continue
                pos = end + 2
                if parts[2] != b"1":
                    continue
                body = buf[start + hlen : end]
                if hlen and not body:
                    status, desc, _ = parse_headers(buf[start : start + hlen])
                    if status == 503:
                        raise NoStreamError(
                            str(self._failure(parts[1], "no stream stores this subject (503 no responders)"))
                        )
                    raise self._failure(parts[1], f"publish failed: {status} {desc}")
                self.outstanding -= 1
                if b'"error"' in body:
                    err = json.loads(body).get("error", {})
                    raise self._failure(
                        parts[1],
                        f"publish rejected: {err.get('description')} "
                        f"(code={err.get('code')}, err_code={err.get('err_code')})",
                    )
                self.stats.published += 1
                if b'"duplicate"' in body and b"true" in body:
                    self.stats.duplicates += 1
                continue
            line = buf[pos:i]
            pos = i + 2
            if line == b"PING":
                self.conn.send(b"PONG\r\n")
            elif line[:4] == b"-ERR":
                raise NatsError(line.decode(errors="replace"))
        self._buf = buf[pos:]

    def _recv(self, buf: bytes, pos: int) -> bytes:
        sock = self.conn.sock
        assert sock is not None  # connected when the writer was made
        try:
            chunk = sock.recv(SyncConnection.RECV_SIZE)
        except TimeoutError:
            raise TimeoutError(f"{self.outstanding} PubAcks not received within {self.ack_timeout}s") from None
        if not chunk:
            raise NatsError("connection closed by the server")
        rest = buf[pos:]
        return rest + chunk if rest else chunk

    def finish(self) -> PublishStats:
        """Send what is queued, wait for every ack, close; returns the task's counts."""
        try:
            self._send_pending()
            self._read_acks(0)
        finally:
            self.conn.close()
        return self.stats

    def close(self) -> None:
        self.conn.close()


# ------------------------------------------------------------------------------ rows -> messages
@dataclass(frozen=True)
class RowPlan:
    """Which DataFrame columns a write uses (Kafka's sink names are accepted as aliases)."""

    data: str  # "data" or "value"
    subject: str | None  # "subject" or "topic" column; None when an option fixes the subject
    fixed_subject: str | None
    headers: str | None
    id_column: str | None


def plan_columns(
    names: list[str], subject_option: str | None, id_column: str | None, subject_option_name: str = "subject"
) -> RowPlan:
    """Check the DataFrame's columns for a write and pick the ones used; errors say what to do."""
    from natsd.spark.options import OptionError

    def one_of(a: str, b: str) -> str | None:
        if a in names and b in names:
            raise OptionError(f"the DataFrame has both a {a!r} and a {b!r} column (aliases); keep one")
        return a if a in names else (b if b in names else None)

    data = one_of("data", "value")
    if data is None:
        raise OptionError(
            f"writing to jetstream needs a 'data' (or Kafka-style 'value') column, binary or string; columns: {names}"
        )
    subject = one_of("subject", "topic")
    if subject_option is None and subject is None:
        raise OptionError(
            "writing to jetstream needs option 'subject' (or 'topic') or a 'subject' (or 'topic') column; "
            f"columns: {names}"
        )
    if "key" in names and id_column != "key":
        raise OptionError(
            "the DataFrame has a Kafka-style 'key' column, but JetStream messages have no key: put it in the "
            "subject (e.g. concat('orders.', key) AS subject), use it as the message id "
            "(.option('idempotence', 'column:key')), or drop it"
        )
    if id_column is not None and id_column not in names:
        raise OptionError(f"option 'idempotence': column {id_column!r} is not in the DataFrame; columns: {names}")
    return RowPlan(
        data=data,
        subject=None if subject_option is not None else subject,
        fixed_subject=subject_option,
        headers="headers" if "headers" in names else None,
        id_column=id_column,
    )


def _as_binary(col: pa.Array) -> pa.Array:
    if pa.types.is_large_binary(col.type) or pa.types.is_large_string(col.type):
        col = pc.cast(col, pa.large_binary())
        return pc.cast(col, _BIN)
    if not pa.types.is_binary(col.type):
        col = pc.cast(col, pa.string()) if not pa.types.is_string(col.type) else col
        col = pc.cast(col, _BIN)
    return col


def _header_pairs(h) -> list[tuple[str, str]]:
    """One row's ``headers`` value (list of (key, value) structs or a map) as text pairs."""
    items = (
        h.items() if isinstance(h, dict) else ((x["key"], x["value"]) if isinstance(x, dict) else tuple(x) for x in h)
    )
    out = []
    for k, v in items:
        if not k:
            continue
        if isinstance(v, (bytes, bytearray, memoryview)):
            v = bytes(v).decode("utf-8")
        v = "" if v is None else str(v)
        if "\r" in v or "\n" in v or "\r" in k or "\n" in k or ":" in k:
            raise ValueError(f"header {k!r}: keys and values cannot contain CR/LF (and keys no ':')")
        out.append((k, v))
    return out


# Frames of one bulk encode share int32 Arrow offsets: keep each encode well below 2 GiB.
_MAX_ENCODE_BYTES = 256 << 20


def _bounded(batches, data_column: str):
    """Yield the batches, sliced where one would encode to more than ``_MAX_ENCODE_BYTES``."""
    for batch in batches:
        n = batch.num_rows
        size = batch.column(data_column).nbytes if n else 0
        if size <= _MAX_ENCODE_BYTES:
            yield batch
            continue
        step = max(1, int(n * _MAX_ENCODE_BYTES / size))
        for off in range(0, n, step):
            yield batch.slice(off, step)


def write_batches(pub: Publisher, plan: RowPlan, batches, part: int, id_prefix: str | None) -> None:
    """Publish every row of ``batches`` (Arrow record batches from Spark) through ``pub``.

    ``id_prefix`` set = positional ids ``<id_prefix><row>``; ``plan.id_column`` = ids from a column.
    Rows go through :meth:`Publisher.publish_batch` unless the batch carries user headers.
    """
    from natsd.spark.wire import encode_headers

    row = 0
    prefix_b = id_prefix.encode() if id_prefix is not None else None
    fixed = plan.fixed_subject.encode() if plan.fixed_subject else None
    for batch in _bounded(batches, plan.data):
        n = batch.num_rows
        if n == 0:
            continue
        cols = batch.schema.names
        data = pc.fill_null(_as_binary(batch.column(cols.index(plan.data))), pa.scalar(b"", _BIN))
        subjects = None
        if fixed is None:
            subjects = batch.column(cols.index(plan.subject))
            bad = pc.or_(
                pc.is_null(subjects), pc.match_substring_regex(pc.fill_null(subjects, ""), r"^$|[\s*>]|^\.|\.$|\.\.")
            )
            if pc.any(bad).as_py():
                i = pc.index(bad, True).as_py()
                raise ValueError(
                    f"row {row + i} of partition {part}: invalid subject {subjects[i].as_py()!r} in column "
                    f"{plan.subject!r} (needs a subject without wildcards, spaces or empty tokens)"
                )
        if pub.count != row:  # positional ids reuse the publisher's message numbers
            raise AssertionError(f"publisher numbered {pub.count} messages, the task wrote {row} rows")
        ids = None
        if plan.id_column is not None:
            ids = _as_binary(batch.column(cols.index(plan.id_column)))
            filled = pc.fill_null(ids, b"")
            bad = pc.or_(
                pc.equal(pc.binary_length(filled), 0),
                pc.or_(pc.match_substring(filled, b"\r"), pc.match_substring(filled, b"\n")),
            )
            if pc.any(bad).as_py():
                i = pc.index(bad, True).as_py()
                raise ValueError(
                    f"row {row + i} of partition {part}: idempotence column {plan.id_column!r} is "
                    f"{batch.column(cols.index(plan.id_column))[i].as_py()!r}; every row needs a non-empty id "
                    "without CR/LF (a row without one could be stored twice)"
                )
        hdrs = None
        if plan.headers is not None:
            hcol = batch.column(cols.index(plan.headers))
            if (
                pc.any(pc.greater(pc.fill_null(pc.list_value_length(hcol), 0), 0)).as_py()
                if pa.types.is_list(hcol.type) or pa.types.is_large_list(hcol.type)
                else hcol.null_count < n
            ):
                hdrs = hcol.to_pylist()
        if hdrs is None:
            pub.publish_batch(fixed if fixed is not None else subjects, data, ids, prefix_b)
        else:
            dl = data.to_pylist()
            # (no subject column: every row goes to plan.fixed_subject)
            sl: list[Any] = subjects.to_pylist() if subjects is not None else [plan.fixed_subject] * n
            il = ids.to_pylist() if ids is not None else None
            for i in range(n):
                if prefix_b is not None:
                    pairs = [(_MSG_ID, f"{id_prefix}{row + i}")]
                else:
                    pairs = [(_MSG_ID, il[i].decode())] if il is not None else []
                if hdrs[i]:
                    pairs.extend(_header_pairs(hdrs[i]))
                pub.publish(plan.fixed_subject or sl[i], dl[i], encode_headers(pairs) if pairs else b"")
        row += n
