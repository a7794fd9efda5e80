"""The JetStream engine: per-server configuration and resources, per-account state, recovery.

``JetStreamEngine(options, clock)`` is created by the server when JetStream is enabled; the
server calls ``enable_account(name, ports, limits)`` for every JetStream-enabled account (one
:class:`~natsd.jetstream.ports.Ports` per account), ``start()`` to recover streams from disk and
``stop()`` at shutdown. ``jsz(query)`` answers the ``/jsz`` monitoring endpoint.

On-disk layout (as the reference): ``<store_dir>/jetstream/<account>/streams/<stream>/`` where
``store_dir`` is ``-sd``/``store_dir`` (default ``<system temp>/nats``, giving
``<system temp>/nats/jetstream`` as nats-server). What is inside a stream directory belongs to
:mod:`natsd.store`.

Resource defaults (as the reference): ``max_memory_store`` = 75% of physical memory,
``max_file_store`` = 75% of the free space of the file system holding the store directory.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Callable, cast

from natsd.lazydataclass import dataclass
from natsd.config import feature_flags
from natsd.gotime import format_duration, format_rfc3339_or_zero as rfc3339, parse_rfc3339_or_zero as parse_rfc3339
from natsd.jetstream import domain_mappings
from natsd.jetstream.consumer import ConsumerHub

# (models load with the first stream: issue 26)
from natsd.jetstream.config.constants import JS_API_LEVEL, RESTORE_DIR_PREFIX
from natsd.jetstream.templates import TemplateManager
from natsd.jetstream.wire import dumps
from natsd.jetstream.config.batch_limits import batch_limits_for
from natsd.store import list_stream_dirs, load_stream_meta, open_stream_store, store_encryption
from natsd.store.stopsync import one_sync_for
from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Clock
    from natsd.jetstream.errors import ApiError
    from natsd.jetstream.config.models import StreamConfig
    from natsd.config.options import AccountJetStreamLimits, ServerOptions
    from natsd.jetstream.ports import MsgHandler, Ports, Subscription
    from natsd.jetstream.snapshot import RestoreReceiver, SnapshotSender
    from natsd.jetstream.stream.core import Stream
    from natsd.jetstream.views import StreamView
    from natsd.store.base import StreamState, StreamStore
    from natsd.store.file.encryption import AccountKeys

__all__ = [
    "JetStreamEngine",
    "JsAccount",
    "ApiStats",
    "ApiSurface",
    "default_store_dir",
    "system_memory",
    "disk_available",
]

log = logging.getLogger("natsd.jetstream")

JETSTREAM_STORE_DIR = "jetstream"
MAX_MEM_DEFAULT = 256 * 1024 * 1024  # used when system memory cannot be determined
MAX_STORE_DEFAULT = 1024**4  # 1 TB when the free disk cannot be determined
# Reported for account_details reserved_* when the account has no limits: the reference prints
# its internal -1 as an unsigned 64-bit number.
_UNLIMITED_RESERVED = 18446744073709551615


def default_store_dir() -> str:
    """``<system temp>/nats`` -- the engine appends ``jetstream`` like nats-server."""
    import tempfile  # (with shutil behind it: only a start without a store directory, issue 26)

    return os.path.join(tempfile.gettempdir(), "nats")


def system_memory() -> int:
    """Physical memory in bytes (0 when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def disk_free(path: str) -> int | None:
    """Bytes available to unprivileged users at ``path`` (None when it cannot be determined)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def disk_available(path: str) -> int:
    """75% of the space available to unprivileged users at ``path`` (created if missing), as
    nats-server's diskAvailable; 1 TB when it cannot be determined."""
    try:
        os.makedirs(path, exist_ok=True)
        st = os.statvfs(path)
        return st.f_bavail * st.f_frsize // 4 * 3
    except OSError:
        return MAX_STORE_DEFAULT


def _open_store(
    cfg: StreamConfig, created_ns: int, directory: str, engine: "JetStreamEngine", account: str
) -> "StreamStore":
    # the stream layer loads with the first stream (issue 26, start-up time)
    from natsd.jetstream.stream.core import store_config_for

    return open_stream_store(
        store_config_for(cfg, created_ns),
        engine.clock,
        directory,
        engine.sync_interval_ns,
        engine.sync_always,
        threaded_writes=True,
        keys=engine.keys_for(account),
    )


def _has_stale_restores(directory: str) -> bool:
    """Whether ``directory`` holds an upload directory a crash left (looked at without loading
    the snapshot layer, which a restart with a store otherwise loaded for this: issue 31)."""
    try:
        return any(name.startswith(RESTORE_DIR_PREFIX) for name in os.listdir(directory))
    except OSError:  # (a first start has no directory)
        return False


def _load_stream_meta(directory: str, keys: "AccountKeys | None" = None, settle: bool = True) -> dict | None:
    """The persisted StoreConfig.meta of the stream in ``directory`` (None if unreadable;
    :func:`natsd.store.load_stream_meta` verifies the checksum). Both our own meta shape
    (``{"config": {...}, "created": ...}``) and the reference's flattened FileStreamInfo
    (``{"name": ..., ..., "created": ...}``) are understood."""
    meta = load_stream_meta(directory, keys, settle)
    if not isinstance(meta, dict):
        return None
    if "config" not in meta and "name" in meta:
        meta = {"config": meta, "created": meta.get("created", "")}
    return meta


@dataclass(slots=True)
class ApiStats:
    """Per-account API counters (``api`` object of ``$JS.API.INFO``; ``inflight`` is always 0
    here: requests are handled synchronously)."""

    total: int = 0
    errors: int = 0


class ApiSurface(Protocol):
    """What the engine needs from the ``$JS.API`` layer (:class:`natsd.jetstream.api.JetStreamApi`).
    The domain never imports the API: the server hands one to the engine, which installs it on
    every account; an engine without one runs streams and consumers with no API (unit tests)."""

    def install(self, js_account: "JsAccount") -> list["Subscription"]:
        """Subscribe the account's API subjects; returns the subscriptions."""

    def answer_not_enabled(self, ports: "Ports", stats: ApiStats, system: bool = False) -> list["Subscription"]:
        """Answer every API request of an account without JetStream with 503/10039."""

    def direct_get_handlers(self, stream: "StreamView") -> tuple["MsgHandler", "MsgHandler"]:
        """The DIRECT.GET handlers a stream with ``allow_direct`` subscribes."""


def _refuse_update_during_snapshot(stream: Stream) -> None:
    """STREAM.UPDATE check: the backup's config may not change under it (reference 10069)."""
    if stream.snapshots_running:
        from natsd.jetstream.errors import ApiErrors  # (the error table loads with the first request: issue 26)

        raise ApiErrors.STREAM_UPDATE(err="stream snapshot in progress")


class JsAccount:
    """JetStream state of one account: its streams, consumer plumbing, templates, transfers,
    API counters, limits and usage."""

    def __init__(
        self, engine: "JetStreamEngine", name: str, ports: "Ports", limits: "AccountJetStreamLimits | None"
    ) -> None:
        self.engine = engine
        self.name = name
        self.ports = ports
        self.clock = engine.clock
        self.limits = limits
        self.streams: dict[str, Stream] = {}
        self.stream_subjects: Any = None  # the create's overlap index (api.streams._stream_subjects)
        self.api_stats = ApiStats()
        self.directory = os.path.join(engine.store_dir, name, "streams")
        # Usage caches for per-message account limit checks (bytes, refreshed per turn).
        self._usage = {"memory": 0, "file": 0}
        self._usage_dirty = True
        self.limits_enforced = bool(limits is not None and (limits.max_memory >= 0 or limits.max_storage >= 0))
        # Bytes reserved by the streams' max_bytes, [memory, file], kept as streams come, go and
        # change (_register, delete_stream, stream_config_changed): every create checks them, and
        # summing the streams each time made creating N streams O(N²) (issue 31).
        self._reserved = [0, 0]
        # Changes to ``streams``: one per stream added (or replaced), updated or deleted. The
        # create's overlap index reads only the streams added since it last looked when the
        # count says nothing else changed (StreamSubjects.check_new_in).
        self.streams_version = 0
        self._subs: list[Any] = []
        # The account-wide consumer plumbing: one $JS.ACK.> and one $JS.FC.> subscription, and
        # the push consumers by deliver subject (interest changes).
        self.consumer_hub = ConsumerHub(self)
        # Stream templates (STREAM.TEMPLATE.*), recovered from <account>/templates.
        self.templates = TemplateManager(self)
        # Snapshots being sent and restores being received (cancelled when the account stops).
        self.transfers: set[SnapshotSender | RestoreReceiver] = set()
        # Checks every STREAM.UPDATE runs before changing a stream's config; each raises
        # ApiError to refuse (a snapshot in progress, a template-owned stream).
        self.stream_update_checks: list[Callable[[Stream], None]] = [
            _refuse_update_during_snapshot,
            self.templates.refuse_update_of_owned_stream,
        ]
        if engine.api is not None:
            self._subs.extend(engine.api.install(self))
        if _has_stale_restores(self.directory):  # (rare: the snapshot layer loads then, issue 26/31)
            from natsd.jetstream.snapshot import remove_stale_restores

            remove_stale_restores(self)
        self.templates.recover()
        self._subs.extend(domain_mappings.setup_account(self))

    def send_advisory(self, subject: str, obj: dict | Any) -> None:
        """Publish an advisory (JSON) if anybody listens on ``subject``. ``obj`` may be a dict
        or a zero-argument callable building it (so no JSON is built for nobody)."""
        if not self.ports.has_interest(subject):
            return
        if callable(obj):
            obj = obj()
        self.ports.publish(subject, "", None, dumps(obj))

    # -- streams ----------------------------------------------------------------------------------
    def lookup_stream(self, name: str) -> Stream:
        s = self.streams.get(name)
        if s is None:
            from natsd.jetstream.errors import ApiErrors  # (the error table loads with the first request: issue 26)

            raise ApiErrors.STREAM_NOT_FOUND()
        return s

    def num_consumers(self, limitable: bool = False) -> int:
        """Consumers of all streams (``limitable``: without internal mirror/source feeds)."""
        if not limitable:
            return sum(s.num_consumers() for s in self.streams.values())
        # (the stream layer and dormant load with the first stream: issue 26)
        from natsd.jetstream import dormant
        from natsd.jetstream.stream.consumers import _is_direct

        # (a sleeping stream's consumers, and those a woken one did not recover yet, are
        # durables, none direct: their count needs no recovery)
        return sum(
            len(s.consumers)
            if dormant.is_dormant(s)
            else sum(1 for c in s.consumers.values() if not _is_direct(c)) + (len(s.lazy) if s.lazy is not None else 0)
            for s in self.streams.values()
        )

    def stream_dir(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def add_stream(self, cfg: StreamConfig, created_ns: int | None = None, subscribe: bool = True) -> Stream:
        """Create and start a stream from a validated config (limits checked by the caller).
        ``subscribe=False``: the caller subscribes its subjects (``Stream.subscribe_steps``)."""
        created = created_ns if created_ns is not None else self.clock.time_ns()
        store = _open_store(cfg, created, self.stream_dir(cfg.name), self.engine, self.name)
        return self.adopt_stream(cfg, store, created, subscribe)

    def adopt_stream(self, cfg: StreamConfig, store: "StreamStore", created_ns: int, subscribe: bool = True) -> Stream:
        """Register and start a stream over an already opened store (creation and restore)."""
        from natsd.jetstream.stream.core import Stream  # the stream layer loads with the first stream (issue 26)

        stream = Stream(self, cfg, store, created_ns)
        self._register(stream)
        stream.start(subscribe=subscribe)
        self._usage_dirty = True
        return stream

    def _register(self, stream: Stream) -> None:
        """Put ``stream`` into ``streams`` and its max_bytes into the reservation totals."""
        old = self.streams.get(stream.name)
        if old is not None:
            self._reserve(old.config, -1)
        self.streams[stream.name] = stream
        self._reserve(stream.config, 1)
        self.streams_version += 1

    def _reserve(self, cfg: StreamConfig, sign: int) -> None:
        if cfg.max_bytes > 0:
            self._reserved[0 if cfg.storage == "memory" else 1] += sign * cfg.max_bytes

    def stream_config_changed(self, old: StreamConfig, new: StreamConfig) -> None:
        """A stream of this account changed its config (STREAM.UPDATE): its reservation follows."""
        self._reserve(old, -1)
        self._reserve(new, 1)
        self.streams_version += 1

    def delete_stream(self, name: str) -> None:
        s = self.streams.pop(name)
        self._reserve(s.config, -1)
        self.streams_version += 1
        s.delete()
        self._usage_dirty = True

    def recover(self) -> None:
        """Recover every stream under this account's directory (and their consumers). Streams with
        nothing to do on their own start asleep (natsd.jetstream.dormant) after a clean stop, and
        after an unclean one when their files need no repair (dormant.peek_asleep)."""
        account_dir = os.path.dirname(self.directory)
        cut: set[str] = set()
        dirs = list_stream_dirs(account_dir, cut)
        if not self.streams and not dirs:
            # a first start: the stream and consumer layers load with the first stream (issue 26); a
            # restart file left beside no stream is stale, and must not outlive a later crash
            if os.path.exists(os.path.join(account_dir, "natsd-restart.json")):
                from natsd.jetstream import dormant  # (rare: see above)

                dormant.read_restart_file(account_dir)
            return
        from natsd.jetstream import dormant  # (the stream layer's, like Stream: loaded with the first stream)
        from natsd.store.base import StoreKeyError

        keys = self.engine.keys_for(self.name)
        asleep = dormant.read_restart_file(account_dir) if keys is None else {}
        for d in dirs:
            entry = os.path.basename(d)
            if entry.startswith(".") or entry in self.streams:
                continue
            sleep_entry = asleep.get(entry)
            sleeping = dormant.sleeping_state(sleep_entry, d) if sleep_entry is not None else None
            try:
                # (a stream starting asleep has its meta.inf, unchanged, in the restart file)
                meta = sleeping[2] if sleeping is not None else _load_stream_meta(d, keys, entry in cut)
            except StoreKeyError:
                raise  # the keys and the store disagree: JetStream does not start (nothing written)
            except Exception:
                log.exception("JetStream: can not read stream metadata in %s", d)
                continue
            if not meta or "config" not in meta:
                log.warning("JetStream: skipping %s: no stream metadata", d)
                continue
            self._recover_stream(d, entry, meta, sleeping, sleep_entry, keys is None)
        # mirrors / sources connect once every origin stream is back
        for stream in list(self.streams.values()):
            if (stream.config.mirror is not None or stream.config.sources) and not stream._links:
                stream._start_links()
        self._usage_dirty = True

    def _recover_stream(
        self,
        d: str,
        entry: str,
        meta: dict,
        sleeping: tuple["StreamState", int, dict] | None,
        sleep_entry: list | None,
        may_peek: bool = False,
    ) -> None:
        # (the stream layer loads with the first stream: issue 26)
        from natsd.jetstream import dormant
        from natsd.jetstream.config.models import StreamConfig
        from natsd.jetstream.stream.core import Stream, store_config_for
        from natsd.store.base import StoreKeyError

        t0 = self.clock.monotonic_ns()  # (how long the restore took, logged as nats-server does)
        try:
            cfg = StreamConfig.from_json(meta["config"])
            log.info("  Starting restore for stream '%s > %s'", self.name, cfg.name)
            created = meta.get("created_ns") or parse_rfc3339(meta.get("created", "")) or self.clock.time_ns()
            asleep = sleeping if cfg.name == entry else None
            if asleep is None and may_peek and cfg.name == entry:
                # No entry (after a kill -9): asleep all the same when its files show that a
                # recovery would find exactly what index.db says (natsd.jetstream.dormant.peek_asleep).
                peeked = dormant.peek_asleep(cfg, d)
                if peeked is not None:
                    asleep, sleep_entry = (peeked[0], peeked[1], meta), peeked[2]
            if asleep is not None and sleep_entry is not None:
                engine = self.engine
                store: StreamStore = cast(
                    "StreamStore",
                    dormant.DormantStorage(
                        lambda: store_config_for(cfg, created),
                        asleep[0],
                        lambda: _open_store(cfg, created, d, engine, self.name),
                        sleep_entry,
                        d,
                    ),
                )
            else:
                store = _open_store(cfg, created, d, self.engine, self.name)
        except StoreKeyError:
            raise
        except Exception:
            log.exception("JetStream: can not recover stream %s", entry)
            return
        stream = Stream(self, cfg, store, created)
        self._register(stream)
        if asleep is not None:
            dormant.put_to_sleep(stream, cast(dormant.DormantStorage, store), asleep[1])
        stream.start(links=False)
        st = store.state()
        log.info(
            "  Restored %s messages for stream '%s > %s' in %s",
            f"{st.msgs:,}",
            self.name,
            cfg.name,
            format_duration((self.clock.monotonic_ns() - t0 + 500_000) // 1_000_000 * 1_000_000),
        )
        lost_now = store.recovered_lost
        if lost_now != (0, 0):  # what this start's recovery dropped (a torn tail after a crash...)
            log.warning(
                "JetStream stream '%s > %s' lost %d messages (%d bytes) at recovery",
                self.name,
                cfg.name,
                lost_now[0],
                lost_now[1],
            )
        if asleep is not None:  # (its consumers are recovered when it wakes)
            if asleep[1]:
                log.info("  Recovering %d consumers for stream - '%s > %s'", asleep[1], self.name, cfg.name)
            return
        try:
            dormant.recover_consumers(stream)
        except Exception:
            log.exception("JetStream: recovering consumers of %s", cfg.name)
        if stream.consumers:
            log.info("  Recovering %d consumers for stream - '%s > %s'", len(stream.consumers), self.name, cfg.name)

    def stop(self) -> None:
        for s in self._subs:
            s.unsubscribe()
        self._subs = []
        for t in list(self.transfers):
            try:
                t.cancel()
            except Exception:
                log.exception("JetStream: cancelling a snapshot/restore of %s failed", self.name)
        self.templates.stop()
        if not self.streams:
            return  # (nothing to record; and no stream layer loaded on an empty server: issue 26)
        from natsd.jetstream import dormant  # (loaded with the first stream: issue 26)

        entries: dict[str, list] = {}
        for stream in list(self.streams.values()):
            try:
                if dormant.is_dormant(stream) and not stream.closed:
                    dormant.rest(stream)
                else:
                    stream.stop()
                if self.engine.keys_for(self.name) is None:
                    e = dormant.entry_for(stream, self.stream_dir(stream.name))
                    if e is not None:
                        entries[stream.name] = e
            except Exception:
                log.exception("stopping stream %s", stream.name)
        dormant.write_restart_file(os.path.dirname(self.directory), entries)

    # -- usage and limits ---------------------------------------------------------------------------
    def usage(self) -> tuple[int, int]:
        """(memory bytes, file bytes) currently stored by this account's streams."""
        mem = fil = 0
        for s in self.streams.values():
            b = s.store.state().bytes
            if s.config.storage == "memory":
                mem += b
            else:
                fil += b
        self._usage["memory"], self._usage["file"] = mem, fil
        self._usage_dirty = False
        return mem, fil

    def reserved(self) -> tuple[int, int]:
        """Bytes reserved by streams with max_bytes (memory, file)."""
        return self._reserved[0], self._reserved[1]

    def check_store_limits(self, storage: str, size: int) -> ApiError | None:
        """Per-message account limit check (10002 when the account is full)."""
        lim = self.limits
        if lim is None:
            return None
        if self._usage_dirty:
            self.usage()
        if storage == "memory":
            full = lim.max_memory >= 0 and self._usage["memory"] + size > lim.max_memory
        else:
            full = lim.max_storage >= 0 and self._usage["file"] + size > lim.max_storage
        if not full:
            return None
        from natsd.jetstream.errors import ApiErrors  # (the error table loads with the first request: issue 26)

        return ApiErrors.ACCOUNT_RESOURCES_EXCEEDED()

    def note_stored(self, storage: str, size: int) -> None:
        # Approximate running usage between refreshes (exact numbers come from the stores).
        if self.limits_enforced:
            self._usage["memory" if storage == "memory" else "file"] += size
            if not self._usage_dirty:
                self._usage_dirty = True
                self.clock.call_soon(self._refresh_usage)

    def note_removed(self, storage: str, bytes_delta: int) -> None:
        if self.limits_enforced and not self._usage_dirty:
            self._usage_dirty = True

    def _refresh_usage(self) -> None:
        if self._usage_dirty:
            self.usage()

    def check_new_stream_limits(self, cfg: StreamConfig, existing: StreamConfig | None = None) -> None:
        """Limits at stream create/update: stream count (10027), stream max_consumers vs the
        account's (10026), max_bytes required (10113) / too large (10122), reservations vs the
        account and server limits (10028 memory / 10047 storage)."""
        from natsd.jetstream.errors import ApiErrors  # (the error table loads with the first request: issue 26)

        lim = self.limits
        if existing is None and lim is not None and lim.max_streams > 0 and len(self.streams) >= lim.max_streams:
            raise ApiErrors.MAXIMUM_STREAMS_LIMIT()
        if (
            lim is not None
            and cfg.max_consumers > 0
            and lim.max_consumers > 0
            and cfg.max_consumers > lim.max_consumers
        ):
            raise ApiErrors.MAXIMUM_CONSUMERS_LIMIT()
        if lim is not None:
            per_stream = lim.memory_max_stream_bytes if cfg.storage == "memory" else lim.storage_max_stream_bytes
            if lim.max_bytes_required and cfg.max_bytes <= 0:
                raise ApiErrors.STREAM_MAX_BYTES_REQUIRED()
            if per_stream > 0 and cfg.max_bytes > per_stream:
                raise ApiErrors.STREAM_MAX_STREAM_BYTES_EXCEEDED()
        add = cfg.max_bytes if cfg.max_bytes > 0 else 1
        if existing is not None:
            add = max(cfg.max_bytes, 0) - max(existing.max_bytes, 0)
            if add <= 0:
                return
        rmem, rfil = self.reserved()
        if existing is not None and existing.max_bytes > 0:
            if existing.storage == "memory":
                rmem -= existing.max_bytes
            else:
                rfil -= existing.max_bytes
            add = cfg.max_bytes
        eng = self.engine
        if cfg.storage == "memory":
            if lim is not None and lim.max_memory >= 0 and (rmem > lim.max_memory or add > lim.max_memory - rmem):
                raise ApiErrors.MEMORY_RESOURCES_EXCEEDED()
            srv = eng.reserved()[0]
            if srv > eng.max_memory or add > eng.max_memory - srv:
                raise ApiErrors.MEMORY_RESOURCES_EXCEEDED()
        else:
            if lim is not None and lim.max_storage >= 0 and (rfil > lim.max_storage or add > lim.max_storage - rfil):
                raise ApiErrors.STORAGE_RESOURCES_EXCEEDED()
            srv = eng.reserved()[1]
            if srv > eng.max_store or add > eng.max_store - srv:
                raise ApiErrors.STORAGE_RESOURCES_EXCEEDED()

    def limits_json(self) -> dict:
        lim = self.limits
        if lim is None:
            return {
                "max_memory": -1,
                "max_storage": -1,
                "max_streams": -1,
                "max_consumers": -1,
                "max_ack_pending": -1,
                "memory_max_stream_bytes": -1,
                "storage_max_stream_bytes": -1,
                "max_bytes_required": False,
            }
        return {
            "max_memory": lim.max_memory,
            "max_storage": lim.max_storage,
            "max_streams": lim.max_streams,
            "max_consumers": lim.max_consumers,
            "max_ack_pending": lim.max_ack_pending,
            "memory_max_stream_bytes": lim.memory_max_stream_bytes,
            "storage_max_stream_bytes": lim.storage_max_stream_bytes,
            "max_bytes_required": lim.max_bytes_required,
        }

    def account_info(self) -> dict:
        """JetStreamAccountStats as ``$JS.API.INFO`` returns it (without ``type``)."""
        mem, fil = self.usage()
        rmem, rfil = self.reserved()
        out: dict = {
            "memory": mem,
            "storage": fil,
            "reserved_memory": rmem,
            "reserved_storage": rfil,
            "streams": len(self.streams),
            "consumers": self.num_consumers(),
            "limits": self.limits_json(),
        }
        tier = self.limits.tier if self.limits is not None else ""
        if tier:
            # Tiered limits (from an account JWT): the reference reports them under "tiers" and
            # zeros as the account-wide limits.
            out["tiers"] = {tier: dict(out)}
            out["limits"] = {k: (False if k == "max_bytes_required" else 0) for k in out["limits"]}
        if self.engine.domain:
            out["domain"] = self.engine.domain
        out["api"] = {"level": JS_API_LEVEL, "total": self.api_stats.total, "errors": self.api_stats.errors}
        return out


class JetStreamEngine:
    """Server-wide JetStream: resources, accounts, sync timer, /jsz."""

    def __init__(
        self,
        options: "ServerOptions",
        clock: "Clock",
        server_id: str = "",
        server_name: str = "",
        api: ApiSurface | None = None,
    ) -> None:
        self.options = options
        # The $JS.API layer installed on every account (None: no API, e.g. domain unit tests).
        self.api = api
        self.clock = clock
        js = options.jetstream
        base = js.store_dir or default_store_dir()
        self.store_dir = os.path.join(base, JETSTREAM_STORE_DIR)
        if js.max_memory_store is not None and js.max_memory_store >= 0:
            self.max_memory = js.max_memory_store
        else:
            sm = system_memory()
            self.max_memory = sm // 4 * 3 if sm > 0 else MAX_MEM_DEFAULT
        # The default storage limit is sized from free space (and resized after recovery).
        self._store_from_disk = not (js.max_file_store is not None and js.max_file_store >= 0)
        if not self._store_from_disk:
            self.max_store = js.max_file_store
        else:
            self.max_store = disk_available(self.store_dir)
        # Bytes stored by every stream, [memory, file]: the reference's memUsed / storeUsed. Each
        # Stream folds its store's bytes into it (Stream._fold_usage) and refuses a publish with
        # 10023 while its type's total exceeds max_memory / max_store.
        self.used = [0, 0]
        self._exceeded_logged_at: int | None = None
        self.sync_interval_ns = js.sync_interval_ns
        self.sync_always = js.sync_always
        # Encryption at rest (``jetstream { cipher, key, prev_key }``): None when no key is set.
        self.encryption = store_encryption(js.cipher, js.key, js.prev_key)
        self.batch_limits = batch_limits_for(js)
        self.domain = js.domain
        # Consumers per stream when its max_consumers is unset (-1: unlimited), as 2.15.
        self.default_max_consumers = js.default_max_consumers
        # feature_flags { js_ack_fc_v2 }: consumers send v2 ack / flow-control subjects.
        self.ack_v2 = feature_flags.enabled(options.feature_flags, feature_flags.JS_ACK_FC_V2)
        self.server_id = server_id
        self.server_name = server_name or server_id
        self.accounts: dict[str, JsAccount] = {}
        self.started = False
        self._sync_timer: Any = None

    def enable_account(self, name: str, ports: "Ports", limits: "AccountJetStreamLimits | None" = None) -> JsAccount:
        """Enable JetStream for account ``name`` (recovering its streams if already started)."""
        acc = self.accounts.get(name)
        if acc is not None:
            return acc
        acc = JsAccount(self, name, ports, limits)
        self.accounts[name] = acc
        if self.started:
            acc.recover()
        return acc

    def disable_account_api(self, ports: "Ports", system: bool = False) -> list[Any]:
        """For an account *without* JetStream on a JetStream server: answer every ``$JS.API``
        request with 503/10039 "JetStream not enabled for account" (the reference does this
        through its API import; ``system``: the system account's answers). Returns the
        subscriptions (unsubscribe to undo)."""
        if self.api is None:
            return []
        return self.api.answer_not_enabled(ports, ApiStats(), system)

    def keys_for(self, account: str) -> "AccountKeys | None":
        """The encryption keys of ``account``'s file stores, None when the store is not encrypted."""
        return None if self.encryption is None else self.encryption.for_account(account)

    def lookup_account(self, name: str) -> JsAccount | None:
        return self.accounts.get(name)

    def start(self) -> None:
        """Create the store directory and recover every enabled account's streams."""
        os.makedirs(self.store_dir, exist_ok=True)
        if self.encryption is not None:
            # The reference's start-up line (its StoreCipher names); never the key.
            log.info("JetStream encryption: %s", self.encryption.cipher.label)
        self.started = True
        for acc in list(self.accounts.values()):
            acc.recover()
        if self._store_from_disk:
            self._size_store_limit()
        self._arm_sync()

    def _size_store_limit(self) -> None:
        """The default storage limit counts the bytes the recovered file streams hold as
        available, as nats-server 2.15 does: 75% of (free space + stored bytes). Without that a
        store that once filled a good part of the disk would refuse every publish after a
        restart (its own bytes are no longer free space)."""
        free = disk_free(self.store_dir)
        if free is None:
            return
        self.max_store = (free + self.used[1]) // 4 * 3
        for acc in self.accounts.values():
            for s in acc.streams.values():
                if s.config.storage == "file":
                    s._max_used = self.max_store

    def _arm_sync(self) -> None:
        if self.sync_always or self.sync_interval_ns <= 0:
            return
        self._sync_timer = self.clock.call_later(self.sync_interval_ns, self._sync_all)

    def _sync_all(self) -> None:
        """Every sync_interval: fsync every stream (what the reference's syncBlocks does)."""
        self._sync_timer = None
        for acc in list(self.accounts.values()):
            for s in list(acc.streams.values()):
                if not s.closed:
                    try:
                        s.store.sync()
                    except Exception:
                        log.exception("sync of stream %s failed", s.name)
        if self.started:
            self._arm_sync()

    def stop(self) -> None:
        """Flush and close every stream (consumers first) and stop timers."""
        self.started = False
        if self._sync_timer is not None:
            self._sync_timer.cancel()
            self._sync_timer = None
        streams = sum(len(acc.streams) for acc in self.accounts.values())
        with one_sync_for(self.store_dir, streams):  # one filesystem sync, not two fsyncs per stream (issue 31)
            for acc in list(self.accounts.values()):
                acc.stop()

    def resources_exceeded(self, storage: str) -> None:
        """A publish was refused for the server-wide limit: log it, at most every 10 s (as the
        reference's resourcesExceededError)."""
        now = self.clock.monotonic_ns()
        if self._exceeded_logged_at is None or now - self._exceeded_logged_at > 10 * 10**9:
            self._exceeded_logged_at = now
            log.error("JetStream %s resource limits exceeded for server", "memory" if storage == "memory" else "file")

    def reserved(self) -> tuple[int, int]:
        mem = fil = 0
        for acc in self.accounts.values():
            m, f = acc.reserved()
            mem += m
            fil += f
        return mem, fil

    # -- /jsz ------------------------------------------------------------------------------------
    def jsz(self, query: dict | None = None) -> dict:
        """The ``/jsz`` JSON as nats-server 2.15 shapes it. ``query`` keys (strings): ``accounts``,
        ``streams``, ``consumers``, ``config`` (truthy "1"/"true"), ``acc`` (one account)."""
        q = query or {}

        def flag(k: str) -> bool:
            return str(q.get(k, "")).lower() in ("1", "true", "yes")

        want_streams = flag("streams")
        want_consumers = flag("consumers")
        want_accounts = flag("accounts") or want_streams or want_consumers
        want_config = flag("config")
        only_acc = q.get("acc") or q.get("account") or ""

        mem = fil = 0
        total_api = total_err = 0
        streams = consumers = 0
        msgs = nbytes = 0
        for acc in self.accounts.values():
            m, f = acc.usage()
            mem += m
            fil += f
            total_api += acc.api_stats.total
            total_err += acc.api_stats.errors
            streams += len(acc.streams)
            consumers += acc.num_consumers()
            for s in acc.streams.values():
                st = s.store.state()
                msgs += st.msgs
                nbytes += st.bytes
        rmem, rfil = self.reserved()
        out: dict = {
            "memory": mem,
            "storage": fil,
            "reserved_memory": rmem,
            "reserved_storage": rfil,
            "accounts": len(self.accounts),
            "ha_assets": 0,
            "api": {"level": JS_API_LEVEL, "total": total_api, "errors": total_err},
            "server_id": self.server_id,
            "now": rfc3339(self.clock.time_ns()),
            "config": self.config_json(),
            "limits": {"default_max_consumers": 1000},
            "streams": streams,
            "consumers": consumers,
            "messages": msgs,
            "bytes": nbytes,
        }
        if want_accounts:
            details = []
            for acc in sorted(self.accounts.values(), key=lambda a: a.name):
                if only_acc and acc.name != only_acc:
                    continue
                details.append(self._account_detail(acc, want_streams, want_consumers, want_config))
            out["account_details"] = details
        out["total"] = len(self.accounts)
        from natsd.jetstream.features.metadata import advertised  # loaded on first use (issue 26, start-up time)

        out["natsd"] = advertised()  # natsd's own features (issue 27); monitors ignore the field
        return out

    def config_json(self) -> dict:
        cfg: dict = {
            "max_memory": self.max_memory,
            "max_storage": self.max_store,
            "store_dir": self.store_dir,
            "sync_interval": self.sync_interval_ns,
        }
        if self.sync_always:
            cfg["sync_always"] = True
        if self.domain:
            cfg["domain"] = self.domain
        cfg["strict"] = True
        return cfg

    def _account_detail(self, acc: JsAccount, want_streams: bool, want_consumers: bool, want_config: bool) -> dict:
        mem, fil = acc.usage()
        lim = acc.limits
        unlimited = lim is None or (lim.max_memory < 0 and lim.max_storage < 0)
        rmem, rfil = acc.reserved()
        d: dict = {
            "name": acc.name,
            "id": acc.name,
            "memory": mem,
            "storage": fil,
            "reserved_memory": _UNLIMITED_RESERVED if unlimited else rmem,
            "reserved_storage": _UNLIMITED_RESERVED if unlimited else rfil,
            "accounts": 0,
            "ha_assets": 0,
            "api": {"level": 0, "total": acc.api_stats.total, "errors": acc.api_stats.errors},
        }
        if want_streams:
            sd = []
            for s in sorted(acc.streams.values(), key=lambda x: x.name):
                item: dict = {"name": s.name, "created": rfc3339(s.created_ns), "cluster": {"leader": self.server_name}}
                if want_config:
                    item["config"] = s.config.to_json()
                item["state"], _, _, _ = s.state_json()
                if want_consumers:
                    cd = []
                    for c in s.all_consumers().values():
                        try:
                            ci = dict(c.jsz_info())
                        except Exception:  # one broken consumer must not break /jsz
                            continue
                        ci.pop("type", None)
                        if not want_config:
                            ci.pop("config", None)
                        cd.append(ci)
                    if cd:
                        item["consumer_detail"] = cd
                sd.append(item)
            if sd:
                d["stream_detail"] = sd
        return d
