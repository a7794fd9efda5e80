"""Nats-Request-Info's JSON and header handling (natsd.server.auth.request_info, issue 29)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from natsd.server.auth.request_info import request_info, with_request_info

pytestmark = [pytest.mark.unit, pytest.mark.timeout(10)]

SERVER = SimpleNamespace(server_name="S", options=SimpleNamespace(cluster_name=""))


def _client(**kw):
    d = dict(cid=7, account=SimpleNamespace(name="B"), rtt_ns=1500, name="req", lang="python3", version="2")
    d.update(kw)
    return SimpleNamespace(**d)


def test_without_share_only_the_account_and_rtt():
    assert json.loads(request_info(SERVER, _client(), False, False)) == {"acc": "B", "rtt": 1500}


def test_share_adds_details_in_nats_servers_order():
    info = json.loads(request_info(SERVER, _client(ip="127.0.0.1", start_ns=1), True, False))
    assert list(info) == ["start", "host", "id", "acc", "name", "lang", "ver", "rtt", "server", "kind", "client_type"]
    assert info["kind"] == "Client" and info["client_type"] == "nats" and info["server"] == "S"


def test_into_the_system_account_adds_the_server():
    assert json.loads(request_info(SERVER, _client(), False, True)) == {"acc": "B", "rtt": 1500, "server": "S"}


def test_a_forged_header_is_replaced_in_place():
    hdr = b"NATS/1.0\r\nNats-Request-Info: {}\r\nX: 1\r\n\r\n"
    out = with_request_info(SERVER, hdr, _client(), False, False, "B")
    assert out == b'NATS/1.0\r\nNats-Request-Info: {"acc":"B","rtt":1500}\r\nX: 1\r\n\r\n'


def test_a_request_without_headers_gets_a_block():
    out = with_request_info(SERVER, None, _client(), False, False, "B")
    assert out == b'NATS/1.0\r\nNats-Request-Info: {"acc":"B","rtt":1500}\r\n\r\n'


def test_a_forwarded_request_keeps_the_first_header_naming_the_crossed_account():
    hdr = b'NATS/1.0\r\nNats-Request-Info: {"acc":"C","rtt":9}\r\n\r\n'
    out = with_request_info(SERVER, hdr, None, False, False, "B")
    assert out == b'NATS/1.0\r\nNats-Request-Info: {"acc":"C","svc":"B","rtt":9}\r\n\r\n'


def test_an_internal_request_without_a_header_is_left_alone():
    assert with_request_info(SERVER, None, None, False, False, "B") is None
    assert with_request_info(SERVER, b"NATS/1.0\r\nX: 1\r\n\r\n", None, True, False, "B") == b"NATS/1.0\r\nX: 1\r\n\r\n"
