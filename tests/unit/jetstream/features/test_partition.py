"""Per-key ordered parallel pull consumers (natsd.partition_key): a checker under redeliveries,
naks and client churn, key spreading and stickiness, and the config checks."""

from __future__ import annotations

import itertools
import random

import pytest

SEC = 1_000_000_000
MS = 1_000_000


def _consumer(env, key="{{wildcard(1)}}", filt="ord.*", **extra):
    cfg = {
        "durable_name": "P",
        "ack_policy": "explicit",
        "ack_wait": SEC,
        "filter_subject": filt,
        "max_ack_pending": 1000,
        "metadata": {"natsd.partition_key": key},
        **extra,
    }
    return env.api("$JS.API.CONSUMER.CREATE.ORD.P", {"stream_name": "ORD", "config": cfg})


class Clients:
    """Pull clients on their own inboxes; ``deliveries`` in arrival order (client, key, seq, dc)."""

    def __init__(self, env) -> None:
        self.env = env
        self.seen = 0
        self.deliveries: list[tuple[str, str, int, int, str]] = []

    def pull(self, client: str, batch: int, expires: int = 5 * SEC, run: bool = True) -> None:
        self.env.ports.request(
            "$JS.API.CONSUMER.MSG.NEXT.ORD.P", {"batch": batch, "expires": expires}, reply=f"_INBOX.{client}"
        )
        if run:
            self.env.clock.run_soon()

    def new(self) -> list:
        self.env.clock.run_soon()
        msgs = self.env.inbox.msgs[self.seen :]
        self.seen = len(self.env.inbox.msgs)
        out = []
        for m in msgs:
            if m.status is not None or not m.reply.startswith("$JS.ACK."):
                continue
            tok = m.reply.split(".")
            d = (m.subject.split(".", 1)[1], m.shown.split(".")[1], int(tok[5]), int(tok[4]), m.reply)
            self.deliveries.append(d)
            out.append(d)
        return out


def _check_order(deliveries, acked_at) -> None:
    """Per key: stream sequences never go down; a new sequence of a key is delivered only after
    the previous one was acked (or terminated), never while it is still in flight."""
    by_key: dict[str, list[tuple[int, int]]] = {}
    for i, (_client, key, seq, _dc, _r) in enumerate(deliveries):
        by_key.setdefault(key, []).append((i, seq))
    for key, ds in by_key.items():
        seqs = [s for _, s in ds]
        assert seqs == sorted(seqs), f"key {key} out of order: {seqs}"
        for (_i0, s0), (i1, s1) in itertools.pairwise(ds):
            if s1 != s0:
                assert s0 in acked_at and acked_at[s0] <= i1, f"key {key}: {s1} delivered while {s0} in flight"


@pytest.mark.parametrize("seed", range(5))
def test_order_per_key_under_redeliveries_naks_and_client_churn(env, seed) -> None:
    rng = random.Random(seed)
    env.create("ORD", subjects=["ord.>"])
    assert "error" not in _consumer(env)
    keys = [f"k{i}" for i in range(12)]
    n = 300
    for i in range(n):
        env.pub(f"ord.{rng.choice(keys)}", str(i).encode())
    cl = Clients(env)
    clients = [f"c{i}" for i in range(4)]
    acked_at: dict[int, int] = {}
    done: set[int] = set()
    for _ in range(400):
        live = clients[: rng.randrange(1, 5)]  # churn: some clients stop pulling for a while
        for c in live:
            if rng.random() < 0.7:
                cl.pull(c, rng.randrange(1, 8), expires=rng.choice([200 * MS, SEC, 5 * SEC]))
        for _client, _key, seq, _dc, reply in cl.new():
            r = rng.random()
            if r < 0.6:
                env.ports.publish(reply, "", None, b"+ACK")
                acked_at.setdefault(seq, len(cl.deliveries))
                done.add(seq)
            elif r < 0.75:
                env.ports.publish(reply, "", None, b"-NAK")
            elif r < 0.78:
                env.ports.publish(reply, "", None, b"+TERM")
                acked_at.setdefault(seq, len(cl.deliveries))
                done.add(seq)
            # else: the client dies with it: the ack wait runs out
        env.clock.run_soon()
        env.clock.advance(rng.choice([0, 100 * MS, 600 * MS, 1100 * MS]))
        env.clock.run_soon()
        if len(done) == n:
            break
    _check_order(cl.deliveries, acked_at)
    assert len(done) > n // 2  # it made progress
    assert len({c for c, *_ in cl.deliveries}) >= 2  # keys were spread over clients


