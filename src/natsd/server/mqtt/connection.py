"""One MQTT client connection (an ``asyncio.Protocol``), as nats-server serves it.

Hot path: a PUBLISH is parsed (:mod:`natsd.protocol.mqtt`), translated to its NATS subject and
routed through the account's internal ports like any publish; deliveries to this connection are
encoded straight into the output list, which is written once per loop turn. No task, future or
JSON per message: a QoS 1 PUBLISH is stored in ``$MQTT_msgs`` with a reply callback that sends the
PUBACK when JetStream has it (as nats-server waits for the store before its PUBACK).

Control packets that need JetStream (CONNECT: session load/save, consumers; SUBSCRIBE,
UNSUBSCRIBE; PUBREL of an inbound QoS 2 message) run as one coroutine at a time; while one runs the connection stops
reading and holds the packets that followed, so packet order is kept and input stays bounded.

Messages published by MQTT clients carry nats-server's header ``Nmqtt-Pub:<qos>``, so a NATS
subscriber sees ``NATS/1.0\\r\\nNmqtt-Pub:1\\r\\n\\r\\n`` + payload exactly as from nats-server,
and an MQTT subscription with QoS>0 leaves QoS>0 messages to its JetStream consumer (delivering
them once, from the stream, with redelivery until PUBACK).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from natsd.nuid import nuid
from natsd.protocol import mqtt as mp
from natsd.server.auth.authenticator import AuthResult, check_password
from natsd.server.log import logger
from natsd.server.mqtt import v5 as m5
from natsd.server.mqtt.jsa import JsApiError
from natsd.server.mqtt.sessions import (
    JAIL_NS,
    MSGS_PREFIX,
    OUT_STREAM,
    PUBREL_PREFIX,
    QOS2IN_PREFIX,
    QOS2IN_STREAM,
    AccountSessions,
    Session,
    header_value as _header_value,
)

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Timer
    from natsd.server.mqtt.listener import MQTTListener

__all__ = ["MQTTConnection"]

_HDR_QOS0 = b"NATS/1.0\r\nNmqtt-Pub:0\r\n\r\n"
_HDR_QOS1 = b"NATS/1.0\r\nNmqtt-Pub:1\r\n\r\n"
_HDR_QOS2 = b"NATS/1.0\r\nNmqtt-Pub:2\r\n\r\n"
_PUB_HDR_PREFIX = b"NATS/1.0\r\nNmqtt-Pub:"
_PUB_HDR_AT = len(_PUB_HDR_PREFIX)


def _msg_qos(hdr: bytes | None) -> int:
    """The QoS an MQTT publisher used (the ``Nmqtt-Pub`` header), 0 for NATS publishers."""
    if hdr is not None and hdr.startswith(_PUB_HDR_PREFIX) and len(hdr) > _PUB_HDR_AT:
        return hdr[_PUB_HDR_AT] - 48
    return 0


class _Interest:
    """An internal subscription on a push consumer's deliver subject. Internal subscriptions do
    not notify interest listeners by themselves, so this does (as a client SUB/UNSUB would): a
    consumer that exists already (a resumed session) resumes delivering, and pauses when the
    session goes away instead of delivering to no one."""

    __slots__ = ("sub", "account", "subject")

    def __init__(self, sub: Any, account: Any, subject: str) -> None:
        self.sub = sub
        self.account = account
        self.subject = subject
        account.notify_interest(subject, True)

    def unsubscribe(self) -> None:
        if self.sub is not None:
            self.sub.unsubscribe()
            self.sub = None
            self.account.notify_interest(self.subject, False)


class _Sub:
    """One SUBSCRIBE filter: its core subscriptions (the filter, plus its parent for ``x/#``) and,
    for QoS>0, the JetStream consumers' delivery subscriptions."""

    __slots__ = ("filter", "qos", "reserved", "core", "js", "cons", "no_local", "queue")

    def __init__(self, filt: str, qos: int, no_local: bool = False, queue: str | None = None) -> None:
        self.filter = filt
        self.qos = qos
        self.no_local = no_local  # MQTT 5: not the connection's own messages
        self.queue = queue  # MQTT 5 $share/<group>/...: a queue subscription
        # '#', '+' and '+/...' never match topics that start with '$' [MQTT-4.7.2-1].
        self.reserved = filt in (">", "*") or filt.startswith("*.")
        self.core: list[Any] = []
        self.js: list[Any] = []
        self.cons: dict[str, dict] = {}  # sid -> consumer config


class MQTTConnection(asyncio.Protocol):
    def __init__(self, listener: "MQTTListener") -> None:
        self.listener = listener
        self.server = listener.server
        self.cid = self.server.next_cid()
        self.parser = mp.MQTTParser(max_connect=self.server.options.max_payload, v5=True)
        self.v5 = False  # an MQTT 5 client (natsd only)
        self.aliases: dict[int, bytes] = {}  # MQTT 5 inbound topic aliases
        self.session_expiry = 0  # MQTT 5 session expiry interval, seconds
        self.receive_max = 0xFFFF  # MQTT 5 Receive Maximum: QoS>0 deliveries in flight to the client
        self._publishing = False  # set while this connection's publish is routed (MQTT 5 no-local)
        self.transport: Any = None
        self.client_id = ""
        self.username = ""
        self.account: Any = None
        self.asm: AccountSessions | None = None
        self.sess: Session | None = None
        self.perms: Any = None
        self.keepalive = 0
        self.will: mp.Connect | None = None
        self.msubs: dict[str, _Sub] = {}
        self.pending: dict[int, str] = {}  # pi -> JetStream ack subject ("" for retained QoS 1)
        self.pubrel: dict[int, str] = {}  # outbound QoS 2: pi -> the PUBREL record's ack subject ("": not yet)
        self._pubrel_sub: Any = None
        self.dedup: dict[str, int] = {}  # "<durable> <stream seq>" -> pi (a redelivery keeps its pi)
        self.dedup_key: dict[int, str] = {}  # pi -> its dedup key
        self.last_pi = 0
        self.connected = False
        self.closed = False
        self.taken_over = False
        self.out: list[bytes] = []
        self._flush_scheduled = False
        self._held: list | None = None  # packets waiting for a control operation to finish
        self._ka_timer: Timer | None = None
        self._last_read_ns = 0
        self.in_msgs = self.out_msgs = self.in_bytes = self.out_bytes = 0
        self.start_ns = self.server.clock.time_ns()
        self.last_activity_ns = self.start_ns
        self.host = ""
        self.port = 0
        self.reason = ""
        self._auth_timer: Timer | None = None
        self._cleaned = False
        self._assigned = ""

    # -- what /connz shows (the attributes of a NATS client connection it reads) -----------------

    name = lang = version = ""

    @property
    def mqtt_client(self) -> str:
        return self.client_id

    @property
    def ip(self) -> str:
        return self.host

    @property
    def user(self) -> str:
        return self.username

    @property
    def subs(self) -> dict:
        """The NATS subscriptions behind the MQTT ones (a ``x/#`` filter has two, a QoS>0 one its
        consumer's delivery subject too), keyed by subject, as nats-server lists them."""
        d: dict = {}
        for s in self.msubs.values():
            for c in s.core:
                d[c.subject] = c
            for j in s.js:
                if j.sub is not None:
                    d[j.subject] = j.sub
        return d

    # -- transport --------------------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.host, self.port = peer[0], peer[1]
        self.listener.conns[self.cid] = self
        # nats-server: when authentication is required, the auth timeout (mqtt's own, else the
        # server's) runs until CONNECT is processed; otherwise a silent client is not timed out.
        mo = self.server.options.mqtt
        if self.server.auth.auth_required or mo.username or mo.token or mo.no_auth_user:
            secs = mo.auth_timeout_s or self.server.options.auth_timeout_ns / 1e9
            self._auth_timer = self.server.clock.call_later(int(secs * 1e9), self._auth_timeout)

    def _auth_timeout(self) -> None:
        if not self.connected and not self.closed:
            self.close("Authentication Timeout")

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.in_bytes += len(data)
        clock = self.server.clock
        self._last_read_ns = clock.monotonic_ns()
        self.last_activity_ns = clock.time_ns()
        packets = self.parser.feed(data)
        if self._held is not None:
            self._held.extend(packets)
        else:
            self._process(packets, 0)
        err = self.parser.error
        if err is not None and not self.closed:
            logger.error("%s - mqtt_cid:%d - %s", self._peer(), self.cid, err)
            if self._held is not None:
                self._held.append(err)
            else:
                self.close("Protocol Violation")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.transport = None
        self._cleanup()

    def _peer(self) -> str:
        return f"{self.host}:{self.port}"

    def write(self, b: bytes) -> None:
        self.out.append(b)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.server.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out = self.out
        if not out or self.transport is None:
            out.clear()
            return
        data = b"".join(out) if len(out) > 1 else out[0]
        out.clear()
        self.out_bytes += len(data)
        t = self.transport
        t.write(data)
        # Bounded: a client that does not read is closed once the socket buffer exceeds
        # max_pending (nats-server's slow consumer), instead of growing without limit.
        if t.get_write_buffer_size() > self.server.options.max_pending and not self.closed:
            logger.error("%s - mqtt_cid:%d - Slow Consumer Detected", self._peer(), self.cid)
            self.server.slow_consumers += 1
            self.closed = True
            self.reason = "Slow Consumer (Write Deadline)"
            t.abort()
            self._cleanup()

    def close(self, reason: str = "Client Closed") -> None:
        if self.closed:
            return
        self.reason = reason
        self.closed = True
        self._flush()
        if self.transport is not None:
            self.transport.close()
        self._cleanup()

    # -- packet dispatch --------------------------------------------------------------------------

    def _process(self, packets: list, start: int) -> None:
        for i in range(start, len(packets)):
            if self.closed:
                return
            pk = packets[i]
            t = type(pk)
            if t is mp.Publish:
                self._publish(pk)
            elif t is mp.Ack and pk.kind != mp.PUBREL:
                self._ack(pk)
            elif pk is mp.PINGREQ:
                self.write(mp.encode_pingresp())
            elif isinstance(pk, mp.MQTTError):
                self.close("Protocol Violation")
                return
            elif pk is mp.DISCONNECT:
                self.will = None  # [MQTT-3.1.2-8]: a normal disconnect discards the will
                self.close("Client Closed")
                return
            elif t is mp.Disconnect:
                if pk.reason != m5.RC_DISCONNECT_WITH_WILL:  # MQTT 5: 0x04 asks for the will anyway
                    self.will = None
                exp = pk.props.get(mp.P_SESSION_EXPIRY)
                if exp is not None and self.sess is not None:
                    self.session_expiry = exp
                    self.sess.clean = exp == 0
                self.close("Client Closed")
                return
            else:
                # CONNECT, SUBSCRIBE, UNSUBSCRIBE, PUBREL: JetStream work; hold what follows.
                self._held = list(packets[i + 1 :])
                if self.transport is not None:
                    self.transport.pause_reading()
                asyncio.ensure_future(self._control(pk))
                return

    async def _control(self, pk: Any) -> None:
        try:
            if type(pk) is mp.Connect:
                await self._connect(pk)
            elif type(pk) is mp.Subscribe:
                await self._subscribe(pk)
            elif type(pk) is mp.Unsubscribe:
                await self._unsubscribe(pk)
            elif type(pk) is mp.Ack:
                await self._pubrel(pk.pi)
        except Exception as e:  # a failed JetStream request closes this connection only
            if not self.closed:
                logger.error("%s - mqtt_cid:%d - %s", self._peer(), self.cid, e)
                self.close("Protocol Violation")
            return
        held, self._held = self._held or [], None
        if self.closed:
            return
        if self.transport is not None:
            self.transport.resume_reading()
        self._process(held, 0)

    # -- CONNECT ----------------------------------------------------------------------------------

    def _authenticate(self, cp: mp.Connect) -> Any:
        mo = self.server.options.mqtt
        user = cp.username or ""
        password = cp.password or ""
        if mo.username or mo.token:
            # mqtt { authorization {} }: one user or a token for MQTT clients only
            if mo.token:
                return AuthResult(ok=password == mo.token)  # the token travels as the password
            if user == mo.username:
                res = AuthResult(ok=True, user=user)
                res.bcrypt = (mo.password, password) if mo.password.startswith("$2") else None
                res.ok = res.bcrypt is not None or password == mo.password
                return res
            return AuthResult(ok=False, user=user)
        if mo.no_auth_user and not user and not password:
            return self._no_auth(mo.no_auth_user)
        return self.server.auth.authenticate({"user": user, "pass": password, "auth_token": password}, "")

    def _no_auth(self, name: str) -> Any:
        auth = self.server.auth
        u = auth.users.get(name)
        if u is not None:
            return AuthResult(True, u.user, u.account or "$G", auth.perms.get(u.user))
        return AuthResult(False, name)

    async def _connect(self, cp: mp.Connect) -> None:
        server = self.server
        if cp.refused:
            logger.error("%s - mqtt_cid:%d - %s", self._peer(), self.cid, cp.error)
            self.write(self._connack(cp.refused, False, cp.level == 5))
            self.close("Protocol Violation")
            return
        if self._auth_timer is not None:
            self._auth_timer.cancel()
        self.v5 = cp.level == 5
        if server.options.mqtt.reject_qos2_publish and cp.will_topic is not None and cp.will_qos == 2:
            logger.error("%s - mqtt_cid:%d - server does not accept QoS2 for Will messages", self._peer(), self.cid)
            self.write(self._connack(mp.RC_QOS2_WILL_REJECTED, False, self.v5))
            self.close("Protocol Violation")
            return
        assigned = ""
        if not cp.client_id:
            cp.client_id = assigned = nuid()  # [MQTT-3.1.3-6]
        self.client_id = cp.client_id
        if self.v5:
            self.session_expiry = int(cp.props.get(mp.P_SESSION_EXPIRY, 0))
            self.receive_max = int(cp.props.get(mp.P_RECEIVE_MAXIMUM, 0xFFFF)) or 0xFFFF
            self._assigned = assigned
        res = self._authenticate(cp)
        if res.ok and res.bcrypt is not None:
            stored, given = res.bcrypt
            res.ok = await asyncio.get_running_loop().run_in_executor(None, check_password, stored, given)
        if not res.ok or self.closed:
            if not self.closed:
                logger.error("%s - mqtt_cid:%d - %s", self._peer(), self.cid, "authentication error")
                self.write(self._connack(mp.RC_NOT_AUTHORIZED, False, self.v5))
                self.close("Authentication Failure")
            return
        self.username = cp.username or ""
        self.perms = res.permissions
        self.account = server.get_account(res.account or "$G")
        asm = await self.listener.sessions_for(self.account)
        if self.closed:
            return
        self.asm = asm
        cid = cp.client_id
        now = server.clock.monotonic_ns()
        t = asm.flappers.get(cid)
        if t is not None:
            if now - t > JAIL_NS:
                del asm.flappers[cid]
            else:
                # The client id flaps between applications: hold this one a second, then close it.
                await asyncio.sleep(JAIL_NS / 1e9)
                self.close("Duplicate Client ID")
                return
        for _ in range(10):
            if cid not in asm.locked:
                break
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError(f"other session with client ID {cid!r} is in the process of connecting")
        asm.locked.add(cid)
        try:
            await self._bind_session(asm, cp)
        finally:
            asm.locked.discard(cid)

    async def _bind_session(self, asm: AccountSessions, cp: mp.Connect) -> None:
        try:
            sess, exists = await asm.load_session(cp.client_id)
        except JsApiError as e:
            if "does not match client ID" in e.description:
                self.write(self._connack(mp.RC_ID_REJECTED, False, self.v5))
            raise
        sessp = False
        if exists:
            if cp.clean or sess.clean:
                await asm.clear_session(sess)
            else:
                sessp = True
            ec = sess.conn
            sess.conn = self
            if ec is not None and ec is not self:
                # [MQTT-3.1.4-2]: the new connection takes the session over; the old one's will
                # is dropped and the id goes to the flappers (its next takeover waits).
                ec.will = None
                ec.taken_over = True
                asm.flappers[cp.client_id] = self.server.clock.monotonic_ns()
                logger.warning(
                    "Replacing old client %s since both have the same client ID %r", ec._peer(), cp.client_id
                )
                ec.close("Duplicate Client ID")
        else:
            sess.conn = self
        # MQTT 5: "clean start" only clears at connect; the session ends with the connection when
        # its expiry interval is 0 (what 3.1.1's clean session means at close).
        sess.clean = (self.session_expiry == 0) if self.v5 else cp.clean
        asm.sessions[cp.client_id] = sess
        await asm.save_session(sess)
        if self.closed:
            return
        self.sess = sess
        self.will = cp if cp.will_topic is not None else None
        self.keepalive = cp.keepalive
        self.connected = True
        if self.v5:
            self.write(mp.encode_connack5(0, sessp, m5.connack_props(self._assigned)))
        else:
            self.write(mp.encode_connack(mp.RC_ACCEPTED, sessp))
        if cp.keepalive:
            self._arm_keepalive()
        if sess.pubrel is not None:  # PUBRELs still owed from an earlier connection
            await self._ensure_pubrel()
        # Restore a persistent session's subscriptions (and re-attach its consumers).
        for filt, qos in list(sess.subs.items()):
            await self._add_sub(filt, qos, restore=True)

    @staticmethod
    def _connack(rc: int, sp: bool, v5: bool) -> bytes:
        return mp.encode_connack5(m5.V5_REASON.get(rc, m5.RC_UNSPECIFIED), sp) if v5 else mp.encode_connack(rc, sp)

    def _arm_keepalive(self) -> None:
        # [MQTT-3.1.2-24]: no packet within 1.5 x keep-alive closes the connection.
        window = int(self.keepalive * 1.5 * 1e9)
        self._ka_timer = self.server.clock.call_later(window, self._keepalive_check)

    def _keepalive_check(self) -> None:
        if self.closed:
            return
        window = int(self.keepalive * 1.5 * 1e9)
        idle = self.server.clock.monotonic_ns() - self._last_read_ns
        if idle >= window:
            self.close("Stale Connection")
            return
        self._ka_timer = self.server.clock.call_later(window - idle, self._keepalive_check)

    # -- PUBLISH (inbound) ------------------------------------------------------------------------

    def _publish(self, pp: mp.Publish) -> None:
        self.in_msgs += 1
        props = pp.props
        if props and self.v5:
            alias = props.get(mp.P_TOPIC_ALIAS)
            if alias is not None:
                if not 0 < alias <= m5.TOPIC_ALIAS_MAX:
                    self._disconnect5(m5.RC_TOPIC_ALIAS_INVALID, "Topic Alias invalid")
                    return
                if pp.topic:
                    self.aliases[alias] = pp.topic
                else:
                    known = self.aliases.get(alias)
                    if known is None:
                        self._disconnect5(0x82, "unknown Topic Alias")
                        return
                    pp.topic = known
        if not pp.topic:
            logger.error("%s - mqtt_cid:%d - topic cannot be empty", self._peer(), self.cid)
            self.close("Protocol Violation")
            return
        try:
            subject = mp.topic_to_subject(pp.topic)
        except mp.TopicError as e:
            logger.error("%s - mqtt_cid:%d - %s", self._peer(), self.cid, e)
            self.close("Protocol Violation")
            return
        if len(pp.payload) + 26 > self.server.options.max_payload:
            logger.error("%s - mqtt_cid:%d - Maximum Payload Violation", self._peer(), self.cid)
            self.close("Maximum Payload Exceeded")
            return
        if pp.qos == 2:
            self._stage_qos2(subject, pp)
            return
        self._deliver_pub(subject, pp.topic, pp.payload, pp.qos, pp.retain, pp.pi, self.username, props)

    def _disconnect5(self, reason: int, why: str) -> None:
        logger.error("%s - mqtt_cid:%d - %s", self._peer(), self.cid, why)
        self.write(mp.encode_disconnect5(reason))
        self.close("Protocol Violation")

    def _stage_qos2(self, subject: str, pp: mp.Publish) -> None:
        """[MQTT-4.3.3-2] method A: store the message once at ``$MQTT.qos2.in.<client id>.<pi>``
        (the stream keeps one per subject and refuses a second: a retransmission is not stored
        twice) and answer PUBREC; it is delivered when PUBREL comes (mqttStoreQoS2MsgOnce)."""
        if self.server.options.mqtt.reject_qos2_publish:
            logger.error("%s - mqtt_cid:%d - QoS=2 is disabled for PUBLISH messages", self._peer(), self.cid)
            self.close("Protocol Violation")
            return
        asm = self.asm
        assert asm is not None
        # Nmqtt-Pub: the QoS, then the PUBLISH flags nibble as one hex digit (a persisted format)
        hdr = (
            b"NATS/1.0\r\nNmqtt-Pub:2"
            + b"0123456789abcdef"[pp.flags & 0xF : (pp.flags & 0xF) + 1]
            + b"\r\nNmqtt-Subject:"
            + subject.encode()
            + b"\r\n\r\n"
        )
        rec = mp.encode_ack(mp.PUBREC, pp.pi)

        def staged(h: bytes | None, p: bytes) -> None:
            if b'"error"' in p and b"maximum messages per subject exceeded" not in p:
                logger.error(
                    "%s - mqtt_cid:%d - unable to store QoS 2 message: %s",
                    self._peer(),
                    self.cid,
                    p.decode(errors="replace"),
                )
                self.close("Internal Error")
            elif not self.closed:
                self.write(rec)

        asm.jsa.publish_cb(f"MS{self.cid}", f"{QOS2IN_PREFIX}{self.client_id}.{pp.pi}", hdr, pp.payload, staged)

    async def _pubrel(self, pi: int) -> None:
        """PUBREL of an inbound QoS 2 message: deliver the staged copy (if any), drop it, PUBCOMP."""
        asm = self.asm
        assert asm is not None
        try:
            got = await asm.jsa.last_msg(QOS2IN_STREAM, f"{QOS2IN_PREFIX}{self.client_id}.{pi}")
        except (JsApiError, asyncio.TimeoutError):
            got = None
        if got is not None and not self.closed:
            seq, hdr, data = got
            asm.delete_msg(QOS2IN_STREAM, seq)
            subject = _header_value(hdr, b"Nmqtt-Subject") if hdr else None
            pub = _header_value(hdr, b"Nmqtt-Pub") if hdr else None
            if subject:
                flags = int(pub[1:2], 16) if pub and len(pub) > 1 else 0
                subj = subject.decode()
                self._deliver_pub(subj, mp.subject_to_topic(subj), data, 2, bool(flags & 1), 0, self.username)
        if not self.closed:
            self.write(mp.encode_ack(mp.PUBCOMP, pi))

    def _deliver_pub(
        self,
        subject: str,
        topic: bytes,
        payload: bytes,
        qos: int,
        retain: bool,
        pi: int,
        source: str,
        props: dict | None = None,
    ) -> None:
        """mqttInitiateMsgDelivery: route to NATS and QoS 0 subscribers, store QoS>0 in
        ``$MQTT_msgs``, then PUBACK (when ``pi``) once stored."""
        perms = self.perms
        if perms is not None and perms.publish is not None and not perms.publish.allows(subject):
            # nats-server drops a denied publish silently for MQTT and still acknowledges it
            if pi:
                self.write(mp.encode_ack(mp.PUBACK, pi))
            return
        asm = self.asm
        assert asm is not None
        ports = asm.ports
        if retain:
            asm.store_retained(subject, topic, qos << 1 | 1, source, payload)
        reply = ""
        if props:
            hdr, reply = m5.nats_headers(qos, props)
        else:
            hdr = _HDR_QOS0 if qos == 0 else _HDR_QOS1 if qos == 1 else _HDR_QOS2
        self._publishing = True
        try:
            ports.publish(subject, reply, hdr, payload)
        finally:
            self._publishing = False
        if qos == 0:
            return
        if props:
            # the stored copy keeps the response topic in a header (a stream keeps no reply) and
            # leaves Nats-TTL out ($MQTT_msgs is nats-server's config, without per-message TTLs)
            lines = [ln for ln in hdr.split(b"\r\n") if ln and not ln.lower().startswith(b"nats-ttl:")]
            exp = props.get(mp.P_MESSAGE_EXPIRY)
            if exp:
                lines.append(b"Nmqtt-Expiry: " + str(exp).encode())  # checked when the consumer delivers
            if reply:
                lines.append(b"Nmqtt-Resp: " + reply.encode())
            hdr = b"\r\n".join(lines) + b"\r\n\r\n"
        if pi:
            write = self.write
            ack = mp.encode_ack(mp.PUBACK if qos == 1 else mp.PUBREC, pi)

            def stored(h: bytes | None, p: bytes, ack: bytes = ack) -> None:
                if b'"error"' in p:
                    logger.error(
                        "%s - mqtt_cid:%d - unable to store QoS %d message: %s",
                        self._peer(),
                        self.cid,
                        qos,
                        p.decode(errors="replace"),
                    )
                    self.close("Internal Error")
                    return
                if not self.closed:
                    write(ack)

            asm.jsa.publish_cb(f"MS{self.cid}", MSGS_PREFIX + subject, hdr, payload, stored)
        else:
            asm.jsa.publish_cb("MS", MSGS_PREFIX + subject, hdr, payload, lambda h, p: None)

    def _ack(self, a: mp.Ack) -> None:
        if a.kind == mp.PUBACK or a.kind == mp.PUBREC:
            ack = self.pending.pop(a.pi, None)
            asm, sess = self.asm, self.sess
            if a.kind == mp.PUBREC:
                self.pubrel[a.pi] = ""  # the identifier stays in use until PUBCOMP
                if asm is not None and sess is not None and sess.pubrel is not None:
                    # mqttProcessPublishReceived: the PUBREL owed is stored first (its consumer
                    # sends it, again after a reconnect), then the message itself is acknowledged
                    def stored(h: bytes | None, p: bytes, ack: str | None = ack) -> None:
                        if ack:
                            asm.jsa.send(ack)

                    asm.jsa.publish_cb(
                        f"MS{self.cid}",
                        PUBREL_PREFIX + sess.hash,
                        b"NATS/1.0\r\nNmqtt-PubRel:" + str(a.pi).encode() + b"\r\n\r\n",
                        b"",
                        stored,
                    )
                    ack = None
                else:
                    self.write(mp.encode_ack(mp.PUBREL, a.pi))
            if ack and asm is not None:
                asm.jsa.send(ack)
            key = self.dedup_key.pop(a.pi, None)
            if key is not None:
                self.dedup.pop(key, None)
        elif a.kind == mp.PUBCOMP:
            rel = self.pubrel.pop(a.pi, None)
            if rel and self.asm is not None:
                self.asm.jsa.send(rel)

    async def _ensure_pubrel(self) -> None:
        """The session's PUBREL consumer and its delivery subscription (ensurePubRelConsumerSubscription)."""
        asm, sess = self.asm, self.sess
        assert asm is not None and sess is not None
        if self._pubrel_sub is not None:
            return
        cfg = sess.pubrel if sess.pubrel is not None else asm.pubrel_config(sess)
        dsubj = cfg["deliver_subject"]
        self._pubrel_sub = _Interest(asm.ports.subscribe(dsubj, self._on_pubrel), asm.account, dsubj)
        if sess.pubrel is None:
            await asm.create_consumer(cfg, OUT_STREAM)
            sess.pubrel = cfg
        else:
            await asm.create_consumer(cfg, OUT_STREAM)

    def _on_pubrel(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        """mqttDeliverPubRelCb: a stored PUBREL to (re)send; PUBCOMP acknowledges it."""
        if self.closed or not reply or hdr is None:
            return
        v = _header_value(hdr, b"Nmqtt-PubRel")
        if not v or not v.isdigit():
            return
        pi = int(v)
        self.pubrel[pi] = reply
        self.write(mp.encode_ack(mp.PUBREL, pi))

    # -- SUBSCRIBE / UNSUBSCRIBE ------------------------------------------------------------------

    async def _subscribe(self, sp: mp.Subscribe) -> None:
        codes: list[int] = []
        added: list[_Sub] = []
        v5 = self.v5
        bad_filter = m5.RC_TOPIC_FILTER_INVALID if v5 else mp.SUBACK_FAILURE
        send_retained: list[_Sub] = []
        for topic, opts in sp.filters:
            mo = self.server.options.mqtt
            qos = opts & 3
            no_local = bool(opts & 4) and v5
            handling = (opts >> 4) & 3 if v5 else 0
            if mo.downgrade_qos2_subscribe and qos == 2:
                qos = 1
            queue = None
            if v5 and topic.startswith(b"$share/"):
                # $share/<group>/<filter>: a queue group (and a shared consumer at QoS>0)
                group, sep, topic = topic[7:].partition(b"/")
                if not group or not sep or not topic or b"+" in group or b"#" in group:
                    codes.append(bad_filter)
                    continue
                queue = group.decode()
            try:
                filt = mp.filter_to_subject(topic)
            except mp.TopicError:
                codes.append(bad_filter)
                continue
            if filt.startswith("$MQTT."):
                codes.append(mp.SUBACK_FAILURE)
                continue
            perms = self.perms
            if perms is not None and perms.subscribe is not None and not perms.subscribe.allows(filt):
                logger.error("%s - mqtt_cid:%d - Subscription Violation - %s", self._peer(), self.cid, filt)
                codes.append(m5.RC_NOT_AUTHORIZED if v5 else mp.SUBACK_FAILURE)
                continue
            is_new = (filt if queue is None else f"$share {queue} {filt}") not in self.msubs
            try:
                sub = await self._add_sub(filt, qos, restore=False, no_local=no_local, queue=queue)
            except (JsApiError, asyncio.TimeoutError) as e:
                logger.error("%s - mqtt_cid:%d - unable to subscribe to %r: %s", self._peer(), self.cid, filt, e)
                codes.append(mp.SUBACK_FAILURE)
                continue
            codes.append(qos)
            added.append(sub)
            if queue is None and (handling == 0 or (handling == 1 and is_new)):
                send_retained.append(sub)
        sess = self.sess
        if sess is not None and added:
            for s in added:
                if s.queue is None:  # shared subscriptions are not kept in the session record
                    sess.subs[s.filter] = s.qos
            await self.asm.save_session(sess) if self.asm is not None else None
        if self.closed:
            return
        self.write(mp.encode_suback5(sp.pi, codes) if v5 else mp.encode_suback(sp.pi, codes))
        # Retained messages of the new subscriptions follow the SUBACK (retain flag set).
        asm = self.asm
        if asm is not None:
            for s in send_retained:
                for rm in asm.retained_for(s.filter):
                    self._send_retained(rm, s)

    def _send_retained(self, rm: Any, s: _Sub) -> None:
        qos = min(s.qos, (rm.flags >> 1) & 3)
        pi = self._next_pi("") if qos else 0
        if qos and not pi:
            return
        if self.v5:
            self.write(mp.encode_publish5(rm.topic, rm.payload, qos, pi, True, False, None))
        else:
            self.write(mp.encode_publish(rm.topic, rm.payload, qos, pi, retain=True))
        self.out_msgs += 1

    async def _add_sub(
        self, filt: str, qos: int, restore: bool, no_local: bool = False, queue: str | None = None
    ) -> _Sub:
        asm = self.asm
        assert asm is not None and self.sess is not None
        sess = self.sess
        key = filt if queue is None else f"$share {queue} {filt}"
        old = self.msubs.pop(key, None)
        if old is not None:
            for c in old.core + old.js:
                c.unsubscribe()
            if qos == 0 and old.cons:
                for sid, cc in old.cons.items():
                    sess.cons.pop(sid, None)
                    await asm.delete_consumer(cc)
        if qos == 2:
            await self._ensure_pubrel()
        s = _Sub(filt, qos, no_local, queue)
        # (subject, sid): "x/#" also matches "x" itself, so nats-server adds a subscription on the
        # parent level, whose sid (the key of its consumer in the session record) is "x fwc"
        sids = [(filt, filt)]
        if len(filt) >= 3 and filt.endswith(".>"):
            sids.append((filt[:-2], filt[:-2] + " fwc"))
        ports = asm.ports
        for subj, sid in sids:
            s.core.append(ports.subscribe(subj, self._core_handler(s), queue))
            if qos > 0 and queue is not None:
                # $share/<group>/...: one consumer per group and filter, shared by the members
                # (a queue subscription on its deliver subject); not part of any one session
                cc = asm.shared_consumer_config(queue, subj)
                dsubj = cc["deliver_subject"]
                s.js.append(
                    _Interest(
                        ports.subscribe(dsubj, self._js_handler(s, cc["durable_name"]), queue), asm.account, dsubj
                    )
                )
                await asm.create_consumer(cc)
            elif qos > 0:
                existing = old.cons.get(sid) if old is not None else sess.cons.get(sid)
                cc = existing if existing is not None else asm.consumer_config(sess, subj)
                # Subscribe before the consumer exists: a push consumer learns of internal
                # interest only when it is created.
                dsubj = cc["deliver_subject"]
                s.js.append(
                    _Interest(ports.subscribe(dsubj, self._js_handler(s, cc["durable_name"])), asm.account, dsubj)
                )
                await asm.create_consumer(cc)
                s.cons[sid] = sess.cons[sid] = cc
        self.msubs[key] = s
        return s

    async def _unsubscribe(self, up: mp.Unsubscribe) -> None:
        asm = self.asm
        sess = self.sess
        assert asm is not None and sess is not None
        changed = False
        codes: list[int] = []
        for topic in up.filters:
            key_prefix = ""
            if self.v5 and topic.startswith(b"$share/"):
                group, _, topic = topic[7:].partition(b"/")
                key_prefix = f"$share {group.decode(errors='replace')} "
            try:
                filt = mp.filter_to_subject(topic)
            except mp.TopicError:
                codes.append(m5.RC_TOPIC_FILTER_INVALID)
                continue
            s = self.msubs.pop(key_prefix + filt, None)
            if s is None:
                codes.append(0x11)  # no subscription existed
                continue
            codes.append(0)
            for c in s.core + s.js:
                c.unsubscribe()
            for sid, cc in s.cons.items():
                sess.cons.pop(sid, None)
                await asm.delete_consumer(cc)
            sess.subs.pop(filt, None)
            changed = True
        if changed:
            await asm.save_session(sess)
        if not self.closed:
            self.write(mp.encode_unsuback5(up.pi, codes) if self.v5 else mp.encode_unsuback(up.pi))

    # -- deliveries (outbound PUBLISH) ------------------------------------------------------------

    def _core_handler(self, s: _Sub):
        def deliver(subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
            if self.closed:
                return
            if s.reserved and subject[:1] == "$":
                return
            if reply.startswith("$JS.ACK."):
                return  # a JetStream delivery that happens to match the filter
            if s.qos and _msg_qos(hdr):
                return  # its consumer delivers it
            perms = self.perms
            if perms is not None and perms.subscribe is not None and perms.subscribe.denies(subject):
                return
            if s.no_local and self._publishing:
                return
            self.out_msgs += 1
            if self.v5:
                self.write(
                    mp.encode_publish5(
                        mp.subject_to_topic(subject),
                        payload,
                        0,
                        0,
                        False,
                        False,
                        m5.props_from_nats(hdr, reply) if hdr or reply else None,
                    )
                )
            else:
                self.write(mp.encode_publish(mp.subject_to_topic(subject), payload))

        return deliver

    def _js_handler(self, s: _Sub, durable: str):
        def deliver(subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
            if self.closed or not subject.startswith(MSGS_PREFIX):
                return
            nats_subject = subject[len(MSGS_PREFIX) :]
            if s.reserved and nats_subject[:1] == "$":
                if self.asm is not None:
                    self.asm.jsa.send(reply)
                return
            qos = min(s.qos, _msg_qos(hdr) or 1)
            parts = reply.split(".")
            remaining = 0
            if hdr is not None and b"Nmqtt-Expiry:" in hdr and len(parts) >= 9:
                # MQTT 5 message expiry of a stored message: never delivered once expired, and
                # delivered with what is left of its interval (the stored time is in the ack subject)
                try:
                    exp = int(_header_value(hdr, b"Nmqtt-Expiry") or b"0")
                    age = (self.server.clock.time_ns() - int(parts[-2])) // 1_000_000_000
                except ValueError:
                    exp = age = 0
                if exp:
                    if age >= exp:
                        if self.asm is not None:
                            self.asm.jsa.send(reply)
                        return
                    remaining = exp - age
            key = f"{durable} {parts[-4] if len(parts) >= 9 else reply}"
            pi = self.dedup.get(key)
            dup = pi is not None
            if pi is None:
                if len(self.pending) >= self.receive_max:
                    return  # the client's Receive Maximum: the consumer redelivers it after ack_wait
                pi = self._next_pi(reply)
                if not pi:
                    return  # 65535 in flight: the consumer redelivers later
                self.dedup[key] = pi
                self.dedup_key[pi] = key
            else:
                self.pending[pi] = reply
            self.out_msgs += 1
            if self.v5:
                props = m5.props_from_nats(hdr, "")
                if remaining:
                    props = props or {}
                    props[mp.P_MESSAGE_EXPIRY] = remaining
                self.write(mp.encode_publish5(mp.subject_to_topic(nats_subject), payload, qos, pi, False, dup, props))
            else:
                self.write(mp.encode_publish(mp.subject_to_topic(nats_subject), payload, qos, pi, dup=dup))

        return deliver

    def _next_pi(self, ack: str) -> int:
        """bumpPI: the next free packet identifier after the last one used (0 = none free)."""
        pi = self.last_pi
        for _ in range(0xFFFF):
            pi = pi + 1 if pi < 0xFFFF else 1
            if pi not in self.pending and pi not in self.pubrel:  # (a dict: membership by key)
                self.last_pi = pi
                self.pending[pi] = ack
                return pi
        return 0

    # -- close ------------------------------------------------------------------------------------

    def _cleanup(self) -> None:
        if self._cleaned:
            return
        self._cleaned = True
        self.listener.conns.pop(self.cid, None)
        self.listener.closed_conn(self)
        for t in (self._ka_timer, self._auth_timer):
            if t is not None:
                t.cancel()
        for s in self.msubs.values():
            for c in s.core + s.js:
                c.unsubscribe()
        self.msubs.clear()
        if self._pubrel_sub is not None:
            self._pubrel_sub.unsubscribe()
            self._pubrel_sub = None
        asm, sess = self.asm, self.sess
        if asm is not None:
            asm.jsa.forget(f"MS{self.cid}.")
        if asm is None or sess is None:
            return
        if sess.conn is self:
            sess.conn = None
            asm.flappers.pop(sess.id, None)
            if sess.clean:
                asm.sessions.pop(sess.id, None)
                # (at shutdown the record stays: a clean record is cleared when its id connects again)
                if not self.listener.stopping:
                    asyncio.ensure_future(self._clear_clean(asm, sess))
            elif self.v5 and 0 < self.session_expiry < 0xFFFFFFFF and not self.listener.stopping:
                # MQTT 5 session expiry: the session ends that long after the connection, unless resumed
                def expire(asm: AccountSessions = asm, sess: Session = sess) -> None:
                    if sess.conn is None and asm.sessions.get(sess.id) is sess:
                        asm.sessions.pop(sess.id, None)
                        asyncio.ensure_future(self._clear_clean(asm, sess))

                self.server.clock.call_later(self.session_expiry * 1_000_000_000, expire)
        # The will: on an abrupt close only (DISCONNECT and takeover cleared it).
        will = self.will
        if will is not None and will.will_topic is not None:
            self.will = None
            delay = int(will.will_props.get(0x18, 0)) if self.v5 else 0  # MQTT 5 will delay interval
            if delay and not self.listener.stopping:

                def later(will: mp.Connect = will, sess: Session = sess) -> None:
                    if sess.conn is None:  # not resumed in the meantime [MQTT-3.1.3-9]
                        self._publish_will(will)

                self.server.clock.call_later(delay * 1_000_000_000, later)
            else:
                self._publish_will(will)

    def _publish_will(self, will: mp.Connect) -> None:
        assert will.will_topic is not None
        try:
            subject = mp.topic_to_subject(will.will_topic)
        except mp.TopicError:
            return
        props = {k: v for k, v in will.will_props.items() if k != 0x18} if will.will_props else None
        self._deliver_pub(
            subject,
            will.will_topic,
            will.will_message,
            will.will_qos,
            will.will_retain,
            0,
            self.username,
            props or None,
        )

    @staticmethod
    async def _clear_clean(asm: AccountSessions, sess: Session) -> None:
        try:
            await asm.clear_session(sess)
        except Exception as e:  # the server may be stopping
            logger.debug("MQTT: clearing session %r: %s", sess.id, e)
