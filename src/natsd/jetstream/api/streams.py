"""``$JS.API.STREAM.*`` handlers: CREATE, UPDATE, INFO, DELETE, PURGE, NAMES, LIST, MSG.GET,
MSG.DELETE, and the cluster-only calls (answered with the reference's standalone errors).

Every handler takes an :class:`~natsd.jetstream.api.router.ApiRequest` and returns the response
dict (built with :func:`resp`) or raises :class:`ApiError`; the router adds the envelope.
Checks run in the reference's order so the same bad request gets the same error.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Callable

from natsd import nats_headers as NH
from natsd.jetstream.advisories import stream_action
from natsd.jetstream.config import requests as R
from natsd.jetstream.errors import ApiErrors
from natsd.jetstream.features.metadata import parse_stream
from natsd.jetstream.api.router import ApiRequest, Offload, SlowRequest, run_inline
from natsd.jetstream.config.models import StreamConfig, parse_rfc3339, rfc3339
from natsd.jetstream.config.stream_checks import (
    check_stream_config,
    StreamSubjects,
    check_subject_overlap,
    check_update,
    refuse_unsupported,
)
from natsd.jetstream.wire import resp
from natsd.subjects.tokens import subjects_collide

__all__ = ["JS_API_NAMES_LIMIT", "JS_API_LIST_LIMIT"]

JS_API_NAMES_LIMIT = 1024
JS_API_LIST_LIMIT = 256


def _is_json_object_or_array(payload: bytes) -> bool:
    s = payload.lstrip()
    return bool(s) and s[:1] in (b"{", b"[")


def _stream_name(req: ApiRequest) -> str:
    return req.tokens[4] if len(req.tokens) > 4 else ""


def _config_request(req: ApiRequest) -> tuple[StreamConfig, bool]:
    body = req.json(R.STREAM_CONFIG_REQUEST)
    cfg = StreamConfig.from_json(body)
    pedantic = body.get("pedantic") is True
    return cfg, pedantic


#: A request body above this size is a *slow request* (see :mod:`natsd.jetstream.api.router`):
#: decoding and validation run off the event loop and the subjects are subscribed across loop
#: turns. A 1 MB STREAM.CREATE holds ~78,000 subjects; doing all of it in one turn held every
#: other client for seconds.
SLOW_REQUEST_BYTES = 32 * 1024
#: Subscriptions made per loop turn by a slow STREAM.CREATE.
SUBSCRIBE_CHUNK = 2000


def _slow(req: ApiRequest, steps: SlowRequest) -> Any:
    return steps if len(req.payload) > SLOW_REQUEST_BYTES else run_inline(steps)


def _configs(acct: Any) -> dict[str, StreamConfig]:
    """The account's stream configs as they are now (what a validation off the loop reads; the
    account's other API requests wait meanwhile)."""
    return {n: s.config for n, s in acct.streams.items()}


def _live_config(acct: Any) -> Callable[[str], StreamConfig | None]:
    """A stream's config by name, read from the account when asked."""

    def get(name: str) -> StreamConfig | None:
        s = acct.streams.get(name)
        return s.config if s is not None else None

    return get


def _stream_subjects(acct: Any) -> StreamSubjects:
    """The account's :class:`StreamSubjects` (made at its first create)."""
    idx = getattr(acct, "stream_subjects", None)
    if idx is None:
        idx = acct.stream_subjects = StreamSubjects()
    return idx


def stream_create(req: ApiRequest) -> Any:
    return _slow(req, _create_steps(req))


