"""Retention working with consumers (interest, workqueue, max_deliver keeps messages), purge
and removal hooks, and durable state through the ConsumerStore seam."""

from __future__ import annotations

from tests.unit.jetstream.test_consumer_harness import MS, SEC, Harness, ack_tokens, data


def test_interest_removed_when_all_interested_acked() -> None:
    h = Harness(retention="interest")
    assert h.pub("orders.x", "nobody") == 1
    assert h.store.state().msgs == 0
    h.consumer(durable_name="all", ack_policy="explicit")
    h.consumer(durable_name="xs", ack_policy="explicit", filter_subject="orders.x")
    h.pub("orders.x", "both")
    h.pub("orders.y", "only all")
    a = data(h.pull("all", {"batch": 2, "expires": SEC}))
    for m in a:
        h.ack(m)
    assert h.store.state().msgs == 1
    x = data(h.pull("xs", {"batch": 1, "expires": SEC}))
    h.ack(x[0])
    assert h.store.state().msgs == 0


def test_interest_removes_a_message_acked_after_a_redelivery() -> None:
    # The redelivery count must be gone before the stream asks whether anyone still needs the
    # message (nats-server removes it; natsd used to keep it forever).
    h = Harness(retention="interest")
    h.consumer(durable_name="C", ack_policy="explicit")
    h.pub("orders.1", "a", n=3)
    first = data(h.pull("C", {"batch": 3, "no_wait": True}))
    h.ack(first[1], b"-NAK")
    h.ack(first[0])
    h.ack(first[2])
    assert h.store.state().msgs == 1
    again = data(h.pull("C", {"batch": 1, "expires": SEC}))
    assert ack_tokens(again[0])[4] == "2"
    h.ack(again[0])
    assert h.store.state().msgs == 0


def test_interest_ack_none_counts_as_acked_on_delivery() -> None:
    h = Harness(retention="interest")
    sub = h.listen("push.n")
    h.consumer(durable_name="n", ack_policy="none", deliver_subject="push.n")
    h.pub("orders.1", "a", n=3)
    assert len(data(sub)) == 3 and h.store.state().msgs == 0


def test_max_deliver_keeps_message_on_interest_stream() -> None:
    h = Harness(retention="interest")
    h.consumer(durable_name="c", ack_policy="explicit", ack_wait=SEC, max_deliver=1)
    h.pub("orders.1", "poison")
    h.pull("c", {"batch": 5, "expires": 100 * SEC})
    h.advance(2 * SEC)
    c = h.stream.consumers["c"]
    assert c.info()["num_ack_pending"] == 0 and not c.is_acked(1)
    assert h.store.state().msgs == 1


def test_workqueue_ack_removes() -> None:
    h = Harness("WQ", ["wq.>"], retention="workqueue")
    h.consumer(durable_name="w", ack_policy="explicit")
    h.pub("wq.a", "1", n=3)
    msgs = data(h.pull("w", {"batch": 3, "expires": SEC}, stream="WQ"))
    h.ack(msgs[1])
    assert h.store.state().msgs == 2
    h.ack(msgs[0], b"+TERM")
    assert h.store.state().msgs == 1


def test_purge_moves_consumer_forward() -> None:
    h = Harness()
    h.pub("orders.1", "a", n=5)
    c = h.consumer(durable_name="c", ack_policy="explicit")
    data(h.pull("c", {"batch": 2, "expires": SEC}))
    h.store.purge()
    c.on_purge(h.store.state().first_seq)
    info = c.info()
    assert info["num_ack_pending"] == 0 and info["num_pending"] == 0
    assert info["ack_floor"]["stream_seq"] == 5
    h.pub("orders.1", "new")
    m = data(h.pull("c", {"batch": 1, "expires": SEC}))[0]
    assert ack_tokens(m)[5] == "6" and ack_tokens(m)[6] == "3"


def test_removed_pending_message_is_terminated() -> None:
    h = Harness(retention="interest")
    adv = h.listen("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.ORDERS.c")
    c = h.consumer(durable_name="c", ack_policy="explicit")
    h.pub("orders.1", "a", n=2)
    data(h.pull("c", {"batch": 2, "expires": SEC}))
    h.store.remove_msg(1)
    c.on_msg_removed(1)
    assert adv.msgs[0].json()["reason"] == "Unacknowledged message was deleted"
    assert c.info()["num_ack_pending"] == 1


