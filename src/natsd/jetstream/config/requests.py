"""The Go request structs of the ``$JS.API``, as data: what nats-server decodes each request body into.

Names, JSON field names and Go types follow nats-server (``jetstream_api.go``, ``stream.go``,
``consumer.go``); embedded structs are flattened into their outer struct, as Go's decoder sees them.
:mod:`natsd.jetstream.gojson` decodes a body against one of these, so unknown fields and type
mismatches get the reference's answers. Types with their own ``UnmarshalJSON`` in nats-server are
decoded as they do (policy enums, ``time.Time``, the compression), except the stream state of a
restore (``CUSTOM``), which its handler checks.
"""

from __future__ import annotations

from natsd.jetstream.gojson import (
    BOOL,
    COMPRESSION,
    CUSTOM,
    DURATION,
    INT,
    INT32,
    INT64,
    STRING,
    TIME,
    UINT64,
    GoStruct,
    Map,
    Ptr,
    Slice,
    enum,
)

__all__ = [
    "STREAM_CONFIG_REQUEST",
    "CREATE_CONSUMER_REQUEST",
    "STREAM_INFO_REQUEST",
    "STREAM_NAMES_REQUEST",
    "STREAM_LIST_REQUEST",
    "STREAM_PURGE_REQUEST",
    "MSG_GET_REQUEST",
    "MSG_DELETE_REQUEST",
    "CONSUMERS_REQUEST",
    "CONSUMER_PAUSE_REQUEST",
    "CONSUMER_UNPIN_REQUEST",
    "CONSUMER_RESET_REQUEST",
    "STREAM_SNAPSHOT_REQUEST",
    "STREAM_RESTORE_REQUEST",
    "CONSUMER_GET_NEXT_REQUEST",
]

_PAGED = {"offset": INT}

_SUBJECT_TRANSFORM = GoStruct("SubjectTransformConfig", {"src": STRING, "dest": STRING})
_EXTERNAL = GoStruct("ExternalStream", {"api": STRING, "deliver": STRING})
_SOURCE = GoStruct(
    "StreamSource",
    {
        "name": STRING,
        "opt_start_seq": UINT64,
        "opt_start_time": TIME,
        "filter_subject": STRING,
        "subject_transforms": Slice(_SUBJECT_TRANSFORM),
        "external": Ptr(_EXTERNAL),
    },
)
_PLACEMENT = GoStruct("Placement", {"cluster": STRING, "tags": Slice(STRING), "preferred": STRING})
_REPUBLISH = GoStruct("RePublish", {"src": STRING, "dest": STRING, "headers_only": BOOL})
_CONSUMER_LIMITS = GoStruct("StreamConsumerLimits", {"inactive_threshold": DURATION, "max_ack_pending": INT})

_STREAM_CONFIG_FIELDS = {
    "name": STRING,
    "description": STRING,
    "subjects": Slice(STRING),
    "retention": enum("server.RetentionPolicy"),
    "max_consumers": INT,
    "max_msgs": INT64,
    "max_bytes": INT64,
    "max_age": DURATION,
    "max_msgs_per_subject": INT64,
    "max_msg_size": INT32,
    "discard": enum("server.DiscardPolicy"),
    "storage": enum("server.StorageType"),
    "num_replicas": INT,
    "no_ack": BOOL,
    "duplicate_window": DURATION,
    "placement": Ptr(_PLACEMENT),
    "mirror": Ptr(_SOURCE),
    "sources": Slice(Ptr(_SOURCE)),
    "compression": COMPRESSION,
    "first_seq": UINT64,
    "subject_transform": Ptr(_SUBJECT_TRANSFORM),
    "republish": Ptr(_REPUBLISH),
    "allow_direct": BOOL,
    "mirror_direct": BOOL,
    "discard_new_per_subject": BOOL,
    "sealed": BOOL,
    "deny_delete": BOOL,
    "deny_purge": BOOL,
    "allow_rollup_hdrs": BOOL,
    "consumer_limits": _CONSUMER_LIMITS,
    "allow_msg_ttl": BOOL,
    "subject_delete_marker_ttl": DURATION,
    "allow_msg_counter": BOOL,
    "allow_atomic": BOOL,
    "allow_msg_schedules": BOOL,
    "persist_mode": enum("server.PersistModeType"),
    "allow_batched": BOOL,
    "metadata": Map(STRING),
}
_STREAM_CONFIG = GoStruct("StreamConfig", _STREAM_CONFIG_FIELDS)
STREAM_CONFIG_REQUEST = GoStruct("StreamConfigRequest", {**_STREAM_CONFIG_FIELDS, "pedantic": BOOL})

