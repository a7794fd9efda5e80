"""Message tracing (nats-server 2.11, ADR-41): a publish with a ``Nats-Trace-Dest`` header (or a
sampled W3C ``traceparent`` in an account with ``msg_trace { dest, sampling }``) makes the server
publish, on that destination in the publisher's account, one JSON event describing what it did
with the message: ingress, subject mapping, JetStream capture and each egress. With
``Nats-Trace-Only: true`` the message is traced but not delivered (and not stored).

The event's shape is nats-server's ``MsgTraceEvent``::

    {"server": {...ServerInfo...}, "request": {"header": {name: [values]}, "msgsize": n}, "hops"?: n,
     "events": [{"type": "in", "ts", "kind", "cid", "name"?, "acc", "subj", "error"?},
                {"type": "sm", "ts", "to"},
                {"type": "si", "ts", "acc", "from", "to"},
                {"type": "se", "ts", "acc", "to"},
                {"type": "js", "ts", "stream", "subject"?, "nointerest"?, "error"?},
                {"type": "eg", "ts", "kind", "cid", "name"?, "hop"?, "acc"?, "sub"?, "queue"?, "error"?}]}

Only traced messages come here (:func:`start` is called from the connection's checked publish
path, which a message takes only when its header block names ``Nats-Trace-Dest`` or its account
samples ``traceparent``): untraced publishes pay one bounded header search.

Imports (account JWTs, natsd.server.auth.imports) add ``{"type": "si", "acc", "from", "to"}``
(service import) and ``{"type": "se", "acc", "to"}`` (stream import) events, and tracing goes on
into the other account only where nats-server's ``allow_trace`` says so. A queue group's member is
chosen here and the message routed to it (through an import too), so its egress names the receiver.

Leafnode links (kind 4, natsd.server.leaf.node) are hops: the egress names the hop (``1``, ``2``...
at the origin, ``<hop>.<n>`` further on), the copy on the link carries it in ``Nats-Trace-Hop``,
the event counts them in ``hops``, and the server on the other side (natsd or nats-server: both
announce protocol 3) publishes its own event, of ingress kind 4, to the same destination. A
trace-only message still crosses links (the far side traces without delivering), except to a
remote below protocol 3, which would deliver it.

A stream among the receivers gets the message through its traced ingest
(natsd.jetstream.stream.tracing), which completes the ``js`` event (subject, ``nointerest``,
``error``) and, for a trace-only message, runs the stream's checks without storing.

A message traced in over a leafnode link whose permissions refuse its trace destination is a
publish violation (nats-server's leafSendAllowed/leafReceiveAllowed): not delivered.
"""

from __future__ import annotations

import json
import itertools
from natsd.lazydataclass import dataclass
from typing import TYPE_CHECKING, Any, Callable

from natsd import __version__
from natsd.gotime import format_rfc3339
from natsd.nats_headers import MSG_TRACE_DEST, MSG_TRACE_HOP, MSG_TRACE_ONLY, MSG_TRACE_ORIGIN_ACCOUNT, TRACEPARENT
from natsd.protocol.encoder import msg_parts
from natsd.server.router import LEAF_LINK, route
from natsd.server.subscription import Subscription
from natsd.subjects.sublist import SublistResult
from natsd.subjects.tokens import is_valid_publish_subject, subject_matches
from natsd.subjects.transform import transform
from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.config.options import ServerOptions
    from natsd.server.account import Account
    from natsd.server.auth.authenticator import SubjectFilter
    from natsd.server.context import ServerContext


