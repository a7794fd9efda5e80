"""ConsumerConfig: the JSON a client sends to create a consumer, with nats-server's defaults,
validation and update rules.

Field names, order and ``omitempty`` behaviour follow nats-server's ``ConsumerConfig``
(``server/consumer.go``); durations are int64 nanoseconds and times RFC 3339 strings on the
wire. :func:`ConsumerConfig.from_json` parses a request body, :meth:`ConsumerConfig.set_defaults`
fills what the reference fills (``setConsumerConfigDefaults``), :meth:`ConsumerConfig.check`
rejects what the reference rejects (``checkConsumerCfg``) and :func:`check_update` applies the
rules for changing an existing consumer (``checkNewConsumerConfig``). Errors are
:class:`~natsd.jetstream.errors.ApiError` rows from the shared table.
"""

from __future__ import annotations

import enum
import re
from dataclasses import field, fields, replace
from typing import Any

from natsd.lazydataclass import dataclass
from natsd.gotime import GO_ZERO_TIME, format_duration, format_rfc3339, parse_rfc3339
from natsd.jetstream.errors import ApiError, ApiErrors
from natsd.jetstream.gojson import go_kind
from natsd.jetstream.config.models import (
    JS_API_LEVEL,
    AckPolicy,
    DeliverPolicy,
    PriorityPolicy,
    ReplayPolicy,
    StreamConfig,
    server_version,
)
from natsd.subjects.tokens import is_literal, is_valid_subject, subject_matches, subset

__all__ = [
    "ConsumerConfig",
    "check_update",
    "MS",
    "SECOND",
    "ACK_WAIT_DEFAULT",
    "DELETE_WAIT_DEFAULT",
    "MAX_ACK_PENDING_DEFAULT",
    "MAX_WAITING_DEFAULT",
    "DELIVER_POLICIES",
    "ACK_POLICIES",
    "REPLAY_POLICIES",
    "PRIORITY_POLICIES",
    "ZERO_TIME",
    "API_LEVEL",
    "is_valid_asset_name",
    "GROUP_NAME_RE",
]

MS = 1_000_000
SECOND = 1_000_000_000
ACK_WAIT_DEFAULT = 30 * SECOND  # JsAckWaitDefault
DELETE_WAIT_DEFAULT = 5 * SECOND  # JsDeleteWaitTimeDefault (ephemeral inactive threshold)
MAX_ACK_PENDING_DEFAULT = 1000  # JsDefaultMaxAckPending
MAX_WAITING_DEFAULT = 512  # JSWaitQueueDefaultMax
PINNED_TTL_DEFAULT = 120 * SECOND  # JsDefaultPinnedTTL
SOURCE_HEALTH_HB = 1 * SECOND  # sourceHealthHB, forced for ack policy flow_control
MAX_DESCRIPTION_LEN = 4 * 1024  # JSMaxDescriptionLen
MAX_METADATA_LEN = 128 * 1024  # JSMaxMetadataLen
MAX_NAME_LEN = 255  # JSMaxNameLen

#: ``_nats.level`` in responses: the API level the streams side claims (shared with streams).
API_LEVEL = JS_API_LEVEL

# The accepted spellings (the enums' members compare equal to these strings).
DELIVER_POLICIES = tuple(DeliverPolicy)
ACK_POLICIES = tuple(AckPolicy)
REPLAY_POLICIES = tuple(ReplayPolicy)
PRIORITY_POLICIES = tuple(PriorityPolicy)

#: Go's zero time.Time as it marshals.
ZERO_TIME = GO_ZERO_TIME

#: A priority group name (nats-server's validGroupName), for the config and CONSUMER.UNPIN.
GROUP_NAME_RE = re.compile(r"^[a-zA-Z0-9/_=-]{1,16}$")


def is_valid_asset_name(name: str) -> bool:
    """Stream/consumer names: no '.', '*', '>', path separators or whitespace; <= 255 bytes."""
    if not name or len(name.encode()) > MAX_NAME_LEN:
        return False
    for ch in name:
        if ch in ".*>/\\" or ch.isspace():
            return False
    return True


# ---------------------------------------------------------------------------------------------
# The config.


def _bad_json(msg: str) -> ApiError:
    return ApiErrors.INVALID_JSON(err=msg)


