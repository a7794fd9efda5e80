"""Leafnode links, server side of the bookkeeping: the accepting listener, the remotes (connect,
reconnect with backoff), the handshake dictionaries, and the fan-out of the account's interest to
its links. The per-link protocol lives in :mod:`natsd.server.leaf.node` (see its docstring).
"""

from __future__ import annotations

import asyncio
import random
import ssl
from typing import TYPE_CHECKING, Any, Callable

from natsd import __version__
from natsd.gotime import format_duration
from natsd.config.jwt import limit_of
from natsd.config.leafnodes import is_ws_url, remote_url_parts
from natsd.nuid import nuid
from natsd.server.leaf.handshake import LEAF_PROTO
from natsd.server.leaf.auth import authenticate, read_creds, remote_ssl_context, sign_nonce
from natsd.server.leaf.node import LDS_PREFIX, SECOND, LeafConnection
from natsd.server.leaf.urls import RemoteUrls, dial_failure_delay_ns, link_closed_delay_ns
from natsd.server.log import logger
from natsd.server.transport.tls import TlsLayer

if TYPE_CHECKING:  # pragma: no cover
    from natsd.config.leafnodes import LeafNodeOptions, RemoteLeafOptions
    from natsd.clock import Timer
    from natsd.server.account import Account
    from natsd.server.auth.authenticator import AuthResult
    from natsd.server.context import ServerContext
    from natsd.server.subscription import Subscription
    from natsd.server.transport.wsclient import WebSocketClientLayer

__all__ = ["LeafManager"]


class _Remote:
    """One ``remotes`` entry: connect, reconnect with backoff, remember the live link."""

    def __init__(self, manager: "LeafManager", opts: "RemoteLeafOptions") -> None:
        self.manager = manager
        self.opts = opts
        self.account_name = opts.account or "$G"
        # nats-server's order: shuffled once unless dont_randomize, then walked in a circle
        self.urls = RemoteUrls(opts.urls, randomize=not opts.no_randomize, rng=manager.rng)
        self.failures = 0
        self.link: LeafConnection | None = None
        self.stopped = False
        self._timer: Timer | None = None
        self._task: asyncio.Task | None = None
        self._delay_next_ns = 0
        self.connected_url = ""
        self.ssl_ctx: ssl.SSLContext | None = None

    def start(self) -> None:
        self._attempt()

    def stop(self) -> None:
        self.stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self.link is not None:
            self.link.close("Server Shutdown")

    def delay_next(self, ns: int) -> None:
        self._delay_next_ns = max(self._delay_next_ns, ns)

    def _attempt(self) -> None:
        self._timer = None
        if self.stopped:
            return
        loop = self.manager.server.loop
        assert loop is not None  # remotes start with the server
        self._task = loop.create_task(self._connect())

    async def _connect(self) -> None:

        url = self.urls.pick_next()
        host, port, _user, _pw = remote_url_parts(url)
        loop = self.manager.server.loop
        assert loop is not None  # remotes start with the server
        try:
            # Plaintext first: with tls {} the link is upgraded after the hub's INFO.
            self.ssl_ctx = remote_ssl_context(self.opts.tls)
            self.connected_url = url
            if is_ws_url(url):
                layer = await self._connect_ws(url, host, port)
                self._task = None
                if layer.failed:
                    self._schedule()  # refused within this await: _failed found the attempt running
                return
            _t, link = await asyncio.wait_for(
                loop.create_connection(lambda: LeafConnection(self.manager, self), host, port), timeout=5
            )
        except (OSError, asyncio.TimeoutError, ValueError) as e:  # (ValueError: TLS files)
            self._task = None
            self._failed(host, port, str(e) or type(e).__name__)
            return
        self._task = None
        if link.closed:
            # The hub refused the link before this task resumed (INFO, CONNECT and its -ERR can
            # all be handled within wait_for's extra loop turn); link_down found the attempt
            # still running and left the next one to us.
            self._schedule(link_closed_delay_ns(self.manager.options.reconnect_ns))

    async def _connect_ws(self, url: str, host: str, port: int) -> WebSocketClientLayer:
        """A ``ws://``/``wss://`` remote: TCP (TLS first for wss), the HTTP upgrade, then the
        leaf protocol inside WebSocket frames (natsd.server.transport.wsclient); the upgrade finishes after
        this returns, a refused one reports through ``_failed``."""
        from urllib.parse import urlsplit

        # deferred (issue 26, start-up time): WebSocket remotes are the exception, the framing
        # layer is loaded by the first one
        from natsd.server.transport.wsclient import WebSocketClientLayer, leaf_ws_target

        sp = urlsplit(url)
        ssl_ctx = self.ssl_ctx
        if sp.scheme.lower() == "wss" and ssl_ctx is None:
            ssl_ctx = ssl.create_default_context()  # wss:// without tls {}: the system's CAs
        elif sp.scheme.lower() == "ws":
            ssl_ctx = None

        def upper() -> LeafConnection:
            link = LeafConnection(self.manager, self)
            link.websocket = True
            return link

        def failed(why: str) -> None:
            if not self.stopped:
                self._failed(host, port, why)

        netloc = sp.netloc.rpartition("@")[2]
        if sp.port is None:
            netloc = f"{netloc}:{port}"  # (the Host header names the port the reference dials)
        layer = WebSocketClientLayer(
            netloc, leaf_ws_target(sp.path), upper, failed, compression=self.opts.ws_compression
        )
        loop = self.manager.server.loop
        assert loop is not None  # remotes start with the server
        await asyncio.wait_for(
            loop.create_connection(
                lambda: layer, host, port, ssl=ssl_ctx, server_hostname=host if ssl_ctx is not None else None
            ),
            timeout=5,
        )
        return layer

    def _failed(self, host: str, port: int, why: str) -> None:
        self.failures += 1
        logger.error(
            'Error trying to connect as leafnode to remote server "%s:%d" (attempt %d): %s',
            host,
            port,
            self.failures,
            why,
        )
        self._schedule(dial_failure_delay_ns(self.manager.options.reconnect_ns, self.manager.rng))

    def link_up(self, link: LeafConnection) -> None:
        self.link = link
        self.failures = 0

    def link_down(self, link: LeafConnection) -> None:
        if self.link is link:
            self.link = None
        if not link.ready:
            self.failures += 1
        # A connected link that closed (the hub node died, or refused the handshake): the next dial,
        # to the next URL, after exactly `reconnect` (nats-server re-links in 1.0 s by default).
        self._schedule(link_closed_delay_ns(self.manager.options.reconnect_ns))

    def _schedule(self, delay: int | None = None) -> None:
        """Arm the next attempt ``delay`` ns from now (see natsd.server.leaf.urls; None: after a
        dial failure's delay), or later when the hub asked for a pause (``delay_next``)."""
        if self.stopped or self._timer is not None or self._task is not None or self.link is not None:
            return
        if delay is None:
            delay = dial_failure_delay_ns(self.manager.options.reconnect_ns, self.manager.rng)
        if self._delay_next_ns:
            delay = max(delay, self._delay_next_ns)
            self._delay_next_ns = 0
        self._timer = self.manager.server.clock.call_later(delay, self._attempt)


