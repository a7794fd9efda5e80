"""``schedules.db``: the pending message schedules of a file stream, for a fast restart.

Rebuilding the schedules means reading every stored message and parsing its schedule headers
(about 2 s per 100,000 pending schedules here); the reference keeps a snapshot of them for the same
reason (its ``msgs/`` scheduling state file). natsd writes this file when a stream stops cleanly,
*after* the stream's last flush, and reads it once at the next start:

- it is used only when the stream's store state at start (first sequence, last sequence, message
  count) is exactly the one recorded in it, so a store that changed after it was written (a torn
  tail dropped by recovery, a restore) falls back to the full rebuild;
- it is removed as soon as it was read (used or not, the directory fsynced), so a run killed with
  kill -9 after that never finds it again: its next start rebuilds from the messages. Sequence
  numbers can be reused after a truncation, so a snapshot that outlived its run could otherwise
  describe messages that are no longer those on disk;
- a checksum (zlib.crc32) guards the bytes: a damaged or truncated file is a full rebuild too.

What it holds is the in-memory state itself: for every pending schedule its subject, the
sequence of its schedule message and its next firing time (wall ns), so a repeating schedule
keeps its cadence across a clean restart (as the reference's snapshot does) and a firing time
in the past fires at once.

Layout (little-endian; the arrays are dumped with ``array.tobytes()``, swapped on big-endian)::

    "NSCH"       magic
    u32          version (1)
    3 x u64      first_seq, last_seq, msgs of the store when written
    u32          n, the number of pending schedules
    n x i64      next firing time, Unix ns
    n x u64      sequence of the schedule message
    n x u32      length of each subject in characters (code points)
    u32          length of the subjects blob in bytes
    bytes        the n subjects one after the other, UTF-8
    u32          zlib.crc32 of every preceding byte
"""

from __future__ import annotations

import logging
import os
import struct
import sys
import zlib
from array import array

from natsd.atomicfile import atomic_write, fsync_dir

__all__ = ["STATE_FILE", "encode_state", "decode_state", "write_state", "take_state"]

log = logging.getLogger("natsd.jetstream.schedules")

STATE_FILE = "schedules.db"
MAGIC = b"NSCH"
VERSION = 1
_HEAD = struct.Struct("<4sI3QI")
_U32 = struct.Struct("<I")
_BIG = sys.byteorder == "big"

#: (first_seq, last_seq, msgs) of the store, and the entries (when_ns, seq, subject).
Stamp = tuple[int, int, int]
Entry = tuple[int, int, str]


def _dump(kind: str, values: list[int]) -> bytes:
    a = array(kind, values)
    if _BIG:
        a.byteswap()
    return a.tobytes()


def _load(kind: str, data: bytes) -> array:
    a = array(kind)
    a.frombytes(data)
    if _BIG:
        a.byteswap()
    return a


def encode_state(stamp: Stamp, entries: list[Entry]) -> bytes:
    subjects = "".join(e[2] for e in entries).encode()
    body = b"".join(
        (
            _HEAD.pack(MAGIC, VERSION, *stamp, len(entries)),
            _dump("q", [e[0] for e in entries]),
            _dump("Q", [e[1] for e in entries]),
            _dump("I", [len(e[2]) for e in entries]),
            _U32.pack(len(subjects)),
            subjects,
        )
    )
    return body + _U32.pack(zlib.crc32(body))


def decode_state(data: bytes, names: dict[str, str] | None = None) -> tuple[Stamp, list[Entry]]:
    """The stamp and entries of a ``schedules.db``; ValueError when damaged or of another version.

    The entries are built in one pass, without intermediate objects that would outlive it (they
    would leave the allocator's arenas fragmented: ~20 MB more RSS for 100,000 schedules); a subject
    found in ``names`` is that string object (the store's own), and equal times share one int."""
    if len(data) < _HEAD.size + 8:
        raise ValueError("short file")
    (crc,) = _U32.unpack_from(data, len(data) - 4)
    if zlib.crc32(memoryview(data)[:-4]) != crc:
        raise ValueError("checksum mismatch")
    magic, version, first, last, msgs, n = _HEAD.unpack_from(data)
    if magic != MAGIC or version != VERSION:
        raise ValueError(f"not a schedules file of version {VERSION}")
    off = _HEAD.size
    end = off + 20 * n + 4
    if end > len(data) - 4:
        raise ValueError("truncated")
    whens = _load("q", data[off : off + 8 * n])
    seqs = _load("Q", data[off + 8 * n : off + 16 * n])
    lens = _load("I", data[off + 16 * n : off + 20 * n])
    (blen,) = _U32.unpack_from(data, off + 20 * n)
    if end + blen != len(data) - 4:
        raise ValueError("bad length")
    text = data[end : end + blen].decode()
    if sum(lens) != len(text):
        raise ValueError("subject lengths mismatch")
    shared = names if names is not None else {}
    times: dict[int, int] = {}
    out: list[Entry] = []
    append = out.append
    pos = 0
    for w, q, ln in zip(whens, seqs, lens):
        s = text[pos : pos + ln]
        pos += ln
        append((times.setdefault(w, w), q, shared.get(s, s)))
    return (first, last, msgs), out


def write_state(directory: str, stamp: Stamp, entries: list[Entry]) -> None:
    """Write ``<directory>/schedules.db`` atomically (tmp + fsync + rename + directory fsync)."""
    atomic_write(os.path.join(directory, STATE_FILE), encode_state(stamp, entries))
    fsync_dir(directory)


def take_state(directory: str) -> bytes | None:
    """Read and remove ``<directory>/schedules.db`` (None when absent): it is valid for one start."""
    path = os.path.join(directory, STATE_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:  # unreadable: the caller rebuilds from the messages
        log.warning("%s: %s; rebuilding the schedules from the messages", path, e)
        return None
    try:
        os.unlink(path)
    except OSError as e:
        # Left in place it could be found again after a later kill -9 and describe messages
        # that changed since: use it only if it can be removed.
        log.warning("%s could not be removed (%s); rebuilding the schedules from the messages", path, e)
        return None
    fsync_dir(directory)
    return data
