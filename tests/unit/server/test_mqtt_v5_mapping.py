"""MQTT 5 properties <-> NATS headers and reply subjects (natsd.server.mqtt.v5), no sockets."""

from __future__ import annotations

import pytest

from natsd.protocol import mqtt as mp
from natsd.server.mqtt import v5

pytestmark = pytest.mark.unit


def test_publish_properties_become_headers_and_reply():
    hdr, reply = v5.nats_headers(
        1,
        {
            mp.P_USER_PROPERTY: [("k", "v"), ("k", "w"), ("bad key", "x")],
            mp.P_MESSAGE_EXPIRY: 30,
            mp.P_CORRELATION_DATA: b"\x01\x02",
            mp.P_RESPONSE_TOPIC: "resp/a.b",
            mp.P_CONTENT_TYPE: "text/plain",
        },
    )
    assert hdr == (
        b"NATS/1.0\r\nNmqtt-Pub:1\r\nk: v\r\nk: w\r\nNats-TTL: 30s\r\nNmqtt-Corr: AQI=\r\n"
        b"Content-Type: text/plain\r\n\r\n"
    )
    assert reply == "resp.a//b"
    assert v5.nats_headers(0, None) == (b"NATS/1.0\r\nNmqtt-Pub:0\r\n\r\n", "")


def test_nats_headers_and_reply_become_properties():
    hdr = (
        b"NATS/1.0\r\nNmqtt-Pub:1\r\nTrace: t1\r\nNats-TTL: 30s\r\nNmqtt-Corr: AQI=\r\n"
        b"Nats-Msg-Id: x\r\nContent-Type: a/b\r\n\r\n"
    )
    assert v5.props_from_nats(hdr, "_INBOX.abc") == {
        mp.P_RESPONSE_TOPIC: "_INBOX/abc",
        mp.P_MESSAGE_EXPIRY: 30,
        mp.P_CORRELATION_DATA: b"\x01\x02",
        mp.P_CONTENT_TYPE: "a/b",
        mp.P_USER_PROPERTY: [("Trace", "t1")],
    }
    assert v5.props_from_nats(None, "$JS.ACK.S.C.1.2.3.4.5") is None
    assert v5.props_from_nats(b"NATS/1.0\r\nNmqtt-Resp: a.b\r\n\r\n", "") == {mp.P_RESPONSE_TOPIC: "a/b"}


def test_connack_properties():
    p = v5.connack_props("gen")
    assert p[mp.P_ASSIGNED_CLIENT_ID] == "gen" and p[mp.P_TOPIC_ALIAS_MAXIMUM] == v5.TOPIC_ALIAS_MAX
    assert mp.P_ASSIGNED_CLIENT_ID not in v5.connack_props("")
