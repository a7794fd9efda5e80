"""The key files of an encrypted store (natsd.store.file.encryption), without ``cryptography``:
the store's modules import this one, so a server without ``jetstream { key }`` never loads the
cipher library (~20 ms and its native module at start-up).

``meta.key`` (a stream's or consumer's wrapped seed, beside its ``meta.inf``) and
``msgs/<n>.key`` (block ``n``'s) hold ``nonce || AEAD(kek).seal(seed)``: see
natsd.store.file.encryption for the bytes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from natsd.store.base import StoreKeyError
from natsd.store.file.layout import META_FILE

if TYPE_CHECKING:
    from natsd.store.file.encryption import AccountKeys, AssetKey

__all__ = ["KEY_FILE", "block_key_name", "open_asset_key"]

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
    stored unencrypted and a key is configured (natsd does not encrypt existing data in place:
    a backup restored into the encrypted server does it)."""
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
            f"natsd does not encrypt existing data in place (back it up and restore it)"
        )
    os.makedirs(directory, exist_ok=True)
    return keys.create(path, context, fsync=fsync)
