"""The storage seam: what a stream and a consumer need from persistence.

Modelled on nats-server's ``server/store.go`` and keeping its vocabulary (``StreamStore``,
``ConsumerStore``, ``StoreMsg``, ``StreamState``, ``SequencePair``, ``ConsumerState``,
``AckFloor``) so the Go source can be read side by side. ``natsd.jetstream`` only ever sees these
protocols; :mod:`natsd.store.memory` and :mod:`natsd.store.file` are the implementations and
:mod:`natsd.store.conformance` is the one suite both must pass.

Division of labour (same as the reference):
- the store assigns sequences and timestamps, enforces the *retention limits* it is configured
  with (max_msgs, max_bytes, max_age, max_msgs_per_subject, with discard "old"), keeps
  per-subject state and deleted-sequence tracking, and persists;
- the stream (``natsd.jetstream``) decides *whether* a message may be stored at all (dedupe,
  expected-* headers, discard "new", sealed, max_msg_size) and owns timers: it asks the store
  for ``next_expiry()`` and calls ``expire()`` when due, so stores never run timers themselves;
- the store tells its owner about removals through the callback registered with
  ``register_storage_updates`` (limits, expiry, purge, delete), so consumers and retention can
  react.

Durability contract: ``store_msg`` may buffer; ``flush()`` hands every buffered record to the
OS in as few write calls as possible (a PubAck is sent only after it). ``sync()`` fsyncs.
"""

from __future__ import annotations

import enum
from dataclasses import field
from typing import Any, Callable, Iterable

from natsd.lazydataclass import dataclass
from natsd.protocolbase import Protocol

__all__ = [
    "StorageType",
    "DiscardPolicy",
    "StoreConfig",
    "StoreMsg",
    "MsgRun",
    "StreamState",
    "SimpleState",
    "SequencePair",
    "Pending",
    "ConsumerState",
    "ConsumerDelta",
    "StreamStore",
    "ConsumerStore",
    "StorageUpdateHandler",
    "StoreError",
    "StoreClosed",
    "MsgNotFound",
    "StoreEOF",
    "MaxMsgs",
    "MaxBytes",
    "MaxMsgsPerSubject",
    "CorruptState",
    "StoreFull",
    "StoreWriteError",
]


# ---------------------------------------------------------------------------------------------
# Errors. One small documented family; the JetStream layer maps them to API errors.


class StoreError(Exception):
    """Root of the store errors."""


class StoreClosed(StoreError):
    """The store was stopped or deleted and can no longer be used."""


class MsgNotFound(StoreError):
    """The sequence exists in the stream's range but the message was deleted or never stored."""


class StoreEOF(StoreError):
    """The requested sequence is greater than the last sequence (nothing more to read)."""


class MaxMsgs(StoreError):
    """discard "new": the store is at max_msgs."""


class MaxBytes(StoreError):
    """discard "new": the store is at max_bytes."""


class MaxMsgsPerSubject(StoreError):
    """discard "new" with discard_new_per_subject: the subject is at max_msgs_per_subject."""


class StoreFull(StoreError):
    """The store's resource limit (max_file_store / max_memory_store reservation) was hit."""


class StoreWriteError(StoreError):
    """Writing (or fsyncing) buffered records failed (ENOSPC, EDQUOT, EIO...). ``errno`` is the
    OS error number. The file store has then rolled back every message not yet on disk (see
    ``FileStreamStore.take_rollback``); the error is not sticky: the next flush tries again."""

    def __init__(self, msg: str, errno: int | None = None) -> None:
        super().__init__(msg)
        self.errno = errno


class CorruptState(StoreError):
    """On-disk state failed its checksum or structure check (reported, never served)."""


class StoreKeyError(StoreError):
    """Encryption at rest (natsd.store.file.encryption): an encrypted store does not open with
    the configured keys, is met without a key, or a plain store with one. The message names the
    file, never a key."""


# ---------------------------------------------------------------------------------------------
# Value types.

