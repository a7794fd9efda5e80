"""The fast paths (Delivery.deliver_run for pull, Delivery.push_run for push, store load_run)
give exactly what the general delivery loop gives, message for message and pass for pass.

Every scenario runs twice, over a memory and a file store: once with ports that take a batch
(``deliver_many``: the fast path is taken where it applies) and once with ports that deliver one
message at a time (no ``deliver_many``: the fast path never applies and the general loop serves
every request). Both record every message the engine sends (subject, ack reply, headers,
payload) and the consumer's state after every delivery pass; the two records must be equal, and
the fast run must really have taken the fast path. The boundaries: a request's batch ending inside a run, the end
of the stream inside a request, max_ack_pending reached inside a run, deleted and skipped
sequences inside a run, a corrupt record inside a run (file store), the turn budget, headers,
several waiting requests, max_bytes, expiry and heartbeats, ack none; for push: flow-control
windows cutting runs (the request after the message that crossed half the window, the stop past
the whole window, a message bigger than half the window extending what the answer covers),
answers arriving late or stale, headers, removed sequences, max_ack_pending, interest coming and
going, the turn budget.
"""

from __future__ import annotations

import os

import pytest

from natsd.jetstream.consumer import TURN_BUDGET, Consumer
from natsd.jetstream.consumer import push as push_mod
from natsd.jetstream.consumer.delivery import Delivery
from natsd.store.file.layout import MSGS_DIR

from .test_consumer_harness import MS, SEC, Harness, data, statuses

HDR = b"NATS/1.0\r\nK: v\r\n\r\n"


def _state(c: Consumer) -> dict:
    t = c.t
    out = {
        "sseq": t.sseq,
        "dseq": t.dseq,
        "npc": c.npc,
        "dlv": t.dlv_sseq,
        "floor": (t.adflr, t.asflr),
        "pending": {s: list(p) for s, p in t.pending.items()},
        "info": c.info(),
    }
    if c.pull is not None:
        out["waiting"] = [(w.reply, w.n, w.d, w.b, w.expires, w.hbt) for w in c.pull.wq.live_requests()]
    if c.push is not None:
        p = c.push
        out["push"] = (p.active, p.pbytes, p.maxpb, bool(p.fcid), p.fcsz, p.last_sent)
    return out


class Run:
    """One scenario run: a Harness, a record of passes, and a count of fast runs."""

    def __init__(self, fast: bool, store_dir: str | None, monkeypatch, **stream_cfg) -> None:
        self.fast_runs = 0
        # Flow-control request subjects end with 4 random characters: a counter in both runs.
        fcids = iter(range(1000, 10000))
        monkeypatch.setattr(push_mod, "rand4", lambda: str(next(fcids)))
        for name in ("deliver_run", "push_run"):
            monkeypatch.setattr(Delivery, name, self._counting(getattr(Delivery, name)))
        orig_run = Delivery.run

        def recorded(d) -> None:  # kick() schedules Delivery.run: every pass is recorded
            orig_run(d)
            if self.c is None or d.o is self.c:
                self.passes.append(_state(d.o))

        monkeypatch.setattr(Delivery, "run", recorded)
        self.h = Harness(store_dir=store_dir, **stream_cfg)
        if not fast:
            # A port without deliver_many: deliveries go out one by one, by the general loop.
            self.h.ports.deliver_many = None
        self.passes: list[dict] = []
        self.c: Consumer | None = None

    def _counting(self, orig):
        def counting(d, *a):
            out = orig(d, *a)
            self.fast_runs += 1
            return out

        return counting

    def consumer(self, **cfg) -> Consumer:
        c = self.h.consumer(**cfg)
        self.c = c
        return c

    def record(self) -> tuple:
        sent = [(m.subject, m.reply, m.hdr, m.payload) for m in self.h.ports.published]
        return sent, self.passes


def both(tmp_path, monkeypatch, scenario, store: str, **stream_cfg) -> tuple[Run, Run]:
    """Run ``scenario(run)`` with the fast path off and on; assert equal records."""
    out = []
    for fast in (False, True):
        d = str(tmp_path / f"{store}-{fast}") if store == "file" else None
        with monkeypatch.context() as mp:
            r = Run(fast, d, mp, **stream_cfg)
            scenario(r)
            out.append(r)
    slow, fast = out
    assert slow.fast_runs == 0
    assert fast.fast_runs > 0, "the fast path never ran"
    s_sent, s_passes = slow.record()
    f_sent, f_passes = fast.record()
    assert len(f_sent) == len(s_sent)
    for i, (a, b) in enumerate(zip(f_sent, s_sent)):
        assert a == b, f"message {i}: {a} != {b}"
    assert len(f_passes) == len(s_passes)
    for i, (a, b) in enumerate(zip(f_passes, s_passes)):
        assert a == b, f"pass {i} differs"
    return slow, fast


