"""Dispatch of ``$JS.API`` requests to handlers, and the JSON envelope of every reply.

One :class:`ApiRouter` per JetStream-enabled account. The account subscribes the API subject
families once through its Ports (``manager.API_SUBSCRIPTIONS``: everything under ``$JS.API``
except DIRECT.GET and CONSUMER.MSG.NEXT) and hands every request to :meth:`ApiRouter.dispatch`, which finds the handler
registered for the subject's pattern (patterns use ``*``/``>`` like subscriptions; the most
specific literal match wins) and sends the reply:

* the handler returns a dict (built with :func:`resp`, so it carries its ``"type"``) -> sent as
  JSON to the request's reply subject;
* the handler raises :class:`~natsd.jetstream.api.errors.ApiError` -> the reference envelope
  ``{"type": "io.nats.jetstream.api.v1.<x>_response", "error": {"code", "err_code",
  "description"}}`` plus the zero-valued non-``omitempty`` fields the reference's Go structs
  always carry (e.g. ``"total":0,"offset":0,"limit":0`` for STREAM.INFO, ``"purged":0`` for
  PURGE), so error replies match the reference field by field;
* the handler returns ``None`` -> nothing is sent (MSG.NEXT and DIRECT.GET answer on their own).

A subject no handler matches gets no reply at all, as the reference (the client times out).
``$JS.API.DIRECT.GET.*`` and ``$JS.API.CONSUMER.MSG.NEXT.*.*`` are not dispatched here: the
stream / consumer subscribes those subjects itself (so that a missing stream gives no
responders), exactly as nats-server.

API statistics (``api.total`` / ``api.errors`` of ``$JS.API.INFO``) are counted per account in
:class:`ApiStats`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from natsd.jetstream import gojson
from natsd.jetstream.api.errors import ApiError, ApiErrors
# the one header scan; consumer.py still imports it from here under its old name
from natsd.protocol.headers import get_header as find_header

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.gojson import GoStruct
    from natsd.jetstream.manager import JsAccount

__all__ = [
    "ApiRequest", "ApiRouter", "ApiStats", "Handler", "resp", "TYPE_PREFIX", "dumps",
    "JS_API_PREFIX", "RESPONSE_TYPES", "ERROR_EXTRAS", "SYSTEM_RESPONSE",
]

log = logging.getLogger("natsd.jetstream.api")

TYPE_PREFIX = "io.nats.jetstream.api.v1."
JS_API_PREFIX = "$JS.API."
SYSTEM_RESPONSE = TYPE_PREFIX + "system_response"

# Response type (without prefix) of each API subject pattern, so the router can build the error
# envelope for any handler, including ones that raise before building anything.
RESPONSE_TYPES: dict[str, str] = {
    "$JS.API.INFO": "account_info_response",
    "$JS.API.STREAM.CREATE.*": "stream_create_response",
    "$JS.API.STREAM.UPDATE.*": "stream_update_response",
    "$JS.API.STREAM.NAMES": "stream_names_response",
    "$JS.API.STREAM.LIST": "stream_list_response",
    "$JS.API.STREAM.INFO.*": "stream_info_response",
    "$JS.API.STREAM.DELETE.*": "stream_delete_response",
    "$JS.API.STREAM.PURGE.*": "stream_purge_response",
    "$JS.API.STREAM.MSG.GET.*": "stream_msg_get_response",
    "$JS.API.STREAM.MSG.DELETE.*": "stream_msg_delete_response",
    "$JS.API.STREAM.SNAPSHOT.*": "stream_snapshot_response",
    "$JS.API.STREAM.RESTORE.*": "stream_restore_response",
    "$JS.API.STREAM.LEADER.STEPDOWN.*": "stream_leader_stepdown_response",
    "$JS.API.STREAM.PEER.REMOVE.*": "stream_remove_peer_response",
    "$JS.API.STREAM.PEER.EVACUATE.*": "stream_remove_peer_response",
    "$JS.API.STREAM.CANCEL_MOVE.*": "stream_update_response",
    "$JS.API.CONSUMER.CREATE.*": "consumer_create_response",
    "$JS.API.CONSUMER.CREATE.*.>": "consumer_create_response",
    "$JS.API.CONSUMER.DURABLE.CREATE.*.*": "consumer_create_response",
    "$JS.API.CONSUMER.NAMES.*": "consumer_names_response",
    "$JS.API.CONSUMER.LIST.*": "consumer_list_response",
    "$JS.API.CONSUMER.INFO.*.*": "consumer_info_response",
    "$JS.API.CONSUMER.DELETE.*.*": "consumer_delete_response",
    "$JS.API.CONSUMER.PAUSE.*.*": "consumer_pause_response",
    "$JS.API.CONSUMER.UNPIN.*.*": "consumer_unpin_response",
    "$JS.API.CONSUMER.RESET.*.*": "consumer_reset_response",
    "$JS.API.CONSUMER.LEADER.STEPDOWN.*.*": "consumer_leader_stepdown_response",
    "$JS.API.META.LEADER.STEPDOWN": "meta_leader_stepdown_response",
    "$JS.API.META.RESCUE": "meta_rescue_response",
    "$JS.API.SERVER.REMOVE": "meta_server_remove_response",
    "$JS.API.SERVER.EVACUATE": "meta_server_remove_response",
    "$JS.API.ACCOUNT.PURGE.*": "account_purge_response",
    "$JS.API.ACCOUNT.STREAM.MOVE.*.*": "stream_update_response",
    "$JS.API.ACCOUNT.STREAM.CANCEL_MOVE.*.*": "stream_update_response",
}

# A body whose fields nobody checks (handlers that take any JSON object).
_ANY_OBJECT = gojson.GoStruct("object", {}, open=True)

_PAGED = {"total": 0, "offset": 0, "limit": 0}
# Fields the reference's response structs serialise even when zero (no omitempty), which
# therefore also appear next to "error" in an error reply. Order = Go struct order.
ERROR_EXTRAS: dict[str, dict[str, Any]] = {
    "stream_info_response": _PAGED,
    "stream_names_response": {**_PAGED, "streams": None},
    "stream_list_response": {**_PAGED, "streams": []},
    "stream_purge_response": {"purged": 0},
    "stream_restore_response": {"deliver_subject": ""},
    "consumer_names_response": {**_PAGED, "consumers": []},
    "consumer_list_response": {**_PAGED, "consumers": []},
    "consumer_pause_response": {"paused": False, "pause_until": "0001-01-01T00:00:00Z"},
    "consumer_reset_response": {"reset_seq": 0},
}

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(obj: Any) -> bytes:
    """Compact JSON as the reference writes it: no spaces, UTF-8 kept as is, and Go's
    HTML-safe escapes (``<`` ``>`` ``&`` as ``\u003c`` ``\u003e`` ``\u0026``, U+2028/9), so
    ``"subjects":["orders.>"]`` reads ``"orders.\u003e"`` byte for byte like nats-server. Those
    characters can only occur inside JSON strings, so a plain replace is exact."""
    s = _ENCODER.encode(obj)
    if "<" in s or ">" in s or "&" in s or "\u2028" in s or "\u2029" in s:
        s = (s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
             .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    return s.encode()


def resp(type_name: str, body: dict | None = None) -> dict:
    """A response dict whose first key is ``"type"`` (``type_name`` without or with prefix)."""
    t = type_name if type_name.startswith(TYPE_PREFIX) else TYPE_PREFIX + type_name
    out: dict = {"type": t}
    if body:
        out.update(body)
    return out


def error_envelope(type_name: str, err: ApiError) -> dict:
    """The reference's error reply for a response of type ``type_name`` (short or full)."""
    short = type_name[len(TYPE_PREFIX):] if type_name.startswith(TYPE_PREFIX) else type_name
    out: dict = {"type": TYPE_PREFIX + short, "error": err.to_dict()}
    extras = ERROR_EXTRAS.get(short)
    if extras:
        out.update(extras)
    return out


