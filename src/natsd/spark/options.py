"""Option parsing for the ``jetstream`` data source (pure: no Spark, no sockets).

Option names follow Spark's Kafka connector where the meaning is the same. Spark hands data
sources a case-insensitive mapping whose keys are lower-cased, so lookups here are lower-case.

Offsets (``startingOffsets`` / ``endingOffsets``) accept:

* ``earliest`` / ``latest``;
* a stream sequence ``N``: for ``startingOffsets`` the first sequence read (inclusive), for
  ``endingOffsets`` the first sequence **not** read (exclusive, like Kafka's ``endingOffsets`` and
  like ``endingTimestamp``);
* JSON per stream: ``{"ORDERS": {"seq": 123}}`` or ``{"ORDERS": 123}``; ``-2`` means earliest and
  ``-1`` latest, as in the Kafka connector.

:data:`OPTIONS` is the one table of every option (name, default, where it applies, meaning): the
parsers below read options only through it, ``docs/spark.md`` embeds :func:`render_option_table`
(a test keeps the two identical), and ``python -m natsd.spark options-table`` prints it.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from natsd import gotime
from natsd.redact import redact

from natsd.spark.wire import ConnectOptions

__all__ = [
    "EARLIEST",
    "LATEST",
    "OPTIONS",
    "Option",
    "OptionError",
    "OffsetSpec",
    "ReadOptions",
    "WriteOptions",
    "parse_offsets",
    "parse_timestamp",
    "parse_bool",
    "render_option_table",
]

log = logging.getLogger("natsd.spark")

EARLIEST = "earliest"
LATEST = "latest"

# A per-stream start/end: "earliest", "latest" or a sequence number.
OffsetValue = str | int


class OptionError(ValueError):
    """A data source option with a value the connector cannot use; the message names the option,
    the value given and what is accepted."""


@dataclass(frozen=True)
class Option:
    """One row of the option table: how an option is spelled, its default, where it applies."""

    name: str  # as documented (Spark matches option names case-insensitively)
    default: str  # as documented; "" = none
    modes: str  # "batch", "streaming" or "batch, streaming"
    side: str  # "read", "write" or "read, write"
    accepts: str  # the accepted values, quoted in error messages
    meaning: str


_RW = "read, write"
_BS = "batch, streaming"

#: Every option of the ``jetstream`` source and sink. Parsers read options only through this
#: table (:func:`_get` refuses a name that is not in it), and docs/spark.md embeds it.
OPTIONS: tuple[Option, ...] = (
    Option(
        "servers",
        "nats://127.0.0.1:4222",
        _BS,
        _RW,
        "comma-separated nats:// or tls:// URLs",
        "Servers to connect to, tried in order; must be reachable from every executor. "
        "`nats://user:pass@host` and `nats://token@host` are honoured.",
    ),
    Option("user", "", _BS, _RW, "a user name", "User for user/password authentication."),
    Option("password", "", _BS, _RW, "a password", "Password for user/password authentication."),
    Option("token", "", _BS, _RW, "a token", "Token authentication."),
    Option(
        "creds",
        "",
        _BS,
        _RW,
        "a path readable on driver and executors",
        "A `.creds` file (JWT + NKey seed, needs the `nkeys` package); ship it with `--files`.",
    ),
    Option("tlsCa", "", _BS, _RW, "a path to a PEM file", "CA certificate(s) to verify the server's TLS certificate."),
    Option(
        "tlsCert",
        "",
        _BS,
        _RW,
        "a path to a PEM file",
        "Client certificate for servers that verify clients (`tls { verify: true }`); needs `tlsKey` "
        "unless the file also holds the key.",
    ),
    Option("tlsKey", "", _BS, _RW, "a path to a PEM file", "The private key of `tlsCert`."),
    Option(
        "nkey",
        "",
        _BS,
        _RW,
        "a user nkey seed (SU...) or a path to a file holding one",
        "NKey authentication with a bare seed (no JWT; use `creds` for JWT + seed); needs the `nkeys` package. "
        "Never printed or logged.",
    ),
    Option(
        "domain",
        "",
        _BS,
        _RW,
        "a JetStream domain name",
        "Use the JetStream of this domain (API prefix `$JS.<domain>.API`), e.g. an edge server's streams "
        "through its leafnode link to the hub you connect to. Not with `apiPrefix`.",
    ),
    Option(
        "apiPrefix",
        "$JS.API",
        _BS,
        _RW,
        "a subject prefix without wildcards",
        "The JetStream API prefix, for an account export/import mapping of `$JS.API` (nats-py's `prefix`). "
        "Not with `domain`.",
    ),
    Option("name", "natsd-spark", _BS, _RW, "any text", "Client connection name the server reports."),
    Option(
        "stream", "", _BS, "read", "a stream name", "The stream to read. Exactly one of `stream` / `streamPattern`."
    ),
    Option(
        "kvBucket",
        "",
        _BS,
        _RW,
        "a KV bucket name",
        "Read or write a KV bucket as a table (`key`, `value`, `revision`, `created`, `operation`): a batch "
        "read gives each key's latest value (deleted and purged keys left out), a streaming read the change "
        "log, a write puts `key`/`value` rows (optional `expectedRevision` column: compare-and-set). "
        "Instead of `stream` / `streamPattern` / `subject`.",
    ),
    Option(
        "streamPattern",
        "",
        _BS,
        "read",
        "a regular expression",
        "Read every stream whose whole name matches (Kafka's `subscribePattern`); streams created later "
        "are picked up by streaming queries.",
    ),
    Option(
        "subjects",
        "",
        _BS,
        "read",
        "comma-separated subjects, NATS wildcards `*` `>`",
        "Only messages on these subjects (the consumer's `filter_subjects`).",
    ),
    Option(
        "startingOffsets",
        "earliest (batch), latest (streaming)",
        _BS,
        "read",
        'earliest, latest, a sequence, or JSON {"STREAM": {"seq": N}} (-2 = earliest, -1 = latest)',
        "Where a new query starts; a sequence is the first one read (inclusive). A streaming query "
        "restarted from a checkpoint ignores it.",
    ),
    Option(
        "endingOffsets",
        "latest",
        "batch",
        "read",
        'latest, a sequence, or JSON {"STREAM": {"seq": N}} (-1 = latest)',
        "Where a batch read ends: a sequence is the first one **not** read (exclusive, as in Kafka); "
        "`latest` = the last sequence when the query is planned.",
    ),
    Option(
        "startingTimestamp",
        "",
        _BS,
        "read",
        "epoch milliseconds or ISO 8601 / RFC 3339",
        "Start at the first message stored at or after this time (inclusive); wins over `startingOffsets`.",
    ),
    Option(
        "endingTimestamp",
        "",
        "batch",
        "read",
        "epoch milliseconds or ISO 8601 / RFC 3339",
        "End before the first message stored at or after this time (exclusive).",
    ),
    Option(
        "maxMessagesPerTrigger",
        "",
        "streaming",
        "read",
        "an integer >= 1",
        "At most this many sequences per micro-batch, split across streams by backlog. "
        "Alias: `maxOffsetsPerTrigger` (Kafka's name). With `subjects` it counts sequences, not rows.",
    ),
    Option("maxOffsetsPerTrigger", "", "streaming", "read", "an integer >= 1", "Alias of `maxMessagesPerTrigger`."),
    Option(
        "minOffsetsPerTrigger",
        "",
        "streaming",
        "read",
        "an integer >= 1",
        "Wait until at least this many new sequences are stored (all streams together) before running a "
        "micro-batch, or until `maxTriggerDelay` has passed since the last one (Kafka's name and meaning). "
        "Ignored by `Trigger.AvailableNow`.",
    ),
    Option(
        "maxTriggerDelay",
        "15m",
        "streaming",
        "read",
        "a duration: 500ms, 30s, 15m, 1h or seconds",
        "With `minOffsetsPerTrigger`: the longest a micro-batch waits for that many sequences.",
    ),
    Option(
        "maxBytesPerTrigger",
        "",
        "streaming",
        "read",
        "a number of bytes >= 1 (k, m, g suffixes)",
        "At most about this many bytes per micro-batch, converted to sequences with each stream's average "
        "stored message size (STREAM.INFO bytes / messages); at least one message per stream. With "
        "`maxOffsetsPerTrigger` the smaller wins.",
    ),
    Option(
        "maxRecordsPerPartition",
        "",
        _BS,
        "read",
        "an integer >= 1",
        "Split a (micro-)batch so that no task reads more than this many sequences, beyond `minPartitions` "
        "(Kafka's name).",
    ),
    Option(
        "progressBucket",
        "",
        "streaming",
        "read",
        "a KV bucket name",
        "Record each committed micro-batch's offsets and lag (messages behind, per stream) in this KV bucket "
        "(created if missing), for `natsctl` and dashboards; monitoring only, never read back.",
    ),
    Option(
        "progressKey",
        "the stream's name",
        "streaming",
        "read",
        "a KV key (letters, digits, '-', '_', '/', '=', '.')",
        "The key of this query's record in `progressBucket`; required with `streamPattern`.",
    ),
    Option(
        "startingOffsetsByTimestamp",
        "",
        _BS,
        "read",
        'JSON {"STREAM": epoch ms or ISO 8601}',
        "Per stream, start at the first message stored at or after that time; between `startingTimestamp` "
        "(which wins) and `startingOffsets` (Kafka's order).",
    ),
    Option(
        "endingOffsetsByTimestamp",
        "",
        "batch",
        "read",
        'JSON {"STREAM": epoch ms or ISO 8601}',
        "Per stream, end before the first message stored at or after that time (exclusive); `endingTimestamp` wins.",
    ),
    Option(
        "startingOffsetsByTimestampStrategy",
        "error",
        _BS,
        "read",
        "error or latest",
        "When no message is stored at or after a starting time (`startingTimestamp` or "
        "`startingOffsetsByTimestamp`): `error` fails the query (Kafka's default), `latest` starts at the end.",
    ),
    Option(
        "minPartitions",
        "1",
        _BS,
        "read",
        "an integer >= 1",
        "Split each micro-batch / batch read into at least this many contiguous sequence ranges (tasks).",
    ),
    Option(
        "includeHeaders",
        "false",
        _BS,
        "read",
        "true or false",
        "Add the `headers` column (`ARRAY<STRUCT<key STRING, value BINARY>>`, order and repeats kept).",
    ),
    Option(
        "headerValueType",
        "binary",
        _BS,
        "read",
        "binary or string",
        "`string` gives header values as STRING instead of BINARY (a string view of `headers`).",
    ),
    Option(
        "failOnDataLoss",
        "true",
        _BS,
        "read",
        "true or false",
        "Fail when sequences the query still needs are gone (limits, purge) or the stream was re-created; "
        "`false` skips ahead to what is still stored.",
    ),
    Option(
        "fetchTimeout",
        "30",
        _BS,
        "read",
        "seconds, a number > 0",
        "How long a read task waits for the next message before failing.",
    ),
    Option("batchRows", "8192", _BS, "read", "an integer >= 1", "Rows per Arrow batch a read task hands to Spark."),
    Option(
        "subject",
        "",
        _BS,
        "write",
        "a subject without wildcards",
        "Publish every row to this subject; otherwise each row's `subject` (or `topic`) column. Alias: `topic`.",
    ),
    Option("topic", "", _BS, "write", "a subject without wildcards", "Alias of `subject` (Kafka's name)."),
    Option(
        "idempotence",
        "none",
        _BS,
        "write",
        "none, positional or column:<name>",
        "How each row gets a `Nats-Msg-Id` for the stream's duplicate window. `column:<name>` (recommended): "
        "the column's value. `positional`: `<prefix>-<partition>-<row>` (batch) or "
        "`<prefix>-<batchId>-<partition>-<row>` (streaming), which changes if the partitioning changes. "
        "`none`: at-least-once.",
    ),
    Option(
        "msgIdPrefix",
        "",
        _BS,
        "write",
        "any text without spaces",
        "Prefix of positional ids; required for batch writes with `idempotence=positional` (a stable job id). "
        "Streaming default: the query id.",
    ),
    Option("maxInFlight", "2048", _BS, "write", "an integer >= 1", "PubAcks a write task may wait for at once."),
    Option(
        "minDuplicateWindow",
        "600",
        _BS,
        "write",
        "seconds, a number >= 0",
        "With idempotence, warn when the target stream's `duplicate_window` is shorter than this.",
    ),
)

_BY_KEY = {o.name.lower(): o for o in OPTIONS}
# Options Spark itself (or a Spark integration) puts in the map a sink or source receives.
_SPARK_OWN = {"path", "checkpointlocation", "queryname", "tls.ca"}  # tls.ca: old spelling of tlsCa


def _get(opts, name: str):
    """The value of option ``name`` (a row of :data:`OPTIONS`) from Spark's case-insensitive map."""
    key = name.lower()
    if key not in _BY_KEY:  # a programming error: every option must be documented in OPTIONS
        raise KeyError(f"option {name!r} is not in natsd.spark.options.OPTIONS")
    v = opts.get(key)
    if v is None and key != name:
        v = opts.get(name)
    if isinstance(v, str) and v.strip() == "":
        return None
    return v


