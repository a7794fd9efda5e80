"""``$JS.API.CONSUMER.*`` handlers: create (four subject forms, create/update actions), info,
delete, names, list, pause. (MSG.NEXT and RESET are answered by each consumer's own
subscription, so a missing consumer gives no responders, as nats-server.)

The checks run in the reference's order (``jsConsumerCreateRequest`` then
``addConsumerWithAssignment``) so the first error a bad request hits is the reference's.
"""

from __future__ import annotations

from typing import Any

from natsd.jetstream import requests as R
from natsd.jetstream.api.errors import ApiErrors
from natsd.jetstream.api.router import ApiRequest, ApiRouter, resp
from natsd.jetstream.consumer import Consumer, create_consumer_name
from natsd.jetstream.consumer_config import (
    MAX_NAME_LEN, ConsumerConfig, check_update, format_time, is_valid_asset_name, parse_time,
)
from natsd.store.base import ConsumerState

__all__ = ["register", "create_consumer", "recover_consumer", "NAMES_LIMIT", "LIST_LIMIT"]

NAMES_LIMIT = 1024  # JSApiNamesLimit
LIST_LIMIT = 256    # JSApiListLimit
_GO_ZERO_NS = parse_time("0001-01-01T00:00:00Z")


def register(router: ApiRouter) -> None:
    """Register the consumer handlers on an account's router."""
    router.register("$JS.API.CONSUMER.CREATE.*", _create)
    router.register("$JS.API.CONSUMER.CREATE.*.>", _create)
    router.register("$JS.API.CONSUMER.DURABLE.CREATE.*.*", _create)
    router.register("$JS.API.CONSUMER.INFO.*.*", _info)
    router.register("$JS.API.CONSUMER.DELETE.*.*", _delete)
    router.register("$JS.API.CONSUMER.NAMES.*", _names)
    router.register("$JS.API.CONSUMER.LIST.*", _list)
    router.register("$JS.API.CONSUMER.PAUSE.*.*", _pause)


# ---------------------------------------------------------------------------------------------
# CREATE

def _create(req: ApiRequest) -> dict:
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
    o = create_consumer(stream, cfg, action, pedantic)
    return resp("consumer_create_response", o.info())


def _acc_max_ack_pending(account: Any) -> int:
    lim = getattr(account, "limits", None)
    return getattr(lim, "max_ack_pending", -1) if lim is not None else -1


def create_consumer(stream: Any, cfg: ConsumerConfig, action: str = "", pedantic: bool = False) -> Consumer:
    """Create (or update, or return the identical existing) consumer of ``stream``
    (``addConsumerWithAction``). Raises ApiError as the reference."""
    existing_name = cfg.durable_name or cfg.name
    existing = stream.consumers.get(existing_name) if existing_name else None
    if existing is not None:
        cfg.pause_until = existing.cfg.pause_until
    cfg.set_default_metadata()
    acc_map = _acc_max_ack_pending(stream.account)
    cfg.set_defaults(getattr(stream.config, "consumer_limits", None), acc_map, pedantic)
    cfg.check(stream.config, acc_map)
    retention = stream.config.retention

    if existing is not None:
        if action == "create" and not cfg.same_as(existing.cfg):
            raise ApiErrors.CONSUMER_ALREADY_EXISTS()
        if retention == "workqueue":
            stream.check_workqueue_filters(cfg.filters(), existing.name)
        if cfg.same_as(existing.cfg):
            return existing
        has_int = bool(existing.cfg.deliver_subject and cfg.deliver_subject != existing.cfg.deliver_subject
                       and stream.account.ports.has_interest(existing.cfg.deliver_subject))
        check_update(existing.cfg, cfg, has_int)
        existing.update_config(cfg)
        return existing
    if action == "update":
        raise ApiErrors.CONSUMER_DOES_NOT_EXIST()

    if retention == "workqueue" and not cfg.direct and not cfg.sourcing:
        if cfg.ack_policy not in ("explicit", "flow_control"):
            raise ApiErrors.CONSUMER_WQ_REQUIRES_EXPLICIT_ACK()
        if cfg.deliver_policy != "all":
            raise ApiErrors.CONSUMER_WQ_CONSUMER_NOT_DELIVER_ALL()
        if stream.consumers:
            stream.check_workqueue_filters(cfg.filters(), None)

    if cfg.durable_name:
        if len(cfg.durable_name) > MAX_NAME_LEN:
            raise ApiErrors.CONSUMER_NAME_TOO_LONG(max=MAX_NAME_LEN)
        name = cfg.durable_name
    elif cfg.name:
        name = cfg.name
    else:
        name = create_consumer_name()
        while name in stream.consumers:
            name = create_consumer_name()
        # The generated name is the consumer's, not part of its config: the reference's replies
        # leave config.name out for a consumer created without one.
    if not is_valid_asset_name(name):
        raise ApiErrors.CONSUMER_BAD_DURABLE_NAME()

    created = stream.clock.time_ns()
    o = Consumer(stream, cfg, name, created)
    stream.add_consumer(o)  # max_consumers (10026)
    try:
        store = _open_store(stream, o)
        o.store = store
        o.select_start()
        o.start()
    except Exception:
        stream.consumers.pop(name, None)
        o.closed = True
        raise
    o._advisory("CREATED", "consumer_action", {"stream": stream.name, "consumer": name, "action": "create"})
    return o