@dataclass(slots=True)
class ApiStats:
    """Per-account API counters (``api`` object of ``$JS.API.INFO``; ``inflight`` is always 0
    here: requests are handled synchronously)."""

    total: int = 0
    errors: int = 0


@dataclass(slots=True)
class ApiRequest:
    """One API request as handlers see it."""

    subject: str
    tokens: list[str]
    reply: str
    hdr: bytes | None
    payload: bytes
    account: "JsAccount"
    _json: Any = field(default=None, repr=False)

    def json(self, struct: "GoStruct | None" = None) -> dict:
        """The body decoded as nats-server decodes it into the Go request ``struct``
        (:mod:`~natsd.jetstream.gojson`): ``{}`` when empty, canonical field names, no ``null``
        fields; INVALID_JSON (10025) with Go's text for bad JSON, unknown fields and wrong types.
        Without a struct the body must be a JSON object; its fields are not checked."""
        if self._json is None:
            try:
                self._json = gojson.decode(self.payload, struct or _ANY_OBJECT)
            except gojson.GoError as e:
                raise ApiErrors.INVALID_JSON(err=str(e)) from None
        return self._json

    @property
    def is_empty(self) -> bool:
        """The reference's isEmptyRequest: no bytes, or a JSON object with no fields (``{}``)."""
        body = self.payload
        if not body or body == b"{}":
            return True
        try:
            val = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return False
        return isinstance(val, dict) and not val

    def header(self, name: str) -> str | None:
        """Value of request header ``name`` (case-sensitive, as nats-server reads it), or None."""
        if not self.hdr:
            return None
        return find_header(self.hdr, name)


