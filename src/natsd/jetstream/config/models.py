"""JetStream value types as they travel on the wire: StreamConfig and its sub-structs, StreamInfo
and StreamState, with JSON conversion that matches nats-server field by field.

Field names are the JSON names (``StreamConfig.max_msgs_per_subject``), in the reference's
struct order, so ``to_json()`` emits keys in the same order as nats-server. Durations are int64
nanoseconds, times are RFC 3339 strings with nanoseconds in UTC (:func:`rfc3339`).

``omitempty``: the reference leaves some fields out when they hold their zero value
(``description``, ``subjects``, ``max_msg_size``, ``no_ack``, ``duplicate_window``, ``placement``,
``mirror``, ``sources``, ``first_seq``, ``subject_transform``, ``republish``,
``discard_new_per_subject``, ``subject_delete_marker_ttl``, ``allow_msg_counter``,
``allow_atomic``, ``allow_msg_schedules``, ``persist_mode``, ``allow_batched``, ``metadata``);
:data:`STREAM_OMITEMPTY` lists them and ``to_json`` drops them when zero.

Metadata: the stored config carries ``_nats.req.level`` (minimum API level the config needs);
replies to INFO/CREATE/UPDATE add ``_nats.ver`` and ``_nats.level`` (:func:`with_dynamic_metadata`).
"""

from __future__ import annotations

from dataclasses import field, fields
from typing import Any

from natsd.lazydataclass import dataclass
from natsd import __version__
from natsd.jetstream.errors import ApiError, ApiErrors
from natsd.gotime import GO_ZERO_TIME, format_rfc3339_or_zero, parse_rfc3339_or_zero
from natsd.jetstream.gojson import go_kind
import enum
from natsd.store.base import DiscardPolicy, StorageType  # the store's own enums: one definition
from natsd.store.base import StreamState
from natsd.jetstream.config.constants import JS_API_LEVEL, MS, SECOND  # (defined there for the start: issue 26)

__all__ = [
    "StreamConfig",
    "STREAM_OMITEMPTY",
    "rfc3339",
    "parse_rfc3339",
    "ZERO_TIME",
    "JS_API_LEVEL",
    "server_version",
    "with_dynamic_metadata",
    "set_static_metadata",
    "strip_dynamic_metadata",
    "RETENTION",
    "DISCARD",
    "STORAGE",
    "COMPRESSION",
    "RetentionPolicy",
    "DiscardPolicy",
    "StorageType",
    "StoreCompression",
    "PersistMode",
    "DeliverPolicy",
    "AckPolicy",
    "ReplayPolicy",
    "PriorityPolicy",
    "JS_MAX_NAME_LEN",
    "JS_MAX_DESCRIPTION_LEN",
    "JS_MAX_METADATA_LEN",
    "is_valid_asset_name",
    "DEFAULT_DUPLICATE_WINDOW_NS",
    "state_to_json",
    "MS",
    "SECOND",
]


JS_MAX_NAME_LEN = 255
JS_MAX_DESCRIPTION_LEN = 4 * 1024
JS_MAX_METADATA_LEN = 128 * 1024
DEFAULT_DUPLICATE_WINDOW_NS = 120 * SECOND
STREAM_MAX_REPLICAS = 5


# The policies of stream and consumer configs, named as nats-server names them. Each member *is*
# its wire spelling: a StrEnum is a str, compares and hashes equal to it, and ``json`` encoding,
# ``str()``, f-strings and ``%s`` all give the bare value, so configs serialise byte for byte as
# before (tests/unit/jetstream/test_policies_enum.py pins that). Only ``repr`` differs.
# ``StorageType`` and ``DiscardPolicy`` are the store's (:mod:`natsd.store.base`), re-exported.


class RetentionPolicy(enum.StrEnum):
    LIMITS = "limits"
    INTEREST = "interest"
    WORKQUEUE = "workqueue"


class StoreCompression(enum.StrEnum):
    NONE = "none"
    S2 = "s2"


class PersistMode(enum.StrEnum):
    """``persist_mode``; the default is kept as ``""`` (omitted from JSON, as the reference's
    omitempty does), a request's ``"default"`` decodes to it."""

    DEFAULT = ""
    ASYNC = "async"


class DeliverPolicy(enum.StrEnum):
    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class AckPolicy(enum.StrEnum):
    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"
    FLOW_CONTROL = "flow_control"


class ReplayPolicy(enum.StrEnum):
    INSTANT = "instant"
    ORIGINAL = "original"


class PriorityPolicy(enum.StrEnum):
    NONE = "none"
    OVERFLOW = "overflow"
    PINNED_CLIENT = "pinned_client"
    PRIORITIZED = "prioritized"


