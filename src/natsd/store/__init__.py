"""Persistence: the StreamStore/ConsumerStore seam (``base``), the sequence index both stream stores
share (``seqindex``), memory and file implementations.

``open_stream_store`` is the one entry point the JetStream layer needs; it picks the
implementation from ``config.storage``.
"""

from __future__ import annotations

import logging
import os
from types import ModuleType
from typing import TYPE_CHECKING

# The seam's types and the memory store load with the first stream (or the first name asked
# for), not with the JetStream start of an empty store (issue 26, start-up time):
# ``__getattr__`` below.
if TYPE_CHECKING:
    from natsd.store.base import (
        ConsumerState,
        ConsumerStore,
        CorruptState,
        DiscardPolicy,
        MaxBytes,
        MaxMsgs,
        MaxMsgsPerSubject,
        MsgNotFound,
        Pending,
        SequencePair,
        SimpleState,
        StorageType,
        StorageUpdateHandler,
        StoreClosed,
        StoreConfig,
        StoreEOF,
        StoreError,
        StoreFull,
        StoreKeyError,
        StoreMsg,
        StoreWriteError,
        MsgRun,
        StreamState,
        StreamStore,
    )
    from natsd.store.memory import MemoryConsumerStore, MemoryStreamStore, mem_store_msg_size
    from natsd.store.file.encryption import AccountKeys, Encryption

__all__ = [
    "open_stream_store",
    "list_stream_dirs",
    "load_stream_meta",
    "peek_stream",
    "peek_consumers_idle",
    "store_encryption",
    "DEFAULT_SYNC_INTERVAL_NS",
    "MemoryStreamStore",
    "MemoryConsumerStore",
    "mem_store_msg_size",
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
    "StoreKeyError",
]

#: The reference's default ``sync_interval`` (2 minutes).
DEFAULT_SYNC_INTERVAL_NS = 120 * 10**9


def open_stream_store(
    config: StoreConfig,
    clock,
    directory: str | None = None,
    sync_interval_ns: int = DEFAULT_SYNC_INTERVAL_NS,
    sync_always: bool = False,
    **file_options,
) -> StreamStore:
    """Open (or create) the store of one stream.

    ``config.storage == "memory"`` gives a :class:`MemoryStreamStore` (``directory`` ignored).
    ``"file"`` opens/creates a :class:`natsd.store.file.FileStreamStore` in ``directory`` (the
    stream's own directory, e.g. ``<store_dir>/jetstream/<account>/streams/<stream>``), recovering
    whatever is there. ``sync_always`` makes ``flush()`` also fsync (``sync_interval: always``);
    otherwise the owner calls ``sync()`` every ``sync_interval_ns``. ``file_options`` are passed to
    the file store (``block_size``, ``keys`` to encrypt it, ...); ``threaded_writes=True`` lets it write big batches on
    the process's writer thread when that is enabled (``flush_async``, natsd.store.file.writer).
    """
    if config.storage == "memory":  # (StorageType.MEMORY, a StrEnum)
        from natsd.store.memory import MemoryStreamStore

        return MemoryStreamStore(config, clock)
    if directory is None:
        raise ValueError("a file store needs a directory")
    from natsd.store.file import FileStreamStore

    if file_options.pop("threaded_writes", False):
        from natsd.store.file import writer

        if writer.THRESHOLD > 0:  # (off by default: see natsd.store.file.writer.THRESHOLD)
            file_options["writer"] = writer.shared_writer()
    return FileStreamStore(
        config, clock, directory, sync_interval_ns=sync_interval_ns, sync_always=sync_always, **file_options
    )


def peek_stream(
    directory: str, name: str, first_seq: int = 1
) -> tuple[StreamState, list[int], list[tuple[str, str]]] | None:
    """(state, sequences lost at earlier recoveries, every consumer's (name, facts):
    natsd.store.file.peek.peek_consumer_facts) of the plain file
    stream ``name`` in ``directory``, read without opening its store, when its ``index.db`` is
    exactly current (natsd.store.file.peek); None when only a full recovery can tell. ``first_seq``:
    the stream's configured first sequence (a stream that never wrote a block starts there)."""
    peek = _peek()
    got = peek.peek_stream_state(directory, first_seq)
    if got is None:
        return None
    consumers = peek.peek_consumer_facts(directory, name)
    return None if consumers is None else (got[0], got[1], consumers)


