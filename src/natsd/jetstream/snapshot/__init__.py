"""Stream snapshots and restores (``$JS.API.STREAM.SNAPSHOT`` / ``RESTORE``).

The API handlers (:mod:`natsd.jetstream.api.snapshot`) only validate requests; the work is here,
in four modules:

- :mod:`~natsd.jetstream.snapshot.archive`: the backup's byte format (``NATSARC1`` entries: the
  stream state, consumers, messages, an end entry), documented there; encoder and incremental
  decoder, no I/O.
- :mod:`~natsd.jetstream.snapshot.s2`: compression: the S2/Snappy framing around the archive
  (natsd sends it Snappy-framed, reads S2 and Snappy framing and its old unframed archives).
- :mod:`~natsd.jetstream.snapshot.transfer`: :class:`SnapshotSender`, the snapshot's chunk flow
  (chunks, ack replies, window, timeouts, final status).
- :mod:`~natsd.jetstream.snapshot.restore`: :class:`RestoreReceiver`, the restore upload (chunk
  requests and their acks, stall timer) applied to a new store and turned into a live stream with
  its consumers (:func:`restore_consumer`).

This package is the public face: other modules and the tests import these names from
``natsd.jetstream.snapshot``.
"""

from natsd.jetstream.snapshot.archive import (
    END_ENTRY,
    MAGIC,
    ArchiveEntry,
    ArchiveError,
    ArchiveReader,
    consumer_state_from_json,
    consumer_state_to_json,
    encode_entry,
    encode_uvarint,
    encode_varint,
    iter_archive,
)
from natsd.jetstream.snapshot.restore import RESTORE_DIR_PREFIX, RestoreReceiver, remove_stale_restores
from natsd.jetstream.snapshot.s2 import S2StreamDecoder, frame_archive, is_framed, s2_decode_block
from natsd.jetstream.snapshot.transfer import (
    ACK_TIMEOUT_NS,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_WINDOW_SIZE,
    STATUS_DONE,
    STATUS_NO_FLOW,
    STATUS_NO_INTEREST,
    SnapshotSender,
)

__all__ = [
    "MAGIC",
    "encode_uvarint",
    "encode_varint",
    "encode_entry",
    "END_ENTRY",
    "ArchiveReader",
    "ArchiveEntry",
    "ArchiveError",
    "iter_archive",
    "SnapshotSender",
    "RestoreReceiver",
    "consumer_state_to_json",
    "consumer_state_from_json",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_WINDOW_SIZE",
    "ACK_TIMEOUT_NS",
    "STATUS_DONE",
    "STATUS_NO_INTEREST",
    "STATUS_NO_FLOW",
    "remove_stale_restores",
    "S2StreamDecoder",
    "s2_decode_block",
    "frame_archive",
    "is_framed",
    "RESTORE_DIR_PREFIX",
]
