"""Mirrors and sources within one account, the way nats-server builds them: through the
normal consumer API.

A :class:`SourceLink` connects a stream (the *target*) to one origin stream. It asks the origin
for a push consumer with an internal deliver subject, as nats-server 2.14+ does (API level 4)::

    header  Nats-Required-Api-Level: 4
    $JS.API.CONSUMER.CREATE.<origin>[.<name>.<filter>]   {"stream_name": <origin>, "config": {
        "name": "JS_SRC_<id>" (a mirror: "JS_MIRROR_<id>"), "sourcing": true, "direct": true,
        "deliver_subject": "$JSC.SI.<rand>", "ack_policy": "none", "ack_wait": 22h,
        "max_deliver": 1, "idle_heartbeat": 1s, "flow_control": true, "inactive_threshold": 10s,
        "deliver_policy": "by_start_sequence", "opt_start_seq": <next>, "filter_subject"?,
        "metadata": {"_nats.src.stream": <target>, "_nats.src.acc": <account>, "_nats.src.domain"?}}}

and stores what it receives. The origin sequence and timestamp come from the delivery's ack
subject ``$JS.ACK.<origin>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>``.

**Durable sourcing.** ``<id>`` is stable (the hash of the target's name, account and domain, as
the reference's ``createSourcingConsumerHash``), so every setup asks for the same consumer. An
origin with interest or work-queue retention turns it into a durable acked by flow control
(``ack_policy: flow_control``): a message leaves the origin only once a flow-control reply of
ours says it was stored. Our replies carry ``Nats-Last-Consumer: <dseq>`` / ``Nats-Last-Stream:
<sseq>``, the last delivery we processed; they go out at the end of the loop turn, after the
stream's batch write (``Stream._flush``), so they never confirm a record that has not reached the
OS. Deliveries are checked for gaps: a consumer sequence that skips (messages lost on a link that
was cut abruptly) or a heartbeat whose ``Nats-Last-Consumer`` differs from ours sets the consumer
up again; an existing durable then starts over from its ack floor and what we already stored is
dropped by origin sequence. So nothing is lost or duplicated across link cuts. A durable is only
deleted with the target stream (or when the source is removed from its config), never when the
server stops or the link is set up again. An origin answering the level-4 request with 10185
(level not supported) or 10025 (an older server's JSON check) is asked again as the reference
falls back: without ``sourcing`` and with a unique name (``JS_SRC_<id>_<rand>``), an ephemeral
ack-none consumer.

* mirror: the message is stored with the origin's sequence and time (``store_raw_msg``); gaps
  (origin deletes, filtered-out subjects) are skipped with ``skip_msgs`` so sequences line up.
* source: the message goes through the target's normal ingest with a fresh sequence and the
  header ``Nats-Stream-Source: <origin> <origin seq> <filter> <dest> <original subject>``
  (``>`` for no filter / transform), as the reference writes it. A counter stream
  (``allow_msg_counter``) sourcing counters aggregates them (natsd.jetstream.stream.counters).
* ``Nats-Batch-*`` and ``Nats-Expected-*`` headers are dropped on both: an atomic batch is not
  one on the target, and the origin checked the expectations.

Flow-control requests (``NATS/1.0 100 FlowControl Request``) are answered as above; a heartbeat
carrying ``Nats-Consumer-Stalled`` is answered on that subject. Every 10s
(the reference's health-check interval) a link that has heard nothing for 3 heartbeats, or
whose consumer could not be created (e.g. the origin does not exist yet), recreates its
consumer from the next sequence it needs.

``external: {"api": "$JS.HUB.API", "deliver": "..."}`` origins (another JetStream domain, e.g.
across a leafnode link) go through the same requests with ``api`` in place of ``$JS.API``; the
deliver subject starts with ``deliver`` when given. Their ``Nats-Stream-Source`` name is
``<origin>:<hash of api>`` as the reference writes it, so the two sides' resume logic agree.

Not supported: ``subject_transforms`` on mirrors/sources with mapping functions other than
wildcard references (validated at create).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from natsd.jetstream.config.models import SECOND
from natsd import nats_headers as NH
from natsd.gohash import get_hash
from natsd.store.base import StoreError
from natsd.subjects.tokens import subject_matches
from natsd.subjects.transform import transform as _transform
from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Clock, Timer
    from natsd.jetstream.config.models import StreamConfig
    from natsd.jetstream.views import AccountView
    from natsd.store.base import StreamStore

__all__ = ["SourcedStream", "SourceLink", "HEALTH_CHECK_NS", "SOURCE_HEADER", "REQUIRED_LEVEL"]

log = logging.getLogger("natsd.jetstream.sourcing")

HEALTH_CHECK_NS = 10 * SECOND
HEARTBEAT_NS = SECOND
SOURCE_HEADER = NH.STREAM_SOURCE
_FC_STATUS = b"NATS/1.0 100 FlowControl Request"
_STATUS_100 = b"NATS/1.0 100"
#: The API level a durable sourcing request requires (durable sourcing, ack policy flow_control).
REQUIRED_LEVEL = 4
_LEVEL_HDR = b"NATS/1.0\r\nNats-Required-Api-Level: %d\r\n\r\n" % REQUIRED_LEVEL
# A flow-control reply: the last consumer and stream sequences processed (nats-server's layout).
_FC_REPLY = "NATS/1.0\r\nNats-Last-Consumer: %d\r\nNats-Last-Stream: %d\r\n\r\n"
_LAST_CONSUMER = NH.LAST_CONSUMER + b":"
_STALLED = NH.CONSUMER_STALLED + b":"
_EXPECTED_PREFIX, _BATCH_PREFIX = NH.EXPECTED_PREFIX, NH.BATCH_PREFIX
_BATCH_OR_EXPECTED = (_BATCH_PREFIX, _EXPECTED_PREFIX)
_TTL_LINE = NH.TTL + b":"
_ROLLUP_LINE = NH.ROLLUP + b":"
# Create replies that mean "this origin does not know sourcing consumers": fall back.
_FALLBACK_CODES = (10185, 10025)


# Lower case before upper case: not nats-server's order (natsd.gohash.DIGITS), but the names of
# durable sourcing consumers that already exist on origins are made with it; changing it would
# orphan them (and the messages they hold on interest or work-queue origins).
_HASH_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def api_hash(name: str, size: int = 8) -> str:
    """nats-server's getHash over natsd's historical digit order (see ``_HASH_DIGITS``)."""
    return get_hash(name, size, _HASH_DIGITS)


def _rand(n: int = 10) -> str:
    import secrets  # (with the first sourced stream: start-up time, ADR 0015)

    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _header_int(hdr: bytes, name: bytes) -> int:
    i = hdr.find(name)
    if i < 0:
        return -1
    v = hdr[i + len(name) :].split(b"\r\n", 1)[0].strip()
    return int(v) if v.isdigit() else -1


def _drop_mirror_headers(hdr: bytes) -> bytes | None:
    lines = hdr.split(b"\r\n")
    kept = [ln for ln in lines[1:] if ln and not ln.startswith(_BATCH_OR_EXPECTED)]
    if not kept and lines[0] == b"NATS/1.0":
        return None
    return lines[0] + b"\r\n" + b"".join(ln + b"\r\n" for ln in kept) + b"\r\n"


class SourcedStream(Protocol):
    """What a :class:`SourceLink` needs of the stream it feeds (a mirror or a stream with
    sources): where it is, its config and store, and the two ways in -- ``process_msg`` (a
    source's message, through the publish checks) and ``note_mirrored`` (a mirror stored
    the origin's record itself)."""

    name: str
    config: "StreamConfig"
    store: "StreamStore"
    clock: "Clock"
    closed: bool

    @property
    def account(self) -> "AccountView": ...

    def note_mirrored(self, seq: int) -> None: ...

    def process_msg(
        self, subject: str, reply: str, hdr: bytes | None, payload: bytes, sourced: bool = False
    ) -> int: ...


class SourceLink:
    """One mirror or source of ``stream``; ``cfg`` is the StreamSource JSON dict."""

    def __init__(self, stream: SourcedStream, cfg: dict, mirror: bool) -> None:
        self.stream = stream
        self.cfg = cfg
        self.mirror = mirror
        self.origin: str = cfg.get("name", "")
        ext = cfg.get("external") or {}
        # The origin's API prefix ("$JS.API" locally, "$JS.<domain>.API" in another domain).
        self.api: str = (ext.get("api") or "$JS.API").rstrip(".")
        self.deliver_prefix: str = (ext.get("deliver") or "").rstrip(".")
        # The origin's name in Nats-Stream-Source headers.
        self.iname: str = self.origin + (":" + api_hash(ext.get("api") or "") if ext else "")
        self.filter: str = cfg.get("filter_subject") or ""
        trs = cfg.get("subject_transforms") or []
        self.transforms: list[tuple[str, str]] = [((t.get("src") or ">"), t.get("dest") or "") for t in trs]
        self.last_sseq = 0  # last origin sequence received
        self.lag = 0
        self.last_active = 0  # monotonic ns of the last message or heartbeat
        self.consumer = ""
        self.error: dict | None = None
        self.dseq = 0  # last consumer sequence processed (gap detection, flow-control replies)
        self.durable = False  # the origin made our consumer a durable acked by flow control
        self._sourcing = True  # ask for a sourcing consumer (False after an old origin refused)
        self._name = ""  # the consumer name asked for
        self._deliver = ""
        self._subs: list[Any] = []
        self._timer: Timer | None = None
        self._closed = False
        self._creating = False

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self.last_sseq = self._recover_last_sseq()
        self._create_consumer()
        self._arm_health()

    def stop(self, delete_consumer: bool = True, forget: bool = False) -> None:
        """Stop the link. An ephemeral consumer is deleted (``delete_consumer``); a durable one
        only when the source goes for good (``forget``: the stream is deleted, the source
        removed): it holds what the origin still has to hand over."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._teardown(delete_consumer and (forget or not self.durable))

    def _teardown(self, delete_consumer: bool = True) -> None:
        for s in self._subs:
            s.unsubscribe()
        self._subs = []
        if delete_consumer and self.consumer:
            ports = self.stream.account.ports
            ports.publish(f"{self.api}.CONSUMER.DELETE.{self.origin}.{self.consumer}", "", None, b"")
        self.consumer = ""

    def _recover_last_sseq(self) -> int:
        store = self.stream.store
        if self.mirror:
            return store.state().last_seq
        # sources: the newest message that came from this origin says where we were
        st = store.state()
        seq = st.last_seq
        prefix = SOURCE_HEADER + b": " + self.iname.encode() + b" "
        while seq > 0 and seq >= st.first_seq:
            try:
                sm = store.load_prev_msg(seq)
            except StoreError:
                break
            if sm.hdr and prefix in sm.hdr:
                line = sm.hdr[sm.hdr.index(prefix) + len(prefix) :].split(b"\r\n", 1)[0]
                tok = line.split(b" ", 1)[0]
                if tok.isdigit():
                    return int(tok)
            seq = sm.seq - 1
        return 0

    def _stable_id(self) -> str:
        """nats-server's createSourcingConsumerHash: the target's name, account and domain
        (and the source's index name when the same origin is sourced twice), hashed twice."""
        stream = self.stream
        key = f"{stream.name} {stream.account.name}"
        dom = stream.account.engine.domain
        if dom:
            key += f" {dom}"
        ident = api_hash(key)
        if not self.mirror:
            srcs = stream.config.sources or []
            if sum(1 for c in srcs if (c or {}).get("name") == self.origin) > 1:
                ident += f" {self.iname} "
        return api_hash(ident)

    def _create_consumer(self) -> None:
        if self._closed or self._creating:
            return
        # (a durable stays: setting it up again resets it to its ack floor)
        self._teardown(delete_consumer=not self.durable)
        ports = self.stream.account.ports
        self._deliver = f"{self.deliver_prefix}.{_rand()}" if self.deliver_prefix else f"$JSC.SI.{_rand()}"
        reply = f"$JSC.R.{_rand()}"
        self._subs.append(ports.subscribe(self._deliver, self._on_msg))
        self._subs.append(ports.subscribe(reply, self._on_create_reply))
        stream = self.stream
        name = f"JS_{'MIRROR' if self.mirror else 'SRC'}_{self._stable_id()}"
        if not self._sourcing:
            name += "_" + _rand(8)
        self._name = name
        meta = {
            "_nats.mirror.stream" if self.mirror else "_nats.src.stream": stream.name,
            "_nats.mirror.acc" if self.mirror else "_nats.src.acc": stream.account.name,
        }
        if stream.account.engine.domain:
            meta["_nats.mirror.domain" if self.mirror else "_nats.src.domain"] = stream.account.engine.domain
        config: dict = {
            "name": name,
            "deliver_subject": self._deliver,
            "ack_policy": "none",
            "ack_wait": 22 * 3600 * SECOND,
            "max_deliver": 1,
            "idle_heartbeat": HEARTBEAT_NS,
            "flow_control": True,
            "direct": True,
            "inactive_threshold": HEALTH_CHECK_NS,
            "metadata": meta,
        }
        if self._sourcing:
            config["sourcing"] = True
        if self.last_sseq:
            config["deliver_policy"] = "by_start_sequence"
            config["opt_start_seq"] = self.last_sseq + 1
        elif self.cfg.get("opt_start_seq"):
            config["deliver_policy"] = "by_start_sequence"
            config["opt_start_seq"] = self.cfg["opt_start_seq"]
        elif self.cfg.get("opt_start_time"):
            config["deliver_policy"] = "by_start_time"
            config["opt_start_time"] = self.cfg["opt_start_time"]
        else:
            config["deliver_policy"] = "all"
        if self.filter:
            config["filter_subject"] = self.filter
        elif len(self.transforms) == 1 and self.transforms[0][0] != ">":
            config["filter_subject"] = self.transforms[0][0]
        elif len(self.transforms) > 1:
            config["filter_subjects"] = [t[0] for t in self.transforms]
        # The subject names the consumer (and its one filter) as the reference's requests do.
        subject = f"{self.api}.CONSUMER.CREATE.{self.origin}"
        if config.get("filter_subject"):
            subject += f".{name}.{config['filter_subject']}"
        self._creating = True
        self.dseq = 0
        self.last_active = self.stream.clock.monotonic_ns()
        ports.publish(
            subject,
            reply,
            _LEVEL_HDR if self._sourcing else None,
            json.dumps({"stream_name": self.origin, "config": config}).encode(),
        )

    def _on_create_reply(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        self._creating = False
        try:
            resp = json.loads(payload)
        except ValueError:
            resp = {"error": {"code": 500, "err_code": 10029, "description": "bad consumer create reply"}}
        if "error" in resp:
            err = resp["error"] if isinstance(resp["error"], dict) else {}
            if self._sourcing and err.get("err_code") in _FALLBACK_CODES and not self._closed:
                # An origin without durable sourcing: ask again as the reference falls back.
                log.info(
                    "stream %s: origin %s does not support sourcing consumers (%s); using an ephemeral consumer",
                    self.stream.name,
                    self.origin,
                    err.get("description"),
                )
                self._sourcing = False
                self._create_consumer()
                return
            self.error = resp["error"]
            self.consumer = ""
            return
        self.error = None
        self.consumer = resp.get("name", "")
        self.durable = (resp.get("config") or {}).get("ack_policy") == "flow_control"
        self.lag = resp.get("num_pending", 0)

    def _retry(self) -> None:
        """Set the consumer up again from the next sequence we need (a gap was seen)."""
        if self._creating or self._closed:
            return
        self._create_consumer()

    # -- data -------------------------------------------------------------------------------------
    def _on_msg(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        stream = self.stream
        self.last_active = stream.clock.monotonic_ns()
        if hdr and hdr.startswith(_STATUS_100):
            if hdr.startswith(_FC_STATUS) and reply:
                # Confirms what was processed before it, once the turn's write is done.
                self._fc_reply(reply, self.dseq, self.last_sseq)
            else:
                last = _header_int(hdr, _LAST_CONSUMER)
                if last > 0 and last != self.dseq and self.consumer and not self._creating:
                    self._retry()  # the origin delivered something we never got
                elif _STALLED in hdr:
                    fc = hdr.split(_STALLED, 1)[1].split(b"\r\n", 1)[0].strip().decode()
                    if fc:
                        stream.account.ports.publish(fc, "", None, b"")
            return
        toks = reply.split(".")
        if len(toks) < 9 or toks[0] != "$JS" or toks[1] != "ACK":
            return
        # v1: $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>
        # v2: $JS.ACK.<domain>.<acc hash>.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>[.<token>]
        o = 0 if len(toks) == 9 else 2
        try:
            dc, sseq, dseq = int(toks[4 + o]), int(toks[5 + o]), int(toks[6 + o])
            ts, pending = int(toks[7 + o]), int(toks[8 + o])
        except (ValueError, IndexError):
            return
        if dc > 1:
            return
        if dseq != self.dseq + 1:
            if dseq > self.dseq + 1 and not self._creating:
                self._retry()  # a gap: deliveries were lost (a link cut abruptly)
            return
        self.dseq = dseq
        if sseq <= self.last_sseq:
            return  # a redelivery after the consumer was set up again: already have it
        self.lag = pending
        if self.mirror:
            self._store_mirrored(subject, hdr, payload, sseq, ts)
        else:
            self._store_sourced(subject, hdr, payload, sseq)
        self.last_sseq = sseq

    def _fc_reply(self, reply: str, dseq: int, sseq: int) -> None:
        """Answer a flow-control request with the last sequences processed, after the stream's
        write of this loop turn (scheduled earlier, so it runs first): an origin acked by flow
        control removes what we confirm."""
        stream = self.stream
        target_last = stream.store.state().last_seq

        def send() -> None:
            if self._closed or stream.closed:
                return
            if stream.store.state().last_seq < target_last:
                self._retry()  # the write failed and was rolled back: confirm nothing, ask again
                return
            hdr = (_FC_REPLY % (dseq, sseq)).encode() if sseq > 0 else None
            stream.account.ports.publish(reply, "", hdr, b"")

        stream.clock.call_soon(send)

    def _store_mirrored(self, subject: str, hdr: bytes | None, payload: bytes, sseq: int, ts: int) -> None:
        stream = self.stream
        store = stream.store
        last = store.state().last_seq
        if sseq <= last:
            return
        if hdr and (b"\r\nNats-Batch-" in hdr or b"\r\nNats-Expected-" in hdr):
            # as the reference: expectations were checked by the origin, and a batch is no
            # batch on the mirror
            hdr = _drop_mirror_headers(hdr)
        try:
            if sseq > last + 1:
                store.skip_msgs(last + 1, sseq - last - 1)
            store.store_raw_msg(subject, hdr, payload, sseq, ts)
        except StoreError as e:
            log.error("mirror %s of %s: store failed: %s", stream.name, self.origin, e)
            return
        stream.note_mirrored(sseq)

    def _store_sourced(self, subject: str, hdr: bytes | None, payload: bytes, sseq: int) -> None:
        new_subject = subject
        dest = ">"
        src = self.filter or ">"
        for tsrc, tdest in self.transforms:
            if subject_matches(tsrc, subject):
                src, dest = tsrc, tdest or ">"
                if tdest:
                    new_subject = _transform(tsrc, tdest, subject) or subject
                break
        value = f"{self.iname} {sseq} {src} {dest} {subject}".encode()
        line = SOURCE_HEADER + b": " + value + b"\r\n"
        if hdr:
            hdr = self._strip_headers(hdr)
        nh = (hdr[: len(hdr) - 2] + line + b"\r\n") if hdr else (b"NATS/1.0\r\n" + line + b"\r\n")
        self.stream.process_msg(new_subject, "", nh, payload, sourced=True)

    def _strip_headers(self, hdr: bytes) -> bytes | None:
        """Headers that must not act again on the target (as the reference): expected-*
        checks and batch headers always; Nats-TTL / Nats-Rollup when the target does not allow
        them (a sourced message is never rejected for them)."""
        if b"Nats-" not in hdr:
            return hdr
        cfg = self.stream.config
        drop = [_EXPECTED_PREFIX, _BATCH_PREFIX]
        if not cfg.allow_msg_ttl:
            drop.append(_TTL_LINE)
        if not (cfg.allow_rollup_hdrs and not cfg.deny_purge):
            drop.append(_ROLLUP_LINE)
        lines = hdr.split(b"\r\n")
        kept = [ln for ln in lines[1:] if ln and not any(ln.startswith(d) for d in drop)]
        if not kept:
            return None
        return lines[0] + b"\r\n" + b"\r\n".join(kept) + b"\r\n\r\n"

    # -- health -----------------------------------------------------------------------------------
    def _arm_health(self) -> None:
        if not self._closed:
            self._timer = self.stream.clock.call_later(HEALTH_CHECK_NS, self._health)

    def _health(self) -> None:
        self._timer = None
        if self._closed:
            return
        idle = self.stream.clock.monotonic_ns() - self.last_active
        if not self.consumer or idle > 3 * HEARTBEAT_NS:
            self._creating = False
            self._create_consumer()
        self._arm_health()

    def info(self) -> dict:
        """StreamSourceInfo JSON: name, lag, active (ns since last activity), error?, filter."""
        out: dict = {
            "name": self.origin,
            "lag": self.lag,
            "active": max(self.stream.clock.monotonic_ns() - self.last_active, 0) if self.last_active else -1,
        }
        if self.error:
            out["error"] = self.error
        if self.filter:
            out["filter_subject"] = self.filter
        if self.cfg.get("subject_transforms"):
            out["subject_transforms"] = self.cfg["subject_transforms"]
        return out
