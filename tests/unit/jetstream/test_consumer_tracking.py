"""Tracking alone: the consumer's cursor, pending acks, redeliveries and ack floor, with no
stream, no ports and no clock (times are plain numbers passed in)."""

from __future__ import annotations

import copy
import random

import pytest

from natsd.jetstream.consumer.tracking import Tracking
from natsd.store.base import ConsumerState, Pending, SequencePair

SEC = 1_000_000_000


def _deliver(t: Tracking, seq: int, now: int) -> int:
    """What the delivery pass commits for a first delivery of ``seq``; returns its dseq."""
    dseq = t.dseq
    p = t.pending.get(seq)
    t.pending[seq] = (dseq if p is None else p[0], now)
    t.dseq = dseq + 1
    t.sseq = seq + 1
    t.dlv_sseq = seq
    return dseq


def _tracking(n: int, *, max_deliver: int = -1, maxp: int = 1000, start: int = 1, now: int = 0) -> Tracking:
    t = Tracking(True, max_deliver, maxp)
    t.start_at(start)
    for seq in range(start, start + n):
        _deliver(t, seq, now)
    return t


def test_in_order_acks_move_the_floor_one_by_one():
    t = _tracking(3)
    assert t.ack(1) == (1, 0)
    assert (t.adflr, t.asflr) == (1, 1)
    t.ack(2)
    assert (t.adflr, t.asflr) == (2, 2)
    t.ack(3)
    assert (t.adflr, t.asflr) == (3, 3) and not t.pending
    assert t.ack(3) is None  # twice: nothing pending any more


def test_out_of_order_acks_hold_the_floor_until_the_lowest_goes_then_jump():
    t = _tracking(5)
    t.ack(2)
    t.ack(3)
    assert (t.adflr, t.asflr) == (0, 0)
    t.ack(1)  # the floor jumps to just below the next pending entry (4)
    assert (t.adflr, t.asflr) == (3, 3)
    assert t.reported_floor() == (3, 3)


def test_floor_skips_stream_gaps_below_the_next_pending_entry():
    t = Tracking(True, -1, 1000)
    t.start_at(1)
    for seq in (1, 5, 9):  # a filtered consumer: deliveries far apart in the stream
        _deliver(t, seq, 0)
    t.ack(1)
    assert (t.adflr, t.asflr) == (1, 4)  # consumer seq 1; stream seq just below 5


def test_last_ack_of_a_consumer_that_looked_ahead_reports_the_last_delivered():
    t = _tracking(2)
    t.sseq = 10  # the cursor looked past the end of what matched
    t.ack(1)
    t.ack(2)
    assert (t.adflr, t.asflr) == (2, 9)  # in memory, as the reference
    assert t.reported_floor() == (2, 2)  # what INFO shows and the state persists
    assert t.state().ack_floor == SequencePair(2, 2)


def test_ack_upto_acks_everything_below_and_ignores_acks_below_the_floor():
    t = Tracking(False, -1, 1000)
    t.start_at(1)
    for seq in range(1, 6):
        _deliver(t, seq, 0)
    t.rdc[2] = 1
    t.add_rdq([2])
    assert t.ack_upto(3, 3) == [1, 2, 3]
    assert sorted(t.pending) == [4, 5] and not t.rdc and not t.rdq
    assert (t.adflr, t.asflr) == (3, 3)
    assert t.ack_upto(2, 2) is None  # below the floor
    assert t.ack_upto(5, 7) == [4, 5, 7]  # the acked sequence itself is always reported


def test_needs_ack():
    t = _tracking(3)
    t.ack(1)
    assert not t.needs_ack(1)
    assert t.needs_ack(2) and t.needs_ack(3)
    assert t.needs_ack(4)  # not delivered yet
    t.ack(2)
    t.rdc[2] = 1  # a redelivery count keeps a message needed
    assert t.needs_ack(2)
    n = Tracking(False, -1, 1000)  # ack none / all: everything above the floor
    n.start_at(1)
    n.asflr = 5
    assert not n.needs_ack(5) and n.needs_ack(6)


