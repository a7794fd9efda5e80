"""The ack hub's run handler (``ConsumerHub._on_acks``, fed by the server with a client's run of
reply-less acks) leaves every consumer exactly as the same acks applied one by one would."""

from __future__ import annotations

import random

import pytest

from natsd.protocol.events import OP_PUB, Run

from tests.unit.jetstream.test_consumer_harness import SEC, Harness, data

pytestmark = pytest.mark.unit


def _state(h: Harness) -> list:
    out = []
    for name, c in sorted(h.stream.consumers.items()):
        info = c.info()
        for k in ("created", "ts"):
            info.pop(k, None)
        for k in ("delivered", "ack_floor"):
            info[k].pop("last_active", None)
        out.append((name, info, sorted(c.t.pending.items()), sorted(c.t.rdc.items())))
    # what the engine sent (deliveries, advisories, samples), not the acks the test published
    published = [
        (m.subject, m.reply, m.payload)
        for m in h.ports.published
        if not m.subject.startswith(("$JS.API", "$JS.ACK", "$JS.EVENT"))
    ]
    advisories = []
    for subject, obj in h.account.advisories:
        obj = dict(obj() if callable(obj) else obj)
        obj.pop("id", None)
        advisories.append((subject, obj))
    return [
        out,
        published,
        advisories,
        sorted(h.store.state().__dict__.items()) if hasattr(h.store.state(), "__dict__") else h.store.state(),
    ]


def _pair(consumers: list[dict], n: int = 20, nak: bool = True, **stream_cfg) -> tuple[Harness, Harness, list]:
    """Two identical harnesses with ``consumers`` that each fetched ``n`` messages; returns the
    deliveries (of the first harness; the second's are identical)."""
    hs = []
    for _ in range(2):
        h = Harness(**stream_cfg)
        h.listen("$JS.EVENT.>")  # advisories and ack samples are sent only with interest
        for cfg in consumers:  # before the messages: interest retention keeps only those
            h.consumer(**cfg)
        for i in range(n):
            h.pub(f"orders.{i % 3}", f"x{i}")
        msgs = []
        for cfg in consumers:
            got = data(h.pull(cfg["durable_name"], {"batch": n, "no_wait": True}))
            # NAK a few so that some acks below are for redeliveries (delivery count 2, a
            # consumer sequence apart from the stream sequence)
            if not nak:
                msgs += got
                continue
            for m in got[1:4]:
                h.ack(m, b"-NAK")
            redelivered = data(h.pull(cfg["durable_name"], {"batch": 3, "expires": 100 * SEC}))
            assert len(redelivered) == 3 and all(m.reply.split(".")[4] == "2" for m in redelivered)
            msgs += [m for m in got if m not in got[1:4]] + redelivered
        hs.append((h, msgs))
    (h1, m1), (h2, m2) = hs
    assert [m.reply for m in m1] == [m.reply for m in m2]
    return h1, h2, m1


def _apply_both(h1: Harness, h2: Harness, acks: list[tuple[str, bytes]]) -> None:
    for subject, body in acks:
        h1.ports.publish(subject, "", None, body)
        h1.clock.run_soon()
    h2.account.consumer_hub._on_acks(
        Run(OP_PUB, b"", [s.encode() for s, _ in acks], b"", 0, [b for _, b in acks], [s for s, _ in acks])
    )
    h2.clock.run_soon()
    assert _state(h1) == _state(h2)


EXPLICIT = {"durable_name": "C", "ack_policy": "explicit", "filter_subject": "orders.1", "sample_freq": "100%"}


def test_in_order_plus_acks():
    h1, h2, msgs = _pair([EXPLICIT])
    _apply_both(h1, h2, [(m.reply, b"+ACK") for m in msgs])
    assert h2.stream.consumers["C"].info()["num_ack_pending"] == 0


MIXED = [
    EXPLICIT,
    {"durable_name": "D", "ack_policy": "explicit", "max_deliver": 2, "sample_freq": "100%"},
    {"durable_name": "E", "ack_policy": "all"},
]


