"""How a ``$SYS.REQ.SERVER`` request body maps onto the monitoring endpoint's query, and the event filters (no
sockets; the answers themselves are compared with nats-server's in tests/integration/test_cli_server_reports.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from natsd.server.monitoring.sysreq import _query, filter_match

pytestmark = pytest.mark.unit


def test_request_bodies_become_endpoint_queries():
    assert _query("CONNZ", {"subscriptions": True, "limit": 5, "acc": "A", "state": 2, "username": True}) == {
        "subs": "true",
        "limit": "5",
        "acc": "A",
        "state": "all",
    }
    assert _query("CONNZ", {"subscriptions_detail": True}) == {"subs": "detail"}
    assert _query("JSZ", {"account": "A", "streams": True, "consumer": True, "config": False}) == {
        "acc": "A",
        "streams": "true",
        "consumers": "true",
    }
    assert _query("VARZ", {"anything": 1}) == {}


def test_event_filters():
    s = SimpleNamespace(server_name="hub-1", options=SimpleNamespace(host="0.0.0.0"))
    assert filter_match({}, s)
    assert filter_match({"server_name": "hub"}, s)  # a substring
    assert not filter_match({"server_name": "hub", "exact_match": True}, s)
    assert filter_match({"server_name": "hub-1", "exact_match": True, "host": "0.0.0.0"}, s)
    assert not filter_match({"cluster": "east"}, s)  # natsd has no cluster
    assert filter_match({"domain": "d"}, s, "d") and not filter_match({"domain": "d"}, s, "")
