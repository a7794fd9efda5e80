"""Encrypting a stream stored unencrypted, in place, when the server now has a key.

nats-server does it when a stream directory has no ``meta.key`` and ``jetstream { key }`` is
set (filestore.go: ``writeStreamMeta`` then, block by block, ``convertToEncrypted``), overwriting
each block where it is. natsd does the same conversion, crash-safe:

1. ``streams/.<name>.enc/`` is built beside the stream: new keys (``meta.key``, ``msgs/<n>.key``,
   ``obs/<c>/meta.key``), ``meta.inf`` sealed, each block XORed with its key stream (the form
   natsd.store.file.encryption documents, a compressed block under its compressed key stream),
   the consumers' ``meta.inf`` and state files (``o.dat``, journals) encrypted, every file and directory
   fsynced. ``msgs/index.db`` is left out: recovery rebuilds it from the blocks.
2. ``streams/<name>`` is renamed ``streams/.<name>.plain``, ``.<name>.enc`` renamed
   ``<name>``, the parent fsynced, then ``.<name>.plain`` removed.

Stream names never contain ``.``, so neither directory is ever taken for a stream. A crash
leaves one of three states, which ``natsd.store.file.keyfiles.settle_conversion`` settles when
the stream is next opened (``natsd.store.list_stream_dirs`` lists a stream whose directory is
between the two renames): ``<name>`` and ``.<name>.enc`` (the copy was not finished: the copy goes, the plain
stream is converted again); ``.<name>.enc`` and ``.<name>.plain`` without ``<name>`` (between the
two renames: the finished copy takes its place); ``<name>`` and ``.<name>.plain`` (the old copy
goes). At no point is the only copy of a message being rewritten, and the stream's data is never
half plain, half encrypted.

The whole stream is read once and written once (block by block: one block in memory at a time).
"""

from __future__ import annotations

import logging
import os
import shutil

from natsd.atomicfile import fsync_dir
from natsd.store.file.compress import is_compressed
from natsd.store.file.consumer_state import JOURNAL_FILE, JOURNAL_OLD_FILE
from natsd.store.file.keyfiles import KEY_FILE, block_key_name, conversion_paths
from natsd.store.file.layout import (
    CONSUMER_STATE_FILE,
    MSGS_DIR,
    OBS_DIR,
    META_FILE,
    parse_block_file_name,
)
from natsd.store.file.encryption import AccountKeys
from natsd.store.file.meta import read_meta, write_meta

__all__ = ["encrypt_stream_dir"]

log = logging.getLogger("natsd.store")

# The renames and the removal go through these names (crash tests stop the conversion there).
_rename = os.rename
_rmtree = shutil.rmtree


def encrypt_stream_dir(directory: str, keys: AccountKeys, name: str) -> None:
    """Encrypt the stream stored unencrypted in ``directory`` (with its consumers) under ``keys``,
    replacing it in one step. CorruptState when its ``meta.inf`` fails its checksum (nothing is
    changed then)."""
    parent, enc, old = conversion_paths(directory)
    if os.path.isdir(enc):
        _rmtree(enc)  # an unfinished copy (finish_interrupted removes it too)
    meta = read_meta(directory, name)  # (verified before anything is written)
    log.warning("stream %s: stored unencrypted and a key is configured: encrypting it", name)
    os.makedirs(os.path.join(enc, MSGS_DIR))
    asset = keys.create(os.path.join(enc, KEY_FILE), name)
    write_meta(enc, meta, name, asset=asset)
    blocks = _encrypt_blocks(os.path.join(directory, MSGS_DIR), os.path.join(enc, MSGS_DIR), keys, name)
    consumers = _encrypt_consumers(os.path.join(directory, OBS_DIR), os.path.join(enc, OBS_DIR), keys, name)
    fsync_dir(enc)
    _rename(directory, old)
    _rename(enc, directory)
    fsync_dir(parent)
    _rmtree(old)
    log.warning("stream %s: encrypted (%d blocks, %d consumers)", name, blocks, consumers)


def _write(path: str, data: bytes | bytearray) -> None:
    """A new file of the copy, on the disk before the copy can replace the stream."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _encrypt_blocks(src: str, dst: str, keys: AccountKeys, name: str) -> int:
    n = 0
    for entry in sorted(os.listdir(src)) if os.path.isdir(src) else ():
        bid = parse_block_file_name(entry)
        if bid is None:
            continue  # index.db (rebuilt by recovery), *.tmp leftovers
        with open(os.path.join(src, entry), "rb") as f:
            data = f.read()
        ks = keys.create(os.path.join(dst, block_key_name(bid)), f"{name}:{bid}").keystream()
        if is_compressed(data[:8]):
            ks = ks.compressed  # (a compressed block has a key stream of its own)
        _write(os.path.join(dst, entry), ks.xor(data, 0))
        n += 1
    fsync_dir(dst)
    return n


def _encrypt_consumers(src: str, dst: str, keys: AccountKeys, name: str) -> int:
    n = 0
    for consumer in sorted(os.listdir(src)) if os.path.isdir(src) else ():
        cdir = os.path.join(src, consumer)
        if not os.path.isfile(os.path.join(cdir, META_FILE)):
            continue  # (not a consumer: the store lists only directories with a meta.inf)
        out = os.path.join(dst, consumer)
        os.makedirs(out)
        asset = keys.create(os.path.join(out, KEY_FILE), f"{name}.{consumer}")
        write_meta(out, read_meta(cdir, name), name, asset=asset)
        for state in (CONSUMER_STATE_FILE, JOURNAL_OLD_FILE, JOURNAL_FILE):
            try:
                with open(os.path.join(cdir, state), "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            # Each state file: a fresh nonce, then its bytes under that nonce's key stream.
            nonce = os.urandom(asset.cipher.nonce_size)
            _write(os.path.join(out, state), nonce + asset.keystream(nonce).xor(data, 0))
        fsync_dir(out)
        n += 1
    if n:
        fsync_dir(dst)
    return n