# The stream config's ``storage`` and ``discard`` with their wire spelling (the JSON values). A
# StrEnum member is a str equal to that spelling, so ``natsd.jetstream`` uses these same types in
# its StreamConfig and JSON stays byte for byte the same.


class StorageType(enum.StrEnum):
    FILE = "file"
    MEMORY = "memory"


class DiscardPolicy(enum.StrEnum):
    OLD = "old"
    NEW = "new"


@dataclass(slots=True)
class StoreConfig:
    """What a stream store needs to know of its stream's config. ``-1``/0 mean unlimited as in
    the reference (``max_msgs``/``max_bytes``/``max_msgs_per_subject`` -1, ``max_age_ns`` 0).

    ``meta`` is the stream's full JSON config (a plain dict) which the file store persists with a
    checksum next to the data, so a restart can recover the stream from its directory alone.
    """

    name: str
    subjects: list[str] = field(default_factory=list)
    storage: StorageType = StorageType.FILE
    max_msgs: int = -1
    max_bytes: int = -1
    max_age_ns: int = 0
    max_msgs_per_subject: int = -1
    max_msg_size: int = -1
    discard: DiscardPolicy = DiscardPolicy.OLD
    discard_new_per_subject: bool = False
    first_seq: int = 0
    allow_msg_ttl: bool = False
    #: ``"s2"``: the file store compresses sealed blocks (natsd.store.file.compress); ``"none"``
    #: and the memory store: stored as is (as the reference's memory store ignores it).
    compression: str = "none"
    meta: dict[str, Any] = field(default_factory=dict)
    #: ``persist_mode: async``: the owner writes on its own schedule (not before each PubAck) and
    #: the file store never fsyncs per write, even with ``sync_always`` (as the reference).
    async_persist: bool = False
    #: natsd feature (``natsd.keep_last_under_max_age``, issue 27): max_age expiry never removes
    #: the last message of a subject; per-message TTL, limits, purges and deletes still do.
    keep_last_under_max_age: bool = False


@dataclass(slots=True)
class StoreMsg:
    """One stored message. ``ts`` is Unix epoch nanoseconds; ``hdr`` is the raw
    ``NATS/1.0\\r\\n...`` block or ``None``."""

    subject: str
    hdr: bytes | None
    msg: bytes
    seq: int
    ts: int


@dataclass(slots=True)
class MsgRun:
    """Successive live messages read at once (:meth:`StreamStore.load_run`), column by column:
    element ``i`` of every column belongs to the same message. Columns are sequences (list or
    tuple) the caller must not mutate. ``subjects`` are the subjects' UTF-8 bytes (what goes on
    the wire); ``hdrs`` is ``None`` when no message of the run has headers, else one raw header
    block or ``None`` per message. One object per run, none per message: a consumer's delivery
    pass maps over the columns in C."""

    seqs: "list[int] | tuple[int, ...]"
    tss: "list[int] | tuple[int, ...]"
    subjects: "list[bytes] | tuple[bytes, ...]"
    hdrs: "list[bytes | None] | tuple[bytes | None, ...] | None"
    msgs: "list[bytes] | tuple[bytes, ...]"

    def __len__(self) -> int:
        return len(self.seqs)


@dataclass(slots=True)
class SimpleState:
    """Messages, first and last sequence for one subject or filter."""

    msgs: int = 0
    first: int = 0
    last: int = 0


@dataclass(slots=True)
class StreamState:
    """Mirrors nats-server's StreamState (JSON names in ``natsd.jetstream``).

    ``first_ts``/``last_ts`` are Unix ns (0 when empty). ``deleted`` lists interior deleted
    sequences (only filled when asked for, it can be large). ``lost`` counts messages found
    corrupt at recovery and dropped.
    """

    msgs: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts: int = 0
    last_seq: int = 0
    last_ts: int = 0
    num_deleted: int = 0
    deleted: list[int] | None = None
    num_subjects: int = 0
    consumers: int = 0
    lost_msgs: list[int] | None = None
    lost_bytes: int = 0


