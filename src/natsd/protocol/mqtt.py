"""MQTT 3.1.1 packets: a sans-IO parser and encoders (no sockets, no asyncio).

Wire layout (MQTT 3.1.1, section 2): every packet is a fixed header byte (packet type in the high
nibble, flags in the low one), the *remaining length* as a variable byte integer (7 bits per byte,
high bit = "more", at most 4 bytes), then that many bytes. Strings are a big-endian uint16 length
and UTF-8 bytes; packet identifiers are big-endian uint16.

The checks and their words are nats-server's (server/mqtt.go, mqttParse and friends), so a log
reads the same: the first packet must be CONNECT, fixed-header flags are fixed per type, PUBACK /
PUBREC / PUBREL / PUBCOMP have a remaining length of 2 and PINGREQ / DISCONNECT of 0, and so on.
A malformed packet makes :meth:`MQTTParser.feed` stop: the packets before it are returned, and
``parser.error`` says why (the server then closes that connection only). A CONNECT that must be
answered with a refusing CONNACK raises nothing either: its ``refused`` attribute carries the
return code (nats-server's mqttParseConnect returns it with the error).

Topic names and filters stay ``bytes`` here; their translation to NATS subjects (and back) is
:func:`topic_to_subject`, :func:`filter_to_subject` and :func:`subject_to_topic`, nats-server's
exact rules (see :func:`_to_subject`).
"""

from __future__ import annotations

__all__ = [
    "MQTTParser",
    "MQTTError",
    "Connect",
    "Publish",
    "Ack",
    "Subscribe",
    "Unsubscribe",
    "PINGREQ",
    "DISCONNECT",
    "CONNECT",
    "CONNACK",
    "PUBLISH",
    "PUBACK",
    "PUBREC",
    "PUBREL",
    "PUBCOMP",
    "SUBSCRIBE",
    "SUBACK",
    "UNSUBSCRIBE",
    "UNSUBACK",
    "PINGREQ_T",
    "PINGRESP",
    "DISCONNECT_T",
    "SUBACK_FAILURE",
    "RC_ACCEPTED",
    "RC_BAD_PROTOCOL",
    "RC_ID_REJECTED",
    "RC_UNAVAILABLE",
    "RC_BAD_USER_OR_PASSWORD",
    "RC_NOT_AUTHORIZED",
    "RC_QOS2_WILL_REJECTED",
    "encode_connack",
    "encode_publish",
    "encode_ack",
    "encode_suback",
    "encode_unsuback",
    "encode_pingresp",
    "encode_connect",
    "encode_subscribe",
    "encode_unsubscribe",
    "encode_disconnect",
    "encode_pingreq",
    "topic_to_subject",
    "filter_to_subject",
    "subject_to_topic",
    "varint",
]

# Packet types (high nibble of the fixed header byte).
CONNECT = 0x10
CONNACK = 0x20
PUBLISH = 0x30
PUBACK = 0x40
PUBREC = 0x50
PUBREL = 0x60
PUBCOMP = 0x70
SUBSCRIBE = 0x80
SUBACK = 0x90
UNSUBSCRIBE = 0xA0
UNSUBACK = 0xB0
PINGREQ_T = 0xC0
PINGRESP = 0xD0
DISCONNECT_T = 0xE0

# CONNACK return codes (3.1.1 section 3.2.2.3), as nats-server names them; 0x10 is its own
# (a QoS 2 will refused by `reject_qos2_publish`).
RC_ACCEPTED = 0x0
RC_BAD_PROTOCOL = 0x1
RC_ID_REJECTED = 0x2
RC_UNAVAILABLE = 0x3
RC_BAD_USER_OR_PASSWORD = 0x4
RC_NOT_AUTHORIZED = 0x5
RC_QOS2_WILL_REJECTED = 0x10

SUBACK_FAILURE = 0x80

_FLAG_RESERVED = 0x01
_FLAG_CLEAN = 0x02
_FLAG_WILL = 0x04
_FLAG_WILL_QOS = 0x18
_FLAG_WILL_RETAIN = 0x20
_FLAG_PASSWORD = 0x40
_FLAG_USERNAME = 0x80

_MAX_VARINT = 268_435_455  # 0xFFFFFFF: four 7-bit groups


class MQTTError(Exception):
    """A malformed packet (the connection is closed); ``str()`` is nats-server's wording."""


