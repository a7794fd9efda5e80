"""Reconnect delays and URL order of a leafnode remote, as nats-server's leafNodeCfg: a failed dial
waits ``reconnect`` plus a jitter below one interval (no doubling); a link that closed waits exactly
``reconnect``; a loop detection imposes its 30 s once; the URLs are shuffled once unless
``dont_randomize`` and walked in a circle, the next dial going to the next URL."""

from __future__ import annotations

import random

import pytest

from natsd.config.leafnodes import LeafNodeOptions, RemoteLeafOptions
from natsd.server.leaf.manager import _Remote
from natsd.server.leaf.node import LOOP_DELAY_NS
from natsd.server.leaf.urls import RemoteUrls, dial_failure_delay_ns, link_closed_delay_ns

pytestmark = [pytest.mark.unit, pytest.mark.timeout(10)]

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
    def __init__(self, seed: int = 1) -> None:
        self.server = _Server()
        self.options = LeafNodeOptions(reconnect_ns=S)
        self.rng = random.Random(seed)


class _Link:
    ready = True


def _fail(r: _Remote) -> int:
    r._timer = None
    r._failed("h", 1, "connection refused")
    return r.manager.server.clock.delays[-1]


def test_dial_failures_wait_one_interval_plus_jitter_without_doubling():
    r = _Remote(_Manager(), RemoteLeafOptions(urls=["nats-leaf://h:1"]))
    delays = [_fail(r) for _ in range(8)]
    assert all(S <= d < 2 * S for d in delays)
    assert len(set(delays)) > 1  # jittered
    link = _Link()
    r.link_up(link)
    assert r.failures == 0


def test_a_closed_link_redials_after_exactly_the_interval():
    r = _Remote(_Manager(), RemoteLeafOptions(urls=["nats-leaf://h:1"]))
    link = _Link()
    r.link_up(link)
    r.link_down(link)
    assert r.manager.server.clock.delays == [S]


def test_loop_detection_delays_next_attempt():
    r = _Remote(_Manager(), RemoteLeafOptions(urls=["nats-leaf://h:1"]))
    r.delay_next(LOOP_DELAY_NS)
    assert _fail(r) >= LOOP_DELAY_NS
    assert _fail(r) < 30 * S  # only once


URLS = [f"nats-leaf://h{i}:7422" for i in range(5)]


def test_urls_are_shuffled_once_unless_dont_randomize():
    orders = {tuple(RemoteUrls(URLS, randomize=True, rng=random.Random(seed)).urls) for seed in range(20)}
    assert len(orders) > 5 and all(sorted(o) == URLS for o in orders)
    fixed = RemoteUrls(URLS, randomize=False, rng=random.Random(3))
    assert fixed.urls == URLS and fixed.pick_next() == URLS[0]
    r = _Remote(_Manager(seed=7), RemoteLeafOptions(urls=URLS, no_randomize=True))
    assert r.urls.pick_next() == URLS[0]
    firsts = {_Remote(_Manager(seed=s), RemoteLeafOptions(urls=URLS)).urls.pick_next() for s in range(30)}
    assert len(firsts) > 1  # randomized remotes start on different hub nodes


def test_each_attempt_moves_on_to_the_next_url_in_a_circle():
    u = RemoteUrls(URLS[:3], randomize=False, rng=random.Random(0))
    assert [u.pick_next() for _ in range(7)] == [URLS[0], URLS[1], URLS[2], URLS[0], URLS[1], URLS[2], URLS[0]]
    one = RemoteUrls(URLS[:1], randomize=True, rng=random.Random(0))
    assert [one.pick_next() for _ in range(3)] == [URLS[0]] * 3


def test_delay_functions():
    rng = random.Random(5)
    assert all(S <= dial_failure_delay_ns(S, rng) < 2 * S for _ in range(100))
    assert dial_failure_delay_ns(0, rng) == 0
    assert link_closed_delay_ns(S) == S


def test_the_hubs_info_adds_its_clusters_urls_after_the_configured_ones():
    u = RemoteUrls(["nats-leaf://a:1", "nats-leaf://user:pw@b:2"], randomize=True, rng=random.Random(4))
    assert u.pick_next() in ("nats-leaf://a:1", "nats-leaf://user:pw@b:2")
    u.update_from_info(["nats-leaf://a:1", "nats-leaf://user:pw@b:2"], ["b:2", "c:3", "A:1", "c:3"])
    # configured order first (the shuffle is gone, as in nats-server), then what the hub named
    assert u.urls == ["nats-leaf://a:1", "nats-leaf://user:pw@b:2", "nats-leaf://c:3"]
    u.current = "nats-leaf://a:1"
    assert [u.pick_next() for _ in range(3)] == ["nats-leaf://user:pw@b:2", "nats-leaf://c:3", "nats-leaf://a:1"]
