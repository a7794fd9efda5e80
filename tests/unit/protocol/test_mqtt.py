"""The MQTT 3.1.1 codec: every packet whole, split at every byte, and followed by trailing data;
nats-server's refusals (first packet, fixed flags, lengths, CONNECT rules) and its topic <->
subject translation."""

from __future__ import annotations

import pytest

from natsd.protocol import mqtt as m

pytestmark = pytest.mark.unit

CONNECT = m.encode_connect(
    "dev1",
    clean=False,
    keepalive=30,
    username="u",
    password="p",
    will_topic=b"dev/1/status",
    will_message=b"gone",
    will_qos=1,
    will_retain=True,
)


def parse_all(chunks: list[bytes], connected: bool = True) -> tuple[list, m.MQTTParser]:
    p = m.MQTTParser()
    p.connected = connected
    out: list = []
    for c in chunks:
        out += p.feed(c)
    return out, p


def splits(data: bytes):
    yield [data]
    for i in range(1, len(data)):
        yield [data[:i], data[i:]]
    yield [data[i : i + 1] for i in range(len(data))]


def describe(pk) -> tuple:
    if isinstance(pk, m.Publish):
        return ("PUB", pk.flags, pk.topic, pk.pi, pk.payload)
    if isinstance(pk, m.Ack):
        return ("ACK", pk.kind, pk.pi)
    if isinstance(pk, m.Subscribe):
        return ("SUB", pk.pi, pk.filters)
    if isinstance(pk, m.Unsubscribe):
        return ("UNSUB", pk.pi, pk.filters)
    if isinstance(pk, m.Connect):
        return (
            "CONNECT",
            pk.level,
            pk.clean,
            pk.keepalive,
            pk.client_id,
            pk.will_topic,
            pk.will_message,
            pk.will_qos,
            pk.will_retain,
            pk.username,
            pk.password,
            pk.refused,
        )
    return (repr(pk),)


PACKETS = [
    (m.encode_publish(b"a/b", b"hello"), ("PUB", 0, b"a/b", 0, b"hello")),
    (m.encode_publish(b"a/b", b"x" * 300, qos=1, pi=7, retain=True), ("PUB", 3, b"a/b", 7, b"x" * 300)),
    (m.encode_publish(b"t", b"", qos=2, pi=65535, dup=True), ("PUB", 0xC, b"t", 65535, b"")),
    (m.encode_ack(m.PUBACK, 1), ("ACK", m.PUBACK, 1)),
    (m.encode_ack(m.PUBREC, 2), ("ACK", m.PUBREC, 2)),
    (m.encode_ack(m.PUBREL, 3), ("ACK", m.PUBREL, 3)),
    (m.encode_ack(m.PUBCOMP, 4), ("ACK", m.PUBCOMP, 4)),
    (m.encode_subscribe(9, [(b"a/+", 1), (b"#", 0)]), ("SUB", 9, [(b"a/+", 1), (b"#", 0)])),
    (m.encode_unsubscribe(10, [b"a/+", b"#"]), ("UNSUB", 10, [b"a/+", b"#"])),
    (m.encode_pingreq(), ("PINGREQ",)),
    (m.encode_disconnect(), ("DISCONNECT",)),
]


@pytest.mark.parametrize("data, want", PACKETS, ids=[w[0] + str(i) for i, (_, w) in enumerate(PACKETS)])
def test_packet_whole_split_and_trailing(data, want):
    trailing = m.encode_pingreq()
    for chunks in splits(data):
        out, p = parse_all(chunks)
        assert p.error is None and [describe(x) for x in out] == [want]
    out, p = parse_all([data + trailing])
    assert [describe(x) for x in out] == [want, ("PINGREQ",)]
    # a partial trailing packet is held back, not reported
    out, p = parse_all([data + trailing[:1]])
    assert [describe(x) for x in out] == [want] and p.error is None


def test_connect_whole_split_and_trailing():
    want = ("CONNECT", 4, False, 30, "dev1", b"dev/1/status", b"gone", 1, True, "u", "p", 0)
    for chunks in splits(CONNECT):
        out, p = parse_all(chunks, connected=False)
        assert p.error is None and [describe(x) for x in out] == [want] and p.connected
    out, p = parse_all([CONNECT + m.encode_publish(b"a", b"1")], connected=False)
    assert [describe(x)[0] for x in out] == ["CONNECT", "PUB"]


def test_wire_bytes_of_replies():
    assert m.encode_connack(0, True) == b"\x20\x02\x01\x00"
    assert m.encode_connack(5, True) == b"\x20\x02\x00\x05"  # a refusal never has session present
    assert m.encode_ack(m.PUBREL, 258) == b"\x62\x02\x01\x02"
    assert m.encode_suback(1, [0, 1, 0x80]) == b"\x90\x05\x00\x01\x00\x01\x80"
    assert m.encode_unsuback(3) == b"\xb0\x02\x00\x03"
    assert m.encode_pingresp() == b"\xd0\x00"
    assert m.encode_publish(b"a", b"hi", qos=1, pi=1) == b"\x32\x07\x00\x01a\x00\x01hi"
    assert m.varint(127) == b"\x7f" and m.varint(128) == b"\x80\x01" and m.varint(16384) == b"\x80\x80\x01"


