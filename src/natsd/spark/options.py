"""Option parsing for the ``jetstream`` data source (pure: no Spark, no sockets).

Option names follow Spark's Kafka connector where the meaning is the same. Spark hands data
sources a case-insensitive mapping whose keys are lower-cased, so lookups here are lower-case.

Offsets (``startingOffsets`` / ``endingOffsets``) accept:

* ``earliest`` / ``latest``;
* a stream sequence ``N`` (the first sequence to read, or for ``endingOffsets`` the last one,
  inclusive);
* JSON per stream: ``{"ORDERS": {"seq": 123}}`` or ``{"ORDERS": 123}``; ``-2`` means earliest and
  ``-1`` latest, as in the Kafka connector.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from natsd.spark.wire import ConnectOptions

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "ReadOptions",
    "WriteOptions",
    "parse_offsets",
    "parse_timestamp",
    "parse_bool",
]

EARLIEST = "earliest"
LATEST = "latest"

# A per-stream start/end: "earliest", "latest" or a sequence number.
OffsetValue = str | int


@dataclass(frozen=True)
class OffsetSpec:
    """A parsed ``startingOffsets``/``endingOffsets``: one default plus per-stream overrides."""

    default: OffsetValue
    per_stream: dict = field(default_factory=dict)

    def for_stream(self, stream: str) -> OffsetValue:
        return self.per_stream.get(stream, self.default)


def parse_bool(value, name: str, default: bool) -> bool:
    """``true``/``false`` (any case), as Spark options are strings."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    v = str(value).strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise ValueError(f"option {name!r} must be true or false, got {value!r}")


def _parse_int(value, name: str, minimum: int = 0) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ValueError(f"option {name!r} must be an integer, got {value!r}") from None
    if n < minimum:
        raise ValueError(f"option {name!r} must be >= {minimum}, got {n}")
    return n


def _one_value(v, name: str, allow_latest: bool) -> OffsetValue:
    if isinstance(v, dict):
        if "seq" not in v:
            raise ValueError(f"option {name!r}: per-stream value needs a 'seq' key, got {v!r}")
        v = v["seq"]
    if isinstance(v, str):
        s = v.strip().lower()
        if s in (EARLIEST, LATEST):
            v = s
        else:
            v = _parse_int(v, name, minimum=-2)
    if v == -2:
        v = EARLIEST
    elif v == -1:
        v = LATEST
    if v == LATEST and not allow_latest:
        raise ValueError(f"option {name!r}: 'latest' is not allowed here")
    if isinstance(v, int) and v < 1:
        raise ValueError(f"option {name!r}: stream sequences start at 1, got {v}")
    return v


def parse_offsets(value, name: str, default: OffsetValue, allow_latest: bool = True) -> OffsetSpec:
    """Parse an offsets option (see the module docstring)."""
    if value is None or str(value).strip() == "":
        return OffsetSpec(default)
    text = str(value).strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"option {name!r}: invalid JSON: {exc}") from None
        if not isinstance(doc, dict) or not doc:
            raise ValueError(f"option {name!r}: expected a JSON object of stream -> offset")
        return OffsetSpec(default, {k: _one_value(v, name, allow_latest) for k, v in doc.items()})
    return OffsetSpec(_one_value(text, name, allow_latest))


def parse_timestamp(value, name: str) -> str | None:
    """Normalise a timestamp option to RFC 3339 UTC (what ``opt_start_time`` takes).

    Accepts epoch milliseconds (Kafka's convention) or an ISO 8601 / RFC 3339 string.
    """
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip()
    if re.fullmatch(r"-?\d+", text):
        dt = datetime.fromtimestamp(int(text) / 1000.0, tz=timezone.utc)
    else:
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"option {name!r}: not epoch millis or ISO 8601: {value!r}") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def connect_options(opts) -> ConnectOptions:
    """The connection part of the options (shared by readers and writers)."""
    g = opts.get
    return ConnectOptions(
        servers=g("servers") or "nats://127.0.0.1:4222",
        user=g("user"),
        password=g("password"),
        token=g("token"),
        creds=g("creds"),
        name=g("name") or "natsd-spark",
        tls_ca=g("tlsca") or g("tls.ca"),
    )


