"""Per-account MQTT state in JetStream, in nats-server's streams and layouts.

Streams (created on the first MQTT connection of an account when missing, configs as
nats-server's mqttCreateAccountSessionManager):

* ``$MQTT_sess`` (``$MQTT.sess.<domain.>>``, limits, max 1 msg per subject): one record per
  client id at ``$MQTT.sess.<hash>``, ``<hash>`` = nats-server's getHash(client id) (8 base-62
  characters of its SHA-256). The record is JSON (mqttPersistedSession)::

      {"origin": "<node>", "id": "<client id>", "clean": true, "subs": {"<nats filter>": qos},
       "cons": {"<sid>": <ConsumerConfig>}}

  written with ``Nats-Expected-Last-Subject-Sequence`` once a previous record exists.
* ``$MQTT_msgs`` (``$MQTT.msgs.>``, interest retention): every QoS 1/2 PUBLISH, stored at
  ``$MQTT.msgs.<nats subject>``; a QoS>0 subscription is a durable push consumer
  (``<hash>_<nuid>``, filter ``$MQTT.msgs.<filter>``, deliver ``$MQTT.sub.<nuid>``, explicit ack,
  deliver new, ``ack_wait`` and ``max_ack_pending`` from ``mqtt {}``).
* ``$MQTT_rmsgs`` (``$MQTT.rmsgs.>``, limits, 1 per subject): retained messages at
  ``$MQTT.rmsgs.<nats subject>``; the headers carry the metadata (``Nmqtt-RTopic``,
  ``Nmqtt-RFlags`` hex, ``Nmqtt-ROrigin``, ``Nmqtt-RSource``) and the data is the payload. All of it
  is read at start through an ephemeral consumer into an in-memory index, as the reference does.
* ``$MQTT_qos2in`` (``$MQTT.qos2.in.<client id>.<pi>``, one per subject, discard new per subject):
  an inbound QoS 2 message between PUBREC and PUBREL, stored once however often it is resent;
  the header ``Nmqtt-Pub: 2<flags hex>`` and ``Nmqtt-Subject`` carry what delivery needs.
* ``$MQTT_out`` (``$MQTT.out.pubrel.<hash>``): outbound QoS 2, the PUBRELs owed to a client
  (``Nmqtt-PubRel: <pi>``), delivered by the durable ``$MQTT_PUBREL_<hash>`` until PUBCOMP; its
  config is the session record's ``"pubrel"``.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from natsd.gohash import get_hash
from natsd.nuid import nuid
from natsd.protocol.mqtt import subject_to_topic
from natsd.server.log import logger
from natsd.server.mqtt.jsa import JsApi, JsApiError
from natsd.subjects.tokens import subject_matches

if TYPE_CHECKING:  # pragma: no cover
    from natsd.server.mqtt.connection import MQTTConnection

__all__ = ["AccountSessions", "Session", "RetainedMsg", "SESS_STREAM", "MSGS_STREAM", "RMSGS_STREAM"]

SESS_STREAM = "$MQTT_sess"
MSGS_STREAM = "$MQTT_msgs"
RMSGS_STREAM = "$MQTT_rmsgs"
QOS2IN_STREAM = "$MQTT_qos2in"
OUT_STREAM = "$MQTT_out"
SESS_PREFIX = "$MQTT.sess."
MSGS_PREFIX = "$MQTT.msgs."
RMSGS_PREFIX = "$MQTT.rmsgs."
SUB_PREFIX = "$MQTT.sub."
QOS2IN_PREFIX = "$MQTT.qos2.in."
PUBREL_PREFIX = "$MQTT.out.pubrel."
PUBREL_DELIVER_PREFIX = "$MQTT.deliver.pubrel."
PUBREL_DURABLE_PREFIX = "$MQTT_PUBREL_"
JAIL_NS = 1_000_000_000  # mqttSessJailDur: a client id taken over twice within a second waits this long


class RetainedMsg:
    __slots__ = ("seq", "topic", "payload", "flags")

    def __init__(self, seq: int, topic: bytes, payload: bytes, flags: int) -> None:
        self.seq = seq
        self.topic = topic
        self.payload = payload
        self.flags = flags


def encode_retained(topic: bytes, flags: int, origin: str, source: str, payload: bytes) -> bytes:
    """mqttEncodeRetainedMessage's header block (the payload follows it in the stored message)."""
    h = b"NATS/1.0\r\nNmqtt-RTopic:" + topic + b"\r\nNmqtt-RFlags:" + format(flags, "x").encode() + b"\r\n"
    if origin:
        h += b"Nmqtt-ROrigin:" + origin.encode() + b"\r\n"
    if source:
        h += b"Nmqtt-RSource:" + source.encode() + b"\r\n"
    return h + b"\r\n"


