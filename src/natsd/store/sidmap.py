"""A recovered stream's subject -> subject id map, built when it pays (issue 31, restart time).

``IndexedStreamStore._sid_of`` maps each subject to its slot in ``_snames``. A restart that
loads ``msgs/index.db`` gets the names as a list; building the dict from them cost a
200,000-key bucket ~50 ms of its ~100 ms load here (a hash and an insert per name, the table
resized twenty times), before any client had asked for one key. :class:`LazySubjectIds` stands
in for the dict until then:

- a single lookup (``get``, ``in``, ``[]``) is answered by scanning the names
  (``list.index``, a C loop: ~2 ms for 200,000 names), as long as the names scanned so far stay
  under :data:`SCAN_BUDGET` times their number; past that the dict is built, so the scans
  never cost more than a few times what the dict costs to build, and a stream that is used
  (publishes, a watcher) gets the dict after a handful of lookups;
- ``len`` is the number of live names, known without the dict (``STREAM.INFO``'s
  ``num_subjects``);
- anything else (a store, a removal, ``values()``, ``items()``...) builds the dict first.

Once built, the store's ``_sid_of`` is that plain dict again, so the hot paths pay nothing
after it; a caller still holding this object (a local bound before the build) is served by
the dict through it. The heap the build churned is trimmed as recovery's own is
(:mod:`natsd.store.memtrim`).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Iterator

from natsd.store import memtrim

if TYPE_CHECKING:
    from natsd.store.seqindex import IndexedStreamStore

__all__ = ["LazySubjectIds", "SCAN_BUDGET"]

#: Names scanned by lookups before the dict is built, in multiples of the number of names
#: (a scan costs ~10 ns a name, the build ~250 ns: the scans stay well under the build's cost).
SCAN_BUDGET = 8


class LazySubjectIds:
    """Stands in for ``store._sid_of`` (a ``dict[str, int]``) until it is needed; see the module
    docstring. ``live`` is the number of names that are not free slots (None)."""

    __slots__ = ("_store", "_dict", "_live", "_left")

    def __init__(self, store: IndexedStreamStore, live: int) -> None:
        self._store: weakref.ref[IndexedStreamStore] | None = weakref.ref(store)
        self._dict: dict[str, int] | None = None
        self._live = live
        self._left = SCAN_BUDGET * len(store._snames)

    @property
    def built(self) -> bool:
        return self._dict is not None

    def _build(self) -> dict[str, int]:
        d = self._dict
        if d is not None:
            return d
        store = self._store() if self._store is not None else None
        if store is None:  # (the store is gone: nothing to serve)
            d = self._dict = {}
            return d
        names = store._snames
        if self._live == len(names):
            d = dict(zip(names, range(len(names))))
        else:
            d = {name: sid for sid, name in enumerate(names) if name is not None}
        self._adopt(store, d)
        memtrim.after_large_index(len(d))
        return d

    def _adopt(self, store: IndexedStreamStore, d: dict[str, int]) -> None:
        self._dict = d
        self._store = None
        if store._sid_of is self:
            store._sid_of = d

    def _scan(self, name: str) -> int | None:
        """The slot of ``name`` by a scan of the names (None: absent); builds the dict instead
        once the scans have used their budget."""
        store = self._store() if self._store is not None else None
        if store is None or self._left <= 0:
            return self._build().get(name)
        names = store._snames
        try:
            sid = names.index(name)
        except ValueError:
            self._left -= len(names)
            return None
        self._left -= sid + 1
        return sid

    # -- the dict's reads answered without it
    def get(self, name: str, default: Any = None) -> Any:
        d = self._dict
        if d is not None:
            return d.get(name, default)
        sid = self._scan(name)
        return default if sid is None else sid

    def __contains__(self, name: object) -> bool:
        d = self._dict
        if d is not None:
            return name in d
        return isinstance(name, str) and self._scan(name) is not None

    def __getitem__(self, name: str) -> int:
        d = self._dict
        if d is not None:
            return d[name]
        sid = self._scan(name)
        if sid is None:
            raise KeyError(name)
        return sid

    def __len__(self) -> int:
        d = self._dict
        return len(d) if d is not None else self._live

    def __bool__(self) -> bool:
        return len(self) > 0

    # -- everything else through the dict
    def clear(self) -> None:
        if self._dict is not None:
            self._dict.clear()
            return
        store = self._store() if self._store is not None else None
        d: dict[str, int] = {}
        if store is not None:
            self._adopt(store, d)
        else:
            self._dict = d

    def __setitem__(self, name: str, sid: int) -> None:
        self._build()[name] = sid

    def __delitem__(self, name: str) -> None:
        del self._build()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._build())

    def __eq__(self, other: object) -> bool:
        return self._build() == other

    __hash__ = None  # type: ignore[assignment]  # (as a dict's)

    def __repr__(self) -> str:
        return f"LazySubjectIds({self._live} names, {'built' if self._dict is not None else 'not built'})"

    def __getattr__(self, attr: str) -> Any:
        # keys(), values(), items(), pop(), setdefault(), copy()...: the dict's own
        return getattr(self._build(), attr)