STORES = ["memory", "file"]


def _pub(h: Harness, n: int, start: int = 0, hdr_every: int = 0) -> None:
    for i in range(start, start + n):
        h.stream.publish(f"orders.{i % 3}", b"m%05d" % i, HDR if hdr_every and i % hdr_every == 0 else None)
    h.store.flush()
    h.clock.run_soon()


@pytest.mark.parametrize("store", STORES)
def test_batches_ending_inside_runs_and_at_the_stream_end(tmp_path, monkeypatch, store):
    def scenario(r: Run) -> None:
        h = r.h
        _pub(h, 100)
        r.consumer(durable_name="D", ack_policy="explicit")
        inbox = h.pull("D", {"batch": 30, "expires": 5 * SEC})
        assert len(data(inbox)) == 30
        h.pull("D", {"batch": 50, "expires": 5 * SEC}, inbox=inbox)
        h.pull("D", {"batch": 100, "expires": 5 * SEC}, inbox=inbox)  # 20 left: waits for 80
        assert len(data(inbox)) == 100
        _pub(h, 10, start=100)  # new messages go to the waiting request
        assert len(data(inbox)) == 110
        for m in data(inbox)[:40]:
            h.ack(m)
        h.advance(6 * SEC)  # the request expires: 408 with what it still wanted
        assert statuses(inbox) == ["NATS/1.0 408 Request Timeout"]

    slow, fast = both(tmp_path, monkeypatch, scenario, store)
    assert fast.c.info()["num_pending"] == 0 and fast.c.info()["num_ack_pending"] == 70


@pytest.mark.parametrize("store", STORES)
def test_max_ack_pending_reached_inside_a_run(tmp_path, monkeypatch, store):
    def scenario(r: Run) -> None:
        h = r.h
        _pub(h, 90)
        r.consumer(durable_name="D", ack_policy="explicit", max_ack_pending=25)
        inbox = h.pull("D", {"batch": 60, "expires": 5 * SEC})
        assert len(data(inbox)) == 25
        for m in data(inbox)[:10]:
            h.ack(m)
        assert len(data(inbox)) == 35
        for m in data(inbox)[10:]:
            h.ack(m)
        assert len(data(inbox)) == 60
        h.pull("D", {"batch": 100, "expires": 5 * SEC}, inbox=inbox)
        assert len(data(inbox)) == 60  # still 25 pending: nothing more

    both(tmp_path, monkeypatch, scenario, store)


@pytest.mark.parametrize("store", STORES)
def test_deleted_and_skipped_sequences_inside_a_run(tmp_path, monkeypatch, store):
    def scenario(r: Run) -> None:
        h = r.h
        _pub(h, 60, hdr_every=7)
        for seq in (10, 11, 40, 60):
            h.store.remove_msg(seq)
        h.store.skip_msg()
        _pub(h, 5, start=60)
        h.store.remove_msg(66)  # the stream ends with removed and skipped sequences
        h.store.skip_msg()
        r.consumer(durable_name="D", ack_policy="explicit")
        inbox = h.pull("D", {"batch": 100, "expires": 5 * SEC, "idle_heartbeat": SEC})
        assert [m.payload for m in data(inbox)][8:10] == [b"m00008", b"m00011"]
        assert len(data(inbox)) == 60
        h.advance(1500 * MS)  # the heartbeat tells the last stream sequence looked at
        assert statuses(inbox) == ["NATS/1.0 100 Idle Heartbeat"]

    both(tmp_path, monkeypatch, scenario, store)


def _corrupt(store_dir: str, h: Harness, seq: int) -> None:
    """Flip a payload byte of ``seq``'s record on disk (the store's cache is cold: reopened)."""
    pos = h.store._pos_at(seq - h.store._base)
    size = h.store._sz[seq - h.store._base]
    path = os.path.join(store_dir, MSGS_DIR, f"{pos >> 32}.blk")
    fd = os.open(path, os.O_RDWR)
    try:
        off = (pos & 0xFFFFFFFF) + size - 10
        b = os.pread(fd, 1, off)
        os.pwrite(fd, bytes([b[0] ^ 0x20]), off)
    finally:
        os.close(fd)