def header_value(hdr: bytes, name: bytes) -> bytes | None:
    for line in hdr.split(b"\r\n")[1:]:
        k, sep, v = line.partition(b":")
        if sep and k.strip().lower() == name.lower():
            return v.strip()
    return None


class Session:
    """One client id's session (mqttSession)."""

    __slots__ = ("id", "hash", "seq", "clean", "subs", "cons", "conn", "pubrel")

    def __init__(self, cid: str) -> None:
        self.id = cid
        self.hash = get_hash(cid)
        self.seq = 0  # stream sequence of the last stored record (0: none)
        self.clean = False
        self.subs: dict[str, int] = {}  # NATS filter -> QoS
        self.cons: dict[str, dict] = {}  # sid (NATS filter) -> ConsumerConfig JSON
        self.conn: MQTTConnection | None = None
        self.pubrel: dict | None = None  # the PUBREL consumer's config (outbound QoS 2), once needed

    def record(self, origin: str) -> bytes:
        d: dict[str, Any] = {"origin": origin, "id": self.id}
        if self.clean:
            d["clean"] = True
        if self.subs:
            d["subs"] = self.subs
        if self.cons:
            d["cons"] = self.cons
        if self.pubrel:
            d["pubrel"] = self.pubrel
        return json.dumps(d, separators=(",", ":")).encode()


