"""Store test fixtures: one factory per implementation, so every conformance check runs on both."""

from __future__ import annotations

import os
import tempfile

import pytest

from natsd.store import open_stream_store
from natsd.store.base import StorageType, StoreConfig
from natsd.store.file.encryption import Encryption, StoreCipher


class MemoryFactory:
    """Memory stores: nothing persists, so ``reopen`` is None."""

    def make(self, config: StoreConfig, clock):
        config.storage = StorageType.MEMORY
        return open_stream_store(config, clock)

    def reopen(self, store, clock):
        return None


class FileFactory:
    """File stores in fresh directories under ``root``; ``reopen`` reopens from disk after:

    - ``"stop"``: a clean stop (index.db written);
    - ``"crash"``: flush() then abandoning the files as kill -9 would (old or no index.db, the
      tail is replayed);
    - ``"noindex"``: a clean stop, then index.db deleted (full scan).

    ``compression="s2"``: the streams ask for compressed blocks, compressed as soon as they are
    sealed (``compress_inline``), so every check also reads, removes from, erases in, compacts
    and recovers compressed blocks.
    """

    def __init__(self, root: str, mode: str = "stop", compression: str = "none", **options) -> None:
        self.root = root
        self.mode = mode
        self.compression = compression
        if compression != "none":
            options["compress_inline"] = True
        self.options = options
        self.n = 0

    def make(self, config: StoreConfig, clock):
        self.n += 1
        config.storage = StorageType.FILE
        config.compression = self.compression
        d = os.path.join(self.root, f"s{self.n}")
        store = open_stream_store(config, clock, d, **self.options)
        store._conformance_dir = d
        if self.mode == "crash":
            store.write_index()
        return store

    def reopen(self, store, clock):
        if self.mode in ("crash", "noindex"):
            # Exercise block compaction on whatever the test left behind.
            store.flush()
            store.compact_blocks()
        if self.mode == "crash":
            store.flush()
            for cs in list(store._consumers.values()):
                cs.flush()
            store._abandon()
        else:
            store.stop()
        if self.mode == "noindex":
            try:
                os.unlink(os.path.join(store._conformance_dir, "msgs", "index.db"))
            except FileNotFoundError:
                assert not store._msgs_made  # (a stream that never wrote a block has no msgs/)
        again = open_stream_store(store.config, clock, store._conformance_dir, **self.options)
        again._conformance_dir = store._conformance_dir
        if self.mode == "crash":
            # A periodic index snapshot right away, so the next crash recovers from an index
            # that is older than the blocks (tail replay) rather than from a full scan.
            again.write_index()
        return again


def file_store_available() -> bool:
    try:
        import natsd.store.file as f

        return hasattr(f, "FileStreamStore")
    except ImportError:
        return False


def make_test_keys(cipher: StoreCipher, key: str = "conformance-key", account: str = "$G"):
    """An account's encryption keys for a test store."""
    return Encryption(cipher, key).for_account(account)


def make_factory(kind: str, root: str):
    if kind == "memory":
        return MemoryFactory()
    if not file_store_available():
        pytest.skip("file store not built yet")
    if kind == "file":
        return FileFactory(root)
    if kind == "file-small-blocks":
        return FileFactory(root, block_size=256)
    if kind == "file-crash":
        return FileFactory(root, mode="crash", block_size=512)
    if kind == "file-noindex":
        return FileFactory(root, mode="noindex", block_size=512)
    if kind == "file-s2":
        return FileFactory(root, block_size=512, compression="s2")
    if kind == "file-s2-crash":
        return FileFactory(root, mode="crash", block_size=512, compression="s2")
    if kind == "file-s2-noindex":
        return FileFactory(root, mode="noindex", block_size=512, compression="s2")
    # Encrypted at rest (natsd.store.file.encryption): both ciphers, through the crash and the
    # compression paths.
    if kind == "file-enc-crash":
        return FileFactory(root, mode="crash", block_size=512, keys=make_test_keys(StoreCipher.CHACHA))
    if kind == "file-enc-aes-s2-noindex":
        return FileFactory(root, mode="noindex", block_size=512, compression="s2", keys=make_test_keys(StoreCipher.AES))
    raise ValueError(kind)


@pytest.fixture(
    params=[
        "memory",
        "file",
        "file-small-blocks",
        "file-crash",
        "file-noindex",
        "file-s2",
        "file-s2-crash",
        "file-s2-noindex",
        "file-enc-crash",
        "file-enc-aes-s2-noindex",
    ]
)
def store_factory(request, tmp_path):
    """A StoreFactory for each implementation; the file store with default and tiny blocks (to
    cross block boundaries everywhere) and restarted cleanly, after a crash, or without index."""
    return make_factory(request.param, str(tmp_path))


@pytest.fixture(params=["memory", "file-small-blocks", "file-crash", "file-noindex", "file-s2-crash", "file-enc-crash"])
def random_factory(request, tmp_path):
    """Factories for the random-operation model tests (fewer kinds: these are the slow ones)."""
    return make_factory(request.param, str(tmp_path))


@pytest.fixture
def scratch_dir():
    """A temporary directory usable inside hypothesis examples (not function-scoped per example)."""
    with tempfile.TemporaryDirectory() as d:
        yield d
