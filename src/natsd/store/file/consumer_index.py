"""``obs.idx``: what a restart after a kill -9 needs of a stream's consumers, in one file (issue 31).

A stream that may start asleep after a kill -9 (natsd.jetstream.dormant.peek_asleep, ADR 0009)
must know, for every consumer, a few facts of its config (whether it may sleep with the stream,
whether it must be recovered as soon as the stream wakes). Reading them from each consumer's
verified meta.inf was two files, a checksum and a JSON parse per consumer: 100,000 consumers
cost ~5 s of CPU. This file keeps those facts per consumer, with the identity of the meta.inf
they were taken from, so the start reads one file per stream and makes one ``stat`` per consumer.

Where: ``<stream>/obs.idx`` (beside ``obs/``, whose entries are all consumers). Plain streams
only (an encrypted stream is never peeked). Its bytes, ASCII, one record per line::

    natsd-consumers 1 <FIELDS, comma-separated>\\n           the header, first line
    <crc> + <name> <ino> <size> <mtime_ns> <ctime_ns> <facts>\\n   consumer <name>'s meta.inf
    <crc> - <name>\\n                                          consumer <name> was deleted

``<crc>``: 8 lowercase hex digits, the CRC-32 (zlib's) of the rest of the line after its space.
``<ino> ... <ctime_ns>``: ``os.stat`` of ``obs/<name>/meta.inf`` taken *after* that file and its
meta.sum were written. ``<facts>``: :func:`facts_of` (JSON without a newline, the last field).
The last record of a name wins; a ``-`` drops it. A line without its newline (a torn append) or
whose CRC does not match is skipped; a file whose header differs (another version, another
field list) is not used at all.

Why it can never be trusted when stale: a record vouches only for the very file it was taken from.
Every meta.inf write makes a new file (a new consumer's first in place, the others renamed over the
old: natsd.store.file.meta), so a newer meta.inf has another inode, ctime and mtime than the record,
and the record is appended only after the write finished: a crash between the two (or an append that
failed, or any other program that rewrote the file) leaves a record that no longer matches, and the
reader falls back to reading that consumer's meta.inf. A consumer with no record (created by a
version that did not keep this file, or cut by a crash before its record) is read too; a record
whose consumer is gone is ignored. Nothing here is fsynced: a record is appended (``O_APPEND``, one
write) after the meta.inf write that it describes, whatever that write's durability was; after an OS
crash a record whose file reverted no longer matches either.

Upkeep: :class:`ConsumerIndex` appends a record when a consumer's meta is written (create,
update, pause) or deleted, and compacts the file (keeps the last record of each name, atomic
replace) when it grows past twice its size at the last compaction (at least 256 KiB). The start
after a kill -9 that had to read some meta.inf files (or found records of consumers gone)
rewrites it whole with what it read (natsd.store.file.peek.peek_consumer_facts), so a store kept
by an older version gets the file at its first such start.
"""

from __future__ import annotations

import json
import os
import zlib

from natsd.atomicfile import atomic_write, read_whole
from natsd.store.file.layout import CONSUMER_INDEX_FILE, META_FILE, OBS_DIR

__all__ = ["FIELDS", "ConsumerIndex", "facts_of", "read_index", "write_index", "signature"]

#: The consumer config fields the sleep decisions read (natsd.jetstream.dormant.consumer_can_sleep,
#: config_must_wake): :func:`facts_of` keeps these and nothing else. They are written in the
#: header: a version of natsd that decides from other fields does not use an older file.
FIELDS = (
    "durable_name",
    "mem_storage",
    "deliver_subject",
    "inactive_threshold",
    "pause_until",
    "metadata",
    "priority_policy",
    "priority_groups",
    "replay_policy",
    "deliver_policy",
)
#: Only these metadata keys decide anything (natsd's own features).
_METADATA_PREFIX = "natsd."
HEADER = b"natsd-consumers 1 " + ",".join(FIELDS).encode() + b"\n"
#: The file is compacted when it grows past this, or twice its size at the last compaction.
COMPACT_MIN = 256 * 1024

Signature = tuple[int, int, int, int]


