"""Streams left asleep at restart: opened on first use, not at start-up (issue 31).

Restarting a server with thousands of streams used to open every store (index.db, blocks) and
recover every consumer (meta, state) before serving; most of them are not touched for a while.
After a **clean** stop nothing needs repair, so a stream whose work is all driven by clients can
wait: at start it gets its config (meta.inf, read as before), its subscriptions and a
:class:`DormantStorage` answering ``state()`` from what the clean stop recorded; its store is opened,
recovered (the same :class:`~natsd.store.file.recovery.Recovery` as at start) the first time
anything else reaches it (:func:`wake`): a publish it captures, a get, a direct get, any consumer
lookup (``CONSUMER.INFO``/``NEXT``, an ack), a purge, a snapshot... Its consumers are then
recovered one by one as they are used (:class:`LazyConsumers`), except those with work of their
own (:func:`consumer_must_wake`), recovered with the stream.

What makes that safe:

- **After a clean stop.** ``JsAccount.stop`` writes ``<account>/natsd-restart.json``
  (:data:`RESTART_FILE`) after every stream stopped: per stream its state counters, its consumer
  count and a fingerprint of its files (size and mtime of meta.inf, index.db, the last block, and
  the mtimes of ``msgs/`` and ``obs/``), its meta, then the names of the consumers to recover
  as soon as it wakes (:func:`consumer_must_wake`; null: all of them, as an entry without the
  field) and, for a stream asleep since a kill -9 that never woke, the names whose config alone
  says so (null: none such; the others' o.dat decides at wake). Start reads it and removes it
  (durably, before any stream can change), so after a kill -9 there is none; a stream whose
  files differ from the fingerprint (another server ran on the directory meanwhile) has its
  entry ignored.
- **Or when nothing needs repair** (:func:`peek_asleep`, ADR 0009): with no entry (after a kill -9,
  or a fingerprint that differs), a stream whose files show exactly what a recovery would find
  (natsd.store.file.peek: index.db current, every block as it recorded, nothing to replay, cut
  or report) sleeps with index.db's counters, its consumers' meta.inf read and checked; it logs
  its recovery when first used. Anything else is recovered at start (torn tails cut, reported).
- **Only streams with nothing to do on their own**: file storage, limits retention, no
  per-message TTL, no delete markers, no schedules, no atomic batches, no mirror or sources, not
  encrypted, and every consumer a durable pull consumer with no inactive threshold, no pause and
  no dead-letter stream. Anything with another timer or a link starts awake. A stream with
  ``max_age`` sleeps until its first message can expire (recorded first timestamp + max_age):
  a timer wakes it then, and the woken stream arms its expiry as at start.
- ``state()`` counters are those the clean stop wrote; anything else wakes the stream first, so
  its answer is the recovered store's.

The restart file is natsd's own (nats-server never reads it; a nats-server run on the same
directory changes the fingerprints, so the entries are not trusted after it).
"""

from __future__ import annotations

import json
import logging
import os
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Iterator

from natsd.atomicfile import atomic_write, fsync_dir

# (the consumer layer, consumer_registry, loads when a stream with consumers wakes: issue 31)
from natsd.jetstream.consumer.helpers import MSG_NEXT_PREFIX
from natsd.jetstream.consumer.status import status
from natsd.jetstream.features.metadata import consumer_features
from natsd.store import peek_consumers_idle, peek_stream, stopsync
from natsd.store.base import StoreError, StreamState

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Timer
    from natsd.jetstream.config.models import StreamConfig
    from natsd.jetstream.ports import Subscription
    from natsd.jetstream.stream.core import Stream
    from natsd.store.base import StorageUpdateHandler, StoreConfig, StreamStore

__all__ = [
    "RESTART_FILE",
    "DormantStorage",
    "is_dormant",
    "wake",
    "rest",
    "read_restart_file",
    "write_restart_file",
    "fingerprint",
]

log = logging.getLogger("natsd.jetstream")

#: In ``<store_dir>/<account>/``: what a clean stop recorded of each stream (JSON, see module doc).
RESTART_FILE = "natsd-restart.json"
_VERSION = 2
# state() fields the restart file keeps, in this order.
_FIELDS = ("msgs", "bytes", "first_seq", "first_ts", "last_seq", "last_ts", "num_deleted", "num_subjects", "lost_bytes")
# A stream that lost more than this many messages at an earlier recovery starts awake (its lost
# list is reported by STREAM.INFO and is not worth keeping in the restart file).
_MAX_LOST = 100