def _create_steps(req: ApiRequest) -> SlowRequest:
    acct = req.account
    cfg, pedantic = yield Offload(lambda: _config_request(req))
    name = _stream_name(req)
    if name != cfg.name:
        raise ApiErrors.STREAM_MISMATCH()
    if "\\" in name or "/" in name:
        raise ApiErrors.STREAM_NAME_CONTAINS_PATH_SEPARATORS()
    if cfg.sealed:
        raise ApiErrors.STREAM_INVALID_CONFIG(err="stream configuration for create can not be sealed")
    if cfg.mirror_direct and cfg.mirror is None:
        raise ApiErrors.STREAM_INVALID_CONFIG(err="stream has no mirror but does have mirror direct")
    # A slow request validates off the loop: against a copy of the configs. Inline, nothing
    # changes meanwhile: the live streams are read (no copy of every config per create).
    slow = len(req.payload) > SLOW_REQUEST_BYTES
    others = _configs(acct) if slow else None
    get = others.get if others is not None else _live_config(acct)
    ccfg = yield Offload(lambda: check_stream_config(cfg, pedantic, get))
    if ccfg.num_replicas > 1:
        raise ApiErrors.STREAM_REPLICAS_NOT_SUPPORTED()
    existing = acct.streams.get(ccfg.name)
    if existing is not None:
        if existing.config.comparable() == ccfg.comparable():
            info, _, _, _ = existing.info()
            info.pop("cluster", None)
            info.pop("domain", None)  # nats-server's create response names no domain (update does)
            return resp("stream_create_response", {**info, "did_create": True})
        raise ApiErrors.STREAM_NAME_EXIST()
    acct.check_new_stream_limits(ccfg)
    refuse_unsupported(ccfg)
    parse_stream(ccfg.metadata)  # natsd.* feature keys (19xxx when invalid)
    if others is not None:
        yield Offload(lambda: check_subject_overlap(ccfg, others))
    else:
        _stream_subjects(acct).check_new_in(ccfg, acct.streams, acct.streams_version)
    try:
        stream = acct.add_stream(ccfg, subscribe=False)
    except OSError as e:
        raise ApiErrors.STREAM_CREATE(err=str(e)) from None
    yield from stream.subscribe_steps(SUBSCRIBE_CHUNK)
    acct.send_advisory(
        f"$JS.EVENT.ADVISORY.STREAM.CREATED.{stream.name}", lambda: stream_action(acct, stream.name, "create")
    )
    info, _, _, _ = stream.info()
    info.pop("cluster", None)
    info.pop("domain", None)
    return resp("stream_create_response", {**info, "did_create": True})


def stream_update(req: ApiRequest) -> Any:
    return _slow(req, _update_steps(req))


def _update_steps(req: ApiRequest) -> SlowRequest:
    acct = req.account
    cfg, pedantic = yield Offload(lambda: _config_request(req))
    name = _stream_name(req)
    others = _configs(acct)
    ccfg = yield Offload(lambda: check_stream_config(cfg, pedantic, others.get))
    if name != ccfg.name:
        raise ApiErrors.STREAM_MISMATCH()
    stream = acct.streams.get(name)
    if stream is None:
        raise ApiErrors.STREAM_NOT_FOUND()
    for check in acct.stream_update_checks:
        check(stream)
    old = stream.config
    ncfg = yield Offload(lambda: check_update(old, cfg, pedantic, others.get))
    acct.check_new_stream_limits(ncfg, existing=stream.config)
    refuse_unsupported(ncfg)
    parse_stream(ncfg.metadata)  # natsd.* feature keys (19xxx when invalid)
    yield Offload(lambda: check_subject_overlap(ncfg, others))
    if stream.closed or acct.streams.get(name) is not stream:
        raise ApiErrors.STREAM_NOT_FOUND()  # deleted meanwhile (not through the API: a template)
    stream.update_config(ncfg)
    acct.send_advisory(f"$JS.EVENT.ADVISORY.STREAM.UPDATED.{name}", lambda: stream_action(acct, name, "modify"))
    info, _, _, _ = stream.info()
    info.pop("cluster", None)
    return resp("stream_update_response", info)


def stream_info(req: ApiRequest) -> dict:
    acct = req.account
    name = _stream_name(req)
    details = False
    subjects = ""
    offset = 0
    if _is_json_object_or_array(req.payload):
        opts = req.json(R.STREAM_INFO_REQUEST)
        details = opts.get("deleted_details", False)
        subjects = opts.get("subjects_filter", "")
        offset = max(opts.get("offset", 0), 0)
    stream = acct.lookup_stream(name)
    info, total, off, limit = stream.info(subjects, details, offset)
    if not total:
        off = limit = 0
    rtype = "stream_info_response"
    if req.header(NH.RESPONSE_TYPE.decode()) == "create":
        rtype = "stream_create_response"
    body: dict = {"total": total, "offset": off, "limit": limit}
    body.update(info)
    return resp(rtype, body)


def stream_delete(req: ApiRequest) -> dict:
    acct = req.account
    if not req.is_empty:
        raise ApiErrors.NOT_EMPTY_REQUEST()
    name = _stream_name(req)
    acct.lookup_stream(name)
    acct.delete_stream(name)
    acct.send_advisory(f"$JS.EVENT.ADVISORY.STREAM.DELETED.{name}", lambda: stream_action(acct, name, "delete"))
    return resp("stream_delete_response", {"success": True})


