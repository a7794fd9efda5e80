"""The ``natsd.*`` metadata keys that switch natsd's own features on.

A stream or consumer config's ``metadata`` (``map[string]string`` on the wire) may hold keys
under :data:`PREFIX`. They are parsed and validated here at create/update: an unknown
``natsd.*`` key or a bad value is refused with a natsd error (``NatsdErrors``, codes 19xxx, in
:mod:`natsd.jetstream.errors`), so a typo never silently leaves a feature off. Other metadata
keys are left alone, as nats-server does.

Stream keys
    ``natsd.keep_last_under_max_age``  ``"true"``/``"false"``: max_age expiry never removes the
        last message of a subject (nats-server #5811).
    ``natsd.schema.<subject pattern>``  a JSON Schema for payloads published on subjects
        matching the pattern: inline JSON (``{"type": "object", ...}``) or ``kv:<bucket>/<key>``
        (the schema is the KV entry's value, read at publish time, so it can change without a
        stream update).

Consumer keys
    ``natsd.dead_letter``  a literal subject: messages that reach ``max_deliver`` or are
        terminated (``+TERM``) are published there once, with ``Natsd-Dlq-*`` headers.
    ``natsd.partition_key``  ``{{wildcard(n)}}`` or ``header:<Name>``: a pull consumer delivers
        in stream order per key, one message per key in flight (consumer/partition.py).

Nothing here runs per message: the parsed settings are plain attributes the stream and
consumer read (``StreamFeatures`` / ``ConsumerFeatures``).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from natsd.lazydataclass import dataclass
from natsd.jetstream.errors import ApiError, NatsdErrors
from natsd.subjects.tokens import is_literal, is_valid_subject, subject_matches

# The schema checks and the partition key parser load with the first config that has such a key
# (issue 31: a plain stream or consumer create does not import them).
if TYPE_CHECKING:  # pragma: no cover
    from natsd.jetstream.features.keyspec import KeySpec

__all__ = [
    "CONSUMER_KEYS",
    "DEAD_LETTER",
    "PREFIX",
    "SCHEMA_PREFIX",
    "STREAM_KEYS",
    "ConsumerFeatures",
    "SchemaSpec",
    "StreamFeatures",
    "advertised",
    "consumer_features",
    "parse_consumer",
    "parse_stream",
    "partition_spec",
    "stream_features",
]

log = logging.getLogger("natsd.jetstream.features")

PREFIX = "natsd."
KEEP_LAST = "natsd.keep_last_under_max_age"
SCHEMA_PREFIX = "natsd.schema."
DEAD_LETTER = "natsd.dead_letter"
PARTITION_KEY = "natsd.partition_key"

#: Keys a stream accepts (a key ending in ``.`` is a prefix: the rest is a subject pattern).
STREAM_KEYS: tuple[str, ...] = (KEEP_LAST, SCHEMA_PREFIX)
CONSUMER_KEYS: tuple[str, ...] = (DEAD_LETTER, PARTITION_KEY)

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off", "")


@dataclass(frozen=True, slots=True)
class SchemaSpec:
    """One ``natsd.schema.<pattern>`` entry: either ``inline`` (the schema as a dict) or a KV
    reference (``bucket``/``key``). ``name`` is how errors name it: the metadata key's value for
    a KV reference, ``inline:<pattern>`` otherwise."""

    pattern: str
    name: str
    inline: dict | bool | None = None
    bucket: str = ""
    key: str = ""


@dataclass(frozen=True, slots=True)
class StreamFeatures:
    """What a stream's ``natsd.*`` metadata turns on (none: :data:`NO_STREAM_FEATURES`)."""

    keep_last_under_max_age: bool = False
    schemas: tuple[SchemaSpec, ...] = ()

    @property
    def any(self) -> bool:
        return self.keep_last_under_max_age or bool(self.schemas)


@dataclass(frozen=True, slots=True)
class ConsumerFeatures:
    """What a consumer's ``natsd.*`` metadata turns on (none: :data:`NO_CONSUMER_FEATURES`)."""

    dead_letter: str = ""
    partition_key: KeySpec | None = None


NO_STREAM_FEATURES = StreamFeatures()
NO_CONSUMER_FEATURES = ConsumerFeatures()


def _bool(key: str, value: str) -> bool:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise NatsdErrors.METADATA_INVALID(key=key, err=f'"{value}" is not a boolean (use "true" or "false")')


def _unknown(key: str, offered: tuple[str, ...]) -> ApiError:
    names = ", ".join(k + "<subject>" if k.endswith(".") else k for k in offered)
    return NatsdErrors.METADATA_UNKNOWN(key=key, keys=names)


def _schema(key: str, value: str) -> SchemaSpec:
    pattern = key[len(SCHEMA_PREFIX) :]
    if not is_valid_subject(pattern):
        raise NatsdErrors.METADATA_INVALID(key=key, err=f'"{pattern}" is not a valid subject pattern')
    v = value.strip()
    if v.startswith("kv:"):
        ref = v[3:]
        bucket, sep, kvkey = ref.partition("/")
        if not sep or not bucket or not kvkey or not is_literal("x." + kvkey) or "." in bucket:
            raise NatsdErrors.METADATA_INVALID(key=key, err=f'"{value}" is not kv:<bucket>/<key>')
        return SchemaSpec(pattern=pattern, name=v, bucket=bucket, key=kvkey)
    try:
        doc = json.loads(v)
    except ValueError as e:
        raise NatsdErrors.METADATA_INVALID(key=key, err=f"schema is not JSON: {e}") from None
    if not isinstance(doc, (dict, bool)):
        raise NatsdErrors.METADATA_INVALID(key=key, err="a JSON Schema is an object (or true/false)")
    from natsd.jetstream.features.schemas import check_schema

    problem = check_schema(doc)
    if problem:
        raise NatsdErrors.METADATA_INVALID(key=key, err=f"invalid JSON Schema: {problem}")
    return SchemaSpec(pattern=pattern, name="inline:" + pattern, inline=doc)


