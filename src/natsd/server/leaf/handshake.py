"""The handshake of a leafnode link (both sides), split from :mod:`natsd.server.leaf.node`:
INFO/CONNECT, the compression negotiation (:mod:`natsd.server.leaf.compress`), TLS after the hub's
INFO, binding to the account, the roles (hub/spoke), pings.

Roles (nats-server's ``isSpoke``): a soliciting link is the *spoke* of the link unless its remote
says ``hub: true`` (then it takes the hub role and the other side, told by CONNECT's ``is_hub``,
takes the spoke role). The role, not who dialled, decides how interest and messages flow: a
spoke passes on to its hub only the interest of local clients and of links where it is the hub,
and a message from one spoke link never goes out on another (``LeafConnection.spoke``, read by
``exports_interest_of``/``deliver`` in :mod:`natsd.server.leaf.node`); ``/leafz``'s ``is_spoke``
shows it. (nats-server also sends a system connect event for a ``hub: true`` remote; natsd does
not.)

Compression (see :mod:`natsd.server.leaf.compress` for the exchange): while a negotiation may still
switch the stream, :meth:`LeafConnection.data_received` hands the parser one line at a time, so
the bytes after the INFO that switches are decoded, not parsed. ``self.compression`` is the mode
in force ("" until decided), ``self._deflate``/``self._inflate`` the stream's writer and reader.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import TYPE_CHECKING, Any, cast

from natsd.config.leafnodes import COMPRESSION_NOT_SUPPORTED, COMPRESSION_OFF, COMPRESSION_S2_AUTO, remote_url_parts
from natsd.protocol.encoder import PING, encode_err, encode_info
from natsd.protocol.errors import ERR_AUTH_VIOLATION
from natsd.protocol.leaf import encode_connect
from natsd.server.auth.events import send_auth_error_event
from natsd.server.leaf.auth import LinkPerms
from natsd.server.leaf.compress import (
    CompressionError,
    S2Reader,
    S2Writer,
    auto_mode,
    info_mode,
    needs_compression,
    select_mode,
)
from natsd.server.log import logger

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Timer
    from natsd.server.account import Account
    from natsd.server.context import ServerContext

__all__ = ["LeafHandshakeMixin", "JS_DENY", "LOOP_DELAY_NS", "FIRST_PING_NS", "SECOND"]

# Subjects that never cross a link (nats-server's denyAllClientJs).
JS_DENY = ("$JS.API.>", "$KV.>", "$OBJ.>")
LOOP_DELAY_NS = 30_000_000_000  # nats-server leafNodeReconnectDelayAfterLoopDetected
FIRST_PING_NS = 1_000_000_000  # first PING soon after the link is up (RTT, liveness)
SECOND = 1_000_000_000


class LeafHandshakeMixin:
    """The handshake of :class:`natsd.server.leaf.node.LeafConnection` (which owns the attributes)."""

    if TYPE_CHECKING:  # what the mixin uses of LeafConnection, declared for the type checker
        manager: Any  # LeafManager (its methods take the LeafConnection this mixin is part of)
        server: ServerContext
        remote: Any  # _Remote | None
        solicited: bool
        spoke: bool
        websocket: bool
        transport: Any
        closed: bool
        ready: bool
        bound: bool
        account: Account | None
        headers: bool
        prefix: str
        nonce: str
        cid: int
        ip: str
        remote_info: dict
        remote_name: str
        remote_id: str
        remote_domain: str
        remote_account: str
        remote_proto: int
        perms: LinkPerms | None
        deny_in: tuple
        deny_out: tuple
        deny_interest_out: tuple
        start_ns: int
        rtt_ns: int
        pings_out: int
        compression: str
        negotiating: bool
        _deflate: Any
        s2: bool
        _inflate: Any
        _await_compressed_info: bool
        _ping_sent_ns: int
        _timer: Timer | None
        _auth_timer: Timer | None
        _awaiting_connect_info: bool
        _tls: Any

        def send(self, data: bytes) -> None: ...
        def flush(self) -> None: ...
        def close(self, reason: str = ..., graceful: bool = ...) -> None: ...
        def _apply_perms(self) -> None: ...
        def _write_limits(self, transport: asyncio.Transport) -> None: ...
        def _arm_expiry(self, expires_s: int) -> None: ...
        def _perms_from_hub(self, imp: object, exp: object) -> None: ...

    # -- handshake ------------------------------------------------------------------------------

    def _on_info(self, info: dict) -> None:
        if not self.solicited:
            if self.negotiating:
                self._accept_compression(info)
            return  # otherwise the accepting side ignores INFO (as the reference)
        if self._await_compressed_info:
            # The hub's INFO after the switch (compressed): the one the handshake goes on with.
            self._await_compressed_info = False
            self.remote_info = info
            self.nonce = info.get("nonce", "") or self.nonce
            self._send_connect()
            return
        first = not self.remote_info
        self.remote_info = info if first else {**self.remote_info, **info}
        if info.get("leafnode_urls") and not self.websocket:  # the hub cluster's other nodes
            self.remote.urls.update_from_info(self.remote.opts.urls, list(info["leafnode_urls"]))
        if first:
            if "leafnode_urls" not in info and "nonce" not in info:
                logger.error("%sAttempted to connect to a non-leafnode port", self.prefix)
                self.close("Wrong Port")
                return
            self.remote_name = info.get("server_name") or info.get("server_id", "")
            self.remote_proto = _proto(info.get("proto"))
            self.remote_id = info.get("server_id", "")
            self.remote_domain = info.get("domain", "") or ""
            self.headers = bool(info.get("headers"))
            self.nonce = info.get("nonce", "") or ""
            ssl_ctx = self.remote.ssl_ctx
            if self.websocket:
                ssl_ctx = None  # wss:// did its TLS before the HTTP upgrade (as the reference)
            elif info.get("tls_required") and ssl_ctx is None:
                logger.error(
                    "%sTLS configuration mismatch: Hub requires TLS but leafnode remote is not configured for TLS",
                    self.prefix,
                )
                self.close("TLS Handshake Failure")
                return
            if ssl_ctx is not None and not self._tls:
                self.transport.pause_reading()
                loop = self.server.loop
                assert loop is not None  # links exist only on a started server
                self._tls = loop.create_task(self._start_tls(ssl_ctx))
                return
            self._after_first_info()
        else:
            self._on_info_update(info)

    def _after_first_info(self) -> None:
        """Soliciting side, the hub's first INFO read (and TLS up): negotiate compression, then
        CONNECT (or wait for the hub's compressed INFO first)."""
        if self._solicit_compression():
            return
        self._send_connect()

    # -- compression (see natsd.server.leaf.compress) ------------------------------------------------

    def _compression_opts(self) -> tuple[str, list[int]]:
        o = self.remote.opts if self.remote is not None else self.manager.options
        return o.compression, o.compression_rtts_ns

    def _negotiated(self, configured: str, announced: str, rtts: list[int]) -> str:
        """Our writer's mode; raises CompressionError for a mode we do not know."""
        if self.websocket and getattr(self.transport, "ws_compressed", False):
            return COMPRESSION_OFF  # permessage-deflate already: no S2 on top (as the reference)
        cm = select_mode(configured, announced)
        if cm == COMPRESSION_S2_AUTO:
            # The RTT so far: the time since the connection was made (the reference's computeRTT(start)).
            cm = auto_mode(self.rtt_ns or (self.server.clock.time_ns() - self.start_ns), rtts)
        return cm

    def _solicit_compression(self) -> bool:
        """True when the link switched to S2 and waits for the hub's compressed INFO."""
        self.negotiating = False
        configured, rtts = self._compression_opts()
        announced = self.remote_info.get("compression", "") or ""
        if not needs_compression(configured):
            self.compression = COMPRESSION_NOT_SUPPORTED if not announced else COMPRESSION_OFF
            return False
        try:
            cm = self._negotiated(configured, announced, rtts)
        except CompressionError as e:
            logger.error("%s%s", self.prefix, e)
            self.send(encode_err(str(e)))
            self.close("Protocol Violation")
            return True
        self.compression = cm
        if not needs_compression(cm):
            return False
        # Our INFO goes out plain; everything after it both ways is the S2 stream.
        self.send(encode_info(self.manager.info(self, compression=info_mode(configured, cm))))
        self.flush()
        self._start_s2()
        self._await_compressed_info = True
        logger.debug("%sLeafnode compression: %s", self.prefix, cm)
        return True

    def _accept_compression(self, info: dict) -> None:
        """Accepting side: the leaf's INFO (it wants compression)."""
        self.negotiating = False
        configured, rtts = self._compression_opts()
        announced = info.get("compression", "") or ""
        if not needs_compression(configured):
            self.compression = COMPRESSION_NOT_SUPPORTED if not announced else COMPRESSION_OFF
            return
        try:
            cm = self._negotiated(configured, announced, rtts)
        except CompressionError as e:
            logger.error("%s%s", self.prefix, e)
            self.send(encode_err(str(e)))
            self.close("Protocol Violation")
            return
        self.compression = cm
        if not needs_compression(cm):
            return
        # Switch first: our answering INFO is the first thing of the compressed stream.
        self.flush()
        self._start_s2()
        self.send(encode_info(self.manager.info(self, nonce=self.nonce, compression=info_mode(configured, cm))))
        logger.debug("%sLeafnode compression: %s", self.prefix, cm)

    def _start_s2(self) -> None:
        """Both directions become the S2 stream: here, or under the WebSocket frames (where
        nats-server puts it: the frames are compressed, not the payloads)."""
        self.s2 = True
        if self.websocket:
            self.transport.compress(S2Writer(), S2Reader())
        else:
            self._deflate = S2Writer()
            self._inflate = S2Reader()

    def _auto_level(self) -> None:
        """s2_auto: every PONG re-picks the level from the RTT (what /leafz shows; natsd's
        writer is the same for every level, see natsd.server.leaf.compress)."""
        configured, rtts = self._compression_opts()
        if configured == COMPRESSION_S2_AUTO and needs_compression(self.compression):
            self.compression = auto_mode(self.rtt_ns, rtts)

    def _send_connect(self) -> None:
        info = self.remote_info
        try:
            self.send(encode_connect(self.manager.connect_dict(self)))
        except Exception as e:  # credentials unreadable: log, retry later
            logger.error("%sError sending leafnode CONNECT: %s", self.prefix, e)
            self.close("Authentication Failure")
            return
        if info.get("info_on_connect"):
            # Our interest follows the hub's answer (as nats-server's leaf does): that INFO may
            # carry our user's permissions, and a hub closes a link whose LS+ breaks them.
            self._awaiting_connect_info = True
            # The hub answers within seconds or the link is stale.
            self._timer = self.server.clock.call_later(2 * SECOND, self._connect_info_timeout)
            return
        self._finish()

    async def _start_tls(self, ssl_ctx: ssl.SSLContext) -> None:
        """Upgrade the plaintext link after the hub's INFO (nats-server's leafnode TLS order)."""
        host = remote_url_parts(self.remote.connected_url)[0]
        # the mixin is part of LeafConnection, the asyncio.Protocol start_tls re-attaches
        protocol = cast(asyncio.BaseProtocol, self)
        try:
            t = await asyncio.get_running_loop().start_tls(self.transport, protocol, ssl_ctx, server_hostname=host)
        except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
            logger.error("%sTLS handshake error: %s", self.prefix, e)
            self.close("TLS Handshake Failure", graceful=False)
            return
        if self.closed or t is None:
            return
        self.transport = t
        self._write_limits(t)
        self._after_first_info()
        try:
            t.resume_reading()
        except Exception:  # pragma: no cover - already reading
            pass

    def _on_info_update(self, info: dict) -> None:
        if info.get("connect_info") and self._awaiting_connect_info:
            self._awaiting_connect_info = False
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self.remote_account = info.get("remote_account", "") or ""
            if info.get("import") is not None or info.get("export") is not None:
                self._perms_from_hub(info.get("import"), info.get("export"))
            self._finish()

    def _connect_info_timeout(self) -> None:
        self._timer = None
        if self._awaiting_connect_info and not self.closed:
            logger.error("%sStale Leaf Node Connection - Closing", self.prefix)
            self.close("Stale Connection")

    def _on_connect(self, d: dict) -> None:
        if self.solicited or self.ready:
            return
        if d.get("lang"):
            # A client connected to the leafnode port (the reference refuses it the same way).
            self.send(encode_err("Attempted To Connect To Leafnode Port"))
            self.close("Wrong Port")
            return
        res = self.manager.authenticate(d, self)
        if not res.ok:
            send_auth_error_event(self.server, self, d, leaf=True)  # ($SYS.SERVER.<id>.CLIENT.AUTH.ERR)
            logger.error("%sauthentication error", self.prefix)
            self.send(encode_err(res.error or ERR_AUTH_VIOLATION))
            self.close("Authentication Failure")
            return
        acc_name = res.account
        if res.expires:
            self._arm_expiry(res.expires)
        if res.permissions is not None:
            self.perms = LinkPerms.for_hub(res.permissions)
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        self.remote_name = d.get("name", "") or d.get("server_id", "")
        self.remote_proto = _proto(d.get("protocol"))  # (the accepting side gets no INFO)
        self.remote_id = d.get("server_id", "")
        self.remote_domain = d.get("domain", "") or ""
        self.remote_account = d.get("remote_account", "") or ""
        self.headers = bool(d.get("headers"))
        if self.negotiating or not self.compression:
            # No INFO came first: the leaf did not want compression; its CONNECT says what it has.
            self.negotiating = False
            self.compression = d.get("compress_mode") or COMPRESSION_NOT_SUPPORTED
        if d.get("is_hub"):
            self.spoke = True  # the other side declared itself the hub: we take the spoke role
        deny_pub = d.get("deny_pub") or []
        if isinstance(deny_pub, list):
            # The other side does not want these (its deny_imports): do not send them.
            self.deny_out = self.deny_out + tuple(s for s in deny_pub if isinstance(s, str))
        self.account = self.server.get_account(acc_name)
        info = self.manager.info(self, connect_info=True, remote_account=acc_name)
        if self.perms is not None:
            info.update(self.perms.info_fields())  # the leaf enforces them on its side too
        self.send(encode_info(info))
        if self.manager.account_leafs_full(acc_name):
            # As the reference, after the INFO: its account registration refuses the link.
            logger.error("%smaximum account active connections exceeded", self.prefix)
            self.send(encode_err("maximum account active connections exceeded"))
            self.close("Maximum Account Connections Exceeded")
            return
        self._finish()

    def _bind(self) -> None:
        """Bind the link to its account and announce our interest (LS+)."""
        if self.bound:
            return
        if self.account is None:
            name = self.remote.account_name if self.remote else "$G"
            self.account = self.server.get_account(name)
        self._setup_filters()
        self.bound = True
        self.manager.link_up(self)

    def _finish(self) -> None:
        """Both sides: the link is up; messages flow and pings start."""
        self._bind()
        self.ready = True
        if self.remote is not None:
            self.remote.link_up(self)
            logger.info("%sConnected leafnode to %r", self.prefix, self.remote_name)
        dom_local = self.manager.domain
        if dom_local != self.remote_domain:
            logger.info(
                '%sJetStream using domains: local "%s", remote "%s"', self.prefix, dom_local, self.remote_domain
            )
        self._timer = self.server.clock.call_later(FIRST_PING_NS, self._ping_tick)

    def _setup_filters(self) -> None:
        deny_in = list(JS_DENY)
        deny_out = list(self.deny_out)
        deny_int = list(JS_DENY)
        r = self.remote.opts if self.remote else None
        if r is not None:
            deny_in += r.deny_imports
            deny_int += r.deny_imports
            deny_out += r.deny_exports
        dom = self.manager.domain
        if dom and dom != self.remote_domain:
            # Requests for our own domain never leave (nats-server blockMappingOutgoing).
            deny_out.append(f"$JS.{dom}.API.>")
        self.deny_in = tuple(dict.fromkeys(deny_in))
        self.deny_out = tuple(dict.fromkeys(deny_out))
        self.deny_interest_out = tuple(dict.fromkeys(deny_int))
        self._apply_perms()

    def _on_err(self, text: str) -> None:
        logger.error("%sLeafnode Error '%s'", self.prefix, text)
        if "Loop detected" in text and self.remote is not None:
            self.remote.delay_next(LOOP_DELAY_NS)
        if not self.ready or "Authorization" in text or "Loop" in text:
            self.close("Authentication Failure" if "Authorization" in text else "Protocol Violation")

    def _auth_timeout(self) -> None:
        self._auth_timer = None
        if not self.ready and not self.closed:
            logger.error("%sAuthentication Timeout", self.prefix)
            self.send(encode_err("Authentication Timeout"))
            self.close("Authentication Timeout")

    def _ping_tick(self) -> None:
        self._timer = None
        if self.closed:
            return
        opts = self.server.options
        if self.pings_out + 1 > opts.ping_max:
            logger.error("%sStale Leaf Node Connection - Closing", self.prefix)
            self.send(encode_err("Stale Connection"))
            self.close("Stale Connection")
            return
        self.pings_out += 1
        self._ping_sent_ns = self.server.clock.time_ns()
        self.send(PING)
        interval = min(opts.ping_interval_ns, self.manager.ping_interval_ns)
        self._timer = self.server.clock.call_later(interval, self._ping_tick)


# The server-to-server protocol level announced on leafnode links: nats-server's MsgTraceProto,
# the level from which a link carries traced messages on (natsd.server.msgtrace: hops).
LEAF_PROTO = 3


def _proto(v: object) -> int:
    """The server-to-server protocol level the other side announced (INFO ``proto``, a leaf's
    CONNECT ``protocol``): nats-server's MsgTraceProto (3) and up trace messages further on."""
    return v if isinstance(v, int) and not isinstance(v, bool) else 0