def stream_purge(req: ApiRequest) -> dict:
    acct = req.account
    name = _stream_name(req)
    subject, seq, keep = "", 0, 0
    if _is_json_object_or_array(req.payload):
        body = req.json(R.STREAM_PURGE_REQUEST)
        subject = body.get("filter", "")
        seq = body.get("seq", 0)
        keep = body.get("keep", 0)
        if seq > 0 and keep > 0:
            raise ApiErrors.BAD_REQUEST()
    stream = acct.lookup_stream(name)
    purged = stream.purge(subject, seq, keep)
    return resp("stream_purge_response", {"success": True, "purged": purged})


def _paged_request(req: ApiRequest, struct: Any) -> tuple[int, str]:
    offset, subject = 0, ""
    if _is_json_object_or_array(req.payload):
        body = req.json(struct)
        offset = max(body.get("offset", 0), 0)
        subject = body.get("subject", "")
    return offset, subject


def _filtered_streams(req: ApiRequest, subject: str) -> list[Any]:
    streams = sorted(req.account.streams.values(), key=lambda s: s.name)
    if not subject:
        return streams
    out = []
    for s in streams:
        subs = s.config.subjects or [s.name]
        if any(subjects_collide(subject, x) for x in subs):
            out.append(s)
    return out


def stream_names(req: ApiRequest) -> dict:
    offset, subject = _paged_request(req, R.STREAM_NAMES_REQUEST)
    streams = _filtered_streams(req, subject)
    total = len(streams)
    offset = min(offset, total)
    names = [s.name for s in streams[offset : offset + JS_API_NAMES_LIMIT]]
    return resp(
        "stream_names_response",
        {"total": total, "offset": offset, "limit": JS_API_NAMES_LIMIT, "streams": names or None},
    )


def stream_list(req: ApiRequest) -> dict:
    offset, subject = _paged_request(req, R.STREAM_LIST_REQUEST)
    streams = _filtered_streams(req, subject)
    total = len(streams)
    offset = min(offset, total)
    infos = []
    for s in streams[offset : offset + JS_API_LIST_LIMIT]:
        info, _, _, _ = s.info(dynamic_metadata=False)
        info.pop("cluster", None)
        infos.append(info)
    return resp(
        "stream_list_response", {"total": total, "offset": offset, "limit": JS_API_LIST_LIMIT, "streams": infos}
    )


def msg_get(req: ApiRequest) -> dict:
    acct = req.account
    if req.is_empty:
        raise ApiErrors.BAD_REQUEST()
    body = req.json(R.MSG_GET_REQUEST)
    if body.get("batch", 0) > 0 or body.get("max_bytes", 0) > 0:
        raise ApiErrors.BAD_REQUEST()
    # Seq, last_by_subj and start_time exclude each other; next_by_subj pairs with seq or
    # start_time. Checked before the stream is looked up, as the reference.
    start_time = body.get("start_time")
    seq, last_for, next_for = body.get("seq", 0), body.get("last_by_subj", ""), body.get("next_by_subj", "")
    if (
        (seq and last_for)
        or (not seq and not last_for and not next_for and start_time is None)
        or (seq and start_time is not None)
        or (start_time is not None and last_for)
        or (last_for and next_for)
    ):
        raise ApiErrors.BAD_REQUEST()
    stream = acct.lookup_stream(req.tokens[5] if len(req.tokens) > 5 else "")
    if start_time:
        try:
            ts = parse_rfc3339(start_time) if isinstance(start_time, str) else None
        except ValueError:
            ts = None
        if ts is None:
            raise ApiErrors.INVALID_JSON(
                err=f'parsing time {json.dumps(start_time)} as "2006-01-02T15:04:05Z07:00": cannot parse'
            )
        body = dict(body, seq=stream.store.get_seq_from_time(ts))
    sm = stream.get_msg(body)
    msg: dict = {"subject": sm.subject, "seq": sm.seq}
    if sm.hdr and not body.get("no_hdr"):
        msg["hdrs"] = base64.b64encode(sm.hdr).decode()
    if sm.msg:
        msg["data"] = base64.b64encode(sm.msg).decode()
    msg["time"] = rfc3339(sm.ts)
    return resp("stream_msg_get_response", {"message": msg})


def msg_delete(req: ApiRequest) -> dict:
    acct = req.account
    if req.is_empty:
        raise ApiErrors.BAD_REQUEST()
    body = req.json(R.MSG_DELETE_REQUEST)
    seq = body.get("seq", 0)
    stream = acct.lookup_stream(req.tokens[5] if len(req.tokens) > 5 else "")
    stream.delete_msg(seq, body.get("no_erase", False))
    return resp("stream_msg_delete_response", {"success": True})


def cluster_only(req: ApiRequest) -> dict:
    """Leader stepdown, peer remove/evacuate, cancel move: a standalone server has no cluster."""
    raise ApiErrors.CLUSTER_REQUIRED()
