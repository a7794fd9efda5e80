"""Stream and consumer configs on disk: ``meta.inf`` + ``meta.sum`` (as the reference).

``meta.inf`` holds the config as UTF-8 JSON (whatever dict the JetStream layer stores in
``StoreConfig.meta`` / the consumer's ``meta``). ``meta.sum`` holds the lowercase hex of a
64-bit BLAKE2b digest of ``meta.inf``'s exact bytes, keyed with the stream name (the reference
uses HighwayHash-64 keyed with sha256(stream name); the point is the same: a torn or edited
meta.inf is detected at start-up rather than half-read). Both files are replaced atomically:
written to ``*.tmp``, fsynced (with ``fsync``), renamed, then the directory is fsynced; in a
stream directory the create just made (``new``) they are written in place, meta.inf first.

Encrypted (``asset`` given, natsd.store.file.encryption): ``meta.inf`` holds
``nonce || AEAD(seed).seal(json)`` (the reference's layout, the seed's wrapped form beside it in
``meta.key``), and ``meta.sum`` is the checksum of those encrypted bytes.
"""

from __future__ import annotations

import json
import os

try:
    # the interpreter's BLAKE2 module, which hashlib's blake2b is, without hashlib loading OpenSSL's
    # digests with the first stream (issue 31)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover
    from hashlib import blake2b

# atomic_write/fsync_dir are natsd.atomicfile's; re-exported for the file store's modules
from natsd.atomicfile import atomic_write, fsync_dir, read_whole
from natsd.store.base import CorruptState
from natsd.store.file.layout import META_FILE, META_SUM_FILE
from natsd.protocolbase import Protocol


__all__ = ["meta_checksum", "new_stream_directory", "write_meta", "read_meta", "atomic_write", "fsync_dir"]


# meta.inf and meta.sum are read without an fstat: a first read of this many bytes holds them
# (a stream's meta with hundreds of subjects is still a few KiB; a bigger one is read on).
_META_GUESS = 1 << 16


class Sealer(Protocol):
    """An encrypted asset's key as the meta files use it (natsd.store.file.encryption.AssetKey:
    named by this protocol, so the key files' module can read metas without an import circle)."""

    def seal(self, plain: bytes | bytearray) -> bytes: ...

    def open(self, blob: bytes, what: str) -> bytes: ...


def meta_checksum(data: bytes, key: str) -> str:
    """Hex of the keyed 64-bit BLAKE2b digest of ``data`` (``key`` is the stream name)."""
    return blake2b(data, digest_size=8, key=key.encode()[:64]).hexdigest()


def new_stream_directory(directory: str) -> bool:
    """Create ``directory``; False (nothing made) when it is already there or its parent is not
    (the caller's usual path handles both). Its ``msgs/`` comes with the first block file."""
    try:
        os.mkdir(directory)
    except OSError:  # (FileExistsError, FileNotFoundError: see above)
        return False
    return True


def write_meta(
    directory: str, meta: dict, key: str, *, fsync: bool = True, asset: Sealer | None = None, new: bool = False
) -> None:
    """Write ``meta.inf`` (JSON) and ``meta.sum`` into ``directory`` atomically.

    ``fsync=False`` (streams and consumers that do not sync always, as nats-server's
    ``writeFileWithOptionalSync``: strace -c shows no fsync in its stream creates): the files
    reach the OS (write and rename, which is what a kill -9 cannot undo) but are not forced to
    the disk: three fsyncs cost more than the rest of a create together (issue 31).

    ``new``: ``directory`` was just created (:func:`new_stream_directory`): there is no old
    content to keep or compare, so each file is written in place. A crash between the two
    leaves a meta.inf without its checksum, which a start refuses as it refuses a torn one;
    the create had not answered yet."""
    data = json.dumps(meta, separators=(",", ":"), sort_keys=False).encode()
    if asset is not None:
        data = asset.seal(data)
    checksum = meta_checksum(data, key).encode()
    if new:
        _write_new(os.path.join(directory, META_FILE), data, fsync)
        _write_new(os.path.join(directory, META_SUM_FILE), checksum, fsync)
        if fsync:
            fsync_dir(directory)
        return
    os.makedirs(directory, exist_ok=True)
    if _on_disk(directory, data, checksum):
        # (An encrypted meta is sealed with a fresh nonce, so it never matches and is rewritten.)
        # A restart opens every stream with the meta it just read: rewriting the same bytes cost
        # three fsyncs and two renames per stream (most of a 1,000-stream restart, issue 31).
        # The files are already what a crash would find, so there is nothing to make durable.
        return
    atomic_write(os.path.join(directory, META_FILE), data, fsync=fsync)
    atomic_write(os.path.join(directory, META_SUM_FILE), checksum, fsync=fsync)
    if fsync:
        fsync_dir(directory)


def _write_new(path: str, data: bytes, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _on_disk(directory: str, data: bytes, checksum: bytes) -> bool:
    """Whether ``meta.inf`` and ``meta.sum`` in ``directory`` already hold exactly these bytes."""
    try:
        with open(os.path.join(directory, META_FILE), "rb") as f:
            if f.read(len(data) + 1) != data:
                return False
        with open(os.path.join(directory, META_SUM_FILE), "rb") as f:
            return f.read(len(checksum) + 1) == checksum
    except OSError:
        return False


def read_meta(directory: str, key: str, asset: Sealer | None = None, dir_fd: int | None = None) -> dict:
    """Read and verify ``meta.inf`` (decrypted with ``asset`` when given). Raises
    FileNotFoundError when absent and CorruptState when the checksum file is missing or does not
    match, the encryption's tag fails, or the JSON is not an object. ``dir_fd``: ``directory``
    is relative to that open directory (a caller reading many consumers' metas: the kernel walks
    two path components per file, not the whole store path)."""
    data = read_whole(os.path.join(directory, META_FILE), dir_fd, _META_GUESS)
    try:
        raw = read_whole(os.path.join(directory, META_SUM_FILE), dir_fd, _META_GUESS)
        want = raw.strip().decode("ascii", "replace")
    except FileNotFoundError:
        raise CorruptState(f"{directory}: {META_SUM_FILE} is missing") from None
    if meta_checksum(data, key) != want:
        raise CorruptState(f"{directory}: {META_FILE} does not match its checksum")
    if asset is not None:
        data = asset.open(data, f"{directory}: {META_FILE}")
    try:
        meta = json.loads(data)
    except ValueError as exc:
        raise CorruptState(f"{directory}: {META_FILE} is not valid JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise CorruptState(f"{directory}: {META_FILE} is not a JSON object")
    return meta