@dataclass(frozen=True)
class ReadOptions:
    """Everything a reader needs, parsed once on the driver (picklable)."""

    connect: ConnectOptions
    stream: str | None
    stream_pattern: str | None
    subjects: tuple[str, ...]
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp: str | None
    ending_timestamp: str | None
    max_messages_per_trigger: int | None
    min_partitions: int
    include_headers: bool
    fail_on_data_loss: bool
    fetch_timeout: float
    batch_rows: int

    @classmethod
    def parse(cls, opts, streaming: bool) -> "ReadOptions":
        """Parse Spark's (lower-cased) option mapping; ``streaming`` picks Kafka's defaults."""
        g = opts.get
        stream = g("stream")
        pattern = g("streampattern")
        if bool(stream) == bool(pattern):
            raise ValueError("exactly one of the options 'stream' or 'streamPattern' is required")
        if pattern:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"option 'streamPattern': invalid regular expression: {exc}") from None
        subjects = tuple(s.strip() for s in (g("subjects") or "").split(",") if s.strip())
        starting = parse_offsets(g("startingoffsets"), "startingOffsets", LATEST if streaming else EARLIEST)
        ending = parse_offsets(g("endingoffsets"), "endingOffsets", LATEST)
        if streaming and g("endingoffsets"):
            raise ValueError("option 'endingOffsets' is for batch reads only")
        if streaming and g("endingtimestamp"):
            raise ValueError("option 'endingTimestamp' is for batch reads only")
        mmpt = g("maxmessagespertrigger") or g("maxoffsetspertrigger")
        return cls(
            connect=connect_options(opts),
            stream=stream,
            stream_pattern=pattern,
            subjects=subjects,
            starting=starting,
            ending=ending,
            starting_timestamp=parse_timestamp(g("startingtimestamp"), "startingTimestamp"),
            ending_timestamp=parse_timestamp(g("endingtimestamp"), "endingTimestamp"),
            max_messages_per_trigger=_parse_int(mmpt, "maxMessagesPerTrigger", 1) if mmpt else None,
            min_partitions=_parse_int(g("minpartitions") or 1, "minPartitions", 1),
            include_headers=parse_bool(g("includeheaders"), "includeHeaders", False),
            fail_on_data_loss=parse_bool(g("failondataloss"), "failOnDataLoss", True),
            fetch_timeout=float(g("fetchtimeout") or 30.0),
            batch_rows=_parse_int(g("batchrows") or 8192, "batchRows", 1),
        )

    def matches(self, name: str) -> bool:
        """Whether a stream name is selected by ``stream`` / ``streamPattern`` (full match)."""
        if self.stream:
            return name == self.stream
        return re.fullmatch(self.stream_pattern, name) is not None


IDEMPOTENCE_NONE = "none"
IDEMPOTENCE_POSITIONAL = "positional"


@dataclass(frozen=True)
class WriteOptions:
    """Writer options: where to publish and how to make ``Nats-Msg-Id`` s.

    ``idempotence`` is ``none`` (at-least-once), ``positional`` (ids
    ``<msgIdPrefix>-<partition>-<row>`` for batch writes, ``<prefix>-<batchId>-<partition>-<row>``
    for streaming ones, where the streaming prefix defaults to the query id), or
    ``column:<name>`` (the id is that column's value).
    """

    connect: ConnectOptions
    subject: str | None
    idempotence: str
    id_column: str | None
    msg_id_prefix: str | None
    window: int
    min_duplicate_window_s: float

    @classmethod
    def parse(cls, opts, streaming: bool) -> "WriteOptions":
        g = opts.get
        idem = (g("idempotence") or IDEMPOTENCE_NONE).strip()
        id_column = None
        if idem.lower().startswith("column:"):
            id_column = idem.split(":", 1)[1].strip()
            if not id_column:
                raise ValueError("option 'idempotence': 'column:' needs a column name")
            idem = "column"
        elif idem.lower() in (IDEMPOTENCE_NONE, IDEMPOTENCE_POSITIONAL):
            idem = idem.lower()
        else:
            raise ValueError(f"option 'idempotence' must be none, positional or column:<name>, got {idem!r}")
        prefix = g("msgidprefix")
        if idem == IDEMPOTENCE_POSITIONAL and not streaming and not prefix:
            # A batch job has no stable identity Spark could give us; a default prefix would let two
            # different jobs silently deduplicate each other's rows inside the duplicate window.
            raise ValueError("idempotence=positional on a batch write needs option 'msgIdPrefix' (a stable job id)")
        return cls(
            connect=connect_options(opts),
            subject=g("subject"),
            idempotence=idem,
            id_column=id_column,
            msg_id_prefix=prefix,
            window=_parse_int(g("maxinflight") or 2048, "maxInFlight", 1),
            min_duplicate_window_s=float(g("minduplicatewindow") or 600),
        )
