"""Compressed message blocks (``compression: s2``): the byte layout, the encoder and the reader.

A stream with ``compression: s2`` writes its last block exactly as any other (records of
:mod:`natsd.store.file.record`, appended); when the block is sealed (the store rolls to a new
one) the whole block is compressed once, off the event loop, and the compressed file replaces
the plain one atomically (written to ``<n>.blk.tmp``, fsynced, renamed). That is what
nats-server does too (``recompressOnDiskIfNeeded`` when a block is rolled). A block file says
itself whether it is compressed, so blocks of both kinds live side by side: a stream updated
from ``none`` to ``s2`` compresses the blocks it seals from then on, and back to ``none`` it
keeps reading the compressed ones.

Compressed block file, little-endian::

    offset  size  field
    0       8     magic      "\\0\\0\\0\\0NZs2": a plain block never starts with four zero bytes
                             (that would be a record of length 0)
    8       4     raw_len    u32: size of the plain block (the records, as they were)
    12      4     chunk      u32: plain bytes per compressed chunk (CHUNK, 64 KiB)
    16      4     crc        u32: zlib.crc32 of bytes 0..16
    20      ..    a Snappy-framed stream (the Snappy "framing format", ``cramjam.snappy``):
                  the stream identifier, then one chunk frame per ``chunk`` plain bytes, in
                  order (type 0x00 compressed or 0x01 stored, each with the masked CRC-32C of
                  its plain bytes)

Offsets inside a block stay those of the plain records: the stream's index (``pos``) and
index.db are the same whether the block is compressed or not. Reading decompresses only the
chunks a read touches (:class:`CompressedView`, with a small per-store cache of decoded
chunks), so a message read costs one 64 KiB chunk, not the 8 MiB block.

Checksums: every chunk carries its CRC-32C (checked by cramjam when decoded), and every record
inside still carries its own CRC-32, checked on every read as in a plain block. A chunk that
fails its check reads as zero bytes (:meth:`CompressedView.read` marks it bad): the records in
it fail their own checks and are reported lost, and recovery resynchronises at the next intact
record after it, as it does after damaged bytes in a plain block. A damaged header loses the
block (its messages are reported lost).
"""

from __future__ import annotations

import os
import struct
import itertools
import threading
import zlib
from types import ModuleType
from typing import TYPE_CHECKING
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor

from natsd.store.file.layout import TMP_SUFFIX

if TYPE_CHECKING:
    from natsd.store.file.encryption import Keystream

__all__ = [
    "MAGIC",
    "HEADER",
    "CHUNK",
    "is_compressed",
    "compress_block",
    "CompressedView",
    "CorruptBlock",
    "ChunkCache",
    "SHARED_CHUNKS",
    "submit",
    "write_compressed",
    "compress_file",
    "COMPRESS_TMP",
]

MAGIC = b"\0\0\0\0NZs2"
_HEAD = struct.Struct("<8sIII")
HEADER = _HEAD.size  # 20
#: Plain bytes per compressed chunk (the Snappy framing format's largest chunk).
CHUNK = 64 * 1024
_SNAPPY_ID = b"\xff\x06\x00\x00sNaPpY"

_crc32 = zlib.crc32


def _cramjam() -> ModuleType:
    """cramjam, imported on first use: it costs ~2 MB of RSS in every server, and only
    ``compression: s2`` streams need it (one import lookup per 64 KiB chunk)."""
    import cramjam

    return cramjam


class CorruptBlock(Exception):
    """The compressed block's header fails its checks: its contents are unknown."""


def is_compressed(head: bytes) -> bool:
    return head[:8] == MAGIC


def compress_block(data) -> bytes:
    """The compressed file for the plain block ``data`` (see the module docstring). Each chunk is
    compressed alone (a one-chunk framed stream whose identifier is dropped after the first), so
    chunk i always holds plain bytes ``i*CHUNK .. (i+1)*CHUNK``."""
    n = len(data)
    head = _HEAD.pack(MAGIC, n, CHUNK, 0)
    parts = [head[:16] + _crc32(head[:16]).to_bytes(4, "little"), _SNAPPY_ID]
    mv = memoryview(data)
    compress = _cramjam().snappy.compress
    try:
        for o in range(0, n, CHUNK):
            framed = bytes(compress(mv[o : o + CHUNK]))
            assert framed.startswith(_SNAPPY_ID)
            parts.append(framed[len(_SNAPPY_ID) :])
    finally:
        mv.release()
    return b"".join(parts)


#: Where a block's compressed form is written before it replaces the block (``*.tmp``: a crash
#: leaves it to recovery, which removes it; not ``atomic_write``'s name, which a secure erase of
#: the same block may use meanwhile).
COMPRESS_TMP = ".z" + TMP_SUFFIX


