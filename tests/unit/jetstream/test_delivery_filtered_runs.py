"""A consumer whose filter narrows the stream (plgd's ``plgd.*.<event>``, a literal subject,
several filters) takes the delivery fast paths too (Delivery.deliver_run / push_run, their runs
read with the store's ``load_filtered_run``), and gives exactly what the general loop gives
message for message (``_peek``: one ``load_next_msg`` per message), pass for pass: batches
ending inside runs and at the stream's end, removed and skipped sequences, headers,
max_ack_pending, the turn budget, flow control, a corrupt record (file store)."""

from __future__ import annotations

import pytest

from natsd.jetstream.consumer import TURN_BUDGET

from .test_consumer_harness import MS, SEC, Harness, data, statuses
from .test_delivery_fastpath import STORES, Run, _answer_fc, _corrupt, _small_window, both

pytestmark = [pytest.mark.unit, pytest.mark.timeout(120)]

HDR = b"NATS/1.0\r\nK: v\r\n\r\n"
SUBJECTS = ["plgd.>"]
EVENTS = ("online", "offline", "registered")
# 40 devices: a wildcard over the devices matches more than the per-subject search limit (16)
FILTERS = [
    {"filter_subject": "plgd.*.online"},
    {"filter_subject": "plgd.d3.offline"},
    {"filter_subjects": ["plgd.*.online", "plgd.d7.registered"]},
]
IDS = ["wildcard", "literal", "several"]


def _pub(h: Harness, n: int, start: int = 0, hdr_every: int = 0) -> None:
    for i in range(start, start + n):
        hdr = HDR if hdr_every and i % hdr_every == 0 else None
        h.stream.publish(f"plgd.d{(i * 7) % 40}.{EVENTS[i % 3]}", b"m%05d" % i, hdr)
    h.store.flush()
    h.clock.run_soon()


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("flt", FILTERS, ids=IDS)
def test_pull_batches_removed_sequences_and_stream_end(tmp_path, monkeypatch, store, flt):
    def scenario(r: Run) -> None:
        h = r.h
        _pub(h, 300, hdr_every=7)
        for seq in (10, 11, 40, 61, 300):
            h.store.remove_msg(seq)
        h.store.skip_msg()
        r.consumer(durable_name="D", ack_policy="explicit", **flt)
        inbox = h.pull("D", {"batch": 9, "expires": 5 * SEC})
        h.pull("D", {"batch": 20, "expires": 5 * SEC, "idle_heartbeat": SEC}, inbox=inbox)
        h.pull("D", {"batch": 500, "expires": 5 * SEC}, inbox=inbox)  # reaches the stream's end
        n = len(data(inbox))
        assert n > 0
        _pub(h, 120, start=300)  # new messages (every subject's) go to the waiting request
        assert len(data(inbox)) > n
        for m in data(inbox)[:12]:
            h.ack(m)
        h.advance(1500 * MS)
        h.advance(6 * SEC)  # the request expires
        assert "NATS/1.0 408 Request Timeout" in statuses(inbox)

    slow, fast = both(tmp_path, monkeypatch, scenario, store, subjects=SUBJECTS)
    assert fast.c.info()["num_pending"] == 0


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("flt", FILTERS, ids=IDS)
def test_pull_max_ack_pending_and_turn_budget(tmp_path, monkeypatch, store, flt):
    def scenario(r: Run) -> None:
        h = r.h
        _pub(h, 3 * TURN_BUDGET + 400)
        r.consumer(durable_name="D", ack_policy="explicit", max_ack_pending=30, **flt)
        inbox = h.pull("D", {"batch": 2000, "expires": 50 * SEC})
        first = len(data(inbox))
        assert 0 < first <= 30  # max_ack_pending (the literal filter has 16 messages in all)
        for m in data(inbox)[:20]:
            h.ack(m)
        assert len(data(inbox)) >= first
        c = r.c
        c.cfg.max_ack_pending = -1
        c.t.maxp = 0
        for m in data(inbox)[20:]:
            h.ack(m)
        c.delivery.kick()
        h.clock.run_soon()  # the rest, over more than one turn budget for the wildcard

    both(tmp_path, monkeypatch, scenario, store, subjects=SUBJECTS)


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("flt", FILTERS, ids=IDS)
def test_push_flow_control_acks_and_new_messages(tmp_path, monkeypatch, store, flt):
    def scenario(r: Run) -> None:
        h = r.h
        sub = h.listen("push.d")
        c = r.consumer(
            durable_name="D",
            deliver_subject="push.d",
            ack_policy="explicit",
            max_ack_pending=400,
            flow_control=True,
            idle_heartbeat=5 * SEC,
            **flt,
        )
        _small_window(c, 2000)
        _pub(h, 2 * TURN_BUDGET + 600, hdr_every=9)
        answered: set = set()
        for _ in range(500):
            if not _answer_fc(h, sub, answered):
                break
        got = data(sub)
        assert got
        for m in got[:50]:
            h.ack(m)
        _pub(h, 100, start=2 * TURN_BUDGET + 600)
        h.advance(6 * SEC)
        while _answer_fc(h, sub, answered):
            pass

    both(tmp_path, monkeypatch, scenario, store, subjects=SUBJECTS)


def test_corrupt_record_inside_a_filtered_run(tmp_path, monkeypatch):
    def scenario(r: Run) -> None:
        h = r.h
        _pub(h, 120)
        h.restart()  # nothing cached
        _corrupt(h.store_dir, h, 31)  # plgd.d..online (31 - 1 = 30, 30 % 3 == 0)
        _corrupt(h.store_dir, h, 34)
        c = r.consumer(durable_name="D", ack_policy="explicit", filter_subject="plgd.*.online")
        h.store.register_storage_updates(lambda md, bd, seq, subj: seq and c.on_msg_removed(seq))
        inbox = h.pull("D", {"batch": 25, "expires": 5 * SEC})
        got = [m.payload for m in data(inbox)]
        assert len(got) == 25 and b"m00030" not in got and b"m00033" not in got
        assert h.store.state().lost_msgs == [31, 34]
        h.pull("D", {"batch": 50, "expires": 5 * SEC}, inbox=inbox)
        assert len(data(inbox)) == 38

    both(tmp_path, monkeypatch, scenario, "file", subjects=SUBJECTS)


def test_filtered_push_consumer_reads_runs_not_messages(monkeypatch):
    """The plgd shape: new messages reach a push consumer on plgd.*.<event> through
    load_filtered_run, with no load_next_msg per message."""
    h = Harness(subjects=SUBJECTS)
    sub = h.listen("push.d")
    h.consumer(durable_name="D", deliver_subject="push.d", ack_policy="explicit", filter_subject="plgd.*.online")
    calls = {"next": 0, "runs": 0}
    orig_next, orig_run = h.store.load_next_msg, h.store.load_filtered_run

    def next_msg(*a):
        calls["next"] += 1
        return orig_next(*a)

    def run(*a):
        calls["runs"] += 1
        return orig_run(*a)

    monkeypatch.setattr(h.store, "load_next_msg", next_msg)
    monkeypatch.setattr(h.store, "load_filtered_run", run)
    _pub(h, 900)
    assert len(data(sub)) == 300
    assert calls["next"] == 0 and 0 < calls["runs"] < 5
