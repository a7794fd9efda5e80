"""On-disk names and limits of the file store, in one place.

A stream's directory (``<store_dir>/jetstream/<account>/streams/<stream>/``, as the reference)::

    meta.inf              the stream's config, JSON (``StoreConfig.meta``)
    meta.sum              hex checksum of meta.inf (see natsd.store.file.meta)
    msgs/<n>.blk          message blocks, n = 1, 2, 3 ... append-only (natsd.store.file.record)
    msgs/index.db         snapshot of the in-memory index for fast restart (natsd.store.file.index)
    obs/<consumer>/meta.inf, meta.sum   the consumer's config
    obs/<consumer>/o.dat  the consumer's state (natsd.store.file.consumer_state)
    obs.idx               what a restart after a kill -9 needs of each consumer's meta.inf
                          (plain streams; natsd.store.file.consumer_index)

``msgs/`` and a block's file are created by the block's first write (natsd.store.file.block,
``make``): a new stream, or one that never stored anything, is its directory with ``meta.inf`` and
``meta.sum`` only (``obs/`` comes with its first consumer). A stream directory without ``msgs/`` is an
empty stream, not a damaged one.

An encrypted store (``jetstream { cipher, key }``, natsd.store.file.encryption) adds the wrapped
keys, as the reference names them: ``meta.key`` beside a stream's and a consumer's ``meta.inf``,
``msgs/<n>.key`` beside each block; the other files keep their names, their bytes encrypted.
"""

from __future__ import annotations

from natsd.atomicfile import TMP_SUFFIX  # what natsd.atomicfile leaves behind on a crash

__all__ = [
    "MSGS_DIR",
    "OBS_DIR",
    "META_FILE",
    "META_SUM_FILE",
    "INDEX_FILE",
    "CONSUMER_STATE_FILE",
    "CONSUMER_INDEX_FILE",
    "BLOCK_SUFFIX",
    "block_file_name",
    "parse_block_file_name",
    "DEFAULT_BLOCK_SIZE",
    "MAX_RECORD_SIZE",
    "DEFAULT_INDEX_INTERVAL_NS",
    "TMP_SUFFIX",
]

MSGS_DIR = "msgs"
OBS_DIR = "obs"
META_FILE = "meta.inf"
META_SUM_FILE = "meta.sum"
INDEX_FILE = "index.db"
CONSUMER_STATE_FILE = "o.dat"
CONSUMER_INDEX_FILE = "obs.idx"
BLOCK_SUFFIX = ".blk"

#: Blocks roll over at this size (the reference's defaultLargeBlockSize).
DEFAULT_BLOCK_SIZE = 8 * 1024 * 1024
#: A record claiming to be larger than this is corrupt (the reference's rlBadThresh).
MAX_RECORD_SIZE = 32 * 1024 * 1024
#: index.db is rewritten by sync() at most this often (the reference: every 2 minutes) and on stop().
DEFAULT_INDEX_INTERVAL_NS = 120 * 10**9


def block_file_name(block_id: int) -> str:
    return f"{block_id}{BLOCK_SUFFIX}"


def parse_block_file_name(name: str) -> int | None:
    """Block id of ``<n>.blk``, None for any other name."""
    if not name.endswith(BLOCK_SUFFIX):
        return None
    stem = name[: -len(BLOCK_SUFFIX)]
    if not stem.isdigit():
        return None
    n = int(stem)
    return n if n > 0 else None