class ClientConnection(Protocol):
    """What tracing needs of the publishing connection (``natsd.server.connection``, which imports
    this module: named here so there is no import circle)."""

    @property
    def cid(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def echo(self) -> bool: ...

    @property
    def account(self) -> Account | None: ...

    @property
    def pub_filter(self) -> SubjectFilter | None: ...

    @property
    def server(self) -> ServerContext: ...

    def publish_violation(self, subject: str) -> None: ...


__all__ = [
    "TRACE_DEST_B",
    "MsgTrace",
    "ImportHop",
    "start",
    "start_leaf",
    "route_traced",
    "header_map",
    "install",
    "set_header",
    "set_trace_dest",
    "server_info",
]

TRACE_DEST_B = MSG_TRACE_DEST  # what the publish path searches header blocks for
_TRACEPARENT_B = TRACEPARENT
_DEST = MSG_TRACE_DEST.decode()
_ONLY = MSG_TRACE_ONLY.decode()
_ORIGIN_ACCOUNT = MSG_TRACE_ORIGIN_ACCOUNT.decode()
_KIND_CLIENT = 0  # nats-server's connection kinds: CLIENT
_KIND_LEAF = 4  # (LEAF)
_HOP = MSG_TRACE_HOP.decode()
_NO_ECHO = "Not delivered because of no echo"
_SUB_DENY = "Not delivered because subscription denies this subject"
_SUB_CLOSED = "Not delivered because subscription is closed"
_CLIENT_CLOSED = "Not delivered because client is closed"
_ONLY_NO_SUPPORT = "Not delivered because remote does not support message tracing"
_NO_SUPPORT = "Message delivered but remote does not support message tracing so no trace event generated from there"

_rr = itertools.count()  # queue members' rotation
_MAX_DEPTH = 8  # imports followed (as natsd.server.auth.imports.MAX_DEPTH: cycles end)

# The traced message while route() delivers it (the loop is single-threaded): an import link that
# forwards it reads this to rewrite the forwarded copy's Nats-Trace-Dest as nats-server does.
active: MsgTrace | None = None


@dataclass(slots=True)
class ImportHop:
    """Where an import takes a message: into ``account`` on subject ``to``; ``service`` (else a
    stream import); ``allow_trace`` (the service export's or the stream import's); ``shadow``: for
    a stream import, the exporter-side subject of an importing subscription (nats-server's shadow
    subscription, which its egress event names)."""

    service: bool
    account: Account
    to: str
    allow_trace: bool
    shadow: Callable[[str], str] | None = None


def _randrange(n: int) -> int:
    from random import randrange  # (random loads with the first sampled trace: start-up time, ADR 0015)

    return randrange(n)


# Sampling of ``traceparent``: rand(100) -> [0, 100); tests replace it.
sample_rand: Callable[[int], int] = _randrange


def install(accounts: dict[str, Account], options: ServerOptions) -> None:
    """Each configured account's ``msg_trace`` (at start and on reload)."""
    conf = {a.name: a for a in options.accounts}
    for name, acc in accounts.items():
        a = conf.get(name)
        acc.trace_dest = a.trace_dest if a is not None else ""
        acc.trace_sampling = a.trace_sampling if a is not None else 0


def header_map(hdr: bytes) -> tuple[dict[str, list[str]], bool]:
    """The header block as ``{name: [values]}`` (names' case kept) when it has ``Nats-Trace-Dest``
    or a sampled ``traceparent`` (flags ``01``), else ``{}``; and whether only ``traceparent``
    asked for tracing (then the account's destination applies)."""
    if not hdr.startswith(b"NATS/1.0"):
        return {}, False
    found_dest = found_parent = False
    pairs: list[tuple[str, str]] = []
    for line in hdr.split(b"\r\n")[1:]:
        key, sep, val = line.partition(b":")
        val = val.strip(b" \t")
        if not sep or not key or not val:
            continue
        if not found_parent and key.lower() == _TRACEPARENT_B:
            parts = val.split(b"-")
            if len(parts) == 4 and len(parts[3]) == 2:
                try:
                    found_parent = int(parts[3], 16) & 1 == 1
                except ValueError:
                    pass
        elif not found_dest and key == TRACE_DEST_B:
            if val == b"trace disabled":
                return {}, False
            found_dest = True
        pairs.append((key.decode("utf-8", "replace"), val.decode("utf-8", "replace")))
    if not found_dest and not found_parent:
        return {}, False
    out: dict[str, list[str]] = {}
    for k, v in pairs:
        out.setdefault(k, []).append(v)
    return out, not found_dest


class LeafLink(Protocol):
    """What tracing needs of a leafnode link (``natsd.server.leaf.node.LeafConnection``: a room
    this core module does not import)."""

    cid: int
    remote_name: str
    account: Account | None
    closed: bool
    spoke: bool

    @property
    def server(self) -> ServerContext: ...

    @property
    def trace_support(self) -> bool: ...

    def trace_dest_allowed(self, dest: str) -> bool: ...

    def deliver(
        self,
        sub: Subscription,
        head: bytes,
        mid: bytes,
        data: bytes,
        subject: str,
        hdr_len: int,
        reply: bytes,
        subj_b: bytes,
        src: Any = None,
    ) -> bool: ...


class MsgTrace:
    """One traced message: its events so far, sent as one JSON message by :meth:`send`.

    Over leafnode links (nats-server's multi-hop tracing): each link the message leaves on is a
    hop, numbered ``<hop it came in with>.<n>`` (``n`` from 1; just ``n`` at the origin); its
    egress event names it, and the copy on that link carries it in ``Nats-Trace-Hop``, so the
    server on the other side traces the message on with that hop. ``hops`` counts them."""

    __slots__ = (
        "server",
        "acc",
        "dest",
        "trace_only",
        "headers",
        "msgsize",
        "events",
        "hop",
        "hops",
        "links",
        "copies",
        "chosen",
        "js",
    )

    def __init__(
        self,
        conn: ClientConnection | LeafLink,
        acc: Account,
        dest: str,
        trace_only: bool,
        headers: dict[str, list[str]],
        msgsize: int,
        subject: str,
        kind: int = _KIND_CLIENT,
        name: str = "",
        hop: str = "",
    ) -> None:
        self.server = conn.server
        self.acc = acc
        self.dest = dest
        self.trace_only = trace_only
        self.headers = headers
        self.msgsize = msgsize
        self.hop = hop
        self.hops = 0
        # Leafnode links the message leaves on: cid -> (hop, forwarded?, the link's subscriptions).
        self.links: dict[int, tuple[str, bool, list[Subscription]]] = {}
        self.copies: dict[int, tuple[bytes, bytes, int]] = {}  # cid -> (data in, data out, hdr_len)
        # The receivers chosen in another account (an import's), by (account, subject): the import
        # forwards the message to exactly them (take_chosen), so queue egresses name the receiver.
        self.chosen: dict[tuple[str, str], SublistResult] = {}
        self.js: list[_JsReceiver] = []  # the streams the message goes into (their js events)
        ingress: dict[str, Any] = {"type": "in", "ts": self._ts(), "kind": kind, "cid": conn.cid}
        if name:
            ingress["name"] = name
        ingress.update({"acc": acc.name, "subj": subject})
        self.events: list[dict[str, Any]] = [ingress]

    def _ts(self) -> str:
        return format_rfc3339(self.server.clock.time_ns())

    def ingress_error(self, text: str) -> None:
        self.events[0]["error"] = text

    def mapped(self, to: str) -> None:
        self.events.append({"type": "sm", "ts": self._ts(), "to": to})

    def egress(self, sub: Subscription, error: str = "", shown: str = "") -> None:
        c = sub.client
        e: dict[str, Any] = {"type": "eg", "ts": self._ts(), "kind": _KIND_CLIENT, "cid": c.cid}
        if c.name:
            e["name"] = c.name
        if c.account is not None and c.account.name != self.acc.name:
            e["acc"] = c.account.name
        e["sub"] = shown or sub.subject
        if sub.queue:
            e["queue"] = sub.queue
        if error:
            e["error"] = error
        self.events.append(e)

    def leaf_egress(self, sub: Subscription, error: str, forward: bool) -> None:
        """A hop over the leafnode link of ``sub`` (once per link and message, as nats-server
        sends one copy per link whatever the number of its subscriptions)."""
        c: LeafLink = sub.client
        self.hops += 1
        hop = f"{self.hop}.{self.hops}" if self.hop else str(self.hops)
        self.links[c.cid] = (hop, forward, [sub])
        e: dict[str, Any] = {"type": "eg", "ts": self._ts(), "kind": _KIND_LEAF, "cid": c.cid}
        if c.remote_name:
            e["name"] = c.remote_name
        e["hop"] = hop
        if c.account is not None and c.account.name != self.acc.name:
            e["acc"] = c.account.name
        if error:
            e["error"] = error
        self.events.append(e)

    def take_chosen(self, acc: Account, subject: str) -> SublistResult | None:
        """The receivers the trace chose for the copy an import forwards into ``acc`` on
        ``subject`` (once), None when it chose none there."""
        return self.chosen.pop((acc.name, subject), None)

    def leaf_copy(self, cid: int, data: bytes, hdr_len: int) -> tuple[bytes, int]:
        """The message as it leaves on link ``cid``: with its ``Nats-Trace-Hop`` (nats-server's
        setHeader: replaced where it stands, else added last)."""
        link = self.links.get(cid)
        if link is None or not hdr_len:
            return data, hdr_len
        done = self.copies.get(cid)
        if done is not None:
            # (another message delivered meanwhile on this link, e.g. by an import: untouched)
            return (done[1], done[2]) if done[0] is data else (data, hdr_len)
        hdr = set_header(data[:hdr_len], MSG_TRACE_HOP, link[0].encode())
        out = hdr + data[hdr_len:]
        self.copies[cid] = (data, out, len(hdr))
        return out, len(hdr)

    def service_import(self, acc: str, frm: str, to: str) -> None:
        self.events.append({"type": "si", "ts": self._ts(), "acc": acc, "from": frm, "to": to})

    def stream_export(self, acc: str, to: str) -> None:
        self.events.append({"type": "se", "ts": self._ts(), "acc": acc, "to": to})

    def jetstream(self, stream: str, subject: str) -> None:
        self.events.append({"type": "js", "ts": self._ts(), "stream": stream, "subject": subject})

    def send(self) -> None:
        """Publish the event on the destination, in the publisher's account (as nats-server's
        ``sendInternalAccountSysMsg``)."""
        body: dict[str, Any] = {
            "server": server_info(self.server),
            "request": {"header": self.headers, "msgsize": self.msgsize},
        }
        if self.hops:
            body["hops"] = self.hops
        body["events"] = self.events
        data = json.dumps(body, separators=(",", ":")).encode()
        route(self.acc, self.dest, self.dest.encode(), b"", 0, data, None)


_seq = 0


def server_info(s: ServerContext) -> dict[str, Any]:
    """nats-server's ``ServerInfo`` of the server's internal messages (trace events, advisories)."""
    global _seq
    _seq += 1
    o = s.options
    js = s.jetstream is not None
    d: dict[str, Any] = {"name": s.server_name, "host": o.host, "id": s.server_id, "ver": __version__}
    if o.server_tags:
        d["tags"] = list(o.server_tags)
    if o.server_metadata:
        d["metadata"] = dict(o.server_metadata)
    d.update({"jetstream": js, "flags": 1 if js else 0, "seq": _seq, "time": format_rfc3339(s.clock.time_ns())})
    return d


def start(conn: ClientConnection, subject: str, hdr_len: int, data: bytes) -> tuple[bool, MsgTrace | None]:
    """Begin tracing a publish when its headers ask for it: ``(skip delivery, trace or None)``.

    As nats-server's ``initMsgTrace``: a trace-only message whose trace cannot start is not
    delivered either; a destination the client may not publish to is a permissions violation."""
    headers, external = header_map(data[:hdr_len])
    if not headers:
        return False, None
    acc = conn.account
    if acc is None:
        return False, None
    trace_only = False
    if not external:
        only = headers.get(_ONLY) or [""]
        trace_only = only[0].lower() in ("1", "true", "on")
        dest = headers.get(_DEST, [""])[0]
        if not dest:
            return trace_only, None
    if headers.get(_ORIGIN_ACCOUNT):
        return trace_only, None  # the old multi-server header disables tracing, as the reference
    if external:
        dest = acc.trace_dest
        if not dest:
            return False, None
        sampling = acc.trace_sampling
        if 0 < sampling < 100 and not sample_rand(100) <= sampling:
            return False, None
    if not is_valid_publish_subject(dest):
        return trace_only, None
    if conn.pub_filter is not None and not conn.pub_filter.allows(dest):
        conn.publish_violation(dest)
        return True, None
    return False, MsgTrace(conn, acc, dest, trace_only, headers, len(data), subject, _KIND_CLIENT, conn.name)


def start_leaf(link: LeafLink, subject: str, hdr_len: int, data: bytes) -> tuple[bool, MsgTrace | None]:
    """:func:`start` for a message that came in over a leafnode link (nats-server's
    ``initMsgTrace`` for kind LEAF): the hop it came with is the base of the hops it leaves on;
    an account's ``traceparent`` destination applies without sampling (only the origin samples)."""
    headers, external = header_map(data[:hdr_len])
    acc = link.account
    if not headers or acc is None:
        return False, None
    trace_only = False
    if external:
        dest = acc.trace_dest
        if not dest:
            return False, None
    else:
        only = headers.get(_ONLY) or [""]
        trace_only = only[0].lower() in ("1", "true", "on")
        dest = headers.get(_DEST, [""])[0]
        if not dest:
            return trace_only, None
    if headers.get(_ORIGIN_ACCOUNT) or not is_valid_publish_subject(dest):
        return trace_only, None
    if not link.trace_dest_allowed(dest):
        return True, None  # (as from a client: the message is not delivered either)
    hop = (headers.get(_HOP) or [""])[0]
    return False, MsgTrace(link, acc, dest, trace_only, headers, len(data), subject, _KIND_LEAF, link.remote_name, hop)


class TracedStream(Protocol):
    """What tracing needs of a stream (``natsd.jetstream.stream.core.Stream``, whose ingest
    subscription's handler is its ``process_msg``)."""

    def process_traced(self, subject: str, reply: str, hdr: bytes | None, payload: bytes, trace_only: bool) -> Any: ...


class _JsReceiver:
    """A stream among a traced message's receivers: routed to in place of the stream's own
    subscription (the handler of a stand-in one), it hands the message to the stream's traced
    ingest (natsd.jetstream.stream.tracing) and completes the ``js`` event with what the stream
    did, as nats-server's processJetStreamMsg (subject, nointerest, error). The stored copy's
    ``Nats-Trace-Dest`` is "trace disabled", as nats-server stores it (a consumer delivering it
    later must not trace it again)."""

    __slots__ = ("mt", "stream", "event", "subject", "account", "done")

    def __init__(self, mt: MsgTrace, stream: TracedStream, subject: str, account: Account) -> None:
        self.mt = mt
        self.stream = stream
        self.subject = subject
        self.account = account
        self.done = False
        self.event: dict[str, Any] = {"type": "js", "ts": mt._ts(), "stream": getattr(stream, "name", "")}
        mt.events.append(self.event)

    def __call__(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        self.done = True
        trace_only = self.mt.trace_only
        if hdr and not trace_only:
            hdr = set_trace_dest(hdr, b"trace disabled")
        out = self.stream.process_traced(subject, reply, hdr, payload, trace_only)
        e = self.event
        if out.subject:
            e["ts"] = self.mt._ts()
            e["subject"] = out.subject
            if out.nointerest:
                e["nointerest"] = True
        if out.error:
            e["error"] = out.error


def _js_receiver(mt: MsgTrace, sub: Subscription, subject: str) -> Subscription:
    """The stand-in for the stream subscription ``sub`` in a traced message's receivers."""
    stream = getattr(sub.cb, "__self__", None)
    acc = sub.account or mt.acc
    if stream is None or not hasattr(stream, "process_traced"):
        mt.jetstream(sub.stream, _stored_subject(acc, sub.stream, subject))
        return sub
    rec = _JsReceiver(mt, stream, subject, acc)
    mt.js.append(rec)
    return Subscription(None, b"", sub.subject, None, cb=rec)


def route_traced(
    mt: MsgTrace,
    acc: Account,
    subject: str,
    subj_b: bytes,
    reply: bytes,
    hdr_len: int,
    data: bytes,
    src: ClientConnection | LeafLink,
    r: Any = None,
) -> int:
    """Route a traced message (unless trace-only) and record what happened to it; returns how many
    receivers got it (a trace-only message counts as delivered where it would have been).
    ``r``: the receivers when the caller has already matched (and filtered) them.

    A trace-only message still leaves on leafnode links (with its hop), as nats-server forwards
    it: the server on the other side traces it without delivering it either.

    Each queue group's member is chosen here, and the message is routed to exactly that member
    (a match result with one-member groups), so the egress event names the receiver."""
    global active
    if r is None:
        r = acc.sublist.match(subject)
    r, n = _observe_result(mt, r, subject, src, 0, False)
    active = mt
    try:
        if not mt.trace_only:
            n = route(acc, subject, subj_b, reply, hdr_len, data, src, None, r)
        elif mt.links:
            _forward_trace_only(mt, subject, subj_b, reply, hdr_len, data, src)
        _streams_left(mt, reply, hdr_len, data)
    finally:
        active = None
    mt.send()
    return n


def _streams_left(mt: MsgTrace, reply: bytes, hdr_len: int, data: bytes) -> None:
    """The streams routing did not reach: a trace-only message (nats-server runs the stream's
    checks for it, without storing; one behind an import, without answering there), or one an
    import did not forward (its event keeps the subject it would have been stored under)."""
    for rec in mt.js:
        if rec.done:
            continue
        if not mt.trace_only:
            rec.event["subject"] = _stored_subject(rec.account, rec.event["stream"], rec.subject)
            continue
        hdr = data[:hdr_len] if hdr_len else None
        direct = rec.account is mt.acc  # (behind an import, its answer would go astray)
        rec(rec.subject, reply.decode() if reply and direct else "", hdr, data[hdr_len:])


def _forward_trace_only(
    mt: MsgTrace, subject: str, subj_b: bytes, reply: bytes, hdr_len: int, data: bytes, src: Any
) -> None:
    head, mid = msg_parts(subj_b, reply, hdr_len, len(data))
    for _hop, forward, subs in mt.links.values():
        if forward:
            for sub in subs:
                sub.client.deliver(sub, head, mid, data, subject, hdr_len, reply, subj_b, src)


def _observe_result(
    mt: MsgTrace, r: Any, subject: str, src: Any, depth: int, imported: bool
) -> tuple[SublistResult, int]:
    """Record the events of delivering ``subject`` to the receivers ``r``; returns ``r`` with each
    queue group narrowed to its chosen member, and the number of receivers."""
    n = 0
    psubs = []
    for sub in r.psubs:
        if sub.client is None and sub.stream:
            psubs.append(_js_receiver(mt, sub, subject))
            n += 1
            continue
        n += _observe(mt, sub, subject, src, depth, imported)
        psubs.append(sub)
    if not r.qsubs:
        return SublistResult(tuple(psubs), (), ()), n
    groups = []
    names = []
    for group in r.qsubs:
        sub = _queue_member(group, src)
        if sub is not None:
            n += _observe(mt, sub, subject, src, depth, imported)
            groups.append((sub,))
            names.append(group[0].queue)
    return SublistResult(tuple(psubs), tuple(groups), tuple(names)), n


def _queue_member(group: tuple, src: Any) -> Subscription | None:
    """The member of a queue group that gets a message, with the router's rules (a rotating start
    among local members, a leafnode link only when no local member can take it, links weighted by
    the members they stand for)."""
    k = len(group)
    start = next(_rr) % k if k > 1 else 0
    remote = None
    wsum = 0
    for j in range(k):
        sub = group[(start + j) % k]
        c = sub.client
        if c is None:
            return sub
        if c.closed or sub.closed or (c is src and not c.echo):
            continue
        if c.sub_deny is LEAF_LINK:
            from random import random  # (only queue groups across leaf links: start-up time, ADR 0015)

            w = c.queue_weight(sub)
            wsum += w
            if random() * wsum < w:
                remote = sub
            continue
        if c.sub_deny is not None and c.sub_deny.denies(sub.subject):
            continue
        return sub
    return remote


def _stored_subject(acc: Account, name: str, subject: str) -> str:
    """The subject the stream stores the message under (after its ``subject_transform``), which the
    reference's JetStream event reports."""
    js = acc.jetstream
    stream = js.streams.get(name) if js is not None else None
    tr = stream.config.subject_transform if stream is not None else None
    if tr and tr.get("dest"):
        src = tr.get("src") or ">"
        if subject_matches(src, subject):
            return transform(src, tr["dest"], subject) or subject
    return subject


def _observe(mt: MsgTrace, sub: Subscription, subject: str, src: Any, depth: int = 0, imported: bool = False) -> int:
    c = sub.client
    if c is None:
        hop = _import_hop(sub, subject)
        if hop is not None and depth < _MAX_DEPTH:
            return _observe_import(mt, hop, subject, src, depth, imported)
        return 0  # other internal receivers (API, acks) are not reported, as the reference
    return _observe_client(mt, sub, subject, src)


def _observe_client(mt: MsgTrace, sub: Subscription, subject: str, src: Any, shown: str = "") -> int:
    c = sub.client
    if c.sub_deny is LEAF_LINK:
        return _observe_leaf(mt, sub, src)
    if c is src and not c.echo:
        mt.egress(sub, _NO_ECHO, shown)
        return 0
    if c.sub_deny is not None and c.sub_deny.denies(subject):
        mt.egress(sub, _SUB_DENY, shown)
        return 0
    if sub.closed:
        mt.egress(sub, _SUB_CLOSED, shown)
        return 0
    if c.closed:
        mt.egress(sub, _CLIENT_CLOSED, shown)
        return 0
    mt.egress(sub, "", shown)
    return 1


def _observe_leaf(mt: MsgTrace, sub: Subscription, src: Any) -> int:
    """A leafnode link among the receivers: one egress (and hop) per link; never back to the link
    the message came from, nor from a hub to another hub (the router's rules)."""
    c = sub.client
    if c is src or (getattr(src, "spoke", False) and c.spoke):
        return 0
    link = mt.links.get(c.cid)
    if link is not None:
        link[2].append(sub)  # the same copy, one more of the link's subscriptions (queue names)
        return 1
    if sub.closed or c.closed:
        mt.leaf_egress(sub, _CLIENT_CLOSED, False)
        return 0
    if c.trace_support:
        mt.leaf_egress(sub, "", True)
        return 1
    if mt.trace_only:
        # The other side would deliver it: a trace-only message does not go there.
        mt.leaf_egress(sub, _ONLY_NO_SUPPORT, False)
        return 0
    mt.leaf_egress(sub, _NO_SUPPORT, True)
    return 1


def _import_hop(sub: Subscription, subject: str) -> ImportHop | None:
    """What an account import's internal subscription does with ``subject`` (its links,
    natsd.server.auth.imports, answer ``trace_hop``), or None for any other internal receiver."""
    owner = getattr(sub.cb, "__self__", None)
    hop = getattr(owner, "trace_hop", None)
    return hop(sub, subject) if hop is not None else None


def _observe_import(mt: MsgTrace, hop: ImportHop, subject: str, src: Any, depth: int, imported: bool) -> int:
    """The events of a message crossing an import, as nats-server records them: a service import
    gives one ``si`` event, then (when its export has ``allow_trace``) the exporting account's
    receivers; a stream import gives one ``se`` event per importing subscription (nats-server's
    shadow subscriptions), each followed by its egress when the import has ``allow_trace``. A
    message that came in through a service import is not exported to streams again."""
    if hop.service:
        mt.service_import(hop.account.name, subject, hop.to)
        if not hop.allow_trace:
            return 1
        r, n = _observe_result(mt, hop.account.sublist.match(hop.to), hop.to, src, depth + 1, True)
        mt.chosen[(hop.account.name, hop.to)] = r
        return n
    if imported:
        return 0
    r = hop.account.sublist.match(hop.to)
    psubs = []
    n = 0
    for m in r.psubs:
        if m.client is None and not m.stream:
            psubs.append(m)  # (the link's own internal subscriptions: imports of imports are not followed)
            continue
        mt.stream_export(hop.account.name, hop.to)
        if hop.allow_trace and m.client is None:
            # A stream of the importer capturing it (nats-server shadows internal subscriptions too).
            psubs.append(_js_receiver(mt, m, hop.to))
            n += 1
            continue
        psubs.append(m)
        n += _observe_member(mt, hop, m, src)
    groups = []
    for group in r.qsubs:
        m = _queue_member(group, src)
        if m is not None:
            groups.append((m,))
            mt.stream_export(hop.account.name, hop.to)
            n += _observe_member(mt, hop, m, src)
    mt.chosen[(hop.account.name, hop.to)] = SublistResult(
        tuple(psubs), tuple(groups), tuple(g[0].queue for g in groups)
    )
    return n


def _observe_member(mt: MsgTrace, hop: ImportHop, m: Subscription, src: Any) -> int:
    """An importing subscription's egress (when the import has ``allow_trace``)."""
    if not hop.allow_trace:
        return 1
    return _observe_client(mt, m, hop.to, src, hop.shadow(m.subject) if hop.shadow else "")


def set_header(hdr: bytes, name: bytes, value: bytes) -> bytes:
    """``hdr`` with ``name``'s value replaced where it stands, else the header added last (Go's
    setHeader, which nats-server uses for the hop of a copy and to redirect or disable tracing of
    a message forwarded across an import)."""
    needle = b"\r\n" + name + b":"
    i = hdr.find(needle)
    if i < 0:
        end = len(hdr) - 2 if hdr.endswith(b"\r\n\r\n") else len(hdr)
        return hdr[:end] + name + b": " + value + b"\r\n\r\n"
    start = i + len(needle)
    j = hdr.find(b"\r\n", start)
    return hdr[:start] + b" " + value + hdr[j if j >= 0 else len(hdr) :]


def set_trace_dest(hdr: bytes, value: bytes) -> bytes:
    """``hdr`` with its ``Nats-Trace-Dest`` set to ``value`` (see :func:`set_header`)."""
    return set_header(hdr, MSG_TRACE_DEST, value)