@dataclass(slots=True)
class SequencePair:
    """A consumer sequence and the stream sequence it maps to."""

    consumer_seq: int = 0
    stream_seq: int = 0


@dataclass(slots=True)
class Pending:
    """A delivered, unacknowledged message: its consumer sequence and delivery time (Unix ns)."""

    sequence: int
    timestamp: int


@dataclass(slots=True)
class ConsumerState:
    """A consumer's durable state, as nats-server's ConsumerState.

    ``pending`` maps stream sequence -> Pending for delivered-but-unacked messages;
    ``redelivered`` maps stream sequence -> delivery count - 1 for messages delivered more than once.
    """

    delivered: SequencePair = field(default_factory=SequencePair)
    ack_floor: SequencePair = field(default_factory=SequencePair)
    pending: dict[int, Pending] = field(default_factory=dict)
    redelivered: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True)
class ConsumerDelta:
    """What changed in a consumer's state since the last write (``ConsumerStore.append_delta``):
    the sequence pairs (whole), pending entries set (``pend_set[i]`` -> ``pend_vals[i]``, a
    ``(consumer seq, timestamp)`` pair) or removed, redelivery counts set or removed. Each entry
    is the entry's value now, so applying a delta twice gives the same state (idempotent)."""

    delivered: SequencePair
    ack_floor: SequencePair
    pend_set: list[int] = field(default_factory=list)
    pend_vals: list[tuple[int, int]] = field(default_factory=list)
    pend_del: list[int] = field(default_factory=list)
    rdc_set: list[int] = field(default_factory=list)
    rdc_vals: list[int] = field(default_factory=list)
    rdc_del: list[int] = field(default_factory=list)


# (msgs_delta, bytes_delta, seq, subject): seq/subject are those of a removed message
# (msgs_delta < 0), or 0/"" for bulk changes such as purge.
StorageUpdateHandler = Callable[[int, int, int, str], None]


# ---------------------------------------------------------------------------------------------
# Protocols.


