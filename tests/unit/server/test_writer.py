"""natsd.server.writer: the one owner of a connection's output (appending, accounting, one flush
per loop turn, slow consumer and stalls), without sockets: a fake transport and a ManualClock."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from natsd.clock import ManualClock
from natsd.protocol.encoder import OK, PONG, append_msgs, encode_msg, msg_parts, msg_prefix
from natsd.server.subscription import Subscription
from natsd.server.transport.flushbatch import FlushBatch
from natsd.server.writer import REASON_SLOW_CONSUMER, REASON_SLOW_CONSUMER_WD, STALL_MAX_NS, Writer

pytestmark = pytest.mark.unit


class Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.buffered = 0
        self.reading = True
        self.closed = self.aborted = False

    def write(self, data) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True


class Conn(Writer):
    """The attributes a Writer needs from its connection (ClientConnection has them all)."""

    def __init__(self, server, max_pending: int = 1 << 20) -> None:
        self.server = server
        self.transport = Transport()
        self.out = bytearray()
        self.flush_pending = False
        self.closed = False
        self.close_reason = ""
        self.out_msgs = self.out_bytes = 0
        self.max_pending = max_pending
        self.congested = self.stalled = False
        self.stalled_producers: set = set()
        self._stall_timer = self._wd_timer = None
        self._stash = self._backlog = None
        self._call_soon = server.clock.call_soon
        self._flush_soon = server.flush_batch.add
        self.prefix = ""

    def _close(self, reason, err, graceful=True, log=""):
        self.closed = True
        self.close_reason = reason
        self._release_producers()
        self._close_output(graceful)


def make_server(write_deadline_ns: int = 0):
    clock = ManualClock()
    return SimpleNamespace(
        clock=clock,
        flush_batch=FlushBatch(clock.call_soon),
        slow_consumers=0,
        stalled_clients=0,
        options=SimpleNamespace(write_deadline_ns=write_deadline_ns),
    )


def sub_of(c, sid=b"7") -> Subscription:
    return Subscription(c, sid, "s", None)


def written(c) -> bytes:
    return b"".join(c.transport.writes)


def test_control_lines_are_queued_not_counted_and_flushed_once_per_turn():
    server = make_server()
    c = Conn(server)
    c.send_raw(OK)
    c.send_raw(PONG)
    assert c.out_msgs == 0 and c.out_bytes == 0
    assert c.transport.writes == []  # nothing is written before the loop turn ends
    server.clock.run_soon()
    assert c.transport.writes == [OK + PONG]  # one write for the turn
    assert not c.flush_pending and c.out == b""


def test_every_enqueue_kind_counts_and_coalesces_into_one_write():
    server = make_server()
    c = Conn(server)
    sub = sub_of(c)
    head, mid = msg_parts(b"a.b", b"r", 0, 3)
    c.enqueue_msg(sub, head, mid, b"xyz", 3)
    c.enqueue_run(msg_prefix(b"a.b", b"7", b"", 0, 2), [b"p1", b"p2"], 4)
    items = [(b"o.1", b"$JS.ACK.x", None, b"one"), (b"o.2", b"", b"NATS/1.0\r\n\r\n", b"two")]
    c.enqueue_msgs(b"7", items)
    c.enqueue(encode_msg(b"z", b"7", b"", b"zz"), 1, 2)
    assert c.out_msgs == 1 + 2 + 2 + 1
    assert c.out_bytes == 3 + 4 + (3 + 12 + 3) + 2
    assert sub.delivered == 1  # enqueue_msg counts the subscription's deliveries too
    server.clock.run_soon()
    expect = bytearray(b"MSG a.b 7 r 3\r\nxyz\r\nMSG a.b 7 2\r\np1\r\nMSG a.b 7 2\r\np2\r\n")
    append_msgs(expect, b"7", items)
    expect += b"MSG z 7 2\r\nzz\r\n"
    assert c.transport.writes == [bytes(expect)]


def test_over_max_pending_is_a_slow_consumer_cut_off_without_err():
    server = make_server()
    c = Conn(server, max_pending=100)
    sub = sub_of(c)
    head, mid = msg_parts(b"s", b"", 0, 60)
    c.enqueue_msg(sub, head, mid, b"x" * 60, 60)
    assert not c.closed
    c.enqueue_msg(sub, head, mid, b"x" * 60, 60)
    assert c.closed and c.close_reason == REASON_SLOW_CONSUMER
    assert server.slow_consumers == 1
    assert c.transport.aborted and c.transport.writes == []  # dropped, not written, no -ERR
    c.enqueue(OK)  # nothing is queued on a closed connection
    assert c.out == b""


def test_control_lines_never_make_a_slow_consumer():
    server = make_server()
    c = Conn(server, max_pending=10)
    for _ in range(5):
        c.send_raw(PONG)
    assert not c.closed and len(c.out) > 10


def test_a_transport_buffer_over_max_pending_after_a_flush_is_a_slow_consumer():
    server = make_server()
    c = Conn(server, max_pending=100)
    c.transport.buffered = 101
    c.send_raw(PONG)
    server.clock.run_soon()
    assert c.closed and c.close_reason == REASON_SLOW_CONSUMER


def test_a_congested_receiver_stalls_its_publisher_until_it_drains_or_the_cap():
    server = make_server()
    rx, pub = Conn(server), Conn(server)
    head, mid = msg_parts(b"s", b"", 0, 1)
    rx.pause_writing()
    assert rx.congested
    rx.enqueue_msg(sub_of(rx), head, mid, b"x", 1, pub)
    assert pub.stalled and not pub.transport.reading and server.stalled_clients == 1
    rx.resume_writing()
    assert not pub.stalled and pub.transport.reading
    # without a drain, the stall ends after STALL_MAX_NS
    rx.pause_writing()
    rx.enqueue_run(msg_prefix(b"s", b"7", b"", 0, 1), [b"y"], 1, pub)
    assert pub.stalled
    server.clock.advance(STALL_MAX_NS)
    assert not pub.stalled and pub.transport.reading
    # internal publishes (src None) are never stalled, and a connection never stalls itself
    rx.enqueue_msgs(b"7", [(b"s", b"", None, b"z")])
    rx.enqueue_msg(sub_of(rx), head, mid, b"x", 1, rx)
    assert not rx.stalled


def test_congested_past_the_write_deadline_is_a_slow_consumer_and_frees_its_producers():
    server = make_server(write_deadline_ns=2_000_000_000)
    rx, pub = Conn(server), Conn(server)
    rx.pause_writing()
    rx.enqueue(b"MSG s 7 1\r\nx\r\n", 1, 1, pub)
    assert pub.stalled
    server.clock.advance(1_999_999_999)
    assert not rx.closed
    server.clock.advance(1)
    assert rx.closed and rx.close_reason == REASON_SLOW_CONSUMER_WD
    assert not pub.stalled and server.slow_consumers == 1


def test_a_graceful_close_writes_what_is_queued():
    server = make_server()
    c = Conn(server)
    c.send_raw(b"-ERR 'x'\r\n")
    c._close("Client Closed", None, graceful=True)
    assert c.transport.writes == [b"-ERR 'x'\r\n"] and c.transport.closed
    server.clock.run_soon()  # the flush scheduled before the close does nothing
    assert c.transport.writes == [b"-ERR 'x'\r\n"]


def test_a_turn_of_writes_to_many_connections_is_one_loop_callback_and_one_write_each():
    # issue 31 (fan-out to many connections): the flushes of a turn share one scheduled callback
    server = make_server()
    conns = [Conn(server) for _ in range(100)]
    scheduled = []
    server.flush_batch._call_soon = lambda cb: (scheduled.append(cb), server.clock.call_soon(cb))
    for rnd in range(3):
        for i, c in enumerate(conns):
            head, mid = msg_parts(b"sc.%d" % i, b"", 0, 1)
            c.enqueue_msg(sub_of(c), head, mid, b"%d" % rnd, 1)
    conns[7].send_raw(PONG)
    assert len(scheduled) == 1 and all(c.flush_pending for c in conns)
    server.clock.run_soon()
    assert [len(c.transport.writes) for c in conns] == [1] * 100
    assert conns[3].transport.writes == [b"MSG sc.3 7 1\r\n0\r\nMSG sc.3 7 1\r\n1\r\nMSG sc.3 7 1\r\n2\r\n"]
    assert not any(c.flush_pending for c in conns)
    # the next turn schedules anew
    conns[5].send_raw(PONG)
    assert len(scheduled) == 2
    server.clock.run_soon()
    assert conns[5].transport.writes[-1] == PONG
