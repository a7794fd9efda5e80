"""Monitoring HTTP endpoints, field for field as nats-server's ``-m`` port.

A deliberately small HTTP/1.1 server on ``asyncio.Protocol`` (no framework): ``GET`` only,
keep-alive, one JSON document per request. Handlers only read counters the message path keeps
anyway, so serving a request never stalls clients for longer than building its JSON.

Endpoints: ``/varz``, ``/connz`` (``subs=1|detail``, ``offset``, ``limit``, ``sort``, ``cid``,
``acc``, ``auth``), ``/subsz`` (``subs=1``, ``offset``, ``limit``, ``test``), ``/healthz``,
``/accountz`` (``acc``), ``/jsz`` (delegated to the JetStream engine), ``/metrics`` (Prometheus, see
:mod:`natsd.server.monitoring.metrics`; built over several loop turns, the connection's later requests wait
for it) and the live dashboard at ``/`` and ``/dashboard`` (:mod:`natsd.server.monitoring.dashboard`).
Durations are Go-style strings (``"4m39s"``) where the reference uses strings and nanoseconds
where it uses numbers; times are RFC 3339 UTC with nanoseconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, cast
from urllib.parse import parse_qs, urlsplit

from natsd import __version__, _compiled
from natsd.config import feature_flags
from natsd.gotime import format_rfc3339 as rfc3339, uptime
from natsd.server.context import ServerContext
from natsd.server.log import logger
from natsd.server.transport.tls import connz_fields
from natsd.subjects import subjects_collide
from natsd.subjects.tokens import subject_matches
from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from ssl import SSLContext

    from natsd.server.connection import ClientConnection
    from natsd.server.subscription import Subscription
    from natsd.server.leaf.manager import LeafManager

__all__ = ["MonitorServer", "MonitoredServer"]


class MonitoredServer(ServerContext, Protocol):
    """What the endpoints read of the server beyond :class:`ServerContext`: its ports, its
    lifetime, the totals of closed connections and the leafnode links."""

    @property
    def start_time_ns(self) -> int: ...

    # natsd.server.mqtt.MQTTListener with an mqtt {} port (its varz/connz numbers), else None
    mqtt: Any

    @property
    def total_connections(self) -> int: ...

    @property
    def running(self) -> bool: ...

    @property
    def leafnodes(self) -> LeafManager | None: ...

    @property
    def clients(self) -> dict[int, ClientConnection]: ...

    @property
    def port(self) -> int: ...

    @property
    def http_port(self) -> int: ...

    @property
    def https_port(self) -> int: ...

    @property
    def websocket_port(self) -> int: ...

    def info_dict(self) -> dict: ...

    def totals(self) -> tuple[int, int, int, int]: ...

    def num_subscriptions(self) -> int: ...


_MAX_REQUEST = 16 * 1024
_STATUS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class _HttpProtocol(asyncio.Protocol):
    def __init__(self, monitor: "MonitorServer") -> None:
        self.monitor = monitor
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.writable = asyncio.Event()  # transport flow control, for large bodies written in chunks
        self.writable.set()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = t = cast(asyncio.Transport, transport)  # a stream server's: a Transport
        self.monitor.conns.add(t)

    def connection_lost(self, exc: Exception | None) -> None:
        self.monitor.conns.discard(self.transport)
        self.writable.set()  # a chunked write waiting on a gone client ends

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while not self.busy:  # a slow (async) response in progress: later requests wait in buf, in order
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > _MAX_REQUEST:
                    self._respond(400, {"error": "request too large"}, close=True)
                return
            head = bytes(self.buf[:end]).decode("latin-1")
            del self.buf[: end + 4]
            lines = head.split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3:
                self._respond(400, {"error": "bad request line"}, close=True)
                return
            method, target, version = parts
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            close = headers.get("connection", "").lower() == "close" or version == "HTTP/1.0"
            if method not in ("GET", "HEAD"):
                self._respond(405, {"error": "method not allowed"}, close=close)
            elif (slow := self.monitor.handle_async(target)) is not None:
                self.busy = True
                asyncio.ensure_future(self._slow(slow, close, method == "HEAD"))
                return
            else:
                self._respond(*self.monitor.handle(target), close=close, head_only=method == "HEAD")
            if close or self.transport is None or self.transport.is_closing():
                return

    async def _slow(self, work: Awaitable[tuple[int, list[bytes], str]], close: bool, head_only: bool) -> None:
        """Build a response over several loop turns, then write its chunks as the client takes them (each
        chunk waits for the transport's buffer to drain), so a large body never holds the loop."""
        try:
            code, body, ctype = await work
        except Exception as e:  # a monitoring bug must not take the server down
            logger.exception("monitoring endpoint failed")
            code, body, ctype = 500, [json.dumps({"error": str(e)}).encode()], None
        t = self.transport
        if t is None or t.is_closing():
            return
        self._respond_head(code, sum(map(len, body)), ctype, close)
        for chunk in [] if head_only else body:
            await self.writable.wait()
            if t.is_closing():
                return
            t.write(chunk)
        if close:
            t.close()
            return
        self.busy = False
        self.data_received(b"")  # serve requests that arrived meanwhile

    def _respond(self, code: int, body: Any, ctype: str | None = None, *, close: bool, head_only: bool = False) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body, indent=2).encode()
        self._respond_head(code, len(data), ctype, close)
        transport = self.transport
        assert transport is not None  # requests arrive after connection_made()
        if not head_only:
            transport.write(data)
        if close:
            transport.close()

    def _respond_head(self, code: int, length: int, ctype: str | None, close: bool) -> None:
        transport = self.transport
        assert transport is not None  # requests arrive after connection_made()
        transport.write(
            (
                f"HTTP/1.1 {code} {_STATUS.get(code, '')}\r\n"
                f"Content-Type: {ctype or 'application/json'}\r\n"
                f"Content-Length: {length}\r\n"
                f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S GMT', time.gmtime())}\r\n"
                + ("Connection: close\r\n" if close else "")
                + "\r\n"
            ).encode()
        )