def _last_block(msgs: str) -> int:
    ids = [int(n[:-4]) for n in os.listdir(msgs) if n.endswith(".blk") and n[:-4].isdigit()]
    return max(ids) if ids else 0


def fingerprint(directory: str, last_block: int = -1) -> list[int] | None:
    """Sizes and mtimes of what a stream's recovery reads first (meta.inf, index.db, the last
    block, which ``last_block`` names when known, and the mtimes of ``msgs/`` and ``obs/``, which
    change when a block or a consumer comes or goes; without ``msgs/``, meta.inf and 0s: a
    stream that never wrote a block); None when unreadable."""
    msgs = os.path.join(directory, "msgs")
    stat = os.stat
    try:
        try:
            msgs_mtime = stat(msgs).st_mtime_ns
        except FileNotFoundError:
            msgs_mtime = 0  # (no msgs/: a stream that never wrote a block, empty; no index.db)
        if last_block < 0:
            last_block = _last_block(msgs) if msgs_mtime else 0
        out: list[int] = [last_block]
        paths = [os.path.join(directory, "meta.inf")]
        if msgs_mtime:
            paths.append(os.path.join(msgs, "index.db"))
        if last_block:
            paths.append(os.path.join(msgs, f"{last_block}.blk"))
        for p in paths:
            st = stat(p)
            out += (st.st_size, st.st_mtime_ns)
        out.append(msgs_mtime)
        try:
            out.append(stat(os.path.join(directory, "obs")).st_mtime_ns)
        except FileNotFoundError:
            out.append(0)
        return out
    except (OSError, ValueError):
        return None


class DormantStorage:
    """Stands for a stream's file store until its first use (see the module docstring).
    ``state()``, ``bytes_used``, ``next_expiry()``, ``sync()`` and ``stop()`` answer without
    opening it; every other
    member wakes the stream (``waker``) and is the real store's."""

    def __init__(
        self,
        config: Callable[[], StoreConfig],
        state: StreamState,
        opener: Callable[[], StreamStore],
        entry: list,
        directory: str = "",
    ) -> None:
        self._config_fn = config
        self._config: StoreConfig | None = None
        # The restart file's entry without its stream meta (~3.5 KB a stream, rebuilt from the
        # config when a stop finds the stream still asleep and carries the entry over).
        self.entry = entry[:4]
        # The consumers to recover as soon as the stream wakes (entry_for); None: all of them.
        self.eager: list[str] | None = entry[5] if len(entry) > 5 else None
        # Asleep since a kill -9 (peek_asleep): the consumers whose config alone says they must be
        # recovered at wake; the others are if their state says so (peek_consumers_idle). None:
        # all of them are.
        self.state_check: list[str] | None = entry[6] if len(entry) > 6 else None
        self.directory = directory
        self.recovered_lost = (0, 0)
        self._state = state
        self._opener = opener
        self.real: StreamStore | None = None
        self.waker: Callable[[], None] | None = None
        self.handler: StorageUpdateHandler | None = None
        self.subs: list[Subscription] = []  # (see put_to_sleep)
        self.timer: Timer | None = None  # max_age: wakes the stream when its first message is due

    @property
    def config(self) -> StoreConfig:
        if self._config is None:
            self._config = self._config_fn()
        return self._config

    def open(self) -> StreamStore:
        if self.real is None:
            try:
                self.real = self._opener()
            except StoreError:
                raise
            except Exception as exc:  # (the files changed under it: what the caller can answer)
                log.exception("JetStream: can not recover stream %s", self._state_name())
                raise StoreError(f"stream could not be recovered: {exc}") from exc
        return self.real

    def _state_name(self) -> str:
        try:
            return self.config.name
        except Exception:
            return "?"

    def _wake(self) -> StreamStore:
        if self.waker is not None:
            self.waker()
        return self.open()

    def state(self, deleted_details: bool = False) -> StreamState:
        if self.real is not None or (deleted_details and self._state.num_deleted):
            return self._wake().state(deleted_details)
        st = self._state
        return StreamState(
            msgs=st.msgs,
            bytes=st.bytes,
            first_seq=st.first_seq,
            first_ts=st.first_ts,
            last_seq=st.last_seq,
            last_ts=st.last_ts,
            num_deleted=st.num_deleted,
            deleted=[] if deleted_details else None,
            num_subjects=st.num_subjects,
            lost_msgs=list(st.lost_msgs) if st.lost_msgs is not None else None,
            lost_bytes=st.lost_bytes,
        )

    @property
    def bytes_used(self) -> int:
        return self._state.bytes if self.real is None else self.real.bytes_used

    def register_storage_updates(self, handler: StorageUpdateHandler) -> None:
        self.handler = handler

    def next_expiry(self) -> int:
        # (asleep, nothing is armed through the stream: put_to_sleep's timer wakes it first)
        return 0 if self.real is None else self.real.next_expiry()

    def sync(self) -> None:
        if self.real is not None:
            self.real.sync()  # (nothing was written to a store still asleep)

    def stop(self) -> None:
        if self.real is not None:
            self.real.stop()

    def store_msg(self, subject: str, hdr: bytes | None, msg: bytes, ttl_ns: int = 0) -> tuple[int, int]:
        # (Stream binds store_msg at construction: a bound method here, waking on the call.)
        return self._wake().store_msg(subject, hdr, msg, ttl_ns)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._wake(), name)


