"""A no_wait pull must see messages stored since the consumer last delivered or reported
(num_pending is brought up to date lazily; the no_wait check must settle it first)."""

from __future__ import annotations

import pytest

from tests.unit.jetstream.test_consumer_harness import Harness, data, statuses

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("filt", [None, "orders.1"])
def test_no_wait_after_publishes_to_a_consumer_created_on_an_empty_stream(filt):
    h = Harness()
    cfg = {"durable_name": "C", "ack_policy": "explicit"}
    if filt:
        cfg["filter_subject"] = filt
    h.consumer(**cfg)
    for i in range(9):
        h.pub(f"orders.{i % 3}", f"x{i}")
    want = 3 if filt else 9
    inbox = h.pull("C", {"batch": 20, "no_wait": True})
    assert len(data(inbox)) == want
    assert statuses(inbox) == ["NATS/1.0 404 No Messages"]  # the batch was not filled
    # and again after more arrive, with nothing asked in between
    h.pub("orders.1", "late")
    inbox = h.pull("C", {"batch": 1, "no_wait": True})
    assert [m.payload for m in data(inbox)] == [b"late"] and statuses(inbox) == []
