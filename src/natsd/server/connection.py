"""One client connection: an ``asyncio.Protocol`` around the sans-IO parser.

Theory of operation
-------------------
``data_received`` feeds the bytes to :class:`~natsd.protocol.parser.Parser` and processes the
resulting events in order, synchronously. Everything a connection sends (MSG, +OK, PONG, -ERR)
goes through its writer (:class:`~natsd.server.writer.Writer`, a base of this class): appended to
the output ``bytearray``, counted, and written by one ``flush`` per loop turn, so a burst of
deliveries costs one ``transport.write``.
Because processing is synchronous and in order, a ``PONG`` is queued after every MSG/-ERR caused
by the operations before its ``PING``: this is the flush guarantee clients rely on.

Limits, as nats-server. Limits on output are the writer's (see :mod:`natsd.server.writer`):

* pending output (our buffer + the transport's) above ``max_pending`` -> slow consumer: the
  connection is closed at once *without* an ``-ERR`` (the reference does not send one either:
  the client is not reading), counted in ``/varz`` ``slow_consumers``;
* our transport buffer above its high-water mark (``WRITE_HIGH_WATER``, at most half of
  max_pending) -> the connection is *congested*: connections publishing to it are stalled
  (their reading paused) until it drains, like the reference's stalled producers; congested
  for longer than ``write_deadline`` -> slow consumer;
* ``ping_interval``/``ping_max``: a PING every interval, ``-ERR 'Stale Connection'`` when more
  than ``ping_max`` are unanswered;
* ``auth timeout``: no successful CONNECT within ``auth_timeout`` -> ``-ERR 'Authentication
  Timeout'``;
* ``max_subscriptions`` -> ``-ERR 'maximum subscriptions exceeded'`` (connection stays open).

Before CONNECT the reference treats a client as ``verbose`` and ``pedantic`` and CONNECT's JSON
is merged over those defaults; we do the same.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any, Callable

from natsd import nats_headers as NH
from natsd.protocol.encoder import OK, PING, PONG, encode_err, encode_hmsg, encode_msg
from natsd.protocol.errors import (
    ERR_AUTH_TIMEOUT,
    ERR_AUTH_VIOLATION,
    ERR_INVALID_CLIENT_PROTOCOL,
    ERR_INVALID_PUBLISH_SUBJECT,
    ERR_INVALID_SUBJECT,
    ERR_MAX_SUBSCRIPTIONS,
    ERR_NO_RESPONDERS_REQUIRES_HEADERS,
    ERR_STALE_CONNECTION,
    RemoteProtocolError,
    permissions_publish,
    permissions_subscribe,
)
from natsd.protocol.events import (
    OP_CONNECT,
    OP_HPUB,
    OP_NAMES,
    OP_PING,
    OP_PONG,
    OP_PUB,
    OP_PUB_BATCH,
    OP_PUB_RRUN,
    OP_PUB_RUN,
    OP_SUB,
    OP_UNSUB,
    Run,
)
from natsd.protocol.parser import Parser
from natsd.server.auth.authenticator import AuthResult, check_password
from natsd.server.auth.events import send_auth_error_event
from natsd.server.auth.identity import IdentityMixin
from natsd.server.context import ServerContext
from natsd.server.log import TRACE, logger, trace_payload
from natsd.server import msgtrace
from natsd.server.mapping import mapped
from natsd.server.msgtrace import TRACE_DEST_B
from natsd.server.router import route, route_batch, route_rrun, route_run
from natsd.server.subscription import Subscription
from natsd.server.writer import (  # noqa: F401  (re-exported: the close reasons live with the others)
    REASON_SLOW_CONSUMER,
    REASON_SLOW_CONSUMER_WD,
    STALL_MAX_NS,
    WRITE_HIGH_WATER,
    Writer,
)
from natsd.subjects.tokens import is_valid_publish_subject, is_valid_subject
from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Timer
    from natsd.server.account import Account
    from natsd.server.auth.authenticator import CompiledPermissions

__all__ = ["ClientConnection", "ConnectionHost"]

_HDR_PREFIX = b"NATS/1.0"
# CONNECT fields whose JSON type the reference enforces (a wrong type closes the connection).
_BOOL_FIELDS = ("verbose", "pedantic", "echo", "headers", "no_responders", "tls_required")
_STR_FIELDS = ("name", "lang", "version", "user", "pass", "auth_token")

# Operations run per connection per loop turn before yielding (see ClientConnection._run).
EVENTS_PER_TURN = 512

# Close reasons, spelled as nats-server's /connz "reason".
REASON_CLIENT_CLOSED = "Client Closed"
REASON_SERVER_SHUTDOWN = "Server Shutdown"
REASON_AUTH = "Authentication Failure"
REASON_AUTH_TIMEOUT = "Authentication Timeout"
REASON_STALE = "Stale Connection"
REASON_PROTOCOL = "Protocol Violation"
REASON_MAX_PAYLOAD = "Maximum Payload Exceeded"
REASON_MAX_CONN = "Maximum Connections Exceeded"
REASON_LAME_DUCK = "Lame Duck Mode"
REASON_TLS_HANDSHAKE = "TLS Handshake Failure"


def _decode(b: bytes) -> str:
    try:
        return b.decode()
    except UnicodeDecodeError:
        return b.decode("utf-8", "surrogateescape")


class ConnectionHost(ServerContext, Protocol):
    """What a client connection needs of the server beyond :class:`ServerContext`: to be
    registered (or refused), unregistered, and its INFO."""

    def accept_client(self, c: ClientConnection) -> bool: ...

    def client_closed(self, c: ClientConnection) -> None: ...

    def info_for(self, c: ClientConnection, **extra: object) -> bytes: ...


def _traced(payloads: list[bytes]) -> bool:
    """Whether a message of a run may ask for a trace (``Nats-Trace-Dest`` in its bytes): one search
    over the joined run, cheaper than a call per message (a body that happens to hold the name only
    sends the run message by message, where the header block alone is checked)."""
    return TRACE_DEST_B in b"".join(payloads)


class ClientConnection(IdentityMixin, Writer, asyncio.Protocol):
    """The server side of one client TCP connection."""

    # Slots: less memory per idle connection and faster attribute access on the hot path.
    __slots__ = (
        "server",
        "cid",
        "transport",
        "parser",
        "max_pending",
        "out",
        "flush_pending",
        "closed",
        "close_reason",
        "subs",
        "account",
        "connected",
        "auth_required",
        "verbose",
        "pedantic",
        "echo",
        "headers",
        "no_responders",
        "name",
        "lang",
        "version",
        "user",
        "perms",
        "pub_filter",
        "sub_filter",
        "sub_deny",
        "replies",
        "connect_opts",
        "_subjects",
        "in_msgs",
        "in_bytes",
        "out_msgs",
        "out_bytes",
        "pings_out",
        "start_ns",
        "rtt_ns",
        "last_activity_ns",
        "ip",
        "port",
        "prefix",
        "_ping_timer",
        "_auth_timer",
        "_wd_timer",
        "_stall_timer",
        "stalled",
        "congested",
        "stalled_producers",
        "_stash",
        "_backlog",
        "_call_soon",
        "_flush_soon",
        "_busy_arm",
        "trace",  # (IdentityMixin has the identity slots)
    )

    server: ConnectionHost

    def __init__(self, server: ConnectionHost) -> None:
        self.server = server
        opts = server.options
        self.cid = server.next_cid()
        self.transport: asyncio.Transport | None = None
        self.parser = Parser(opts.max_control_line, opts.max_payload, batch=True)
        self.max_pending = opts.max_pending
        self.out = bytearray()
        self.flush_pending = False
        self.closed = False
        self.close_reason = ""
        self.subs: dict[bytes, Subscription] = {}
        self.account: Account | None = None
        self.connected = False  # a CONNECT was accepted
        self.auth_required = server.auth.auth_required
        # Client options: the reference's defaults before CONNECT.
        self.verbose = True
        self.pedantic = True
        self.echo = True
        self.headers = False
        self.no_responders = False
        self.name = ""
        self.lang = ""
        self.version = ""
        self.user = ""
        self.perms: CompiledPermissions | None = None
        self.pub_filter = None
        self.sub_filter = None
        self.sub_deny = None  # SubjectFilter applied on delivery when it has deny entries
        self.replies: dict[str, list[int]] | None = None  # allow_responses: reply -> [left, sent ns]
        self.connect_opts: dict = {}
        self._subjects: dict[bytes, str] = {}  # decoded subjects of recent publishes
        # Counters for /connz and /varz.
        self.in_msgs = 0
        self.in_bytes = 0
        self.out_msgs = 0
        self.out_bytes = 0
        self.pings_out = 0
        self.start_ns = server.clock.time_ns()
        self.rtt_ns = 0  # nats-server's first estimate, at CONNECT (Nats-Request-Info's rtt)
        self.last_activity_ns = self.start_ns
        self.ip = ""
        self.port = 0
        self.prefix = f"cid:{self.cid} - "
        self._ping_timer: Timer | None = None
        self._auth_timer: Timer | None = None
        self._wd_timer: Timer | None = None
        self._stall_timer: Timer | None = None
        self.stalled = False  # our reading is paused because a receiver is congested
        self.congested = False  # our transport is above its high-water mark
        self.stalled_producers: set = set()
        self._stash: list | None = None  # events/data held while a bcrypt check runs
        self._backlog: tuple | None = None  # (events, next index, error) not yet run
        loop = server.loop
        assert loop is not None  # connections are made by a started server
        self._call_soon = loop.call_soon
        self._flush_soon = server.flush_batch.add
        self._busy_arm = server.busy_poll.arm
        self.trace = logger.isEnabledFor(TRACE)
        self._init_identity()

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        # High-water mark for congestion (pause_writing): large enough to absorb bursts,
        # small compared with max_pending so producers are slowed long before a cut-off.
        high = max(64 * 1024, min(self.max_pending // 2, WRITE_HIGH_WATER))
        try:
            transport.set_write_buffer_limits(high=high, low=high // 4)
        except (AttributeError, NotImplementedError):  # pragma: no cover - exotic transports
            pass
        peer = transport.get_extra_info("peername")
        if peer:
            self.ip, self.port = peer[0], peer[1]
        self.prefix = f"{self.ip}:{self.port} - cid:{self.cid} - "
        server = self.server
        self.send_raw(server.info_for(self))
        if not server.accept_client(self):
            return
        opts = server.options
        clock = server.clock
        if self.auth_required:
            self._auth_timer = clock.call_later(opts.auth_timeout_ns, self._auth_timeout)
        else:
            self.account = server.global_account
            server.global_account.clients.add(self)
        if opts.ping_interval_ns > 0:
            self._ping_timer = clock.call_later(opts.ping_interval_ns, self._ping_tick)
        logger.debug("%sClient connection created", self.prefix)

    def connection_lost(self, exc) -> None:
        if not self.closed:
            self._close(REASON_CLIENT_CLOSED, None, graceful=False)

    def data_received(self, data) -> None:
        if self.closed:
            return
        if self._stash is not None:
            self._stash.append(data)
            return
        self.last_activity_ns = self.server.clock.time_ns()
        err = None
        try:
            events = self.parser.feed(data)
        except RemoteProtocolError as e:
            events, err = e.events, e
        backlog = self._backlog
        if backlog is not None:
            # Still working through an earlier read (reading was paused, but a read already
            # in flight can land): queue behind it.
            backlog[0].extend(events)
            if err is not None:
                self._backlog = (backlog[0], backlog[1], err)
            return
        if events or err is not None:
            self._run(events, 0, err)
            if events:
                ev = events[-1]
                if (ev[0] <= OP_HPUB and ev[0] >= OP_PUB and ev[2]) or (
                    ev[0] == OP_PUB_RUN and ev[1].replies is not None
                ):
                    # The read ended with a request (PUB/HPUB with a reply; or a run of PUBs
                    # to differing subjects with a reply each, treated as its last message was
                    # before such runs existed): its answer (a JetStream PubAck, an API reply)
                    # is usually produced by a callback this
                    # read scheduled (e.g. the stream's per-turn flush). Scheduling our write
                    # now puts it after that callback in the same loop pass, so the reply
                    # leaves one loop iteration (one epoll) earlier; if nothing was queued,
                    # flush() returns at once.
                    if not self.flush_pending:
                        self.flush_pending = True
                        self._call_soon(self.flush)
                    # A synchronous client's next request follows its answer closely: keep
                    # the loop polling for it (natsd.server.transport.busypoll).
                    self._busy_arm()

    # Fairness: one read can hold thousands of operations. At most EVENTS_PER_TURN are run per
    # loop turn; the rest wait in _backlog (with reading paused) so other connections, timers
    # and this turn's replies (e.g. JetStream acks) go out in between.

    def _run(self, events: list, start: int, err: RemoteProtocolError | None) -> None:
        n = len(events)
        end = min(n, start + EVENTS_PER_TURN)
        self.process(events, start, end)
        if self.closed:
            return
        if self._stash is not None:  # a bcrypt check started; it resumes everything after it
            if err is not None:
                self._stash.append(err)
            return
        if end < n:
            if self._backlog is None:
                try:
                    transport = self.transport
                    assert transport is not None  # set by connection_made()
                    transport.pause_reading()
                except Exception:  # pragma: no cover - transport closing
                    pass
            self._backlog = (events, end, err)
            self._call_soon(self._continue)
            return
        if self._backlog is not None:
            self._backlog = None
            if not self.stalled:
                try:
                    transport = self.transport
                    assert transport is not None  # set by connection_made()
                    transport.resume_reading()
                except Exception:  # pragma: no cover - transport closing
                    pass
        if err is not None:
            self.protocol_error(err)

    def _continue(self) -> None:
        backlog = self._backlog
        if backlog is None or self.closed:
            return
        events, start, err = backlog
        self._run(events, start, err)

    def eof_received(self):
        # The client half-closed: write what its last operations produced, then close.
        self.flush()
        return False

    # -- event processing ----------------------------------------------------------------------

    def process(self, events: list, start: int = 0, end: int | None = None) -> None:
        """Run ``events[start:end]`` in order; stops early when the connection closes or an
        async credential check starts (then everything after it is stashed)."""
        # Connection options read by the PUB hot path, loaded once: only CONNECT (handled
        # below, which reloads them) changes them while events run; a config reload runs
        # between reads, never inside this loop.
        trace = self.trace
        checked, verbose, acc, subjects = self._pub_options()
        for i in range(start, len(events) if end is None else end):
            if self.closed:
                return
            ev = events[i]
            op = ev[0]
            if trace:
                self._trace_in(ev)
            if not self.connected and op != OP_CONNECT and self.auth_required:
                self.auth_violation()
                return
            if op == OP_PUB:
                if checked:
                    self.on_pub(op, ev[1], ev[2], 0, ev[4])
                    continue
                # Hot path (plain PUB, no per-message checks), inlined from on_pub.
                subj_b = ev[1]
                reply = ev[2]
                data = ev[4]
                self.in_msgs += 1
                self.in_bytes += len(data)
                subject = subjects.get(subj_b)
                if subject is None:
                    subject = self._subject(subj_b)
                if verbose:
                    self.send_raw(OK)
                if not route(acc, subject, subj_b, reply, 0, data, self) and reply and self.no_responders:
                    self.send_no_responders(subj_b, reply)
            elif op == OP_HPUB:
                data = ev[4]
                if (
                    checked
                    or not self.headers
                    or not data.startswith(_HDR_PREFIX)
                    or data.find(TRACE_DEST_B, 0, ev[3]) >= 0
                ):
                    # (per-message checks, a client without headers, a block that is not
                    # NATS/1.0 -- which includes an empty one, that on_pub lets through -- or a
                    # traced message: natsd.server.msgtrace)
                    self.on_pub(op, ev[1], ev[2], ev[3], data)
                    continue
                # Hot path (HPUB, e.g. a JetStream publish with Nats-Msg-Id), inlined from on_pub.
                subj_b = ev[1]
                reply = ev[2]
                self.in_msgs += 1
                self.in_bytes += len(data)
                subject = subjects.get(subj_b)
                if subject is None:
                    subject = self._subject(subj_b)
                if verbose:
                    self.send_raw(OK)
                if not route(acc, subject, subj_b, reply, ev[3], data, self) and reply and self.no_responders:
                    self.send_no_responders(subj_b, reply)
            elif op == OP_PUB_RUN:
                self.on_pub_run(ev[1])
            elif op == OP_PUB_BATCH:
                self.on_pub_batch(ev[1])
            elif op == OP_PUB_RRUN:
                run = ev[1]
                if (
                    checked
                    or verbose
                    or trace
                    or (run.op == OP_HPUB and not self._hpub_run_ok(run))
                    or not route_rrun(acc, subjects.get(run.subject) or self._subject(run.subject), run)
                ):
                    # Per-message checks, +OKs, tracing, or receivers other than one stream:
                    # message by message, exactly as if the parser had not gathered them.
                    self.process(run.messages())
                    checked, verbose, acc, subjects = self._pub_options()
                    continue
                self.in_msgs += len(run.payloads)
                self.in_bytes += len(run.payloads) * len(run.payloads[0])
            elif op == OP_PING:
                self.send_raw(PONG)
            elif op == OP_PONG:
                self.pings_out = 0
            elif op == OP_SUB:
                self.on_sub(ev[1], ev[2], ev[3])
            elif op == OP_UNSUB:
                self.on_unsub(ev[1], ev[2])
            elif op == OP_CONNECT:
                if not self.on_connect(ev[1]):
                    # bcrypt check in flight: keep the rest until it answers
                    if self._stash is not None and i + 1 < len(events):
                        self._stash.insert(0, events[i + 1 :])
                    return
                if self.jwt_max_payload >= 0 and self._payload_limit_rest(events, i + 1):
                    return
                checked, verbose, acc, subjects = self._pub_options()

    def _pub_options(self) -> tuple:
        """What :meth:`process` keeps in locals: (per-message PUB checks needed, verbose,
        account, decoded-subject cache)."""
        acc = self.account
        # Subject mappings (natsd.server.mapping) and traceparent sampling (natsd.server.msgtrace)
        # send every publish through on_pub.
        checked = (
            self.pedantic
            or self.pub_filter is not None
            or (acc is not None and (acc.mapper is not None or acc.trace_dest != ""))
        )
        return checked, self.verbose, acc, self._subjects

    def _subject(self, subj_b: bytes) -> str:
        """Decode a subject, remembering it (publishers reuse a few subjects; the parser hands
        back the same ``bytes`` object for a repeated control line, whose hash is cached)."""
        subject = _decode(subj_b)
        cache = self._subjects
        if len(cache) >= 256:
            cache.clear()
        cache[subj_b] = subject
        return subject

    def _trace_in(self, ev) -> None:
        op = ev[0]
        if op == OP_PUB or op == OP_HPUB:
            args = b" ".join(a for a in (ev[1], ev[2]) if a)
            if op == OP_HPUB:  # the reference shows both lengths: "HPUB foo 12 14"
                args += b" %d" % ev[3]
            logger.log(TRACE, "%s<<- [%s %s %d]", self.prefix, OP_NAMES[op], _decode(args), len(ev[4]))
            trace_payload(self.prefix, ev[4], self.server.options.max_traced_msg_len)
        elif op == OP_CONNECT:
            shown = {k: ("[REDACTED]" if k in ("pass", "auth_token") else v) for k, v in ev[1].items()}
            logger.log(TRACE, "%s<<- [CONNECT %s]", self.prefix, json.dumps(shown, separators=(",", ":")))
        elif op == OP_PUB_RRUN:
            return  # traced message by message where it is processed (see process)
        elif op == OP_PUB_RUN:
            for _, subj_b, reply, _, data in ev[1].messages():
                args = subj_b + b" " + reply if reply else subj_b
                logger.log(TRACE, "%s<<- [PUB %s %d]", self.prefix, _decode(args), len(data))
                trace_payload(self.prefix, data, self.server.options.max_traced_msg_len)
        elif op == OP_PUB_BATCH:
            run = ev[1]
            args = b" ".join(a for a in (run.subject, run.reply) if a)
            logger.log(
                TRACE,
                "%s<<- [%s %s %d] x%d",
                self.prefix,
                OP_NAMES[run.op],
                _decode(args),
                len(run.payloads[0]),
                len(run.payloads),
            )
        else:
            text = " ".join(_decode(a) if isinstance(a, bytes) else str(a) for a in ev[1:] if a is not None)
            logger.log(TRACE, "%s<<- [%s]", self.prefix, f"{OP_NAMES[op]} {text}" if text else OP_NAMES[op])

    def on_connect(self, opts: dict) -> bool:
        """Apply CONNECT; returns False when an async credential check was started."""
        for k in _BOOL_FIELDS:
            v = opts.get(k)
            if v is not None and type(v) is not bool:
                self._close(REASON_PROTOCOL, None, log=f"CONNECT: {k} is not a boolean")
                return True
        for k in _STR_FIELDS:
            v = opts.get(k)
            if v is not None and not isinstance(v, str):
                self._close(REASON_PROTOCOL, None, log=f"CONNECT: {k} is not a string")
                return True
        proto = opts.get("protocol", 0)
        if type(proto) is not int or proto < 0 or proto > 1:
            self.close_with_err(ERR_INVALID_CLIENT_PROTOCOL, REASON_PROTOCOL)
            return True
        self.verbose = opts.get("verbose", self.verbose)
        self.pedantic = opts.get("pedantic", self.pedantic)
        self.echo = opts.get("echo", self.echo)
        self.headers = opts.get("headers", self.headers)
        self.no_responders = opts.get("no_responders", self.no_responders)
        self.name = opts.get("name", self.name) or ""
        self.lang = opts.get("lang", self.lang) or ""
        self.version = opts.get("version", self.version) or ""
        self.rtt_ns = max(1, self.server.clock.time_ns() - self.start_ns)
        if self.no_responders and not self.headers:
            self.close_with_err(ERR_NO_RESPONDERS_REQUIRES_HEADERS, REASON_PROTOCOL)
            return True
        if self.auth_required and not self.connected:
            self.connect_opts = opts  # kept to re-check credentials on config reload
            res = self._authenticate(opts)
            if not res.ok:
                if res.error:  # a JWT account limit, with the reference's own text
                    logger.error("%s%s", self.prefix, res.error)
                    self.close_with_err(res.error, REASON_AUTH)
                    return True
                self.auth_violation(res.user)
                return True
            if res.bcrypt is not None:
                self._check_bcrypt(res)
                return False
            if res.callout:
                self._ask_callout(opts, res.account)
                return False
            self._auth_done(res)
        else:
            self.connected = True
        if self.verbose:
            self.send_raw(OK)
        return True

    def _check_bcrypt(self, res) -> None:
        # bcrypt costs ~100 ms: run it off the loop and hold this connection's input meanwhile.
        stored, given = res.bcrypt
        loop = self.server.loop
        assert loop is not None  # a started server's

        def verdict(ok: bool) -> AuthResult:
            if not ok:
                return AuthResult(False, res.user)
            self.server.auth.remember(res.cache_key)
            return res

        self._hold_input(loop.run_in_executor(None, check_password, stored, given), verdict)

    def _ask_callout(self, opts: dict, account: str) -> None:
        # The auth callout service answers over the network: hold this connection's input meanwhile.
        callout = self.server.auth.callout
        assert callout is not None  # only an authenticator with a callout asks for one
        if self._auth_timer is not None:  # the callout's own timeout (the same length) decides
            self._auth_timer.cancel()
            self._auth_timer = None
        self._hold_input(asyncio.ensure_future(callout.authorize(self, opts, account)), lambda res: res)

    def _hold_input(self, fut: asyncio.Future, verdict: Callable[[Any], AuthResult]) -> None:
        """Pause reading until ``fut`` decides this CONNECT, then resume what arrived behind it."""
        self._stash = []
        try:
            transport = self.transport
            assert transport is not None  # set by connection_made()
            transport.pause_reading()
        except Exception:  # pragma: no cover - transport already closing
            pass

        def done(f: asyncio.Future) -> None:
            res = verdict(f.result()) if not f.cancelled() and f.exception() is None else None
            if not f.cancelled() and f.exception() is not None:
                # the type only: a message could quote credentials
                logger.error("%sauthorization check failed: %s", self.prefix, type(f.exception()).__name__)
            stash, self._stash = self._stash or [], None
            if self.closed:
                return
            if res is None:
                self.auth_violation()
                return
            if not res.ok:
                self.auth_violation(res.user, res.account)
                return
            self._auth_done(res)
            if self.verbose:
                self.send_raw(OK)
            try:
                transport = self.transport
                assert transport is not None  # set by connection_made()
                transport.resume_reading()
            except Exception:  # pragma: no cover
                pass
            for item in stash:
                if self.closed:
                    return
                if isinstance(item, list):
                    self.process(item)
                elif isinstance(item, RemoteProtocolError):
                    self.protocol_error(item)
                else:
                    self.data_received(item)

        fut.add_done_callback(done)

    def _auth_done(self, res) -> None:
        self.connected = True
        self.user = res.user
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        acc = self.server.get_account(res.account)
        self.account = acc
        acc.clients.add(self)
        if res.jwt_iat is not None:
            self._apply_jwt_limits(res)
        p = res.permissions
        self.perms = p
        if p is not None:
            self.pub_filter = p.publish
            self.sub_filter = p.subscribe
            self.sub_deny = p.subscribe if (p.subscribe is not None and p.subscribe.deny) else None
            if p.allow_responses:
                self.replies = {}

    def on_pub(self, op: int, subj_b: bytes, reply: bytes, hdr_len: int, data: bytes) -> None:
        if op == OP_HPUB:
            if not self.headers:
                # The reference drops a client that sends HPUB without announcing headers.
                self._close(REASON_PROTOCOL, None, log="HPUB without headers support")
                return
            if hdr_len and not data.startswith(_HDR_PREFIX):
                return  # not a NATS header block: the reference silently drops it
        self.in_msgs += 1
        self.in_bytes += len(data)
        subject = self._subjects.get(subj_b) or self._subject(subj_b)
        if self.pedantic and not is_valid_publish_subject(subject):
            self.send_err(ERR_INVALID_PUBLISH_SUBJECT)
            if self.verbose:
                self.send_raw(OK)
            return
        mt = None
        acc = self.account
        if hdr_len and (data.find(TRACE_DEST_B, 0, hdr_len) >= 0 or (acc is not None and acc.trace_dest)):
            skip, mt = msgtrace.start(self, subject, hdr_len, data)
            if skip:
                return
        if acc is not None and acc.mapper is not None:
            # As nats-server's parser: mapped before permissions, routing, capture and imports.
            new = mapped(acc, subject, self.prefix if self.trace else None)
            if new is not None:
                subject, subj_b = new, new.encode()
                if mt is not None:
                    mt.mapped(new)
        if self.pub_filter is not None and not self.pub_filter.allows(subject):
            if not self._response_allowed(subject):
                self.publish_violation(subject)
                if mt is not None:
                    mt.ingress_error(f'Permissions Violation for Publish to "{subject}"')
                    mt.send()
                return
        if self.verbose:
            self.send_raw(OK)  # the reference acknowledges before delivering (even to itself)
        if mt is not None:
            n = msgtrace.route_traced(mt, mt.acc, subject, subj_b, reply, hdr_len, data, self)
        else:
            n = route(acc, subject, subj_b, reply, hdr_len, data, self)
        if not n and reply and self.no_responders:
            self.send_no_responders(subj_b, reply)

    def publish_violation(self, subject: str) -> None:
        """``-ERR 'Permissions Violation for Publish to ...'`` and the reference's log line."""
        self.send_err(permissions_publish(subject))
        logger.error(
            '%s"%s/user:%s" - Publish Violation - Subject "%s"',
            self.prefix,
            self.account.name if self.account else "$G",
            self.user,
            subject,
        )

    def on_pub_batch(self, run: Run) -> None:
        """A run of messages with identical control lines (see ``Parser(batch=True)``)."""
        op, subj_b, reply, hdr_len, payloads = run.op, run.subject, run.reply, run.hdr_len, run.payloads
        mapper = self.account.mapper if self.account is not None else None
        if (
            self.pedantic
            or self.verbose
            or self.pub_filter is not None
            or (reply and self.no_responders)
            # a mapped subject goes message by message (a weighted split draws per message);
            # an unmapped one stays a run (no mapping matching it is a fixed answer)
            or (mapper is not None and mapper.matches(self._subjects.get(subj_b) or self._subject(subj_b)))
            or op == OP_HPUB
            and (
                not self.headers
                or (hdr_len and (not all(p.startswith(_HDR_PREFIX) for p in payloads) or _traced(payloads)))
            )
        ):
            # Per-message semantics needed (acks, errors, no-responders): take the normal path.
            for p in payloads:
                if self.closed:
                    return
                self.on_pub(op, subj_b, reply, hdr_len, p)
            return
        k = len(payloads)
        self.in_msgs += k
        self.in_bytes += k * len(payloads[0])
        route_batch(self.account, run, self._subjects.get(subj_b) or self._subject(subj_b), self)

    def _hpub_run_ok(self, run: Run) -> bool:
        """Whether the HPUBs of an ``OP_PUB_RRUN`` take the hot path as a whole: this client
        announced headers and every block is a ``NATS/1.0`` one (else on_pub answers each)."""
        if not self.headers:
            return False
        for p in run.payloads:
            if not p.startswith(_HDR_PREFIX):
                return False
        return not _traced(run.payloads)  # (a traced message goes through on_pub: natsd.server.msgtrace)

    def on_pub_run(self, run: Run) -> None:
        """A run of PUBs to differing subjects, reply-less or each with a reply (see ``OP_PUB_RUN``)."""
        subjects_b, payloads, replies = run.subjects, run.payloads, run.replies
        assert subjects_b is not None  # an OP_PUB_RUN run has a subject per message
        if (
            self.pedantic
            or self.verbose
            or self.pub_filter is not None
            or (self.account is not None and self.account.mapper is not None)
        ):
            # Per-message checks, +OKs and mappings: the normal path, message by message.
            for i in range(len(subjects_b)):
                if self.closed:
                    return
                self.on_pub(OP_PUB, subjects_b[i], b"" if replies is None else replies[i], 0, payloads[i])
            return
        self.in_msgs += len(subjects_b)
        self.in_bytes += sum(map(len, payloads))
        try:
            run.names = list(map(bytes.decode, subjects_b))
        except UnicodeDecodeError:
            run.names = [_decode(s) for s in subjects_b]
        route_run(self.account, run, self)

    def _response_allowed(self, subject: str) -> bool:
        """allow_responses: may this client publish to ``subject`` (a reply it was sent)? Uses up one
        of its ``max`` responses; refused once ``expires`` has passed since the request arrived."""
        replies = self.replies
        if replies is None:
            return False
        e = replies.get(subject)
        if e is None:
            return False
        perms = self.perms
        assert perms is not None  # replies are kept only under allow_responses
        ttl = perms.responses_expires_ns
        if ttl > 0 and self.server.clock.monotonic_ns() - e[1] > ttl:
            del replies[subject]
            return False
        if e[0] <= 1:
            del replies[subject]
        else:
            e[0] -= 1
        return True

    def track_reply(self, reply: bytes) -> None:
        """allow_responses: remember a reply subject this client may now publish to, with the time
        it was sent (``expires`` counts from there)."""
        replies = self.replies
        if replies is not None:
            if len(replies) > 10_000:
                replies.clear()  # bound it; unanswered requests must not grow memory forever
            perms = self.perms
            assert perms is not None  # replies are kept only under allow_responses
            replies[_decode(reply)] = [perms.responses_max, self.server.clock.monotonic_ns()]

    def send_no_responders(self, subj_b: bytes, reply: bytes) -> None:
        """HMSG <reply> <sid> <n> <n> with ``NATS/1.0 503`` and ``Nats-Subject: <subject>``.

        Sent only to the requester, on its own subscription that matches the reply subject
        (nothing is sent if it has none), as the reference does.
        """
        reply_s = _decode(reply)
        acc = self.account
        assert acc is not None  # bound at CONNECT, before any PUB
        r = acc.sublist.match(reply_s)
        for sub in r.psubs:
            if sub.client is self:
                break
        else:
            for group in r.qsubs:
                for sub in group:
                    if sub.client is self:
                        break
                else:
                    continue
                break
            else:
                return
        hdr = b"NATS/1.0 503\r\n" + NH.SUBJECT + b": " + subj_b + b"\r\n\r\n"
        # It counts as a delivery (old-style requests auto-unsubscribe after one message).
        sub.delivered += 1
        self.enqueue(encode_hmsg(reply, sub.sid, b"", hdr, b""), 1, 0)
        if sub.max and sub.delivered >= sub.max:
            self.remove_sub(sub)

    def on_sub(self, subj_b: bytes, queue_b: bytes | None, sid: bytes) -> None:
        subject = _decode(subj_b)
        queue = _decode(queue_b) if queue_b else None
        if not is_valid_subject(subject):
            self.send_err(ERR_INVALID_SUBJECT)
            return
        if self.sub_filter is not None and not self.sub_filter.allows(subject):
            self.send_err(permissions_subscribe(subject, queue))
            if queue:
                logger.error(
                    '%s"%s/user:%s" - Subscription Violation - Subject "%s", Queue: "%s", SID %s',
                    self.prefix,
                    self.account.name,
                    self.user,
                    subject,
                    queue,
                    _decode(sid),
                )
            else:
                logger.error(
                    '%s"%s/user:%s" - Subscription Violation - Subject "%s", SID %s',
                    self.prefix,
                    self.account.name,
                    self.user,
                    subject,
                    _decode(sid),
                )
            return
        max_subs = self.server.options.max_subscriptions
        if max_subs > 0 and len(self.subs) >= max_subs or 0 <= self.jwt_max_subs <= len(self.subs):
            self.send_err(ERR_MAX_SUBSCRIPTIONS)
            logger.error("%s%s", self.prefix, ERR_MAX_SUBSCRIPTIONS)
            return
        if sid not in self.subs:  # a duplicate sid is ignored, like the reference
            acc = self.account
            assert acc is not None  # bound at CONNECT, before any SUB
            sub = Subscription(self, sid, subject, queue, account=acc)
            sub.created_ns = self.server.clock.time_ns()
            self.subs[sid] = sub
            acc.sublist.insert(subject, sub, queue)
            if acc.interest_handlers:
                acc.notify_interest(subject, True)
        if self.verbose:
            self.send_raw(OK)

    def on_unsub(self, sid: bytes, max_msgs: int | None) -> None:
        sub = self.subs.get(sid)
        if sub is not None:
            if max_msgs is not None and max_msgs > 0 and sub.delivered < max_msgs:
                sub.max = max_msgs
            else:
                self.remove_sub(sub)
        if self.verbose:
            self.send_raw(OK)

    def remove_sub(self, sub: Subscription) -> None:
        if sub.closed:
            return
        sub.closed = True
        if self.subs.get(sub.sid) is sub:
            del self.subs[sub.sid]
        acc = sub.account
        acc.sublist.remove(sub.subject, sub, sub.queue)
        if acc.interest_handlers:
            acc.notify_interest(sub.subject, False)

    # -- output --------------------------------------------------------------------------------

    # -- output (natsd.server.writer owns the buffer) -------------------------------------------

    def send_err(self, text: str) -> None:
        self.send_raw(encode_err(text))

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
        src=None,
    ) -> bool:
        """Delivery with per-receiver rules (permission filters, header stripping,
        auto-unsubscribe, allow_responses); the router calls :meth:`enqueue_msg` directly for a
        plain subscription."""
        if self.closed or sub.closed:
            return False
        if self.sub_deny is not None and self.sub_deny.denies(subject):
            return False
        if hdr_len and not self.headers:
            # A client without header support gets the payload alone, as a MSG (counted with
            # its headers, as the reference counts what was published).
            sub.delivered += 1
            self.enqueue(encode_msg(subj_b, sub.sid, reply, data[hdr_len:]), 1, len(data), src)
        else:
            self.enqueue_msg(sub, head, mid, data, len(data), src)
        if reply and self.replies is not None:
            self.track_reply(reply)
        if sub.max and sub.delivered >= sub.max:
            self.remove_sub(sub)
        return True

    # -- closing -------------------------------------------------------------------------------

    def protocol_error(self, e: RemoteProtocolError) -> None:
        if e.err is not None:
            logger.error("%s%s", self.prefix, e.err if not e.detail else f"{e.err} ({e.detail})")
            reason = REASON_MAX_PAYLOAD if "Payload" in e.err else REASON_PROTOCOL
            self.close_with_err(e.err, reason)
        else:
            self._close(REASON_PROTOCOL, None, log=e.detail)

    def auth_violation(self, user: str = "", event_acc: str = "$G") -> None:
        auth = self.server.auth
        send_auth_error_event(self.server, self, self.connect_opts or {}, event_acc, auth.callout is None)
        if user and (user in auth.users or (auth.callout is not None and self.connect_opts.get("user") == user)):
            logger.error('%sauthentication error - User "%s"', self.prefix, user)
        elif user and self.connect_opts.get("nkey") == user:
            logger.error('%sauthentication error - Nkey "%s"', self.prefix, user)
        else:
            logger.error("%sauthentication error", self.prefix)
        self.close_with_err(ERR_AUTH_VIOLATION, REASON_AUTH)

    def close_with_err(self, text: str, reason: str) -> None:
        self._close(reason, text)

    def close(self, reason: str = REASON_SERVER_SHUTDOWN) -> None:
        """Close gracefully: queued output is still written."""
        self._close(reason, None)

    def _close(self, reason: str, err: str | None, graceful: bool = True, log: str = "") -> None:
        if self.closed:
            return
        if log:
            logger.debug("%s%s", self.prefix, log)
        if err is not None:
            self.send_raw(encode_err(err))
        self.closed = True
        self.close_reason = reason
        self._release_producers()
        for attr in ("_ping_timer", "_auth_timer", "_wd_timer", "_stall_timer", "_expire_timer"):
            t = getattr(self, attr)
            if t is not None:
                t.cancel()
                setattr(self, attr, None)
        self._close_output(graceful)
        logger.debug("%sClient connection closed: %s", self.prefix, reason)
        self.server.client_closed(self)
        # Subscriptions go after the server has unregistered us, so interest listeners see a
        # consistent picture.
        for sub in list(self.subs.values()):
            self.remove_sub(sub)

    # -- timers --------------------------------------------------------------------------------

    def _auth_timeout(self) -> None:
        self._auth_timer = None
        if not self.connected and not self.closed:
            logger.error("%sAuthentication Timeout", self.prefix)
            self.close_with_err(ERR_AUTH_TIMEOUT, REASON_AUTH_TIMEOUT)

    def _ping_tick(self) -> None:
        self._ping_timer = None
        if self.closed:
            return
        opts = self.server.options
        if self.pings_out + 1 > opts.ping_max:
            logger.debug("%sStale Client Connection - Closing", self.prefix)
            self.server.stale_connections += 1
            self.close_with_err(ERR_STALE_CONNECTION, REASON_STALE)
            return
        self.pings_out += 1
        self.send_raw(PING)
        self._ping_timer = self.server.clock.call_later(opts.ping_interval_ns, self._ping_tick)

    # -- secure transports (natsd.server.transport.tls / websocket) ----------------------------------------

    def _authenticate(self, opts: dict):
        """CONNECT credentials, or with ``tls { verify_and_map: true }`` the user named by the
        client certificate (see :func:`natsd.server.transport.tls.map_certificate_user`). A WebSocket
        ``jwt_cookie`` stands in for a missing CONNECT ``jwt``."""
        t = self.transport
        cookie_jwt = t.get_extra_info("jwt_cookie") if t is not None else None
        if cookie_jwt and not opts.get("jwt"):
            opts = dict(opts, jwt=cookie_jwt)  # websocket jwt_cookie, as nats-server
        tls = self.server.options.tls
        if (
            tls is not None
            and tls.verify_and_map
            and self.transport is not None
            and self.transport.get_extra_info("ssl_object") is not None
        ):
            # deferred (issue 26, start-up time): only TLS connections with verify_and_map get here
            from natsd.server.transport.tls import map_certificate_user

            return map_certificate_user(self.server.auth, self.transport.get_extra_info("peercert"))
        return self.server.auth.authenticate(opts, self.nonce)

    def tls_failed(self, message: str) -> None:
        """The TLS layer below gave up on the handshake (bad first record, timeout, pin)."""
        if not self.closed:
            logger.debug("%s%s", self.prefix, message)
            self._close(REASON_TLS_HANDSHAKE, None, graceful=False)

    def __repr__(self) -> str:
        return f"<ClientConnection cid={self.cid} {self.ip}:{self.port} name={self.name!r}>"


logging.getLogger("natsd.server")  # child logger used by modules that log outside a connection
