"""Give the heap memory freed while a large index was built back to the OS (issue 31).

Building a stream's index at a restart grows a few large objects step by step (the subject
dict is resized some twenty times on its way to a million keys, each old table freed). glibc
keeps freed chunks below its mmap threshold in the heap, so the process's RSS keeps them:
~24 bytes per subject after a restart with 300,000 subjects, in process. ``malloc_trim(0)``
returns those pages (about a millisecond); it runs only after a large index (a small stream's
recovery frees little, and a restart of many small streams must not pay a call each), and not
at all where the C library has no ``malloc_trim`` (musl, macOS).
"""

from __future__ import annotations

from typing import Any

__all__ = ["after_large_index", "TRIM_MIN_ITEMS"]

#: Subject slots plus sequences from which a recovered index is worth a trim.
TRIM_MIN_ITEMS = 100_000

_trim: Any = None  # the C function once looked up; False when there is none


def after_large_index(items: int) -> bool:
    """Trim the heap when ``items`` (subject slots + sequences just indexed) is large; returns
    whether it did."""
    global _trim
    if items < TRIM_MIN_ITEMS:
        return False
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
