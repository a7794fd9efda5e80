"""MQTT 5 on top of the 3.1.1 machinery (natsd only: nats-server refuses protocol level 5).

How MQTT 5 features meet NATS:

* user properties <-> NATS headers: each ``(key, value)`` becomes a ``key: value`` header line
  (repeated keys are repeated lines); a NATS message's headers reach an MQTT 5 subscriber as user
  properties (the MQTT layer's own ``Nmqtt-*`` and JetStream's ``Nats-*`` headers excepted);
* message expiry interval <-> ``Nats-TTL`` (seconds, as ``<n>s``): the header a NATS stream with
  ``allow_msg_ttl`` honours; an MQTT 5 subscriber gets it back as the message expiry interval;
* response topic + correlation data <-> the NATS reply subject and an ``Nmqtt-Corr`` header
  (base64): a NATS request reaches an MQTT 5 responder with the inbox as its response topic, and
  its PUBLISH to that topic answers the requester;
* ``$share/<group>/<filter>`` <-> a queue subscription on the filter's subject, group ``<group>``;
* CONNACK, SUBACK, UNSUBACK, PUBACK and DISCONNECT carry MQTT 5 reason codes.
"""

from __future__ import annotations

import base64

from natsd.protocol import mqtt as mp

__all__ = [
    "nats_headers",
    "props_from_nats",
    "connack_props",
    "V5_REASON",
    "RC_UNSPECIFIED",
    "RC_NOT_AUTHORIZED",
    "RC_TOPIC_FILTER_INVALID",
    "RC_TOPIC_ALIAS_INVALID",
    "RC_DISCONNECT_WITH_WILL",
    "TOPIC_ALIAS_MAX",
]

# CONNACK return codes of 3.1.1 -> MQTT 5 reason codes.
V5_REASON = {
    mp.RC_BAD_PROTOCOL: 0x84,
    mp.RC_ID_REJECTED: 0x85,
    mp.RC_UNAVAILABLE: 0x88,
    mp.RC_BAD_USER_OR_PASSWORD: 0x86,
    mp.RC_NOT_AUTHORIZED: 0x87,
    mp.RC_QOS2_WILL_REJECTED: 0x9B,
}
RC_UNSPECIFIED = 0x80
RC_NOT_AUTHORIZED = 0x87
RC_TOPIC_FILTER_INVALID = 0x8F
RC_TOPIC_ALIAS_INVALID = 0x94
RC_DISCONNECT_WITH_WILL = 0x04
TOPIC_ALIAS_MAX = 1024  # inbound aliases a client may define (CONNACK Topic Alias Maximum)

_SKIP = ("nmqtt-", "nats-")


def nats_headers(qos: int, props: dict | None) -> tuple[bytes, str]:
    """The NATS header block (``Nmqtt-Pub`` first, as nats-server writes it) and reply subject
    of an MQTT 5 PUBLISH with ``props``."""
    h = b"NATS/1.0\r\nNmqtt-Pub:" + bytes((48 + qos,)) + b"\r\n"
    reply = ""
    if props:
        for k, v in props.get(mp.P_USER_PROPERTY, ()):
            if k and not any(c in k for c in ":\r\n ") and "\r" not in v and "\n" not in v:
                h += k.encode() + b": " + v.encode() + b"\r\n"
        exp = props.get(mp.P_MESSAGE_EXPIRY)
        if exp:
            h += b"Nats-TTL: " + str(exp).encode() + b"s\r\n"
        corr = props.get(mp.P_CORRELATION_DATA)
        if corr:
            h += b"Nmqtt-Corr: " + base64.b64encode(corr) + b"\r\n"
        ct = props.get(mp.P_CONTENT_TYPE)
        if ct and "\r" not in ct and "\n" not in ct:
            h += b"Content-Type: " + ct.encode() + b"\r\n"
        rt = props.get(mp.P_RESPONSE_TOPIC)
        if rt:
            try:
                reply = mp.topic_to_subject(rt.encode())
            except mp.TopicError:
                reply = ""
    return h + b"\r\n", reply


def props_from_nats(hdr: bytes | None, reply: str) -> dict | None:
    """The MQTT 5 properties of a NATS message delivered to an MQTT 5 subscriber."""
    props: dict = {}
    if reply and not reply.startswith("$JS.ACK."):
        props[mp.P_RESPONSE_TOPIC] = mp.subject_to_topic(reply).decode(errors="replace")
    if hdr:
        users = []
        for line in hdr.split(b"\r\n")[1:]:
            k, sep, v = line.partition(b":")
            if not sep:
                continue
            key = k.strip().decode(errors="replace")
            val = v.strip().decode(errors="replace")
            lk = key.lower()
            if lk == "nats-ttl":
                secs = val[:-1] if val.endswith("s") else val
                if secs.isdigit() and int(secs) > 0:
                    props[mp.P_MESSAGE_EXPIRY] = int(secs)
            elif lk == "nmqtt-corr":
                try:
                    props[mp.P_CORRELATION_DATA] = base64.b64decode(val)
                except ValueError:
                    pass
            elif lk == "nmqtt-resp":
                props[mp.P_RESPONSE_TOPIC] = mp.subject_to_topic(val).decode(errors="replace")
            elif lk == "content-type":
                props[mp.P_CONTENT_TYPE] = val
            elif not lk.startswith(_SKIP):
                users.append((key, val))
        if users:
            props[mp.P_USER_PROPERTY] = users
    return props or None


def connack_props(assigned_id: str) -> dict:
    """What the server tells an MQTT 5 client it supports."""
    props: dict = {
        mp.P_TOPIC_ALIAS_MAXIMUM: TOPIC_ALIAS_MAX,
        mp.P_SHARED_SUB_AVAILABLE: 1,
        mp.P_WILDCARD_SUB_AVAILABLE: 1,
        mp.P_SUB_ID_AVAILABLE: 0,
        mp.P_RETAIN_AVAILABLE: 1,
    }
    if assigned_id:
        props[mp.P_ASSIGNED_CLIENT_ID] = assigned_id
    return props
