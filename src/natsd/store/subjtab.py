"""Subject -> subject slot id for the sequence index, in one packed array (issue 31).

A ``dict[str, int]`` of a million subjects costs ~30-40 bytes per entry for its table plus a
28-byte ``int`` object per slot id above 256 (each value its own object): ~65 bytes per subject
on top of the name, and a 200,000-key KV bucket's restart spent most of its index load hashing
every name into a new one. Here the map is an open-addressing table in one ``array('I')`` (slot
id + 1 per cell, 0 = empty, linear probing), at most half full (a miss, as a new subject is,
probes 2.5 cells on average there, 5 at 2/3; a removed subject's cell is a tombstone, counted as
full until a rebuild): 8 to 16 bytes per subject. A cell is confirmed
against the store's list of names (``names[sid] == subject``), the list the store keeps anyway to
name a slot's subject, so the table holds no name of its own.

The cell of a subject comes from the CRC-32 of its UTF-8 bytes, the same in every process, so a
file store writes the cells to ``index.db`` and a restart adopts them as they are (no name hashed,
no table built: :meth:`SubjectTable.load` with ``cells``). A CRC is not keyed: anyone can make
subjects that share a cell, which would turn every probe into a long walk. So no subject sits more
than ``MAX_PROBE`` cells past its own; one that would goes to ``over``, a plain dict (keyed by
the interpreter's randomised hash), and a lookup walks at most ``MAX_PROBE`` cells before asking
it. Ordinary subjects never get there (the longest run in a million ``dev.<n>.temp`` is ~20).

Probing runs in Python, several times slower than ``dict.get`` in C; the publish path must not
pay that for the subjects it keeps using, so lookups go through ``hot``, a plain dict of up to
``HOT_MAX`` recently found subjects (emptied when full): a stream of up to 65,536 subjects in use
(plgd's 10,000 devices x 5 events is 50,000) is answered from it alone, as before, and the packed
table is the whole truth beyond. (At 4,096 the plgd workload missed on nearly every publish: ~2 µs
more server CPU per message, `bench/run.py plgd`; the cache costs at most ~6 MB, ~100 bytes per
entry, and starts empty after a restart.) Callers on the hot path read ``hot`` first and call
:meth:`SubjectTable.get` on a miss.
"""

from __future__ import annotations

from array import array
from itertools import compress
from typing import Iterator
from zlib import crc32

__all__ = ["SubjectTable", "HOT_MAX", "LAZY_MIN", "MAX_PROBE", "SCAN_BUDGET"]

#: Subjects the lookup cache (``SubjectTable.hot``) holds before it is emptied.
HOT_MAX = 1 << 16
#: The farthest a subject's cell is from the cell its CRC names (see the module doc).
MAX_PROBE = 64
_MIN_SIZE = 8
#: Names from which :meth:`SubjectTable.load` leaves the table for when lookups make it pay.
LAZY_MIN = 4096
#: Names scanned by lookups before a lazily loaded table is built, in multiples of the number of
#: names (a scan costs ~10 ns a name, the build ~400 ns: the scans stay under the build's cost).
SCAN_BUDGET = 8
# A removed subject's cell: probes walk past it, adds reuse it (slot ids stay far below it).
_TOMB = 0xFFFFFFFF


def _size_for(live: int) -> int:
    """The smallest power of two at most half full with ``live`` (and one more) entries."""
    size = _MIN_SIZE
    while size < (live + 1) * 2:
        size *= 2
    return size


def empty_and_tombstones(cells: array) -> tuple[int, int]:
    """``(cells.count(0), cells.count(_TOMB))`` of an ``I`` array, a third of their time for the
    tables a restart adopts (~20 -> ~6 ms for 2**19 cells: ``array.count`` makes an int per cell).
    Byte lane ``k`` of every cell, read as one integer: a cell is empty where all four lanes have a
    zero byte (their OR), a tombstone where all four have 0xff (their AND)."""
    n = len(cells)
    raw = cells.tobytes()
    lanes = [int.from_bytes(raw[k::4], "little") for k in range(4)]
    any_bits = lanes[0] | lanes[1] | lanes[2] | lanes[3]
    all_bits = lanes[0] & lanes[1] & lanes[2] & lanes[3]
    return any_bits.to_bytes(n, "little").count(0), all_bits.to_bytes(n, "little").count(255)


