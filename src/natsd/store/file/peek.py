"""A plain file stream's state read from its files without opening the store (issue 31).

After a kill -9 there is no restart file (natsd.jetstream.dormant), so a stream could only start
asleep if its state can be known without the full :class:`~natsd.store.file.recovery.Recovery`.
It can when ``msgs/index.db`` is **exactly current**: it passes its checksum, every block it lists
is there, no other block is, and every block holds exactly the bytes it recorded (its size, and
its last 8 bytes at that size). Recovery would then adopt the snapshot and replay nothing: no
torn tail to cut (a write cut by the crash lies beyond the recorded size, so the block would
have grown), nothing lost, the state exactly the snapshot's. Anything else (a block that grew,
shrank or changed, a missing or extra block, a compressed or encrypted block, a leftover
``*.tmp``, a damaged index.db, or one above :data:`PEEK_MAX_INDEX`) answers None and the caller
recovers the stream at start as before, with its checksums, truncation and report of what was
lost.

A directory without ``msgs/`` is a stream that never wrote a block: empty, as recovery finds it.

What is read: the ``msgs/`` listing, index.db, and per block its size, first 8 bytes (a
compressed block is not compared here) and last 8; ``obs.idx`` and per consumer
(:func:`peek_consumer_facts`) a ``stat`` of its meta.inf, or the verified meta.inf when obs.idx
does not vouch for it; when the stream wakes, per consumer (:func:`peek_consumers_idle`) its
o.dat. The per-message arrays are decoded by :func:`decode_index` (whatever their layout) and
dropped: the store's recovery builds its own when the stream is first used.
"""

from __future__ import annotations

import os

from natsd.atomicfile import read_whole
from natsd.store.base import CorruptState, StreamState
from natsd.store.file.compress import is_compressed
from natsd.store.file.consumer_index import Signature, facts_of, read_index, signature, write_index
from natsd.store.file.consumer_state import JOURNAL_FILE, JOURNAL_OLD_FILE, VERSION, decode_snapshot
from natsd.store.file.index import decode_index
from natsd.store.file.layout import CONSUMER_STATE_FILE, INDEX_FILE, META_FILE, MSGS_DIR, OBS_DIR, parse_block_file_name
from natsd.store.file.meta import read_meta

__all__ = ["peek_stream_state", "peek_consumer_facts", "peek_consumers_idle", "PEEK_MAX_INDEX"]

#: A bigger index.db is not peeked (None): decoding it costs a good part of adopting it, which
#: its stream's first use would pay again (a 200,000-key bucket's is 14 MB: 0.04 s to decode,
#: 0.1 s to adopt), so such a stream is recovered at start.
PEEK_MAX_INDEX = 1 << 20


def peek_stream_state(directory: str, first_seq: int = 1) -> tuple[StreamState, list[int]] | None:
    """(state, the sequences earlier recoveries lost) of the plain stream in ``directory`` when its
    index.db is exactly current (see the module docstring), else None."""
    msgs = os.path.join(directory, MSGS_DIR)
    try:
        try:
            names = os.listdir(msgs)
        except FileNotFoundError:
            # No msgs/: a stream that never wrote a block (its first message makes it), which
            # recovery finds empty too. Its meta.inf is there (the caller read it), so this is
            # not a stream directory that is gone. Empty from the configured first sequence.
            first = first_seq or 1
            return StreamState(first_seq=first, last_seq=first - 1), []
        ids = set()
        for name in names:
            bid = parse_block_file_name(name)
            if bid is not None:
                ids.add(bid)
            elif name != INDEX_FILE:
                return None  # a key file (encrypted), a leftover *.tmp: the store's recovery decides
        data = read_whole(os.path.join(msgs, INDEX_FILE))
        if len(data) > PEEK_MAX_INDEX:
            return None
        snap = decode_index(data)
        if {b.id for b in snap.blocks} != ids:
            return None
        for info in snap.blocks:
            if not _holds(os.path.join(msgs, f"{info.id}.blk"), info.size, info.tail):
                return None
    except (OSError, CorruptState, ValueError):
        return None
    names_live = len(snap.snames) - snap.snames.count(None)
    st = StreamState(
        msgs=snap.msgs,
        bytes=snap.bytes,
        first_seq=snap.first,
        first_ts=snap.first_ts,
        last_seq=snap.last,
        last_ts=snap.last_ts,
        num_subjects=names_live,
    )
    if snap.msgs:
        st.num_deleted = snap.last - snap.first + 1 - snap.msgs
    if snap.lost or snap.lost_bytes:
        st.lost_msgs = list(snap.lost)
        st.lost_bytes = snap.lost_bytes
    return st, list(snap.lost)