def compress_file(path: str, ks: Keystream | None = None) -> tuple[str, int, int]:
    """Compress the plain block file ``path`` (runs on the compression thread): its compressed
    form is written to ``path + COMPRESS_TMP``, fsynced. Returns (that path, plain size,
    compressed size); the store renames it over the block on its own thread. ``ks``: the
    block's key stream (an encrypted block: the plain file is XORed with it, the compressed one
    with ``ks.compressed``, both from offset 0)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, size, 0)
    finally:
        os.close(fd)
    if ks is not None:
        if is_compressed(ks.compressed.xor(data[:8], 0)):
            raise ValueError(f"{path} is compressed already")
        data = ks.xor(data, 0)
    if is_compressed(data[:8]):
        raise ValueError(f"{path} is compressed already")
    tmp = path + COMPRESS_TMP
    return tmp, len(data), write_compressed(tmp, data, None if ks is None else ks.compressed)


def write_compressed(tmp: str, data, ks: Keystream | None = None) -> int:
    """Write the compressed form of plain block ``data`` to ``tmp`` (encrypted with ``ks`` when
    given), fsynced; returns its size."""
    out = compress_block(data)
    if ks is not None:
        out = ks.xor(out, 0)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(out)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    return len(out)


_view_ids = itertools.count(1)


class ChunkCache:
    """Decoded chunks of compressed blocks, most recently used kept (bounded: ``max_chunks``).
    Keys are (view id, chunk index): a view is never reused, so a rewritten block never hits
    the chunks of its previous file."""

    __slots__ = ("_d", "max_chunks")

    def __init__(self, max_chunks: int = 64) -> None:
        self._d: OrderedDict[tuple[int, int], bytes] = OrderedDict()
        self.max_chunks = max_chunks

    def get(self, key: tuple[int, int]) -> bytes | None:
        v = self._d.get(key)
        if v is not None:
            self._d.move_to_end(key)
        return v

    def put(self, key: tuple[int, int], v: bytes) -> None:
        self._d[key] = v
        if len(self._d) > self.max_chunks:
            self._d.popitem(last=False)

    def clear(self) -> None:
        self._d.clear()


class CompressedView:
    """Reads of a compressed block file by plain offsets. ``raw_len`` is the plain size.

    The chunk table (each chunk's frame offset and length in the file) is built on the first
    read by walking the frame headers (one read of the file). ``bad`` collects chunks that
    failed their check; they read as zeros (see the module docstring)."""

    __slots__ = ("fd", "raw_len", "chunk", "disk_size", "_frames", "_cache", "_uid", "bad", "_ks")

    def __init__(self, fd: int, cache: ChunkCache, ks: Keystream | None = None) -> None:
        self.fd = fd
        #: An encrypted block's key stream: the file's bytes are XORed with it at their offsets.
        self._ks = ks
        self.disk_size = os.fstat(fd).st_size
        head = self._pread(HEADER, 0)
        if len(head) < HEADER:
            raise CorruptBlock("short compressed block header")
        magic, raw_len, chunk, crc = _HEAD.unpack(head)
        if magic != MAGIC or _crc32(head[:16]) != crc or not 0 < chunk <= 1 << 22:
            raise CorruptBlock("compressed block header fails its checksum")
        self.raw_len = raw_len
        self.chunk = chunk
        self._frames: list[tuple[int, int]] | None = None
        self._cache = cache
        self._uid = next(_view_ids)
        self.bad: set[int] = set()

    def _pread(self, n: int, off: int) -> bytes:
        data = os.pread(self.fd, n, off)
        return data if self._ks is None else self._ks.xor(data, off)

    def _table(self) -> list[tuple[int, int]]:
        frames = self._frames
        if frames is None:
            data = self._pread(self.disk_size - HEADER, HEADER)
            frames = []
            o = 0
            end = len(data)
            while o + 4 <= end:
                typ = data[o]
                ln = int.from_bytes(data[o + 1 : o + 4], "little")
                if o + 4 + ln > end:
                    break  # a cut frame: the chunks from here read as bad
                if typ in (0x00, 0x01):
                    frames.append((HEADER + o, 4 + ln))
                elif typ != 0xFF and typ < 0x80:
                    break  # not a frame any more: lost sync, the rest reads as bad
                o += 4 + ln
            self._frames = frames
        return frames

    def _chunk(self, i: int) -> bytes:
        key = (self._uid, i)
        got = self._cache.get(key)
        if got is not None:
            return got
        want = min(self.chunk, self.raw_len - i * self.chunk)
        frames = self._table()
        out = None
        if i < len(frames):
            off, ln = frames[i]
            cramjam = _cramjam()
            try:
                out = bytes(cramjam.snappy.decompress(_SNAPPY_ID + self._pread(ln, off)))
            except cramjam.DecompressionError:
                out = None
        if out is None or len(out) != want:
            self.bad.add(i)
            out = bytes(want)
        self._cache.put(key, out)
        return out

    def read(self, off: int, n: int) -> bytes:
        """Up to ``n`` plain bytes at ``off`` (fewer at the end of the block)."""
        end = min(off + n, self.raw_len)
        if off >= end:
            return b""
        c = self.chunk
        first, last = off // c, (end - 1) // c
        if first == last:
            base = first * c
            return self._chunk(first)[off - base : end - base]
        parts = [self._chunk(i) for i in range(first, last + 1)]
        joined = b"".join(parts)
        base = first * c
        return joined[off - base : end - base]

    def read_all(self) -> bytes:
        return self.read(0, self.raw_len)


#: The decoded chunks of every store's compressed blocks, process-wide (8 MiB at most, however
#: many streams there are); keys never collide (view ids are unique).
SHARED_CHUNKS = ChunkCache(max_chunks=128)

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def submit(fn, *args) -> Future:
    """Run ``fn(*args)`` on the compression thread (one for the process: blocks are sealed one at
    a time per stream and compressing one takes milliseconds; cramjam works outside Python)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="natsd-compress")
    return _pool.submit(fn, *args)