def test_corrupt_record_inside_a_run(tmp_path, monkeypatch):
    def scenario(r: Run) -> None:
        h = r.h
        _pub(h, 80)
        h.restart()  # stop and reopen the store: nothing cached
        _corrupt(h.store_dir, h, 30)
        _corrupt(h.store_dir, h, 31)
        c = r.consumer(durable_name="D", ack_policy="explicit")
        # As an interest stream does: the consumer hears of the removal of a lost message.
        h.store.register_storage_updates(lambda md, bd, seq, subj: seq and c.on_msg_removed(seq))
        inbox = h.pull("D", {"batch": 50, "expires": 5 * SEC})
        got = [m.payload for m in data(inbox)]
        assert len(got) == 50 and b"m00029" not in got and b"m00030" not in got
        assert h.store.state().lost_msgs == [30, 31]
        h.pull("D", {"batch": 50, "expires": 5 * SEC}, inbox=inbox)
        assert len(data(inbox)) == 78

    both(tmp_path, monkeypatch, scenario, "file")


@pytest.mark.parametrize("store", STORES)
def test_turn_budget(tmp_path, monkeypatch, store):
    n = TURN_BUDGET + 700

    def scenario(r: Run) -> None:
        h = r.h
        _pub(h, n)
        r.consumer(durable_name="D", ack_policy="explicit", max_ack_pending=-1)
        inbox = h.pull("D", {"batch": n + 10, "expires": 5 * SEC})
        assert len(data(inbox)) == n

    slow, fast = both(tmp_path, monkeypatch, scenario, store)
    # The first pass stopped at the budget; the next one (kicked) went on.
    dlv = [p["dseq"] - 1 for p in fast.passes]
    assert TURN_BUDGET in dlv and dlv[-1] == n


@pytest.mark.parametrize("store", STORES)
def test_several_requests_max_bytes_heartbeats_and_ack_none(tmp_path, monkeypatch, store):
    def scenario(r: Run) -> None:
        h = r.h
        _pub(h, 40)
        r.consumer(durable_name="D", ack_policy="none")
        a = h.pull("D", {"batch": 10, "expires": 5 * SEC, "idle_heartbeat": SEC})
        b = h.ports.client_subscribe(h.ports.new_inbox())
        # two waiting requests (round robin) and one with a byte budget
        h.ports.request("$JS.API.CONSUMER.MSG.NEXT.ORDERS.D", {"batch": 5, "expires": 5 * SEC}, reply=b.subject)
        h.ports.request("$JS.API.CONSUMER.MSG.NEXT.ORDERS.D", {"batch": 5, "expires": 5 * SEC}, reply=a.subject)
        h.clock.run_soon()
        h.pull("D", {"batch": 10, "max_bytes": 200, "expires": 5 * SEC}, inbox=b)
        h.pull("D", {"batch": 50, "expires": 5 * SEC, "idle_heartbeat": SEC}, inbox=a)
        h.advance(2 * SEC)  # heartbeats on the waiting request
        _pub(h, 3, start=40)
        h.advance(4 * SEC)

    both(tmp_path, monkeypatch, scenario, store)


@pytest.mark.parametrize("store", STORES)
def test_request_without_interest_and_no_wait(tmp_path, monkeypatch, store):
    def scenario(r: Run) -> None:
        h = r.h
        _pub(h, 20)
        r.consumer(durable_name="D", ack_policy="explicit")
        gone = h.ports.client_subscribe(h.ports.new_inbox())
        h.ports.request("$JS.API.CONSUMER.MSG.NEXT.ORDERS.D", {"batch": 5, "expires": 5 * SEC}, reply=gone.subject)
        gone.unsubscribe()
        h.clock.run_soon()
        inbox = h.pull("D", {"batch": 30, "no_wait": True})
        assert len(data(inbox)) == 20 and statuses(inbox) == ["NATS/1.0 404 No Messages"]
        h.advance(10 * MS)

    both(tmp_path, monkeypatch, scenario, store)


def test_pending_count_in_ack_subject_never_below_zero(tmp_path, monkeypatch):
    # num_pending known too low (the consumer was told less than the store holds): the ack
    # subjects' pending token stops at 0 in both paths.
    def scenario(r: Run) -> None:
        h = r.h
        _pub(h, 30)
        c = r.consumer(durable_name="D", ack_policy="explicit")
        c.npc = 5
        inbox = h.pull("D", {"batch": 30, "expires": 5 * SEC})
        assert [m.reply.rsplit(".", 1)[1] for m in data(inbox)][:6] == ["4", "3", "2", "1", "0", "0"]

    both(tmp_path, monkeypatch, scenario, "memory")