class AccountSessions:
    """mqttAccountSessionManager: the streams, sessions, flappers and retained index of one account."""

    def __init__(self, server: Any, account: Any, ports: Any) -> None:
        mo = server.options.mqtt
        self.server = server
        self.account = account
        self.node = get_hash(server.server_name)
        self.domain = mo.js_domain
        self.domain_tk = (
            (self.domain + ".")
            if self.domain
            else ((server.options.jetstream.domain + ".") if server.options.jetstream.domain else "")
        )
        self.jsa = JsApi(ports, self.node, self.domain, mo.effective_js_api_timeout_ns)
        self.ports = ports
        self.sessions: dict[str, Session] = {}
        self.locked: set[str] = set()
        self.flappers: dict[str, int] = {}
        self.retained: dict[str, RetainedMsg] = {}  # NATS subject -> message
        self._rsub: Any = None
        self.replicas = mo.stream_replicas if mo.stream_replicas > 0 else 1

    async def start(self) -> None:
        jsa = self.jsa
        r = self.replicas
        streams = [
            {
                "name": SESS_STREAM,
                "subjects": [SESS_PREFIX + self.domain_tk + ">"],
                "retention": "limits",
                "max_msgs_per_subject": 1,
                "storage": "file",
                "num_replicas": r,
            },
            {
                "name": MSGS_STREAM,
                "subjects": [MSGS_PREFIX + ">"],
                "retention": "interest",
                "storage": "file",
                "num_replicas": r,
            },
            {
                "name": QOS2IN_STREAM,
                "subjects": [QOS2IN_PREFIX + ">"],
                "retention": "limits",
                "discard": "new",
                "max_msgs_per_subject": 1,
                "discard_new_per_subject": True,
                "storage": "file",
                "num_replicas": r,
            },
            {
                "name": OUT_STREAM,
                "subjects": ["$MQTT.out.>"],
                "retention": "interest",
                "storage": "file",
                "num_replicas": r,
            },
            {
                "name": RMSGS_STREAM,
                "subjects": [RMSGS_PREFIX + ">"],
                "retention": "limits",
                "max_msgs_per_subject": 1,
                "storage": "file",
                "num_replicas": r,
            },
        ]
        for cfg in streams:
            try:
                await jsa.call("SL", f"STREAM.INFO.{cfg['name']}", None)
                continue
            except JsApiError as e:
                if e.err_code != 10059:  # JSStreamNotFoundErr
                    raise
            try:
                await jsa.call("SC", f"STREAM.CREATE.{cfg['name']}", cfg)
            except JsApiError as e:
                if e.err_code != 10058:  # JSStreamNameExistErr: another connection won the race
                    raise
        # Retained messages: an ephemeral push consumer over the whole stream feeds the index
        # (and keeps it current with retained messages stored later).
        rsubj = SUB_PREFIX + nuid()
        loaded = asyncio.get_running_loop().create_future()
        want = [0]
        got = [0]

        def on_retained(subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
            self._index_retained(subject, reply, hdr, payload)
            got[0] += 1
            if not loaded.done() and got[0] >= want[0]:
                loaded.set_result(None)

        self._rsub = self.ports.subscribe(rsubj, on_retained)
        info = await jsa.call(
            "CC",
            f"CONSUMER.CREATE.{RMSGS_STREAM}",
            {
                "stream_name": RMSGS_STREAM,
                "config": {
                    "name": f"{RMSGS_STREAM}_{nuid()}",
                    "filter_subject": RMSGS_PREFIX + ">",
                    "deliver_subject": rsubj,
                    "deliver_policy": "all",
                    "replay_policy": "instant",
                    "ack_policy": "none",
                    "inactive_threshold": 300 * 1_000_000_000,
                },
            },
        )
        want[0] = int(info.get("num_pending", 0)) + int(info.get("num_ack_pending", 0))
        if got[0] >= want[0] and not loaded.done():
            loaded.set_result(None)
        try:
            # Wait for the stored retained messages so the first SUBSCRIBE after a restart sees them.
            await asyncio.wait_for(loaded, self.jsa.timeout_s)
        except asyncio.TimeoutError:
            logger.warning("MQTT: retained messages of account %r not all loaded", self.account.name)

    def close(self) -> None:
        if self._rsub is not None:
            self._rsub.unsubscribe()
        self.jsa.close()

    # -- retained messages -----------------------------------------------------------------------

    def _index_retained(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        key = subject[len(RMSGS_PREFIX) :]
        seq = 0
        parts = reply.split(".")
        if len(parts) >= 9:  # $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<cseq>.<ts>.<pending>
            try:
                seq = int(parts[-4])
            except ValueError:
                seq = 0
        if not payload:
            old = self.retained.pop(key, None)
            if old is not None and hdr is not None and header_value(hdr, b"Nmqtt-ROrigin") == self.node.encode():
                self.delete_msg(RMSGS_STREAM, seq)
            return
        topic = (header_value(hdr, b"Nmqtt-RTopic") if hdr else None) or subject_to_topic(key)
        flags_b = (header_value(hdr, b"Nmqtt-RFlags") if hdr else None) or b"1"
        try:
            flags = int(flags_b.lstrip(b"-"), 16)
        except ValueError:
            flags = 1
        self.retained[key] = RetainedMsg(seq, topic, payload, flags)

    def delete_msg(self, stream: str, seq: int) -> None:
        if seq:
            self.jsa.send(
                f"{self.jsa.api}STREAM.MSG.DELETE.{stream}", json.dumps({"seq": seq, "no_erase": True}).encode()
            )

    def store_retained(self, subject: str, topic: bytes, flags: int, source: str, payload: bytes) -> None:
        """Store (or, with an empty payload, clear) the retained message of ``subject``. The index
        is updated now so a SUBSCRIBE right after sees it; the stream's delivery confirms it."""
        if payload:
            self.retained[subject] = RetainedMsg(0, topic, payload, flags)
        else:
            self.retained.pop(subject, None)
        hdr = (
            encode_retained(topic, flags, self.node, source, payload)
            if payload
            else (
                b"NATS/1.0\r\nNmqtt-RTopic:"
                + topic
                + b"\r\nNmqtt-RFlags:-"
                + format(flags, "x").encode()
                + b"\r\nNmqtt-ROrigin:"
                + self.node.encode()
                + b"\r\n\r\n"
            )
        )
        self.jsa.publish_cb("RS", RMSGS_PREFIX + subject, hdr, payload, lambda h, p: None)

    def retained_for(self, filt: str) -> list[RetainedMsg]:
        reserved = filt in (">", "*") or filt.startswith("*.")
        return [
            rm
            for subj, rm in self.retained.items()
            if subject_matches(filt, subj) and not (reserved and subj.startswith("$"))
        ]

    # -- sessions ----------------------------------------------------------------------------------

    def sess_subject(self, s: Session) -> str:
        return SESS_PREFIX + self.domain_tk + s.hash

    async def load_session(self, cid: str) -> tuple[Session, bool]:
        """createOrRestoreSession: (session, existed)."""
        s = self.sessions.get(cid)
        if s is not None:
            return s, True
        s = Session(cid)
        got = await self.jsa.last_msg(SESS_STREAM, self.sess_subject(s))
        if got is None:
            return s, False
        seq, _hdr, data = got
        rec = json.loads(data)
        if rec.get("id") != cid:
            raise JsApiError(0, 0, "stored session does not match client ID")
        s.seq = seq
        s.clean = bool(rec.get("clean", False))
        s.subs = {k: int(v) for k, v in (rec.get("subs") or {}).items()}
        s.cons = {k: v for k, v in (rec.get("cons") or {}).items() if v}
        s.pubrel = rec.get("pubrel") or None
        self.sessions[cid] = s
        return s, True

    async def save_session(self, s: Session) -> None:
        hdr = None
        if s.seq:
            hdr = b"NATS/1.0\r\nNats-Expected-Last-Subject-Sequence:" + str(s.seq).encode() + b"\r\n\r\n"
        raw = await self.jsa.request("SP", self.sess_subject(s), s.record(self.node), hdr)
        resp = json.loads(raw)
        if resp.get("error"):
            e = resp["error"]
            raise JsApiError(e.get("code", 0), e.get("err_code", 0), e.get("description", ""))
        s.seq = int(resp.get("seq", 0))

    async def clear_session(self, s: Session) -> None:
        """Forget a session: its consumers and its record (mqttSession.clear)."""
        for cc in list(s.cons.values()):
            await self.delete_consumer(cc)
        s.cons.clear()
        s.subs.clear()
        if s.pubrel is not None:
            await self.delete_consumer(s.pubrel, OUT_STREAM)
            s.pubrel = None
        if s.seq:
            self.delete_msg(SESS_STREAM, s.seq)
            s.seq = 0

    async def delete_consumer(self, cc: dict, stream: str = MSGS_STREAM) -> None:
        name = cc.get("durable_name") or cc.get("name")
        if name:
            try:
                await self.jsa.call("CD", f"CONSUMER.DELETE.{stream}.{name}", None)
            except (JsApiError, asyncio.TimeoutError):
                pass

    def consumer_config(self, s: Session, filt: str) -> dict:
        """The durable push consumer of a QoS>0 subscription (processJSConsumer's config)."""
        mo = self.server.options.mqtt
        cfg: dict[str, Any] = {
            "durable_name": f"{s.hash}_{nuid()}",
            "deliver_subject": SUB_PREFIX + nuid(),
            "deliver_policy": "new",
            "ack_policy": "explicit",
            "filter_subject": MSGS_PREFIX + filt,
            "ack_wait": mo.effective_ack_wait_ns,
            "max_ack_pending": mo.effective_max_ack_pending,
        }
        if mo.consumer_memory_storage:
            cfg["mem_storage"] = True
        if mo.consumer_inactive_threshold_ns > 0:
            cfg["inactive_threshold"] = mo.consumer_inactive_threshold_ns
        return cfg

    async def create_consumer(self, cfg: dict, stream: str = MSGS_STREAM) -> None:
        await self.jsa.call(
            "CC", f"CONSUMER.DURABLE.CREATE.{stream}.{cfg['durable_name']}", {"stream_name": stream, "config": cfg}
        )

    def shared_consumer_config(self, group: str, filt: str) -> dict:
        """MQTT 5 ``$share/<group>/<filter>`` at QoS>0: a durable with a deliver group, named after
        the group and filter (every member asks for the same one). Shared groups come and go, so it
        is removed once it has had no member for ``consumer_inactive_threshold`` (5 minutes by
        default): an interest stream must not keep messages for a group that is gone."""
        mo = self.server.options.mqtt
        h = get_hash(f"{group} {filt}", 12)
        return {
            "durable_name": f"$MQTT_SHARE_{h}",
            "deliver_subject": f"{SUB_PREFIX}share.{h}",
            "deliver_group": group,
            "deliver_policy": "new",
            "ack_policy": "explicit",
            "filter_subject": MSGS_PREFIX + filt,
            "ack_wait": mo.effective_ack_wait_ns,
            "max_ack_pending": mo.effective_max_ack_pending,
            "inactive_threshold": mo.consumer_inactive_threshold_ns or 300 * 1_000_000_000,
        }

    def pubrel_config(self, s: Session) -> dict:
        """ensurePubRelConsumerSubscription's consumer: PUBRELs owed to the session's client are
        stored at ``$MQTT.out.pubrel.<hash>`` and delivered to ``$MQTT.deliver.pubrel.<hash>``
        until its PUBCOMP acknowledges them (so they are re-sent after a reconnect)."""
        mo = self.server.options.mqtt
        cfg: dict[str, Any] = {
            "durable_name": PUBREL_DURABLE_PREFIX + s.hash,
            "deliver_subject": PUBREL_DELIVER_PREFIX + s.hash,
            "deliver_policy": "new",
            "ack_policy": "explicit",
            "filter_subject": PUBREL_PREFIX + s.hash,
            "ack_wait": mo.effective_ack_wait_ns,
            "max_ack_pending": mo.effective_max_ack_pending,
        }
        if mo.consumer_memory_storage:
            cfg["mem_storage"] = True
        if mo.consumer_inactive_threshold_ns > 0:
            cfg["inactive_threshold"] = mo.consumer_inactive_threshold_ns
        return cfg
