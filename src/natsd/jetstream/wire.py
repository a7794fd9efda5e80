"""JetStream JSON on the wire: Go's encoding, the reply envelope, and the API level a request requires.

Both the ``$JS.API`` handlers (:mod:`natsd.jetstream.api`) and the domain write JSON replies
themselves (a consumer answers ``CONSUMER.RESET`` on its own subscription, a restore answers when
the upload ends, advisories go out from streams and consumers), so the shape every reply shares
lives here, below both:

* :func:`dumps` -- compact JSON byte for byte as nats-server's ``encoding/json`` writes it;
* :func:`resp` -- a reply ``{"type": "io.nats.jetstream.api.v1.<x>", ...}``;
* :func:`error_envelope` -- the error reply ``{"type", "error": {"code", "err_code",
  "description"}}`` plus the zero-valued non-``omitempty`` fields the reference's Go response
  structs always carry (e.g. ``"total":0,"offset":0,"limit":0`` for STREAM.INFO, ``"purged":0``
  for PURGE), so error replies match the reference field by field;
* :func:`parse_ttl` -- a ``Nats-TTL`` header value (the publish path and batches, restores);
* :func:`required_level_too_high` -- a request's ``Nats-Required-Api-Level`` is above ours (the
  API answers it 412/10185, and so do the requests a consumer answers itself).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from natsd import nats_headers as NH
from natsd.gotime import parse_duration
from natsd.jetstream.config.constants import JS_API_LEVEL, SECOND
from natsd.protocol.headers import get_header

if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.errors import ApiError

__all__ = [
    "TYPE_PREFIX",
    "SYSTEM_RESPONSE",
    "ERROR_EXTRAS",
    "dumps",
    "resp",
    "error_envelope",
    "required_level_too_high",
    "parse_ttl",
]

TYPE_PREFIX = "io.nats.jetstream.api.v1."
SYSTEM_RESPONSE = TYPE_PREFIX + "system_response"

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
    HTML-safe escapes (``<`` ``>`` ``&`` as ``\\u003c`` ``\\u003e`` ``\\u0026``, U+2028/9), so
    ``"subjects":["orders.>"]`` reads ``"orders.\\u003e"`` byte for byte like nats-server. Those
    characters can only occur inside JSON strings, so a plain replace is exact."""
    s = _ENCODER.encode(obj)
    if "<" in s or ">" in s or "&" in s or "\u2028" in s or "\u2029" in s:
        s = (
            s.replace("<", "\\u003c")
            .replace(">", "\\u003e")
            .replace("&", "\\u0026")
            .replace("\u2028", "\\u2028")
            .replace("\u2029", "\\u2029")
        )
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
    short = type_name[len(TYPE_PREFIX) :] if type_name.startswith(TYPE_PREFIX) else type_name
    out: dict = {"type": TYPE_PREFIX + short, "error": err.to_dict()}
    extras = ERROR_EXTRAS.get(short)
    if extras:
        out.update(extras)
    return out


_REQUIRED_API_LEVEL = NH.REQUIRED_API_LEVEL.decode()
_GO_ATOI = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi accepts (no spaces, no "_")


def required_level_too_high(hdr: bytes | None) -> bool:
    """nats-server's ``errorOnRequiredApiLevel``: a non-empty ``Nats-Required-Api-Level`` (found
    as its ``sliceHeader`` finds it) that is not an integer, or is above :data:`JS_API_LEVEL`."""
    v = get_header(hdr, _REQUIRED_API_LEVEL)
    if not v:
        return False
    return not _GO_ATOI.fullmatch(v) or int(v) > JS_API_LEVEL


def parse_ttl(value: str) -> int:
    """Nats-TTL header -> seconds, as the reference: ``never`` -> -1; a Go duration >= 1s or a
    plain integer of seconds; anything else raises ApiError MESSAGE_TTL_INVALID (10165)."""
    if value.lower() == "never":
        return -1
    if value.isdigit() and value != "0":
        # All digits: Go's ParseDuration fails ("missing unit") and the integer is taken, so
        # skip building that error per message; only "0" parses (0s, below the 1s minimum).
        return int(value)
    try:
        ns = parse_duration(value)
    except ValueError:
        ns = None
    if ns is not None and ns >= SECOND:
        return ns // SECOND
    if ns is None and value.isdigit():
        return int(value)
    # the error table loads with the first API request or bad TTL (issue 26, start-up time)
    from natsd.jetstream.errors import ApiErrors

    raise ApiErrors.MESSAGE_TTL_INVALID()