def test_expire_queues_what_ran_out_oldest_first_and_restarts_their_wait():
    t = Tracking(True, -1, 1000)
    t.start_at(1)
    _deliver(t, 1, 0)
    _deliver(t, 2, 2 * SEC)
    _deliver(t, 3, 1 * SEC)
    _deliver(t, 4, 9 * SEC)
    ex = t.expire(now=30 * SEC, first=1, ack_wait=30 * SEC, backoff=None, extra=7)
    assert ex.redeliver == [1] and t.rdq == [1] and ex.changed
    assert t.pending[1] == (1, 30 * SEC)  # its wait starts again from the oldest deadline
    assert ex.next_check == 1 * SEC + 7  # seq 3's deadline comes next
    ex = t.expire(now=32 * SEC, first=1, ack_wait=30 * SEC, backoff=None, extra=7)
    assert t.rdq == [1, 2, 3]  # already queued ones are not queued twice
    assert ex.redeliver == [2, 3]
    assert t.pending[2] == (2, 32 * SEC) and t.pending[3] == (3, 31 * SEC)


def test_expire_with_backoff_uses_the_redelivery_count_step():
    t = _tracking(2)
    t.rdc[1] = 1  # delivered twice: the second step
    ex = t.expire(now=3 * SEC, first=1, ack_wait=30 * SEC, backoff=[1 * SEC, 5 * SEC, 10 * SEC], extra=0)
    assert ex.redeliver == [2]  # first step (1s) ran out; seq 1 is at the second (5s)
    assert ex.next_check == 2 * SEC  # seq 1's second step has 2s to go


def test_expire_drops_messages_at_max_deliver():
    t = _tracking(4, max_deliver=2, maxp=4)
    t.rdc[3] = 2  # delivered twice already
    ex = t.expire(now=60 * SEC, first=1, ack_wait=30 * SEC, backoff=None, extra=0)
    assert ex.maxed == [(3, 2)] and 3 not in t.pending and t.rdc[3] == 2
    assert ex.was_full  # pending was at max_ack_pending: delivery can resume
    assert ex.redeliver == [1, 2, 4]
    assert t.reported_floor() == (0, 0)  # nothing was acked


def test_expire_forgets_entries_below_the_stream():
    t = _tracking(4)
    ex = t.expire(now=1 * SEC, first=3, ack_wait=30 * SEC, backoff=None, extra=0)
    assert sorted(t.pending) == [3, 4] and ex.changed and not ex.redeliver
    assert (t.adflr, t.asflr) == (2, 2)
    assert ex.next_check == 29 * SEC


def test_expire_with_nothing_pending_left_resets_floor_and_queue():
    t = _tracking(2)
    ex = t.expire(now=0, first=5, ack_wait=30 * SEC, backoff=None, extra=0)
    assert ex.next_check == -1 and not t.pending and not t.rdq
    assert (t.adflr, t.asflr) == (t.dseq - 1, t.sseq - 1)


def test_max_deliver_floor_keeps_the_reported_floor_until_the_next_ack():
    t = _tracking(3, max_deliver=1)
    assert t.max_delivered(1) == 1
    assert (t.adflr, t.asflr) == (1, 1)
    assert t.reported_floor() == (0, 0)
    t.ack(2)
    assert t.reported_floor() == (2, 2)


def test_drop_redelivery_past_max_deliver():
    t = _tracking(2, max_deliver=2)
    t.add_rdq([1])
    t.rdc[1] = 1
    t.drop_redelivery(1, 3)
    assert not t.rdq and 1 not in t.pending and t.rdc[1] == 2


def test_progress_and_nak_later_move_the_delivery_time():
    t = _tracking(2)
    assert t.progress(1, 5 * SEC) and t.pending[1] == (1, 5 * SEC)
    assert not t.progress(9, 5 * SEC)
    t.add_rdq([2])
    assert t.nak_later(2, 7 * SEC)
    assert t.pending[2] == (2, 7 * SEC) and not t.rdq


def test_purge_counts_missing_pending_messages_as_acked():
    t = _tracking(6)
    t.add_rdq([5, 6])
    gone = {5}
    assert t.purge(3, lambda seq: seq not in gone)
    # 6 stays pending but leaves the redelivery queue: it is below the next delivery (7), and the
    # reference keeps only queued sequences at or past it (6 returns at its ack wait)
    assert sorted(t.pending) == [3, 4, 6] and t.rdq == []
    assert t.adflr == 5 and t.asflr == 2
    assert not _tracking(2).purge(1, lambda seq: True)


