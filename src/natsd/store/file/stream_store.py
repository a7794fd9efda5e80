"""FileStreamStore: a stream persisted in append-only block files.

Bookkeeping is the shared :class:`natsd.store.seqindex.IndexedStreamStore` (compact arrays, no object
per message); this class adds the files:

- **Writes.** ``store_msg`` encodes the record (natsd.store.file.record) into the last block's
  pending buffer; ``flush()`` writes it with one ``pwrite`` (plus, when the first sequence moved
  since the last flush, one FIRST marker record in the same write). After ``flush()`` returns
  the bytes are in the OS: a ``kill -9`` loses nothing flushed. With ``sync_always`` flush()
  also fsyncs; otherwise the owner calls ``sync()`` every ``sync_interval``. A stream with
  ``persist_mode: async`` (``StoreConfig.async_persist``) never fsyncs on flush, and its owner
  calls ``flush()`` on a short timer *after* acknowledging (natsd.jetstream.stream): there a
  PubAck does not mean the record reached the OS. Blocks roll over
  at ``block_size`` (8 MiB default, as the reference).
- **Writes off the loop** (``flush_async``, natsd.store.file.writer): given a writer, a turn's
  buffer of at least ``writer.threshold`` bytes is written by the writer thread; the owner's
  callback runs on the loop once the bytes are in the OS (or rolled back, as a failed
  ``flush()``), and only then does the owner acknowledge. At most one write is in flight per
  store, so writes keep their order; every other operation that needs the bytes or the files
  (``flush``, ``sync``, reads of them, a block roll, purge, erase, truncate, stop) first waits
  for it and applies it (``InFlightWrites.settle``).
- **Removals** of interior messages append a tombstone record; removals from the front are
  covered by the FIRST marker written at the next flush (so a max_msgs stream does not write a
  tombstone per publish); a front block whose records all refer to sequences below the first
  sequence is unlinked. ``erase_msg`` overwrites the record in place (random bytes, FLAG_ERASED,
  fresh checksum). Purge and compact-past-the-end start a fresh block holding a FIRST marker
  (written and fsynced before the old blocks are unlinked).
- **Reads** (natsd.store.file.reads) go to the file (``pread``) or, for bytes not yet flushed,
  to the pending buffer; every read verifies the record's checksum. Forward reads share one
  read-ahead chunk: ``iter_msgs`` and ``load_run`` (a consumer's delivery pass) take runs of
  back-to-back records from it; ``load_run`` decodes a stretch of equally sized records
  column-wise and checks their checksums with one CRC over the stretch. A record that fails is
  reported lost (``state().lost_msgs``/``lost_bytes``, logged, a tombstone written) and never
  served.
- **Recovery** (natsd.store.file.recovery): ``msgs/index.db`` (natsd.store.file.index) is loaded
  when its checksum is good and every block still holds the bytes it recorded; records written
  after it are replayed from the recorded offsets. Otherwise every block is scanned. A torn or
  corrupt record truncates its block at that offset (fsynced) and is reported lost; a damaged
  record followed by intact ones costs only itself (recovery resynchronises at the next intact
  record); a missing block's messages are reported lost and the rest served.
- **Compression** (``compression: s2``, natsd.store.file.compressing): a block is compressed when
  it is sealed, on the compression thread (``Compression.queue``); the compressed file replaces
  the plain one on the store's own thread at the next flush or within COMPRESS_POLL_NS (a timer
  on the injected clock, armed only while a compression runs; ``Compression.install``) unless
  the block changed meanwhile (``MessageBlock.gen``: then it is compressed again). Reads and
  recovery see plain offsets either way, so blocks of both kinds mix (a config changed from none to s2 and back).
- **Failed writes** (disk full, I/O error): every message not on disk is rolled back and the
  owner told (``take_rollback``); nothing unwritten is ever served; the next flush retries.
  See natsd.store.file.faults.
- **Encryption at rest** (``keys``, natsd.store.file.encryption): the stream's key (``meta.key``)
  is opened first, before anything is written; each block gets its own key (``msgs/<n>.key``)
  and encrypts its bytes at the file's I/O boundary (natsd.store.file.block), so everything
  above, recovery included, works on plain bytes.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from itertools import accumulate
import heapq
import logging
import os
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from natsd.store import memtrim
from natsd.store.base import MsgRun, StoreClosed, StoreConfig, StoreError, StoreMsg, StoreWriteError
from natsd.store.file.block import MessageBlock
from natsd.store.file.compressing import Compression
from natsd.store.file.consumer_index import ConsumerIndex
from natsd.store.file.crc import crc32
from natsd.store.file.keyfiles import block_key_name, open_asset_key
from natsd.store.file.faults import WriteFaults
from natsd.store.file.index_file import IndexFile
from natsd.store.file.layout import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_INDEX_INTERVAL_NS,
    META_FILE,
    MSGS_DIR,
    OBS_DIR,
    block_file_name,
)
from natsd.store.file.meta import fsync_dir, new_stream_directory, write_meta
from natsd.store.file.reads import BlockReads, MsgCorrupt
from natsd.store.file.record import (
    BIG_RECORD,
    FLAG_ERASED,
    FLAG_FIRST,
    FLAG_MASK,
    FLAG_SKIP,
    FLAG_TOMB,
    FLAG_TRUNC,
    FLAG_TTL,
    HEADER_SIZE,
    SEQ_MASK,
    RecordError,
    encode_marker,
    encode_msg_into,
    encode_msgs_into,
    encode_subject_msgs,
    erase_record,
    file_store_msg_size,
    parse_header,
)
from natsd.store.file.recovery import Recovery
from natsd.store.file.threaded import InFlightWrites
from natsd.store.file.writer import BlockWriter
from natsd.store.seqindex import NEVER_EXPIRES, IndexedStreamStore

if TYPE_CHECKING:
    from natsd.store.file.consumer_state import FileConsumerStore
    from natsd.store.file.encryption import AccountKeys, AssetKey, Keystream

__all__ = ["FileStreamStore", "MsgCorrupt"]

log = logging.getLogger("natsd.store")

_OFF_MASK = 0xFFFFFFFF
_crc32 = crc32
#: A turn's records wait in the last block's buffer for the turn's ``flush()``, but one loop turn
#: can read much more than one socket read: libuv reads a readable socket up to 32 times (uvloop:
#: 256,000 bytes each) before the loop moves on, so an asynchronous publisher of 16 KB messages
#: left ~8 MB per turn, written in one pwrite; the kernel's copy of such a write into the page
#: cache cost several times that of the same bytes in ~1 MB writes (source and destination no
#: longer in the CPU's caches: ``bench/run_wide.py jspub16k``). So once the buffer holds this much,
#: the next record first writes it out (same as a block roll: the PubAcks still wait for the
#: turn's flush; ``WriteFaults.durable_last`` follows). Not with the writer thread, which takes big turns whole.
EAGER_WRITE_BYTES = int(os.environ.get("NATSD_EAGER_WRITE", 1 << 20))


class FileStreamStore(IndexedStreamStore):
    """A StreamStore in a directory; see the module docstring for the design.

    The sequence index is the base class (shared with the memory store). This class owns the
    blocks and the write path (the last block's buffer, markers, removals, block compaction,
    consumers, lifecycle); the rest are parts with their own state, each in its own module:

    - ``_reads`` (:class:`BlockReads`): checked reads and the read-ahead chunk;
    - ``_writes`` (:class:`InFlightWrites`): the writer thread and the writes in flight;
    - ``_faults`` (:class:`WriteFaults`): what is durable, and what a failed write took back;
    - ``_index_file`` (:class:`IndexFile`): ``msgs/index.db``;
    - ``_compression`` (:class:`Compression`): the block compressions under way;
    - recovery (:class:`Recovery`): run once at start, kept only for what it found.
    """

    msg_size = staticmethod(file_store_msg_size)
    # Offsets within a block (< 2**31: blocks roll at _block_size, a record is at most
    # MAX_RECORD_SIZE); the block id is the entry's position segment's (IndexedStreamStore).
    POS_TYPECODE = "i"
    # obs.idx's keeper, made with the first consumer store (_consumer_index)
    _cindex: ConsumerIndex | None = None
    # The heap trim after a burst of writes (memtrim.AfterWrites), made by the first _roll().
    _heap: memtrim.AfterWrites | None = None

    def __init__(
        self,
        config: StoreConfig,
        clock,
        directory: str,
        *,
        sync_interval_ns: int = 120 * 10**9,
        sync_always: bool = False,
        block_size: int = DEFAULT_BLOCK_SIZE,
        index_interval_ns: int = DEFAULT_INDEX_INTERVAL_NS,
        compress_inline: bool = False,
        writer: BlockWriter | None = None,
        keys: AccountKeys | None = None,
    ) -> None:
        self._dir = directory
        # Encryption at rest (natsd.store.file.encryption): account keys, meta.key; None when plain.
        self._keys = keys
        self._asset: AssetKey | None = None
        self._msgs_dir = os.path.join(directory, MSGS_DIR)
        self._obs_dir = os.path.join(directory, OBS_DIR)
        self._block_size = block_size
        # persist_mode: async turns sync_always off for this stream, as the reference does.
        self._sync_always = sync_always and not config.async_persist
        self.sync_interval_ns = sync_interval_ns
        self._blocks: dict[int, MessageBlock] = {}
        # The block appended to. None only before recovery opens one and after close, when no
        # write may come, so it is typed by what the write path sees.
        self._lmb: MessageBlock = None  # type: ignore[assignment]
        # Recovery runs with this set: the payload hooks write nothing.
        self._replaying = True
        # Truncation writes one TRUNC record instead of a tombstone per removed message.
        self._no_tombstones = False
        # The first sequence the last FIRST marker on disk (or pending) records.
        self._marker_first = 0
        self._consumers: dict[str, FileConsumerStore] = {}
        # block id -> bytes of live message records in it (compaction); built lazily.
        self._blive: dict[int, int] | None = None
        # A write moved first: blocks wholly below it may be unlinked after the next write.
        self._unlink_dead = False
        self._reads = BlockReads(self)
        # _read is called per message by the index's loaders: bound once to the part's method,
        # so a read costs no more attribute hops than when it was a method of this class.
        self._read = self._reads.read  # type: ignore[method-assign]
        self._writes = InFlightWrites(self, writer)
        self._faults = WriteFaults(self)
        self._index_file = IndexFile(self, self._msgs_dir, index_interval_ns)
        self._msgs_made = False  # (msgs/ exists: made with the first block file; recovery sets it)
        self._compression = Compression(self, compress_inline)
        super().__init__(config, clock)
        # The key first (in _make_directory): one that does not open the stream stops there.
        new = self._make_directory(keys, config.name)
        write_meta(directory, self._meta_dict(), config.name, fsync=self._sync_always, asset=self._asset, new=new)
        recovery = Recovery(self)
        try:
            recovery.run(new)
        except BaseException:
            for b in self._blocks.values():
                b.close()
            raise
        heapq.heapify(self._ttl_heap)
        self._replaying = False
        self._marker_first = self._first
        self._index_file.written_at = clock.monotonic_ns()
        if self._lmb is None or self._lmb.compressed:
            # A compressed block is never appended to (the last one may be, when the block
            # after it is gone): writes go to a new one.
            self._roll()
        keep = recovery.keep_last
        if keep is not None and keep[0] > self._last:
            # Sequences known lost must never be handed out again.
            self._skip_range(self._last + 1, keep[0] - self._last, keep[1])
        # Anything recovery itself decided goes to disk now. It counts as durable even if that
        # write fails (a full disk at start): the records stay pending and the next flush
        # writes them, so a sequence known lost is never handed out again.
        self._faults.durable_last = self._last
        try:
            self.flush()
        except StoreWriteError as exc:
            log.error("stream %s: writing recovery records failed (%s); will retry", config.name, exc)
            self._faults.rollback = None
        # Sealed blocks a crash left plain (or written before the stream asked for s2).
        for blk in list(self._blocks.values()):
            self._compression.queue(blk)

    def _make_directory(self, keys: AccountKeys | None, name: str) -> bool:
        """The stream's directory; True when this call created it (a new plain stream): holding
        no key, meta or block, it needs no check, compare or recovery (a create made half the
        system calls, issue 31). Otherwise the key is opened first: a key that does not open
        the stream stops here, nothing written. ``msgs/`` is not made here but with the first
        block file (``_create_block_file``): a stream that never stores anything has none."""
        if keys is None and new_stream_directory(self._dir):
            return True
        self._asset = open_asset_key(self._dir, keys, name, f"stream {name!r}")
        os.makedirs(self._dir, exist_ok=True)
        return False

    def _create_block(self, blk: MessageBlock) -> None:
        """Create a lazy block's file before its first write goes to the writer thread; a
        failure rolls back what is not on disk and raises, as a failed ``flush()``."""
        try:
            blk.create_file()
        except StoreWriteError as exc:
            self._faults.write_failed(blk, exc, self._marker_first)
            raise

    def _create_block_file(self, blk: MessageBlock) -> int:
        """A lazy block's file, at its first write (MessageBlock.make): ``msgs/`` first when the
        stream has none yet, the block's key when encrypted; returns the open file. With
        ``sync_always`` the new directory entries are fsynced too (the bytes are by the flush)."""
        if not self._msgs_made:
            try:
                os.mkdir(self._msgs_dir)
            except FileExistsError:
                pass
            if self._sync_always:
                fsync_dir(self._dir)
            self._msgs_made = True
        if self._keys is not None and blk.ks is None:
            blk.ks, blk.key_path = self.block_keys(blk.id, create=True)
        fd = os.open(blk.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        if self._sync_always:
            try:
                fsync_dir(self._msgs_dir)
            except OSError:
                os.close(fd)  # (and the file goes: the next flush's try creates it again, O_EXCL)
                os.unlink(blk.path)
                raise
        return fd

    # ------------------------------------------------------------------ config
    def _meta_dict(self) -> dict:
        if self.config.meta:
            return self.config.meta
        d = dataclasses.asdict(self.config)
        d.pop("meta", None)
        return d

    # ------------------------------------------------------------------ payload hooks
    def _roll(self) -> MessageBlock:
        """Start a new last block (flushing the old one's pending bytes first)."""
        old = self._lmb
        writes = self._writes
        writer = writes.writer
        if old is None or (writes.jobs and not old.pending):
            pass  # nothing of the old block left to write here (the writer thread has the rest)
        elif (
            writer is not None
            and old.werr is None
            and (writes.jobs or len(old.pending) >= writer.threshold)
            and writes.post()
        ):
            # The old block's tail goes to the writer thread (after the writes in flight).
            if not old.made:
                self._create_block(old)
            writes.submit(old)
        else:
            self._write_now(old)
        bid = (max(self._blocks) + 1) if self._blocks else 1
        # Lazy: the file (and its key, and msgs/ for a stream's first) is created by the block's
        # first write, which fails as a write does (StoreWriteError: no inode left...).
        blk = MessageBlock(
            bid,
            os.path.join(self._msgs_dir, block_file_name(bid)),
            cache=self._compression.chunks,
            make=self._create_block_file,
        )
        self._blocks[bid] = blk
        self._lmb = blk
        if old is not None and old.id in self._blocks:
            self._compression.queue(old)
        heap = self._heap
        if heap is None:  # (made by the first roll, which follows recovery: only new writes count)
            self._heap = heap = memtrim.AfterWrites(self._clock, self._last_seq_now)
        heap.grew()
        return blk

    def _last_seq_now(self) -> int:
        return self._last

    def block_keys(self, bid: int, create: bool = False) -> tuple[Keystream | None, str]:
        """An encrypted store's key stream of block ``bid`` and the path of its key file
        (``msgs/<n>.key``, context ``"<stream>:<n>"``: natsd.store.file.encryption); a new key
        when ``create``. (None, "") for a plain store."""
        keys = self._keys
        if keys is None:
            return None, ""
        path = os.path.join(self._msgs_dir, block_key_name(bid))
        context = f"{self.config.name}:{bid}"
        if create:
            return keys.create(path, context).keystream(), path
        return keys.open(path, context).keystream(), path

    def _write_now(self, blk: MessageBlock) -> None:
        """Write ``blk``'s pending bytes on this thread, after the writes in flight (a block roll,
        or a turn's buffer past ``EAGER_WRITE_BYTES``); StoreWriteError as ``flush()``."""
        if self._writes.jobs:
            failed = self._writes.settle()
            if failed is not None:
                raise failed
        marker_first = self._marker_first
        try:
            blk.flush(self._sync_always)
        except StoreWriteError as exc:
            self._faults.write_failed(blk, exc, marker_first)
            raise
        self._faults.durable_last = self._last

    def disk_bytes(self) -> int:
        """Bytes the message blocks take on disk (compressed blocks count compressed)."""
        return sum(b.disk_size + b.pend_off - b.flushed + len(b.pending) for b in self._blocks.values())

    def _write(self, seq: int, ts: int, subject: str, hdr: bytes | None, msg: bytes, ttl_ns: int) -> int:
        lmb = self._lmb
        sb = subject.encode()
        off = lmb.pend_off + len(lmb.pending)
        if off and off + 30 + len(sb) + len(msg) + (4 + len(hdr) if hdr else 0) > self._block_size:
            lmb = self._roll()
            off = lmb.flushed
        elif len(lmb.pending) >= EAGER_WRITE_BYTES and self._writes.writer is None:
            self._write_now(lmb)
        size = encode_msg_into(lmb.pending, seq, ts, sb, hdr, msg)
        lmb.max_ref = seq
        if self._blive is not None:
            self._blive[lmb.id] = self._blive.get(lmb.id, 0) + size
        if ttl_ns:
            lmb.pending += encode_marker(FLAG_TTL, seq, ts + ttl_ns if ttl_ns > 0 else NEVER_EXPIRES)
        return (lmb.id << 32) | off

    def _write_run(
        self, seq: int, ts: int, subject: str, msgs: list[bytes], start: int, hdr_len: int = 0
    ) -> tuple[int, Iterable[int]]:
        # What fits in the last block (rolled first when not even one does, as _write), when
        # those messages have one length: one encode_msgs, one append, positions at a stride.
        m0 = msgs[start]
        sb = subject.encode()
        rec = (34 if hdr_len else 30) + len(sb) + len(m0)
        lmb = self._lmb
        off = lmb.pend_off + len(lmb.pending)
        if off and off + rec > self._block_size:
            lmb = self._roll()
            off = lmb.flushed
        elif len(lmb.pending) >= EAGER_WRITE_BYTES and self._writes.writer is None:
            self._write_now(lmb)
        k = min(len(msgs) - start, max(1, (self._block_size - off) // rec))
        chunk = msgs[start : start + k]
        if k > 1 and list(map(len, chunk)).count(len(m0)) != k:
            if hdr_len:
                return 1, (self._write(seq, ts, subject, m0[:hdr_len], m0[hdr_len:], 0),)
            return 1, (self._write(seq, ts, subject, None, m0, 0),)
        encode_msgs_into(lmb.pending, seq, ts, sb, chunk, hdr_len)
        lmb.max_ref = seq + k - 1
        if self._blive is not None:
            self._blive[lmb.id] = self._blive.get(lmb.id, 0) + rec * k
        p0 = (lmb.id << 32) | off
        return k, range(p0, p0 + rec * k, rec)

    def _write_many(
        self, seq: int, ts: int, subjects: list[str], msgs: list[bytes], start: int
    ) -> tuple[int, Iterable[int], list[int]]:
        # What fits in the last block (rolled first when not even one does, as _write), when
        # the payloads are small: one encode_subject_msgs, one append, positions by the
        # records' lengths (which are the messages' sizes, file_store_msg_size).
        lmb = self._lmb
        stop = start + 1024  # (a bounded look ahead: a long run over many blocks, big payloads)
        sbs = [s.encode() for s in subjects[start:stop]]
        chunk = msgs[start:stop]
        slens = list(map(len, sbs))
        mlens = list(map(len, chunk))
        sizes = [30 + a + b for a, b in zip(slens, mlens)]
        off = lmb.pend_off + len(lmb.pending)
        if off and off + sizes[0] > self._block_size:
            lmb = self._roll()
            off = lmb.flushed
        elif len(lmb.pending) >= EAGER_WRITE_BYTES and self._writes.writer is None:
            self._write_now(lmb)
        ends = list(accumulate(sizes))
        k = max(1, bisect_right(ends, self._block_size - off))
        if k == 1 or max(mlens[:k]) >= BIG_RECORD:
            return 1, (self._write(seq, ts, subjects[start], None, chunk[0], 0),), sizes[:1]
        sizes = sizes[:k]
        lmb.pending += encode_subject_msgs(seq, ts, sbs[:k], chunk[:k], slens[:k], sizes)
        lmb.max_ref = seq + k - 1
        if self._blive is not None:
            self._blive[lmb.id] = self._blive.get(lmb.id, 0) + ends[k - 1]
        p0 = (lmb.id << 32) | off
        return k, [p0] + [p0 + e for e in ends[: k - 1]], sizes

    def _drop(self, seq: int, pos: int, size: int, erase: bool, front: bool) -> None:
        if self._replaying:
            return
        if erase:
            self._reads.rcache = None
            blk = self._blocks.get(pos >> 32)
            if blk is not None:
                off = pos & _OFF_MASK
                blk.overwrite(off, erase_record(blk.read(off, size), os.urandom))
                self._compression.queue(blk)  # a compressed block was made plain to be erased
        blive = self._blive
        if blive is not None and (pos >> 32) in blive:
            blive[pos >> 32] -= size
        if not front and not self._no_tombstones:
            lmb = self._lmb
            lmb.pending += encode_marker(FLAG_TOMB, seq, self._last_ts)
            if seq > lmb.max_ref:
                lmb.max_ref = seq

    def _drop_all(self, first: int) -> None:
        if self._replaying:
            return
        # Crash safety: the new block (with the FIRST marker that keeps the sequence) is on
        # disk before anything old disappears.
        self._reads.rcache = None
        self._blive = None
        old = list(self._blocks.values())
        for b in old:
            b.pending = bytearray()
        self._lmb = None  # type: ignore[assignment]  # _roll() opens the next one
        blk = self._roll()
        blk.pending += encode_marker(FLAG_FIRST, first)
        blk.max_ref = first
        blk.flush(sync=True)
        self._faults.durable_last = max(self._faults.durable_last, first - 1)
        fsync_dir(self._msgs_dir)
        self._index_file.remove()
        for b in old:
            b.unlink()
            del self._blocks[b.id]
        fsync_dir(self._msgs_dir)
        self._marker_first = first

    def _on_skip(self, seq: int, num: int, ts: int) -> None:
        if self._replaying:
            return
        lmb = self._lmb
        lmb.pending += encode_marker(FLAG_SKIP, seq, ts, count=num)
        lmb.max_ref = max(lmb.max_ref, seq + num - 1)

    def _on_truncate(self, seq: int) -> None:
        if self._replaying:
            return
        lmb = self._lmb
        lmb.pending += encode_marker(FLAG_TRUNC, seq)
        lmb.max_ref = max(lmb.max_ref, seq)
        # An older index would describe sequences that no longer exist.
        self._index_file.remove()
        self.flush()

    def truncate(self, seq: int) -> None:
        """Remove every message above ``seq`` (one TRUNC record, no tombstones)."""
        self._writes.settle()
        self._no_tombstones = True
        try:
            super().truncate(seq)
        finally:
            self._no_tombstones = False

    # Operations that rewrite or drop block bytes first let the write in flight finish (a failed
    # one rolls its messages back before they look at the index).
    def purge(self) -> int:
        self._writes.settle()
        return super().purge()

    def purge_ex(self, subject: str, seq: int, keep: int) -> int:
        self._writes.settle()
        return super().purge_ex(subject, seq, keep)

    def compact(self, seq: int) -> int:
        self._writes.settle()
        return super().compact(seq)

    def erase_msg(self, seq: int) -> bool:
        self._writes.settle()
        return super().erase_msg(seq)

    # ------------------------------------------------------------------ durability
    def flush(self) -> None:
        """Hand every buffered record to the OS: one pwrite on the last block (after the writes
        in flight on the writer thread, if any)."""
        writes = self._writes
        if writes.jobs:
            failed = writes.settle()
            if failed is not None:
                raise failed
        lmb = self._lmb
        if lmb is None:
            return
        # (the checks of _add_first_marker and _after_write inline: this runs once per turn and
        # a synchronous publisher waits for it)
        marker_first = self._marker_first
        if self._first != marker_first:
            self._add_first_marker(lmb)
        if lmb.pending:
            try:
                lmb.flush(self._sync_always)
            except StoreWriteError as exc:
                self._faults.write_failed(lmb, exc, marker_first)
                raise
        self._faults.durable_last = self._last
        # Everything is written: any token handed out is reached (and the next one is new).
        writes.token += 1
        writes.done_token = writes.token
        if self._faults.failing or self._unlink_dead or self._compression.running:
            self._after_write()

    def _add_first_marker(self, lmb: MessageBlock) -> int:
        """Before a write: a FIRST marker when the first sequence moved since the last one.
        Returns the marker state to restore if the write fails."""
        marker_first = self._marker_first
        if self._first != marker_first:
            lmb.pending += encode_marker(FLAG_FIRST, self._first)
            if self._first > lmb.max_ref:
                lmb.max_ref = self._first
            self._marker_first = self._first
            self._unlink_dead = True
        return marker_first

    def _after_write(self) -> None:
        if self._faults.failing:
            self._faults.failing = False
            log.warning("stream %s: writes work again", self.config.name)
        if self._unlink_dead:
            self._unlink_dead = False
            self._unlink_dead_blocks()
        if self._compression.running:
            self._compression.install()

    def _unlink_dead_blocks(self) -> None:
        """Unlink the prefix of blocks whose every record refers to sequences below first."""
        first = self._first
        blocks = self._blocks
        # (oldest first; called after every write that moved first: a KV bucket's every put,
        # so no list of the blocks is built while the oldest is still live)
        while blocks:
            bid = next(iter(blocks))
            blk = blocks[bid]
            if blk is self._lmb or blk.max_ref >= first or blk.jobs:
                break
            blk.unlink()
            del blocks[bid]

    def sync(self) -> None:
        """flush(), fsync every block written since the last sync, write consumer states, and
        rewrite index.db when it is older than the index interval."""
        self._check_open()
        self.flush()
        for blk in self._blocks.values():
            blk.sync()
        for cs in list(self._consumers.values()):
            cs.flush(fsync=True)
        if self.compact_blocks() or self._index_file.due(self._clock.monotonic_ns()):
            self._index_file.write()

    def compact_blocks(self) -> int:
        """Rewrite sealed blocks that are at least half dead (interior deletes, per-subject
        limits: a KV bucket whose old revisions are gone but whose oldest key pins the first
        sequence). Returns how many blocks were rewritten. Called by ``sync()``."""
        if self._blive is None:
            blive: dict[int, int] = {}
            size = self._size
            base = self._base
            for seq, pos in self._iter_index():
                bid = pos >> 32
                blive[bid] = blive.get(bid, 0) + size(seq - base)
            self._blive = blive
        done = 0
        min_dead = min(self._block_size // 4, 1 << 16)
        for blk in list(self._blocks.values()):
            if blk is self._lmb or blk.jobs:
                continue
            dead = blk.flushed - self._blive.get(blk.id, 0)
            if dead >= min_dead and dead * 2 >= blk.flushed:
                if self._compact_block(blk):
                    done += 1
        return done

    def _compact_block(self, blk: MessageBlock) -> bool:
        """Rewrite ``blk`` keeping what recovery still needs (see the keep rules below), via a
        tmp file + fsync + rename. The file is kept even when empty, so the block numbering has
        no hole (a hole means a lost block to the full scan)."""
        data = blk.read_all()
        out = bytearray()
        moves: list[tuple[int, int]] = []
        gone: set[int] = set()  # dead records dropped by this rewrite
        first, base, pos_arr, last = self._first, self._base, self._pos, self._last
        off = 0
        end = len(data)
        while off < end:
            try:
                size, _h, raw, ts, slen = parse_header(data, off)
                if off + size > end or _crc32(data[off : off + size - 8]) != int.from_bytes(
                    data[off + size - 8 : off + size - 4], "little"
                ):
                    raise RecordError(off, "bad record")
            except RecordError as exc:
                log.warning("stream %s: not compacting block %d: %s", self.config.name, blk.id, exc)
                return False
            flags = raw & FLAG_MASK
            seq = raw & SEQ_MASK
            i = seq - base
            live = seq >= first and 0 <= i < len(pos_arr) and pos_arr[i] >= 0
            if not flags:
                # (_pos holds offsets; the block is the entry's position segment's)
                keep = live and pos_arr[i] == off and self._hi_at(i) == blk.id
                if keep:
                    moves.append((seq, len(out)))
                elif 0 <= i < len(pos_arr) and pos_arr[i] == -off - 2 and self._hi_at(i) == blk.id:
                    gone.add(seq)
            elif flags & FLAG_ERASED:
                keep = False  # its tombstone or a FIRST marker elsewhere records the removal
            elif flags == FLAG_TTL:
                keep = live
            elif flags == FLAG_TOMB:
                # Needed while the dead message's record still exists somewhere (it would come
                # back on a full scan), and for the last sequence (it records the high-water mark).
                keep = seq == last or (seq >= first and 0 <= i < len(pos_arr) and pos_arr[i] != -1 and seq not in gone)
            elif flags == FLAG_FIRST:
                keep = seq >= self._marker_first
            elif flags == FLAG_SKIP:
                keep = seq + int.from_bytes(data[off + HEADER_SIZE + slen : off + size - 8], "little") - 1 >= first
            else:
                keep = True  # TRUNC: rare, and its order relative to messages matters
            if keep:
                out += data[off : off + size]
            off += size
        blk.write_file(bytes(out))
        fsync_dir(self._msgs_dir)
        blk.reopen()
        for seq, new_off in moves:
            pos_arr[seq - base] = new_off
        for seq in gone:
            pos_arr[seq - base] = -1
        self._reads.rcache = None
        log.debug("stream %s: compacted block %d from %d to %d bytes", self.config.name, blk.id, end, len(out))
        self._compression.queue(blk)
        return True

    def write_index(self) -> None:
        """Snapshot the in-memory index to msgs/index.db (after a flush; atomic, fsynced)."""
        self._index_file.write()

    # ------------------------------------------------------------------ the parts' public faces
    def flush_async(self, on_written: Callable[[], None]) -> int:
        return self._writes.flush_async(on_written)

    @property
    def written_token(self) -> int:
        """The token of the last write applied (see ``InFlightWrites.flush_async``)."""
        return self._writes.done_token

    def take_rollback(self) -> tuple[int, StoreWriteError] | None:
        return self._faults.take_rollback()

    def iter_msgs(self, start_seq: int, end_seq: int) -> Iterator[StoreMsg]:
        return self._reads.iter_msgs(start_seq, end_seq)

    def load_run(self, start_seq: int, max_msgs: int) -> MsgRun:
        return self._reads.load_run(start_seq, max_msgs)

    def _read_run(self, seqs: list[int]) -> MsgRun:
        return self._reads.read_run(seqs)

    # ------------------------------------------------------------------ state / consumers / lifecycle
    def update_config(self, config: StoreConfig) -> None:
        super().update_config(config)
        write_meta(self._dir, self._meta_dict(), config.name, asset=self._asset)
        self.flush()

    def consumer_store(self, name: str, meta: dict | None) -> FileConsumerStore:
        self._check_open()
        cs = self._consumers.get(name)
        if cs is not None:
            if meta:
                cs.update_config(meta)
            return cs
        # (the consumer state layer loads with a stream's first consumer: issue 31)
        from natsd.store.file.consumer_state import FileConsumerStore

        cs = FileConsumerStore(
            os.path.join(self._obs_dir, name),
            name,
            meta,
            self.config.name,
            fsync=self._sync_always,
            on_close=self._consumer_closed,
            keys=self._keys,
            index=self._consumer_index(),
        )
        self._consumers[name] = cs
        return cs

    def _consumer_index(self) -> ConsumerIndex | None:
        """The stream's obs.idx keeper (natsd.store.file.consumer_index); None when encrypted (an
        encrypted stream is never peeked after a kill -9, which is all the file is for)."""
        if self._asset is not None:
            return None
        if self._cindex is None:
            self._cindex = ConsumerIndex(self._dir)
        return self._cindex

    def _consumer_closed(self, cs: FileConsumerStore) -> None:
        if self._consumers.get(cs.name) is cs:
            del self._consumers[cs.name]

    def consumer_names(self) -> list[str]:
        try:
            names = os.listdir(self._obs_dir)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if os.path.isfile(os.path.join(self._obs_dir, n, META_FILE)))

    def stop(self) -> None:
        """Flush, write consumer states and index.db, fsync, close files. On a full disk (or any
        write error) the files are closed all the same: what is on disk is consistent (a
        failed write was cut back) and the next start recovers from the blocks."""
        if self._closed:
            return
        if self._heap is not None:
            self._heap.cancel()
        try:
            try:
                self._writes.settle()
                self._compression.cancel_poll()
                self._compression.install(wait=True)
                self.flush()
            finally:
                for cs in list(self._consumers.values()):
                    cs.stop()
            self.write_index()
        except (StoreError, OSError) as exc:
            log.error(
                "stream %s: stopping with a write error (%s); recovery will rebuild from the blocks",
                self.config.name,
                exc,
            )
            self._index_file.remove_quietly()
        finally:
            for blk in self._blocks.values():
                blk.close()
            self._closed = True

    def _abandon(self) -> None:
        """Close the files without flushing or writing anything: what a ``kill -9`` leaves
        behind (for tests of recovery). A compression already running finishes its ``*.tmp``
        file (recovery removes it) but is not put in place."""
        if self._heap is not None:
            self._heap.cancel()
        jobs = self._writes.jobs
        for job, *_ in jobs:  # a kill -9 leaves the writes that reached the OS behind
            job.wait()
        jobs.clear()
        self._compression.drop(cancel=False)
        for cs in list(self._consumers.values()):
            cs._abandon()
        for blk in self._blocks.values():
            blk.close()
        self._closed = True

    def delete(self) -> None:
        """Stop and remove the stream's directory."""
        if self._heap is not None:
            self._heap.cancel()
        jobs = self._writes.jobs
        for job, *_ in jobs:
            job.wait()
        jobs.clear()
        self._compression.drop(cancel=True)  # a running one finishes before its directory goes
        if not self._closed:
            for blk in self._blocks.values():
                blk.close()
            self._closed = True
        import shutil  # (shutil, with its compression modules, loads with the first delete: ADR 0015)

        shutil.rmtree(self._dir, ignore_errors=True)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("store is closed")
