"""Give the heap memory freed while a large index was built back to the OS (issue 31).

Building a stream's index at a restart grows a few large objects step by step (the subject
dict is resized some twenty times on its way to a million keys, each old table freed). glibc
keeps freed chunks below its mmap threshold in the heap, so the process's RSS keeps them:
~24 bytes per subject after a restart with 300,000 subjects, in process. ``malloc_trim(0)``
returns those pages (about a millisecond); it runs only after a large index (a small stream's
recovery frees little, and a restart of many small streams must not pay a call each), and not
at all where the C library has no ``malloc_trim`` (musl, macOS).

Writing leaves the same kind of holes: a file store's index arrays grow by ``realloc`` as messages
come, each step freeing the old copy inside the heap. After 2,000,000 × 128 B publishes that was
~2 bytes per message of RSS (~14 against ~11.8 once trimmed, issue 31's per-message figure).
:class:`AfterWrites` trims once such a burst has ended: a store that grew by ``TRIM_MIN_ITEMS``
entries arms one timer on its clock, which trims when no write came for ``QUIET_NS`` (at most
``MAX_WAITS`` waits: a store written without pause is trimmed every few seconds at most).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from natsd.clock import Clock, Timer

__all__ = ["after_large_index", "AfterWrites", "TRIM_MIN_ITEMS"]

#: Subject slots plus sequences from which a recovered index is worth a trim.
TRIM_MIN_ITEMS = 100_000

#: How long a store that grew must see no write before the heap is trimmed, and how many such
#: waits a store written without pause gets before it is trimmed all the same.
QUIET_NS = 200_000_000
MAX_WAITS = 25

_trim: Any = None  # the C function once looked up; False when there is none


def after_large_index(items: int) -> bool:
    """Trim the heap when ``items`` (subject slots + sequences just indexed) is large; returns
    whether it did."""
    if items < TRIM_MIN_ITEMS:
        return False
    return trim()


def trim() -> bool:
    """``malloc_trim(0)``; False where the C library has none."""
    global _trim
    if _trim is None:
        try:
            import ctypes  # (only after a large index: the import costs ~3 ms)

            _trim = getattr(ctypes.CDLL(None), "malloc_trim", None) or False
        except OSError:
            _trim = False
    if _trim is False:
        return False
    _trim(0)
    return True


class AfterWrites:
    """One store's trim after a burst of writes (see the module's docstring).

    The store calls :meth:`grew` at a point its writes pass now and then (a file store: when it
    starts a new block); ``last_seq`` reads the store's last sequence, the timer runs on its clock.
    """

    __slots__ = ("_clock", "_last_seq", "_since", "_seen", "_timer", "_waits")

    def __init__(self, clock: Clock, last_seq: Callable[[], int]) -> None:
        self._clock = clock
        self._last_seq = last_seq
        self._since = last_seq()  # the last sequence at the last trim (or when made)
        self._seen = 0  # the last sequence when the timer was armed or last fired
        self._timer: Timer | None = None
        self._waits = 0

    def grew(self) -> None:
        if self._timer is None and self._last_seq() - self._since >= TRIM_MIN_ITEMS:
            self._seen = self._last_seq()
            self._waits = 0
            self._timer = self._clock.call_later(QUIET_NS, self._fire)

    def _fire(self) -> None:
        last = self._last_seq()
        if last != self._seen and self._waits < MAX_WAITS:  # still being written: wait for a pause
            self._seen = last
            self._waits += 1
            self._timer = self._clock.call_later(QUIET_NS, self._fire)
            return
        self._timer = None
        self._since = last
        trim()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
