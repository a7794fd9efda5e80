"""Leafnode links: natsd as a leaf of a NATS system (remotes) and as a hub for leaves (port).

Theory of operation
-------------------
One :class:`LeafConnection` per TCP link, whichever side opened it; :mod:`natsd.protocol.leaf`
parses and encodes its bytes. A link is bound to one local account. It behaves towards the rest
of the server like a client that subscribes on behalf of the other side:

* **interest in**: ``LS+ subject [queue weight]`` inserts one :class:`Subscription` owned by the
  link into the account's Sublist (``LS-`` removes it), so local publishes reach the other side
  through the normal routing (:func:`natsd.server.router.route`), queue groups included: the link
  is a member of a group used when no local member is there (as the reference), and among several
  links one is picked in proportion to its ``weight`` (the members it stands for, :meth:`queue_weight`). Links set
  ``sub_deny`` to a never-denying marker
  (``router.LEAF_LINK``) so the router always calls :meth:`LeafConnection.deliver`, which writes ``LMSG``/``HMSG``
  frames instead of ``MSG``. When one message reaches a link through several subscriptions
  (plain and queue interest, or overlapping wildcards), the router calls ``deliver`` for each,
  with the same ``head`` object: the second call amends the frame just written (adds the queue
  name) instead of sending the message twice, as nats-server sends one ``LMSG`` per link.
* **interest out**: the account's Sublist reports every insert/remove (``Sublist.watch``);
  :class:`~natsd.server.leaf.manager.LeafManager` forwards it to each link of the account, which keeps a count per
  (subject, queue) and sends ``LS+``/``LS-`` when a count leaves/reaches zero (and ``LS+`` with
  the new weight when a queue group's size changes; another link's member counts for its weight,
  so a hub tells each leaf how many members the other leafs stand for). Subscriptions a link made itself are not
  echoed back to it, and a spoke link never gets the interest of another spoke link (hub interest
  does not flow hub to hub; the roles: natsd.server.leaf.handshake, ``hub: true``).
* **messages in**: ``LMSG`` is routed like a client publish from the link (``echo`` off, so it
  never goes back), except that queue groups only get it when the frame names them.
* **JetStream isolation** (as the reference, for every non-system account): ``$JS.API.>``,
  ``$KV.>`` and ``$OBJ.>`` cross no link, in either direction (interest and messages); when the
  two sides' domains differ, requests to our own ``$JS.<domain>.API.>`` do not leave either.
  ``$JS.<domain>.API.>`` interest of each side crosses, so a client reaches the other side's
  JetStream with ``domain=``. ``deny_imports``/``deny_exports`` of a remote add to these.
* **loops**: every link announces ``LS+ $LDS.<unique per account>``; receiving our own ``$LDS``
  subject back means the links form a cycle: ``-ERR 'Loop detected ...'``, close, and the
  soliciting side waits 30 s before trying again.

Handshake (:mod:`natsd.server.leaf.handshake`): the accepting side sends INFO (with ``nonce``, ``leafnode_urls``,
``info_on_connect``);
the soliciting side answers CONNECT (credentials: user/password from the URL, or a ``.creds``
JWT with the nonce signed by its seed); the accepting side authenticates, replies with an INFO
carrying ``connect_info`` and its interest; the soliciting side then sends its interest. A
soliciting link that fails or drops is retried after ``reconnect`` (doubled per failed attempt
up to 8x, with jitter), for ever; the local server keeps serving its clients meanwhile.

Compression (:mod:`natsd.server.leaf.compress`): negotiated in the INFO exchange as nats-server
does; once on, :meth:`LeafConnection.flush` writes and :meth:`LeafConnection.data_received` reads
the S2 stream (over WebSocket it sits under the frames instead, :mod:`natsd.server.transport.wsclient`).
``ws://``/``wss://`` remotes run the link inside WebSocket frames (:mod:`natsd.server.transport.wsclient`).

TLS: a remote's ``tls {}`` becomes a client ``SSLContext`` (:func:`remote_ssl_context`) and the
link is upgraded with ``loop.start_tls`` after the hub's INFO. The accepting port's ``tls {}`` puts
the client port's :class:`~natsd.server.transport.tls.TlsLayer` under each link (INFO in plaintext, then
the handshake; a plaintext peer is closed without a reply; ``tls_failed`` logs it as the reference
does). Identities on the accepting side (:meth:`LeafManager.authenticate
<natsd.server.leaf.manager.LeafManager.authenticate>`): the leafnode block's own user, nkey or users
(by certificate with ``verify_and_map``), else the server's users, nkeys and operator JWTs; the
link binds to the account they name, and a JWT-authenticated link ends when its JWT expires.
"""