# The accepted spellings, for membership tests (members compare equal to plain strings).
RETENTION = tuple(RetentionPolicy)
DISCARD = tuple(DiscardPolicy)
STORAGE = tuple(StorageType)
COMPRESSION = tuple(StoreCompression)

ZERO_TIME = GO_ZERO_TIME

REQ_LEVEL_KEY = "_nats.req.level"
VERSION_KEY = "_nats.ver"
LEVEL_KEY = "_nats.level"


def server_version() -> str:
    """The version we advertise (``_nats.ver``), natsd's own."""
    return __version__


# RFC 3339 is natsd.gotime's; JetStream keeps "unset" as 0 ns, so its names are the *_or_zero
# pair (0 <-> Go's zero time). Imported from here by the rest of the package.
rfc3339 = format_rfc3339_or_zero
parse_rfc3339 = parse_rfc3339_or_zero


def is_valid_asset_name(name: str) -> bool:
    """Stream/consumer names: non-empty, no ``.`` ``*`` ``>`` ``\\`` ``/`` or whitespace."""
    if not name:
        return False
    for c in name:
        if c in ".*>\\/" or c.isspace():
            return False
    return True


# JSON fields of StreamConfig left out when zero (the reference's `omitempty`).
STREAM_OMITEMPTY = frozenset(
    {
        "description",
        "subjects",
        "max_msg_size",
        "no_ack",
        "duplicate_window",
        "placement",
        "mirror",
        "sources",
        "first_seq",
        "subject_transform",
        "republish",
        "discard_new_per_subject",
        "subject_delete_marker_ttl",
        "allow_msg_counter",
        "allow_atomic",
        "allow_msg_schedules",
        "persist_mode",
        "allow_batched",
        "metadata",
    }
)

