"""The file store: append-only block files, a fast-restart index, consumer state files.

Modules: ``layout`` (names, limits), ``record`` (block record byte layout), ``block``
(MessageBlock), ``index`` (index.db), ``meta`` (meta.inf + meta.sum), ``consumer_state``
(o.dat and FileConsumerStore), ``stream_store`` (FileStreamStore: writes, removals,
durability), and its parts ``reads`` (checked reads, forward runs, column-wise decoding),
``recovery`` (index.db or a scan of every block at start, checksums, damaged bytes, torn-tail
truncation and the report of what was lost) and ``faults`` (failed writes).
"""

from typing import TYPE_CHECKING

from natsd.store.file.meta import read_meta, write_meta
from natsd.store.file.record import file_store_msg_size
from natsd.store.file.reads import MsgCorrupt
from natsd.store.file.stream_store import FileStreamStore

if TYPE_CHECKING:  # pragma: no cover
    from natsd.store.file.consumer_state import FileConsumerStore, decode_consumer_state, encode_consumer_state

__all__ = [
    "FileStreamStore",
    "FileConsumerStore",
    "MsgCorrupt",
    "file_store_msg_size",
    "read_meta",
    "write_meta",
    "encode_consumer_state",
    "decode_consumer_state",
]


def __getattr__(name: str) -> object:
    """The consumer state names on first use: a stream without consumers does not load
    ``consumer_state`` (issue 31)."""
    if name in ("FileConsumerStore", "decode_consumer_state", "encode_consumer_state"):
        from natsd.store.file import consumer_state

        return getattr(consumer_state, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