class Connect:
    """A CONNECT (3.1.1 section 3.1). ``refused`` is a CONNACK return code when the packet must be
    refused (``error`` says why), else 0. ``client_id`` is ``""`` when the client sent none (the
    server assigns one). Will fields are ``None``/0 without a will."""

    __slots__ = (
        "level",
        "flags",
        "clean",
        "keepalive",
        "client_id",
        "will_topic",
        "will_message",
        "will_qos",
        "will_retain",
        "username",
        "password",
        "refused",
        "error",
        "props",
        "will_props",
    )

    def __init__(self) -> None:
        self.level = 0
        self.flags = 0
        self.clean = False
        self.keepalive = 0
        self.client_id = ""
        self.will_topic: bytes | None = None
        self.will_message = b""
        self.will_qos = 0
        self.will_retain = False
        self.username: str | None = None
        self.password: str | None = None
        self.refused = 0
        self.error = ""
        self.props: dict = {}  # MQTT 5 CONNECT properties
        self.will_props: dict = {}


class Publish:
    """A PUBLISH: ``flags`` is the fixed header's low nibble (dup 0x8, QoS 0x6, retain 0x1);
    ``pi`` is 0 for QoS 0."""

    __slots__ = ("flags", "qos", "topic", "pi", "payload", "props")

    def __init__(self, flags: int, topic: bytes, pi: int, payload: bytes, props: dict | None = None) -> None:
        self.flags = flags
        self.qos = (flags >> 1) & 0x3
        self.topic = topic
        self.pi = pi
        self.payload = payload
        self.props = props  # MQTT 5 only

    @property
    def retain(self) -> bool:
        return bool(self.flags & 0x1)

    @property
    def dup(self) -> bool:
        return bool(self.flags & 0x8)


class Ack:
    """PUBACK, PUBREC, PUBREL or PUBCOMP (``kind`` is the packet type) for packet id ``pi``."""

    __slots__ = ("kind", "pi", "reason")

    def __init__(self, kind: int, pi: int, reason: int = 0) -> None:
        self.kind = kind
        self.pi = pi
        self.reason = reason


class Subscribe:
    """``filters``: ``(topic filter bytes, requested QoS)`` pairs, in packet order (MQTT 5: the
    options byte, QoS in its low two bits); ``props``: MQTT 5 properties."""

    __slots__ = ("pi", "filters", "props")

    def __init__(self, pi: int, filters: list[tuple[bytes, int]], props: dict | None = None) -> None:
        self.pi = pi
        self.filters = filters
        self.props = props


class Unsubscribe:
    __slots__ = ("pi", "filters", "props")

    def __init__(self, pi: int, filters: list[bytes], props: dict | None = None) -> None:
        self.pi = pi
        self.filters = filters
        self.props = props


class Disconnect:
    """An MQTT 5 DISCONNECT with a reason code or properties (a bare one is :data:`DISCONNECT`)."""

    __slots__ = ("reason", "props")

    def __init__(self, reason: int, props: dict) -> None:
        self.reason = reason
        self.props = props


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


PINGREQ = _Marker("PINGREQ")
DISCONNECT = _Marker("DISCONNECT")

# Fixed-header flags each type must carry (mqttCheckFixedHeaderFlags); PUBLISH's are checked
# with its QoS.
_EXPECTED_FLAGS = {
    CONNECT: 0,
    PUBACK: 0,
    PUBREC: 0,
    PUBCOMP: 0,
    PINGREQ_T: 0,
    DISCONNECT_T: 0,
    PUBREL: 2,
    SUBSCRIBE: 2,
    UNSUBSCRIBE: 2,
}
# Remaining lengths that are fixed per type (mqttCheckRemainingLength).
_EXPECTED_LEN = {PUBACK: 2, PUBREC: 2, PUBREL: 2, PUBCOMP: 2, PINGREQ_T: 0, DISCONNECT_T: 0}


# MQTT 5 properties (section 2.2.2.2): identifier -> value type.
P_PAYLOAD_FORMAT = 0x01
P_MESSAGE_EXPIRY = 0x02
P_CONTENT_TYPE = 0x03
P_RESPONSE_TOPIC = 0x08
P_CORRELATION_DATA = 0x09
P_SUBSCRIPTION_ID = 0x0B
P_SESSION_EXPIRY = 0x11
P_ASSIGNED_CLIENT_ID = 0x12
P_SERVER_KEEP_ALIVE = 0x13
P_REASON_STRING = 0x1F
P_RECEIVE_MAXIMUM = 0x21
P_TOPIC_ALIAS_MAXIMUM = 0x22
P_TOPIC_ALIAS = 0x23
P_MAXIMUM_QOS = 0x24
P_RETAIN_AVAILABLE = 0x25
P_USER_PROPERTY = 0x26
P_MAXIMUM_PACKET_SIZE = 0x27
P_WILDCARD_SUB_AVAILABLE = 0x28
P_SUB_ID_AVAILABLE = 0x29
P_SHARED_SUB_AVAILABLE = 0x2A

