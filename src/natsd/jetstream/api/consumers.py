"""``$JS.API.CONSUMER.*`` handlers: create (four subject forms, create/update actions), info,
delete, names, list, pause, unpin. (MSG.NEXT and RESET are answered by each consumer's own
subscription, so a missing consumer gives no responders, as nats-server.)

Each handler parses the request, calls :mod:`natsd.jetstream.consumer_registry` (or the
consumer) and renders the reply. The request checks run in the reference's order
(``jsConsumerCreateRequest``) before the registry's (``addConsumerWithAction``), so the first
error a bad request hits is the reference's.
"""

from __future__ import annotations

import json
from typing import Any

from natsd.gotime import GO_ZERO_NS, GO_ZERO_TIME, format_rfc3339, parse_rfc3339
from natsd.jetstream import consumer_registry, gojson
from natsd.jetstream.config import requests as R
from natsd.jetstream.api.router import ApiRequest, WithHeader
from natsd.jetstream.consumer import Consumer
from natsd.jetstream.consumer import priority
from natsd.jetstream.config.consumer_config import GROUP_NAME_RE, ConsumerConfig
from natsd.jetstream.errors import ApiErrors
from natsd.jetstream.identity import identity_header, requested_identity, stream_identity
from natsd.jetstream.wire import resp

__all__ = ["create", "info", "delete", "names", "list_", "pause", "unpin", "NAMES_LIMIT", "LIST_LIMIT"]

NAMES_LIMIT = 1024  # JSApiNamesLimit
LIST_LIMIT = 256  # JSApiListLimit


# ---------------------------------------------------------------------------------------------
# CREATE


def create(req: ApiRequest) -> dict:
    body = req.json(R.CREATE_CONSUMER_REQUEST)
    stream_name = body.get("stream_name", "")
    action = body.get("action", "")
    if action not in ("", "create", "update"):
        raise ApiErrors.INVALID_JSON(err=f"unknown consumer action: {_json(action)}")
    pedantic = body.get("pedantic", False)
    cfg = ConsumerConfig.from_json(body.get("config"))

    t = req.tokens
    n = len(t)
    filtered = ""
    if n < 5:
        raise ApiErrors.BAD_REQUEST()
    legacy_durable = legacy_ephemeral = False
    if n == 5:
        legacy_ephemeral = True
        sname, cname = t[4], cfg.name
    elif t[3] == "DURABLE":
        legacy_durable = True
        if n != 7:
            raise ApiErrors.CONSUMER_DURABLE_NAME_NOT_IN_SUBJECT()
        sname, cname = t[5], t[6]
    else:
        sname, cname = t[4], t[5]
        if n > 6:
            filtered = ".".join(t[6:])

    if sname != stream_name:
        raise ApiErrors.STREAM_MISMATCH()
    if cname and ("\\" in cname or "/" in cname):
        raise ApiErrors.CONSUMER_NAME_CONTAINS_PATH_SEPARATORS()
    if legacy_durable:
        if not cfg.durable_name:
            raise ApiErrors.CONSUMER_DURABLE_NAME_NOT_SET()
        if cname != cfg.durable_name:
            raise ApiErrors.CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT()
        cfg.name = cname
    elif not legacy_ephemeral:
        if cfg.durable_name and cname != cfg.durable_name:
            raise ApiErrors.CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT()
        cfg.name = cname
    elif cfg.durable_name:
        raise ApiErrors.CONSUMER_EPHEMERAL_WITH_DURABLE_NAME()
    if filtered and cfg.filter_subjects:
        raise ApiErrors.CONSUMER_MULTIPLE_FILTERS_NOT_ALLOWED()
    if filtered and cfg.filter_subject != filtered:
        raise ApiErrors.CONSUMER_CREATE_FILTER_SUBJECT_MISMATCH()
    if cfg.num_replicas > 1:
        raise ApiErrors.STREAM_REPLICAS_NOT_SUPPORTED()

    stream = req.account.lookup_stream(stream_name)
    ident = ""
    if cfg.direct or cfg.sourcing:
        # API level 5: a sourcing stream detects that this stream was recreated (identity.py).
        ident = stream_identity(stream)
        asked = requested_identity(req.hdr)
        if asked and asked != ident:
            raise ApiErrors.CONSUMER_STREAM_IDENTITY_MISMATCH(msg=ident)
    consumer_registry.upgrade_sourcing(stream, cfg)
    o = consumer_registry.create(stream, cfg, action, pedantic)
    body = resp("consumer_create_response", o.info())
    return WithHeader(body, identity_header(ident)) if ident else body