def test_state_round_trip_and_touched_keys():
    t = _tracking(3)
    t.ack(2)
    t.rdc[3] = 1
    st = t.state()
    assert st == ConsumerState(
        delivered=SequencePair(3, 3),
        ack_floor=SequencePair(0, 0),
        pending={1: Pending(1, 0), 3: Pending(3, 0)},
        redelivered={3: 1},
    )
    u = Tracking(True, -1, 1000)
    u.load(st)
    assert u.state() == st and (u.sseq, u.dseq) == (4, 4)
    assert not u.pending.touched and not u.rdc.touched  # the store has all of it
    assert t.pending.take_touched() == {1, 2, 3} and not t.pending.touched
    t.reset(10)
    assert t.pending.reset and (t.sseq, t.dseq, t.asflr) == (10, 1, 9) and not t.rdc


def test_clamp_to_the_first_stream_sequence():
    t = Tracking(True, -1, 1000)
    t.start_at(1)
    t.clamp(5)
    assert (t.sseq, t.asflr) == (5, 4)


def _snapshot(t: Tracking) -> tuple:
    return (
        t.sseq,
        t.dseq,
        t.adflr,
        t.asflr,
        t.dlv_sseq,
        list(t.pending.items()),
        sorted(t.pending.touched),
        dict(t.rdc),
        sorted(t.rdc.touched),
        list(t.rdq),
        t.rep_floor,
    )


def _random_tracking(rng, n: int, gaps: bool) -> Tracking:
    """Delivered ``n`` messages; with ``gaps``, some sequences skipped (as a filtered consumer),
    some redelivered (a new consumer sequence, the first one kept in pending) and some acked,
    else only the first few acked; some queued again."""
    t = Tracking(True, -1, 100_000)
    t.start_at(1)
    seq = 1
    for _ in range(n):
        seq += 1 if not gaps or rng.random() < 0.8 else rng.randrange(2, 5)
        _deliver(t, seq, 0)
    if gaps:
        for s in rng.sample(sorted(t.pending), n // 10):
            t.rdc[s] = 1
            t.dseq += 1  # a redelivery: consumer sequence used, pending keeps the first one
        for s in rng.sample(sorted(t.pending), n // 10):
            t.ack(s)
    else:
        for s in sorted(t.pending)[: rng.randrange(0, 5)]:
            t.ack(s)
        for s in rng.sample(sorted(t.pending), 5):
            t.rdc[s] = 1
    t.add_rdq(rng.sample(sorted(t.pending), 3))
    if rng.random() < 0.5:
        t.sseq += 3  # a filtered consumer looked ahead past its last delivery
        t.rep_floor = (1, 1)  # left from an earlier empty pending list
    t.pending.take_touched()
    t.rdc.take_touched()
    return t


@pytest.mark.parametrize("seed", range(40))
def test_ack_run_does_what_acks_one_by_one_do(seed):
    """Tracking.ack_run (the hub's run of plain +ACKs) against Tracking.ack in a loop: the same
    state after (cursor, floor, pending in order, the keys noted for the next delta write,
    redelivery counts and queue, the reported floor), for runs in order from the floor (its
    one-step path), shuffled, with duplicates and never-pending sequences, up to empty."""
    rng = random.Random(seed)
    base = _random_tracking(rng, 60, gaps=seed % 10 >= 5)
    keys = sorted(base.pending)
    shape = seed % 5
    if shape == 0:  # in order from the floor, all of them
        sseqs = keys
    elif shape == 1:  # in order from the floor, a prefix
        sseqs = keys[: rng.randrange(1, len(keys))]
    elif shape == 2:  # consecutive stream sequences from the lowest pending one
        sseqs = list(range(keys[0], keys[0] + rng.randrange(2, 12)))
    elif shape == 3:  # in order, starting above the floor
        sseqs = keys[rng.randrange(1, 10) :]
    else:  # shuffled, duplicates, not pending
        sseqs = keys + rng.sample(keys, 5) + [keys[-1] + 7, 0]
        rng.shuffle(sseqs)
    one, run = copy.deepcopy(base), copy.deepcopy(base)
    acked = [s for s in sseqs if one.ack(s) is not None]
    assert run.ack_run(list(sseqs)) == acked
    assert _snapshot(run) == _snapshot(one)


def test_ack_run_in_order_from_the_floor_takes_one_step(monkeypatch):
    t = _tracking(50)
    t.pending.take_touched()
    seen = []
    orig = Tracking._move_floor
    monkeypatch.setattr(Tracking, "_move_floor", lambda self, s, d: (seen.append((s, d)), orig(self, s, d)))
    assert t.ack_run(list(range(1, 21))) == list(range(1, 21))
    assert seen == [(20, 20)] and (t.adflr, t.asflr) == (20, 20) and sorted(t.pending.touched) == list(range(1, 21))