_BYTE, _U16, _U32, _VARINT, _UTF8, _BIN, _PAIR = range(7)
_PROP_TYPES = {
    0x01: _BYTE,
    0x02: _U32,
    0x03: _UTF8,
    0x08: _UTF8,
    0x09: _BIN,
    0x0B: _VARINT,
    0x11: _U32,
    0x12: _UTF8,
    0x13: _U16,
    0x15: _UTF8,
    0x16: _BIN,
    0x17: _BYTE,
    0x18: _U32,
    0x19: _BYTE,
    0x1A: _UTF8,
    0x1C: _UTF8,
    0x1F: _UTF8,
    0x21: _U16,
    0x22: _U16,
    0x23: _U16,
    0x24: _BYTE,
    0x25: _BYTE,
    0x26: _PAIR,
    0x27: _U32,
    0x28: _BYTE,
    0x29: _BYTE,
    0x2A: _BYTE,
}


def _read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    mult = 1
    v = 0
    while True:
        if pos >= end:
            raise MQTTError("malformed variable int")
        c = buf[pos]
        pos += 1
        v += (c & 0x7F) * mult
        if not c & 0x80:
            return v, pos
        mult *= 0x80
        if mult > 0x200000:
            raise MQTTError("malformed variable int")


def _read_props(buf: bytes, pos: int, end: int) -> tuple[dict, int]:
    """An MQTT 5 property list: ``{id: value}``; user properties (0x26) and subscription
    identifiers (0x0B) are lists, in packet order."""
    n, pos = _read_varint(buf, pos, end)
    stop = pos + n
    if stop > end:
        raise MQTTError("error reading properties: unexpected EOF")
    props: dict = {}
    while pos < stop:
        pid, pos = _read_varint(buf, pos, stop)
        t = _PROP_TYPES.get(pid)
        if t is None:
            raise MQTTError(f"unknown property identifier {pid:#x}")
        if t == _BYTE:
            v: object = buf[pos]
            pos += 1
        elif t == _U16:
            v = (buf[pos] << 8) | buf[pos + 1]
            pos += 2
        elif t == _U32:
            v = int.from_bytes(buf[pos : pos + 4], "big")
            pos += 4
        elif t == _VARINT:
            v, pos = _read_varint(buf, pos, stop)
        elif t == _PAIR:
            k, pos = _read_bytes(buf, pos, stop, "user property")
            val, pos = _read_bytes(buf, pos, stop, "user property")
            v = (k.decode(errors="replace"), val.decode(errors="replace"))
        else:
            b, pos = _read_bytes(buf, pos, stop, "property")
            v = b.decode(errors="replace") if t == _UTF8 else b
        if pos > stop:
            raise MQTTError("error reading properties: unexpected EOF")
        if pid == P_USER_PROPERTY or pid == P_SUBSCRIPTION_ID:
            props.setdefault(pid, []).append(v)
        elif pid in props:
            raise MQTTError(f"property {pid:#x} included more than once")
        else:
            props[pid] = v
    return props, stop


def encode_props(props: dict | None) -> bytes:
    """The property list of an MQTT 5 packet (its varint length first)."""
    if not props:
        return b"\x00"
    out = bytearray()
    for pid, v in props.items():
        t = _PROP_TYPES[pid]
        vals = v if pid in (P_USER_PROPERTY, P_SUBSCRIPTION_ID) else [v]
        for x in vals:
            out += varint(pid)
            if t == _BYTE:
                out.append(x)
            elif t == _U16:
                out += x.to_bytes(2, "big")
            elif t == _U32:
                out += x.to_bytes(4, "big")
            elif t == _VARINT:
                out += varint(x)
            elif t == _PAIR:
                out += _str(x[0].encode()) + _str(x[1].encode())
            elif t == _UTF8:
                out += _str(x.encode())
            else:
                out += _str(bytes(x))
    return varint(len(out)) + bytes(out)