def _want_int(key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        raise _bad_json(
            f"json: cannot unmarshal {go_kind(v)} into Go struct field ConsumerConfig.config.{key} of type int64"
        )
    return v


def _want_str(key: str, v: Any) -> str:
    if not isinstance(v, str):
        raise _bad_json(
            f"json: cannot unmarshal {go_kind(v)} into Go struct field ConsumerConfig.config.{key} of type string"
        )
    return v


def _want_bool(key: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise _bad_json(
            f"json: cannot unmarshal {go_kind(v)} into Go struct field ConsumerConfig.config.{key} of type bool"
        )
    return v


@dataclass(slots=True)
class ConsumerConfig:
    """A consumer's configuration; attribute names are the JSON names.

    Times (``opt_start_time``, ``pause_until``) are Unix ns or ``None``; durations are ns.
    """

    durable_name: str = ""
    name: str = ""
    description: str = ""
    deliver_policy: DeliverPolicy = DeliverPolicy.ALL
    opt_start_seq: int = 0
    opt_start_time: int | None = None
    ack_policy: AckPolicy = AckPolicy.NONE
    ack_wait: int = 0
    max_deliver: int = 0
    backoff: list[int] = field(default_factory=list)
    filter_subject: str = ""
    filter_subjects: list[str] = field(default_factory=list)
    replay_policy: ReplayPolicy = ReplayPolicy.INSTANT
    rate_limit_bps: int = 0
    sample_freq: str = ""
    max_waiting: int = 0
    max_ack_pending: int = 0
    flow_control: bool = False
    headers_only: bool = False
    max_batch: int = 0
    max_expires: int = 0
    max_bytes: int = 0
    deliver_subject: str = ""
    deliver_group: str = ""
    idle_heartbeat: int = 0
    inactive_threshold: int = 0
    num_replicas: int = 0
    mem_storage: bool = False
    direct: bool = False
    sourcing: bool = False
    metadata: dict[str, str] | None = None
    pause_until: int | None = None
    priority_groups: list[str] = field(default_factory=list)
    priority_policy: PriorityPolicy = PriorityPolicy.NONE
    priority_timeout: int = 0

    # -- JSON ------------------------------------------------------------------------------
    @classmethod
    def from_json(cls, obj: Any) -> "ConsumerConfig":
        """Parse the ``config`` object of a create request (unknown keys are ignored, as Go's
        encoding/json does). Type errors raise INVALID_JSON (10025)."""
        if obj is None:
            return cls()
        if not isinstance(obj, dict):
            raise _bad_json(
                f"json: cannot unmarshal {go_kind(obj)} into Go struct field CreateConsumerRequest.config of type "
                "server.ConsumerConfig"
            )
        c = cls()
        for key, v in obj.items():
            if v is None:
                continue  # JSON null leaves the zero value, as in Go
            if key in _STR_FIELDS:
                setattr(c, key, _want_str(key, v))
            elif key in _INT_FIELDS:
                setattr(c, key, _want_int(key, v))
            elif key in _BOOL_FIELDS:
                setattr(c, key, _want_bool(key, v))
            elif key in _ENUMS:
                try:
                    setattr(c, key, _ENUMS[key](v))  # a member from its wire spelling
                except ValueError:
                    if key == "deliver_policy" and v == "undefined":
                        c.deliver_policy = DeliverPolicy.ALL
                        continue
                    if key == "priority_policy":
                        raise _bad_json(f"unknown priority policy: {_dumps(v)}") from None
                    raise _bad_json(f"can not unmarshal {_go_quote(_dumps(v))}") from None
            elif key in ("opt_start_time", "pause_until"):
                s = _want_str(key, v)
                try:
                    setattr(c, key, parse_rfc3339(s))
                except ValueError as e:
                    raise _bad_json(f'parsing time {_dumps(s)} as "2006-01-02T15:04:05Z07:00": {e}') from None
            elif key == "backoff":
                if not isinstance(v, list):
                    raise _bad_json(
                        f"json: cannot unmarshal {go_kind(v)} into Go struct field ConsumerConfig.config.backoff "
                        "of type []time.Duration"
                    )
                c.backoff = [_want_int(key, x) for x in v]
            elif key in ("filter_subjects", "priority_groups"):
                if not isinstance(v, list):
                    raise _bad_json(
                        f"json: cannot unmarshal {go_kind(v)} into Go struct field ConsumerConfig.config.{key} of "
                        "type []string"
                    )
                setattr(c, key, [_want_str(key, x) for x in v])
            elif key == "metadata":
                if not isinstance(v, dict):
                    raise _bad_json(
                        f"json: cannot unmarshal {go_kind(v)} into Go struct field ConsumerConfig.config.metadata "
                        "of type map[string]string"
                    )
                c.metadata = {str(k): _want_str(key, x) for k, x in v.items()}
        return c

    def to_json(self, dynamic_metadata: bool = False) -> dict:
        """The config as the reference marshals it: Go struct order, zero values omitted except
        ``deliver_policy``, ``ack_policy``, ``replay_policy`` and ``num_replicas``.

        ``dynamic_metadata`` adds ``_nats.level`` / ``_nats.ver`` (API responses do, stored
        configs and LIST entries do not)."""
        out: dict[str, Any] = {}
        if self.durable_name:
            out["durable_name"] = self.durable_name
        if self.name:
            out["name"] = self.name
        if self.description:
            out["description"] = self.description
        out["deliver_policy"] = self.deliver_policy
        if self.opt_start_seq:
            out["opt_start_seq"] = self.opt_start_seq
        if self.opt_start_time is not None:
            out["opt_start_time"] = format_rfc3339(self.opt_start_time)
        out["ack_policy"] = self.ack_policy
        if self.ack_wait:
            out["ack_wait"] = self.ack_wait
        if self.max_deliver:
            out["max_deliver"] = self.max_deliver
        if self.backoff:
            out["backoff"] = list(self.backoff)
        if self.filter_subject:
            out["filter_subject"] = self.filter_subject
        if self.filter_subjects:
            out["filter_subjects"] = list(self.filter_subjects)
        out["replay_policy"] = self.replay_policy
        for key in (
            "rate_limit_bps",
            "sample_freq",
            "max_waiting",
            "max_ack_pending",
            "flow_control",
            "headers_only",
            "max_batch",
            "max_expires",
            "max_bytes",
            "deliver_subject",
            "deliver_group",
            "idle_heartbeat",
            "inactive_threshold",
        ):
            v = getattr(self, key)
            if v:
                out[key] = v
        out["num_replicas"] = self.num_replicas
        for key in ("mem_storage", "direct", "sourcing"):
            if getattr(self, key):
                out[key] = True
        md = dict(self.metadata) if self.metadata else {}
        if dynamic_metadata:
            md["_nats.level"] = str(API_LEVEL)
            md["_nats.ver"] = server_version()
        if md:
            out["metadata"] = {k: md[k] for k in sorted(md)}  # Go marshals maps sorted by key
        if self.pause_until is not None:
            out["pause_until"] = format_rfc3339(self.pause_until)
        if self.priority_groups:
            out["priority_groups"] = list(self.priority_groups)
        if self.priority_policy != "none":
            out["priority_policy"] = self.priority_policy
        if self.priority_timeout:
            out["priority_timeout"] = self.priority_timeout
        return out

    def copy(self) -> "ConsumerConfig":
        return replace(
            self,
            backoff=list(self.backoff),
            filter_subjects=list(self.filter_subjects),
            metadata=dict(self.metadata) if self.metadata is not None else None,
            priority_groups=list(self.priority_groups),
        )

    # -- derived ---------------------------------------------------------------------------
    @property
    def is_push(self) -> bool:
        return bool(self.deliver_subject)

    @property
    def is_durable(self) -> bool:
        return bool(self.durable_name)

    def filters(self) -> list[str]:
        """The subject filters (``filter_subject`` or ``filter_subjects``), ``[]`` = everything.
        A lone ``>`` filter is the same as none."""
        if self.filter_subject:
            return [] if self.filter_subject == ">" else [self.filter_subject]
        fs = [f for f in self.filter_subjects]
        return [] if fs == [">"] else fs

    def sample_percent(self) -> int:
        if not self.sample_freq:
            return 0
        try:
            return int(self.sample_freq.rstrip("%"))
        except ValueError:
            return 0

    # -- defaults and validation ------------------------------------------------------------
    def set_default_metadata(self) -> None:
        """Record ``_nats.req.level`` (the minimum API level this config needs), dropping the
        dynamic keys a client may have echoed back (``setStaticConsumerMetadata``)."""
        md = dict(self.metadata) if self.metadata else {}
        md.pop("_nats.level", None)
        md.pop("_nats.ver", None)
        level = 0
        if self.pause_until:
            level = max(level, 1)
        if self.priority_policy != "none" or self.priority_timeout or self.priority_groups:
            level = max(level, 1)
        if self.ack_policy == "flow_control":
            level = max(level, 4)
        md["_nats.req.level"] = str(level)
        self.metadata = md

    def set_defaults(
        self, stream_limits: dict | None = None, acc_max_ack_pending: int = -1, pedantic: bool = False
    ) -> None:
        """Fill defaults as ``setConsumerConfigDefaults``. ``stream_limits`` is the stream's
        ``consumer_limits`` ({inactive_threshold, max_ack_pending})."""
        sl = stream_limits or {}
        sl_map = int(sl.get("max_ack_pending", 0) or 0)
        sl_inact = int(sl.get("inactive_threshold", 0) or 0)

        def ped(msg: str) -> None:
            if pedantic:
                raise ApiErrors.PEDANTIC(err=msg)

        if self.max_deliver == 0 or self.max_deliver < -1:
            if self.max_deliver < -1:
                ped("max_deliver must be set to -1")
            self.max_deliver = -1
        for key, msg in (
            ("max_waiting", "max_waiting must not be negative"),
            ("max_batch", "max_batch must not be negative"),
            ("max_expires", "max_expires must not be negative"),
            ("max_bytes", "max_bytes must not be negative"),
            ("idle_heartbeat", "idle_heartbeat must not be negative"),
            ("inactive_threshold", "inactive_threshold must not be negative"),
            ("priority_timeout", "priority_timeout must not be negative"),
        ):
            if getattr(self, key) < 0:
                ped(msg)
                setattr(self, key, 0)
        if self.max_ack_pending < -1:
            ped("max_ack_pending must be set to -1")
            self.max_ack_pending = -1
        if not self.deliver_subject and self.max_waiting == 0:
            self.max_waiting = MAX_WAITING_DEFAULT
        if self.ack_wait == 0 and self.ack_policy in ("explicit", "all"):
            self.ack_wait = ACK_WAIT_DEFAULT
        if self.backoff:
            if pedantic and self.ack_wait != self.backoff[0]:
                ped("first backoff value has to equal batch AckWait")
            self.ack_wait = self.backoff[0]
        if self.max_ack_pending == 0:
            if sl_map > 0:
                ped("max_ack_pending must be set if it's configured in stream limits")
            self.max_ack_pending = sl_map
        if self.inactive_threshold == 0:
            if sl_inact > 0:
                ped("inactive_threshold must be set if it's configured in stream limits")
            self.inactive_threshold = sl_inact
        if self.max_ack_pending == 0 and self.ack_policy != "none":
            mp = MAX_ACK_PENDING_DEFAULT
            if 0 < acc_max_ack_pending < mp:
                mp = acc_max_ack_pending
            self.max_ack_pending = mp
        if self.priority_policy == "pinned_client" and self.priority_timeout == 0:
            self.priority_timeout = PINNED_TTL_DEFAULT
        if self.ack_policy == "flow_control" and not pedantic:
            self.flow_control = True
            self.idle_heartbeat = SOURCE_HEALTH_HB

    def check(self, stream_cfg: StreamConfig, acc_max_ack_pending: int = -1) -> None:
        """Validate as ``checkConsumerCfg`` (same order, same errors), for a consumer of a
        stream with config ``stream_cfg``."""
        retention = stream_cfg.retention
        s_replicas = stream_cfg.num_replicas or 1
        limits = stream_cfg.consumer_limits or {}

        if self.name and not is_valid_asset_name(self.name):
            raise ApiErrors.STREAM_INVALID_CONFIG(err="consumer name can not contain '.', '*', '>', '\\', '/'")
        if self.durable_name and not is_valid_asset_name(self.durable_name):
            raise ApiErrors.STREAM_INVALID_CONFIG(err="consumer durable name can not contain '.', '*', '>', '\\', '/'")
        if self.num_replicas > 0 and self.num_replicas > s_replicas:
            raise ApiErrors.CONSUMER_REPLICAS_EXCEEDS_STREAM()
        if self.num_replicas < 0:
            raise ApiErrors.REPLICAS_COUNT_CANNOT_BE_NEGATIVE()
        if retention in ("interest", "workqueue") and self.num_replicas not in (0, s_replicas):
            raise ApiErrors.CONSUMER_REPLICAS_SHOULD_MATCH_STREAM()
        if any(b < 0 for b in self.backoff):
            raise ApiErrors.CONSUMER_BACK_OFF_NEGATIVE()
        if self.ack_wait < 0:
            raise ApiErrors.CONSUMER_ACK_WAIT_NEGATIVE()
        if self.ack_policy == "flow_control":
            if not self.deliver_subject:
                raise ApiErrors.CONSUMER_ACK_FC_REQUIRES_PUSH()
            if not self.flow_control:
                raise ApiErrors.CONSUMER_ACK_FC_REQUIRES_FC()
            if self.idle_heartbeat != SOURCE_HEALTH_HB:
                raise ApiErrors.STREAM_INVALID_CONFIG(err="flow control ack policy heartbeat needs to be 1s")
            if self.max_ack_pending <= 0:
                raise ApiErrors.CONSUMER_ACK_FC_REQUIRES_MAX_ACK_PENDING()
            if self.ack_wait != 0 or self.backoff:
                raise ApiErrors.CONSUMER_ACK_FC_REQUIRES_NO_ACK_WAIT()
            if self.max_deliver > 0:
                raise ApiErrors.CONSUMER_ACK_FC_REQUIRES_NO_MAX_DELIVER()
        if self.backoff and self.max_deliver != -1 and len(self.backoff) > self.max_deliver:
            raise ApiErrors.CONSUMER_MAX_DELIVER_BACKOFF()
        if len(self.description) > MAX_DESCRIPTION_LEN:
            raise ApiErrors.CONSUMER_DESCRIPTION_TOO_LONG(max=MAX_DESCRIPTION_LEN)

        if self.deliver_subject:
            if not is_literal(self.deliver_subject):
                raise ApiErrors.CONSUMER_DELIVER_TO_WILDCARDS()
            if not is_valid_subject(self.deliver_subject):
                raise ApiErrors.CONSUMER_INVALID_DELIVER_SUBJECT()
            for s in stream_cfg.subjects:
                if subject_matches(s, self.deliver_subject):
                    raise ApiErrors.CONSUMER_DELIVER_CYCLE()
            if self.max_waiting != 0:
                raise ApiErrors.CONSUMER_PUSH_MAX_WAITING()
            if self.max_ack_pending > 0 and self.ack_policy == "none":
                raise ApiErrors.CONSUMER_MAX_PENDING_ACK_POLICY_REQUIRED()
            if 0 < self.idle_heartbeat < 100 * MS:
                raise ApiErrors.CONSUMER_SMALL_HEARTBEAT()
        else:
            if self.ack_policy == "none" and retention == "workqueue":
                raise ApiErrors.CONSUMER_PULL_REQUIRES_ACK()
            if self.rate_limit_bps > 0:
                raise ApiErrors.CONSUMER_PULL_WITH_RATE_LIMIT()
            if self.max_waiting < 0:
                raise ApiErrors.CONSUMER_MAX_WAITING_NEGATIVE()
            if self.idle_heartbeat > 0:
                raise ApiErrors.CONSUMER_HB_REQUIRES_PUSH()
            if self.flow_control:
                raise ApiErrors.CONSUMER_FC_REQUIRES_PUSH()
            if self.max_batch < 0:
                raise ApiErrors.CONSUMER_MAX_REQUEST_BATCH_NEGATIVE()
            if self.max_expires != 0 and self.max_expires < MS:
                raise ApiErrors.CONSUMER_MAX_REQUEST_EXPIRES_TOO_SMALL()
        if acc_max_ack_pending > 0 and self.max_ack_pending > acc_max_ack_pending:
            raise ApiErrors.CONSUMER_MAX_PENDING_ACK_EXCESS(limit=acc_max_ack_pending)
        s_map = int(limits.get("max_ack_pending", 0) or 0)
        if s_map > 0 and self.max_ack_pending > s_map:
            raise ApiErrors.CONSUMER_MAX_PENDING_ACK_EXCESS(limit=s_map)
        s_inact = int(limits.get("inactive_threshold", 0) or 0)
        if s_inact > 0 and self.inactive_threshold > s_inact:
            raise ApiErrors.CONSUMER_INACTIVE_THRESHOLD_EXCESS(limit=format_duration(s_inact))
        if self.direct:
            if not self.deliver_subject:
                raise ApiErrors.CONSUMER_DIRECT_REQUIRES_PUSH()
            if self.durable_name:
                raise ApiErrors.CONSUMER_DIRECT_REQUIRES_EPHEMERAL()
        if self.filter_subject and self.filter_subjects:
            raise ApiErrors.CONSUMER_DUPLICATE_FILTER_SUBJECTS()
        if self.filter_subject and not is_valid_subject(self.filter_subject):
            raise ApiErrors.STREAM_INVALID_CONFIG(err="invalid subject")
        if any(f == "" for f in self.filter_subjects):
            raise ApiErrors.CONSUMER_EMPTY_FILTER()
        subjects = [self.filter_subject] if self.filter_subject else list(self.filter_subjects)
        for i, s in enumerate(subjects):
            if not is_valid_subject(s):
                raise ApiErrors.STREAM_INVALID_CONFIG(err="invalid subject")
            for j, t in enumerate(subjects):
                if i != j and subset(s, t):
                    raise ApiErrors.CONSUMER_OVERLAPPING_SUBJECT_FILTERS()

        def bad_start(dp: str, start: str) -> ApiError:
            return ApiErrors.CONSUMER_INVALID_POLICY(
                err=f"consumer delivery policy is deliver {dp}, but optional start {start} is also set"
            )

        def not_set(dp: str, what: str) -> ApiError:
            return ApiErrors.CONSUMER_INVALID_POLICY(
                err=f"consumer delivery policy is deliver {dp}, but optional {what} is not set"
            )

        dp = self.deliver_policy
        if dp in ("all", "last", "new", "last_per_subject"):
            label = "last per subject" if dp == "last_per_subject" else dp
            if self.opt_start_seq > 0:
                raise bad_start(label, "sequence")
            if self.opt_start_time is not None:
                raise bad_start(label, "time")
            if dp == "last_per_subject" and not subjects:
                raise not_set(label, "filter subject")
        elif dp == "by_start_sequence":
            if self.opt_start_seq == 0:
                raise not_set("by start sequence", "start sequence")
            if self.opt_start_time is not None:
                raise bad_start("by start sequence", "time")
        elif dp == "by_start_time":
            if self.opt_start_time is None:
                raise not_set("by start time", "start time")
            if self.opt_start_seq != 0:
                raise bad_start("by start time", "start sequence")

        if self.sample_freq:
            s = self.sample_freq[:-1] if self.sample_freq.endswith("%") else self.sample_freq
            # Go's strconv.Atoi error, or "<nil>" for a well-formed negative number (the reference
            # formats the nil error it had).
            if not re.fullmatch(r"[+-]?\d+", s):
                raise ApiErrors.CONSUMER_INVALID_SAMPLING(err=f'strconv.Atoi: parsing "{s}": invalid syntax')
            if not -(1 << 63) <= int(s) < (1 << 63):
                raise ApiErrors.CONSUMER_INVALID_SAMPLING(err=f'strconv.Atoi: parsing "{s}": value out of range')
            if int(s) < 0:
                raise ApiErrors.CONSUMER_INVALID_SAMPLING(err="<nil>")
        if self.flow_control and self.idle_heartbeat == 0:
            raise ApiErrors.CONSUMER_WITH_FLOW_CONTROL_NEEDS_HEARTBEATS()
        if self.durable_name and self.name and self.name != self.durable_name:
            raise ApiErrors.CONSUMER_CREATE_DURABLE_AND_NAME_MISMATCH()
        if self.metadata:
            if sum(len(k) + len(v) for k, v in self.metadata.items()) > MAX_METADATA_LEN:
                raise ApiErrors.CONSUMER_METADATA_LENGTH(limit=f"{MAX_METADATA_LEN // 1024}KB")
        if self.priority_policy != "none":
            if self.deliver_subject:
                raise ApiErrors.CONSUMER_PUSH_WITH_PRIORITY_GROUP()
            if not self.priority_groups:
                raise ApiErrors.CONSUMER_PRIORITY_POLICY_WITHOUT_GROUP()
            for g in self.priority_groups:
                if g == "":
                    raise ApiErrors.CONSUMER_EMPTY_GROUP_NAME()
                if not GROUP_NAME_RE.match(g):
                    raise ApiErrors.CONSUMER_INVALID_GROUP_NAME()
        else:
            if self.priority_groups:
                raise ApiErrors.CONSUMER_PRIORITY_GROUP_WITH_POLICY_NONE()
            if self.priority_timeout > 0:
                raise ApiErrors.CONSUMER_PINNED_TTL_WITHOUT_PRIORITY_POLICY_NONE()

    def same_as(self, other: "ConsumerConfig") -> bool:
        """Deep equality ignoring the dynamic metadata keys (``_nats.level``, ``_nats.ver``)."""
        a, b = self.copy(), other.copy()
        for c in (a, b):
            if c.metadata:
                c.metadata.pop("_nats.level", None)
                c.metadata.pop("_nats.ver", None)
                if not c.metadata:
                    c.metadata = None
        return a == b


def check_update(old: ConsumerConfig, new: ConsumerConfig, deliver_subject_has_interest: bool = False) -> None:
    """Raise CONSUMER_CREATE (10012, the reason as text) if ``new`` changes what a consumer can
    not change (``checkNewConsumerConfig``)."""
    if old == new:
        return

    def fail(msg: str) -> None:
        raise ApiErrors.CONSUMER_CREATE(err=msg)

    if old.deliver_policy != new.deliver_policy:
        fail("deliver policy can not be updated")
    if old.mem_storage != new.mem_storage:
        fail("storage type can not be updated")
    if old.direct != new.direct:
        fail("direct can not be updated")
    if old.sourcing != new.sourcing:
        fail("sourcing can not be updated")
    if old.opt_start_seq != new.opt_start_seq:
        fail("start sequence can not be updated")
    if old.opt_start_time != new.opt_start_time:
        fail("start time can not be updated")
    if old.ack_policy != new.ack_policy:
        fail("ack policy can not be updated")
    if old.replay_policy != new.replay_policy:
        fail("replay policy can not be updated")
    if old.idle_heartbeat != new.idle_heartbeat:
        fail("heart beats can not be updated")
    if old.flow_control != new.flow_control:
        fail("flow control can not be updated")
    if old.deliver_subject != new.deliver_subject:
        if not old.deliver_subject:
            fail("can not update pull consumer to push based")
        if not new.deliver_subject:
            fail("can not update push consumer to pull based")
        if deliver_subject_has_interest:
            raise ApiErrors.CONSUMER_NAME_EXIST()
    if old.max_waiting != new.max_waiting:
        fail("max waiting can not be updated")
    if new.backoff and new.max_deliver != -1 and len(new.backoff) > new.max_deliver:
        raise ApiErrors.CONSUMER_MAX_DELIVER_BACKOFF()


def _dumps(v: Any) -> str:
    import json

    return json.dumps(v)


def _go_quote(s: str) -> str:
    # fmt's %q of the raw JSON bytes: a Go-quoted string.
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


_STR_FIELDS = frozenset(
    {"durable_name", "name", "description", "filter_subject", "sample_freq", "deliver_subject", "deliver_group"}
)
_INT_FIELDS = frozenset(
    {
        "opt_start_seq",
        "ack_wait",
        "max_deliver",
        "rate_limit_bps",
        "max_waiting",
        "max_ack_pending",
        "max_batch",
        "max_expires",
        "max_bytes",
        "idle_heartbeat",
        "inactive_threshold",
        "num_replicas",
        "priority_timeout",
    }
)
_BOOL_FIELDS = frozenset({"flow_control", "headers_only", "mem_storage", "direct", "sourcing"})
_ENUMS: dict[str, type[enum.StrEnum]] = {
    "deliver_policy": DeliverPolicy,
    "ack_policy": AckPolicy,
    "replay_policy": ReplayPolicy,
    "priority_policy": PriorityPolicy,
}

assert {f.name for f in fields(ConsumerConfig)} == (
    _STR_FIELDS
    | _INT_FIELDS
    | _BOOL_FIELDS
    | set(_ENUMS)
    | {"opt_start_time", "pause_until", "backoff", "filter_subjects", "priority_groups", "metadata"}
)