# Go types of the scalar fields, for decoding and for the reference-like type error text.
_INT_FIELDS = {
    "max_consumers": "int",
    "max_msgs": "int64",
    "max_bytes": "int64",
    "max_age": "time.Duration",
    "max_msgs_per_subject": "int64",
    "max_msg_size": "int32",
    "num_replicas": "int",
    "duplicate_window": "time.Duration",
    "first_seq": "uint64",
    "subject_delete_marker_ttl": "time.Duration",
}
_BOOL_FIELDS = (
    "no_ack",
    "allow_direct",
    "mirror_direct",
    "discard_new_per_subject",
    "sealed",
    "deny_delete",
    "deny_purge",
    "allow_rollup_hdrs",
    "allow_msg_ttl",
    "allow_msg_counter",
    "allow_atomic",
    "allow_msg_schedules",
    "allow_batched",
)
_STR_FIELDS = ("name", "description")
_ENUMS: dict[str, type[enum.StrEnum]] = {"retention": RetentionPolicy, "discard": DiscardPolicy, "storage": StorageType}
_INT_RANGES = {
    "int": (-(2**63), 2**63 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "time.Duration": (-(2**63), 2**63 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint64": (0, 2**64 - 1),
}


def _type_error(v: Any, fname: str, gotype: str) -> ApiError:
    # Go names a number's literal only when it does not fit a numeric field ("number 1.5" into
    # int64); a number where a string or bool belongs is just "number".
    return ApiErrors.INVALID_JSON(
        err=f"json: cannot unmarshal {go_kind(v, literal=gotype in _INT_RANGES)} into Go struct field "
        f"StreamConfigRequest.{fname} of type {gotype}"
    )


@dataclass(slots=True)
class StreamConfig:
    """The reference's StreamConfig; attribute names are the JSON names, in the same order."""

    name: str = ""
    description: str = ""
    subjects: list[str] = field(default_factory=list)
    retention: RetentionPolicy = RetentionPolicy.LIMITS
    max_consumers: int = 0
    max_msgs: int = 0
    max_bytes: int = 0
    max_age: int = 0
    max_msgs_per_subject: int = 0
    max_msg_size: int = 0
    discard: DiscardPolicy = DiscardPolicy.OLD
    storage: StorageType = StorageType.FILE
    num_replicas: int = 0
    no_ack: bool = False
    duplicate_window: int = 0
    placement: dict | None = None
    mirror: dict | None = None
    sources: list[dict] | None = None
    compression: StoreCompression = StoreCompression.NONE
    first_seq: int = 0
    subject_transform: dict | None = None
    republish: dict | None = None
    allow_direct: bool = False
    mirror_direct: bool = False
    discard_new_per_subject: bool = False
    sealed: bool = False
    deny_delete: bool = False
    deny_purge: bool = False
    allow_rollup_hdrs: bool = False
    consumer_limits: dict = field(default_factory=dict)
    allow_msg_ttl: bool = False
    subject_delete_marker_ttl: int = 0
    allow_msg_counter: bool = False
    allow_atomic: bool = False
    allow_msg_schedules: bool = False
    persist_mode: PersistMode = PersistMode.DEFAULT  # "" = "default" (omitted), "async"
    allow_batched: bool = False
    metadata: dict[str, str] | None = None

    # ----------------------------------------------------------------------------------------
    @classmethod
    def from_json(cls, d: dict) -> "StreamConfig":
        """Decode a request/stored config dict as Go's encoding/json would (unknown keys are
        ignored, ``null`` leaves the zero value). Type mismatches raise INVALID_JSON (10025)."""
        cfg = cls()
        for k, v in d.items():
            if v is None:
                continue
            if k in _INT_FIELDS:
                gotype = _INT_FIELDS[k]
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise _type_error(v, k, gotype)
                if isinstance(v, float):
                    if not v.is_integer():
                        raise _type_error(v, k, gotype)
                    v = int(v)
                lo, hi = _INT_RANGES[gotype]
                if not lo <= v <= hi:
                    raise _type_error(v, k, gotype)
                setattr(cfg, k, v)
            elif k in _BOOL_FIELDS:
                if not isinstance(v, bool):
                    raise _type_error(v, k, "bool")
                setattr(cfg, k, v)
            elif k in _STR_FIELDS:
                if not isinstance(v, str):
                    raise _type_error(v, k, "string")
                setattr(cfg, k, v)
            elif k in _ENUMS:
                if k == "discard" and isinstance(v, str):
                    v = v.lower()
                try:
                    setattr(cfg, k, _ENUMS[k](v))  # a member from its wire spelling
                except ValueError:
                    raise ApiErrors.INVALID_JSON(err=f"can not unmarshal {_go_quote(v)}") from None
            elif k == "compression":
                if not isinstance(v, str):
                    raise _type_error(v, k, "string")
                if v not in COMPRESSION:
                    raise ApiErrors.INVALID_JSON(err="unknown compression algorithm")
                cfg.compression = StoreCompression(v)
            elif k == "persist_mode":
                if v not in ("default", "async", ""):
                    raise ApiErrors.INVALID_JSON(err=f"can not unmarshal {_go_quote(v)}")
                cfg.persist_mode = PersistMode.ASYNC if v == "async" else PersistMode.DEFAULT
            elif k == "subjects":
                if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
                    raise _type_error(v, k, "[]string")
                cfg.subjects = list(v)
            elif k == "metadata":
                if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
                    raise _type_error(v, k, "map[string]string")
                cfg.metadata = dict(v)
            elif k in ("placement", "mirror", "subject_transform", "republish"):
                if not isinstance(v, dict):
                    raise _type_error(v, k, "struct")
                setattr(cfg, k, dict(v))
            elif k == "sources":
                if not isinstance(v, list) or not all(isinstance(s, dict) or s is None for s in v):
                    raise _type_error(v, k, "[]*StreamSource")
                cfg.sources = [dict(s) if s is not None else None for s in v]  # type: ignore[misc]
            elif k == "consumer_limits":
                if not isinstance(v, dict):
                    raise _type_error(v, k, "StreamConsumerLimits")
                cl: dict = {}
                for ck in ("inactive_threshold", "max_ack_pending"):
                    cv = v.get(ck)
                    if cv is None:
                        continue
                    if isinstance(cv, bool) or not isinstance(cv, int):
                        raise _type_error(cv, "consumer_limits." + ck, "int")
                    if cv:
                        cl[ck] = cv
                cfg.consumer_limits = cl
        return cfg

    def to_json(self) -> dict:
        """The config as the reference serialises it (struct order, omitempty applied)."""
        out: dict = {}
        for f in fields(self):
            k = f.name
            v = getattr(self, k)
            if k in STREAM_OMITEMPTY and not v:
                continue
            if k == "metadata":
                v = dict(sorted(v.items()))  # Go sorts map keys
            elif k == "sources":
                v = [_source_json(s) for s in v]
            elif k == "mirror":
                v = _source_json(v)
            elif k == "republish":
                v = _republish_json(v)
            elif k == "subject_transform":
                v = {"src": v.get("src", ""), "dest": v.get("dest", "")}
            elif k == "placement":
                v = _placement_json(v)
            elif k == "consumer_limits":
                v = {ck: v[ck] for ck in ("inactive_threshold", "max_ack_pending") if v.get(ck)}
            elif k == "subjects":
                v = list(v)
            out[k] = v
        return out

    def copy(self) -> "StreamConfig":
        return StreamConfig.from_json(self.to_json())

    def comparable(self) -> dict:
        """to_json() without dynamic metadata, for "same config?" checks."""
        d = self.to_json()
        md = d.get("metadata")
        if md is not None:
            md = strip_dynamic_metadata(md, keep_req_level=False)
            if md:
                d["metadata"] = md
            else:
                d.pop("metadata")
        return d


def _go_quote(v: Any) -> str:
    import json as _json

    return _json.dumps(_json.dumps(v, separators=(",", ":")))


def _source_json(s: dict | None) -> dict | None:
    if s is None:
        return None
    out: dict = {"name": s.get("name", "")}
    if s.get("opt_start_seq"):
        out["opt_start_seq"] = s["opt_start_seq"]
    if s.get("opt_start_time"):
        out["opt_start_time"] = s["opt_start_time"]
    if s.get("filter_subject"):
        out["filter_subject"] = s["filter_subject"]
    if s.get("subject_transforms"):
        out["subject_transforms"] = [
            {"src": t.get("src", ""), "dest": t.get("dest", "")} for t in s["subject_transforms"]
        ]
    if s.get("external"):
        e = s["external"]
        out["external"] = {"api": e.get("api", ""), "deliver": e.get("deliver", "")}
    if s.get("consumer"):
        c = s["consumer"]
        out["consumer"] = {k: c[k] for k in ("name", "deliver_subject") if c.get(k)}
    return out


def _republish_json(r: dict) -> dict:
    out: dict = {}
    if r.get("src"):
        out["src"] = r["src"]
    out["dest"] = r.get("dest", "")
    if r.get("headers_only"):
        out["headers_only"] = True
    return out


def _placement_json(p: dict) -> dict:
    out: dict = {}
    for k in ("cluster", "tags", "preferred"):
        if p.get(k):
            out[k] = p[k]
    return out


def strip_dynamic_metadata(md: dict | None, keep_req_level: bool = True) -> dict:
    """Metadata without ``_nats.ver``/``_nats.level`` (and ``_nats.req.level`` unless kept)."""
    if not md:
        return {}
    out = {k: v for k, v in md.items() if k not in (VERSION_KEY, LEVEL_KEY)}
    if not keep_req_level:
        out.pop(REQ_LEVEL_KEY, None)
    return out


def required_api_level(cfg: StreamConfig) -> int:
    lvl = 0
    if cfg.allow_msg_ttl or cfg.subject_delete_marker_ttl > 0:
        lvl = 1
    if cfg.allow_msg_counter or cfg.allow_atomic or cfg.allow_msg_schedules or cfg.persist_mode == "async":
        lvl = max(lvl, 2)
    if cfg.allow_batched:
        lvl = max(lvl, 4)
    return lvl


def set_static_metadata(cfg: StreamConfig) -> None:
    """Store-side metadata: user keys plus ``_nats.req.level`` (as the reference persists it)."""
    md = strip_dynamic_metadata(cfg.metadata)
    md[REQ_LEVEL_KEY] = str(required_api_level(cfg))
    cfg.metadata = md


def with_dynamic_metadata(cfg_json: dict) -> dict:
    """A config JSON dict with ``_nats.ver`` and ``_nats.level`` added (INFO/CREATE replies)."""
    out = dict(cfg_json)
    md = dict(out.get("metadata") or {})
    md[VERSION_KEY] = server_version()
    md[LEVEL_KEY] = str(JS_API_LEVEL)
    out["metadata"] = dict(sorted(md.items()))
    return out


def state_to_json(
    st: StreamState, consumers: int, subjects: dict[str, int] | None = None, deleted_details: bool = False
) -> dict:
    """A store StreamState -> the reference's StreamState JSON (omitempty as the reference)."""
    out: dict = {
        "messages": st.msgs,
        "bytes": st.bytes,
        "first_seq": st.first_seq,
        "first_ts": rfc3339(st.first_ts),
        "last_seq": st.last_seq,
        "last_ts": rfc3339(st.last_ts),
    }
    if st.num_subjects:
        out["num_subjects"] = st.num_subjects
    if subjects:
        out["subjects"] = subjects
    if st.num_deleted:
        out["num_deleted"] = st.num_deleted
    if deleted_details and st.deleted:
        out["deleted"] = list(st.deleted)
    if st.lost_msgs:
        out["lost"] = {"msgs": list(st.lost_msgs), "bytes": st.lost_bytes}
    out["consumer_count"] = consumers
    return out