from __future__ import annotations

import asyncio
import base64
import os
from typing import TYPE_CHECKING, Iterable, Sequence, cast

from natsd.config.leafnodes import COMPRESSION_NOT_SUPPORTED
from natsd.protocol.encoder import PONG, encode_err, encode_info
from natsd.protocol.errors import RemoteProtocolError
from natsd.protocol.events import OP_HPUB, OP_PUB, Run
from natsd.protocol.leaf import (
    L_CONNECT,
    L_ERR,
    L_INFO,
    L_MSG,
    L_MSG_RUN,
    L_PING,
    L_PONG,
    L_SUB,
    L_UNSUB,
    LeafParser,
    encode_ls_minus,
    encode_ls_plus,
    msg_line,
    split_js_ack_deliver,
)
from natsd.server.leaf.auth import (  # read_creds, sign_nonce, remote_ssl_context: re-exported
    _CACHE_MAX,
    LeafIdentityMixin,
    _covered,
    _DenyCache,
    read_creds,
    remote_ssl_context,
    sign_nonce,
)
from natsd.server.leaf.compress import CompressionError, needs_compression
from natsd.server.leaf.handshake import (  # noqa: F401 (constants re-exported for their users)
    FIRST_PING_NS,
    JS_DENY,
    LEAF_PROTO,
    LOOP_DELAY_NS,
    SECOND,
    LeafHandshakeMixin,
)
from natsd.server import msgtrace
from natsd.server.log import logger
from natsd.server.mapping import mapped
from natsd.server.msgtrace import TRACE_DEST_B
from natsd.server.router import LEAF_LINK, route, route_batch
from natsd.server.subscription import Subscription
from natsd.server.writer import WRITE_HIGH_WATER
from natsd.subjects.sublist import SublistResult
from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Timer
    from natsd.server.account import Account
    from natsd.server.leaf.manager import LeafManager, _Remote

__all__ = ["LeafConnection", "remote_ssl_context", "JS_DENY", "read_creds", "sign_nonce"]

# (the identity helpers live in natsd.server.leaf.auth, the handshake in natsd.server.leaf.handshake)

LDS_PREFIX = "$LDS."
# A loop turn that reads a publisher's whole burst (up to 32 reads) builds megabytes of frames for
# the link; written only at the end of the turn, the other side idles while we parse and then gets
# it all at once. Past this size the frames go out at once (still one write per ~1,700 messages).
_FLUSH_EARLY = 256 * 1024


class _Peer(Protocol):
    """A connection the router names as a message's source or receiver (a client or a link):
    what the stall protocol of ``natsd.server.writer`` uses of it."""

    stalled_producers: set

    def stall(self, consumer: _Peer) -> None: ...


def _traced(payloads: list, hdr_len: int) -> bool:
    """Whether a message of a run (one header size) names a trace destination."""
    for p in payloads:
        if p.find(TRACE_DEST_B, 0, hdr_len) >= 0:
            return True
    return False


class _Result:
    """A Sublist match result with some queue groups filtered out (LMSG queue lists)."""

    __slots__ = ("psubs", "qsubs")

    def __init__(self, psubs: Sequence, qsubs: Sequence) -> None:
        self.psubs = psubs
        self.qsubs = qsubs


