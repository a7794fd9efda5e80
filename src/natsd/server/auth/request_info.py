"""``Nats-Request-Info``: who sent a request that crosses a service import, as nats-server puts it
on the request (its ``ClientInfo`` JSON, client.go processServiceImport): always the requester's
account and RTT; with the import's ``share`` (or into the system account) its details too: start,
host, cid, user, name, lang, version, server and cluster, the user JWT with its issuer, name and
tags, the kind of connection. A request that already crossed an import keeps the first one's
header, naming the account it crossed from (``svc``), as nats-server chains them.

The JSON keys are in nats-server's order (its struct's), values absent when empty (omitempty).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from natsd.config.jwt import decode
from natsd.gotime import format_rfc3339
from natsd.nats_headers import REQUEST_INFO
from natsd.protocol.headers import get_header_bytes
from natsd.server.msgtrace import set_header

if TYPE_CHECKING:  # pragma: no cover
    from natsd.server.context import ServerContext

__all__ = ["request_info", "with_request_info"]

# nats-server's ClientInfo field order
_ORDER = (
    "start",
    "host",
    "id",
    "acc",
    "svc",
    "user",
    "name",
    "lang",
    "ver",
    "rtt",
    "server",
    "cluster",
    "alts",
    "stop",
    "jwt",
    "issuer_key",
    "name_tag",
    "tags",
    "kind",
    "client_type",
    "client_id",
    "nonce",
    "reply",
)


def _ordered(d: dict[str, Any]) -> bytes:
    out = {k: d[k] for k in _ORDER if d.get(k) not in (None, "", 0, [])}
    return json.dumps(out, separators=(",", ":")).encode()


def _server_fields(server: ServerContext, src: Any, d: dict[str, Any]) -> None:
    """nats-server's addServerAndClusterInfo: the server (for a leafnode link, the one across)."""
    d["server"] = getattr(src, "remote_name", "") if getattr(src, "spoke", None) is not None else server.server_name
    d["cluster"] = getattr(server.options, "cluster_name", "") or ""


def _client_fields(src: Any, d: dict[str, Any]) -> None:
    """The requester's details (nats-server's getClientInfo with ``detailed``)."""
    leaf = getattr(src, "spoke", None) is not None
    d["start"] = format_rfc3339(getattr(src, "start_ns", 0)) if getattr(src, "start_ns", 0) else None
    d["host"] = getattr(src, "ip", "")
    d["id"] = getattr(src, "cid", 0)
    d["name"] = getattr(src, "name", "")
    d["lang"] = getattr(src, "lang", "")
    d["ver"] = getattr(src, "version", "")
    d["user"] = getattr(src, "user", "")
    opts = getattr(src, "connect_opts", None) or {}
    token = opts.get("jwt") if isinstance(opts, dict) else None
    if isinstance(token, str) and token:
        try:
            claims = decode(token)
        except ValueError:
            claims = {}
        d["jwt"] = token
        d["user"] = claims.get("sub") or d["user"]
        d["issuer_key"] = claims.get("iss", "")
        d["name_tag"] = claims.get("name", "")
        tags = (claims.get("nats") or {}).get("tags")
        d["tags"] = list(tags) if isinstance(tags, list) else None
    d["kind"] = "Leafnode" if leaf else "Client"
    d["client_type"] = "" if leaf else ("mqtt" if getattr(src, "mqtt_client", None) is not None else "nats")


def request_info(server: ServerContext, src: Any, share: bool, sys_import: bool) -> bytes:
    """The header's JSON for a request from ``src`` (a client or leafnode connection)."""
    d: dict[str, Any] = {}
    if share or sys_import:
        _server_fields(server, src, d)
    acc = getattr(src, "account", None)
    d["acc"] = acc.name if acc is not None else ""
    d["rtt"] = getattr(src, "rtt_ns", 0)
    if share:
        _client_fields(src, d)
    return _ordered(d)


def with_request_info(
    server: ServerContext, hdr: bytes | None, src: Any, share: bool, sys_import: bool, via: str
) -> bytes | None:
    """``hdr`` with ``Nats-Request-Info`` set (Go's setHeader: replaced where it stands, else
    added last; a new header block when there is none). ``src`` is None for a request forwarded
    by an earlier import (``via``: the account it is in): the first import's header goes on with
    ``svc`` naming that account, as nats-server's chained service imports (an internal request
    that crossed none is left as it is)."""
    if src is None:
        old = get_header_bytes(hdr, REQUEST_INFO) if hdr else None
        try:
            d = json.loads(old) if old else None
        except ValueError:
            d = None
        if not isinstance(d, dict):
            return hdr
        d["svc"] = via
        value = _ordered(d)
    else:
        value = request_info(server, src, share, sys_import)
    return set_header(hdr or b"NATS/1.0\r\n\r\n", REQUEST_INFO, value)
