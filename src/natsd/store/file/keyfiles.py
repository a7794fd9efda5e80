"""The key files of an encrypted store (natsd.store.file.encryption), without ``cryptography``:
the store's modules import this one, so a server without ``jetstream { key }`` never loads the
cipher library (~20 ms and its native module at start-up).

``meta.key`` (a stream's or consumer's wrapped seed, beside its ``meta.inf``) and
``msgs/<n>.key`` (block ``n``'s) hold ``nonce || AEAD(kek).seal(seed)``: see
natsd.store.file.encryption for the bytes.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from natsd.atomicfile import fsync_dir
from natsd.store.base import StoreKeyError
from natsd.store.file.layout import META_FILE
from natsd.store.file.meta import read_meta  # (re-exported: what natsd.store reads beside the key)

if TYPE_CHECKING:
    from natsd.store.file.encryption import AccountKeys, AssetKey

__all__ = [
    "KEY_FILE",
    "block_key_name",
    "open_asset_key",
    "read_meta",
    "conversion_paths",
    "settle_conversion",
    "needs_encryption",
]

log = logging.getLogger("natsd.store")

#: A stream's or consumer's wrapped seed (nats-server's JetStreamMetaFileKey).
KEY_FILE = "meta.key"


def block_key_name(block_id: int) -> str:
    """``<n>.key``: message block ``n``'s wrapped seed (the reference's keyScan)."""
    return f"{block_id}.key"


def open_asset_key(
    directory: str, keys: AccountKeys | None, context: str, what: str, *, fsync: bool = True
) -> AssetKey | None:
    """The key of the stream or consumer stored in ``directory`` (its ``meta.key``), created for
    a new one; None when the store is not encrypted. StoreKeyError, before anything is written,
    when the keys do not open it, when it is encrypted and no key is configured, or when it was
    stored unencrypted and a key is configured (a stream is encrypted before it is opened, see
    :func:`needs_encryption`; a consumer of an encrypted stream is never plain)."""
    path = os.path.join(directory, KEY_FILE)
    has_key = os.path.exists(path)
    if keys is None:
        if has_key:
            raise StoreKeyError(f"{what}: {path} says it is encrypted, but no encryption key is configured")
        return None
    if has_key:
        return keys.open(path, context, fsync=fsync)
    if os.path.exists(os.path.join(directory, META_FILE)):
        raise StoreKeyError(
            f"{what}: stored unencrypted in {directory}, but an encryption key is configured; "
            f"a plain asset inside an encrypted stream (damaged?)"
        )
    os.makedirs(directory, exist_ok=True)
    return keys.create(path, context, fsync=fsync)


# -- a stream stored unencrypted, encrypted in place (natsd.store.file.encrypt_plain) -----------

_ENC_SUFFIX = ".enc"  # .<name>.enc: the encrypted copy being built
_PLAIN_SUFFIX = ".plain"  # .<name>.plain: the plain stream, until the copy has replaced it

# (the renames and the removal: crash tests stop the settling there)
_rename = os.rename


def _rmtree(path: str) -> None:
    import shutil  # (shutil, with its compression modules, only when a copy is removed: ADR 0015)

    shutil.rmtree(path)


def needs_encryption(directory: str, keys: AccountKeys) -> bool:
    """Whether the stream in ``directory`` was stored unencrypted (and ``keys`` are configured)."""
    return not os.path.exists(os.path.join(directory, KEY_FILE)) and os.path.exists(os.path.join(directory, META_FILE))


def conversion_paths(directory: str) -> tuple[str, str, str]:
    """(the streams directory, ``.<name>.enc``, ``.<name>.plain``) of the stream in ``directory``."""
    parent, name = os.path.split(os.path.normpath(directory))
    return parent, os.path.join(parent, f".{name}{_ENC_SUFFIX}"), os.path.join(parent, f".{name}{_PLAIN_SUFFIX}")


def settle_conversion(directory: str) -> None:
    """Settle an encryption in place of the stream in ``directory`` that a crash cut (see
    natsd.store.file.encrypt_plain): between the two renames, the finished copy takes the
    stream's place; otherwise the stream is whole where it was and the leftovers go."""
    parent, enc, old = conversion_paths(directory)
    if not os.path.isdir(enc) and not os.path.isdir(old):
        return
    if not os.path.isdir(directory) and os.path.isdir(enc) and os.path.isdir(old):
        # (the plain stream is moved aside only once the copy is finished)
        _rename(enc, directory)
        fsync_dir(parent)
        log.warning("stream %s: encryption finished (it was interrupted)", os.path.basename(directory))
    if os.path.isdir(directory):
        for leftover in (enc, old):
            if os.path.isdir(leftover):
                _rmtree(leftover)