def _bad(name: str, value, reason: str = "") -> OptionError:
    accepts = _BY_KEY[name.lower()].accepts
    why = f" ({reason})" if reason else ""
    return OptionError(redact(f"option {name!r}: invalid value {value!r}{why}; accepted: {accepts}"))


def warn_unknown(opts, side: str) -> list[str]:
    """Log (and return) option names the connector does not know, with the closest known name."""
    unknown = []
    for key in list(opts.keys()):
        k = str(key).lower()
        if k in _BY_KEY or k in _SPARK_OWN:
            continue
        close = difflib.get_close_matches(k, list(_BY_KEY), n=1)
        hint = f"; did you mean {_BY_KEY[close[0]].name!r}?" if close else ""
        unknown.append(str(key))
        log.warning("jetstream %s: unknown option %r is ignored%s", side, key, hint)
    return unknown


def render_option_table() -> str:
    """The option table in Markdown (docs/spark.md embeds exactly this)."""
    lines = [
        "| option | default | batch / streaming | read / write | accepted values | meaning |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for o in OPTIONS:
        cells = [f"`{o.name}`", o.default or "-", o.modes, o.side, o.accepts, o.meaning]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


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
    raise _bad(name, value)


def _parse_int(value, name: str, minimum: int = 0) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise _bad(name, value, "not an integer") from None
    if n < minimum:
        raise _bad(name, value, f"must be >= {minimum}")
    return n


def _parse_seconds(value, name: str, default: float, minimum: float, exclusive: bool) -> float:
    if value is None:
        return default
    try:
        x = float(str(value).strip())
    except ValueError:
        raise _bad(name, value, "not a number of seconds") from None
    if not math.isfinite(x) or x < minimum or (exclusive and x == minimum):
        raise _bad(name, value, f"must be {'>' if exclusive else '>='} {minimum:g}")
    return x


def _one_value(v, name: str, allow_latest: bool, allow_earliest: bool = True) -> OffsetValue:
    raw = v
    if isinstance(v, dict):
        if "seq" not in v:
            raise _bad(name, raw, "a per-stream object needs a 'seq' key")
        v = v["seq"]
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise _bad(name, raw)
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
        raise _bad(name, raw, "'latest' is not allowed here")
    if v == EARLIEST and not allow_earliest:
        raise _bad(name, raw, "'earliest' is not allowed here")
    if isinstance(v, int) and v < 1:
        raise _bad(name, raw, "stream sequences start at 1")
    return v


def parse_offsets(
    value, name: str, default: OffsetValue, allow_latest: bool = True, allow_earliest: bool = True
) -> OffsetSpec:
    """Parse an offsets option (see the module docstring)."""
    if value is None or str(value).strip() == "":
        return OffsetSpec(default)
    text = str(value).strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise _bad(name, value, f"invalid JSON: {exc}") from None
        if not isinstance(doc, dict) or not doc:
            raise _bad(name, value, "expected a JSON object of stream -> offset")
        return OffsetSpec(default, {k: _one_value(v, name, allow_latest, allow_earliest) for k, v in doc.items()})
    return OffsetSpec(_one_value(text, name, allow_latest, allow_earliest))


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_timestamp(value, name: str) -> str | None:
    """Normalise a timestamp option to RFC 3339 UTC as Go writes it (what ``opt_start_time`` takes).

    Accepts epoch milliseconds (Kafka's convention), RFC 3339 (to the nanosecond) or, more
    leniently, an ISO 8601 string (a naive one is UTC).
    """
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip()
    try:
        if re.fullmatch(r"-?\d+", text):
            ns = int(text) * 1_000_000
        else:
            try:
                ns = gotime.parse_rfc3339(text)
            except ValueError:
                dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
                if dt.tzinfo is None:
                    dt = dt.replace(tzinfo=timezone.utc)
                ns = (dt - _EPOCH) // timedelta(microseconds=1) * 1000
        return gotime.format_rfc3339(ns)
    except (ValueError, OverflowError):
        raise _bad(name, value) from None


_SUBJECT_BAD = re.compile(r"[\s*>]|^\.|\.$|\.\.")


def check_publish_subject(subject: str, where: str) -> str:
    """A subject a message can be published to (no wildcards, spaces or empty tokens)."""
    if not subject or _SUBJECT_BAD.search(subject):
        raise OptionError(
            f"{where}: invalid subject {subject!r}; accepted: a subject without wildcards, spaces or empty tokens"
        )
    return subject


_BUCKET = re.compile(r"[A-Za-z0-9_-]+")  # as nats-server and the clients validate bucket names


def _kv_bucket(name: str, option: str = "kvBucket") -> str:
    name = name.strip()
    if not _BUCKET.fullmatch(name):
        raise _bad(option, name, "letters, digits, '-' and '_'")
    return name


_KV_KEY = re.compile(r"[-/_=.A-Za-z0-9]+")


def _progress(g, stream: str | None) -> dict:
    bucket, key = g("progressBucket"), g("progressKey")
    if not bucket:
        return {}
    bucket = _kv_bucket(bucket, "progressBucket")
    key = (key or stream or "").strip()
    if not key:
        raise OptionError("option 'progressKey' is required with progressBucket and streamPattern")
    if not _KV_KEY.fullmatch(key) or key.startswith(".") or key.endswith(".") or ".." in key:
        raise _bad("progressKey", key)
    return {"progress_bucket": bucket, "progress_key": key}


def kv_stream(bucket: str) -> str:
    """The stream behind a KV bucket."""
    return f"KV_{bucket}"


def kv_prefix(bucket: str) -> str:
    """The subject prefix of a KV bucket's keys."""
    return f"$KV.{bucket}."


def api_prefix(domain: str | None, prefix: str | None) -> str:
    """``$JS.<domain>.API`` for ``domain``, ``prefix`` as given, else ``$JS.API`` (as nats-py's
    ``jetstream(domain=..., prefix=...)``, which also refuses both at once)."""
    if domain and prefix:
        raise OptionError(f"options 'domain' ({domain!r}) and 'apiPrefix' ({prefix!r}) exclude each other; set one")
    if domain:
        domain = domain.strip()
        if re.search(r"[\s.*>]", domain):
            raise _bad("domain", domain, "a domain name has no spaces, '.', '*' or '>'")
        return f"$JS.{domain}.API"
    if prefix:
        prefix = prefix.strip().rstrip(".")
        if not prefix or re.search(r"[\s*>]", prefix) or prefix.startswith(".") or ".." in prefix:
            raise _bad("apiPrefix", prefix, "a subject prefix without wildcards, spaces or empty tokens")
        return prefix
    return "$JS.API"


def connect_options(opts) -> ConnectOptions:
    """The connection part of the options (shared by readers and writers)."""
    servers = _get(opts, "servers") or "nats://127.0.0.1:4222"
    tls_cert, tls_key = _get(opts, "tlsCert"), _get(opts, "tlsKey")
    if tls_key and not tls_cert:
        raise OptionError("option 'tlsKey' needs 'tlsCert' (the client certificate it belongs to)")
    co = ConnectOptions(
        servers=servers,
        user=_get(opts, "user"),
        password=_get(opts, "password"),
        token=_get(opts, "token"),
        creds=_get(opts, "creds"),
        name=_get(opts, "name") or "natsd-spark",
        tls_ca=_get(opts, "tlsCa") or opts.get("tls.ca"),
        tls_cert=tls_cert,
        tls_key=tls_key,
        nkey_seed=_get(opts, "nkey"),
        api_prefix=api_prefix(_get(opts, "domain"), _get(opts, "apiPrefix")),
    )
    try:
        urls = co.urls()
    except ValueError:
        raise _bad("servers", servers) from None
    from urllib.parse import urlparse

    for u in urls:
        try:
            p = urlparse(u)
            p.port  # raises on a bad port
        except ValueError as exc:
            raise _bad("servers", servers, str(exc)) from None
        if p.scheme not in ("nats", "tls") or not p.hostname:
            raise _bad("servers", servers, f"{u!r} is not a nats:// or tls:// URL")
    return co


_DURATION = re.compile(r"(?P<n>\d+(?:\.\d+)?)\s*(?P<u>ms|s|m|h|d)?", re.IGNORECASE)
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_BYTES = re.compile(r"(?P<n>\d+)\s*(?P<u>[kmg]?)b?", re.IGNORECASE)


def parse_duration(value, name: str, default: float) -> float:
    """Kafka's ``maxTriggerDelay`` spelling (``15m``, ``30s``, ``500ms``) or plain seconds."""
    if value is None:
        return default
    m = _DURATION.fullmatch(str(value).strip())
    if not m:
        raise _bad(name, value, "not a duration")
    return float(m["n"]) * _UNIT_S[(m["u"] or "s").lower()]


def parse_bytes(value, name: str) -> int | None:
    if value is None:
        return None
    m = _BYTES.fullmatch(str(value).strip())
    if not m or int(m["n"]) < 1:
        raise _bad(name, value)
    return int(m["n"]) << {"": 0, "k": 10, "m": 20, "g": 30}[m["u"].lower()]


def parse_times_by_stream(value, name: str) -> dict:
    """``{"STREAM": epoch ms or ISO 8601}`` -> ``{"STREAM": RFC 3339}``."""
    if value is None:
        return {}
    try:
        doc = json.loads(str(value))
    except ValueError as exc:
        raise _bad(name, value, f"invalid JSON: {exc}") from None
    if not isinstance(doc, dict) or not doc:
        raise _bad(name, value, "expected a JSON object of stream -> time")
    out = {}
    for stream, t in doc.items():
        if isinstance(t, bool) or not isinstance(t, (int, str)):
            raise _bad(name, value, f"stream {stream!r}: not a time")
        out[stream] = parse_timestamp(str(t), name)
    return out


def _admission(g) -> dict:
    """The admission-control and by-timestamp options of :class:`ReadOptions` (Kafka's names)."""
    strategy = (g("startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise _bad("startingOffsetsByTimestampStrategy", g("startingOffsetsByTimestampStrategy"))
    minimum = g("minOffsetsPerTrigger")
    per_part = g("maxRecordsPerPartition")
    return {
        "min_offsets_per_trigger": _parse_int(minimum, "minOffsetsPerTrigger", 1) if minimum else None,
        "max_trigger_delay": parse_duration(g("maxTriggerDelay"), "maxTriggerDelay", 900.0),
        "max_bytes_per_trigger": parse_bytes(g("maxBytesPerTrigger"), "maxBytesPerTrigger"),
        "max_records_per_partition": _parse_int(per_part, "maxRecordsPerPartition", 1) if per_part else None,
        "starting_by_timestamp": parse_times_by_stream(g("startingOffsetsByTimestamp"), "startingOffsetsByTimestamp"),
        "ending_by_timestamp": parse_times_by_stream(g("endingOffsetsByTimestamp"), "endingOffsetsByTimestamp"),
        "timestamp_strategy": strategy,
    }


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
    headers_as_strings: bool
    fail_on_data_loss: bool
    fetch_timeout: float
    batch_rows: int
    min_offsets_per_trigger: int | None = None
    max_trigger_delay: float = 900.0
    max_bytes_per_trigger: int | None = None
    max_records_per_partition: int | None = None
    starting_by_timestamp: dict = field(default_factory=dict)  # stream -> RFC 3339
    ending_by_timestamp: dict = field(default_factory=dict)
    timestamp_strategy: str = "error"
    kv_bucket: str | None = None
    progress_bucket: str | None = None
    progress_key: str | None = None

    def starting_time(self, stream: str) -> str | None:
        """The starting time of ``stream`` (``startingTimestamp`` wins, as in Kafka)."""
        return self.starting_timestamp or self.starting_by_timestamp.get(stream)

    def ending_time(self, stream: str) -> str | None:
        return self.ending_timestamp or self.ending_by_timestamp.get(stream)

    @classmethod
    def parse(cls, opts, streaming: bool | None, require_stream: bool = True) -> "ReadOptions":
        """Parse Spark's (lower-cased) option mapping.

        ``streaming`` picks Kafka's defaults and refuses batch-only options in a streaming query;
        ``None`` (from ``schema()``, which does not know yet) checks every value without those.
        ``require_stream=False`` checks values only (``schema()`` of a write).
        """
        g = lambda name: _get(opts, name)  # noqa: E731
        stream = g("stream")
        pattern = g("streamPattern")
        bucket = g("kvBucket")
        if bucket:
            if stream or pattern:
                raise OptionError("option 'kvBucket' replaces 'stream' / 'streamPattern'; set only one")
            stream = kv_stream(_kv_bucket(bucket))
        if (require_stream or (stream and pattern)) and bool(stream) == bool(pattern):
            raise OptionError(
                "exactly one of the options 'stream' or 'streamPattern' is required "
                f"(got stream={stream!r}, streamPattern={pattern!r})"
            )
        if stream and (re.search(r"[\s.*>/\\]", stream)):
            raise _bad("stream", stream, "stream names have no spaces, '.', '*', '>', '/' or '\\'")
        if pattern:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise _bad("streamPattern", pattern, f"invalid regular expression: {exc}") from None
        subjects = tuple(s.strip() for s in (g("subjects") or "").split(",") if s.strip())
        for s in subjects:
            if re.search(r"\s", s) or s.startswith(".") or s.endswith(".") or ".." in s:
                raise _bad("subjects", g("subjects"), f"{s!r} is not a subject")
        if streaming:
            for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
                if g(name):
                    raise OptionError(f"option {name!r} is for batch reads only (spark.read), not streaming queries")
        default_start = LATEST if streaming else EARLIEST
        starting = parse_offsets(
            g("startingOffsets"), "startingOffsets", default_start, allow_latest=streaming is not False
        )
        ending = parse_offsets(g("endingOffsets"), "endingOffsets", LATEST, allow_earliest=False)
        mmpt, mmpt_name = g("maxMessagesPerTrigger"), "maxMessagesPerTrigger"
        if mmpt is None:
            mmpt, mmpt_name = g("maxOffsetsPerTrigger"), "maxOffsetsPerTrigger"
        header_type = (g("headerValueType") or "binary").strip().lower()
        if header_type not in ("binary", "string"):
            raise _bad("headerValueType", g("headerValueType"))
        return cls(
            connect=connect_options(opts),
            stream=stream,
            stream_pattern=pattern,
            subjects=subjects,
            starting=starting,
            ending=ending,
            starting_timestamp=parse_timestamp(g("startingTimestamp"), "startingTimestamp"),
            ending_timestamp=parse_timestamp(g("endingTimestamp"), "endingTimestamp"),
            max_messages_per_trigger=_parse_int(mmpt, mmpt_name, 1) if mmpt else None,
            min_partitions=_parse_int(g("minPartitions") or 1, "minPartitions", 1),
            include_headers=parse_bool(g("includeHeaders"), "includeHeaders", False),
            headers_as_strings=header_type == "string",
            fail_on_data_loss=parse_bool(g("failOnDataLoss"), "failOnDataLoss", True),
            fetch_timeout=_parse_seconds(g("fetchTimeout"), "fetchTimeout", 30.0, 0.0, exclusive=True),
            batch_rows=_parse_int(g("batchRows") or 8192, "batchRows", 1),
            **_admission(g),
            **_progress(g, stream),
            kv_bucket=bucket,
        )

    def matches(self, name: str) -> bool:
        """Whether a stream name is selected by ``stream`` / ``streamPattern`` (full match)."""
        if self.stream:
            return name == self.stream
        return self.stream_pattern is not None and re.fullmatch(self.stream_pattern, name) is not None


IDEMPOTENCE_NONE = "none"
IDEMPOTENCE_POSITIONAL = "positional"
IDEMPOTENCE_COLUMN = "column"


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
    subject_option: str  # which option named it ("subject" or "topic"), for messages
    idempotence: str
    id_column: str | None
    msg_id_prefix: str | None
    window: int
    min_duplicate_window_s: float
    kv_bucket: str | None = None

    @classmethod
    def parse(cls, opts, streaming: bool) -> "WriteOptions":
        g = lambda name: _get(opts, name)  # noqa: E731
        raw = g("idempotence")
        idem = (raw or IDEMPOTENCE_NONE).strip()
        id_column = None
        if idem.lower().startswith("column:"):
            id_column = idem.split(":", 1)[1].strip()
            if not id_column:
                raise _bad("idempotence", raw, "'column:' needs a column name")
            idem = IDEMPOTENCE_COLUMN
        elif idem.lower() in (IDEMPOTENCE_NONE, IDEMPOTENCE_POSITIONAL):
            idem = idem.lower()
        else:
            raise _bad("idempotence", raw)
        prefix = g("msgIdPrefix")
        if prefix is not None and re.search(r"\s", prefix):
            raise _bad("msgIdPrefix", prefix, "no spaces")
        if idem == IDEMPOTENCE_POSITIONAL and not streaming and not prefix:
            # A batch job has no stable identity Spark could give us; a default prefix would let two
            # different jobs silently deduplicate each other's rows inside the duplicate window.
            raise OptionError(
                "option 'msgIdPrefix' is required with idempotence=positional on a batch write (a stable job id, "
                "e.g. .option('msgIdPrefix', 'nightly-2026-11-24')); or use idempotence=column:<name>"
            )
        subject, subject_option = g("subject"), "subject"
        if g("topic"):
            if subject and g("topic") != subject:
                raise OptionError(f"options 'subject' ({subject!r}) and 'topic' ({g('topic')!r}) disagree; set one")
            subject, subject_option = g("topic"), "topic"
        bucket = g("kvBucket")
        if bucket:
            _kv_bucket(bucket)
            if subject is not None:
                raise OptionError(f"option 'kvBucket' gives each row's subject (the key); drop {subject_option!r}")
        if subject is not None:
            check_publish_subject(subject, f"option {subject_option!r}")
        return cls(
            connect=connect_options(opts),
            subject=subject,
            subject_option=subject_option,
            idempotence=idem,
            id_column=id_column,
            msg_id_prefix=prefix,
            window=_parse_int(g("maxInFlight") or 2048, "maxInFlight", 1),
            min_duplicate_window_s=_parse_seconds(
                g("minDuplicateWindow"), "minDuplicateWindow", 600.0, 0.0, exclusive=False
            ),
            kv_bucket=bucket,
        )