def _open_store(stream: Any, o: Consumer) -> Any:
    """Durable, file-backed consumers persist their state through the stream's store;
    ephemerals and ``mem_storage`` consumers keep it in memory only."""
    if not o.cfg.durable_name or o.cfg.mem_storage:
        return None
    try:
        return stream.store.consumer_store(o.name, o.meta())
    except Exception as e:  # noqa: BLE001
        raise ApiErrors.CONSUMER_STORE_FAILED(err=str(e)) from None


def recover_consumer(stream: Any, name: str) -> Consumer | None:
    """Re-create consumer ``name`` from its persisted meta and state (server restart)."""
    cs = stream.store.consumer_store(name, None)
    meta = getattr(cs, "meta", None)
    if not meta or "config" not in meta:
        return None
    cfg = ConsumerConfig.from_json(meta["config"])
    created = parse_time(meta["created"]) if meta.get("created") else stream.clock.time_ns()
    state: ConsumerState = cs.state()
    # A durable that never delivered anything and starts "last per subject" picks its start
    # again; every other consumer resumes exactly where its persisted state says (creation
    # wrote delivered.stream_seq = start - 1, so "new" does not skip what arrived meanwhile).
    fresh = (state.delivered.stream_seq == 0 and state.delivered.consumer_seq == 0 and not state.pending
             and cfg.deliver_policy == "last_per_subject")
    damaged = bool(getattr(cs, "state_damaged", ""))
    o = Consumer(stream, cfg, name, created, store=cs, state=None if fresh or damaged else state)
    stream.consumers[name] = o
    if damaged:
        o.restart_after_damage()
    elif fresh:
        o.select_start()
    else:
        o.clamp_to_stream()
    o.start()
    return o


# ---------------------------------------------------------------------------------------------
# INFO / DELETE / NAMES / LIST / PAUSE

def _lookup(req: ApiRequest) -> Consumer:
    stream = req.account.lookup_stream(req.tokens[4])
    o = stream.consumers.get(req.tokens[5])
    if o is None:
        raise ApiErrors.CONSUMER_NOT_FOUND()
    return o


def _info(req: ApiRequest) -> dict:
    if not req.is_empty:
        raise ApiErrors.NOT_EMPTY_REQUEST()
    return resp("consumer_info_response", _lookup(req).info())


def _delete(req: ApiRequest) -> dict:
    if not req.is_empty:
        raise ApiErrors.NOT_EMPTY_REQUEST()
    o = _lookup(req)
    o.delete_from_stream()
    return resp("consumer_delete_response", {"success": True})


def _offset(req: ApiRequest) -> int:
    if not req.payload.lstrip()[:1] in (b"{", b"["):
        return 0
    return max(req.json(R.CONSUMERS_REQUEST).get("offset", 0), 0)


def _names(req: ApiRequest) -> dict:
    off = _offset(req)
    stream = req.account.lookup_stream(req.tokens[4])
    names = sorted(stream.consumers)
    total = len(names)
    off = min(off, total)
    page = names[off:off + NAMES_LIMIT]
    return resp("consumer_names_response", {"total": total, "offset": off, "limit": NAMES_LIMIT,
                                            "consumers": page})


def _list(req: ApiRequest) -> dict:
    off = _offset(req)
    stream = req.account.lookup_stream(req.tokens[4])
    cons = [stream.consumers[n] for n in sorted(stream.consumers)]
    total = len(cons)
    off = min(off, total)
    page = cons[off:off + LIST_LIMIT]
    return resp("consumer_list_response", {"total": total, "offset": off, "limit": LIST_LIMIT,
                                           "consumers": [c.list_info() for c in page]})


def _pause(req: ApiRequest) -> dict:
    body = req.json(R.CONSUMER_PAUSE_REQUEST) if req.payload.strip()[:1] in (b"{", b"[") else {}
    until = body.get("pause_until")
    until_ns: int | None = None
    if until is not None:
        if not isinstance(until, str):
            raise ApiErrors.INVALID_JSON(err="json: cannot unmarshal into Go struct field JSApiConsumerPauseRequest.pause_until of type time.Time")
        try:
            until_ns = parse_time(until)
        except ValueError as e:
            raise ApiErrors.INVALID_JSON(err=str(e)) from None
        if until_ns == _GO_ZERO_NS:
            until_ns = None
    o = _lookup(req)
    o.set_pause(until_ns)
    now = o.clock.time_ns()
    out: dict[str, Any] = {"paused": until_ns is not None and now < until_ns,
                           "pause_until": format_time(until_ns) if until_ns is not None else "0001-01-01T00:00:00Z"}
    if out["paused"]:
        out["pause_remaining"] = until_ns - now
    return resp("consumer_pause_response", out)


def _json(v: Any) -> str:
    import json
    return json.dumps(v)