@pytest.mark.parametrize("seed", range(6))
def test_one_consumer_shuffled_mixed_bodies(seed):
    # a run to one consumer: the vectorised path, with every kind of body in it
    rng = random.Random(seed)
    h1, h2, msgs = _pair([MIXED[seed % 3]])
    acks = [(m.reply, rng.choice([b"+ACK", b"", b"+OK", b"-NAK", b"+WPI", b"+TERM why", b"+NXT"])) for m in msgs]
    acks += rng.sample(acks, 4)  # duplicates
    rng.shuffle(acks)
    _apply_both(h1, h2, acks)


@pytest.mark.parametrize("seed", range(8))
def test_shuffled_mixed_bodies_and_odd_subjects(seed):
    rng = random.Random(seed)
    h1, h2, msgs = _pair(MIXED)
    acks = []
    for m in msgs:
        body = rng.choice([b"+ACK", b"+ACK", b"", b"+OK", b"-NAK", b"+WPI", b"+TERM because", b"+NXT"])
        acks.append((m.reply, body))
        if rng.random() < 0.1:
            acks.append((m.reply, b"+ACK"))  # duplicate
    t = msgs[0].reply.split(".")
    acks += [
        (".".join(t[:3] + ["NOPE"] + t[4:]), b"+ACK"),  # unknown consumer
        (".".join(t[:5] + ["x"] + t[6:]), b"+ACK"),  # bad number: counts as 0
        (".".join(t[:5] + ["999"] + t[6:]), b"+ACK"),  # never delivered
        (".".join(["$JS", "ACK", "dom", "hash"] + t[2:] + ["tok"]), b"+ACK"),  # v2 layout
        ("$JS.ACK.short", b"+ACK"),
    ]
    rng.shuffle(acks)
    _apply_both(h1, h2, acks)


@pytest.mark.parametrize("retention", ["interest", "workqueue"])
def test_retention_streams(retention):
    h1, h2, msgs = _pair([{"durable_name": "C", "ack_policy": "explicit"}], retention=retention)
    _apply_both(h1, h2, [(m.reply, b"+ACK") for m in msgs[::-1]])
    assert h2.store.state().msgs == 0


def test_one_consumer_run_with_a_bad_token_takes_the_per_message_path():
    h1, h2, msgs = _pair([EXPLICIT])
    acks = [(m.reply, b"+ACK") for m in msgs]
    t = acks[5][0].split(".")
    acks[5] = (".".join(t[:4] + ["1x"] + t[5:]), b"+ACK")
    _apply_both(h1, h2, acks)


def test_ack_sampling_and_max_ack_pending_resume():
    h1, h2, msgs = _pair(
        [{"durable_name": "C", "ack_policy": "explicit", "sample_freq": "100%", "max_ack_pending": 5}], nak=False
    )
    assert len(msgs) == 5
    _apply_both(h1, h2, [(m.reply, b"+ACK") for m in msgs])
    # the acks reopened delivery: the waiting request got the next messages, the same on both
    assert _state(h1) == _state(h2)


# -- the plain-ack run (Acks.ack_run / Tracking.ack_run): explicit, no sampling, limits -----------

PLAIN = {"durable_name": "C", "ack_policy": "explicit"}


def _apply_plain(h1: Harness, h2: Harness, acks: list[tuple[str, bytes]]) -> None:
    """_apply_both, and the keys noted for the next state delta are the same too."""
    _apply_both(h1, h2, acks)
    assert h1.stream.consumers["C"].t.pending.touched == h2.stream.consumers["C"].t.pending.touched


def _counting_runs(monkeypatch) -> list:
    from natsd.jetstream.consumer.acks import Acks

    calls: list = []
    orig = Acks.ack_run

    def counting(self, sseqs):
        calls.append(len(sseqs))
        return orig(self, sseqs)

    monkeypatch.setattr(Acks, "ack_run", counting)
    return calls