def _valid_str(b: bytes) -> bool:
    """UTF-8 and no NUL (mqttValidateString / mqttValidateTopic)."""
    if b"\x00" in b:
        return False
    try:
        b.decode()
    except UnicodeDecodeError:
        return False
    return True


class MQTTParser:
    """Incremental parser of one connection's inbound bytes.

    ``feed(data)`` returns the complete packets in ``data`` (plus what was held back from
    earlier calls); a partial packet is kept for the next call. After a malformed packet
    ``error`` is set, ``feed`` returns what preceded it and ignores any further input.
    ``max_connect`` bounds a CONNECT's total size (nats-server applies ``max_payload`` before the
    connection is established); 0 = no bound.
    """

    __slots__ = ("_buf", "connected", "error", "max_connect", "level", "v5")

    def __init__(self, max_connect: int = 0, v5: bool = False) -> None:
        self._buf = b""
        self.level = 4  # the CONNECT's protocol level: 5 adds properties to every packet
        self.v5 = v5  # accept MQTT 5 CONNECTs (else level 5 is refused as nats-server does)
        self.connected = False  # a CONNECT was parsed
        self.error: MQTTError | None = None
        self.max_connect = max_connect

    def feed(self, data: bytes) -> list:
        if self.error is not None:
            return []
        buf = self._buf + data if self._buf else bytes(data)
        out: list = []
        pos = 0
        end = len(buf)
        try:
            while pos < end:
                start = pos
                b = buf[pos]
                pt = b & 0xF0
                if not self.connected and pt != CONNECT:
                    if buf.startswith(b"GET "):
                        raise MQTTError(
                            "MQTT clients over websocket must connect to the Websocket port, not the MQTT port"
                        )
                    raise MQTTError(f"the first packet should be a CONNECT ({CONNECT}), got {pt}")
                exp = _EXPECTED_FLAGS.get(pt)
                if exp is not None and (b & 0x0F) != exp:
                    raise MQTTError(f"invalid fixed header flags {b & 0x0F:x} for packet type {pt:x}")
                # remaining length (readPacketLen / readVarInt)
                pos += 1
                mult = 1
                pl = 0
                while True:
                    if pos >= end:
                        pl = -1
                        break
                    c = buf[pos]
                    pos += 1
                    pl += (c & 0x7F) * mult
                    if not c & 0x80:
                        break
                    mult *= 0x80
                    if mult > 0x200000:
                        raise MQTTError("malformed variable int")
                if pl >= 0 and not self.connected and self.max_connect and pos + pl - start > self.max_connect:
                    raise MQTTError("maximum payload exceeded")
                if pl < 0 or pos + pl > end:
                    self._buf = buf[start:]
                    return out
                el = _EXPECTED_LEN.get(pt)
                if el is not None and pl != el and (self.level != 5 or pl < el):
                    raise MQTTError(f"invalid remaining length {pl} for packet type {pt:x}")
                body_end = pos + pl
                if pt == PUBLISH:
                    out.append(self._publish(buf, pos, body_end, b & 0x0F, self.level == 5))
                elif pt == PUBACK or pt == PUBREC or pt == PUBREL or pt == PUBCOMP:
                    pi = (buf[pos] << 8) | buf[pos + 1]
                    if pi == 0:
                        raise MQTTError("packet identifier cannot be 0")
                    out.append(Ack(pt, pi, buf[pos + 2] if pl > 2 else 0))
                elif pt == PINGREQ_T:
                    out.append(PINGREQ)
                elif pt == SUBSCRIBE or pt == UNSUBSCRIBE:
                    out.append(self._subs(buf, pos, body_end, pt == SUBSCRIBE, self.level == 5))
                elif pt == CONNECT:
                    if self.connected:
                        raise MQTTError("received a second CONNECT packet")
                    cp = _connect(buf, pos, body_end, self.v5)
                    self.connected = True
                    if cp.level == 5 and not cp.refused:
                        self.level = 5
                    out.append(cp)
                elif pt == DISCONNECT_T:
                    if pl and self.level == 5:
                        reason = buf[pos]
                        props = _read_props(buf, pos + 1, body_end)[0] if pl > 1 else {}
                        out.append(Disconnect(reason, props))
                    else:
                        out.append(DISCONNECT)
                else:
                    raise MQTTError(f"received unknown packet type {pt >> 4}")
                pos = body_end
        except MQTTError as e:
            self.error = e
        except IndexError:
            self.error = MQTTError("error reading packet: unexpected EOF")
        self._buf = b""
        return out

    @staticmethod
    def _publish(buf: bytes, pos: int, end: int, flags: int, v5: bool = False) -> Publish:
        qos = (flags >> 1) & 0x3
        if qos > 2:
            raise MQTTError(f"QoS={qos} is invalid in MQTT")
        if end - pos < 2:
            raise MQTTError("error reading topic: unexpected EOF")
        n = (buf[pos] << 8) | buf[pos + 1]
        pos += 2
        if pos + n > end:
            raise MQTTError("error reading topic: unexpected EOF")
        topic = buf[pos : pos + n]
        pos += n
        if not topic and not v5:  # MQTT 5: an empty topic goes with a topic alias
            raise MQTTError("topic cannot be empty")
        if not _valid_str(topic):
            raise MQTTError(f"invalid utf8 or null character for topic {topic!r}")
        pi = 0
        if qos:
            if end - pos < 2:
                raise MQTTError("error reading packet identifier: unexpected EOF")
            pi = (buf[pos] << 8) | buf[pos + 1]
            pos += 2
            if pi == 0:
                raise MQTTError(f"with QoS={qos}, packet identifier cannot be 0")
        if v5:
            props, pos = _read_props(buf, pos, end)
            return Publish(flags, topic, pi, buf[pos:end], props)
        return Publish(flags, topic, pi, buf[pos:end])

    @staticmethod
    def _subs(buf: bytes, pos: int, end: int, sub: bool, v5: bool = False) -> Subscribe | Unsubscribe:
        action = "" if sub else "un"
        if end - pos < 2:
            raise MQTTError("error reading packet identifier: unexpected EOF")
        pi = (buf[pos] << 8) | buf[pos + 1]
        pos += 2
        if pi == 0:
            raise MQTTError("packet identifier cannot be 0")
        props = None
        if v5:
            props, pos = _read_props(buf, pos, end)
        filters: list = []
        while pos < end:
            if end - pos < 2:
                raise MQTTError("error reading topic filter: unexpected EOF")
            n = (buf[pos] << 8) | buf[pos + 1]
            pos += 2
            if pos + n > end:
                raise MQTTError("error reading topic filter: unexpected EOF")
            f = buf[pos : pos + n]
            pos += n
            if not f:
                raise MQTTError("topic filter cannot be empty")
            if not _valid_str(f):
                raise MQTTError(f"invalid utf8 or null character for topic filter {f!r}")
            if sub:
                if pos >= end:
                    raise MQTTError("error reading QoS: EOF")
                q = buf[pos]
                pos += 1
                if (q & 3) > 2 or (not v5 and q > 2):
                    raise MQTTError(f"subscribe QoS value must be 0, 1 or 2, got {q}")
                filters.append((f, q))
            else:
                filters.append(f)
        if not filters:
            raise MQTTError(f"{action}subscribe protocol must contain at least 1 topic filter")
        return Subscribe(pi, filters, props) if sub else Unsubscribe(pi, filters, props)


