"""``$JS.API.STREAM.TEMPLATE.{CREATE,DELETE,INFO}.<t>`` and ``$JS.API.STREAM.TEMPLATE.NAMES``.

Shapes and checks as the last nats-server releases with templates (2.11, ``jsTemplate*Request``):

* CREATE: body StreamTemplateConfig; the name in the subject must equal ``name`` (10073); reply
  ``stream_template_create_response`` = StreamTemplateInfo. Errors from the template rules are
  10066 "<reason>"; a bad stream config keeps its own error (e.g. 10052).
* INFO: empty body (else 10038); unknown template 10068; reply ``stream_template_info_response``.
* DELETE: empty body (else 10038); unknown template 10068; reply
  ``stream_template_delete_response`` ``{"success": true}``.
* NAMES: ``{"offset"}`` optional; reply ``stream_template_names_response`` with ``total``,
  ``offset``, ``limit`` (1024) and the names under ``"streams"`` (sic, as the reference).
"""

from __future__ import annotations

import json

from natsd.jetstream.api.router import ApiRequest
from natsd.jetstream.errors import ApiErrors
from natsd.jetstream.templates import TemplateManager
from natsd.jetstream.wire import resp
from natsd.jetstream.gojson import go_kind

__all__ = ["template_create", "template_info", "template_delete", "template_names", "is_empty_request"]

NAMES_LIMIT = 1024
CREATE_T = "stream_template_create_response"
INFO_T = "stream_template_info_response"
DELETE_T = "stream_template_delete_response"
NAMES_T = "stream_template_names_response"


def is_empty_request(payload: bytes) -> bool:
    """The reference's isEmptyRequest: no bytes, or a JSON object without fields (``{}``)."""
    if not payload or not payload.strip():
        return True
    if payload == b"{}":
        return True
    try:
        v = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(v, dict) and not v


def _mgr(req: ApiRequest) -> TemplateManager:
    return req.account.templates


def _name(req: ApiRequest) -> str:
    return req.tokens[5] if len(req.tokens) > 5 else ""


def template_create(req: ApiRequest) -> dict:
    body = {} if req.is_empty else req.json()
    name = body.get("name")
    if name is not None and not isinstance(name, str):
        raise ApiErrors.INVALID_JSON(
            err="json: cannot unmarshal into Go struct field StreamTemplateConfig.name of type string"
        )
    ms = body.get("max_streams", 0)
    if ms is None:
        ms = 0
    if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms <= 0xFFFFFFFF:
        raise ApiErrors.INVALID_JSON(
            err=f"json: cannot unmarshal {go_kind(ms, literal=True)} into Go struct field "
            "StreamTemplateConfig.max_streams of type uint32"
        )
    if _name(req) != (name or ""):
        raise ApiErrors.TEMPLATE_NAME_NOT_MATCH_SUBJECT()
    t = _mgr(req).add(name or "", body.get("config"), ms)
    return resp(CREATE_T, t.info_json())


def template_info(req: ApiRequest) -> dict:
    if not is_empty_request(req.payload):
        raise ApiErrors.NOT_EMPTY_REQUEST()
    t = _mgr(req).lookup(_name(req))
    return resp(INFO_T, t.info_json())


def template_delete(req: ApiRequest) -> dict:
    if not is_empty_request(req.payload):
        raise ApiErrors.NOT_EMPTY_REQUEST()
    _mgr(req).delete(_name(req))
    return resp(DELETE_T, {"success": True})


def template_names(req: ApiRequest) -> dict:
    offset = 0
    s = req.payload.lstrip()
    if s[:1] in (b"{", b"["):
        body = req.json()
        off = body.get("offset", 0) or 0
        if isinstance(off, bool) or not isinstance(off, int):
            raise ApiErrors.INVALID_JSON(
                err="json: cannot unmarshal into Go struct field JSApiStreamTemplatesRequest.offset of type int"
            )
        offset = max(off, 0)
    names = _mgr(req).names()
    total = len(names)
    offset = min(offset, total)
    return resp(
        NAMES_T,
        {"total": total, "offset": offset, "limit": NAMES_LIMIT, "streams": names[offset : offset + NAMES_LIMIT]},
    )