_CONSUMER_CONFIG = GoStruct(
    "ConsumerConfig",
    {
        "durable_name": STRING,
        "name": STRING,
        "description": STRING,
        "deliver_policy": enum("server.DeliverPolicy"),
        "opt_start_seq": UINT64,
        "opt_start_time": TIME,
        "ack_policy": enum("server.AckPolicy"),
        "ack_wait": DURATION,
        "max_deliver": INT,
        "backoff": Slice(DURATION),
        "filter_subject": STRING,
        "filter_subjects": Slice(STRING),
        "replay_policy": enum("server.ReplayPolicy"),
        "rate_limit_bps": UINT64,
        "sample_freq": STRING,
        "max_waiting": INT,
        "max_ack_pending": INT,
        "flow_control": BOOL,
        "headers_only": BOOL,
        "max_batch": INT,
        "max_expires": DURATION,
        "max_bytes": INT,
        "deliver_subject": STRING,
        "deliver_group": STRING,
        "idle_heartbeat": DURATION,
        "inactive_threshold": DURATION,
        "num_replicas": INT,
        "mem_storage": BOOL,
        "direct": BOOL,
        "sourcing": BOOL,
        "metadata": Map(STRING),
        "pause_until": TIME,
        "priority_groups": Slice(STRING),
        "priority_policy": enum("server.PriorityPolicy", "unknown priority policy: {v}"),
        "priority_timeout": DURATION,
    },
)
CREATE_CONSUMER_REQUEST = GoStruct(
    "CreateConsumerRequest",
    {
        "stream_name": STRING,
        "config": _CONSUMER_CONFIG,
        "action": enum("server.ConsumerAction", "unknown consumer action: {v}"),
        "pedantic": BOOL,
    },
)

STREAM_INFO_REQUEST = GoStruct("JSApiStreamInfoRequest", {**_PAGED, "deleted_details": BOOL, "subjects_filter": STRING})
STREAM_NAMES_REQUEST = GoStruct("JSApiStreamNamesRequest", {**_PAGED, "subject": STRING})
STREAM_LIST_REQUEST = GoStruct("JSApiStreamListRequest", {**_PAGED, "subject": STRING})
STREAM_PURGE_REQUEST = GoStruct("JSApiStreamPurgeRequest", {"seq": UINT64, "filter": STRING, "keep": UINT64})
MSG_GET_REQUEST = GoStruct(
    "JSApiMsgGetRequest",
    {
        "seq": UINT64,
        "last_by_subj": STRING,
        "next_by_subj": STRING,
        "batch": INT,
        "max_bytes": INT,
        "start_time": TIME,
        "multi_last": Slice(STRING),
        "up_to_seq": UINT64,
        "up_to_time": TIME,
        "no_hdr": BOOL,
    },
)
MSG_DELETE_REQUEST = GoStruct("JSApiMsgDeleteRequest", {"seq": UINT64, "no_erase": BOOL})
CONSUMERS_REQUEST = GoStruct("JSApiConsumersRequest", dict(_PAGED))
CONSUMER_PAUSE_REQUEST = GoStruct("JSApiConsumerPauseRequest", {"pause_until": TIME})
CONSUMER_UNPIN_REQUEST = GoStruct("JSApiConsumerUnpinRequest", {"group": STRING})
CONSUMER_RESET_REQUEST = GoStruct("JSApiConsumerResetRequest", {"seq": UINT64})
# Pull requests are read with a plain json.Unmarshal into a pointer's pointer, which Go's errors
# name with an empty struct name ("Go struct field .batch of type int").
CONSUMER_GET_NEXT_REQUEST = GoStruct(
    "",
    {
        "expires": DURATION,
        "batch": INT,
        "max_bytes": INT,
        "no_wait": BOOL,
        "idle_heartbeat": DURATION,
        "group": STRING,
        "min_pending": INT64,
        "min_ack_pending": INT64,
        "id": STRING,
        "priority": INT,
    },
)
STREAM_SNAPSHOT_REQUEST = GoStruct(
    "JSApiStreamSnapshotRequest",
    {
        "deliver_subject": STRING,
        "no_consumers": BOOL,
        "chunk_size": INT,
        "window_size": INT,
        "jsck": BOOL,
    },
)
STREAM_RESTORE_REQUEST = GoStruct("JSApiStreamRestoreRequest", {"config": _STREAM_CONFIG, "state": CUSTOM})