def parse_stream(metadata: dict[str, str] | None) -> StreamFeatures:
    """The features a stream's metadata switches on; raises a ``NatsdErrors`` ApiError when a
    ``natsd.*`` key is unknown or its value is invalid."""
    if not metadata:
        return NO_STREAM_FEATURES
    keep_last = False
    schemas: list[SchemaSpec] = []
    for key in sorted(metadata):
        if not key.startswith(PREFIX):
            continue
        value = metadata[key]
        if key == KEEP_LAST:
            keep_last = _bool(key, value)
        elif key.startswith(SCHEMA_PREFIX):
            schemas.append(_schema(key, value))
        elif key == DEAD_LETTER:
            raise NatsdErrors.METADATA_INVALID(key=key, err="a dead-letter subject is a consumer setting")
        else:
            raise _unknown(key, STREAM_KEYS)
    if not keep_last and not schemas:
        return NO_STREAM_FEATURES
    return StreamFeatures(keep_last_under_max_age=keep_last, schemas=tuple(schemas))


def parse_consumer(
    metadata: dict[str, str] | None,
    stream_subjects: list[str] | None = None,
    filters: list[str] | None = None,
    kind_problem: str = "",
) -> ConsumerFeatures:
    """The features a consumer's metadata switches on (see :func:`parse_stream`).
    ``stream_subjects``/``filters``: the consumer's stream's subjects and its own filters, to
    refuse a dead-letter subject the consumer would read back (a copy delivered forever).
    ``kind_problem``: why this consumer can not be partitioned ("" when it can: a pull consumer
    with explicit acks and no priority groups)."""
    if not metadata:
        return NO_CONSUMER_FEATURES
    dead_letter = ""
    partition: KeySpec | None = None
    for key in sorted(metadata):
        if not key.startswith(PREFIX):
            continue
        value = metadata[key]
        if key == DEAD_LETTER:
            v = value.strip()
            if not v:
                continue
            if not is_valid_subject(v) or not is_literal(v):
                raise NatsdErrors.METADATA_INVALID(key=key, err=f'"{value}" is not a literal subject')
            if v.startswith(("$JS.", "$SYS.", "_INBOX.")):
                raise NatsdErrors.METADATA_INVALID(key=key, err=f'"{value}" is a reserved subject')
            if any(subject_matches(s, v) for s in stream_subjects or ()) and (
                not filters or any(subject_matches(f, v) for f in filters)
            ):
                raise NatsdErrors.METADATA_INVALID(
                    key=key, err=f'"{value}" is a subject of this stream the consumer would read back'
                )
            dead_letter = v
        elif key == PARTITION_KEY:
            if not value.strip():
                continue
            if kind_problem:
                raise NatsdErrors.METADATA_INVALID(key=key, err=kind_problem)
            from natsd.jetstream.features.keyspec import parse_key_spec

            spec = parse_key_spec(value, filters or [])
            if isinstance(spec, str):
                raise NatsdErrors.METADATA_INVALID(key=key, err=spec)
            partition = spec
        elif key == KEEP_LAST or key.startswith(SCHEMA_PREFIX):
            raise NatsdErrors.METADATA_INVALID(key=key, err="this is a stream setting")
        else:
            raise _unknown(key, CONSUMER_KEYS)
    if not dead_letter and partition is None:
        return NO_CONSUMER_FEATURES
    return ConsumerFeatures(dead_letter=dead_letter, partition_key=partition)


def partition_spec(metadata: dict[str, str] | None, filters: list[str]) -> KeySpec | None:
    """The ``natsd.partition_key`` of an accepted consumer config (None: none, or invalid here)."""
    v = (metadata or {}).get(PARTITION_KEY, "")
    if not v.strip():
        return None
    from natsd.jetstream.features.keyspec import parse_key_spec

    spec = parse_key_spec(v, filters)
    if isinstance(spec, str):
        log.warning("natsd.partition_key off for a consumer: %s", spec)
        return None
    return spec


def stream_features(metadata: dict[str, str] | None) -> StreamFeatures:
    """:func:`parse_stream` for a config already accepted (recovery, restore): a setting this
    natsd refuses leaves the features off instead of failing the stream."""
    try:
        return parse_stream(metadata)
    except ApiError as e:
        log.warning("natsd features off for a stream: %s", e.description)
        return NO_STREAM_FEATURES


def consumer_features(metadata: dict[str, str] | None, filters: list[str] | None = None) -> ConsumerFeatures:
    """:func:`parse_consumer` for a config already accepted (see :func:`stream_features`)."""
    try:
        return parse_consumer(metadata, filters=filters)
    except ApiError as e:
        log.warning("natsd features off for a consumer: %s", e.description)
        return NO_CONSUMER_FEATURES


def advertised() -> dict:
    """What ``$JS.API.INFO`` and ``/jsz`` add under ``"natsd"`` (nats clients ignore unknown
    fields): the metadata prefix and the keys natsd understands, per feature."""
    return {
        "metadata_prefix": PREFIX,
        "features": {
            "dead_letter": {"consumer_metadata": DEAD_LETTER},
            "partition_key": {"consumer_metadata": PARTITION_KEY},
            "keep_last_under_max_age": {"stream_metadata": KEEP_LAST},
            "schemas": {"stream_metadata": SCHEMA_PREFIX + "<subject>"},
        },
    }