def _read_bytes(buf: bytes, pos: int, end: int, field: str) -> tuple[bytes, int]:
    if end - pos < 2:
        raise MQTTError(f"error reading {field}: unexpected EOF")
    n = (buf[pos] << 8) | buf[pos + 1]
    pos += 2
    if pos + n > end:
        raise MQTTError(f"error reading {field}: unexpected EOF")
    return buf[pos : pos + n], pos + n


def _will_flags(flags: int) -> tuple[bool, int, bool]:
    """The will's flag, QoS and retain bit of CONNECT's flags, refused as nats-server does when
    they contradict each other."""
    wqos = (flags & _FLAG_WILL_QOS) >> 3
    wretain = bool(flags & _FLAG_WILL_RETAIN)
    has_will = bool(flags & _FLAG_WILL)
    if not has_will:
        if wqos:
            raise MQTTError(f"if Will flag is set to 0, Will QoS must be 0 too, got {wqos}")
        if wretain:
            raise MQTTError("if Will flag is set to 0, Will Retain flag must be 0 too")
    elif wqos == 3:
        raise MQTTError(f"if Will flag is set to 1, Will QoS can be 0, 1 or 2, got {wqos}")
    return has_will, wqos, wretain


def _connect(buf: bytes, pos: int, end: int, v5: bool = False) -> Connect:
    """mqttParseConnect: the variable header and payload, in the order the spec mandates."""
    proto, pos = _read_bytes(buf, pos, end, "protocol name")
    if proto != b"MQTT":
        if proto == b"MQIsdp":
            raise MQTTError(f"older protocol {proto.decode(errors='replace')!r} not supported")
        raise MQTTError(f'expected connect packet with protocol name "MQTT", got {proto!r}')
    cp = Connect()
    if pos >= end:
        raise MQTTError("error reading protocol level: EOF")
    cp.level = buf[pos]
    pos += 1
    if cp.level != 4 and not (v5 and cp.level == 5):
        cp.refused = RC_BAD_PROTOCOL
        cp.error = f"unacceptable protocol version of {cp.level}"
        return cp
    if pos >= end:
        raise MQTTError("error reading flags: EOF")
    flags = cp.flags = buf[pos]
    pos += 1
    if flags & _FLAG_RESERVED:
        raise MQTTError("connect flags reserved bit not set to 0")
    has_will, wqos, wretain = _will_flags(flags)
    has_user = bool(flags & _FLAG_USERNAME)
    has_pass = bool(flags & _FLAG_PASSWORD)
    if has_pass and not has_user:
        raise MQTTError("password flag set but username flag is not")
    if end - pos < 2:
        raise MQTTError("error reading keep alive: unexpected EOF")
    cp.keepalive = (buf[pos] << 8) | buf[pos + 1]
    pos += 2
    cp.clean = bool(flags & _FLAG_CLEAN)
    if cp.level == 5:
        cp.props, pos = _read_props(buf, pos, end)
    cid, pos = _read_bytes(buf, pos, end, "client ID")
    if not _valid_str(cid):
        cp.refused = RC_ID_REJECTED
        cp.error = f"invalid utf8 or null character for client ID {cid!r}"
        return cp
    cp.client_id = cid.decode()
    if not cp.client_id and not cp.clean and cp.level != 5:  # MQTT 5 allows it (clean start is not "clean")
        cp.refused = RC_ID_REJECTED
        cp.error = "when client ID is empty, clean session flag must be set to 1"
        return cp
    # isValidName: usable as a NATS subject token (no whitespace, '.', '*', '>').
    if any(ch in cp.client_id for ch in " \t\r\n\f.*>"):
        cp.refused = RC_ID_REJECTED
        cp.error = f'invalid character in client ID "{cp.client_id}"'
        return cp
    if has_will:
        cp.will_qos = wqos
        cp.will_retain = wretain
        if cp.level == 5:
            cp.will_props, pos = _read_props(buf, pos, end)
        topic, pos = _read_bytes(buf, pos, end, "Will topic")
        if not topic:
            raise MQTTError("empty Will topic not allowed")
        if not _valid_str(topic):
            raise MQTTError(f"invalid utf8 or null character for Will topic {topic!r}")
        cp.will_topic = topic
        cp.will_message, pos = _read_bytes(buf, pos, end, "Will message")
    if has_user:
        user, pos = _read_bytes(buf, pos, end, "user name")
        if not user:
            cp.refused = RC_BAD_USER_OR_PASSWORD
            cp.error = "empty user name not allowed"
            return cp
        if not _valid_str(user):
            cp.refused = RC_BAD_USER_OR_PASSWORD
            cp.error = f"invalid utf8 or null character for user name {user!r}"
            return cp
        cp.username = user.decode()
    if has_pass:
        pw, pos = _read_bytes(buf, pos, end, "password")
        cp.password = pw.decode(errors="replace")
    return cp


