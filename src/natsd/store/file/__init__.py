"""The file store: append-only block files, a fast-restart index, consumer state files.

Modules: ``layout`` (names, limits), ``record`` (block record byte layout), ``block``
(MessageBlock), ``index`` (index.db), ``meta`` (meta.inf + meta.sum), ``consumer_state``
(o.dat and FileConsumerStore), ``stream_store`` (FileStreamStore), ``faults`` (failed writes,
damaged bytes at recovery).
"""

from natsd.store.file.consumer_state import FileConsumerStore, decode_consumer_state, encode_consumer_state
from natsd.store.file.meta import read_meta, write_meta
from natsd.store.file.record import file_store_msg_size
from natsd.store.file.stream_store import FileStreamStore, MsgCorrupt

__all__ = [
    "FileStreamStore", "FileConsumerStore", "MsgCorrupt", "file_store_msg_size", "read_meta", "write_meta",
    "encode_consumer_state", "decode_consumer_state",
]
