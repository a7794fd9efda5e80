"""Message counters (``allow_msg_counter``): a stream whose messages are running totals.

A publish to a counter stream carries ``Nats-Incr: <integer>`` (a big integer in base 10 with an
optional sign: ``1``, ``+5``, ``-2``, ``99999999999999999999999999``; anything else is 10171) and
an empty body. The stream adds it to the subject's last value and stores, on the same subject::

    headers  NATS/1.0\\r\\nNats-Incr: 5\\r\\n\\r\\n          (the publisher's headers, kept)
    body     {"val":"11"}                                   (the new total, as a JSON string)

and answers ``{"stream":"C","seq":7,"val":"11"}``. The reference's rules, all checked here:

* on a counter stream every publish needs ``Nats-Incr`` (10169, an empty value counts as
  missing), with an empty body (10170), and none of ``Nats-Rollup``, ``Nats-Expected-Stream``,
  ``Nats-Expected-Last-Msg-Id``, ``Nats-Expected-Last-Sequence``,
  ``Nats-Expected-Last-Subject-Sequence(-Subject)`` (10171); ``Nats-Msg-Id`` is allowed;
* on other streams a valid ``Nats-Incr`` is 10168 (counters disabled), an invalid one 10171;
* a last message whose body is not a ``{"val": ...}`` object, or whose ``Nats-Counter-Sources``
  is not JSON, makes the counter broken (10172).

Sourcing (``natsd.jetstream.stream.sourcing``): a counter stream that sources other counter streams
aggregates them. A sourced message (it has ``Nats-Stream-Source: <origin> <seq> <filter> <dest>
<subject>``) is not applied as an increment: its body is the origin's total, so the target
remembers the last total seen per origin stream and subject in the header
``Nats-Counter-Sources: {"<origin>":{"<subject>":"<total>"}}`` (JSON, keys sorted, as Go's
``json.Marshal`` writes a map), rewrites ``Nats-Incr`` to the difference from the previous total
of that origin, and adds that difference to its own value. So a target sourcing two counters
holds their sum, and a source's restart never counts twice.

Batches (``natsd.jetstream.stream.batch``) apply several increments to one subject before any is
stored: :class:`Running` carries the staged totals between them.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from natsd.jetstream.errors import ApiErrors
from natsd.jetstream.wire import dumps
from natsd import nats_headers as NH
from natsd.protocol.headers import get_header_bytes
from natsd.store.base import MsgNotFound, StoreEOF
from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.store.base import StreamStore

__all__ = [
    "CounterStream",
    "H_INCR",
    "H_COUNTER_SOURCES",
    "H_STREAM_SOURCE",
    "parse_incr",
    "check_incr",
    "apply_incr",
    "Running",
    "set_header",
]

H_INCR = NH.INCR
H_COUNTER_SOURCES = NH.COUNTER_SOURCES
H_STREAM_SOURCE = NH.STREAM_SOURCE

# Headers a counter increment may not carry (the reference's "incompatible headers").
_INCOMPATIBLE = (
    NH.ROLLUP,
    NH.EXPECTED_STREAM,
    NH.EXPECTED_LAST_MSG_ID,
    NH.EXPECTED_LAST_SUBJ_SEQ_SUBJ,
    NH.EXPECTED_LAST_SEQ,
    NH.EXPECTED_LAST_SUBJ_SEQ,
)

# Go's big.Int SetString(s, 10): an optional sign and at least one decimal digit, nothing else.
_BIG_INT = re.compile(rb"[+-]?[0-9]+\Z")

_VAL_PREFIX = b'{"val":"'
_VAL_SUFFIX = b'"}'

# staged per-subject totals of a batch: subject -> (total, counter sources)
Running = dict[str, tuple[int, dict[str, dict[str, str]]]]


def parse_incr(v: bytes) -> int | None:
    """The increment of a ``Nats-Incr`` value, or None when it is not an integer."""
    return int(v) if _BIG_INT.match(v) else None


def check_incr(h: dict[bytes, bytes], payload: bytes, allow_counter: bool, sourced: bool) -> int | None:
    """The checks the reference makes first on any publish with headers: the increment of
    ``Nats-Incr`` (None when absent or empty), or ApiError 10171 / 10168 / 10170 / 10171."""
    v = h.get(H_INCR)
    if not v:
        return None
    incr = parse_incr(v)
    if incr is None:
        raise ApiErrors.MESSAGE_INCR_INVALID()
    if sourced:
        return incr  # stored as the origin wrote it (or aggregated, see apply_incr)
    if not allow_counter:
        raise ApiErrors.MESSAGE_INCR_DISABLED()
    if payload:
        raise ApiErrors.MESSAGE_INCR_PAYLOAD()
    if len(h) == 1:
        return incr  # Nats-Incr alone: nothing to be incompatible with
    for name in _INCOMPATIBLE:
        if h.get(name):
            raise ApiErrors.MESSAGE_INCR_INVALID()
    return incr


def _value_of(body: bytes) -> int:
    """The total in a counter body ``{"val":"N"}``; ApiError 10172 when the body is not a JSON
    object (Go's Unmarshal into the CounterValue struct fails). A missing or non-integer ``val``
    counts as 0, as the reference's SetString leaves it."""
    if body.startswith(_VAL_PREFIX) and body.endswith(_VAL_SUFFIX):
        digits = body[8:-2]  # between _VAL_PREFIX and _VAL_SUFFIX
        if (digits[1:] if digits[:1] == b"-" else digits).isdigit():
            return int(digits)  # the shape this module writes: no JSON parse needed
    try:
        obj = json.loads(body)
    except ValueError:
        raise ApiErrors.MESSAGE_COUNTER_BROKEN() from None
    if obj is None:
        return 0  # Go's Unmarshal of null leaves the struct as it was
    if not isinstance(obj, dict):
        raise ApiErrors.MESSAGE_COUNTER_BROKEN()
    val = obj.get("val")
    if val is not None and not isinstance(val, str):
        raise ApiErrors.MESSAGE_COUNTER_BROKEN()
    return int(val) if val and _BIG_INT.match(val.encode()) else 0


def _sources_of(hdr: bytes | None) -> dict[str, dict[str, str]]:
    v = get_header_bytes(hdr, H_COUNTER_SOURCES)
    if not v:
        return {}
    try:
        obj = json.loads(v)
    except ValueError:
        raise ApiErrors.MESSAGE_COUNTER_BROKEN() from None
    if obj is None:
        return {}
    if not isinstance(obj, dict) or not all(
        isinstance(m, dict) and all(isinstance(x, str) for x in m.values()) for m in obj.values() if m is not None
    ):
        raise ApiErrors.MESSAGE_COUNTER_BROKEN()
    return {k: dict(m) for k, m in obj.items() if m is not None}


def set_header(hdr: bytes | None, name: bytes, value: bytes) -> bytes:
    """Go's setHeader: replace the value of ``name`` where it stands, or append the header."""
    if not hdr:
        return b"NATS/1.0\r\n" + name + b": " + value + b"\r\n\r\n"
    needle = b"\r\n" + name + b":"
    i = hdr.find(needle)
    if i < 0:
        end = len(hdr) - 2 if hdr.endswith(b"\r\n\r\n") else len(hdr)
        return hdr[:end] + name + b": " + value + b"\r\n\r\n"
    start = i + len(needle)
    j = hdr.find(b"\r\n", start)
    if j < 0:
        j = len(hdr)
    return hdr[:start] + b" " + value + hdr[j:]


class CounterStream(Protocol):
    """What :func:`apply_incr` needs of a stream: its store, and the totals the stream keeps of
    the counter messages it stored (``Stream.counter_cache``) and of the one being stored now
    (``Stream.counter_next``, moved into the cache by ``Stream.counter_stored``)."""

    store: "StreamStore"
    counter_cache: dict[str, tuple[int, int, dict]]
    counter_next: tuple[str, int, dict] | None


def apply_incr(
    stream: CounterStream, subject: str, hdr: bytes | None, payload: bytes, incr: int, running: Running | None = None
) -> tuple[bytes | None, bytes, str]:
    """Apply ``incr`` (already checked) to ``subject``'s counter: returns the headers and body to
    store and the new total (for the PubAck's ``val``). ``payload`` is the published body (empty,
    or the origin's ``{"val":...}`` for a sourced message). A sourced message (it carries
    ``Nats-Stream-Source``) is aggregated as described in the module docstring. ``running``
    holds the totals a batch has staged but not stored yet; it is updated."""
    state = running.get(subject) if running else None
    if state is None:
        # The total of the subject's last message, kept by the stream after each counter message
        # it stored (Stream.counter_stored): valid while that message is still the subject's last
        # one, which the index tells without reading it; else (removed, truncated, stored by a
        # batch) it is read back.
        last_seq = stream.store.last_seq_of(subject)
        hit = stream.counter_cache.get(subject) if last_seq else None
        if hit is not None and hit[0] == last_seq:
            state = hit[1:]
    if state is not None:
        total, sources = state[0], {k: dict(m) for k, m in state[1].items()}
    else:
        try:
            last = stream.store.load_last_msg(subject)
        except (MsgNotFound, StoreEOF):
            total, sources = 0, {}
        else:
            total = _value_of(last.msg)
            sources = _sources_of(last.hdr)
    src = get_header_bytes(hdr, H_STREAM_SOURCE)
    if src:
        fields = src.decode("utf-8", "replace").split(" ")
        origin = fields[0]
        orig_subject = fields[4] if len(fields) >= 5 else subject
        sourced_total = _value_of(payload)  # the origin's total (10172 when not a counter body)
        per = sources.setdefault(origin, {})
        prev = per.get(orig_subject, "")
        per[orig_subject] = str(sourced_total)
        incr = sourced_total - (int(prev) if _BIG_INT.match(prev.encode()) else 0)
        hdr = set_header(hdr, H_INCR, str(incr).encode())
    total += incr
    if sources:
        hdr = set_header(
            hdr, H_COUNTER_SOURCES, dumps({k: dict(sorted(m.items())) for k, m in sorted(sources.items())})
        )
    if running is not None:
        running[subject] = (total, sources)
    stream.counter_next = (subject, total, sources)
    val = str(total)
    return hdr, b'{"val":"' + val.encode() + b'"}', val
