"""The process entry point freezes the heap it starts with (full collections stop walking it)."""

from __future__ import annotations

import gc

from natsd.server.server import freeze_startup_heap


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle, as recovered consumers and streams are full of


def test_objects_alive_at_start_leave_the_collector_generations():
    keep = [_Node() for _ in range(1000)]
    try:
        before = gc.get_freeze_count()
        frozen = freeze_startup_heap()
        assert frozen >= before + 1000
        # a full collection no longer sees them: it finds the frozen objects in no generation
        assert not any(o is keep[0] for o in gc.get_objects())
    finally:
        gc.unfreeze()
    assert any(o is keep[0] for o in gc.get_objects())