@pytest.mark.parametrize(
    "cfg,nak",
    [
        (PLAIN, False),
        (PLAIN, True),
        (dict(PLAIN, filter_subject="orders.1"), False),
        (dict(PLAIN, filter_subject="orders.1"), True),
        (dict(PLAIN, max_ack_pending=7), False),
    ],
)
def test_plain_acks_in_order_in_two_runs(monkeypatch, cfg, nak):
    # in order: each ack the lowest pending entry (consecutive sequences, or with the NAKed
    # redeliveries' consumer sequences out of line), in two runs, the last emptying pending
    calls = _counting_runs(monkeypatch)
    maxp = "max_ack_pending" in cfg
    h1, h2, msgs = _pair([cfg], n=30, nak=nak)
    acks = sorted(((m.reply, b"+ACK") for m in msgs), key=lambda a: int(a[0].split(".")[5]))
    half = len(acks) // 2
    _apply_plain(h1, h2, acks[:half])
    _apply_plain(h1, h2, acks[half:])
    # (at max_ack_pending, the acks let the no-wait request's remainder out: 7 more pending)
    assert calls and h2.stream.consumers["C"].info()["num_ack_pending"] == (7 if maxp else 0)


@pytest.mark.parametrize("seed", range(6))
def test_plain_acks_shuffled_with_duplicates_and_never_delivered(monkeypatch, seed):
    calls = _counting_runs(monkeypatch)
    rng = random.Random(seed)
    h1, h2, msgs = _pair([dict(PLAIN, max_ack_pending=12 if seed % 2 else 0)], n=40, nak=seed in (0, 2))
    acks = [(m.reply, b"+ACK") for m in msgs]
    acks += rng.sample(acks, 5)
    t = msgs[0].reply.split(".")
    if seed % 2:
        acks.append((".".join(t[:5] + ["999"] + t[6:]), b"+ACK"))  # not delivered: per message
    rng.shuffle(acks)
    cut = rng.randrange(1, len(acks))
    _apply_plain(h1, h2, acks[:cut])
    _apply_plain(h1, h2, acks[cut:])
    assert calls or seed % 2


def test_plain_acks_of_a_partly_acked_batch(monkeypatch):
    # the lowest pending entry acked one by one first, then a run starting above the floor
    calls = _counting_runs(monkeypatch)
    h1, h2, msgs = _pair([PLAIN], n=20, nak=False)
    acks = [(m.reply, b"+ACK") for m in msgs]
    _apply_plain(h1, h2, [acks[3]])
    _apply_plain(h1, h2, acks[5:12])  # above the floor: the floor stays
    _apply_plain(h1, h2, acks[:3])  # now up to 3, then the scan finds 4 pending
    _apply_plain(h1, h2, [acks[4]] + acks[12:])
    assert len(calls) == 3 and h2.stream.consumers["C"].info()["ack_floor"]["stream_seq"] == 20


@pytest.mark.parametrize("between", [False, True])
def test_filtered_consumer_in_order_acks_move_the_floor_once(monkeypatch, between):
    # plgd's consumers (plgd.*.<event>): in-order acks of stream sequences that are not
    # consecutive. With nothing else pending between them the run moves the floor once, as a
    # consecutive run does; with another entry pending between them (an ack left out), one by
    # one. Either way, the state one-by-one acks leave.
    from natsd.jetstream.consumer.tracking import Tracking

    h1, h2, msgs = _pair([dict(PLAIN, filter_subject="orders.1")], n=60, nak=False)
    acks = sorted(((m.reply, b"+ACK") for m in msgs), key=lambda a: int(a[0].split(".")[5]))
    if between:
        del acks[5]
    moves: list = []
    orig = Tracking._move_floor
    t2 = h2.stream.consumers["C"].t

    def counting(self, sseq, pdseq):
        if self is t2:
            moves.append(sseq)
        return orig(self, sseq, pdseq)

    monkeypatch.setattr(Tracking, "_move_floor", counting)
    _apply_plain(h1, h2, acks)
    assert len(moves) == (1 if not between else 5)
    floor = h2.stream.consumers["C"].info()["ack_floor"]
    assert floor["consumer_seq"] == (20 if not between else 5)