@pytest.mark.parametrize(
    "data, error",
    [
        (m.encode_publish(b"a", b""), "the first packet should be a CONNECT (16), got 48"),
        (
            b"GET /mqtt HTTP/1.1\r\n",
            "MQTT clients over websocket must connect to the Websocket port, not the MQTT port",
        ),
    ],
)
def test_first_packet_must_be_connect(data, error):
    out, p = parse_all([data], connected=False)
    assert out == [] and str(p.error) == error


@pytest.mark.parametrize(
    "data, error",
    [
        (b"\x41\x02\x00\x01", "invalid fixed header flags 1 for packet type 40"),
        (b"\x80\x05\x00\x01\x00\x01a", "invalid fixed header flags 0 for packet type 80"),
        (b"\x40\x03\x00\x01\x00", "invalid remaining length 3 for packet type 40"),
        (b"\xc0\x01\x00", "invalid remaining length 1 for packet type c0"),
        (b"\x30\xff\xff\xff\xff\x01", "malformed variable int"),
        (b"\xf0\x00", "received unknown packet type 15"),
        (b"\x36\x05\x00\x01a\x00\x01", "QoS=3 is invalid in MQTT"),
        (b"\x32\x05\x00\x01a\x00\x00", "with QoS=1, packet identifier cannot be 0"),
        (b"\x30\x02\x00\x00", "topic cannot be empty"),
        (b"\x30\x03\x00\x01\x00", "invalid utf8 or null character for topic b'\\x00'"),
        (b"\x40\x02\x00\x00", "packet identifier cannot be 0"),
        (b"\x82\x02\x00\x01", "subscribe protocol must contain at least 1 topic filter"),
        (b"\xa2\x02\x00\x01", "unsubscribe protocol must contain at least 1 topic filter"),
        (b"\x82\x06\x00\x01\x00\x01a\x03", "subscribe QoS value must be 0, 1 or 2, got 3"),
        (b"\x82\x05\x00\x01\x00\x00\x00", "topic filter cannot be empty"),
        (CONNECT, "received a second CONNECT packet"),
    ],
)
def test_malformed_packets_stop_the_parser(data, error):
    ping = m.encode_pingreq()
    out, p = parse_all([ping + data + ping])
    assert [describe(x) for x in out] == [("PINGREQ",)] and str(p.error) == error
    assert p.feed(ping) == []  # nothing after an error


def _connect_body(level=4, flags=0x02, cid=b"c", rest=b""):
    vh = b"\x00\x04MQTT" + bytes((level, flags, 0, 10))
    body = vh + len(cid).to_bytes(2, "big") + cid + rest
    return bytes((0x10,)) + m.varint(len(body)) + body


@pytest.mark.parametrize(
    "data, refused, error",
    [
        (_connect_body(level=5), m.RC_BAD_PROTOCOL, "unacceptable protocol version of 5"),  # unless v5=True
        (_connect_body(level=3), m.RC_BAD_PROTOCOL, "unacceptable protocol version of 3"),
        (
            _connect_body(flags=0x00, cid=b""),
            m.RC_ID_REJECTED,
            "when client ID is empty, clean session flag must be set to 1",
        ),
        (_connect_body(cid=b"a.b"), m.RC_ID_REJECTED, 'invalid character in client ID "a.b"'),
        (_connect_body(flags=0x82, rest=b"\x00\x00"), m.RC_BAD_USER_OR_PASSWORD, "empty user name not allowed"),
    ],
)
def test_connect_refusals_carry_a_return_code(data, refused, error):
    out, p = parse_all([data], connected=False)
    assert p.error is None and len(out) == 1 and (out[0].refused, out[0].error) == (refused, error)


@pytest.mark.parametrize(
    "data, error",
    [
        (_connect_body(flags=0x03), "connect flags reserved bit not set to 0"),
        (_connect_body(flags=0x0A), "if Will flag is set to 0, Will QoS must be 0 too, got 1"),
        (_connect_body(flags=0x22), "if Will flag is set to 0, Will Retain flag must be 0 too"),
        (_connect_body(flags=0x1E), "if Will flag is set to 1, Will QoS can be 0, 1 or 2, got 3"),
        (_connect_body(flags=0x42), "password flag set but username flag is not"),
        (_connect_body(flags=0x06, rest=b"\x00\x00\x00\x00"), "empty Will topic not allowed"),
        (b"\x10\x08\x00\x06MQIsdp", "older protocol 'MQIsdp' not supported"),
    ],
)
def test_connect_malformed(data, error):
    out, p = parse_all([data], connected=False)
    assert out == [] and str(p.error) == error


def test_connect_bounded_before_connected():
    p = m.MQTTParser(max_connect=10)
    assert p.feed(CONNECT[:5]) == [] and str(p.error) == "maximum payload exceeded"


