"""Restore: the upload of ``$JS.API.STREAM.RESTORE`` turned into a live stream.

:class:`RestoreReceiver` subscribes ``$JS.SNAPSHOT.RESTORE.<stream>.<id>`` (the restore reply's
``deliver_subject``). The client sends the archive there in chunks, each as a request::

    chunk           non-empty payload, reply required; acknowledged with an empty message once
                    parsed and applied to the new store
    end of upload   empty payload; its reply is the ``stream_create_response`` (or an error)

The first 8 bytes tell the format: a framed archive (S2 from nats-server 2.15, Snappy from
natsd, :mod:`natsd.jetstream.snapshot.s2`) or natsd's older bare archive (``NATSARC1``,
:mod:`natsd.jetstream.snapshot.archive`). Entries are applied as they arrive: ``state.json`` checks
that the stream could be added and that the backup's bytes fit the account's and the server's
limits, then opens the store (file storage: in a hidden ``.restore.*`` directory, renamed into
place only when complete, so a crash never leaves a half-restored stream); messages are stored
with their sequences and times (gaps stay deleted sequences; a message whose Nats-TTL has passed
keeps only its sequence). At the end the store becomes a stream of the account and every consumer entry is
recreated by :func:`restore_consumer`. Any error fails the restore with 10062
"restore failed: <reason>" and deletes the partial store; 5 s without a chunk fails it as stalled.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from typing import TYPE_CHECKING, Any, Callable

from natsd.jetstream import consumer_registry
from natsd.jetstream.config.consumer_config import ConsumerConfig
from natsd.jetstream.errors import ApiError, ApiErrors
from natsd.jetstream.config.constants import RESTORE_DIR_PREFIX
from natsd.jetstream.config.models import SECOND, StreamConfig
from natsd.jetstream.config.stream_checks import check_subject_overlap, refuse_unsupported
from natsd.jetstream.snapshot.archive import (
    MAGIC,
    ArchiveEntry,
    ArchiveError,
    ArchiveReader,
    consumer_state_from_json,
)
from natsd.jetstream.snapshot.s2 import S2StreamDecoder, is_framed
from natsd.nuid import nuid
from natsd.jetstream.stream.ingest import H_TTL
from natsd.jetstream.stream.core import parse_ttl, store_config_for
from natsd.jetstream.wire import dumps, error_envelope, resp
from natsd.protocol.headers import get_header_bytes
from natsd.store import open_stream_store

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.views import AccountView, StreamView

__all__ = ["RestoreReceiver", "restore_consumer", "remove_stale_restores", "RESTORE_DIR_PREFIX"]

log = logging.getLogger("natsd.jetstream.snapshot")

#: A restore with no chunk for this long fails as stalled (reference: 5 s).
RESTORE_STALL_NS = 5 * SECOND
RESTORE_PREFIX = "$JS.SNAPSHOT.RESTORE."


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

    def __init__(self, account: "AccountView", cfg: StreamConfig, on_done: Callable[[str], None] | None = None) -> None:
        self.account = account
        self.cfg = cfg
        self.name = cfg.name
        self.clock = account.clock
        self.ports = account.ports
        self.subject = f"{RESTORE_PREFIX}{cfg.name}.{nuid()}"
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
            self._fail(
                "", f"restore for stream '{self.account.name} > {self.name}' requires reply subject for each chunk"
            )
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
        except Exception as e:  # a store failure fails this restore only
            log.exception("restore of %s failed", self.name)
            self._fail(reply, str(e) or type(e).__name__)
            return
        self.ports.publish(reply, "", None, b"")

    def _feed(self, data: bytes) -> None:
        if not self._sniffed:
            # The first bytes tell the format: a (S2/Snappy) framed stream, as nats-server 2.15
            # and natsd send it, or natsd's older bare NATSARC1 archive. 8 bytes decide either.
            self._head += data
            if len(self._head) < len(MAGIC):
                return
            self._sniffed = True
            data, self._head = self._head, b""
            if is_framed(data):
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
        lim = acct.limits
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

        self._check_restore_size(st)
        eng = self.account.engine
        directory = self.account.stream_dir(self.name)
        if self.cfg.storage != "memory":
            if os.path.exists(directory):
                raise ArchiveError(f"stream directory {directory} already exists")
            # Upload into a hidden directory (recovery skips names starting with "."), renamed
            # to the stream's own directory only once complete: a crash mid-restore never leaves
            # a half-restored stream that would be recovered as a real one.
            directory = os.path.join(os.path.dirname(directory), f"{RESTORE_DIR_PREFIX}{self.name}.{nuid()}")
            self._tmp_dir = directory
        self._store = open_stream_store(
            store_config_for(self.cfg, self._created_ns),
            self.clock,
            directory,
            eng.sync_interval_ns,
            eng.sync_always,
            keys=eng.keys_for(self.account.name),
        )
        first = int(st.get("first_seq") or 0)
        if first > 1:
            # Start at the right sequence: this matters when the backup holds no messages.
            self._store.compact(first)
        self._lseq = max(first - 1, 0)

    def _store_msg(self, e: ArchiveEntry) -> None:

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
        if hdr and H_TTL in hdr:
            v = get_header_bytes(hdr, H_TTL)
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
            # Bytes were received (a framed upload cut inside its first frame decodes to
            # nothing yet): that is a truncated backup too, not an empty one.
            received = self._state is not None or self._sniffed or bool(self._head)
            self._fail(reply, "backup was truncated" if received else "no snapshot data received")
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
        except Exception as e:
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
        self._store = open_stream_store(
            store_config_for(self.cfg, self._created_ns),
            self.clock,
            final,
            eng.sync_interval_ns,
            eng.sync_always,
            keys=eng.keys_for(self.account.name),
        )

    def _activate(self) -> "StreamView":
        acct = self.account
        stream = acct.adopt_stream(self.cfg, self._store, self._created_ns)
        self._store = None
        for name, body in self._consumers:
            try:
                restore_consumer(stream, name, body)
            except (ApiError, ValueError, KeyError, TypeError) as e:
                log.warning(
                    "JetStream restore of '%s > %s': consumer %s not restored: %s", acct.name, self.name, name, e
                )
        return stream

    def _fail(self, reply: str, reason: str, err: ApiError | None = None) -> None:
        if self.done:
            return
        self._cleanup()
        if self._store is not None:
            try:
                self._store.delete()
            except Exception:
                log.debug("deleting the partial restore store failed", exc_info=True)
            self._store = None
        if self._tmp_dir:
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
            except Exception:
                pass
            self._sub = None

    def cancel(self) -> None:
        """Abort (server shutdown): drop the partial store."""
        self._fail("", "server shutdown")


def restore_consumer(stream: "StreamView", name: str, body: dict) -> None:
    """Recreate consumer ``name`` of a restored stream with its snapshot state (``body`` is the
    archive's ``consumers/<name>`` entry: ``{"config", "state"}``), through the one consumer path
    (:func:`natsd.jetstream.consumer_registry.restore`)."""
    consumer_registry.restore(
        stream, name, ConsumerConfig.from_json(body["config"]), consumer_state_from_json(body["state"])
    )


def remove_stale_restores(account: "AccountView") -> int:
    """Delete upload directories left by restores interrupted by a crash; returns how many."""
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