# ---------------------------------------------------------------------------------------------
# INFO / DELETE / NAMES / LIST / PAUSE


def _lookup(req: ApiRequest) -> Consumer:
    return consumer_registry.lookup(req.account.lookup_stream(req.tokens[4]), req.tokens[5])


def info(req: ApiRequest) -> dict:
    if not req.is_empty:
        raise ApiErrors.NOT_EMPTY_REQUEST()
    return resp("consumer_info_response", _lookup(req).info())


def delete(req: ApiRequest) -> dict:
    if not req.is_empty:
        raise ApiErrors.NOT_EMPTY_REQUEST()
    consumer_registry.delete(req.account.lookup_stream(req.tokens[4]), req.tokens[5])
    return resp("consumer_delete_response", {"success": True})


def _offset(req: ApiRequest) -> int:
    if req.payload.lstrip()[:1] not in (b"{", b"["):
        return 0
    return max(req.json(R.CONSUMERS_REQUEST).get("offset", 0), 0)


def names(req: ApiRequest) -> dict:
    off = _offset(req)
    stream = req.account.lookup_stream(req.tokens[4])
    names = stream.consumer_names()  # (recovers none)
    total = len(names)
    off = min(off, total)
    page = names[off : off + NAMES_LIMIT]
    return resp("consumer_names_response", {"total": total, "offset": off, "limit": NAMES_LIMIT, "consumers": page})


def list_(req: ApiRequest) -> dict:
    off = _offset(req)
    stream = req.account.lookup_stream(req.tokens[4])
    names = stream.consumer_names()
    total = len(names)
    off = min(off, total)
    # (only the page's consumers are recovered, if the woken stream had not yet; one that no
    # longer loads is left out, as a start leaves it out)
    page = [c for c in map(stream.consumer, names[off : off + LIST_LIMIT]) if c is not None]
    return resp(
        "consumer_list_response",
        {"total": total, "offset": off, "limit": LIST_LIMIT, "consumers": [c.list_info() for c in page]},
    )


def pause(req: ApiRequest) -> dict:
    body = req.json(R.CONSUMER_PAUSE_REQUEST) if req.payload.strip()[:1] in (b"{", b"[") else {}
    until = body.get("pause_until")
    until_ns: int | None = None
    if until is not None:
        if not isinstance(until, str):
            raise ApiErrors.INVALID_JSON(
                err="json: cannot unmarshal into Go struct field JSApiConsumerPauseRequest.pause_until of type "
                "time.Time"
            )
        try:
            until_ns = parse_rfc3339(until)
        except ValueError as e:
            raise ApiErrors.INVALID_JSON(err=str(e)) from None
        if until_ns == GO_ZERO_NS:
            until_ns = None
    o = _lookup(req)
    o.set_pause(until_ns)
    now = o.clock.time_ns()
    out: dict[str, Any] = {
        "paused": until_ns is not None and now < until_ns,
        "pause_until": format_rfc3339(until_ns) if until_ns is not None else GO_ZERO_TIME,
    }
    if until_ns is not None and now < until_ns:  # (paused)
        out["pause_remaining"] = until_ns - now
    return resp("consumer_pause_response", out)


def unpin(req: ApiRequest) -> dict:
    """``$JS.API.CONSUMER.UNPIN.<stream>.<consumer>`` ``{"group": ...}``: checks in the
    reference's order (body, group given, group name, stream, consumer, the consumer's group),
    then :func:`natsd.jetstream.consumer.priority.unpin`."""
    try:  # a plain json.Unmarshal in the reference (unknown fields ignored, its own texts)
        body = gojson.decode(req.payload, R.CONSUMER_UNPIN_REQUEST, strict=False)
    except gojson.GoError as e:
        raise ApiErrors.INVALID_JSON(err=str(e)) from None
    group = body.get("group", "")
    if not group:
        raise ApiErrors.INVALID_JSON(err="consumer group not specified")
    if not GROUP_NAME_RE.match(group):
        raise ApiErrors.CONSUMER_INVALID_GROUP_NAME()
    priority.unpin(_lookup(req), group)
    return resp("consumer_unpin_response")


def _json(v: Any) -> str:
    return json.dumps(v)
