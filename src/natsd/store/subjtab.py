"""Subject -> subject slot id for the sequence index, in one packed array (issue 31).

A ``dict[str, int]`` of a million subjects costs ~30-40 bytes per entry for its table plus a
28-byte ``int`` object per slot id above 256 (each value its own object): ~65 bytes per subject
on top of the name, and a 200,000-key KV bucket's restart rebuilt all of them. Here the map is an
open-addressing table in one ``array('I')`` (slot id + 1 per cell, 0 = empty, linear probing on
the names' own ``hash()``, which a ``str`` caches), at most half full (a miss, as a new subject
is, probes 2.5 cells on average there, 5 at 2/3): 8 to 16 bytes per subject.
A cell is confirmed against the store's list of names (``names[sid] == subject``), the list
the store keeps anyway to name a slot's subject, so the table holds no name of its own.

Probing runs in Python, several times slower than ``dict.get`` in C; the publish path must not
pay that for the subjects it keeps using, so lookups go through ``hot``, a plain dict of up to
``HOT_MAX`` recently found subjects (emptied when full): a stream of a few thousand subjects
(most of them) is answered from it alone, as before, and the packed table is the whole truth
beyond. Callers on the hot path read ``hot`` first and call :meth:`SubjectTable.get` on a miss.
"""

from __future__ import annotations

from array import array
from itertools import compress
from typing import Iterator

__all__ = ["SubjectTable", "HOT_MAX"]

#: Subjects the lookup cache (``SubjectTable.hot``) holds before it is emptied.
HOT_MAX = 4096
_MIN_SIZE = 8


class SubjectTable:
    """Maps the live subjects of ``names`` (slot id -> subject, ``None`` for a free slot) to
    their slot ids; the dict-like subset the sequence index uses. A subject is added after its
    name is in ``names`` and removed before its slot is freed there."""

    __slots__ = ("names", "hot", "_tab", "_mask", "_used")

    def __init__(self, names: list) -> None:
        #: Never replaced: the hot path keeps a reference to it (emptied in place).
        self.hot: dict[str, int] = {}
        self.load(names)

    def load(self, names: list) -> None:
        """Index every live name of ``names`` (the list is adopted, not copied)."""
        self.names = names
        self.hot.clear()
        live = len(names) - names.count(None)
        self._alloc(live)
        tab, mask = self._tab, self._mask
        sids = compress(range(1, len(names) + 1), names)
        for sid, h in zip(sids, map(hash, compress(names, names))):
            i = h & mask
            while tab[i]:
                i = (i + 1) & mask
            tab[i] = sid
        self._used = live

    def _alloc(self, live: int) -> None:
        # The smallest power of two at most half full with ``live`` (and one more) entries.
        size = _MIN_SIZE
        while size < (live + 1) * 2:
            size *= 2
        self._tab = array("I", bytes(4 * size))
        self._mask = size - 1

    def clear(self) -> None:
        """Forget every subject (the store has emptied ``names`` in place)."""
        self.hot.clear()
        self._alloc(0)
        self._used = 0

    def __len__(self) -> int:
        return self._used

    def nbytes(self) -> int:
        """Bytes of the packed table (the hot cache and the names not counted)."""
        return len(self._tab) * self._tab.itemsize

    def get(self, subject: str) -> int | None:
        """The slot id of ``subject``, or None."""
        sid = self.hot.get(subject)
        if sid is not None:
            return sid
        tab, mask, names = self._tab, self._mask, self.names
        i = hash(subject) & mask
        while True:
            v = tab[i]
            if not v:
                return None
            if names[v - 1] == subject:
                hot = self.hot
                if len(hot) >= HOT_MAX:
                    hot.clear()
                hot[subject] = v - 1
                return v - 1
            i = (i + 1) & mask

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
        if (self._used + 1) * 2 > len(self._tab):
            self.load(self.names)  # (grown: sized from the live names, this one included)
            return
        tab, mask = self._tab, self._mask
        i = hash(subject) & mask
        while tab[i]:
            i = (i + 1) & mask
        tab[i] = sid + 1
        self._used += 1

    def remove(self, subject: str, sid: int) -> None:
        """Drop ``subject`` (slot ``sid``, ``names[sid]`` still naming it). Deletion by
        backward shift: the entries after it in its run move back where their probe would find
        them, so no tombstone is left to lengthen later probes."""
        self.hot.pop(subject, None)
        tab, mask, names = self._tab, self._mask, self.names
        i = hash(subject) & mask
        while tab[i] != sid + 1:
            if not tab[i]:
                return
            i = (i + 1) & mask
        j = i
        while True:
            j = (j + 1) & mask
            v = tab[j]
            if not v:
                break
            home = hash(names[v - 1]) & mask
            # The entry at j stays unless its home is cyclically outside (i, j].
            if (home <= i < j) or (i < j < home) or (j < home <= i):
                tab[i] = v
                i = j
        tab[i] = 0
        self._used -= 1

    def values(self) -> list[int]:
        """The live slot ids, in slot order."""
        names = self.names
        return list(compress(range(len(names)), names))

    def items(self) -> Iterator[tuple[str, int]]:
        """(subject, slot id) of every live slot, in slot order."""
        names = self.names
        return zip(compress(names, names), compress(range(len(names)), names))