def _check_required_level(req: ApiRequest) -> None:
    """``Nats-Required-Api-Level: N`` above our level -> 412/10185, as the reference."""
    from natsd.jetstream.models import JS_API_LEVEL
    v = req.header("Nats-Required-Api-Level")
    if v is None or not v:
        return
    if not v.isdigit() or int(v) > JS_API_LEVEL:
        raise ApiErrors.REQUIRED_API_LEVEL()


Handler = Callable[[ApiRequest], "dict | None"]


class _Node:
    __slots__ = ("children", "star", "fwc", "entry")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.star: _Node | None = None
        self.fwc: tuple[Handler, str] | None = None
        self.entry: tuple[Handler, str] | None = None


class ApiRouter:
    """Pattern -> handler table for one account's ``$JS.API`` requests (a small token trie;
    literal tokens are preferred over ``*``, and ``*`` over ``>``)."""

    def __init__(self, account: "JsAccount | None" = None) -> None:
        self.account = account
        self._root = _Node()
        self.patterns: dict[str, Handler] = {}
        # Hooks the account sets: reply sender and audit (advisory) callback.
        self.on_response: Callable[[ApiRequest, bytes], None] | None = None

    def register(self, pattern: str, handler: Handler, response_type: str | None = None) -> None:
        """Route requests whose subject matches ``pattern`` to ``handler``.

        ``response_type`` (e.g. ``"consumer_create_response"``) names the type used for error
        envelopes; it defaults to the reference's type for the known API subjects."""
        rtype = response_type or RESPONSE_TYPES.get(pattern) or "system_response"
        node = self._root
        tokens = pattern.split(".")
        for i, t in enumerate(tokens):
            if t == ">":
                node.fwc = (handler, rtype)
                self.patterns[pattern] = handler
                return
            if t == "*":
                if node.star is None:
                    node.star = _Node()
                node = node.star
            else:
                nxt = node.children.get(t)
                if nxt is None:
                    nxt = node.children[t] = _Node()
                node = nxt
        node.entry = (handler, rtype)
        self.patterns[pattern] = handler

    def lookup(self, tokens: list[str]) -> tuple[Handler, str] | None:
        """The (handler, response type) for a tokenized subject, or None."""
        return self._match(self._root, tokens, 0)

    def _match(self, node: _Node, tokens: list[str], i: int) -> tuple[Handler, str] | None:
        if i == len(tokens):
            return node.entry
        t = tokens[i]
        child = node.children.get(t)
        if child is not None:
            r = self._match(child, tokens, i + 1)
            if r is not None:
                return r
        if node.star is not None:
            r = self._match(node.star, tokens, i + 1)
            if r is not None:
                return r
        return node.fwc

    def dispatch(self, account: "JsAccount", subject: str, reply: str, hdr: bytes | None,
                 payload: bytes) -> bytes | None:
        """Handle one request; returns the reply bytes sent (None when nothing was sent)."""
        tokens = subject.split(".")
        found = self.lookup(tokens)
        if found is None:
            return None  # unknown API subject: no reply, as the reference
        handler, rtype = found
        req = ApiRequest(subject, tokens, reply, hdr, payload, account)
        stats: ApiStats = account.api_stats
        # Counted once handled, as the reference: $JS.API.INFO's "total" leaves itself out.
        try:
            if hdr and b"Nats-Required-Api-Level" in hdr:
                _check_required_level(req)
            result = handler(req)
        except ApiError as err:
            stats.errors += 1
            result = error_envelope(rtype, err)
        except Exception as e:  # a bug must cost this request only, not the connection
            log.exception("JetStream API handler for %s failed", subject)
            stats.errors += 1
            result = error_envelope(rtype, ApiErrors.STREAM_GENERAL_ERROR(err=str(e) or type(e).__name__))
        stats.total += 1
        if result is None:
            return None
        data = dumps(result)
        if reply:
            account.ports.publish(reply, "", None, data)
        if self.on_response is not None:
            self.on_response(req, data)
        return data
