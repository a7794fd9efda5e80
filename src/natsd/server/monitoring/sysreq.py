"""The system account's server requests: ``$SYS.REQ.SERVER.PING[.<KIND>]`` and ``$SYS.REQ.SERVER.<id>.<KIND>``.

What ``nats server ping``, ``nats server report jetstream|connections`` and ``natsctl server ...`` ask. With a
system account (``system_account`` or the operator's), every server answers requests published in that account:

* ``$SYS.REQ.SERVER.PING``, ``$SYS.REQ.SERVER.PING.STATSZ`` and ``$SYS.REQ.SERVER.<id>.STATSZ``: ``{"server":
  {...}, "statsz": {...}}`` (the server's counters; ``active_servers`` tells a pinging client how many answers to
  expect). Note the spelling: nats-server answers no ``STATZ`` and neither does natsd.
* ``$SYS.REQ.SERVER.PING.<KIND>`` and ``$SYS.REQ.SERVER.<id>.<KIND>`` for ``VARZ``, ``CONNZ``, ``SUBSZ``, ``JSZ``,
  ``HEALTHZ``, ``ACCOUNTZ``, ``LEAFZ`` (also as ``$SYS.REQ.ACCOUNT.<account>.LEAFZ``): ``{"server": {...}, "data": <the
  monitoring endpoint's document>}``, the request body being the endpoint's options as JSON (``{"account": "A",
  "streams": true}``, ``{"subscriptions": true, "limit": 1024}``, ...); ``ROUTEZ`` and ``GATEWAYZ`` answer the
  empty documents of a server without routes or gateways. Not answered: ``PROFILEZ``, ``EXPVARZ``,
  ``IPQUEUESZ``, ``RAFTZ``.
* ``IDZ``: ``{"name", "host", "id"}`` alone.

A body that is not JSON gets ``{"server": {...}, "error": {"code": 400, "description": <Go's text>}}``. The event
filters of a body (``server_name``, ``host``, ``cluster``, ``domain``, substrings unless ``exact_match``) make a
server they exclude stay silent, as there. Answers are built on the next loop turn (``call_soon``), never inside
the publisher's routing: a ``JSZ`` with every consumer is the size of the server.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Callable

from natsd import __version__
from natsd.gotime import format_rfc3339 as rfc3339
from natsd.jetstream.gojson import GoError, GoStruct, decode
from natsd.server.ports import ServerPorts

if TYPE_CHECKING:  # pragma: no cover
    from natsd.server.monitoring.endpoints import MonitoredServer, MonitorServer

logger = logging.getLogger(__name__)

__all__ = ["SystemRequests"]

#: Request kinds answered with ``{"server", "data"}``, and how a JSON body maps onto the endpoint's query.
_BOOL = "bool"
_KINDS: dict[str, dict[str, tuple[str, str]]] = {
    # body field -> (query key, kind)
    "VARZ": {},
    "CONNZ": {
        "sort": ("sort", "str"),
        "auth": ("auth", _BOOL),
        "subscriptions": ("subs", _BOOL),
        "subscriptions_detail": ("subs", "detail"),
        "offset": ("offset", "int"),
        "limit": ("limit", "int"),
        "cid": ("cid", "int"),
        "acc": ("acc", "str"),
        "account": ("acc", "str"),
        "user": ("user", "str"),
        "state": ("state", "str"),
        "filter_subject": ("filter_subject", "str"),
    },
    "SUBSZ": {
        "subscriptions": ("subs", _BOOL),
        "offset": ("offset", "int"),
        "limit": ("limit", "int"),
        "test": ("test", "str"),
        "account": ("acc", "str"),
    },
    "JSZ": {
        "account": ("acc", "str"),
        "accounts": ("accounts", _BOOL),
        "streams": ("streams", _BOOL),
        "consumer": ("consumers", _BOOL),
        "config": ("config", _BOOL),
        "offset": ("offset", "int"),
        "limit": ("limit", "int"),
    },
    "HEALTHZ": {"js-enabled-only": ("js-enabled-only", _BOOL), "js-enabled": ("js-enabled-only", _BOOL)},
    "ACCOUNTZ": {"account": ("acc", "str")},
    "LEAFZ": {"account": ("acc", "str"), "subscriptions": ("subs", _BOOL)},
    "ROUTEZ": {},
    "GATEWAYZ": {},
}


def _query(kind: str, body: dict) -> dict[str, str]:
    """The monitoring endpoint's query (strings, as parsed from a URL) for a request body."""
    q: dict[str, str] = {}
    for field, (key, typ) in _KINDS[kind].items():
        v = body.get(field)
        if v in (None, "", False, 0):
            continue
        if key == "state":  # Go's ConnState: 0 open, 1 closed, 2 all
            q[key] = {1: "closed", 2: "all"}.get(v, "open") if isinstance(v, int) else str(v)
        elif typ == _BOOL:
            q[key] = "true"
        elif typ == "detail":
            q[key] = "detail"
        else:
            q[key] = str(v)
    return q


