"""``sub --stream``'s consumer config per delivery flag and the ``$JS.ACK`` reply parsing (no sockets)."""

from __future__ import annotations

import argparse

import pytest

from natsd.cli.jssub import ack_meta, consumer_config, wanted

pytestmark = pytest.mark.unit


def args(**kw) -> argparse.Namespace:
    base = dict(
        subject=None,
        stream=None,
        deliver_all=False,
        deliver_new=False,
        deliver_last=False,
        deliver_last_per_subject=False,
        start_seq=None,
        since=None,
        terminate_at_end=False,
    )
    base.update(kw)
    return argparse.Namespace(**base)


def test_flags_make_it_a_jetstream_subscription():
    assert not wanted(args(subject="a"))
    for kw in (
        {"stream": "S"},
        {"deliver_last": True},
        {"deliver_all": True},
        {"deliver_new": True},
        {"start_seq": "3"},
        {"since": "1h"},
        {"deliver_last_per_subject": True},
    ):
        assert wanted(args(subject="a", **kw)), kw


def test_consumer_config_per_flag():
    base = consumer_config(args(stream="S"), "_INBOX.x", 0)
    assert base["deliver_policy"] == "all" and base["ack_policy"] == "none" and "filter_subject" not in base
    assert base["deliver_subject"] == "_INBOX.x" and base["flow_control"] and base["idle_heartbeat"] > 0
    assert consumer_config(args(subject="a.b", deliver_last=True), "i", 0)["deliver_policy"] == "last"
    assert consumer_config(args(subject="a.b", deliver_last=True), "i", 0)["filter_subject"] == "a.b"
    assert consumer_config(args(deliver_new=True), "i", 0)["deliver_policy"] == "new"
    c = consumer_config(args(start_seq="7", deliver_last=True), "i", 0)  # the start sequence wins, as there
    assert (c["deliver_policy"], c["opt_start_seq"]) == ("by_start_sequence", 7)
    c = consumer_config(args(since="1m30s"), "i", 1_767_225_690_000_000_001)
    assert (c["deliver_policy"], c["opt_start_time"]) == ("by_start_time", "2026-01-01T00:00:00.000000001Z")
    c = consumer_config(args(deliver_last_per_subject=True), "i", 0)
    assert (c["deliver_policy"], c["filter_subject"]) == ("last_per_subject", ">")


def test_ack_meta_both_reply_forms():
    v1 = ack_meta("$JS.ACK.ORDERS.C.1.5.5.1767225600000000000.2")
    assert (v1["stream"], v1["seq"], v1["pending"]) == ("ORDERS", 5, 2) and v1["time"].startswith("20")
    v2 = ack_meta("$JS.ACK.hub.ACCHASH.ORDERS.C.1.6.6.1767225600000000000.0.tok")
    assert (v2["stream"], v2["seq"], v2["pending"]) == ("ORDERS", 6, 0)
    assert ack_meta("_INBOX.x") == {} and ack_meta(None) == {} and ack_meta("$JS.ACK.bad") == {}