@pytest.mark.parametrize("store", STORES)
def test_heartbeat_clock_restarts_after_a_run(tmp_path, monkeypatch, store):
    # A waiting request with idle heartbeats: each delivery restarts its heartbeat clock, so
    # when the heartbeat comes depends on when the last run was delivered.
    def scenario(r: Run) -> None:
        h = r.h
        r.consumer(durable_name="D", ack_policy="explicit")
        inbox = h.pull("D", {"batch": 100, "expires": 10 * SEC, "idle_heartbeat": SEC})
        h.advance(700 * MS)
        _pub(h, 30)
        assert len(data(inbox)) == 30
        h.advance(500 * MS)
        assert statuses(inbox) == []  # 1.2 s after the request, 0.5 s after the run
        h.advance(600 * MS)
        assert statuses(inbox) == ["NATS/1.0 100 Idle Heartbeat"]
        h.advance(9 * SEC)

    both(tmp_path, monkeypatch, scenario, store)


@pytest.mark.parametrize("store", STORES)
def test_store_iterator_gives_what_lookups_give(tmp_path, monkeypatch, store):
    """The delivery pass's other fast path: a consumer whose filter lets the whole stream through
    reads new messages with one store iterator or ``load_run``; a narrower filter looks them up
    (``load_filtered_run`` for runs of new ones, ``load_next_msg`` otherwise). On a stream where
    the narrower filter still matches every stored message, both give the same messages, ack
    subjects and state, pass for pass."""
    runs = []
    passes: list = []
    orig_run = Delivery.run

    def recorded(d) -> None:
        orig_run(d)
        c = d.o
        t = c.t
        passes.append(
            (
                t.sseq,
                t.dseq,
                c.npc,
                t.dlv_sseq,
                t.adflr,
                t.asflr,
                sorted(t.pending.items()),
                list(t.rdq),
                c.info()["num_pending"],
            )
        )

    monkeypatch.setattr(Delivery, "run", recorded)
    looked_up: list = []
    orig_peek = Delivery._peek

    def peek(d):
        out = orig_peek(d)
        if out and out[0] == "new":
            looked_up.append(out[1].seq)
        return out

    monkeypatch.setattr(Delivery, "_peek", peek)
    orig_load = Delivery._load_run

    def load(d, n):
        out = orig_load(d, n)
        if d.run_filters:
            looked_up.extend(out.seqs)
        return out

    monkeypatch.setattr(Delivery, "_load_run", load)
    lookups = []
    for filt in ("", "orders.>"):  # stream subjects orders.> and other.>: orders.> narrows
        passes.clear()
        d = str(tmp_path / f"{store}-{bool(filt)}") if store == "file" else None
        h = Harness(subjects=["orders.>", "other.>"], store_dir=d)
        _pub(h, 1300, hdr_every=5)  # more than two turn budgets
        h.store.remove_msg(17)
        sub = h.listen("push.d")
        cfg = {
            "durable_name": "D",
            "deliver_subject": "push.d",
            "ack_policy": "explicit",
            "max_ack_pending": 1000,
            "ack_wait": SEC,
        }
        if filt:
            cfg["filter_subject"] = filt
        h.consumer(**cfg)
        first = data(sub)
        for m in first[:900]:
            h.ack(m)
        for m in first[900:905]:
            h.ack(m, b"-NAK")
        _pub(h, 120, start=1300)
        h.advance(2 * SEC)  # ack wait: redeliveries before new messages
        runs.append(([(m.subject, m.reply, m.hdr, m.payload) for m in data(sub)], list(passes)))
        lookups.append(len(looked_up))
        looked_up.clear()
    assert lookups[0] == 0 and lookups[1] > 1300  # the iterator vs one lookup per message
    (a_msgs, a_passes), (b_msgs, b_passes) = runs
    assert len(a_msgs) > 1300 and a_msgs == b_msgs
    assert len(a_passes) > 3 and a_passes == b_passes


# -- push ------------------------------------------------------------------------------------------


def _answer_fc(h: Harness, sub, answered: set) -> int:
    """Answer every flow-control request of ``sub`` not answered yet, oldest first (as a
    client does once it has read the messages before it); returns how many."""
    n = 0
    for m in sub.msgs:
        if m.status == "100" and m.reply and m.reply not in answered:
            answered.add(m.reply)
            h.ports.publish(m.reply, "", None, b"")
            h.clock.run_soon()
            n += 1
    return n


