"""Message counters without sockets: the Nats-Incr grammar, the stored body and PubAck, broken
counters, and the aggregation of sourced counters (Nats-Counter-Sources)."""

from __future__ import annotations

import pytest

from natsd.jetstream.stream.counters import parse_incr, set_header
from natsd.protocol.headers import get_header

pytestmark = pytest.mark.unit


def test_incr_grammar_is_go_big_int_base_10():
    assert [parse_incr(v) for v in (b"1", b"+5", b"-2", b"-0", b"007", b"99999999999999999999999999")] == [
        1,
        5,
        -2,
        0,
        7,
        99999999999999999999999999,
    ]
    for bad in (b"abc", b"1.5", b"+-1", b"0x10", b"1_0", b"--1", b"+", b"-", b"1 ", b"\xd9\xa3"):
        assert parse_incr(bad) is None, bad


def test_set_header_replaces_in_place_or_appends():
    h = b"NATS/1.0\r\nNats-Incr: 5\r\nA: b\r\n\r\n"
    assert set_header(h, b"Nats-Incr", b"-3") == b"NATS/1.0\r\nNats-Incr: -3\r\nA: b\r\n\r\n"
    assert set_header(h, b"X", b"1") == b"NATS/1.0\r\nNats-Incr: 5\r\nA: b\r\nX: 1\r\n\r\n"
    assert set_header(None, b"X", b"1") == b"NATS/1.0\r\nX: 1\r\n\r\n"


def test_counter_publishes(env):
    env.create("C", storage="memory", allow_msg_counter=True)
    assert env.raw_pub_reply("c.a", b"", b"NATS/1.0\r\nNats-Incr: 2\r\n\r\n") == b'{"stream":"C","seq":1,"val":"2"}'
    assert env.pub("c.a", b"", {"Nats-Incr": "-5"}) == {"stream": "C", "seq": 2, "val": "-3"}
    assert env.pub("c.b", b"", {"Nats-Incr": "10"})["val"] == "10"
    sm = env.account.streams["C"].store.load_last_msg("c.a")
    assert sm.msg == b'{"val":"-3"}' and get_header(sm.hdr, "Nats-Incr") == "-5"
    # every refusal stores nothing
    assert env.pub("c.a", b"")["error"]["err_code"] == 10169  # no headers at all
    assert env.pub("c.a", b"", {"Nats-Incr": "x"})["error"]["err_code"] == 10171
    assert env.pub("c.a", b"p", {"Nats-Incr": "1"})["error"]["err_code"] == 10170
    assert env.pub("c.a", b"", {"Nats-Incr": "1", "Nats-Expected-Last-Sequence": "2"})["error"]["err_code"] == 10171
    assert env.account.streams["C"].store.state().msgs == 3
    # msg ids dedupe increments
    assert env.pub("c.a", b"", {"Nats-Incr": "1", "Nats-Msg-Id": "i1"})["val"] == "-2"
    assert env.pub("c.a", b"", {"Nats-Incr": "1", "Nats-Msg-Id": "i1"}) == {"stream": "C", "seq": 4, "duplicate": True}


def test_other_streams_refuse_increments(env):
    env.create("P", storage="memory")
    assert env.pub("p.a", b"", {"Nats-Incr": "1"})["error"] == {
        "code": 400,
        "err_code": 10168,
        "description": "message counters is disabled",
    }
    assert env.pub("p.a", b"", {"Nats-Incr": "1.0"})["error"]["err_code"] == 10171
    assert env.pub("p.a", b"plain") == {"stream": "P", "seq": 1}


def test_broken_counter(env):
    env.create("C", storage="memory", allow_msg_counter=True)
    env.account.streams["C"].store.store_msg("c.a", None, b"not json")
    assert env.pub("c.a", b"", {"Nats-Incr": "1"})["error"] == {
        "code": 400,
        "err_code": 10172,
        "description": "message counter is broken",
    }
    env.account.streams["C"].store.store_msg("c.b", b"NATS/1.0\r\nNats-Counter-Sources: {\r\n\r\n", b'{"val":"1"}')
    assert env.pub("c.b", b"", {"Nats-Incr": "1"})["error"]["err_code"] == 10172