class LeafConnection(LeafHandshakeMixin, LeafIdentityMixin, asyncio.Protocol):
    """One leafnode link (either side). See the module docstring."""

    def __init__(self, manager: "LeafManager", remote: "_Remote | None" = None) -> None:
        self.manager = manager
        self.server = manager.server
        self.remote = remote
        self.solicited = remote is not None
        # The role (see natsd.server.leaf.handshake): a remote is the spoke unless `hub: true`;
        # an accepted link becomes the spoke when the other side's CONNECT says is_hub.
        self.spoke = remote is not None and not remote.opts.hub
        self.websocket = False  # set by the WebSocket layer below (natsd.server.transport.wsclient)
        self.cid = self.server.next_cid()
        self.transport: asyncio.Transport | None = None
        self.parser = LeafParser(self.server.options.max_payload)
        self.out = bytearray()
        self.flush_pending = False
        loop = self.server.loop
        assert loop is not None  # links are made by a started server
        self._call_soon = loop.call_soon
        self.closed = False
        self.ready = False  # handshake complete: messages flow
        self.bound = False  # account bound, interest announced
        self.close_reason = ""
        self.account: Account | None = None
        self.echo = False
        self.headers = True
        self.sub_deny = LEAF_LINK  # the router's marker for links (see natsd.server.router)
        self.replies = None
        self.max_pending = self.server.options.max_pending
        self.congested = False
        self.stalled = False
        self.stalled_producers: set = set()
        self.ip = ""
        self.port = 0
        self.prefix = f"lid:{self.cid} - "
        self.nonce = ""
        self.remote_info: dict = {}
        self.remote_name = ""
        self.remote_id = ""
        self.remote_domain = ""
        self.remote_account = ""
        self.remote_proto = 0  # (natsd.server.leaf.handshake: what the other side announced)
        self.rsubs: dict[tuple[str, str | None], tuple[Subscription, int]] = {}
        self.smap: dict[tuple[str, str | None], int] = {}
        self.in_msgs = self.in_bytes = self.out_msgs = self.out_bytes = 0
        self.start_ns = self.server.clock.time_ns()
        self.rtt_ns = 0
        self._ping_sent_ns = 0
        self.pings_out = 0
        self._timer: Timer | None = None
        self._auth_timer: Timer | None = None
        self._expire_timer: Timer | None = None
        self._awaiting_connect_info = False
        self._tls = None  # the TLS upgrade task of a remote with tls {}
        # Compression (natsd.server.leaf.handshake): the mode in force, the stream's coders, and
        # whether a negotiation may still switch the stream (then input is parsed line by line).
        self.compression = ""
        configured = (remote.opts if remote is not None else manager.options).compression
        self.negotiating = needs_compression(configured)
        self.s2 = False  # the link is S2-compressed (here, or under the WebSocket frames)
        self._deflate = None
        self._inflate = None
        self._await_compressed_info = False
        # Frame merging (see deliver): the last frame written and where its line sits in out.
        self._last_head: bytes | None = None
        self._last_subj = b""
        self._last_reply = b""
        self._last_queues: list = []
        self._last_hs = 0
        self._last_he = 0
        self._last_end = -1
        # Filters (see _setup_filters).
        self.deny_in: tuple = JS_DENY
        self.deny_out: tuple = JS_DENY
        self.deny_interest_out: tuple = JS_DENY
        self._denied_in = _DenyCache(JS_DENY)
        self._denied_out = _DenyCache(JS_DENY)
        # Permissions of the leaf's user (see natsd.server.leaf.auth.LinkPerms), None: none.
        self.perms = None
        self._subjects: dict[bytes, str] = {}  # decoded subjects of inbound messages

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = t = cast(asyncio.Transport, transport)  # a stream connection's
        self._write_limits(t)
        peer = transport.get_extra_info("peername")
        if peer:
            self.ip, self.port = peer[0], peer[1]
        self.prefix = f"{self.ip}:{self.port} - lid:{self.cid} - "
        self.manager.connections[self.cid] = self
        if not self.solicited:
            ln = self.manager.options
            self.nonce = base64.urlsafe_b64encode(os.urandom(11)).decode().rstrip("=")
            # (no mode announced over a permessage-deflate WebSocket: no S2 on top, as the reference)
            no_s2 = ln.compression == COMPRESSION_NOT_SUPPORTED or getattr(transport, "ws_compressed", False)
            extra = {} if no_s2 else {"compression": ln.compression}
            self.send(encode_info(self.manager.info(self, nonce=self.nonce, **extra)))
            self._auth_timer = self.server.clock.call_later(ln.auth_timeout_ns, self._auth_timeout)
        logger.info(
            "%sLeafnode connection created%s",
            self.prefix,
            f" for account: {self.remote.account_name}" if self.remote else "",
        )

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.close("Client Closed" if exc is None else "Read Error", graceful=False)

    def _write_limits(self, transport: asyncio.Transport) -> None:
        """The client connections' high-water mark (``natsd.server.writer``), not asyncio's 64 KiB:
        a loop turn's flush of a burst is megabytes, and with 64 KiB every flush paused the
        publishers until the link had drained to 16 KiB, leaving it idle between bursts."""
        high = max(64 * 1024, min(self.max_pending // 2, WRITE_HIGH_WATER))
        try:
            transport.set_write_buffer_limits(high=high, low=high // 4)
        except (AttributeError, NotImplementedError):  # pragma: no cover - exotic transports
            pass

    def pause_writing(self) -> None:
        self.congested = True

    def resume_writing(self) -> None:
        self.congested = False
        producers = self.stalled_producers
        if producers:
            self.stalled_producers = set()
            for p in producers:
                p.unstall()

    # Backpressure like ClientConnection: a link that feeds a congested client stops reading.
    def stall(self, consumer: _Peer) -> None:
        if self.stalled or self.closed or consumer is self:
            return
        self.stalled = True
        consumer.stalled_producers.add(self)
        try:
            transport = self.transport
            assert transport is not None  # set by connection_made()
            transport.pause_reading()
        except Exception:  # pragma: no cover - transport closing
            pass
        self._call_later_unstall()

    def _call_later_unstall(self) -> None:
        self.server.clock.call_later(50_000_000, self.unstall)

    def unstall(self) -> None:
        if not self.stalled:
            return
        self.stalled = False
        if not self.closed:
            try:
                transport = self.transport
                assert transport is not None  # set by connection_made()
                transport.resume_reading()
            except Exception:  # pragma: no cover
                pass

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        if self._inflate is not None:
            try:
                data = self._inflate(data)
            except CompressionError as e:
                logger.error("%sLeafnode decompression error: %s", self.prefix, e)
                self.close("Protocol Violation")
                return
            if not data:
                return
        elif self.negotiating:
            # The INFO that switches to S2 may be followed by compressed bytes: one line at a time.
            while self.negotiating and not self.closed:
                nl = data.find(b"\n")
                if nl < 0 or nl == len(data) - 1:
                    break
                self._parse(data[: nl + 1])
                data = data[nl + 1 :]
            if self.closed:
                return
            if self._inflate is not None:
                self.data_received(data)
                return
        self._parse(data)

    def _parse(self, data: bytes) -> None:
        try:
            events = self.parser.feed(data)
            err = None
        except RemoteProtocolError as e:
            events, err = e.events, e
        i = 0
        n = len(events)
        while i < n:
            if self.closed:
                return
            ev = events[i]
            i += 1
            op = ev[0]
            if op == L_MSG:
                # A run of messages with one subject, reply and size (a publisher's burst) is
                # routed as one batch: one match, one join per receiver.
                j = i
                if not ev[3]:
                    while j < n:
                        e2 = events[j]
                        if (
                            e2[0] != L_MSG
                            or e2[1] != ev[1]
                            or e2[2] != ev[2]
                            or e2[3]
                            or e2[4] != ev[4]
                            or len(e2[5]) != len(ev[5])
                        ):
                            break
                        j += 1
                if j > i and self._on_msg_run(events, i - 1, j):
                    i = j
                    continue
                self._on_msg(ev)
            elif op == L_MSG_RUN:
                if ev[3] or not self._route_run(ev[1], ev[2], ev[4], ev[5]):
                    head = (L_MSG,) + ev[1:5]
                    for data in ev[5]:
                        if self.closed:
                            return
                        self._on_msg(head + (data,))
            elif op == L_SUB:
                self._on_ls_plus(ev[1], ev[2], ev[3])
            elif op == L_UNSUB:
                self._on_ls_minus(ev[1], ev[2])
            elif op == L_PING:
                self.send(PONG)
            elif op == L_PONG:
                self.pings_out = 0
                if self._ping_sent_ns:
                    self.rtt_ns = self.server.clock.time_ns() - self._ping_sent_ns
                    self._ping_sent_ns = 0
                    if self.s2:
                        self._auto_level()
            elif op == L_INFO:
                self._on_info(ev[1])
            elif op == L_CONNECT:
                self._on_connect(ev[1])
            elif op == L_ERR:
                self._on_err(ev[1])
        if err is not None and not self.closed:
            logger.error("%sLeafnode protocol error: %s", self.prefix, err.detail or err.err)
            if err.err:
                self.send(encode_err(err.err))
            self.close("Protocol Violation")

    # -- interest ------------------------------------------------------------------------------------

    def _on_ls_plus(self, subj_b: bytes, queue_b: bytes | None, weight: int) -> None:
        if not self.ready or self.account is None:
            return
        subject = subj_b.decode("utf-8", "replace")
        queue = queue_b.decode("utf-8", "replace") if queue_b else None
        if subject.startswith(LDS_PREFIX) and subject == self.manager.lds(self.account):
            text = f'Loop detected for leafnode account="{self.account.name}". Delaying attempt to reconnect for 30s'
            logger.error("%s%s", self.prefix, text)
            self.send(encode_err(text))
            if self.remote is not None:
                self.remote.delay_next(LOOP_DELAY_NS)
            self.close("Protocol Violation")
            return
        if self.perms is not None and not self.solicited and self.perms.refuses_sub(subject):
            self._perm_violation("Subscription", subject)
            return
        # Interest in what we must not send is ignored (the messages would be dropped anyway).
        if _covered(self.deny_out, subject):
            return
        key = (subject, queue)
        weight = max(weight, 1) if queue else 1
        old = self.rsubs.get(key)
        if old is not None:
            if queue and weight != old[1]:
                # The other side's group grew or shrank: the router's choice among links and the
                # weight announced to the other links follow (nats-server's queue weights).
                self.rsubs[key] = (old[0], weight)
                self.manager.weight_changed(self, subject, queue, weight - old[1])
            return
        sub = Subscription(self, b"", subject, queue, account=self.account)
        sub.created_ns = self.server.clock.time_ns()
        self.rsubs[key] = (sub, weight)  # before the insert: the interest watcher reads the weight
        try:
            self.account.sublist.insert(subject, sub, queue)
        except ValueError:
            del self.rsubs[key]
            logger.debug("%sinvalid LS+ subject %r", self.prefix, subject)
            return
        acc = self.account
        if acc.interest_handlers:
            acc.notify_interest(subject, True)

    def _on_ls_minus(self, subj_b: bytes, queue_b: bytes | None) -> None:
        if self.account is None:
            return
        key = (subj_b.decode("utf-8", "replace"), queue_b.decode("utf-8", "replace") if queue_b else None)
        ent = self.rsubs.pop(key, None)
        if ent is not None:
            self.remove_sub(ent[0])

    def remove_sub(self, sub: Subscription) -> None:
        """Drop one subscription of the other side (``Subscription.unsubscribe`` lands here)."""
        if sub.closed:
            return
        sub.closed = True
        acc = sub.account
        acc.sublist.remove(sub.subject, sub, sub.queue)  # (the watcher still finds the weight)
        ent = self.rsubs.get((sub.subject, sub.queue))
        if ent is not None and ent[0] is sub:
            del self.rsubs[(sub.subject, sub.queue)]
        if acc.interest_handlers:
            acc.notify_interest(sub.subject, False)

    @property
    def trace_support(self) -> bool:
        """Whether the other side traces messages further on (nats-server's msgTraceSupport)."""
        return self.remote_proto >= LEAF_PROTO

    def queue_weight(self, sub: Subscription) -> int:
        """How many queue members of the other side ``sub`` stands for (its ``LS+`` weight)."""
        ent = self.rsubs.get((sub.subject, sub.queue))
        return ent[1] if ent is not None else 1

    def exports_interest_of(self, owner: object) -> bool:
        """Whether a subscription owned by ``owner`` is announced over this link."""
        if owner is self:
            return False
        if self.spoke and isinstance(owner, LeafConnection) and owner.spoke:
            return False  # a hub's interest is not passed on to another hub
        return True

    def interest_changed(self, subject: str, queue: str | None, delta: int) -> None:
        """A local (from this link's point of view) subscription came or went."""
        if _covered(self.deny_interest_out, subject) or (self.perms is not None and not self.perms.announces(subject)):
            return
        key = (subject, queue)
        smap = self.smap
        before = smap.get(key, 0)
        n = before + delta
        if n <= 0:
            if before > 0:
                del smap[key]
                self.send(encode_ls_minus(subject, queue))
            return
        smap[key] = n
        if queue:
            self.send(encode_ls_plus(subject, queue, n))
        elif before == 0:
            self.send(encode_ls_plus(subject))

    def send_all_interest(self, entries: Iterable[tuple[str, str | None, Subscription]], lds: str) -> None:
        """The initial ``LS+`` set: every visible subscription of the account and our $LDS."""
        smap = self.smap
        deny = self.deny_interest_out
        for subject, queue, item in entries:
            if not self.exports_interest_of(item.client):
                continue
            if _covered(deny, subject) or (self.perms is not None and not self.perms.announces(subject)):
                continue
            key = (subject, queue)
            owner = getattr(item, "client", None)
            n = owner.queue_weight(item) if queue and isinstance(owner, LeafConnection) else 1
            smap[key] = smap.get(key, 0) + n
        buf = bytearray()
        for (subject, queue), n in smap.items():
            buf += encode_ls_plus(subject, queue, n)
        buf += encode_ls_plus(lds)
        self.send(bytes(buf))

    # -- messages ----------------------------------------------------------------------------------

    def _on_msg_run(self, events: list, start: int, end: int) -> bool:
        """Route ``events[start:end]`` (same subject, reply, sizes; no queue list) as one batch;
        False when they need the message-by-message path."""
        _, subj_b, reply, _q, hdr_len, _data = events[start]
        return self._route_run(subj_b, reply, hdr_len, [e[5] for e in events[start:end]])

    def _route_run(self, subj_b: bytes, reply: bytes, hdr_len: int, payloads: list) -> bool:
        """Route messages with one subject, reply and size (no queue list) as one batch; False
        when they need the message-by-message path."""
        if not self.ready or (reply and reply.startswith(b"$JS.ACK.")):
            return False
        try:
            subject = subj_b.decode()
        except UnicodeDecodeError:
            return False
        if self._denied_in[subject]:
            return False  # (the per-message path drops it, or reports a permission violation)
        if hdr_len and _traced(payloads, hdr_len):
            return False  # (traced message by message: natsd.server.msgtrace)
        acc = self.account
        assert acc is not None  # bound by the handshake, before any message
        if acc.mapper is not None and acc.mapper.matches(subject):
            return False  # mapped: message by message (a weighted split draws per message)
        r = acc.sublist.match(subject)
        if r.qsubs:
            return False
        k = len(payloads)
        self.in_msgs += k
        self.in_bytes += k * len(payloads[0])
        if r.psubs:
            run = Run(OP_HPUB if hdr_len else OP_PUB, subj_b, None, reply, hdr_len, payloads)
            route_batch(acc, run, subject, self)
        return True

    def _on_msg(self, ev: tuple) -> None:
        _, subj_b, reply, queues, hdr_len, data = ev
        if not self.ready:
            return
        self.in_msgs += 1
        self.in_bytes += len(data)
        subject = self._subjects.get(subj_b)
        if subject is None:
            try:
                subject = subj_b.decode()
            except UnicodeDecodeError:
                return
            if len(self._subjects) >= _CACHE_MAX:
                self._subjects.clear()
            self._subjects[subj_b] = subject
        if self._denied_in[subject]:
            p = self.perms
            if p is None or self.solicited or not p.refuses_pub(subject):
                return
            if (
                p.replies is None
                or _covered(self.deny_in, subject)
                or not p.response_allowed(subject, self.server.clock.monotonic_ns())
            ):
                self._perm_violation("Publish", subject)
                return
        shown = None
        if reply and reply.startswith(b"$JS.ACK."):
            reply, dsubj = split_js_ack_deliver(reply)
            if dsubj:
                shown = dsubj
        acc = self.account
        assert acc is not None  # bound by the handshake, before any message
        mt = None
        if hdr_len and (data.find(TRACE_DEST_B, 0, hdr_len) >= 0 or acc.trace_dest):
            skip, mt = msgtrace.start_leaf(self, subject, hdr_len, data)
            if skip:
                return
        if acc.mapper is not None:
            # As nats-server: a leaf's messages are mapped too (natsd.server.mapping).
            new = mapped(acc, subject)
            if new is not None:
                subject, subj_b = new, new.encode()
                if mt is not None:
                    mt.mapped(new)
        r: SublistResult | _Result = acc.sublist.match(subject)
        qsubs = r.qsubs
        if qsubs:
            # Queue groups get it only when the frame names them.
            if queues:
                names = {q.decode("utf-8", "replace") for q in queues}
                qsubs = tuple(g for g in qsubs if g and g[0].queue in names)
            else:
                qsubs = ()
            r = _Result(r.psubs, qsubs)
        elif not r.psubs and mt is None:
            return
        if mt is not None:
            msgtrace.route_traced(mt, acc, subject, subj_b, reply, hdr_len, data, self, r)
        elif shown is not None:
            route(acc, subject, shown, reply, hdr_len, data, self, shown.decode("utf-8", "replace"), r)
        else:
            route(acc, subject, subj_b, reply, hdr_len, data, self, None, r)

    def deliver_run(
        self,
        sub: Subscription,
        subject: str,
        subj_b: bytes,
        reply: bytes,
        hdr_len: int,
        payloads: list,
        src: _Peer | None,
    ) -> bool:
        """A run of messages with one subject, reply and size, this link their only receiver
        (``router.route_batch``): one line, joined frames. False: take the per-message path."""
        if (
            self.closed
            or not self.ready
            or sub.closed
            or src is self
            or sub.queue is not None
            or (hdr_len and not self.headers)
            or subj_b != subject.encode()
        ):
            return False
        if isinstance(src, LeafConnection) and src.spoke and self.spoke:
            return True  # hub to hub: never (as deliver)
        if self._denied_out[subject]:
            return True
        if reply and self.perms is not None and self.perms.replies is not None:
            self.perms.track_reply(reply.decode("utf-8", "replace"), self.server.clock.monotonic_ns())
        size = len(payloads[0])
        line = msg_line(subj_b, reply, (), hdr_len, size)
        out = self.out
        out += line
        out += (b"\r\n" + line).join(payloads)
        out += b"\r\n"
        self._last_end = -1
        k = len(payloads)
        self.out_msgs += k
        self.out_bytes += k * size
        if len(out) >= _FLUSH_EARLY:
            self.flush()  # (see _FLUSH_EARLY)
        elif not self.flush_pending:
            self.flush_pending = True
            self._call_soon(self.flush)
        if len(out) > self.max_pending:
            logger.error("%sSlow Consumer Detected: MaxPending of %d Exceeded", self.prefix, self.max_pending)
            self.close("Slow Consumer (Pending Bytes)", graceful=False)
        elif self.congested and src is not None:
            src.stall(self)
        return True

    def deliver_items(self, sub: Subscription, route_subject: str, items: list) -> bool:
        """A consumer's batch to a deliver subject whose only receiver is ``sub`` of this link
        (``router.deliver_many``; the sourcing feed of a stream on the other side): ``(subject,
        reply, hdr, payload)`` items become the frames :meth:`deliver` writes one by one, without
        a routing pass each. False: take the per-message path."""
        if (
            self.closed
            or not self.ready
            or sub.closed
            or sub.queue is not None
            or self.perms is not None
            or self._denied_out[route_subject]
        ):
            return False
        wire = route_subject.encode()
        headers = self.headers
        out = self.out
        nbytes = 0
        for subject, reply, hdr, payload in items:
            if reply and subject != wire and reply.startswith(b"$JS.ACK.") and b"@" not in reply:
                reply = reply + b"@" + subject  # (as deliver: the stored subject rides in the reply)
            size = len(payload)
            if hdr:
                hl = len(hdr)
                nbytes += hl + size
                if headers:
                    out += msg_line(wire, reply, (), hl, hl + size)
                    out += hdr
                else:
                    out += msg_line(wire, reply, (), 0, size)
            else:
                nbytes += size
                out += msg_line(wire, reply, (), 0, size)
            out += payload
            out += b"\r\n"
        self._last_end = -1
        self.out_msgs += len(items)
        self.out_bytes += nbytes
        if len(out) > self.max_pending:
            logger.error("%sSlow Consumer Detected: MaxPending of %d Exceeded", self.prefix, self.max_pending)
            self.close("Slow Consumer (Pending Bytes)", graceful=False)
        elif len(out) >= _FLUSH_EARLY:
            self.flush()
        elif not self.flush_pending:
            self.flush_pending = True
            self._call_soon(self.flush)
        return True

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
        src: _Peer | None = None,
    ) -> bool:
        """Write one message for the other side (called by the router; see the module docstring)."""
        if self.closed or not self.ready or sub.closed or src is self:
            return False
        if msgtrace.active is not None:
            data, hdr_len = msgtrace.active.leaf_copy(self.cid, data, hdr_len)  # (its hop)
        if isinstance(src, LeafConnection) and src.spoke and self.spoke:
            return False  # hub to hub: never (the hubs have their own routes)
        out = self.out
        queue = sub.queue
        if head is self._last_head and self._last_end == len(out):
            # The same message already went out on this link in this routing pass.
            if queue is None:
                return True
            qb = queue.encode()
            if qb in self._last_queues:
                return True
            self._last_queues.append(qb)
            line = msg_line(self._last_subj, self._last_reply, self._last_queues, hdr_len, len(data))
            out[self._last_hs : self._last_he] = line
            self._last_he = self._last_hs + len(line)
            self._last_end = len(out)
            return True
        if self._denied_out[subject]:
            return False
        if reply and self.perms is not None and self.perms.replies is not None:
            self.perms.track_reply(reply.decode("utf-8", "replace"), self.server.clock.monotonic_ns())
        wire_subj = subject.encode()
        if reply and wire_subj != subj_b and reply.startswith(b"$JS.ACK.") and b"@" not in reply:
            # A JetStream delivery: the stored message's subject rides after '@' in the reply.
            reply = reply + b"@" + subj_b
        queues = [queue.encode()] if queue is not None else []
        line = msg_line(
            wire_subj,
            reply,
            queues,
            hdr_len if self.headers else 0,
            len(data) if self.headers or not hdr_len else len(data) - hdr_len,
        )
        self._last_head = head
        self._last_subj = wire_subj
        self._last_reply = reply
        self._last_queues = queues
        self._last_hs = len(out)
        out += line
        self._last_he = len(out)
        if hdr_len and not self.headers:
            out += data[hdr_len:]
        else:
            out += data
        out += b"\r\n"
        self._last_end = len(out)
        self.out_msgs += 1
        self.out_bytes += len(data)
        if not self.flush_pending:
            self.flush_pending = True
            self._call_soon(self.flush)
        if len(out) > self.max_pending:
            logger.error("%sSlow Consumer Detected: MaxPending of %d Exceeded", self.prefix, self.max_pending)
            self.close("Slow Consumer (Pending Bytes)", graceful=False)
        elif self.congested and src is not None:
            src.stall(self)
        return True

    # -- output / close ------------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        if self.closed:
            return
        self.out += data
        self._last_end = -1
        if not self.flush_pending:
            self.flush_pending = True
            self._call_soon(self.flush)

    def flush(self) -> None:
        self.flush_pending = False
        out = self.out
        if self.closed or not out:
            return
        self.out = bytearray()
        self._last_end = -1
        t = self.transport
        if t is None or t.is_closing():
            return
        t.write(out if self._deflate is None else self._deflate(out))

    def close(self, reason: str = "Server Shutdown", graceful: bool = True) -> None:
        if self.closed:
            return
        self.close_reason = reason
        t = self.transport
        if t is not None:
            if graceful and self.out and not t.is_closing():
                t.write(self.out if self._deflate is None else self._deflate(self.out))
            if graceful:
                t.close()
            else:
                t.abort()
        self.closed = True
        self.out = bytearray()
        for attr in ("_timer", "_auth_timer", "_expire_timer"):
            tm = getattr(self, attr)
            if tm is not None:
                tm.cancel()
                setattr(self, attr, None)
        producers = self.stalled_producers
        self.stalled_producers = set()
        for p in producers:
            p.unstall()
        was_ready = self.ready
        self.ready = False
        self.manager.link_down(self, self.bound)
        self.bound = False
        for sub, _w in list(self.rsubs.values()):
            self.remove_sub(sub)
        self.rsubs.clear()
        if was_ready:
            logger.info("%sLeafnode connection closed: %s - Remote: %s", self.prefix, reason, self.remote_name)
        else:  # (refused links too, as the reference logs them)
            logger.info("%sLeafnode connection closed: %s", self.prefix, reason)
        if self.remote is not None:
            self.remote.link_down(self)