def _holds(path: str, size: int, tail: bytes) -> bool:
    """Whether the plain block file at ``path`` is ``size`` bytes ending with ``tail`` (the last
    8 bytes, as index.db recorded them)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if os.fstat(fd).st_size != size:
            return False
        if size < 8:
            return True  # (no tail recorded: recovery compares the size alone too)
        if is_compressed(os.pread(fd, 8, 0)):
            return False
        return os.pread(fd, 8, size - 8) == tail
    finally:
        os.close(fd)


def peek_consumer_facts(directory: str, stream_name: str) -> list[tuple[str, str]] | None:
    """(name, facts) of every consumer stored with the stream in ``directory``: what the sleep
    decisions need of its verified meta.inf (natsd.store.file.consumer_index.facts_of), or None
    when one can not be read (the caller recovers the stream at start, which reports it).

    A consumer whose meta.inf is the very file ``obs.idx`` recorded (inode, size, mtime, ctime:
    one ``stat``) has its facts from there; any other (no record, a record that no longer
    matches: a crash between its meta write and its record, another program) is read and
    verified as the store's recovery reads it. When some were, or records name consumers that
    are gone, ``obs.idx`` is written again with what was found, so the next start after a kill
    -9 reads none. The files are opened relative to ``obs/`` (one open directory for all)."""
    obs = os.path.join(directory, OBS_DIR)
    try:
        fd = os.open(obs, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    except OSError:
        return None
    records, n_records = read_index(directory)
    out: list[tuple[str, str]] = []
    found: dict[str, tuple[Signature, str]] = {}
    read = 0
    stat = os.stat
    try:
        for name in os.listdir(fd):
            rec = records.get(name)
            path = f"{name}/{META_FILE}"
            if rec is not None:
                try:
                    st = stat(path, dir_fd=fd)
                except OSError:
                    st = None
                if st is not None and (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) == rec[0]:
                    out.append((name, rec[1]))
                    found[name] = rec
                    continue
            try:
                meta = read_meta(name, stream_name, dir_fd=fd)
                st = stat(path, dir_fd=fd)  # (nothing writes meanwhile: a start)
            except FileNotFoundError:
                d = os.path.join(obs, name)
                if os.path.isdir(d) and not os.path.exists(os.path.join(d, META_FILE)):
                    continue  # (not a consumer: the store's recovery skips it too)
                return None
            except (OSError, CorruptState):
                return None
            facts = facts_of(meta)
            out.append((name, facts))
            found[name] = (signature(st), facts)
            read += 1
    except OSError:
        return None
    finally:
        os.close(fd)
    if read or len(found) != len(records) or n_records > 2 * len(found) + 64:
        try:
            write_index(directory, found)
        except OSError:
            pass  # (read again next time)
    return out


def peek_consumers_idle(directory: str, names: list[str]) -> set[str]:
    """Those of the consumers ``names`` (of the plain stream in ``directory``) whose recovery would
    take their state as it is and find no message pending: no o.dat yet, or one of the current
    version that passes its checksum with nothing pending, and no journal (o.log, o.log.old: a
    recovery applies it and rewrites the state). Anything else (a damaged o.dat, an older
    version, a read error) leaves the name out. natsd.jetstream.dormant: after a kill -9, those may wait to be
    recovered until first used; nothing is written here."""
    out: set[str] = set()
    try:
        fd = os.open(os.path.join(directory, OBS_DIR), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return out
    stat = os.stat
    try:
        for name in names:
            try:
                data = read_whole(f"{name}/{CONSUMER_STATE_FILE}", dir_fd=fd)
            except FileNotFoundError:
                data = None  # (none written yet: a recovery starts from an empty state as it is)
            except OSError:
                continue
            if data is not None:
                try:
                    if len(data) < 2 or data[1] != VERSION:
                        continue
                    _, st = decode_snapshot(data)
                except (CorruptState, ValueError, IndexError):
                    continue
                if st.pending:
                    continue
            journal = False
            for j in (JOURNAL_FILE, JOURNAL_OLD_FILE):
                try:
                    stat(f"{name}/{j}", dir_fd=fd)
                    journal = True
                except FileNotFoundError:
                    pass
                except OSError:
                    journal = True
            if not journal:
                out.add(name)
    finally:
        os.close(fd)
    return out