class DormantConsumers(dict):
    """A sleeping stream's ``consumers``: its length is the count the clean stop recorded (for
    ``$JS.API.INFO`` and STREAM.INFO); any other use wakes the stream and is the real dict's."""

    def __init__(self, count: int, waker: Callable[[], dict]) -> None:
        super().__init__()
        self._count = count
        self._waker = waker

    def __len__(self) -> int:
        return self._count

    def __contains__(self, key: object) -> bool:
        return key in self._waker()

    def __getitem__(self, key: str) -> Any:
        return self._waker()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._waker()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._waker()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._waker())

    def get(self, key: str, default: Any = None) -> Any:
        return self._waker().get(key, default)

    def pop(self, key: str, *default: Any) -> Any:
        return self._waker().pop(key, *default)

    def keys(self) -> Any:
        return self._waker().keys()

    def values(self) -> Any:
        return self._waker().values()

    def items(self) -> Any:
        return self._waker().items()

    def clear(self) -> None:
        self._waker().clear()

    def wake(self) -> dict:
        """Wake the stream: its real ``consumers`` dict."""
        return self._waker()


def is_dormant(stream: Stream) -> bool:
    return isinstance(stream.store, DormantStorage)


def put_to_sleep(stream: Stream, store: DormantStorage, consumers: int) -> None:
    """Make a stream just built over ``store`` wake on first use. Its consumers' own
    subscriptions (MSG.NEXT, RESET) do not exist yet: one wildcard of each stands for them, wakes
    the stream and hands the request on (the woken consumer subscribed it meanwhile)."""
    store.waker = lambda: wake(stream)

    def woken() -> dict:
        wake(stream)
        return stream.consumers

    stream.consumers = DormantConsumers(consumers, woken)
    st = store._state
    if stream.config.max_age and st.msgs and st.first_ts:
        due = st.first_ts + stream.config.max_age - stream.clock.time_ns()
        store.timer = stream.clock.call_later(max(due, 0), lambda: wake(stream))
    ports = stream.account.ports

    def on_request(subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        name = subject.rsplit(".", 1)[-1]
        if isinstance(stream.store, DormantStorage):
            wake(stream)
            found = stream.consumer(name) is not None
        elif name in stream.consumers:
            return  # recovered before this request: its own subscription has it
        else:  # (woken, some consumers not recovered yet: LazyConsumers)
            lazy = stream.lazy
            found = lazy is not None and lazy.recover(name) is not None
        if found:  # (recovered now: it subscribed, the request goes again)
            ports.publish(subject, reply, hdr, payload)
        elif reply:  # (what a request to a consumer that is not there gets: no responders)
            ports.publish(reply, "", status(503, ""), b"")

    for prefix in (MSG_NEXT_PREFIX, "$JS.API.CONSUMER.RESET."):
        store.subs.append(ports.subscribe(prefix + stream.name + ".*", on_request))


def wake(stream: Stream) -> None:
    """Open a sleeping stream's store (full recovery) and recover its consumers."""
    d = stream.store
    if not isinstance(d, DormantStorage) or stream.closed:
        return
    real = d.open()  # (first: a store that fails to open leaves the stream asleep as it was)
    subs = list(d.subs)
    d.subs.clear()  # (kept while some consumers wait to be recovered: LazyConsumers)
    _let_go(d)
    stream.store = real
    stream._store_msg = real.store_msg
    real.register_storage_updates(stream._on_storage_update)
    stream.lseq = max(stream.lseq, real.state().last_seq)
    stream._fold_usage()
    stream.consumers = {}
    lost = real.recovered_lost
    if lost != (0, 0):
        log.warning(
            "JetStream stream '%s > %s' lost %d messages (%d bytes) at recovery",
            stream.account.name,
            stream.name,
            lost[0],
            lost[1],
        )
    _recover_woken(stream, d, subs)
    stream._arm_expiry()  # (max_age: as a start would have armed it)
    if d.entry[3] is None:
        # Asleep since an unclean stop (peek_asleep): the recovery a start would have logged,
        # logged now that it ran (the lost line above, if any, is its report too).
        log.info(
            "  Recovered stream '%s > %s' on first use after an unclean stop: %s messages, %d consumers",
            stream.account.name,
            stream.name,
            f"{real.state().msgs:,}",
            stream.num_consumers(),
        )
    else:
        log.debug(
            "JetStream: woke stream '%s > %s' (%d consumers, %d recovered)",
            stream.account.name,
            stream.name,
            stream.num_consumers(),
            len(stream.consumers),
        )


def recover_consumers(stream: Stream) -> None:
    """Re-create the consumers persisted with ``stream``; a stream without any (a KV bucket
    nobody watches) does not load the consumer layer for it (issue 31, restart time)."""
    try:
        names = stream.store.consumer_names()
    except StoreError:
        return
    if names:
        _registry().recover_all(stream, names)


def _registry() -> ModuleType:
    from natsd.jetstream import consumer_registry  # (the consumer layer: with the first consumer)

    return consumer_registry


def _recover_woken(stream: Stream, d: DormantStorage, subs: list[Subscription]) -> None:
    """A woken stream's consumers: those the clean stop named (``d.eager``) are recovered now,
    or after a kill -9 those whose config or state say so (``d.state_check``), or else all of
    them; the others when first used (:class:`LazyConsumers`; ``subs``, the sleeping stream's
    MSG.NEXT and RESET wildcards, stand for them meanwhile)."""
    try:
        names = stream.store.consumer_names()
    except StoreError:
        names = []
    eager = d.eager
    if eager is None and d.state_check is not None and d.directory and names:
        by_config = set(d.state_check)
        idle = peek_consumers_idle(d.directory, [n for n in names if n not in by_config])
        eager = [n for n in names if n not in idle]
    must = None if eager is None else set(eager)
    now = names if must is None else [n for n in names if n in must]
    if now:
        _registry().recover_all(stream, now)
    later = [] if must is None else [n for n in names if n not in must and n not in stream.consumers]
    if later:
        stream.lazy = LazyConsumers(stream, later, subs)
    else:
        for sub in subs:
            sub.unsubscribe()


class LazyConsumers:
    """The consumers of a woken stream not recovered yet (``stream.lazy``): their names, each
    recovered (``consumer_registry.recover``, exactly as at a start) the first time it is asked
    for (:meth:`Stream.consumer`), all of them by anything that needs every consumer
    (:meth:`Stream.all_consumers`: a purge, a stream update or delete, a snapshot, LIST pages,
    /jsz with consumers). Which ones may wait was decided at the clean stop (:func:`entry_for`,
    :func:`consumer_must_wake`), or after a kill -9 from their meta.inf and o.dat
    (:func:`peek_asleep`, :func:`_recover_woken`): durable pull consumers with nothing to do on their own: no
    message handed out and not acked (its ack timer, redeliveries, max_deliver, terminations
    when a limit removes it), no priority groups, no original-speed replay, no "last per
    subject" start, no natsd.* metadata feature. Until recovered a consumer's files are not
    opened (a kill -9 leaves them as they were) and nothing in the stream depends on
    it: limits retention (no ack floor to wait for), and its num_pending is counted from the
    store when it is recovered, as a start counts it."""

    def __init__(self, stream: Stream, names: list[str], subs: list[Subscription]) -> None:
        self.stream = stream
        self.names = set(names)
        self.subs = subs
        # The stream's first sequence when it woke: a consumer recovered later is clamped to it,
        # as it would have been at the wake (what a limit removed since then it skips anyway,
        # its num_pending is counted from the store); a purge recovers them all first.
        self.first = stream.store.state().first_seq

    def __len__(self) -> int:
        return len(self.names)

    def recover(self, name: str) -> Any:
        """Consumer ``name`` recovered now (None: not one of these, or it no longer loads: a
        consumer whose files are damaged is skipped, as at a start)."""
        if name not in self.names:
            return None
        self.names.discard(name)
        try:
            o = _registry().recover_one(self.stream, name, self.first)
        finally:
            if not self.names:
                self.close()
                if self.stream.lazy is self:
                    self.stream.lazy = None
        return o

    def recover_all(self) -> None:
        for name in sorted(self.names):
            self.recover(name)

    def close(self) -> None:
        """Nothing left to recover, or the stream stops (the names stay: the restart file
        counts them): drop the wildcards."""
        for sub in self.subs:
            sub.unsubscribe()
        self.subs.clear()


def consumer_must_wake(c: Any) -> bool:
    """Whether a consumer of a stream stopped cleanly must be recovered as soon as the stream
    wakes next time (see :class:`LazyConsumers`): something of its own would run (a message
    handed out and not acked), or what its config asks for (:func:`config_must_wake`)."""
    return bool(c.t.pending) or config_must_wake(c.cfg)


def config_must_wake(ccfg: Any) -> bool:
    """The part of :func:`consumer_must_wake` its config decides: priority groups, replay at
    the original speed, a "last per subject" start (chosen at recovery), a natsd.* metadata
    feature. ``ccfg``: a ConsumerConfig or the JSON of one (meta.inf's, read after a kill -9),
    where defaults may be left out."""
    get = ccfg.get if isinstance(ccfg, dict) else lambda k: getattr(ccfg, k, None)
    meta = get("metadata")
    return bool(
        (get("priority_policy") or "none") != "none"
        or get("priority_groups")
        or (get("replay_policy") or "instant") != "instant"
        or get("deliver_policy") == "last_per_subject"
        or (isinstance(meta, dict) and any(k.startswith("natsd.") for k in meta))
    )


def _let_go(d: DormantStorage) -> None:
    """Drop what stood in for the sleeping stream (the consumers' wildcards, the max_age timer)."""
    for sub in d.subs:
        sub.unsubscribe()
    d.subs.clear()
    if d.timer is not None:
        d.timer.cancel()
        d.timer = None


def rest(stream: Stream) -> None:
    """Stop a stream that never woke: its files are as the last clean stop left them."""
    d = stream.store
    if isinstance(d, DormantStorage):
        _let_go(d)
    stream._unsubscribe()
    stream.closed = True
    stream._fast = stream._counter_fast = False
    stream._uncount()
    stream.expiry.cancel()


def config_can_sleep(cfg: StreamConfig) -> bool:
    """Whether a stream of this config has nothing to do on its own (see the module docstring)."""
    return not (
        cfg.storage != "file"
        or cfg.retention != "limits"
        or cfg.allow_msg_ttl
        or cfg.subject_delete_marker_ttl
        or cfg.allow_msg_schedules
        or cfg.allow_atomic
        or cfg.mirror is not None
        or cfg.sources
    )


def consumer_can_sleep(ccfg: Any) -> bool:
    """Whether a consumer may sleep with its stream: a durable pull consumer with no timer of its
    own. ``ccfg``: a ConsumerConfig, or the JSON of one (a consumer's meta.inf, read after a
    kill -9 without building the consumer): the same names either way."""
    get = ccfg.get if isinstance(ccfg, dict) else lambda k: getattr(ccfg, k, None)
    meta = get("metadata")
    return bool(
        get("durable_name")
        and not get("mem_storage")
        and not get("deliver_subject")
        and not get("inactive_threshold")
        and not get("pause_until")
        and (meta is None or isinstance(meta, dict))
        and not consumer_features(meta).dead_letter
    )


def can_sleep(stream: Stream) -> bool:
    """Whether ``stream`` (stopped cleanly) may start asleep next time (see the module docstring)."""
    return config_can_sleep(stream.config) and all(consumer_can_sleep(c.cfg) for c in stream.consumers.values())


def peek_asleep(cfg: StreamConfig, directory: str) -> tuple[StreamState, int, list] | None:
    """After an unclean stop (no restart file entry): (state, consumer count, an entry standing
    for a restart file's) when the stream may start asleep all the same, that is
    when its config and every consumer's allow it and its files show exactly what a recovery
    would find without reading the blocks (natsd.store.file.peek: index.db current, no block
    grown, nothing to cut or report). None: the stream is recovered at start."""
    if not config_can_sleep(cfg):
        return None
    got = peek_stream(directory, cfg.name, cfg.first_seq)
    if got is None:
        return None
    st, lost, consumers = got
    if len(lost) > _MAX_LOST:
        return None
    by_config: list[str] | None = []
    decided: dict[str, tuple[bool, bool, bool]] = {}  # facts -> (named, may sleep, must wake)
    for name, facts in consumers:
        d = decided.get(facts)
        if d is None:
            d = decided[facts] = _decide(facts)
        if not d[1]:
            return None
        if not d[0]:
            by_config = None  # (a meta without its name: every consumer is recovered at wake)
        elif by_config is not None and d[2]:
            by_config.append(name)
    # (the fingerprint is taken when a stop finds the stream still asleep: entry_for; the
    # sixth field, the clean stop's eager list, is unknown: DormantStorage.state_check)
    entry = [[getattr(st, f) for f in _FIELDS], lost, len(consumers), None, None, None, by_config]
    return st, len(consumers), entry


def _decide(facts: str) -> tuple[bool, bool, bool]:
    """(named, may sleep, must wake at wake) of a consumer from its facts
    (natsd.store.file.consumer_index.facts_of: the config fields these decisions read)."""
    try:
        named, ccfg = json.loads(facts)
    except (ValueError, TypeError):
        return False, False, False
    if not isinstance(ccfg, dict):
        return bool(named), False, False
    return bool(named), consumer_can_sleep(ccfg), config_must_wake(ccfg)


def entry_for(stream: Stream, directory: str) -> list | None:
    """The restart file's entry of a stopped stream (None: it starts awake next time)."""
    d = stream.store
    if isinstance(d, DormantStorage) and d.real is None:
        entry = d.entry
        if entry[3] is None:  # (asleep since an unclean stop: peek_asleep; its files as then)
            fp = fingerprint(directory)
            if fp is None:
                return None
            entry = [*entry[:3], fp]
        return [*entry, d.config.meta, d.eager, d.state_check]
    if not can_sleep(stream):
        return None
    st = stream.store.state()
    lost = st.lost_msgs or []
    if len(lost) > _MAX_LOST:
        return None
    fp = fingerprint(directory)
    if fp is None:
        return None
    # (a consumer still waiting to be recovered stays so: nothing changed it)
    eager = sorted(c.name for c in stream.consumers.values() if consumer_must_wake(c))
    return [[getattr(st, f) for f in _FIELDS], list(lost), stream.num_consumers(), fp, stream.store.config.meta, eager]


def read_restart_file(account_dir: str) -> dict[str, list]:
    """The entries a clean stop left, by stream name; the file is removed (durably) first, so
    that a crash from now on leaves none and every stream is recovered at the next start."""
    path = os.path.join(account_dir, RESTART_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return {}
    except OSError:
        return {}
    try:
        os.unlink(path)
        fsync_dir(account_dir)
    except OSError:
        return {}  # (cannot be removed: it could outlive a crash, so it is not used)
    try:
        doc = json.loads(data)
    except ValueError:
        return {}
    if not isinstance(doc, dict) or doc.get("version") != _VERSION or not isinstance(doc.get("streams"), dict):
        return {}
    return doc["streams"]


def sleeping_state(entry: list, directory: str) -> tuple[StreamState, int, dict] | None:
    """(state, consumer count, stream meta) an entry records, if the stream's files still
    match it (None: the stream is recovered at start)."""
    try:
        counters, lost, consumers, fp, meta = entry[:5]
        for names in entry[5:7]:  # (the eager list, the names checked by config: DormantStorage)
            if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
                return None
        if not isinstance(meta, dict) or fingerprint(directory, int(fp[0])) != fp:
            return None
        st = StreamState(**dict(zip(_FIELDS, counters)))
        st.lost_msgs = [int(x) for x in lost] if lost else None
        return st, int(consumers), meta
    except (TypeError, ValueError, IndexError):
        return None


def write_restart_file(account_dir: str, entries: dict[str, list]) -> None:
    """Record the streams that may start asleep (after every one of them stopped cleanly)."""
    if not entries:
        return
    # Inside a clean stop (natsd.store.stopsync) the one sync at its end makes the file durable
    # with the index.db files it describes; a crash before that leaves entries whose fingerprints
    # the files may not match, and such a stream is recovered from its files (module docstring).
    later = stopsync.deferred()
    try:
        atomic_write(
            os.path.join(account_dir, RESTART_FILE),
            json.dumps({"version": _VERSION, "streams": entries}, separators=(",", ":")).encode(),
            fsync=not later,
        )
        if not later:
            fsync_dir(account_dir)
    except OSError as exc:
        log.warning(
            "JetStream: could not write %s in %s (%s): every stream recovers at start", RESTART_FILE, account_dir, exc
        )