class LeafManager:
    """All leafnode links of a server: the accepting listener, the remotes, interest fan-out."""

    def __init__(self, server: "ServerContext", options: "LeafNodeOptions", rng: random.Random | None = None) -> None:
        self.server = server
        self.options = options
        self.connections: dict[int, LeafConnection] = {}
        self.links: dict[str, list[LeafConnection]] = {}  # account name -> ready links
        self.rng = rng if rng is not None else random.Random()  # URL order and dial jitter (seeded in tests)
        self.remotes = [_Remote(self, r) for r in options.remotes]
        self._lds: dict[str, str] = {}
        self._listener: asyncio.base_events.Server | None = None
        self.port = 0
        self.ping_interval_ns = 60 * SECOND  # links ping at least this often (liveness across NAT)

    @property
    def domain(self) -> str:
        js = self.server.options.jetstream
        return js.domain if (js.enabled and self.server.jetstream is not None) else ""

    def lds(self, acc: Account) -> str:
        v = self._lds.get(acc.name)
        if v is None:
            v = self._lds[acc.name] = LDS_PREFIX + nuid()
        return v

    async def start(self) -> None:
        ln = self.options
        if ln.port:
            host = ln.host or "0.0.0.0"
            if ln.tls is not None:
                self.server.tls.add("leafnode", ln.tls)  # reloaded with the others (TlsContexts)
            loop = self.server.loop
            assert loop is not None  # a started server's
            self._listener = await loop.create_server(
                self._new_protocol, host, ln.port if ln.port > 0 else 0, reuse_address=True
            )
            self.port = self._listener.sockets[0].getsockname()[1]
            logger.info("Listening for leafnode connections on %s:%d", host, self.port)
        for r in self.remotes:
            r.start()

    def _new_protocol(self) -> asyncio.BaseProtocol:
        """An accepted link: plain, or under the client port's TLS layer. nats-server's leafnode
        order: INFO in plaintext, then the handshake (or the handshake first with
        ``handshake_first``); a first record that is not TLS closes the link without a reply."""
        tls = self.options.tls
        if tls is None:
            return LeafConnection(self)

        s = self.server
        return TlsLayer.for_options(tls, s.tls.getter("leafnode"), lambda: LeafConnection(self), s.clock, s.handshakes)

    def ws_link(self) -> LeafConnection | None:
        """A leaf connecting on the websocket port (``GET .../leafnode``, natsd.server.transport.websocket):
        a link like one of the leafnodes port, None when that port is not configured (the
        reference refuses the connection then)."""
        if not self.options.port:
            logger.error("Not configured to accept leaf node connections")
            return None
        link = LeafConnection(self)
        link.websocket = True
        return link

    async def stop(self) -> None:
        for r in self.remotes:
            r.stop()
        if self._listener is not None:
            self._listener.close()
        for c in list(self.connections.values()):
            c.close("Server Shutdown")
        if self._listener is not None:
            await self._listener.wait_closed()
            self._listener = None

    def reload(self, new: "LeafNodeOptions | None") -> "LeafNodeOptions":
        """SIGHUP: the accepting port's certificates and authorization change for new links; the
        listener, its TLS on/off and the remotes stay as they started (a restart changes them).
        Returns the options in force."""
        old = self.options
        if new is None:
            logger.error("Config reload: leafnodes cannot be removed without a restart")
            return old
        new.host, new.port, new.remotes, new.reconnect_ns = old.host, old.port, old.remotes, old.reconnect_ns
        if (old.tls is None) != (new.tls is None):
            logger.error("Config reload: leafnode TLS cannot be enabled or disabled without a restart")
            new.tls = old.tls
        elif new.tls is not None:
            self.server.tls.reload("leafnode", new.tls)
        self.options = new
        return new

    # -- handshake helpers ---------------------------------------------------------------------------

    def info(self, c: LeafConnection, **extra: Any) -> dict:
        s = self.server
        host = self.options.advertise or f"{_public_host(self.options.host)}:{self.port}"
        d = {
            "server_id": s.server_id,
            "server_name": s.server_name,
            "version": __version__,
            "proto": LEAF_PROTO,
            "go": "python",
            "host": self.options.host,
            "port": self.port,
            "headers": True,
            "auth_required": True,
            "max_payload": s.options.max_payload,
        }
        tls = self.options.tls
        if tls is not None:
            d["tls_required"] = True
            if tls.verify_clients:
                d["tls_verify"] = True
        if s.jetstream is not None:
            d["jetstream"] = True
        d["client_id"] = c.cid
        if extra.pop("connect_info", False):
            d["connect_info"] = True
        d.update({k: v for k, v in extra.items() if k != "nonce"})
        if extra.get("nonce"):
            d["nonce"] = extra["nonce"]
        if self.domain:
            d["domain"] = self.domain
        d["info_on_connect"] = True
        d["leafnode_urls"] = [host]
        return d

    def connect_dict(self, c: LeafConnection) -> dict:

        s = self.server
        r = c.remote
        ro = r.opts
        d: dict = {
            "version": __version__,
            "server_id": s.server_id,
            "name": s.server_name,
            "is_hub": bool(ro.hub),
            "headers": True,
            "jetstream": s.jetstream is not None,
            "remote_account": r.account_name,
            "protocol": LEAF_PROTO,  # (as nats-server's leafConnectInfo: the accepting side gets no INFO)
        }
        if self.domain:
            d["domain"] = self.domain
        if ro.deny_imports:
            d["deny_pub"] = list(ro.deny_imports)
        if c.compression:
            d["compress_mode"] = c.compression
        if ro.credentials:
            jwt, seed = read_creds(ro.credentials)
            sig, _pub = sign_nonce(seed, c.nonce)
            d["jwt"] = jwt
            d["sig"] = sig
        elif ro.nkey:
            sig, pub = sign_nonce(ro.nkey.encode(), c.nonce)
            d["nkey"] = pub
            d["sig"] = sig
        _h, _p, user, pw = remote_url_parts(r.connected_url or r.urls.current or r.urls.urls[0])
        if not user:  # a URL the hub's INFO named has none: the configured ones' (nats-server's saveUserPassword)
            user, pw = next(((u, p) for _h2, _p2, u, p in map(remote_url_parts, ro.urls) if u), ("", ""))
        if user:
            d["user"] = user
            if pw:
                d["pass"] = pw
            else:
                d["auth_token"] = user
        return d

    def authenticate(self, d: dict, c: LeafConnection) -> AuthResult:
        """The :class:`~natsd.server.auth.authenticator.AuthResult` of a leaf CONNECT (see
        :func:`natsd.server.leaf.auth.authenticate`)."""
        return authenticate(self.options, self.server.auth, d, c)

    def account_leafs_full(self, account: str) -> bool:
        """The account's JWT limits its leafnode connections (``limits.leaf``, -1: none) and it
        has that many links already (nats-server ``maxTotalLeafNodesReached``; counted on this
        server only: natsd has no cluster to add remote leafs from)."""
        trust = self.server.trust
        if trust is None:
            return False
        claims = trust.lookup(account)
        if claims is None:
            return False
        limit = limit_of(claims.limits, "leaf")
        return limit >= 0 and len(self.links.get(account, ())) >= limit

    # -- interest fan-out ------------------------------------------------------------------------------

    def link_up(self, c: LeafConnection) -> None:
        acc = c.account
        assert acc is not None  # bound by the handshake that brings the link up
        links = self.links.setdefault(acc.name, [])
        if not links:
            acc.sublist.watch = self._watcher(acc)
        links.append(c)
        c.send_all_interest(acc.sublist.all(), self.lds(acc))

    def link_down(self, c: LeafConnection, was_ready: bool) -> None:
        self.connections.pop(c.cid, None)
        if not was_ready or c.account is None:
            return
        links = self.links.get(c.account.name)
        if links and c in links:
            links.remove(c)

    def _watcher(self, acc: Account) -> Callable[[str, str | None, Subscription, int], None]:
        links = self.links.setdefault(acc.name, [])

        def watch(subject: str, queue: str | None, item: Subscription, delta: int) -> None:
            owner = item.client  # (every Sublist item is a Subscription)
            if queue is not None and isinstance(owner, LeafConnection):
                delta *= owner.queue_weight(item)  # a link's queue member counts for its weight
            for link in links:
                if link.bound and link.exports_interest_of(owner):
                    link.interest_changed(subject, queue, delta)

        return watch

    def weight_changed(self, owner: LeafConnection, subject: str, queue: str, delta: int) -> None:
        """A link's ``LS+`` changed the weight of one of its queue groups: the other links of the
        account announce the new total (as nats-server passes queue weights on)."""
        acc = owner.account
        assert acc is not None  # LS+ come from bound links
        for link in self.links.get(acc.name, ()):
            if link.bound and link.exports_interest_of(owner):
                link.interest_changed(subject, queue, delta)

    # -- monitoring --------------------------------------------------------------------------------------

    def leafz(self, query: dict | None = None) -> dict:
        q = query or {}
        subs = str(q.get("subs", "")).lower() in ("1", "true", "detail")
        acc = q.get("acc") or ""
        leafs = [
            link_leafz(c, subs)
            for c in self.connections.values()
            if c.ready and (not acc or (c.account and c.account.name == acc))
        ]
        return {"leafnodes": len(leafs), "leafs": leafs}


def _public_host(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def link_leafz(c: LeafConnection, subs: bool = False) -> dict:
    """One link's object in the reference's /leafz ``leafs`` list."""
    d = {
        "id": c.cid,
        "name": c.remote_name,
        "is_spoke": c.spoke,
        "account": c.account.name if c.account else "",
        "ip": c.ip,
        "port": c.port,
        "rtt": _fmt_rtt(c.rtt_ns),
        "in_msgs": c.in_msgs,
        "out_msgs": c.out_msgs,
        "in_bytes": c.in_bytes,
        "out_bytes": c.out_bytes,
        "subscriptions": len(c.rsubs),
    }
    if subs:
        d["subscriptions_list"] = sorted(s for s, _q in c.rsubs)
    if c.compression:
        d["compression"] = c.compression  # the negotiated mode (natsd.server.leaf.compress)
    if c.websocket:
        d["websocket"] = True  # (nats-server 2.15.1 adds it for links over WebSocket)
    return d


def _fmt_rtt(ns: int) -> str:
    """Go's time.Duration string, as the reference prints ``rtt`` ("654µs", "1.234567ms", "1m5s");
    "0s" before the first PONG."""
    return format_duration(max(ns, 0))
