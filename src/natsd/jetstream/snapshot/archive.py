"""The snapshot archive: the byte format of a stream backup, its encoder and its incremental decoder.

Pure bytes and JSON, no I/O: :func:`iter_archive` yields a stream's archive piece by piece (the
sender, :mod:`natsd.jetstream.snapshot.transfer`, cuts it into chunks) and :class:`ArchiveReader`
parses uploaded bytes in any chunking (the restore, :mod:`natsd.jetstream.snapshot.restore`).

Archive byte format
-------------------

natsd writes the reference's ``NATSARC1`` entry format (``server/archive/archive.go``, the
decompressed body of a nats-server 2.15 snapshot); on the wire it is Snappy-framed
(:mod:`natsd.jetstream.snapshot.s2`), as nats-server S2-frames it, and decompressed it starts
with the 8 magic bytes ``NATSARC1``::

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


The framing (Snappy from natsd, S2 from nats-server 2.15) is added by the sender and removed by
the restore (:mod:`natsd.jetstream.snapshot.s2`); older natsd versions sent this archive
unframed (CHANGELOG), and the restore still takes such an upload (it starts with ``NATSARC1``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterator

from natsd.store.base import ConsumerState, Pending, SequencePair
from natsd.varint import encode_uvarint, read_uvarint

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.views import StreamView

__all__ = [
    "MAGIC",
    "END_ENTRY",
    "encode_uvarint",
    "encode_varint",
    "encode_entry",
    "iter_archive",
    "consumer_state_to_json",
    "consumer_state_from_json",
    "ArchiveError",
    "ArchiveEntry",
    "ArchiveReader",
]

MAGIC = b"NATSARC1"

# ---------------------------------------------------------------------------------------------
# Encoding


def encode_varint(n: int) -> bytes:
    """Zig-zag signed varint (Go ``binary.PutVarint``)."""
    return encode_uvarint((n << 1) if n >= 0 else ((-n << 1) - 1))


def encode_entry(name: bytes, ts: int, seq: int, hdr: bytes, payload: bytes) -> bytes:
    """One archive entry (without the magic)."""
    return b"".join(
        (
            encode_uvarint(len(name)),
            encode_varint(ts),
            encode_uvarint(seq),
            encode_uvarint(len(hdr)),
            encode_uvarint(len(payload)),
            name,
            hdr,
            payload,
        )
    )


#: The end-of-archive entry: every field zero, empty name.
END_ENTRY = b"\x00\x00\x00\x00\x00"


def _pending_json(state: ConsumerState, last_seq: int) -> dict:
    return {
        str(s): {"Sequence": p.sequence, "Timestamp": p.timestamp}
        for s, p in sorted(state.pending.items())
        if s <= last_seq
    }


def consumer_state_to_json(state: ConsumerState, last_seq: int | None = None) -> dict:
    """A store ConsumerState -> the reference's ConsumerState JSON, stream sequences bounded by
    ``last_seq`` (as the reference bounds a snapshot's consumers to the stream snapshot)."""
    lim = last_seq if last_seq is not None else 1 << 64
    out: dict = {
        "delivered": {"consumer_seq": state.delivered.consumer_seq, "stream_seq": min(state.delivered.stream_seq, lim)},
        "ack_floor": {"consumer_seq": state.ack_floor.consumer_seq, "stream_seq": min(state.ack_floor.stream_seq, lim)},
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
    return ConsumerState(
        delivered=pair(d.get("delivered")), ack_floor=pair(d.get("ack_floor")), pending=pending, redelivered=red
    )


def iter_archive(
    stream: "StreamView", include_consumers: bool = True, state_json: dict | None = None
) -> Iterator[bytes]:
    """The archive of ``stream`` as a sequence of byte pieces (see the module docstring).

    Messages are read lazily from the store, up to the ``last_seq`` of the state taken when the
    iterator starts; a message removed meanwhile simply becomes a gap (a deleted sequence)."""
    if state_json is None:
        state_json = stream.state_json()[0]
    state = dict(state_json)
    last_seq = int(state.get("last_seq") or 0)
    first_seq = int(state.get("first_seq") or 0)
    consumers = sorted(stream.all_consumers().values(), key=lambda c: c.name) if include_consumers else []
    state["consumer_count"] = len(consumers)
    yield MAGIC
    sj = json.dumps(state, separators=(",", ":")).encode()
    yield encode_entry(b"state.json", stream.clock.time_ns(), 0, b"", sj)
    now = stream.clock.time_ns()
    for c in consumers:
        body = {"config": c.config.to_json(), "state": consumer_state_to_json(c.state(), last_seq)}
        yield encode_entry(
            ("consumers/" + c.name).encode(), now, 0, b"", json.dumps(body, separators=(",", ":")).encode()
        )
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
# Decoding (incremental)


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
            del buf[: self._pos]
            self._pos = 0
        buf += data
        out: list[ArchiveEntry] = []
        if not self._magic:
            if len(buf) - self._pos < len(MAGIC):
                return out
            if bytes(buf[self._pos : self._pos + len(MAGIC)]) != MAGIC:
                raise ArchiveError("unsupported snapshot format")
            self._pos += len(MAGIC)
            self._magic = True
        n = len(buf)
        while True:
            p = self._pos
            fields = []
            for i in range(5):
                try:
                    v, p = read_uvarint(buf, p, n)
                except ValueError:
                    raise ArchiveError("varint overflow") from None
                if p < 0:
                    return out
                fields.append(v)
            name_len, zts, seq, hsz, psz = fields
            ts = (zts >> 1) ^ -(zts & 1)
            total = name_len + hsz + psz
            if total > self.max_entry:
                raise ArchiveError("archive entry too large")
            if n - p < total:
                return out
            name = bytes(buf[p : p + name_len]).decode("utf-8", "surrogateescape")
            p += name_len
            payload = bytes(buf[p : p + hsz + psz])
            p += hsz + psz
            self._pos = p
            e = ArchiveEntry(name, ts, seq, hsz, payload)
            out.append(e)
            if e.is_end:
                self.ended = True
                if p != n:
                    raise ArchiveError("data after the end of the archive")
                return out