def signature(st: os.stat_result) -> Signature:
    """What identifies one meta.inf file: inode, size, mtime and ctime (ns)."""
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def facts_of(meta: dict) -> str:
    """The facts of a consumer's meta (``{"name", "config", ...}``) the sleep decisions need:
    JSON ``[named, config]``, ``named`` whether the meta names the consumer, ``config`` the
    :data:`FIELDS` present in its config (``durable_name`` as true/false, ``metadata`` reduced to
    its ``natsd.*`` keys) or null when it has no config object. Most consumers of a stream have
    the same facts, so a reader decides once per distinct string."""
    cfg = meta.get("config")
    sub: dict | None = None
    if isinstance(cfg, dict):
        sub = {}
        for k in FIELDS:
            if k in cfg:
                v = cfg[k]
                if k == "durable_name":
                    v = bool(v)
                elif k == "metadata" and isinstance(v, dict):
                    v = {mk: mv for mk, mv in v.items() if isinstance(mk, str) and mk.startswith(_METADATA_PREFIX)}
                sub[k] = v
    return json.dumps([isinstance(meta.get("name"), str), sub], separators=(",", ":"), sort_keys=True)


def _line(body: bytes) -> bytes:
    return b"%08x %s\n" % (zlib.crc32(body), body)


def _put(name: str, sig: Signature, facts: str) -> bytes:
    return _line(f"+ {name} {sig[0]} {sig[1]} {sig[2]} {sig[3]} {facts}".encode())


def read_index(directory: str) -> tuple[dict[str, tuple[Signature, str]], int]:
    """(the live records of the stream in ``directory``: name -> (signature, facts), the number
    of records read); ({}, 0) when the file is absent, unreadable or of another header."""
    try:
        data = read_whole(os.path.join(directory, CONSUMER_INDEX_FILE))
    except OSError:
        return {}, 0
    if not data.startswith(HEADER):
        return {}, 0
    lines = data[len(HEADER) :].split(b"\n")
    lines.pop()  # (b"" after the last newline, or a torn append: skipped)
    out: dict[str, tuple[Signature, str]] = {}
    crc = zlib.crc32
    n = 0
    for line in lines:
        body = line[9:]
        try:
            if int(line[:8], 16) != crc(body):
                continue
            parts = body.decode("ascii").split(" ", 6)
            if parts[0] == "+":
                out[parts[1]] = ((int(parts[2]), int(parts[3]), int(parts[4]), int(parts[5])), parts[6])
            elif parts[0] == "-":
                out.pop(parts[1], None)
            else:
                continue
        except (ValueError, IndexError, UnicodeDecodeError):
            continue
        n += 1
    return out, n


def write_index(directory: str, records: dict[str, tuple[Signature, str]]) -> None:
    """Replace the file with ``records`` (tmp + rename, not fsynced: see the module docstring)."""
    atomic_write(
        os.path.join(directory, CONSUMER_INDEX_FILE),
        HEADER + b"".join(_put(n, sig, facts) for n, (sig, facts) in records.items()),
        fsync=False,
    )


class ConsumerIndex:
    """Keeps ``obs.idx`` of the plain stream in ``directory`` as its consumers' metas change."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._path = os.path.join(directory, CONSUMER_INDEX_FILE)
        self._obs = os.path.join(directory, OBS_DIR)
        self._compacted = 0  # the file's size after the last compaction (this process's)

    def noted(self, name: str, meta: dict) -> None:
        """Consumer ``name``'s meta.inf now holds ``meta`` (called after the write)."""
        try:
            sig = signature(os.stat(os.path.join(self._obs, name, META_FILE)))
        except OSError:
            self.drop()
            return
        self._append(_put(name, sig, facts_of(meta)))

    def deleted(self, name: str) -> None:
        """Consumer ``name``'s directory was removed."""
        self._append(_line(f"- {name}".encode()))

    def _append(self, line: bytes) -> None:
        try:
            fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                size = os.fstat(fd).st_size
                if not size:
                    line = HEADER + line
                os.write(fd, line)  # (one write: a kill -9 leaves all of it or none)
            finally:
                os.close(fd)
        except OSError:
            self.drop()
            return
        if size > max(COMPACT_MIN, 2 * self._compacted):
            self.compact()

    def compact(self) -> None:
        """Keep the last record of each consumer (a record that no longer matches its file stays
        as it is: the reader checks it anyway)."""
        records, _ = read_index(self.directory)
        try:
            write_index(self.directory, records)
            self._compacted = os.stat(self._path).st_size
        except OSError:
            self.drop()

    def drop(self) -> None:
        """A record could not be written: remove the file (every meta.inf is read at the next
        start after a kill -9, which writes it again). The record it misses would not be
        trusted (its file's identity changed), but a deletion's record keeps a name's old
        record from matching a file made later with the same inode and times."""
        try:
            os.unlink(self._path)
        except OSError:
            pass
