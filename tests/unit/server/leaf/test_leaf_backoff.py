"""Reconnect delays of a leafnode remote: doubled per consecutive failure up to 8x, plus jitter of at
most one interval; a loop detection imposes its 30 s; a successful link resets the count."""

from __future__ import annotations

import pytest

from natsd.config.leafnodes import LeafNodeOptions, RemoteLeafOptions
from natsd.server.leaf.manager import _Remote
from natsd.server.leaf.node import LOOP_DELAY_NS

pytestmark = pytest.mark.unit

S = 1_000_000_000


class _Clock:
    def __init__(self) -> None:
        self.delays: list[int] = []

    def call_later(self, ns, cb):
        self.delays.append(ns)

        class _T:
            def cancel(self) -> None:
                pass
        return _T()


class _Server:
    def __init__(self) -> None:
        self.clock = _Clock()


class _Manager:
    def __init__(self) -> None:
        self.server = _Server()
        self.options = LeafNodeOptions(reconnect_ns=S)


def _fail(r: _Remote) -> int:
    r.failures += 1
    r._timer = None
    r._schedule()
    return r.manager.server.clock.delays[-1]


def test_backoff_doubles_and_caps_with_jitter():
    r = _Remote(_Manager(), RemoteLeafOptions(urls=["nats-leaf://h:1"]))
    delays = [_fail(r) for _ in range(6)]
    for d, factor in zip(delays, [1, 2, 4, 8, 8, 8]):
        assert factor * S <= d < (factor + 1) * S
    r.link_up(object())
    assert r.failures == 0


def test_loop_detection_delays_next_attempt():
    r = _Remote(_Manager(), RemoteLeafOptions(urls=["nats-leaf://h:1"]))
    r.delay_next(LOOP_DELAY_NS)
    assert _fail(r) >= LOOP_DELAY_NS
    assert _fail(r) < 30 * S  # only once