def filter_match(body: dict, server: "MonitoredServer", domain: str = "") -> bool:
    """nats-server's event filters: every one given must match (substring, or exact with ``exact_match``)."""
    exact = bool(body.get("exact_match"))
    for key, have in (
        ("server_name", server.server_name),
        ("host", server.options.host),
        ("cluster", ""),
        ("domain", domain),
    ):
        want = body.get(key)
        if want and not (want == have if exact else str(want) in have):
            return False
    tags = body.get("tags")
    if tags:  # every tag asked for must be one of the server's (server_tags)
        mine = server.options.server_tags
        if not all(isinstance(t, str) and t.strip().lower() in mine for t in tags):
            return False
    return True


class SystemRequests:
    """Subscribes the ``$SYS.REQ.SERVER`` subjects in the system account and answers them."""

    def __init__(self, server: "MonitoredServer", monitor: "MonitorServer", account: str) -> None:
        self.server = server
        self.monitor = monitor
        self.ports = ServerPorts(server.get_account(account))
        self.seq = 0
        self._subs: list[Any] = []

    def start(self) -> None:
        s = self.server
        sid = s.server_id
        answer = self._on_request
        self._subs.append(self.ports.subscribe("$SYS.REQ.SERVER.PING", answer))
        for kind in (*_KINDS, "IDZ", "STATSZ"):
            self._subs.append(self.ports.subscribe(f"$SYS.REQ.SERVER.PING.{kind}", answer))
            self._subs.append(self.ports.subscribe(f"$SYS.REQ.SERVER.{sid}.{kind}", answer))
        # an account's leaf links (what natsctl/nats `server report leafnodes --account` ask)
        self._subs.append(self.ports.subscribe("$SYS.REQ.ACCOUNT.*.LEAFZ", answer))

    def stop(self) -> None:
        for sub in self._subs:
            sub.unsubscribe()
        self._subs = []

    # -- answering ------------------------------------------------------------------------------------

    def _on_request(self, subject: str, reply: str, hdr: bytes | None, payload: bytes) -> None:
        loop = self.server.loop
        if not reply or loop is None:
            return
        loop.call_soon(self._answer, subject, reply, bytes(payload))

    def _answer(self, subject: str, reply: str, payload: bytes) -> None:
        kind = "STATSZ" if subject == "$SYS.REQ.SERVER.PING" else subject.rsplit(".", 1)[1]
        try:
            doc = self._document(kind, payload, subject)
        except Exception as e:  # a monitoring bug must not take the server down
            logger.exception("%s request failed", subject)
            doc = {"server": self._server_info(), "error": {"code": 500, "description": str(e)}}
        if doc is not None:
            self.ports.publish(reply, "", None, json.dumps(doc, separators=(",", ":")).encode())

    def _document(self, kind: str, payload: bytes, subject: str = "") -> dict | None:
        s = self.server
        if kind == "IDZ":
            return {"name": s.server_name, "host": s.options.host, "id": s.server_id}
        body: dict = {}
        if payload.strip():
            try:  # json.Unmarshal's texts (no offsets), unknown fields ignored
                body = decode(payload, GoStruct("EventFilterOptions", {}, open=True), strict=False)
            except GoError as e:
                return {"server": self._server_info(), "error": {"code": 400, "description": str(e)}}
        if not filter_match(body, s, self._domain()):
            return None
        if kind == "STATSZ":
            return {"server": self._server_info(), "statsz": self._statsz()}
        now = rfc3339(s.clock.time_ns())
        if kind == "ROUTEZ":
            return {
                "server": self._server_info(),
                "data": {
                    "server_id": s.server_id,
                    "server_name": s.server_name,
                    "now": now,
                    "num_routes": 0,
                    "routes": [],
                },
            }
        if kind == "GATEWAYZ":
            return {
                "server": self._server_info(),
                "data": {"server_id": s.server_id, "now": now, "outbound_gateways": {}, "inbound_gateways": {}},
            }
        endpoint: dict[str, Callable[[dict], Any]] = {
            "VARZ": self.monitor.varz,
            "CONNZ": self.monitor.connz,
            "SUBSZ": self.monitor.subsz,
            "JSZ": self.monitor.jsz,
            "HEALTHZ": self.monitor.healthz,
            "ACCOUNTZ": self.monitor.accountz,
            "LEAFZ": self.monitor.leafz,
        }
        q = _query(kind, body)
        if subject.startswith("$SYS.REQ.ACCOUNT."):
            q["acc"] = subject.split(".")[3]
        try:
            data = endpoint[kind](q)
        except ValueError as e:
            return {"server": self._server_info(), "error": {"code": 400, "description": str(e)}}
        if isinstance(data, tuple):  # (status, document): /healthz unavailable
            code, data = data[0], data[1]
            data.setdefault("status_code", code)
        elif kind == "HEALTHZ":
            data = {**data, "status_code": 200}
        return {"server": self._server_info(), "data": data}

    def _domain(self) -> str:
        return self.server.options.jetstream.domain or ""

    def _server_info(self) -> dict:
        """The ``server`` object every answer starts with (nats-server's ServerInfo)."""
        s = self.server
        self.seq += 1
        js = s.jetstream is not None
        d: dict[str, Any] = {
            "name": s.server_name,
            "host": s.options.host,
            "id": s.server_id,
            "ver": __version__,
            "jetstream": js,
            "flags": 1 if js else 0,
            "seq": self.seq,
            "time": rfc3339(s.clock.time_ns()),
        }
        if self._domain():
            d["domain"] = self._domain()
        if s.options.server_tags:
            d["tags"] = list(s.options.server_tags)
        if s.options.server_metadata:
            d["metadata"] = dict(s.options.server_metadata)
        return d

    def _statsz(self) -> dict:
        """nats-server's ServerStats, from the same numbers ``/varz`` reports."""
        v = self.monitor.varz({})
        d: dict[str, Any] = {
            "start": v["start"],
            "mem": v["mem"],
            "cores": v["cores"],
            "cpu": v["cpu"],
            "connections": v["connections"],
            "total_connections": v["total_connections"],
            "active_accounts": len({id(c.account) for c in self.server.clients.values() if c.account is not None}),
            "subscriptions": v["subscriptions"],
            "sent": {"msgs": v["out_msgs"], "bytes": v["out_bytes"]},
            "sent_to_clients": {"msgs": v["out_client_msgs"], "bytes": v["out_client_bytes"]},
            "received": {"msgs": v["in_msgs"], "bytes": v["in_bytes"]},
            "received_from_clients": {"msgs": v["in_client_msgs"], "bytes": v["in_client_bytes"]},
            "slow_consumers": v["slow_consumers"],
            "active_servers": 1,
        }
        if v.get("jetstream"):  # as /varz has it, without the store directory (nats-server leaves it out here)
            js = dict(v["jetstream"])
            if isinstance(js.get("config"), dict):
                js["config"] = {k: x for k, x in js["config"].items() if k != "store_dir"}
            d["jetstream"] = js
        d["gomaxprocs"] = v["gomaxprocs"]
        return d