def test_keys_spread_and_stick_while_the_client_pulls(env) -> None:
    env.create("ORD", subjects=["ord.>"])
    assert "error" not in _consumer(env)
    for i in range(4):
        for k in ("a", "b", "c", "d"):
            env.pub(f"ord.{k}", f"{k}{i}".encode())
    cl = Clients(env)
    cl.pull("x", 10, expires=30 * SEC, run=False)
    cl.pull("y", 10, expires=30 * SEC, run=False)
    first = cl.new()
    # One message per key in flight: the four first messages, spread over both clients.
    assert sorted((k, s) for _c, k, s, _d, _r in first) == [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    owners = {k: c for c, k, *_ in first}
    assert set(owners.values()) == {"x", "y"}
    for *_x, reply in first:
        env.ports.publish(reply, "", None, b"+ACK")
    second = cl.new()
    # Each key's next message went to the client that had it (both still have requests waiting).
    assert sorted(k for _c, k, *_ in second) == ["a", "b", "c", "d"]
    assert all(owners[k] == c for c, k, *_ in second)
    assert [s for _c, k, s, *_ in second if k == "a"] == [5]


def test_a_key_moves_when_its_client_goes_away(env) -> None:
    env.create("ORD", subjects=["ord.>"])
    assert "error" not in _consumer(env)
    for i in range(3):
        env.pub("ord.a", f"a{i}".encode())
    cl = Clients(env)
    cl.pull("x", 1, expires=SEC)
    ((_c, _k, seq, _d, _reply),) = cl.new()
    assert (_c, seq) == ("x", 1)
    cl.pull("y", 5, expires=30 * SEC)
    assert cl.new() == []  # a1 is in flight with x: nothing of key a for y
    env.clock.advance(2 * SEC)  # x never acks and its request expired: a1 times out
    env.clock.run_soon()
    got = cl.new()
    assert [(c, s, d) for c, _k, s, d, _r in got] == [("y", 1, 2)]  # redelivered to y, in order
    env.ports.publish(got[0][4], "", None, b"+ACK")
    got = cl.new()
    assert [(c, s) for c, _k, s, _d, _r in got] == [("y", 2)]


def test_header_key_and_restart(env) -> None:
    env.create("ORD", subjects=["ord.>"])
    assert "error" not in _consumer(env, key="header:Tenant", filt="ord.>")
    for i in range(4):
        env.pub("ord.x", str(i).encode(), headers={"Tenant": "t1" if i % 2 == 0 else "t2"})
    cl = Clients(env)
    cl.pull("x", 10, expires=30 * SEC)
    got = cl.new()
    assert [s for *_a, s, _d, _r in [(c, k, s, d, r) for c, k, s, d, r in got]] == [1, 2]
    env.restart()
    cl.seen = len(env.inbox.msgs)
    cl.pull("z", 10, expires=30 * SEC)
    assert cl.new() == []  # 1 and 2 are still in flight after the restart
    env.clock.advance(2 * SEC)
    env.clock.run_soon()
    got = cl.new()
    assert sorted((s, d) for _c, _k, s, d, _r in got) == [(1, 2), (2, 2)]  # redelivered, 3/4 wait


@pytest.mark.parametrize(
    "cfg, text",
    [
        ({"filter_subject": "ord.*", "deliver_subject": "push.x"}, "needs a pull consumer"),
        ({"filter_subject": "ord.*", "ack_policy": "all"}, "needs ack policy explicit"),
        ({"filter_subject": "ord.>"}, "has no wildcard 1"),
        ({"filter_subject": "ord.*", "metadata": {"natsd.partition_key": "{{token(1)}}"}}, "is not"),
    ],
)
def test_refused_configs(env, cfg, text) -> None:
    env.create("ORD", subjects=["ord.>"])
    c = {"durable_name": "P", "ack_policy": "explicit", "metadata": {"natsd.partition_key": "{{wildcard(1)}}"}, **cfg}
    r = env.api("$JS.API.CONSUMER.CREATE.ORD.P", {"stream_name": "ORD", "config": c})
    assert r["error"]["err_code"] == 19001 and text in r["error"]["description"], r