def test_sourced_counters_aggregate_per_origin(env):
    env.create("S", storage="memory", allow_msg_counter=True, subjects=["t.>"])
    stream = env.account.streams["S"]

    def sourced(origin: str, seq: int, subject: str, incr: str, total: str) -> None:
        hdr = (f"NATS/1.0\r\nNats-Incr: {incr}\r\nNats-Stream-Source: {origin} {seq} > > {subject}\r\n\r\n").encode()
        stream.process_msg("t.a", "", hdr, ('{"val":"%s"}' % total).encode(), sourced=True)
        env.clock.run_soon()

    sourced("C", 1, "c.a", "5", "5")
    sourced("E", 1, "e.a", "7", "7")
    sourced("C", 2, "c.a", "-1", "4")
    sm = stream.store.load_last_msg("t.a")
    assert sm.msg == b'{"val":"11"}'
    assert get_header(sm.hdr, "Nats-Incr") == "-1"  # the difference from C's previous total
    assert get_header(sm.hdr, "Nats-Counter-Sources") == '{"C":{"c.a":"4"},"E":{"e.a":"7"}}'
    # a redelivered origin total changes nothing
    sourced("C", 2, "c.a", "-1", "4")
    assert stream.store.load_last_msg("t.a").msg == b'{"val":"11"}'
    # a local increment adds on top and keeps the sources
    assert env.pub("t.a", b"", {"Nats-Incr": "100"})["val"] == "111"
    assert (
        get_header(stream.store.load_last_msg("t.a").hdr, "Nats-Counter-Sources") == '{"C":{"c.a":"4"},"E":{"e.a":"7"}}'
    )
    # a client may not pretend to be a source
    assert env.pub("t.a", b"", {"Nats-Incr": "1", "Nats-Stream-Source": "C 3 > > c.a"})["error"]["err_code"] == 10227


@pytest.mark.parametrize("storage", ["memory", "file"])
def test_counter_totals_are_kept_in_memory_while_the_last_message_stands(env, storage, monkeypatch):
    """An increment reads nothing back while the subject's last message is the one the stream stored
    (the total is kept); after that message goes (a delete, a purge) or another path stored a later
    one, the total is read from the store again, so the answers are those of a store read."""
    env.create("C", storage=storage, allow_msg_counter=True)
    st = env.account.streams["C"]
    reads = []
    real = st.store.load_last_msg
    monkeypatch.setattr(st.store, "load_last_msg", lambda s: (reads.append(s), real(s))[1])
    assert [env.pub("c.a", b"", {"Nats-Incr": "5"})["val"] for _ in range(3)] == ["5", "10", "15"]
    assert reads == []  # (the first: the index says the subject has no message, so the total is 0)
    st.store.remove_msg(3)  # the last c.a goes: its total is no longer the subject's
    assert env.pub("c.a", b"", {"Nats-Incr": "1"})["val"] == "11"
    st.store.store_msg("c.a", None, b'{"val":"100"}')  # stored by another path
    assert env.pub("c.a", b"", {"Nats-Incr": "1"})["val"] == "101"
    env.api("$JS.API.STREAM.PURGE.C", {})
    assert env.pub("c.a", b"", {"Nats-Incr": "2"})["val"] == "2"
    assert reads.count("c.a") == 2  # after the removal and after the foreign store; none after the purge


@pytest.mark.parametrize("storage", ["memory", "file"])
def test_stored_counter_message_must_fit_the_size_limit(env, storage):
    """The stored message (the publisher's headers + ``{"val":"<total>"}``) must fit the stream's
    max_msg_size, or without one the server's max_payload, as the reference (10054, nothing
    stored) although the increment itself fits; on both the light and the full path."""
    env.options.max_payload = 60
    env.create("C", storage=storage, allow_msg_counter=True)
    env.create("M", storage=storage, allow_msg_counter=True, max_msg_size=40)
    assert env.account.streams["C"]._counter_fast and not env.account.streams["M"]._counter_fast
    # "NATS/1.0\r\nNats-Incr: <v>\r\n\r\n" is 25 + len(v) bytes
    assert env.pub("c.a", b"", {"Nats-Incr": "1"})["val"] == "1"  # 26 + 11
    assert env.pub("c.a", b"", {"Nats-Incr": "9" * 12})["val"] == "1" + "0" * 12  # 37 + 23 = 60
    assert env.pub("c.a", b"", {"Nats-Incr": "9" * 13})["error"]["err_code"] == 10054  # 38 + 24
    assert env.pub("c.b", b"", {"Nats-Incr": "9" * 13})["error"]["err_code"] == 10054  # 38 + 23: a new subject too
    assert env.pub("m.a", b"", {"Nats-Incr": "5"})["val"] == "5"  # 26 + 11 <= 40
    assert env.pub("m.a", b"", {"Nats-Incr": "100"})["error"]["err_code"] == 10054  # 28 + 13
    assert env.account.streams["C"].store.state().msgs == 2
    assert env.account.streams["M"].store.state().msgs == 1