def test_state_persisted_and_recovered_through_file_store(tmp_path) -> None:
    h = Harness(store_dir=str(tmp_path))
    h.pub("orders.1", "a", n=6)
    c = h.consumer(durable_name="dur", ack_policy="explicit", ack_wait=5 * SEC, max_deliver=4)
    msgs = data(h.pull("dur", {"batch": 4, "expires": SEC}))
    h.ack(msgs[0])
    h.ack(msgs[1])
    h.ack(msgs[2], b"-NAK")
    again = data(h.pull("dur", {"batch": 1, "expires": SEC}))
    assert ack_tokens(again[0])[5] == "3"
    before = c.info()
    h.advance(100 * MS)  # the state reaches the store when it is written (every 100 ms at most)
    st = c.store.state()
    assert (st.delivered.consumer_seq, st.delivered.stream_seq) == (5, 4)
    assert (st.ack_floor.consumer_seq, st.ack_floor.stream_seq) == (2, 2)
    assert set(st.pending) == {3, 4} and st.redelivered == {3: 1}
    assert c.store.meta["config"]["max_deliver"] == 4
    h.restart()
    o = h.stream.consumers["dur"]
    assert o is not c
    after = o.info()
    for k in ("delivered", "ack_floor"):
        assert {x: after[k][x] for x in ("consumer_seq", "stream_seq")} == {
            x: before[k][x] for x in ("consumer_seq", "stream_seq")
        }
    assert after["created"] == before["created"] and after["config"] == before["config"]
    assert after["num_ack_pending"] == 2 and after["num_redelivered"] == 1 and after["num_pending"] == 2
    # pending messages are redelivered after ack_wait, then delivery continues
    inbox = h.pull("dur", {"batch": 10, "expires": 100 * SEC})
    assert [ack_tokens(m)[5] for m in data(inbox)] == ["5", "6"]
    h.advance(5 * SEC + 10 * MS)
    redo = {ack_tokens(m)[5]: ack_tokens(m)[4] for m in data(inbox)[2:]}
    assert redo == {"3": "3", "4": "2", "5": "2", "6": "2"}  # seq 3 was already redelivered once


def test_ephemeral_and_mem_storage_consumers_are_not_persisted(tmp_path) -> None:
    h = Harness(store_dir=str(tmp_path))
    h.consumer(name="eph", ack_policy="explicit")
    h.consumer(durable_name="mem", ack_policy="explicit", mem_storage=True)
    h.consumer(durable_name="disk", ack_policy="explicit")
    assert h.store.consumer_names() == ["disk"]


def test_deliver_new_durable_keeps_messages_published_while_down(tmp_path) -> None:
    h = Harness(store_dir=str(tmp_path))
    h.consumer(durable_name="n", ack_policy="explicit", deliver_policy="new")
    h.restart()
    h.pub("orders.1", "after restart")
    h.restart()
    msgs = data(h.pull("n", {"batch": 5, "expires": SEC}))
    assert [m.payload for m in msgs] == [b"after restart"]


def test_ack_state_reaches_disk_within_100ms_without_stop(tmp_path) -> None:
    """kill -9 semantics: copy the store directory while running and recover from the copy."""
    import shutil

    from natsd.store.base import StoreConfig
    from natsd.store.file import FileStreamStore

    h = Harness(store_dir=str(tmp_path / "live"))
    h.pub("orders.1", "a", n=4)
    h.consumer(durable_name="d", ack_policy="explicit")
    for m in data(h.pull("d", {"batch": 3, "expires": SEC})):
        h.ack(m)
    h.store.flush()
    h.advance(100 * MS)
    shutil.copytree(tmp_path / "live", tmp_path / "copy")
    st = FileStreamStore(StoreConfig(name="ORDERS", subjects=["orders.>"]), h.clock, str(tmp_path / "copy"))
    cs = st.consumer_store("d", None)
    s = cs.state()
    assert (s.ack_floor.stream_seq, s.delivered.stream_seq) == (3, 3)
    st.stop()