class SubjectTable:
    """Maps the live subjects of ``names`` (slot id -> subject, ``None`` for a free slot) to
    their slot ids; the dict-like subset the sequence index uses. A subject is added after its
    name is in ``names`` and removed before its slot is freed there."""

    __slots__ = ("names", "hot", "over", "_tab", "_mask", "_used", "_filled", "_left", "_miss", "_miss_h")

    def __init__(self, names: list) -> None:
        #: Never replaced: the hot path keeps a reference to it (emptied in place).
        self.hot: dict[str, int] = {}
        self.over: dict[str, int] = {}
        self._tab: array | None = None
        # The last subject a probe did not find and its CRC: a new subject is looked up, then
        # added, and the add reuses the CRC (a new subject cost two encodes and two CRCs).
        self._miss: str | None = None
        self._miss_h = 0
        self.load(names)

    def load(
        self, names: list, cells: array | None = None, over: list[int] | None = None, live: int | None = None
    ) -> None:
        """Index every live name of ``names`` (the list is adopted, not copied; ``live``: how
        many are not None, when the caller knows). ``cells`` and ``over``: what :meth:`cells`
        and :meth:`over_sids` gave for these names (a restart's index.db), adopted as they are
        when they are consistent with the names' count. Without them, many names are indexed
        when lookups make it pay (lane kvr31's idea, issue 31): until then a lookup is a scan of
        the names (``list.index``, a C loop: ~2 ms for 200,000), as long as the names scanned
        stay under ``SCAN_BUDGET`` times their number; anything else builds the table first."""
        self.names = names
        if live is None:
            live = len(names) - names.count(None)
        if cells is not None and over is not None and self._adopt(live, cells, over):
            return
        if live < LAZY_MIN:
            self._build(_size_for(live))
            return
        self.hot.clear()
        self.over = {}
        self._tab = None
        self._mask = self._filled = 0
        self._used = live
        self._left = SCAN_BUDGET * len(names)

    def _built(self) -> array:
        """The cells, built first when :meth:`load` left them for later."""
        tab = self._tab
        if tab is None:
            tab = self._build(_size_for(self._used))
        return tab

    def _scan(self, subject: str) -> int | None:
        """A lookup before the table is built (see :meth:`load`)."""
        names = self.names
        if self._left <= 0:
            self._build(_size_for(self._used))
            return self.get(subject)
        try:
            sid = names.index(subject)
        except ValueError:
            self._left -= len(names)
            return None
        self._left -= sid + 1
        hot = self.hot
        if len(hot) >= HOT_MAX:
            hot.clear()
        hot[subject] = sid
        return sid

    def _adopt(self, live: int, cells: array, over: list[int]) -> bool:
        size, names = len(cells), self.names
        if cells.typecode != "I" or size < _MIN_SIZE or size & (size - 1):
            return False
        # (counts only: the cells come from a checksummed index.db this code wrote)
        empty, tombs = empty_and_tombstones(cells)
        filled = size - empty
        if filled * 2 > size or filled - tombs + len(over) != live:
            return False
        try:
            adopted = {names[sid]: sid for sid in over}
        except (IndexError, TypeError):
            return False
        if None in adopted:
            return False
        self.hot.clear()
        self.over = adopted
        self._tab, self._mask, self._used, self._filled = cells, size - 1, live, filled
        return True

    def _build(self, size: int) -> array:
        """A new table of ``size`` cells holding every live name (no tombstone); its cells."""
        names = self.names
        self.hot.clear()
        self.over = {}
        tab = self._tab = array("I", bytes(4 * size))
        self._mask = size - 1
        self._used = self._filled = 0
        homes = map(self._mask.__and__, map(crc32, map(str.encode, compress(names, names))))
        self._place(tab, zip(compress(range(len(names)), names), homes))
        return tab

    def _place(self, tab: array, entries: Iterator[tuple[int, int]]) -> None:
        """Put the (live, not yet indexed) slots of ``entries`` (slot id, its home cell) in the
        first free cell at most ``MAX_PROBE`` past their home, or in ``over``."""
        mask, names, over = self._mask, self.names, self.over
        placed = filled = 0
        for sid, i in entries:
            placed += 1
            v = tab[i]
            if v:  # (most go to their home cell: a rebuild's loop stays short)
                k = 1
                while v and v != _TOMB and k < MAX_PROBE:
                    i = (i + 1) & mask
                    v = tab[i]
                    k += 1
                if v and v != _TOMB:
                    over[names[sid]] = sid
                    continue
            tab[i] = sid + 1
            filled += not v
        self._used += placed
        self._filled += filled

    def clear(self) -> None:
        """Forget every subject (the store has emptied ``names`` in place)."""
        self._build(_MIN_SIZE)

    def __len__(self) -> int:
        return self._used

    def nbytes(self) -> int:
        """Bytes of the packed table (the hot cache, ``over`` and the names not counted; 0
        until it is built)."""
        return 0 if self._tab is None else len(self._tab) * self._tab.itemsize

    def cells(self) -> array | None:
        """The table's cells (index.db keeps them; the store's own array, not a copy), or None
        when it was never built (a stop does not build it: the next restart is lazy too)."""
        return self._tab

    def over_sids(self) -> list[int]:
        """The slots kept in ``over`` (index.db keeps them with the cells)."""
        return sorted(self.over.values())

    def get(self, subject: str) -> int | None:
        """The slot id of ``subject``, or None."""
        sid = self.hot.get(subject)
        if sid is not None:
            return sid
        return self.probe(subject)

    def probe(self, subject: str) -> int | None:
        """:meth:`get` for a caller that found ``subject`` missing from ``hot`` already."""
        tab, mask, names = self._tab, self._mask, self.names
        if tab is None:
            return self._scan(subject)
        h = crc32(subject.encode())
        i = h & mask
        v = tab[i]
        k = MAX_PROBE
        while v and k:
            if v != _TOMB and names[v - 1] == subject:
                hot = self.hot
                if len(hot) >= HOT_MAX:
                    hot.clear()
                hot[subject] = v - 1
                return v - 1
            i = (i + 1) & mask
            v = tab[i]
            k -= 1
        self._miss, self._miss_h = subject, h
        return self.over.get(subject) if self.over else None

    def __contains__(self, subject: str) -> bool:
        return self.get(subject) is not None

    def __getitem__(self, subject: str) -> int:
        sid = self.get(subject)
        if sid is None:
            raise KeyError(subject)
        return sid

    def sids(self, subjects: list[str]) -> list[int]:
        """The slot ids of ``subjects``, every one of them known."""
        try:
            return list(map(self.hot.__getitem__, subjects))
        except KeyError:
            return [self[s] for s in subjects]

    def add(self, subject: str, sid: int) -> None:
        """Index the new subject of slot ``sid`` (``names[sid]`` is ``subject`` already)."""
        tab = self._tab
        if tab is None:
            self._used += 1
            self._built()  # (with it: names[sid] is the subject)
            return
        size = len(tab)
        if (self._filled + 1) * 2 > size:
            # Full of entries and tombstones: twice the size when the entries alone fill a
            # quarter, else the same size without the tombstones (either way a quarter of the
            # cells at least stays free: the next rebuild is that many adds away).
            self._build(size * 2 if (self._used + 1) * 4 > size else size)
            return  # (names[sid] is the subject: the rebuild placed it)
        i = (self._miss_h if subject is self._miss else crc32(subject.encode())) & self._mask
        if not tab[i]:  # (the common case inline)
            tab[i] = sid + 1
            self._filled += 1
            self._used += 1
        else:
            self._place(tab, iter(((sid, i),)))
        # A new subject is published to again soon (a device's next event): the hot dict answers.
        hot = self.hot
        if len(hot) >= HOT_MAX:
            hot.clear()
        hot[subject] = sid

    def remove(self, subject: str, sid: int) -> None:
        """Drop ``subject`` (slot ``sid``, ``names[sid]`` still naming it): its cell becomes a
        tombstone, which a probe walks past and an add reuses (a backward shift would keep the
        table tidier, but a run of cells is as long as crafted subjects make it)."""
        self.hot.pop(subject, None)
        if self.over.pop(subject, None) is not None:
            self._used -= 1
            return
        tab, mask = self._built(), self._mask
        i = crc32(subject.encode()) & mask
        for _ in range(MAX_PROBE):
            if tab[i] == sid + 1:
                tab[i] = _TOMB
                self._used -= 1
                return
            i = (i + 1) & mask
        raise AssertionError(f"subject slot {sid} is not in the table")

    def values(self) -> list[int]:
        """The live slot ids, in slot order."""
        names = self.names
        return list(compress(range(len(names)), names))

    def items(self) -> Iterator[tuple[str, int]]:
        """(subject, slot id) of every live slot, in slot order."""
        names = self.names
        return zip(compress(names, names), compress(range(len(names)), names))