class StreamStore(Protocol):
    """Persistence of one stream's messages. Synchronous; called from the event loop thread."""

    config: StoreConfig
    #: (messages, bytes) this open's recovery found lost (0, 0 for a new or cleanly closed store).
    recovered_lost: tuple[int, int]

    # -- writing --------------------------------------------------------------------------
    def store_msg(self, subject: str, hdr: bytes | None, msg: bytes, ttl_ns: int = 0) -> tuple[int, int]:
        """Append one message; returns ``(seq, ts_ns)``. Applies discard-"old" limits (may
        remove older messages, reporting them through the storage-update callback). Raises
        MaxMsgs/MaxBytes/MaxMsgsPerSubject when discard is "new" and a limit would be exceeded.
        ``ttl_ns`` > 0 gives the message its own expiry (Nats-TTL)."""

    def store_run(self, subject: str, msgs: list[bytes], hdr_len: int = 0) -> tuple[int, int, int, "StoreError | None"]:
        """Append messages to one subject, in order, all with one timestamp (a burst of
        asynchronous publishes read at once): the same as ``store_msg`` for each, but
        discard-"old" limits are applied once, after the run. With ``hdr_len`` > 0 each item of
        ``msgs`` is a header block of that many bytes followed by the payload (an HPUB's bytes
        as read): ``store_msg(subject, m[:hdr_len], m[hdr_len:])``; else header-less payloads.
        Returns ``(first_seq, ts_ns, stored, error)``: the first ``stored`` messages got
        ``first_seq``, ``first_seq + 1``...; when ``stored < len(msgs)``, ``error`` is what
        refused ``msgs[stored]`` (as ``store_msg`` would have raised it) and nothing after it was
        stored. Raises StoreClosed when nothing can be stored."""

    def store_many(self, subjects: list[str], msgs: list[bytes]) -> tuple[int, int, int, "StoreError | None"]:
        """Append header-less messages, ``msgs[i]`` to ``subjects[i]``, in order, all with one
        timestamp (a burst of publishes over many subjects read at once): the same as
        ``store_msg(subjects[i], None, msgs[i])`` for each, limits included. Returns
        ``(first_seq, ts_ns, stored, error)`` as ``store_run``. Raises StoreClosed when nothing
        can be stored."""

    def store_raw_msg(self, subject: str, hdr: bytes | None, msg: bytes, seq: int, ts: int, ttl_ns: int = 0) -> None:
        """Store with a given sequence and timestamp (restore, mirrors). ``seq`` > last_seq."""

    def skip_msg(self) -> int:
        """Consume the next sequence without storing anything (interest retention with no
        interest); returns it. It counts as deleted/absent, first_seq moves past it if empty."""

    def skip_msgs(self, seq: int, num: int) -> None:
        """Skip ``num`` sequences starting at ``seq`` (== last_seq + 1)."""

    def flush(self) -> None:
        """Hand every buffered write to the OS (one write per file where possible)."""

    def flush_async(self, on_written: Callable[[], None]) -> int:
        """``flush()``, possibly off the event loop. 0: done inline (errors raised as by
        ``flush()``). Else a token: ``on_written`` is called on the loop (never before this
        returns) as writes finish; once ``written_token`` reaches the token the records are in
        the OS, or were rolled back (``take_rollback``). The owner acknowledges only then."""

    @property
    def written_token(self) -> int:
        """The token of the last write done (see ``flush_async``)."""

    def sync(self) -> None:
        """flush() and fsync."""

    def take_rollback(self) -> "tuple[int, StoreWriteError] | None":
        """After a failed write (flush/sync raised StoreWriteError, or a read that had to write
        first): ``(last durable sequence, error)`` once, else None. Every message above that
        sequence was taken back (never served, its sequence free again); the owner answers
        their publishes with an error. Stores that never fail a write return None."""

    @property
    def bytes_used(self) -> int:
        """``state().bytes`` without building a state (the server-wide limits read it per
        publish)."""

    # -- reading --------------------------------------------------------------------------
    def load_msg(self, seq: int) -> StoreMsg:
        """Raises MsgNotFound (deleted / below first) or StoreEOF (above last)."""

    def load_next_msg(self, filter: str, start_seq: int) -> StoreMsg:
        """First message with seq >= ``start_seq`` whose subject matches ``filter`` (wildcards
        allowed; ``""`` or ``">"`` match all). Raises StoreEOF when none."""

    def load_last_msg(self, subject: str) -> StoreMsg:
        """Last message whose subject matches ``subject`` (wildcards allowed). MsgNotFound if none."""

    def last_seq_of(self, subject: str) -> int:
        """Sequence of the last message of the literal ``subject`` (0: none), from the index alone."""

    def load_prev_msg(self, start_seq: int) -> StoreMsg:
        """Last message with seq <= ``start_seq``. MsgNotFound if none."""

    def get_seq_from_time(self, ts_ns: int) -> int:
        """First live sequence stored at or after wall time ``ts_ns`` (Unix ns); last_seq + 1
        when none (the reference's GetSeqFromTime: deliver_policy by_start_time, dedupe
        rebuild, DIRECT.GET start_time). Binary search; no message is read."""

    def iter_msgs(self, start_seq: int, end_seq: int) -> Iterable[StoreMsg]:
        """Stored messages with start_seq <= seq <= end_seq, in order (snapshots, replays)."""

    def load_run(self, start_seq: int, max_msgs: int) -> MsgRun:
        """The first ``min(max_msgs, live messages with seq >= start_seq)`` live messages at or
        after ``start_seq``, in order, as one :class:`MsgRun` (a consumer's delivery pass). Gaps
        (deleted, skipped sequences) are skipped as by ``iter_msgs``; so is a message found
        corrupt on read (reported lost exactly as ``load_msg`` reports it). ``max_msgs`` >= 1;
        an empty run means there is no live message at or after ``start_seq``."""

    def load_filtered_run(self, start_seq: int, max_msgs: int, filters: list[str]) -> MsgRun:
        """As :meth:`load_run`, of the live messages whose subject matches one of ``filters``
        (wildcards allowed): what successive ``load_next_msg`` calls would find (a filtered
        consumer's delivery pass). An empty run means there is no such message."""

    # -- removing -------------------------------------------------------------------------
    def remove_msg(self, seq: int) -> bool:
        """Delete one message; False if it did not exist."""

    def erase_msg(self, seq: int) -> bool:
        """Delete and overwrite its payload on disk (secure erase)."""

    def purge(self) -> int:
        """Remove everything; sequences continue (first_seq = last_seq + 1). Returns count."""

    def purge_ex(self, subject: str, seq: int, keep: int) -> int:
        """Purge with options, as STREAM.PURGE: ``subject`` filter (wildcards), ``seq`` (remove
        below it, exclusive), ``keep`` (keep the newest N). Returns count removed."""

    def compact(self, seq: int) -> int:
        """Remove every message below ``seq``; first_seq becomes ``seq``."""

    def truncate(self, seq: int) -> None:
        """Remove every message above ``seq``; last_seq becomes ``seq``."""

    def expire(self, now_ns: int) -> int:
        """Remove messages whose max_age or TTL has passed at wall time ``now_ns``; returns count."""

    def next_expiry(self) -> int:
        """Wall time (Unix ns) at which the next message expires; 0 when none will."""

    # -- state ----------------------------------------------------------------------------
    def state(self, deleted_details: bool = False) -> StreamState: ...

    def filtered_state(self, seq: int, subject: str) -> SimpleState:
        """Count/first/last of messages with seq >= ``seq`` matching ``subject``."""

    def subjects_state(self, filter: str) -> dict[str, SimpleState]:
        """Per-subject state for subjects matching ``filter``."""

    def subjects_totals(self, filter: str) -> dict[str, int]:
        """Message count per subject matching ``filter``."""

    def num_pending(self, start_seq: int, filter: str, last_per_subject: bool) -> int:
        """Messages with seq >= start_seq matching filter (only the last of each subject when
        ``last_per_subject``)."""

    def multi_last_seqs(self, filters: list[str], max_seq: int) -> list[int]:
        """Sorted last sequences (<= max_seq, 0 = no bound) of each subject matching any filter."""

    # -- lifecycle ------------------------------------------------------------------------
    def update_config(self, config: StoreConfig) -> None:
        """Apply new limits (enforcing them now) and persist the new ``meta``."""

    def register_storage_updates(self, handler: StorageUpdateHandler) -> None: ...

    def consumer_store(self, name: str, meta: dict[str, Any] | None) -> "ConsumerStore":
        """Open (or create) the state store of consumer ``name``; ``meta`` is its JSON config
        (None: open what is stored, as recovery does)."""

    def consumer_names(self) -> list[str]:
        """Consumers persisted with this stream (for recovery)."""

    def stop(self) -> None:
        """Flush, sync, close files. Further use raises StoreClosed."""

    def delete(self) -> None:
        """Stop and remove all data."""


class ConsumerStore(Protocol):
    """A consumer's persisted config and state."""

    #: The consumer's JSON config as persisted.
    meta: dict[str, Any]
    #: Why the persisted state could not be used at open ("" when it could, or nothing was
    #: persisted): the state starts empty then, which only causes redelivery.
    state_damaged: str

    def update(self, state: ConsumerState) -> None:
        """Replace the stored state (file: atomic replace; may be batched per loop turn)."""

    def append_delta(self, delta: ConsumerDelta, source: Callable[[], tuple[Any, ...]]) -> None:
        """Record only what changed since the last ``update``/``append_delta`` (large states:
        the cost follows the changes, not the state's size). ``source()`` returns the live
        ``(pending, redelivered, delivered, ack_floor)`` for when the store wants the whole
        state (a checkpoint); the dicts are the owner's own, read but never changed. Optional:
        owners fall back to ``update`` when a store lacks it."""

    def state(self) -> ConsumerState: ...

    def update_config(self, meta: dict[str, Any]) -> None: ...

    def flush(self) -> None:
        """Write any batched state now."""

    def stop(self) -> None: ...

    def delete(self) -> None: ...