class MonitorServer:
    """Serves the monitoring endpoints of one :class:`Server`."""

    def __init__(self, server: MonitoredServer) -> None:
        self.server = server
        self._srv: asyncio.base_events.Server | None = None
        self.conns: set = set()
        self.req_stats: dict[str, int] = {}
        self.routes: dict[str, Callable[[dict], dict | bytes | tuple[int, dict]]] = {
            "/varz": self.varz,
            "/connz": self.connz,
            "/subsz": self.subsz,
            "/subscriptionsz": self.subsz,
            "/healthz": self.healthz,
            "/accountz": self.accountz,
            "/jsz": self.jsz,
            "/": self.root,
            "/leafz": self.leafz,
        }

    async def start(self, host: str, port: int, ssl: SSLContext | None = None) -> int:
        """Listen on ``host:port`` (HTTPS when ``ssl`` is an ``SSLContext``); returns the port."""
        loop = asyncio.get_running_loop()
        self._srv = await loop.create_server(lambda: _HttpProtocol(self), host, port, reuse_address=True, ssl=ssl)
        return self._srv.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._srv is not None:
            self._srv.close()
            for t in list(self.conns):
                t.close()
            await self._srv.wait_closed()
            self._srv = None

    def handle_async(self, target: str) -> Coroutine[Any, Any, tuple[int, list[bytes], str]] | None:
        """A coroutine giving ``(code, body, content type)`` for endpoints built over several loop turns
        (``/metrics``, see :mod:`natsd.server.monitoring.metrics`), else None."""
        if urlsplit(target).path.rstrip("/") != "/metrics":
            return None
        self.req_stats["/metrics"] = self.req_stats.get("/metrics", 0) + 1
        # deferred (issue 26, start-up time): prometheus_client loads with the first /metrics request
        from natsd.server.monitoring import metrics

        async def run() -> tuple[int, list[bytes], str]:
            return 200, await metrics.render(self), metrics.CONTENT_TYPE

        return run()

    def handle(self, target: str) -> tuple:
        u = urlsplit(target)
        path = u.path.rstrip("/") or "/"
        if self.server.options.http_dashboard and (path in ("/", "/dashboard") or path.startswith("/dashboard/")):
            # the page and its static files (`http_dashboard: false` turns off)
            from natsd.server.monitoring import dashboard

            self.req_stats[path] = self.req_stats.get(path, 0) + 1
            return dashboard.serve(path)
        fn = self.routes.get(path)
        if fn is None:
            return 404, b"404 page not found\n"
        self.req_stats[path] = self.req_stats.get(path, 0) + 1
        q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        try:
            r = fn(q)
        except ValueError as e:
            return 400, {"error": str(e)}
        except Exception as e:  # a monitoring bug must not take the server down
            logger.exception("monitoring endpoint %s failed", path)
            return 500, {"error": str(e)}
        if isinstance(r, tuple):
            return r
        if path == "/":
            return 200, r, "text/html; charset=utf-8"
        return 200, r

    # -- endpoints -----------------------------------------------------------------------------------

    def _now(self) -> str:
        return rfc3339(self.server.clock.time_ns())

    def root(self, q: dict) -> bytes:
        links = "".join(f'<a href="{p}">{p[1:]}</a><br/>\n' for p in [*self.routes, "/metrics"] if p != "/")
        return f"<html><body>natsd {__version__}<br/>\n{links}</body></html>\n".encode()

    def varz(self, q: dict) -> dict:
        s = self.server
        o = s.options
        now = s.clock.time_ns()
        cpu = os.times()
        d = {
            "server_id": s.server_id,
            "server_name": s.server_name,
            "version": __version__,
            "proto": 1,
            "git_commit": s.info_dict()["git_commit"],
            "go": s.info_dict()["go"],
            "host": o.host,
            "port": s.port,
            "auth_required": s.auth.auth_required or None,
            "tls_required": True if o.tls is not None else None,
            "tls_verify": True if o.tls is not None and o.tls.verify_clients else None,
            "max_connections": o.max_connections,
            "ping_interval": o.ping_interval_ns,
            "ping_max": o.ping_max,
            "http_host": o.http_host,
            "http_port": s.http_port,
            "http_base_path": "",
            "https_port": s.https_port,
            "auth_timeout": o.auth_timeout_ns / 1e9
            if o.auth_timeout_ns % 1_000_000_000
            else o.auth_timeout_ns // 1_000_000_000,
            "max_control_line": o.max_control_line,
            "max_payload": o.max_payload,
            "max_pending": o.max_pending,
            "cluster": {},
            "gateway": {},
            "leaf": {},
            "mqtt": s.mqtt.varz() if s.mqtt is not None else {},
            "websocket": {
                "host": o.websocket.host or o.host,
                "port": s.websocket_port,
                "no_tls": o.websocket.tls is None,
            }
            if o.websocket.port
            else {},
            "jetstream": self._varz_jetstream(),
            "feature_flags": feature_flags.merged(o.feature_flags),
            "tls_timeout": o.tls.timeout_ns / 1e9 if o.tls is not None else 2,
            "write_deadline": o.write_deadline_ns,
            "start": rfc3339(s.start_time_ns),
            "now": rfc3339(now),
            "uptime": uptime(now - s.start_time_ns),
            "mem": _rss_bytes(),
            "cores": os.cpu_count() or 1,
            "gomaxprocs": 1,
            "cpu": round((cpu.user + cpu.system) / max((now - s.start_time_ns) / 1e9, 1e-9) * 100, 2),
            "connections": len(s.clients) + (len(s.mqtt.conns) if s.mqtt is not None else 0),
            "total_connections": s.total_connections + (s.mqtt.total_connections if s.mqtt is not None else 0),
            "routes": 0,
            "remotes": 0,
            "leafnodes": len(s.leafnodes.leafz()["leafs"]) if s.leafnodes is not None else 0,
            **_varz_totals(*s.totals()),
            "slow_consumers": s.slow_consumers,
            "stale_connections": s.stale_connections,
            "stalled_clients": s.stalled_clients,
            "subscriptions": s.num_subscriptions(),
            "http_req_stats": dict(self.req_stats),
            "config_load_time": rfc3339(s.start_time_ns),
            "config_digest": o.config_digest,
            # server_tags / server_metadata: omitted when empty, as nats-server's omitempty
            **({"tags": list(o.server_tags)} if o.server_tags else {}),
            **({"metadata": dict(o.server_metadata)} if o.server_metadata else {}),
            "system_account": o.system_account or "",
            "slow_consumer_stats": {"clients": s.slow_consumers, "routes": 0, "gateways": 0, "leafs": 0},
            "stale_connection_stats": {"clients": s.stale_connections, "routes": 0, "gateways": 0, "leafs": 0},
            # natsd's own: whether the opt-in compiled build of the hot modules is in use (natsd._compiled)
            "natsd_compiled": {
                "active": _compiled.STATUS["active"],
                "modules": list(_compiled.STATUS["modules"]),
                "reason": _compiled.STATUS["reason"],
            },
        }
        for k in ("auth_required", "tls_required", "tls_verify"):
            if d[k] is None:
                del d[k]
        return d

    def _varz_jetstream(self) -> dict:
        s = self.server
        if s.jetstream is None:
            return {}
        out: dict = {}
        eng = s.jetstream
        try:
            out["config"] = eng.config_json()
        except Exception:  # pragma: no cover - engine bug must not break /varz
            logger.exception("jetstream config for /varz failed")
        out["limits"] = {"default_max_consumers": eng.default_max_consumers}
        try:
            stats = eng.jsz({})
            out["stats"] = {
                k: stats[k]
                for k in ("memory", "storage", "reserved_memory", "reserved_storage", "accounts", "ha_assets", "api")
                if k in stats
            }
        except Exception:  # pragma: no cover
            logger.exception("jetstream stats for /varz failed")
        return out

    def connz(self, q: dict) -> dict:
        s = self.server
        now = s.clock.time_ns()
        subs = q.get("subs", "").lower()
        want_subs = subs in ("1", "true")
        want_detail = subs == "detail"
        want_auth = q.get("auth", "").lower() in ("1", "true")
        offset = int(q.get("offset") or 0)
        limit = int(q.get("limit") or 1024)
        if offset < 0 or limit < 0:
            raise ValueError("offset and limit must not be negative")
        sort = q.get("sort") or "cid"
        conns = list(s.clients.values())
        if s.mqtt is not None:  # MQTT clients are listed with the others, as nats-server does
            conns += list(s.mqtt.conns.values())
        if "cid" in q:
            cid = int(q["cid"])
            conns = [c for c in conns if c.cid == cid]
        if q.get("acc"):
            conns = [c for c in conns if c.account is not None and c.account.name == q["acc"]]
        if q.get("filter_subject"):  # connections whose subscriptions would receive it (the reference's rule)
            if not q.get("acc"):
                raise ValueError("filter by subject only valid with account filtering")

            fs = q["filter_subject"]
            conns = [c for c in conns if any(subjects_collide(sub.subject, fs) for sub in c.subs.values())]
        keys: dict[str, Callable] = {
            "cid": lambda c: c.cid,
            "start": lambda c: c.start_ns,
            "subs": lambda c: -len(c.subs),
            "pending": lambda c: -(len(c.out) + _buffered(c)),
            "msgs_to": lambda c: -c.out_msgs,
            "msgs_from": lambda c: -c.in_msgs,
            "bytes_to": lambda c: -c.out_bytes,
            "bytes_from": lambda c: -c.in_bytes,
            "last": lambda c: -c.last_activity_ns,
            "idle": lambda c: c.last_activity_ns,
            "uptime": lambda c: c.start_ns,
        }
        key = keys.get(sort)
        if key is None:
            raise ValueError(f'invalid sorting option "{sort}"')
        conns.sort(key=key)
        total = len(conns)
        page = conns[offset : offset + limit]
        out = []
        for c in page:
            d = {
                "cid": c.cid,
                "kind": "Client",
                "type": "mqtt" if getattr(c, "mqtt_client", None) is not None else "nats",
                "ip": c.ip,
                "port": c.port,
                "start": rfc3339(c.start_ns),
                "last_activity": rfc3339(c.last_activity_ns),
                "uptime": uptime(now - c.start_ns),
                "idle": uptime(now - c.last_activity_ns),
                "pending_bytes": len(c.out) + _buffered(c),
                "in_msgs": c.in_msgs,
                "out_msgs": c.out_msgs,
                "in_bytes": c.in_bytes,
                "out_bytes": c.out_bytes,
                "subscriptions": len(c.subs),
            }
            if c.name:
                d["name"] = c.name
            if c.lang:
                d["lang"] = c.lang
            if c.version:
                d["version"] = c.version
            mqtt_client = getattr(c, "mqtt_client", None)
            if mqtt_client:
                d["mqtt_client"] = mqtt_client
            d.update(connz_fields(c.transport))  # websocket type, TLS version and cipher
            if want_auth:
                if c.user:
                    d["authorized_user"] = c.user
                if c.account is not None:
                    d["account"] = c.account.name
            if want_subs and c.subs:
                d["subscriptions_list"] = [sub.subject for sub in c.subs.values()]
            if want_detail and c.subs:
                d["subscriptions_list_detail"] = [_sub_detail(sub, with_account=False) for sub in c.subs.values()]
            out.append(d)
        return {
            "server_id": s.server_id,
            "now": rfc3339(now),
            "num_connections": len(out),
            "total": total,
            "offset": offset,
            "limit": limit,
            "connections": out,
        }

    def _merged_stats(self) -> dict:
        s = self.server
        agg: dict = {
            "num_subscriptions": 0,
            "num_cache": 0,
            "num_inserts": 0,
            "num_removes": 0,
            "num_matches": 0,
            "cache_hit_rate": 0.0,
            "max_fanout": 0,
            "avg_fanout": 0.0,
        }
        hits = 0.0
        fan_tot = 0.0
        fan_n = 0
        for acc in s.accounts.values():
            st = acc.sublist.stats()
            for k in ("num_subscriptions", "num_cache", "num_inserts", "num_removes", "num_matches"):
                agg[k] += st[k]
            hits += st["cache_hit_rate"] * st["num_matches"]
            agg["max_fanout"] = max(agg["max_fanout"], st["max_fanout"])
            fan_tot += st["avg_fanout"] * st["num_cache"]
            fan_n += st["num_cache"]
        if agg["num_matches"]:
            agg["cache_hit_rate"] = hits / agg["num_matches"]
        if fan_n:
            agg["avg_fanout"] = fan_tot / fan_n
        return agg

    def subsz(self, q: dict) -> dict:
        s = self.server
        d = {"server_id": s.server_id, "now": self._now(), **self._merged_stats()}
        offset = int(q.get("offset") or 0)
        limit = int(q.get("limit") or 1024)
        want = q.get("subs", "").lower() in ("1", "true", "detail")
        test = q.get("test") or ""
        if want:
            items = []
            for acc in s.accounts.values():
                for _subject, _queue, sub in acc.sublist.all():
                    if test:
                        if not subject_matches(sub.subject, test):
                            continue
                    items.append(sub)
            d["total"] = len(items)
            d["offset"] = offset
            d["limit"] = limit
            d["subscriptions_list"] = [_sub_detail(sub, with_account=True) for sub in items[offset : offset + limit]]
        else:
            d["total"] = 0
            d["offset"] = offset
            d["limit"] = limit
        return d

    def healthz(self, q: dict) -> dict | tuple[int, dict]:
        s = self.server
        if not s.running:
            return 503, {"status": "unavailable", "status_code": 503, "error": "server is not running"}
        if (
            s.options.jetstream.enabled
            and q.get("js-enabled-only", "").lower() in ("1", "true")
            and s.jetstream is None
        ):
            return 503, {"status": "unavailable", "status_code": 503, "error": "JetStream not enabled"}
        return {"status": "ok"}

    def accountz(self, q: dict) -> dict:
        s = self.server
        d: dict = {"server_id": s.server_id, "now": self._now(), "system_account": s.options.system_account or ""}
        name = q.get("acc")
        if not name:
            d["accounts"] = sorted(s.accounts)
            return d
        acc = s.accounts.get(name)
        if acc is None:
            raise ValueError(f'Account "{name}" not found')  # the reference answers an error too
        st = acc.sublist.stats()
        d["account_detail"] = {
            "account_name": acc.name,
            "update_time": rfc3339(s.start_time_ns),
            "expired": False,
            "complete": True,
            "jetstream_enabled": acc.jetstream is not None,
            "leafnode_connections": 0,
            "client_connections": sum(1 for c in s.clients.values() if c.account is acc),
            "subscriptions": acc.sublist.count(),
            "name_tag": acc.name,
            "sublist_stats": st,
        }
        return d

    def leafz(self, q: dict) -> dict:
        """The reference's /leafz: ``leafnodes`` (count) and ``leafs`` (one object per link;
        ``?subs=1`` adds each link's ``subscriptions_list``, ``?acc=`` filters by account)."""
        s = self.server
        d: dict[str, Any] = {"server_id": s.server_id, "now": self._now()}
        d.update(s.leafnodes.leafz(q) if s.leafnodes is not None else {"leafnodes": 0, "leafs": []})
        return d

    def jsz(self, q: dict) -> dict:
        s = self.server
        if s.jetstream is not None:
            d = s.jetstream.jsz(q)
            d.setdefault("server_id", s.server_id)
            d.setdefault("now", self._now())
            return d
        return {
            "memory": 0,
            "storage": 0,
            "reserved_memory": 0,
            "reserved_storage": 0,
            "accounts": 0,
            "ha_assets": 0,
            "api": {"level": 0, "total": 0, "errors": 0},
            "server_id": s.server_id,
            "now": self._now(),
            "disabled": True,
            "config": {"max_memory": 0, "max_storage": 0},
            "streams": 0,
            "consumers": 0,
            "messages": 0,
            "bytes": 0,
            "total": 0,
        }


def _buffered(c: ClientConnection) -> int:
    t = c.transport
    try:
        return t.get_write_buffer_size() if t is not None and not c.closed else 0
    except Exception:  # pragma: no cover - transport gone
        return 0


def _sub_detail(sub: Subscription, with_account: bool) -> dict:
    d: dict = {}
    if with_account:
        d["account"] = sub.account.name
        d["account_tag"] = sub.account.name
    d["subject"] = sub.subject
    if sub.queue:
        d["qgroup"] = sub.queue
    d["sid"] = sub.sid.decode("utf-8", "replace") if sub.client is not None else ""
    d["msgs"] = sub.delivered
    if sub.max:
        d["max"] = sub.max
    d["cid"] = sub.client.cid if sub.client is not None else 0
    return d


def _varz_totals(im: int, ib: int, om: int, ob: int) -> dict[str, int]:
    """The message and byte totals of /varz: every client is a client (no routes or gateways)."""
    return {
        "in_msgs": im,
        "in_bytes": ib,
        "in_client_msgs": im,
        "in_client_bytes": ib,
        "out_msgs": om,
        "out_bytes": ob,
        "out_client_msgs": om,
        "out_client_bytes": ob,
    }