# -- encoders ------------------------------------------------------------------------------------


def varint(n: int) -> bytes:
    """The remaining-length encoding (7 bits per byte, least significant group first)."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


_PINGRESP = bytes((PINGRESP, 0))


def encode_connack(rc: int, session_present: bool) -> bytes:
    # [MQTT-3.2.2-4]: a refusal never reports a session present.
    return bytes((CONNACK, 2, 1 if (session_present and rc == 0) else 0, rc))


def encode_publish(
    topic: bytes, payload: bytes, qos: int = 0, pi: int = 0, retain: bool = False, dup: bool = False
) -> bytes:
    """One PUBLISH packet (header and payload joined: one write per delivery)."""
    n = len(topic)
    rl = 2 + n + len(payload) + (2 if qos else 0)
    flags = PUBLISH | (qos << 1) | (1 if retain else 0) | (8 if dup else 0)
    # the remaining length inline for the usual sizes (one or two bytes), varint() beyond
    if rl < 0x80:
        head = bytes((flags, rl, n >> 8, n & 0xFF))
    elif rl < 0x4000:
        head = bytes((flags, (rl & 0x7F) | 0x80, rl >> 7, n >> 8, n & 0xFF))
    else:
        head = bytes((flags,)) + varint(rl) + bytes((n >> 8, n & 0xFF))
    if qos:
        return b"".join((head, topic, bytes((pi >> 8, pi & 0xFF)), payload))
    return b"".join((head, topic, payload))


def encode_connack5(rc: int, session_present: bool, props: dict | None = None) -> bytes:
    body = bytes((1 if (session_present and rc == 0) else 0, rc)) + encode_props(props)
    return bytes((CONNACK,)) + varint(len(body)) + body


def encode_publish5(
    topic: bytes, payload: bytes, qos: int, pi: int, retain: bool, dup: bool, props: dict | None
) -> bytes:
    n = len(topic)
    vh = bytes((n >> 8, n & 0xFF)) + topic + (bytes((pi >> 8, pi & 0xFF)) if qos else b"") + encode_props(props)
    flags = PUBLISH | (qos << 1) | (1 if retain else 0) | (8 if dup else 0)
    return bytes((flags,)) + varint(len(vh) + len(payload)) + vh + payload


def encode_ack5(kind: int, pi: int, reason: int = 0, props: dict | None = None) -> bytes:
    if not reason and not props:
        return encode_ack(kind, pi)
    body = bytes((pi >> 8, pi & 0xFF, reason)) + (encode_props(props) if props else b"")
    return bytes((kind | (2 if kind == PUBREL else 0),)) + varint(len(body)) + body


def encode_suback5(pi: int, codes: list[int], props: dict | None = None) -> bytes:
    body = bytes((pi >> 8, pi & 0xFF)) + encode_props(props) + bytes(codes)
    return bytes((SUBACK,)) + varint(len(body)) + body


def encode_unsuback5(pi: int, codes: list[int]) -> bytes:
    body = bytes((pi >> 8, pi & 0xFF)) + b"\x00" + bytes(codes)
    return bytes((UNSUBACK,)) + varint(len(body)) + body


def encode_disconnect5(reason: int, props: dict | None = None) -> bytes:
    body = bytes((reason,)) + encode_props(props)
    return bytes((DISCONNECT_T,)) + varint(len(body)) + body


def encode_ack(kind: int, pi: int) -> bytes:
    """PUBACK / PUBREC / PUBREL (flags 0x2) / PUBCOMP."""
    return bytes((kind | (2 if kind == PUBREL else 0), 2, pi >> 8, pi & 0xFF))


def encode_suback(pi: int, codes: list[int]) -> bytes:
    return bytes((SUBACK,)) + varint(2 + len(codes)) + bytes((pi >> 8, pi & 0xFF)) + bytes(codes)


def encode_unsuback(pi: int) -> bytes:
    return bytes((UNSUBACK, 2, pi >> 8, pi & 0xFF))


def encode_pingresp() -> bytes:
    return _PINGRESP


def _str(b: bytes) -> bytes:
    return bytes((len(b) >> 8, len(b) & 0xFF)) + b


# Client-side packets: used by tests and benchmarks that speak MQTT without a client library.


def encode_connect(
    client_id: str,
    *,
    clean: bool = True,
    keepalive: int = 60,
    username: str | None = None,
    password: str | None = None,
    will_topic: bytes | None = None,
    will_message: bytes = b"",
    will_qos: int = 0,
    will_retain: bool = False,
    level: int = 4,
) -> bytes:
    flags = _FLAG_CLEAN if clean else 0
    body = _str(client_id.encode())
    if will_topic is not None:
        flags |= _FLAG_WILL | (will_qos << 3) | (_FLAG_WILL_RETAIN if will_retain else 0)
        body += (b"\x00" if level == 5 else b"") + _str(will_topic) + _str(will_message)
    if username is not None:
        flags |= _FLAG_USERNAME
        body += _str(username.encode())
    if password is not None:
        flags |= _FLAG_PASSWORD
        body += _str(password.encode())
    vh = _str(b"MQTT") + bytes((level, flags, keepalive >> 8, keepalive & 0xFF)) + (b"\x00" if level == 5 else b"")
    return bytes((CONNECT,)) + varint(len(vh) + len(body)) + vh + body


def encode_subscribe(pi: int, filters: list[tuple[bytes, int]]) -> bytes:
    body = b"".join(_str(f) + bytes((q,)) for f, q in filters)
    return bytes((SUBSCRIBE | 2,)) + varint(2 + len(body)) + bytes((pi >> 8, pi & 0xFF)) + body


def encode_unsubscribe(pi: int, filters: list[bytes]) -> bytes:
    body = b"".join(_str(f) for f in filters)
    return bytes((UNSUBSCRIBE | 2,)) + varint(2 + len(body)) + bytes((pi >> 8, pi & 0xFF)) + body


def encode_pingreq() -> bytes:
    return bytes((PINGREQ_T, 0))


def encode_disconnect() -> bytes:
    return bytes((DISCONNECT_T, 0))


# -- topic <-> subject ----------------------------------------------------------------------------


class TopicError(ValueError):
    """A topic or filter that has no NATS subject (whitespace, DEL, a wildcard in a topic name)."""


def _to_subject(mt: bytes, wildcards: bool) -> str:
    """nats-server's mqttToNATSSubjectConversion.

    ``/`` separates levels and becomes ``.``; an empty level (a leading ``/``, ``//``, a trailing
    ``/``) is kept as a ``/`` token: a ``/`` first becomes ``/.``, a ``/`` followed by another or at
    the end becomes ``./``; a ``.`` inside a level becomes ``//``; ``+`` and ``#`` become ``*`` and
    ``>`` (filters only). Whitespace and DEL have no subject.
    """
    if not any(c in mt for c in b"/. \t\n\r\f\x7f+#"):
        return mt.decode()
    res = bytearray()
    last = len(mt) - 1
    for i, c in enumerate(mt):
        if c == 0x2F:  # '/'
            if i == 0 or (res and res[-1] == 0x2E):
                res += b"/."
            elif i == last or mt[i + 1] == 0x2F:
                res += b"./"
            else:
                res += b"."
        elif c in b" \t\n\r\f\x7f":
            raise TopicError("character not supported for MQTT topics")
        elif c == 0x2E:  # '.'
            res += b"//"
        elif c == 0x2B or c == 0x23:  # '+' '#'
            if not wildcards:
                raise TopicError(f"wildcards not allowed in publish's topic: {mt.decode(errors='replace')!r}")
            res.append(0x2A if c == 0x2B else 0x3E)
        else:
            res.append(c)
    if res and res[-1] == 0x2E:
        res += b"/"
    return res.decode()


# Devices publish to a small set of topics over and over: translations are remembered (bounded,
# cleared when full) so the per-byte walk runs once per topic, not once per message.
_CACHE_MAX = 4096
_topic_cache: dict[bytes, str] = {}
_subject_cache: dict[str, bytes] = {}


def topic_to_subject(topic: bytes) -> str:
    """A PUBLISH topic name -> the NATS subject it is published on."""
    r = _topic_cache.get(topic)
    if r is None:
        r = _to_subject(topic, False)
        if len(_topic_cache) >= _CACHE_MAX:
            _topic_cache.clear()
        _topic_cache[topic] = r
    return r


def filter_to_subject(filt: bytes) -> str:
    """A SUBSCRIBE topic filter -> the NATS subscription subject."""
    return _to_subject(filt, True)


def subject_to_topic(subject: str) -> bytes:
    """nats-server's natsSubjectToMQTTTopic: ``.`` -> ``/``, ``/.`` -> ``/``, ``//`` -> ``.``, and a
    lone ``/`` (an empty level) vanishes."""
    r = _subject_cache.get(subject)
    if r is None:
        r = _subject_to_topic(subject)
        if len(_subject_cache) >= _CACHE_MAX:
            _subject_cache.clear()
        _subject_cache[subject] = r
    return r


def _subject_to_topic(subject: str) -> bytes:
    if "/" not in subject:
        return subject.replace(".", "/").encode()
    s = subject.encode()
    out = bytearray()
    i = 0
    end = len(s) - 1
    while i <= end:
        c = s[i]
        if c == 0x2F:
            if i < end:
                n = s[i + 1]
                if n == 0x2E:
                    out.append(0x2F)
                    i += 1
                elif n == 0x2F:
                    out.append(0x2E)
                    i += 1
        elif c == 0x2E:
            out.append(0x2F)
        else:
            out.append(c)
        i += 1
    return bytes(out)