def _small_window(c: Consumer, maxpb: int) -> None:
    """Shrink the flow-control window (it starts at 2 MiB) so that small messages cross it."""
    c.push.maxpb = maxpb
    c.push.pblimit = 4 * maxpb


@pytest.mark.parametrize("store", STORES)
def test_push_flow_control_cuts_runs(tmp_path, monkeypatch, store):
    def scenario(r: Run) -> None:
        h = r.h
        sub = h.listen("push.d")
        c = r.consumer(
            name="OC",
            deliver_subject="push.d",
            ack_policy="none",
            max_deliver=1,
            flow_control=True,
            idle_heartbeat=5 * SEC,
            mem_storage=True,
        )
        _small_window(c, 3000)
        _pub(h, 400, hdr_every=9)
        answered: set = set()
        assert len(data(sub)) < 400  # stopped at the window
        # answer only some requests late; a stale answer is ignored
        h.ports.publish("$JS.FC.ORDERS.OC.zzzz", "", None, b"")
        h.clock.run_soon()
        for _ in range(200):
            if not _answer_fc(h, sub, answered):
                break
        assert len(data(sub)) == 400
        assert c.push.maxpb == 12000  # doubled up to the (shrunk) limit
        _pub(h, 100, start=400)
        h.advance(6 * SEC)  # heartbeat, possibly stalled
        while _answer_fc(h, sub, answered):
            pass
        assert len(data(sub)) == 500

    slow, fast = both(tmp_path, monkeypatch, scenario, store)


@pytest.mark.parametrize("store", STORES)
def test_push_message_bigger_than_half_the_window(tmp_path, monkeypatch, store):
    def scenario(r: Run) -> None:
        h = r.h
        sub = h.listen("push.d")
        c = r.consumer(
            durable_name="D", deliver_subject="push.d", ack_policy="none", flow_control=True, idle_heartbeat=5 * SEC
        )
        _small_window(c, 2000)
        for i in range(60):
            # mostly small, some larger than half or than the whole window
            size = 1500 if i % 7 == 3 else 2600 if i % 11 == 5 else 20
            h.stream.publish(f"orders.{i % 3}", b"%05d" % i + b"x" * size)
        h.store.flush()
        h.clock.run_soon()
        answered: set = set()
        for _ in range(500):
            if not _answer_fc(h, sub, answered):
                break
        assert len(data(sub)) == 60

    both(tmp_path, monkeypatch, scenario, store)


@pytest.mark.parametrize("store", STORES)
def test_push_explicit_acks_max_ack_pending_and_removed_sequences(tmp_path, monkeypatch, store):
    def scenario(r: Run) -> None:
        h = r.h
        _pub(h, 80, hdr_every=5)
        for seq in (3, 4, 30, 79):
            h.store.remove_msg(seq)
        h.store.skip_msg()
        sub = h.listen("push.d")
        r.consumer(
            durable_name="D", deliver_subject="push.d", ack_policy="explicit", max_ack_pending=20, ack_wait=10 * SEC
        )
        assert len(data(sub)) == 20
        for m in data(sub)[:15]:
            h.ack(m)
        assert len(data(sub)) == 35
        _pub(h, 10, start=80)
        acked = 15
        while acked < len(data(sub)):  # each ack lets one more out
            h.ack(data(sub)[acked])
            acked += 1
        assert len(data(sub)) == 86

    both(tmp_path, monkeypatch, scenario, store)


@pytest.mark.parametrize("store", STORES)
def test_push_turn_budget_and_interest(tmp_path, monkeypatch, store):
    n = 2 * TURN_BUDGET + 300

    def scenario(r: Run) -> None:
        h = r.h
        _pub(h, n)
        sub = h.listen("push.d")
        r.consumer(durable_name="D", deliver_subject="push.d", ack_policy="none", flow_control=True, idle_heartbeat=SEC)
        assert len(data(sub)) == n
        sub.unsubscribe()
        h.clock.run_soon()
        _pub(h, 50, start=n)  # no interest: nothing goes out
        sub2 = h.listen("push.d")
        h.clock.run_soon()
        assert len(data(sub2)) == 50
        h.advance(2 * SEC)

    slow, fast = both(tmp_path, monkeypatch, scenario, store)
    dlv = [p["dseq"] - 1 for p in fast.passes]
    assert TURN_BUDGET in dlv and 2 * TURN_BUDGET in dlv
