"""Stream snapshots and restores: the archive format and the chunked transfer state machines.

The API handlers (:mod:`natsd.jetstream.api.snapshot`) only validate requests; this module does
the work:

* :class:`SnapshotSender` streams one stream's archive to a ``deliver_subject`` in chunks with
  the reference's flow control (``$JS.SNAPSHOT.ACK.<stream>.<id>.<len>.<index>`` replies, a
  window of unacknowledged chunks, a final ``NATS/1.0 204`` status);
* :class:`RestoreReceiver` accepts chunks sent as requests to
  ``$JS.SNAPSHOT.RESTORE.<stream>.<id>``, parses the archive incrementally into a fresh store and,
  on the empty end-of-upload request, turns it into a live stream with its consumers.

Archive byte format
-------------------

natsd writes the reference's ``NATSARC1`` entry format (``server/archive/archive.go``, the
decompressed body of a nats-server 2.15 snapshot), *without* the S2 framing around it, so the
bytes on the wire start with the 8 magic bytes ``NATSARC1``::

    archive := "NATSARC1" entry* end
    entry   := uvarint(len(name)) varint(ts) uvarint(seq) uvarint(hdr_size) uvarint(payload_size)
               name payload                      # payload is hdr_size + payload_size bytes
    end     := an entry whose fields are all zero and whose name is empty (5 zero bytes)

``uvarint`` is an unsigned LEB128 integer (Go's ``binary.PutUvarint``); ``varint`` is the
zig-zag signed form (Go's ``binary.PutVarint``). Entries, in this order:

1. ``state.json``: the StreamState JSON at the start of the snapshot (the reference's field
   names: ``messages``, ``bytes``, ``first_seq``, ``first_ts``, ``last_seq``, ``last_ts``, ...).
   ``consumer_count`` is the number of consumer entries that follow (0 with ``no_consumers``).
2. ``consumers/<name>`` (one per consumer): ``{"config": ConsumerConfig, "state":
   ConsumerState}`` where ConsumerState is ``{"delivered": {"consumer_seq", "stream_seq"},
   "ack_floor": {...}, "pending": {"<sseq>": {"Sequence": dseq, "Timestamp": unix_ns}},
   "redelivered": {"<sseq>": count}}`` -- the reference's SnapshotConsumerState; stream
   sequences are bounded by the snapshot's ``last_seq``.
3. One entry per stored message in sequence order: ``name`` = subject, ``ts`` = stored time
   (Unix ns), ``seq`` = stream sequence, payload = raw header block (``hdr_size`` bytes,
   ``NATS/1.0\\r\\n...``) followed by the message body (``payload_size`` bytes). Gaps between
   sequences are deleted messages; they are restored as deleted.
4. The end entry. A restore without it fails ("backup was truncated").

The stream config is not in the archive: it travels in the snapshot reply and the restore
request (``{"config", "state"}``), as with the reference.

Restores accept this format, which is also the reference's archive once S2-decompressed; an
S2-framed upload (what nats-server 2.15 sends, starting ``ff 06 00 00 "S2sTwO"``) is decoded by
:class:`S2StreamDecoder` first, so a nats-server 2.15 backup restores into natsd. The older
S2-compressed tar format (nats-server before 2.15) is refused with "restore failed: unsupported
snapshot format". natsd's own snapshots are not S2-framed, so nats-server cannot restore them.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from typing import TYPE_CHECKING, Any, Callable, Iterator

from natsd.jetstream import consumer_registry
from natsd.jetstream.consumer_config import ConsumerConfig
from natsd.jetstream.errors import ApiError, ApiErrors
from natsd.jetstream.wire import dumps, error_envelope, resp

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.manager import JsAccount
    from natsd.jetstream.stream import Stream

__all__ = [
    "MAGIC", "encode_uvarint", "encode_varint", "encode_entry", "END_ENTRY", "ArchiveReader", "ArchiveEntry",
    "ArchiveError", "iter_archive", "SnapshotSender", "RestoreReceiver", "consumer_state_to_json",
    "consumer_state_from_json", "DEFAULT_CHUNK_SIZE", "DEFAULT_WINDOW_SIZE", "ACK_TIMEOUT_NS",
    "STATUS_DONE", "STATUS_NO_INTEREST", "STATUS_NO_FLOW", "remove_stale_restores",
    "S2StreamDecoder", "s2_decode_block", "RESTORE_DIR_PREFIX",
]

log = logging.getLogger("natsd.jetstream.snapshot")

MAGIC = b"NATSARC1"
S2_STREAM_ID = b"\xff\x06\x00\x00S2sTwO"
SNAPPY_STREAM_ID = b"\xff\x06\x00\x00sNaPpY"

DEFAULT_CHUNK_SIZE = 128 * 1024
DEFAULT_WINDOW_SIZE = 8 * 1024 * 1024
MIN_CHUNK, MAX_CHUNK = 1024, 1024 * 1024
MIN_WINDOW, MAX_WINDOW = 1024, 32 * 1024 * 1024
SECOND = 1_000_000_000
#: No chunk acknowledged for this long -> ``408 No Flow Response`` (the reference's 5 s).
ACK_TIMEOUT_NS = 5 * SECOND
#: How long a snapshot waits for interest on its deliver subject before starting (reference: 2 s).
INTEREST_WAIT_NS = 2 * SECOND
#: A restore with no chunk for this long fails as stalled (reference: 5 s).
RESTORE_STALL_NS = 5 * SECOND
#: Chunks sent per loop turn at most, so one snapshot never holds the loop for long.
CHUNKS_PER_TURN = 32

# Final status messages of a snapshot (header only, empty body), exactly as the reference.
STATUS_DONE = b"NATS/1.0 204\r\n\r\n"
STATUS_NO_INTEREST = b"NATS/1.0 408 No Interest\r\n\r\n"
STATUS_NO_FLOW = b"NATS/1.0 408 No Flow Response\r\n\r\n"

#: Hidden upload directory of a file-storage restore, under ``<account>/streams/``.
RESTORE_DIR_PREFIX = ".restore."
SNAPSHOT_ACK_PREFIX = "$JS.SNAPSHOT.ACK."
RESTORE_PREFIX = "$JS.SNAPSHOT.RESTORE."


def _nuid() -> str:
    # 22 characters from the same alphabet as a NUID; unique enough for one inbox-like subject.
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    return "".join(alphabet[b % 62] for b in secrets.token_bytes(22))


# ---------------------------------------------------------------------------------------------
# Archive encoding

_SMALL = [bytes([i]) for i in range(128)]


def encode_uvarint(n: int) -> bytes:
    """Unsigned LEB128 (Go ``binary.PutUvarint``)."""
    if n < 128:
        if n < 0:
            raise ValueError("uvarint must be >= 0")
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_varint(n: int) -> bytes:
    """Zig-zag signed varint (Go ``binary.PutVarint``)."""
    return encode_uvarint((n << 1) if n >= 0 else ((-n << 1) - 1))


def encode_entry(name: bytes, ts: int, seq: int, hdr: bytes, payload: bytes) -> bytes:
    """One archive entry (without the magic)."""
    return b"".join((encode_uvarint(len(name)), encode_varint(ts), encode_uvarint(seq),
                     encode_uvarint(len(hdr)), encode_uvarint(len(payload)), name, hdr, payload))


#: The end-of-archive entry: every field zero, empty name.
END_ENTRY = b"\x00\x00\x00\x00\x00"


def _pending_json(state: Any, last_seq: int) -> dict:
    return {str(s): {"Sequence": p.sequence, "Timestamp": p.timestamp}
            for s, p in sorted(state.pending.items()) if s <= last_seq}


def consumer_state_to_json(state: Any, last_seq: int | None = None) -> dict:
    """A store ConsumerState -> the reference's ConsumerState JSON, stream sequences bounded by
    ``last_seq`` (as the reference bounds a snapshot's consumers to the stream snapshot)."""
    lim = last_seq if last_seq is not None else 1 << 64
    out: dict = {
        "delivered": {"consumer_seq": state.delivered.consumer_seq,
                      "stream_seq": min(state.delivered.stream_seq, lim)},
        "ack_floor": {"consumer_seq": state.ack_floor.consumer_seq,
                      "stream_seq": min(state.ack_floor.stream_seq, lim)},
    }
    pending = _pending_json(state, lim)
    if pending:
        out["pending"] = pending
    red = {str(s): c for s, c in sorted(state.redelivered.items()) if s <= lim}
    if red:
        out["redelivered"] = red
    return out


def consumer_state_from_json(d: dict) -> Any:
    """The reference's ConsumerState JSON -> a store ConsumerState (ValueError when malformed)."""
    from natsd.store.base import ConsumerState, Pending, SequencePair

    def pair(v: Any) -> SequencePair:
        v = v or {}
        if not isinstance(v, dict):
            raise ValueError("bad sequence pair")
        return SequencePair(int(v.get("consumer_seq") or 0), int(v.get("stream_seq") or 0))

    if not isinstance(d, dict):
        raise ValueError("consumer state is not an object")
    pending = {}
    for k, p in (d.get("pending") or {}).items():
        if not isinstance(p, dict):
            raise ValueError("bad pending entry")
        pending[int(k)] = Pending(int(p.get("Sequence") or 0), int(p.get("Timestamp") or 0))
    red = {int(k): int(v) for k, v in (d.get("redelivered") or {}).items()}
    return ConsumerState(delivered=pair(d.get("delivered")), ack_floor=pair(d.get("ack_floor")),
                         pending=pending, redelivered=red)


def iter_archive(stream: "Stream", include_consumers: bool = True,
                 state_json: dict | None = None) -> Iterator[bytes]:
    """The archive of ``stream`` as a sequence of byte pieces (see the module docstring).

    Messages are read lazily from the store, up to the ``last_seq`` of the state taken when the
    iterator starts; a message removed meanwhile simply becomes a gap (a deleted sequence)."""
    if state_json is None:
        state_json = stream.state_json()[0]
    state = dict(state_json)
    last_seq = int(state.get("last_seq") or 0)
    first_seq = int(state.get("first_seq") or 0)
    consumers = sorted(stream.consumers.values(), key=lambda c: c.name) if include_consumers else []
    state["consumer_count"] = len(consumers)
    yield MAGIC
    sj = json.dumps(state, separators=(",", ":")).encode()
    yield encode_entry(b"state.json", stream.clock.time_ns(), 0, b"", sj)
    now = stream.clock.time_ns()
    for c in consumers:
        body = {"config": c.config.to_json(), "state": consumer_state_to_json(c.state(), last_seq)}
        yield encode_entry(("consumers/" + c.name).encode(), now, 0, b"",
                           json.dumps(body, separators=(",", ":")).encode())
    if last_seq and first_seq <= last_seq:
        uv = encode_uvarint
        sv = encode_varint
        for sm in stream.store.iter_msgs(max(first_seq, 1), last_seq):
            name = sm.subject.encode()
            hdr = sm.hdr or b""
            msg = sm.msg
            yield b"".join((uv(len(name)), sv(sm.ts), uv(sm.seq), uv(len(hdr)), uv(len(msg)), name, hdr, msg))
    yield END_ENTRY


# ---------------------------------------------------------------------------------------------
# Archive decoding (incremental)


class ArchiveError(ValueError):
    """The uploaded bytes are not a valid archive."""


class ArchiveEntry:
    """One decoded entry; ``payload`` holds header block + body (split at ``hdr_size``)."""

    __slots__ = ("name", "ts", "seq", "hdr_size", "payload")

    def __init__(self, name: str, ts: int, seq: int, hdr_size: int, payload: bytes) -> None:
        self.name = name
        self.ts = ts
        self.seq = seq
        self.hdr_size = hdr_size
        self.payload = payload

    @property
    def is_end(self) -> bool:
        return not self.name and not self.ts and not self.seq and not self.payload and not self.hdr_size


class ArchiveReader:
    """Feed archive bytes in any chunking; :meth:`feed` returns the entries completed so far.

    ``max_entry`` bounds one entry's declared size (a corrupt length must not make us buffer
    forever)."""

    def __init__(self, max_entry: int = 64 * 1024 * 1024) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._magic = False
        self.max_entry = max_entry
        self.ended = False

    def feed(self, data: bytes) -> list[ArchiveEntry]:
        if self.ended:
            if data:
                raise ArchiveError("data after the end of the archive")
            return []
        buf = self._buf
        if self._pos > 65536 and self._pos > len(buf) // 2:
            del buf[:self._pos]
            self._pos = 0
        buf += data
        out: list[ArchiveEntry] = []
        if not self._magic:
            if len(buf) - self._pos < len(MAGIC):
                return out
            if bytes(buf[self._pos:self._pos + len(MAGIC)]) != MAGIC:
                raise ArchiveError("unsupported snapshot format")
            self._pos += len(MAGIC)
            self._magic = True
        n = len(buf)
        while True:
            p = self._pos
            fields = []
            for i in range(5):
                v = 0
                shift = 0
                while True:
                    if p >= n:
                        return out
                    b = buf[p]
                    p += 1
                    v |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                    if shift > 63:
                        raise ArchiveError("varint overflow")
                fields.append(v)
            name_len, zts, seq, hsz, psz = fields
            ts = (zts >> 1) ^ -(zts & 1)
            total = name_len + hsz + psz
            if total > self.max_entry:
                raise ArchiveError("archive entry too large")
            if n - p < total:
                return out
            name = bytes(buf[p:p + name_len]).decode("utf-8", "surrogateescape")
            p += name_len
            payload = bytes(buf[p:p + hsz + psz])
            p += hsz + psz
            self._pos = p
            e = ArchiveEntry(name, ts, seq, hsz, payload)
            out.append(e)
            if e.is_end:
                self.ended = True
                if p != n:
                    raise ArchiveError("data after the end of the archive")
                return out


# ---------------------------------------------------------------------------------------------
# S2 / Snappy framed stream decoding (to accept nats-server 2.15 snapshots)


class S2StreamDecoder:
    """Incremental decoder of the S2 (or Snappy) framing format nats-server wraps its archives in.

    Frames: 1 type byte, 3-byte little-endian length, body. ``0xff`` stream identifier
    (``S2sTwO`` / ``sNaPpY``), ``0x00`` compressed block (4-byte masked CRC-32C + block), ``0x01``
    uncompressed block (4-byte CRC + data), ``0x80``-``0xfe`` skippable (padding, index),
    ``0x02``-``0x7f`` reserved (error). A block is ``uvarint(decoded length)`` followed by
    Snappy elements (literal, copy with 1/2/4-byte offset) plus S2's repeat-offset copy (a
    1-byte-offset copy whose offset is 0). The CRCs are not verified: the archive inside has its
    own structure checks, and pure-Python CRC-32C would dominate the restore time.
    """

    MAX_BLOCK = 4 * 1024 * 1024 + 64

    def __init__(self) -> None:
        self._buf = bytearray()
        self._seen_id = False

    def feed(self, data: bytes) -> bytes:
        buf = self._buf
        buf += data
        out = bytearray()
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            typ = buf[pos]
            ln = buf[pos + 1] | (buf[pos + 2] << 8) | (buf[pos + 3] << 16)
            if ln > self.MAX_BLOCK:
                raise ArchiveError("S2 frame too large")
            if n - pos - 4 < ln:
                break
            body = bytes(buf[pos + 4:pos + 4 + ln])
            pos += 4 + ln
            if typ == 0xFF:
                if body not in (b"S2sTwO", b"sNaPpY"):
                    raise ArchiveError("invalid S2 stream identifier")
                self._seen_id = True
                continue
            if not self._seen_id:
                raise ArchiveError("S2 stream without identifier")
            if typ == 0x00:
                if ln < 4:
                    raise ArchiveError("corrupt S2 frame")
                out += s2_decode_block(body[4:])
            elif typ == 0x01:
                if ln < 4:
                    raise ArchiveError("corrupt S2 frame")
                out += body[4:]
            elif typ < 0x80:
                raise ArchiveError("unsupported S2 frame type")
            # 0x80-0xfe: skippable
        del buf[:pos]
        return bytes(out)


def s2_decode_block(src: bytes) -> bytes:
    """Decode one S2 (or Snappy) block."""
    n = len(src)
    s = 0
    dlen = 0
    shift = 0
    while True:
        if s >= n:
            raise ArchiveError("corrupt S2 block")
        b = src[s]
        s += 1
        dlen |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 35:
            raise ArchiveError("corrupt S2 block")
    if dlen > S2StreamDecoder.MAX_BLOCK:
        raise ArchiveError("S2 block too large")
    dst = bytearray()
    offset = 0
    while s < n:
        tag = src[s]
        kind = tag & 3
        if kind == 0:  # literal
            x = tag >> 2
            if x < 60:
                s += 1
            else:
                nb = x - 59
                if s + 1 + nb > n:
                    raise ArchiveError("corrupt S2 block")
                x = int.from_bytes(src[s + 1:s + 1 + nb], "little")
                s += 1 + nb
            length = x + 1
            if s + length > n:
                raise ArchiveError("corrupt S2 block")
            dst += src[s:s + length]
            s += length
            continue
        if kind == 1:  # copy, 1-byte offset; offset 0 = S2 repeat
            if s + 2 > n:
                raise ArchiveError("corrupt S2 block")
            toff = ((tag & 0xE0) << 3) | src[s + 1]
            length = (tag >> 2) & 7
            s += 2
            if toff == 0:
                if length == 5:
                    length = src[s] + 4
                    s += 1
                elif length == 6:
                    length = int.from_bytes(src[s:s + 2], "little") + (1 << 8)
                    s += 2
                elif length == 7:
                    length = int.from_bytes(src[s:s + 3], "little") + (1 << 16)
                    s += 3
            else:
                offset = toff
            length += 4
        elif kind == 2:
            if s + 3 > n:
                raise ArchiveError("corrupt S2 block")
            offset = src[s + 1] | (src[s + 2] << 8)
            length = 1 + (tag >> 2)
            s += 3
        else:
            if s + 5 > n:
                raise ArchiveError("corrupt S2 block")
            offset = int.from_bytes(src[s + 1:s + 5], "little")
            length = 1 + (tag >> 2)
            s += 5
        d = len(dst)
        if offset <= 0 or d < offset or d + length > dlen:
            raise ArchiveError("corrupt S2 block")
        if offset >= length:
            dst += dst[d - offset:d - offset + length]
        else:
            # overlapping copy: repeat the last ``offset`` bytes
            pat = bytes(dst[d - offset:d])
            reps, rem = divmod(length, offset)
            dst += pat * reps + pat[:rem]
    if len(dst) != dlen:
        raise ArchiveError("corrupt S2 block")
    return bytes(dst)


# ---------------------------------------------------------------------------------------------
# Snapshot sender


class SnapshotSender:
    """Sends one snapshot of ``stream`` to ``deliver_subject`` (reference ``streamSnapshot``).

    Every full chunk goes out with reply ``$JS.SNAPSHOT.ACK.<stream>.<id>.<len>.<index>`` and
    takes one slot of the window (``window_size // chunk_size`` slots); any message on
    ``$JS.SNAPSHOT.ACK.<stream>.<id>.>`` frees a slot. The last, short chunk has no reply. Then
    a header-only ``NATS/1.0 204`` ends the transfer; ``408 No Interest`` when the receiver went
    away, ``408 No Flow Response`` after 5 s without an ack, ``500 <error>`` on a read error.
    """

    def __init__(self, stream: "Stream", deliver_subject: str, chunk_size: int = 0, window_size: int = 0,
                 include_consumers: bool = True, state_json: dict | None = None,
                 on_done: Callable[[str], None] | None = None) -> None:
        self.stream = stream
        self.account = stream.account
        self.ports = stream.account.ports
        self.clock = stream.clock
        self.deliver = deliver_subject
        cs = chunk_size or DEFAULT_CHUNK_SIZE
        ws = window_size or DEFAULT_WINDOW_SIZE
        cs = min(max(MIN_CHUNK, cs), MAX_CHUNK)
        ws = min(max(MIN_WINDOW, ws), MAX_WINDOW)
        ws = max(ws, cs)
        self.chunk_size = cs
        self.slots = ws // cs
        self.index = 1
        self.bytes_sent = 0
        self.done = False
        self.error = ""
        self._on_done = on_done
        self._pieces = iter_archive(stream, include_consumers, state_json)
        self._buf = bytearray()
        self._eof = False
        self._ack_subject = f"{SNAPSHOT_ACK_PREFIX}{stream.name}.{_nuid()}"
        self._ack_sub: Any = None
        self._interest_sub: Any = None
        self._ack_timer: Any = None
        self._wait_timer: Any = None
        self._scheduled = False
        self._frozen = False

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Begin (call after the snapshot reply was sent)."""
        if self.done:
            return  # cancelled before it started
        if self.stream.closed:
            self.done = True
            self.ports.publish(self.deliver, "", b"NATS/1.0 500 stream closed\r\n\r\n", b"")
            if self._on_done is not None:
                self._on_done("stream closed")
            return
        self._frozen = True
        self.stream.begin_snapshot()
        self._ack_sub = self.ports.subscribe(self._ack_subject + ".>", self._on_ack)
        on_interest = getattr(self.ports, "on_interest", None)
        if on_interest is not None:
            self._interest_sub = on_interest(self._on_interest)
        if self.ports.has_interest(self.deliver):
            self._schedule()
        else:
            # Allow a little time for the receiver's subscription to show up (reference: 2 s).
            self._wait_timer = self.clock.call_later(INTEREST_WAIT_NS, self._interest_wait_over)

    def _interest_wait_over(self) -> None:
        self._wait_timer = None
        if not self.done:
            self._schedule()

    def _on_interest(self, subject: str, added: bool) -> None:
        if self.done:
            return
        if added:
            if self._wait_timer is not None and self.ports.has_interest(self.deliver):
                self._wait_timer.cancel()
                self._wait_timer = None
                self._schedule()
        elif self._wait_timer is None and not self.ports.has_interest(self.deliver):
            self._finish(STATUS_NO_INTEREST, "no interest")

    def _on_ack(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        if self.done:
            return
        self.slots += 1
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled and not self.done:
            self._scheduled = True
            self.clock.call_soon(self._pump)

    def _arm_ack_timer(self) -> None:
        if self._ack_timer is not None:
            self._ack_timer.cancel()
        self._ack_timer = self.clock.call_later(ACK_TIMEOUT_NS, self._ack_timeout)

    def _ack_timeout(self) -> None:
        self._ack_timer = None
        if not self.done:
            self._finish(STATUS_NO_FLOW, "no flow response")

    # -- sending ---------------------------------------------------------------------------
    def _fill(self) -> None:
        buf = self._buf
        cs = self.chunk_size
        pieces = self._pieces
        while len(buf) < cs and not self._eof:
            try:
                buf += next(pieces)
            except StopIteration:
                self._eof = True

    def _pump(self) -> None:
        self._scheduled = False
        if self.done:
            return
        if self.stream.closed:
            self._finish(b"NATS/1.0 500 stream closed\r\n\r\n", "stream closed")
            return
        sent = 0
        cs = self.chunk_size
        publish = self.ports.publish
        try:
            while self.slots > 0 and sent < CHUNKS_PER_TURN:
                self._fill()
                buf = self._buf
                if len(buf) >= cs:
                    chunk = bytes(buf[:cs])
                    del buf[:cs]
                    # A full chunk always carries an ack reply, even the last one when the
                    # archive ends exactly on a chunk boundary (as the reference).
                    publish(self.deliver, f"{self._ack_subject}.{len(chunk)}.{self.index}", None, chunk)
                    self.index += 1
                    self.slots -= 1
                    self.bytes_sent += len(chunk)
                    sent += 1
                    continue
                # The archive is complete and what is left is shorter than a chunk.
                if buf:
                    publish(self.deliver, "", None, bytes(buf))
                    self.bytes_sent += len(buf)
                    buf.clear()
                self._finish(STATUS_DONE, "")
                return
        except ApiError as e:
            self._finish(f"NATS/1.0 500 {e.description}\r\n\r\n".encode(), e.description)
            return
        except Exception as e:  # a store read error ends the snapshot, not the server
            err = str(e) or type(e).__name__
            log.warning("Snapshot of stream '%s > %s' failed: %s", self.account.name, self.stream.name, err)
            self._finish(f"NATS/1.0 500 {err}\r\n\r\n".encode(), err)
            return
        if sent:
            self._arm_ack_timer()
        if self.slots > 0:
            self._schedule()  # more to send: continue next turn
        elif self._ack_timer is None:
            self._arm_ack_timer()

    def _finish(self, status: bytes, error: str) -> None:
        if self.done:
            return
        self.done = True
        self.error = error
        for t in (self._ack_timer, self._wait_timer):
            if t is not None:
                t.cancel()
        self._ack_timer = self._wait_timer = None
        for s in (self._ack_sub, self._interest_sub):
            if s is not None:
                try:
                    s.unsubscribe()
                except Exception:  # noqa: BLE001
                    pass
        self._ack_sub = self._interest_sub = None
        self._pieces.close()  # type: ignore[attr-defined]
        self._buf.clear()
        if self._frozen:
            self._frozen = False
            self.stream.end_snapshot()
        self.ports.publish(self.deliver, "", status, b"")
        if self._on_done is not None:
            self._on_done(error)

    def cancel(self, reason: str = "server shutdown") -> None:
        """Abort (server shutdown): the receiver gets ``500 <reason>``."""
        self._finish(f"NATS/1.0 500 {reason}\r\n\r\n".encode(), reason)


# ---------------------------------------------------------------------------------------------
# Restore receiver


class RestoreReceiver:
    """Receives one restore upload for account ``account`` and stream config ``cfg``.

    :meth:`start` subscribes ``$JS.SNAPSHOT.RESTORE.<stream>.<id>`` and returns that subject
    (the ``deliver_subject`` of the restore reply). Each chunk must come as a request; it is
    parsed and applied to a new store right away and acknowledged with an empty message. The
    empty request ends the upload: the store becomes a live stream (consumers recreated with
    their state) and that request's reply is a ``stream_create_response``. Any error is a
    ``stream_create_response`` carrying 10062 "restore failed: <reason>", and the partial store
    is deleted. 5 s without a chunk cancels the restore ("is stalled").
    """

    def __init__(self, account: "JsAccount", cfg: Any, on_done: Callable[[str], None] | None = None) -> None:
        self.account = account
        self.cfg = cfg
        self.name = cfg.name
        self.clock = account.clock
        self.ports = account.ports
        self.subject = f"{RESTORE_PREFIX}{cfg.name}.{_nuid()}"
        self.bytes = 0
        self.done = False
        self._on_done = on_done
        self._sub: Any = None
        self._stall: Any = None
        self._reader = ArchiveReader()
        self._s2: Any = None  # S2 stream decoder when the upload is S2-framed
        self._sniffed = False
        self._head = b""
        self._state: dict | None = None
        self._consumers: list[tuple[str, dict]] = []
        self._store: Any = None
        self._created_ns = self.clock.time_ns()
        self._lseq = 0
        self._ended = False
        self._tmp_dir = ""

    def start(self) -> str:
        self._sub = self.ports.subscribe(self.subject, self._on_chunk)
        self._arm_stall()
        return self.subject

    def _arm_stall(self) -> None:
        if self._stall is not None:
            self._stall.cancel()
        self._stall = self.clock.call_later(RESTORE_STALL_NS, self._stalled)

    def _stalled(self) -> None:
        self._stall = None
        if not self.done:
            log.warning("restore for stream '%s > %s' is stalled", self.account.name, self.name)
            self._fail("", f"restore for stream '{self.account.name} > {self.name}' is stalled")

    # -- chunks ------------------------------------------------------------------------------
    def _on_chunk(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        if self.done:
            return
        if not reply:
            self._fail("", f"restore for stream '{self.account.name} > {self.name}' requires reply subject "
                           "for each chunk")
            return
        if not payload:
            self._complete(reply)
            return
        self._arm_stall()
        self.bytes += len(payload)
        try:
            self._feed(payload)
        except ApiError as e:
            self._fail(reply, e.description, e)
            return
        except (ArchiveError, ValueError, KeyError, TypeError, OSError) as e:
            self._fail(reply, str(e) or type(e).__name__)
            return
        except Exception as e:  # noqa: BLE001 - a store failure fails this restore only
            log.exception("restore of %s failed", self.name)
            self._fail(reply, str(e) or type(e).__name__)
            return
        self.ports.publish(reply, "", None, b"")

    def _feed(self, data: bytes) -> None:
        if not self._sniffed:
            # The first bytes tell the format: our NATSARC1 archive, or a (S2/Snappy) framed
            # stream as nats-server 2.15 sends it. 8 bytes decide either.
            self._head += data
            if len(self._head) < len(MAGIC):
                return
            self._sniffed = True
            data, self._head = self._head, b""
            if data.startswith(S2_STREAM_ID[:4]):
                self._s2 = S2StreamDecoder()
            elif not data.startswith(MAGIC):
                raise ArchiveError("unsupported snapshot format")
        if self._s2 is not None:
            data = self._s2.feed(data)
        for e in self._reader.feed(data):
            self._apply(e)

    def _apply(self, e: ArchiveEntry) -> None:
        if self._state is None:
            if e.name != "state.json":
                raise ArchiveError("expected state.json first")
            try:
                st = json.loads(e.payload)
            except ValueError as err:
                raise ArchiveError(f"error in state.json: {err}") from None
            if not isinstance(st, dict):
                raise ArchiveError("error in state.json")
            self._state = st
            self._check_add()
            self._open_store(st)
            return
        if e.name.startswith("consumers/"):
            if self._lseq > int(self._state.get("first_seq") or 1) - 1:
                raise ArchiveError(f"unexpected consumer entry {e.name!r} after messages")
            try:
                body = json.loads(e.payload)
            except ValueError as err:
                raise ArchiveError(f"failed to decode consumer {e.name[10:]!r} state: {err}") from None
            if not isinstance(body, dict) or not isinstance(body.get("config"), dict):
                raise ArchiveError(f"consumer {e.name[10:]!r} is missing config")
            if not isinstance(body.get("state"), dict):
                raise ArchiveError(f"consumer {e.name[10:]!r} is missing state")
            self._consumers.append((e.name[10:], body))
            return
        if e.is_end:
            self._ended = True
            return
        self._store_msg(e)

    def _check_add(self) -> None:
        """What adding the stream would refuse, worded as the reference's restore failure:
        ``error adding stream: <description> (<err_code>)``."""
        from natsd.jetstream.policies import check_subject_overlap, refuse_unsupported

        acct = self.account
        try:
            if self.name in acct.streams:
                raise ApiErrors.STREAM_NAME_EXIST()
            if self.cfg.num_replicas > 1:
                raise ApiErrors.STREAM_REPLICAS_NOT_SUPPORTED()
            refuse_unsupported(self.cfg)
            check_subject_overlap(self.cfg, {n: s.config for n, s in acct.streams.items()})
        except ApiError as e:
            raise ArchiveError(f"error adding stream: {e.description} ({e.err_code})") from None

    def _check_restore_size(self, st: dict) -> None:
        """The backup's bytes must fit the account's and the server's limits (as the reference,
        which reserves the whole restore footprint before storing anything): 10047 / 10028."""
        nbytes = int(st.get("bytes") or 0)
        acct = self.account
        mem = self.cfg.storage == "memory"
        lim = getattr(acct, "limits", None)
        used_mem, used_file = acct.usage()
        if lim is not None:
            limit = lim.max_memory if mem else lim.max_storage
            if limit >= 0 and (used_mem if mem else used_file) + nbytes > limit:
                raise ApiErrors.MEMORY_RESOURCES_EXCEEDED() if mem else ApiErrors.STORAGE_RESOURCES_EXCEEDED()
        eng = acct.engine
        total = sum((a.usage()[0] if mem else a.usage()[1]) for a in eng.accounts.values())
        if total + nbytes > (eng.max_memory if mem else eng.max_store):
            raise ApiErrors.MEMORY_RESOURCES_EXCEEDED() if mem else ApiErrors.STORAGE_RESOURCES_EXCEEDED()

    def _open_store(self, st: dict) -> None:
        from natsd.store import open_stream_store
        from natsd.jetstream.stream import store_config_for

        self._check_restore_size(st)
        eng = self.account.engine
        directory = self.account.stream_dir(self.name)
        if self.cfg.storage != "memory":
            if os.path.exists(directory):
                raise ArchiveError(f"stream directory {directory} already exists")
            # Upload into a hidden directory (recovery skips names starting with "."), renamed
            # to the stream's own directory only once complete: a crash mid-restore never leaves
            # a half-restored stream that would be recovered as a real one.
            directory = os.path.join(os.path.dirname(directory), f"{RESTORE_DIR_PREFIX}{self.name}.{_nuid()}")
            self._tmp_dir = directory
        self._store = open_stream_store(store_config_for(self.cfg, self._created_ns), self.clock, directory,
                                        eng.sync_interval_ns, eng.sync_always)
        first = int(st.get("first_seq") or 0)
        if first > 1:
            # Start at the right sequence: this matters when the backup holds no messages.
            self._store.compact(first)
        self._lseq = max(first - 1, 0)

    def _store_msg(self, e: ArchiveEntry) -> None:
        from natsd.jetstream.stream import H_TTL, parse_ttl, scan_nats_headers

        seq = e.seq
        if seq == 0:
            raise ArchiveError("expected message sequence")
        if seq <= self._lseq:
            raise ArchiveError(f"message sequence {seq} out of order")
        hsz = e.hdr_size
        if hsz > len(e.payload):
            raise ArchiveError(f"failed to parse message sequence {seq}: invalid header length")
        mms = self.cfg.max_msg_size
        if mms >= 0 and len(e.payload) > mms:
            raise ArchiveError(f"message sequence {seq} exceeds maximum message size")
        hdr = e.payload[:hsz] if hsz else None
        msg = e.payload[hsz:]
        ttl_ns = 0
        if hdr and b"Nats-TTL" in hdr:
            v = scan_nats_headers(hdr).get(H_TTL)
            if v is not None:
                ttl_s = parse_ttl(v.decode())
                if ttl_s > 0 and self.clock.time_ns() > e.ts + ttl_s * SECOND:
                    # Expired already: keep the sequence, not the message (as the reference).
                    self._skip_to(seq)
                    self._store.skip_msgs(seq, 1)
                    self._lseq = seq
                    return
                ttl_ns = ttl_s * SECOND if ttl_s > 0 else ttl_s
        # The store counts the gap before ``seq`` as deleted sequences.
        self._store.store_raw_msg(e.name, hdr, msg, seq, e.ts, ttl_ns)
        self._lseq = seq

    def _skip_to(self, seq: int) -> None:
        gap = seq - self._lseq - 1
        if gap > 0:
            self._store.skip_msgs(self._lseq + 1, gap)
            self._lseq = seq - 1

    # -- completion ----------------------------------------------------------------------------
    def _complete(self, reply: str) -> None:
        if self._state is None or not self._ended:
            self._fail(reply, "backup was truncated" if self._state is not None else "no snapshot data received")
            return
        acct = self.account
        try:
            if self.name in acct.streams:
                raise ApiErrors.STREAM_NAME_EXIST_RESTORE_FAILED()
            self._check_add()  # a stream may have been created meanwhile
            last = int(self._state.get("last_seq") or 0)
            if self._lseq < last:
                self._store.skip_msgs(self._lseq + 1, last - self._lseq)
                self._lseq = last
            self._store.flush()
            if self._tmp_dir:
                self._move_into_place()
            stream = self._activate()
        except ApiError as e:
            self._fail(reply, e.description, e)
            return
        except Exception as e:  # noqa: BLE001
            log.exception("restore of %s failed at activation", self.name)
            self._fail(reply, str(e) or type(e).__name__)
            return
        self._cleanup()
        info, _, _, _ = stream.info()
        info.pop("cluster", None)
        self.ports.publish(reply, "", None, dumps(resp("stream_create_response", info)))
        log.info("Completed restore of %d bytes for stream '%s > %s'", self.bytes, acct.name, self.name)
        if self._on_done is not None:
            self._on_done("")

    def _move_into_place(self) -> None:
        """Close the upload store, rename its hidden directory to the stream's, and reopen it."""
        from natsd.store import open_stream_store
        from natsd.jetstream.stream import store_config_for

        final = self.account.stream_dir(self.name)
        if os.path.exists(final):
            raise ArchiveError(f"stream directory {final} already exists")
        self._store.stop()
        self._store = None
        os.rename(self._tmp_dir, final)
        self._tmp_dir = ""
        # The rename must be durable before the restore is acknowledged: otherwise a crash could
        # bring back the hidden name, which start-up deletes as an unfinished upload.
        fd = os.open(os.path.dirname(final), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        eng = self.account.engine
        self._store = open_stream_store(store_config_for(self.cfg, self._created_ns), self.clock, final,
                                        eng.sync_interval_ns, eng.sync_always)

    def _activate(self) -> "Stream":
        acct = self.account
        stream = acct.adopt_stream(self.cfg, self._store, self._created_ns)
        self._store = None
        for name, body in self._consumers:
            try:
                consumer_registry.restore(stream, name, ConsumerConfig.from_json(body["config"]),
                                          consumer_state_from_json(body["state"]))
            except (ApiError, ValueError, KeyError, TypeError) as e:
                log.warning("JetStream restore of '%s > %s': consumer %s not restored: %s",
                            acct.name, self.name, name, e)
        return stream

    def _fail(self, reply: str, reason: str, err: ApiError | None = None) -> None:
        if self.done:
            return
        self._cleanup()
        if self._store is not None:
            try:
                self._store.delete()
            except Exception:  # noqa: BLE001
                log.debug("deleting the partial restore store failed", exc_info=True)
            self._store = None
        if self._tmp_dir:
            import shutil
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
            self._tmp_dir = ""
        log.warning("Restore failed for stream '%s > %s': %s", self.account.name, self.name, reason)
        if reply:
            if err is None:
                err = ApiErrors.STREAM_RESTORE(err=reason)
            self.ports.publish(reply, "", None, dumps(error_envelope("stream_create_response", err)))
        if self._on_done is not None:
            self._on_done(reason)

    def _cleanup(self) -> None:
        self.done = True
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        if self._sub is not None:
            try:
                self._sub.unsubscribe()
            except Exception:  # noqa: BLE001
                pass
            self._sub = None

    def cancel(self) -> None:
        """Abort (server shutdown): drop the partial store."""
        self._fail("", "server shutdown")


def remove_stale_restores(account: "JsAccount") -> int:
    """Delete upload directories left by restores interrupted by a crash; returns how many."""
    import shutil

    d = account.directory
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return 0
    n = 0
    for name in names:
        if name.startswith(RESTORE_DIR_PREFIX):
            shutil.rmtree(os.path.join(d, name), ignore_errors=True)
            log.warning("JetStream removed the incomplete restore %s of account %s", name, account.name)
            n += 1
    return n
