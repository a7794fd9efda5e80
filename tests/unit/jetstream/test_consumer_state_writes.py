"""A durable consumer's state writes follow the changes, not the state's size (issue 14 item 7):
with thousands of pending acks, an ack appends a small journal record instead of re-encoding
every pending entry; restart recovers the same state."""

from __future__ import annotations

from pathlib import Path

from natsd.jetstream.consumer import DELTA_MIN_ENTRIES, STATE_WRITE_GAP
from tests.unit.jetstream.test_consumer_harness import MS, SEC, Harness, ack_tokens, data


def test_large_state_written_as_deltas_and_recovered(tmp_path) -> None:
    n = DELTA_MIN_ENTRIES + 1000
    h = Harness(store_dir=str(tmp_path))
    h.pub("orders.1", "a", n=n + 10)
    c = h.consumer(durable_name="dur", ack_policy="explicit", ack_wait=60 * SEC, max_ack_pending=-1)
    msgs = data(h.pull("dur", {"batch": n, "expires": SEC}))
    assert len(msgs) == n
    h.advance(STATE_WRITE_GAP)
    c.store.wait()  # journal writes run on the store's worker thread
    obs = Path(tmp_path, "obs", "dur")
    olog = obs / "o.log"
    odat = obs / "o.dat"
    before_dat = odat.read_bytes() if odat.exists() else None
    size = olog.stat().st_size
    h.ack(msgs[0])
    h.ack(msgs[5], b"+WPI")
    h.ack(msgs[6], b"-NAK")
    h.advance(STATE_WRITE_GAP)
    c.store.wait()
    grown = olog.stat().st_size - size
    assert 0 < grown < 200, grown  # three entries, not thousands
    assert (odat.read_bytes() if odat.exists() else None) == before_dat
    # the NAKed message is redelivered (a timestamp changed in place, and a redelivery count)
    again = data(h.pull("dur", {"batch": 1, "expires": SEC}))
    assert ack_tokens(again[0])[5] == "7"
    h.ack(again[0])
    h.advance(STATE_WRITE_GAP)
    before = c.info()
    h.restart()
    after = h.stream.consumers["dur"].info()
    for k in ("delivered", "ack_floor"):
        assert {x: after[k][x] for x in ("consumer_seq", "stream_seq")} == {
            x: before[k][x] for x in ("consumer_seq", "stream_seq")
        }
    assert after["num_ack_pending"] == before["num_ack_pending"] == n - 2
    assert after["num_redelivered"] == before["num_redelivered"]
    assert after["num_pending"] == 10
    o = h.stream.consumers["dur"]
    assert 1 not in o.t.pending and 7 not in o.t.pending and 6 in o.t.pending
    assert o.t.pending[6][1] > o.t.pending[5][1] - 1  # +WPI's new timestamp survived
    assert list(o.t.pending) == sorted(o.t.pending)


def test_small_state_still_written_whole(tmp_path) -> None:
    h = Harness(store_dir=str(tmp_path))
    h.pub("orders.1", "a", n=5)
    h.consumer(durable_name="dur", ack_policy="explicit")
    msgs = data(h.pull("dur", {"batch": 5, "expires": SEC}))
    h.ack(msgs[0])
    h.advance(200 * MS)
    obs = Path(tmp_path, "obs", "dur")
    assert (obs / "o.dat").exists() and not (obs / "o.log").exists()


def test_a_durable_starting_at_1_creates_no_state_file_and_recovers_the_same(tmp_path) -> None:
    """A start at sequence 1 is the zero state, which a durable without o.dat recovers as (and
    treats as fresh either way), so creating one writes meta.inf only; any other start is
    written, so a restart resumes there."""
    h = Harness(store_dir=str(tmp_path))
    h.consumer(durable_name="all", ack_policy="explicit")  # empty stream: starts at 1
    h.pub("orders.1", "a", n=3)
    h.consumer(durable_name="new", ack_policy="explicit", deliver_policy="new")  # starts at 4
    h.advance(STATE_WRITE_GAP)
    obs = Path(tmp_path, "obs")
    assert (obs / "all" / "meta.inf").exists() and not (obs / "all" / "o.dat").exists()
    assert (obs / "new" / "o.dat").exists()
    h.restart()
    h.pub("orders.1", "b", n=2)
    assert [m.payload for m in data(h.pull("all", {"batch": 10, "expires": SEC}))] == [b"a"] * 3 + [b"b"] * 2
    assert [m.payload for m in data(h.pull("new", {"batch": 10, "expires": SEC}))] == [b"b"] * 2