def _peek() -> ModuleType:
    from natsd.store.file import peek  # (after a kill -9 only)

    return peek


def peek_consumers_idle(directory: str, names: list[str]) -> set[str]:
    """Those of the consumers ``names`` of the plain file stream in ``directory`` whose state has
    nothing pending and needs no repair (natsd.store.file.peek.peek_consumers_idle)."""
    return _peek().peek_consumers_idle(directory, names)


def store_encryption(cipher: str, key: str, prev_key: str = "") -> Encryption | None:
    """The server's encryption at rest (``jetstream { cipher, key, prev_key }``), None without a
    key. ``cryptography`` is loaded here, only for a server that asks for encryption."""
    if not key:
        return None
    from natsd.store.file.encryption import Encryption, StoreCipher

    return Encryption(StoreCipher(cipher), key, prev_key)


def load_stream_meta(directory: str, keys: AccountKeys | None = None, settle: bool = True) -> dict | None:
    """The verified ``meta.inf`` of the stream stored in ``directory`` (the dict that was given
    as ``StoreConfig.meta``), or None (logged) when it is missing or fails its checksum. The
    checksum is keyed with the stream name, which is the directory's name. ``keys``: the
    account's encryption keys (natsd.store.file.encryption); StoreKeyError (not caught here)
    when they do not open the stream, or the stream's encryption and the configuration disagree.
    ``settle=False``: the caller's listing of the streams directory (``list_stream_dirs``) showed
    no encryption in place cut for this stream, so its leftovers are not looked for (two stats a
    stream at every start)."""
    from natsd.store.file.keyfiles import needs_encryption, open_asset_key, read_meta, settle_conversion

    name = os.path.basename(os.path.normpath(directory))
    try:
        if settle:
            settle_conversion(directory)  # (an encryption in place a crash cut: natsd.store.file.encrypt_plain)
        if keys is not None and needs_encryption(directory, keys):
            # Stored before the server had a key: encrypted now, as nats-server does (safely).
            from natsd.store.file.encrypt_plain import encrypt_stream_dir

            encrypt_stream_dir(directory, keys, name)
        what = f"stream {name!r}"
        if keys is None:
            # A plain server looks for a meta.key only when meta.inf does not read as plain (an
            # encrypted stream's does not), not for every stream at every start.
            try:
                return read_meta(directory, name)
            except Exception:
                open_asset_key(directory, None, name, what)  # StoreKeyError when it has a key
                raise
        return read_meta(directory, name, open_asset_key(directory, keys, name, what))
    except FileNotFoundError:
        return None
    except Exception as exc:
        from natsd.store.base import CorruptState

        if not isinstance(exc, CorruptState):
            raise
        logging.getLogger("natsd.store").error("%s", exc)
        return None


def list_stream_dirs(account_dir: str, cut: set[str] | None = None) -> list[str]:
    """Stream directories under ``<account_dir>/streams`` that hold a stream config (``meta.inf``),
    sorted by name, for recovery at start-up. Missing directory -> ``[]``. ``cut``: gets the names
    of the streams with an encryption in place a crash cut (``load_stream_meta`` settles them)."""
    streams = os.path.join(account_dir, "streams")
    try:
        names = sorted(os.listdir(streams))
    except FileNotFoundError:
        return []
    out = []
    if cut is None:
        cut = set()
    for name in names:
        if name.startswith(".") and name.endswith((".enc", ".plain")):
            # ".<stream>.enc"/".<stream>.plain": an encryption in place a crash cut (stream names
            # have no "."); load_stream_meta settles it (natsd.store.file.encrypt_plain).
            cut.add(name[1:].rsplit(".", 1)[0])
            continue
        d = os.path.join(streams, name)
        if os.path.isfile(os.path.join(d, "meta.inf")):
            out.append(d)
    out += [os.path.join(streams, n) for n in cut if os.path.join(streams, n) not in out]
    return sorted(out)


_LAZY = {
    "MemoryStreamStore": "memory",
    "MemoryConsumerStore": "memory",
    "mem_store_msg_size": "memory",
}


def __getattr__(name: str) -> object:
    # The names of natsd.store.base and natsd.store.memory this package re-exports, imported on
    # first use (issue 26, start-up time: see above).
    if name in __all__:
        import importlib

        value = getattr(importlib.import_module(f"natsd.store.{_LAZY.get(name, 'base')}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