@pytest.mark.parametrize(
    "topic, subject",
    [
        (b"foo", "foo"),
        (b"foo/bar", "foo.bar"),
        (b"/foo", "/.foo"),
        (b"foo/", "foo./"),
        (b"foo//bar", "foo./.bar"),
        (b"/", "/./"),
        (b"//", "/././"),
        (b"a.b", "a//b"),
        (b"a.b/c", "a//b.c"),
        (b"./a", "//.a"),
    ],
)
def test_topic_to_subject_and_back(topic, subject):
    assert m.topic_to_subject(topic) == subject
    assert m.subject_to_topic(subject) == topic


@pytest.mark.parametrize(
    "filt, subject",
    [
        (b"#", ">"),
        (b"+", "*"),
        (b"a/+/c", "a.*.c"),
        (b"a/#", "a.>"),
        (b"/#", "/.>"),
        (b"+/+", "*.*"),
    ],
)
def test_filter_to_subject(filt, subject):
    assert m.filter_to_subject(filt) == subject


def test_topics_without_subject():
    for bad in (b"a b", b"a\tb", b"a\x7f"):
        with pytest.raises(m.TopicError):
            m.topic_to_subject(bad)
    with pytest.raises(m.TopicError, match="wildcards not allowed"):
        m.topic_to_subject(b"a/+")


def test_nats_subjects_to_topics():
    assert m.subject_to_topic("foo.bar.baz") == b"foo/bar/baz"
    assert m.subject_to_topic("a//b") == b"a.b"


# -- MQTT 5 ----------------------------------------------------------------------------------------

PROPS = {
    m.P_USER_PROPERTY: [("a", "1"), ("a", "2")],
    m.P_MESSAGE_EXPIRY: 60,
    m.P_RESPONSE_TOPIC: "r/t",
    m.P_CORRELATION_DATA: b"\x00\x01",
    m.P_TOPIC_ALIAS: 3,
    m.P_SUBSCRIPTION_ID: [7, 300],
}


def test_v5_properties_round_trip():
    enc = m.encode_props(PROPS)
    got, end = m._read_props(enc, 0, len(enc))
    assert end == len(enc) and got == PROPS
    assert m.encode_props(None) == b"\x00"


def test_v5_property_errors():
    dup = m.encode_props({m.P_MESSAGE_EXPIRY: 1})
    body = dup[1:] * 2
    bad = m.varint(len(body)) + body
    with pytest.raises(m.MQTTError, match="included more than once"):
        m._read_props(bad, 0, len(bad))
    with pytest.raises(m.MQTTError, match="unknown property identifier 0x7f"):
        m._read_props(b"\x01\x7f", 0, 2)


def test_v5_session_packets_whole_split_and_trailing():
    connect = m.encode_connect("v5", level=5)
    pub = m.encode_publish5(b"a/b", b"payload", 1, 5, False, False, PROPS)
    sub = (
        bytes((m.SUBSCRIBE | 2,)) + m.varint(2 + 1 + 5 + 1) + b"\x00\x09" + b"\x00" + b"\x00\x03a/#" + bytes((0x2D,))
    )  # QoS 1, no-local, retain handling 2
    puback = m.encode_ack5(m.PUBACK, 5, 0x10)
    disc = m.encode_disconnect5(0x04)
    data = connect + pub + sub + puback + disc
    want = [
        ("CONNECT", 5),
        ("PUB", 2, b"a/b", 5, b"payload", PROPS),
        ("SUB", 9, [(b"a/#", 0x2D)]),
        ("ACK", m.PUBACK, 5, 0x10),
        ("DISC", 0x04),
    ]

    def desc(pk):
        if isinstance(pk, m.Connect):
            return ("CONNECT", pk.level)
        if isinstance(pk, m.Publish):
            return ("PUB", pk.flags, pk.topic, pk.pi, pk.payload, pk.props)
        if isinstance(pk, m.Subscribe):
            return ("SUB", pk.pi, pk.filters)
        if isinstance(pk, m.Ack):
            return ("ACK", pk.kind, pk.pi, pk.reason)
        return ("DISC", pk.reason)

    for chunks in splits(data):
        p = m.MQTTParser(v5=True)
        out = []
        for c in chunks:
            out += p.feed(c)
        assert p.error is None and [desc(x) for x in out] == want
    p = m.MQTTParser()  # without v5, level 5 is refused as nats-server does
    out = p.feed(connect)
    assert out[0].refused == m.RC_BAD_PROTOCOL


def test_v5_encoders():
    assert m.encode_connack5(0, True, None) == b"\x20\x03\x01\x00\x00"
    assert m.encode_suback5(1, [1, 0x87]) == b"\x90\x05\x00\x01\x00\x01\x87"
    assert m.encode_unsuback5(2, [0, 0x11]) == b"\xb0\x05\x00\x02\x00\x00\x11"
    assert m.encode_ack5(m.PUBACK, 3) == m.encode_ack(m.PUBACK, 3)
    assert m.encode_disconnect5(0x94) == b"\xe0\x02\x94\x00"
