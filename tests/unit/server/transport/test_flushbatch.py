"""natsd.server.transport.flushbatch: the connections with output in a loop turn are flushed by
one scheduled callback; one that fails does not keep the others from being written; one queued
while the batch runs gets a batch of its own."""

from __future__ import annotations

import pytest

from natsd.server.transport.flushbatch import FlushBatch

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


class Loop:
    def __init__(self) -> None:
        self.ready: list = []
        self.scheduled = 0

    def call_soon(self, cb) -> None:
        self.scheduled += 1
        self.ready.append(cb)

    def run_once(self) -> None:
        todo, self.ready = self.ready, []
        for cb in todo:
            cb()


class Conn:
    def __init__(self, batch: FlushBatch, name: str, log: list) -> None:
        self.batch, self.name, self.log = batch, name, log
        self.flush_pending = False
        self.prefix = f"{name} - "

    def queue(self) -> None:
        if not self.flush_pending:
            self.flush_pending = True
            self.batch.add(self)

    def flush(self) -> None:
        self.flush_pending = False
        self.log.append(self.name)


def test_one_callback_per_turn_flushes_every_connection_once():
    loop, log = Loop(), []
    batch = FlushBatch(loop.call_soon)
    conns = [Conn(batch, "c%d" % i, log) for i in range(50)]
    for _ in range(3):
        for c in conns:
            c.queue()
    assert loop.scheduled == 1 and log == []
    loop.run_once()
    assert log == [c.name for c in conns]
    conns[9].queue()
    assert loop.scheduled == 2
    loop.run_once()
    assert log[-1] == "c9" and len(log) == 51


def test_a_failing_flush_is_logged_and_the_others_are_still_written(caplog):
    loop, log = Loop(), []
    batch = FlushBatch(loop.call_soon)
    a, b, c = (Conn(batch, n, log) for n in "abc")

    def broken() -> None:
        raise RuntimeError("boom")

    b.flush = broken
    for x in (a, b, c):
        x.queue()
    loop.run_once()
    assert log == ["a", "c"]
    assert "b - flush failed" in caplog.text


def test_a_connection_queued_while_the_batch_runs_is_flushed_in_the_next():
    loop, log = Loop(), []
    batch = FlushBatch(loop.call_soon)
    a, b = Conn(batch, "a", log), Conn(batch, "b", log)
    real = a.flush

    def flush_then_queue_b() -> None:
        real()
        b.queue()  # (a slow-consumer close while flushing can make others write)

    a.flush = flush_then_queue_b
    a.queue()
    loop.run_once()
    assert log == ["a"] and b.flush_pending and loop.scheduled == 2
    loop.run_once()
    assert log == ["a", "b"] and not b.flush_pending
