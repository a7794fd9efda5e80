"""The ``jetstream`` PySpark data source: batch and streaming reads and writes.

Where code runs (PySpark 4 Python Data Source API):

* ``JetStreamDataSource.reader/streamReader/writer/streamWriter`` and the readers' planning
  methods (``partitions()``, ``initialOffset()``, ``latestOffset()``) run on the **driver** (in
  Python workers the JVM starts there; the streaming reader lives in one long-lived process, so
  it may keep a connection between micro-batches).
* ``read(partition)`` and the writers' ``write(iterator)`` run on **executors**, in other
  processes, with a pickled copy of the reader/writer: they open their own connections and keep
  no state between calls.

Offsets, partitions and guarantees are described in :mod:`natsd.spark` and
:mod:`natsd.spark.planning`.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, replace
from types import FrameType

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from natsd import gotime
from natsd.redact import redact
from natsd.spark.jsapi import StreamState, stream_names, stream_state
from natsd.spark.wire import JSApiError, NatsError
from natsd.spark.options import OptionError, ReadOptions, WriteOptions, kv_prefix, warn_unknown
from natsd.spark.planning import (
    StreamPosition,
    bytes_to_sequences,
    cap_by_budget,
    cap_task_size,
    check_data_loss,
    end_position,
    plan_ranges,
    start_position,
)
from natsd.spark.planner import Planner
from natsd.spark.kv import to_kv_rows, to_messages
from natsd.spark.progress import record_progress
from natsd.spark.pushdown import PUSHDOWN_WORKER, Pushed, translate
from natsd.spark.reader import DataLossError, RangeSpec, read_range
from natsd.spark.writer import Publisher, plan_columns, write_batches

__all__ = [
    "JetStreamDataSource",
    "JetStreamPartition",
    "JetStreamCommitMessage",
    "source_schema",
]

log = logging.getLogger("natsd.spark")


def header_type(as_strings: bool = False) -> ArrayType:
    """``ARRAY<STRUCT<key STRING, value BINARY>>`` as Kafka's ``headers``; STRING values on request."""
    value = StringType() if as_strings else BinaryType()
    return ArrayType(StructType([StructField("key", StringType()), StructField("value", value)]))


def source_schema(include_headers: bool, headers_as_strings: bool = False) -> StructType:
    """``subject, data, [headers], stream, seq, timestamp`` (headers only with includeHeaders)."""
    fields = [StructField("subject", StringType()), StructField("data", BinaryType())]
    if include_headers:
        fields.append(StructField("headers", header_type(headers_as_strings)))
    fields += [
        StructField("stream", StringType()),
        StructField("seq", LongType()),
        StructField("timestamp", TimestampType()),
    ]
    return StructType(fields)


class JetStreamPartition(InputPartition):
    """One inclusive sequence range of one stream (a :class:`RangeSpec`), read by one task."""

    def __init__(self, spec: RangeSpec):
        super().__init__(spec)
        self.spec = spec

    def __repr__(self) -> str:
        s = self.spec
        return f"JetStreamPartition({s.stream}[{s.lo}..{s.hi}])"


def _position(st: StreamState) -> StreamPosition:
    return StreamPosition(st.first_seq, st.last_seq, st.messages, st.created)


def _selected_streams(conn: Planner, ro: ReadOptions) -> list[str]:
    if ro.stream:
        return [ro.stream]
    return sorted(n for n in stream_names(conn) if ro.matches(n))


def _spec(ro: ReadOptions, stream: str, lo: int, hi: int, created: str, fail: bool | None = None) -> RangeSpec:
    return RangeSpec(
        stream=stream,
        lo=lo,
        hi=hi,
        filters=ro.subjects,
        include_headers=ro.include_headers,
        headers_as_strings=ro.headers_as_strings,
        batch_rows=ro.batch_rows,
        fetch_timeout=ro.fetch_timeout,
        fail_on_data_loss=ro.fail_on_data_loss if fail is None else fail,
        created=created,
    )


class JetStreamDataSource(DataSource):
    """PySpark data source ``jetstream`` over JetStream streams (nats-server or natsd).

    Register once per session with ``spark.dataSource.register(JetStreamDataSource)``; having
    this project installed also registers it automatically (module ``pyspark_jetstream``).
    """

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self):
        """Called when the DataFrame is defined (``load()``), and also for writes: every option
        value given is checked here, as Kafka's source does at ``load()``, so a bad one fails with
        its name, its value and what is accepted before any query starts."""
        headers = validate_definition(self.options)
        return kv_schema() if self.options.get("kvbucket") else source_schema(*headers)

    def reader(self, schema: StructType) -> "JetStreamBatchReader":
        ro = ReadOptions.parse(self.options, streaming=False)
        if ro.kv_bucket:
            return JetStreamKVReader(ro)
        return JetStreamPushdownReader(ro) if _planning_with_pushdown() else JetStreamBatchReader(ro)

    def streamReader(self, schema: StructType) -> "DataSourceStreamReader":
        try:
            ro = ReadOptions.parse(self.options, streaming=True)
        except OptionError as exc:
            # PySpark's streaming source runner calls reader.stop() in a `finally` even when this
            # method raised, so an error raised here reaches the user as "UnboundLocalError: cannot
            # access local variable 'reader'" with ours only in the chained traceback (observed with
            # PySpark 4.3). A reader that fails on its first call reports our message as the error.
            return _FailedStreamReader(exc)
        return JetStreamKVStreamReader(ro) if ro.kv_bucket else JetStreamStreamReader(ro)

    def writer(self, schema: StructType, overwrite: bool) -> "JetStreamBatchWriter":
        if overwrite:
            # Spark's Kafka sink refuses Overwrite too: published messages cannot be replaced.
            raise OptionError(
                "jetstream sink: save mode 'overwrite' is not supported (a stream's messages cannot be "
                "replaced by a Spark job; purge the stream first if that is what you want); use mode('append'), "
                "which is also what the default mode (errorifexists) means for this sink"
            )
        return JetStreamBatchWriter(WriteOptions.parse(self.options, streaming=False), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> "JetStreamStreamWriter":
        return JetStreamStreamWriter(WriteOptions.parse(self.options, streaming=True), schema)


def validate_definition(opts) -> tuple[bool, bool]:
    """Check every option value given (see :meth:`JetStreamDataSource.schema`).

    Spark calls ``schema()`` for reads and writes alike, without saying which: with ``stream`` /
    ``streamPattern`` it is a read and every read option is checked; without either, the values
    of whatever options are present are checked (a read that lacks both is refused when it is
    planned). Returns ``(includeHeaders, headerValueType == string)`` for the schema.
    """
    warn_unknown(opts, "data source")
    is_read = bool(opts.get("stream") or opts.get("streampattern") or opts.get("kvbucket"))
    ro = ReadOptions.parse(opts, streaming=None, require_stream=is_read)
    if not is_read or opts.get("kvbucket"):
        WriteOptions.parse(opts, streaming=True)
    return ro.include_headers, ro.headers_as_strings


# ---------------------------------------------------------------------------------- batch read
class JetStreamBatchReader(DataSourceReader):
    """Batch read: resolve each stream's ``[start, end]`` once, split by ``minPartitions``."""

    def __init__(self, ro: ReadOptions):
        self.ro = ro
        self.pushed = Pushed()  # what pushFilters took over (JetStreamPushdownReader only)

    def partitions(self):
        ro = self.ro
        if self.pushed.subjects is not None:
            ro = replace(ro, subjects=self.pushed.subjects)
        tasks: dict[str, tuple[int, int]] = {}
        created: dict[str, str] = {}
        if not self.pushed.nothing:
            with Planner(ro.connect) as conn:
                for s in _selected_streams(conn, ro):
                    st = stream_state(conn, s)
                    created[s] = st.created
                    r = self._range(conn, ro, s, st)
                    if r is not None:
                        tasks[s] = r
        plan = cap_task_size(plan_ranges(tasks, ro.min_partitions), ro.max_records_per_partition)
        if not plan:
            # Spark needs at least one partition; an empty range yields no rows.
            name = ro.stream or "-"
            return [JetStreamPartition(_spec(ro, name, 1, 0, ""))]
        return [JetStreamPartition(_spec(ro, s, lo, hi, created[s])) for s, lo, hi in plan]

    def _range(self, conn: Planner, ro: ReadOptions, s: str, st: StreamState) -> tuple[int, int] | None:
        """One stream's inclusive ``(lo, hi)`` from the options and the pushed filters; None = nothing."""
        pos = _position(st)
        pushed = self.pushed
        tseq = None
        when = ro.starting_time(s)
        if when:
            tseq = conn.first_seq_at_or_after(s, when)
            if tseq is None:
                _no_message_since(ro, s, when)
                return None  # startingOffsetsByTimestampStrategy=latest: nothing to read
        start_val = ro.starting.for_stream(s)
        lo = start_position(start_val, pos, tseq) + 1
        if lo < st.first_seq:
            if isinstance(start_val, int) and ro.fail_on_data_loss and tseq is None:
                raise DataLossError(
                    f"stream {s}: startingOffsets {lo} < first available {st.first_seq}; "
                    "set failOnDataLoss=false to start at the first available"
                )
            lo = st.first_seq
        tend = None
        until = ro.ending_time(s)
        if until:
            tend = conn.first_seq_at_or_after(s, until)
        hi = end_position(ro.ending.for_stream(s), pos, tend)
        # Pushed filters only narrow the range (a seq filter never counts as data loss).
        lo, hi = max(lo, pushed.seq_lo), hi if pushed.seq_hi is None else min(hi, pushed.seq_hi)
        if pushed.ts_from_ns is not None and lo <= hi:
            first = conn.first_seq_at_or_after(s, gotime.format_rfc3339(pushed.ts_from_ns))
            if first is None:
                return None
            lo = max(lo, first)
        if pushed.ts_to_ns is not None and lo <= hi:
            after = conn.first_seq_at_or_after(s, gotime.format_rfc3339(pushed.ts_to_ns))
            if after is not None:
                hi = min(hi, after - 1)
        return lo, hi

    def read(self, partition: JetStreamPartition):  # type: ignore[override]  # ours are JetStreamPartitions
        """Runs on executors: one connection, one ephemeral push consumer, Arrow batches out."""
        return read_range(self.ro.connect, partition.spec)


class JetStreamPushdownReader(JetStreamBatchReader):
    """The batch reader with filter pushdown (:mod:`natsd.spark.pushdown`).

    PySpark refuses a reader that implements ``pushFilters`` unless
    ``spark.sql.python.filterPushdown.enabled`` is set (``DATA_SOURCE_PUSHDOWN_DISABLED``), and
    does not tell ``reader()`` which case it is in; so :meth:`JetStreamDataSource.reader` hands
    this class only to the planner that pushes filters, and the plain reader otherwise.
    """

    def pushFilters(self, filters):  # PySpark's name
        pushed, left = translate(filters, self.ro.subjects)
        self.pushed = pushed
        log.info("jetstream source: pushed %s; left to Spark: %s", pushed, left)
        return left


def kv_schema() -> StructType:
    """A KV bucket's table (see :mod:`natsd.spark.kv`)."""
    return StructType(
        [
            StructField("key", StringType()),
            StructField("value", BinaryType()),
            StructField("revision", LongType()),
            StructField("created", TimestampType()),
            StructField("operation", StringType()),
        ]
    )


def _kv_options(ro: ReadOptions) -> ReadOptions:
    """What the bucket's stream is read with: its key subjects, headers as text (KV-Operation)."""
    assert ro.kv_bucket is not None
    return replace(ro, subjects=(kv_prefix(ro.kv_bucket) + ">",), include_headers=True, headers_as_strings=True)


class JetStreamKVReader(JetStreamBatchReader):
    """A KV bucket now: each key's last message (one ``last_per_subject`` read), puts only."""

    def __init__(self, ro: ReadOptions):
        super().__init__(_kv_options(ro))

    def partitions(self):
        ro = self.ro
        with Planner(ro.connect) as conn:
            st = stream_state(conn, ro.stream or "")
        # One task: a last-per-subject consumer cannot be split by sequence ranges.
        spec = replace(_spec(ro, st.name, st.first_seq, st.last_seq, st.created), last_per_subject=True)
        return [JetStreamPartition(spec)]

    def read(self, partition: JetStreamPartition):  # type: ignore[override]  # ours are JetStreamPartitions
        bucket = self.ro.kv_bucket or ""
        for batch in read_range(self.ro.connect, partition.spec):
            yield to_kv_rows(batch, bucket, keep_deletes=False)


def _no_message_since(ro: ReadOptions, stream: str, when: str) -> None:
    """No message is stored at or after a starting time: Kafka's ``error`` strategy fails."""
    if ro.timestamp_strategy == "error":
        raise OptionError(
            f"stream {stream}: no message stored at or after the starting time {when} "
            "(startingTimestamp / startingOffsetsByTimestamp); set startingOffsetsByTimestampStrategy=latest "
            "to start at the end of the stream instead"
        )


def log_lag(end: dict[str, int], states: dict[str, StreamState]) -> None:
    """Log, per stream, how far this trigger's end offset is behind the stream (messages and an
    estimate of bytes): Spark gives Python sources no custom metrics."""
    for s, st in sorted(states.items()):
        behind = max(0, st.last_seq - end.get(s, st.last_seq))
        log.info("jetstream source: stream %s lag %d messages, ~%d bytes behind", s, behind, int(behind * st.avg_size))


def _planning_with_pushdown() -> bool:
    """Whether ``reader()`` was called by PySpark's filter-pushdown planner (see the reader)."""
    f: FrameType | None = sys._getframe(1)
    for _ in range(8):
        if f is None:
            return False
        if f.f_code.co_filename.endswith(PUSHDOWN_WORKER):
            return True
        f = f.f_back
    return False


# ------------------------------------------------------------------------------ streaming read
class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch read with offsets = stream sequences (see :mod:`natsd.spark.planning`).

    No durable consumer and no acks: progress lives only in Spark's checkpoint, so a replayed
    micro-batch reads exactly the same sequences, and ``commit`` has nothing to do.
    """

    def __init__(self, ro: ReadOptions):
        self.ro = ro
        self._conn: Planner | None = None
        self._target: dict[str, int] | None = None
        self._latest: dict | None = None
        self._last_batch_at: float | None = None
        self.clock = time.monotonic  # injectable: minOffsetsPerTrigger/maxTriggerDelay tests set it

    def __getstate__(self):
        # Executors get a pickled copy for read(); the driver's socket must not travel.
        d = dict(self.__dict__)
        d["_conn"] = None
        return d

    def _states(self) -> dict[str, StreamState]:
        for attempt in (0, 1):
            try:
                if self._conn is None:
                    self._conn = Planner(self.ro.connect)
                return {s: stream_state(self._conn, s) for s in _selected_streams(self._conn, self.ro)}
            except JSApiError:
                raise  # a real answer (e.g. stream not found), not a broken link
            except (OSError, TimeoutError, NatsError) as exc:
                # The server restarted or the link dropped between triggers: reconnect once.
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                if attempt:
                    raise
                log.info("jetstream source: reconnecting after %s", exc)
        raise AssertionError("unreachable")

    def initialOffset(self) -> dict:
        ro = self.ro
        out = {}
        for s, st in self._states().items():
            tseq = None
            when = ro.starting_time(s)
            if when:
                conn = self._conn
                assert conn is not None  # _states() connected it
                tseq = conn.first_seq_at_or_after(s, when)
                if tseq is None:
                    _no_message_since(ro, s, when)
                    tseq = st.last_seq + 1
            out[s] = {"seq": start_position(ro.starting.for_stream(s), _position(st), tseq), "created": st.created}
        return out

    def getDefaultReadLimit(self):
        # PySpark has no composite limit: with both a maximum and a minimum, Spark is handed the
        # maximum and latestOffset applies minOffsetsPerTrigger itself (from the options).
        n, least = self.ro.max_messages_per_trigger, self.ro.min_offsets_per_trigger
        if n:
            return ReadMaxRows(n)
        return ReadMinRows(least) if least else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {s: st.last_seq for s, st in self._states().items()}

    def latestOffset(self, start: dict, limit) -> dict:
        ro = self.ro
        states = self._states()
        cur: dict[str, int] = {}
        latest: dict[str, int] = {}
        created: dict[str, str] = {}
        for s, st in states.items():
            ent = start.get(s) if start else None
            if ent is None:
                # A stream that appeared after the query started (streamPattern): from its start.
                last, c = max(st.first_seq - 1, 0), st.created
            else:
                last, c = int(ent["seq"]), ent.get("created", "")
            loss = check_data_loss(s, last, c, _position(st))
            if loss is not None:
                if ro.fail_on_data_loss:
                    raise DataLossError(loss.message + "; set failOnDataLoss=false to skip ahead")
                log.warning("jetstream source: %s; skipping ahead (failOnDataLoss=false)", loss.message)
                last = loss.resume_from
            cur[s] = last
            created[s] = st.created
            top = st.last_seq
            if self._target is not None:
                top = min(top, self._target.get(s, last))
            latest[s] = max(top, last)
        self._latest = {s: {"seq": states[s].last_seq, "created": created[s]} for s in states}
        if self._hold(cur, latest):
            end = cur  # not enough new messages yet: no micro-batch this trigger (minOffsetsPerTrigger)
        else:
            end = cap_by_budget(cur, latest, self._budget(limit, cur, latest, states))
            self._last_batch_at = self.clock()
        log_lag(end, states)
        out = {s: {"seq": end[s], "created": created[s]} for s in end}
        # Keep streams that vanished (pattern no longer matches) so their offsets stay stable.
        for s, ent in (start or {}).items():
            out.setdefault(s, ent)
        return out

    def _budget(self, limit, cur: dict[str, int], latest: dict[str, int], states) -> int | None:
        """Sequences this trigger may take: ``maxOffsetsPerTrigger`` and/or ``maxBytesPerTrigger``."""
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        max_bytes = self.ro.max_bytes_per_trigger
        if max_bytes:
            backlog = {s: max(0, latest[s] - cur[s]) for s in latest}
            by_bytes = bytes_to_sequences(max_bytes, backlog, {s: st.avg_size for s, st in states.items()})
            budget = by_bytes if budget is None else min(budget, by_bytes)
        return budget

    def _hold(self, cur: dict[str, int], latest: dict[str, int]) -> bool:
        """Kafka's ``minOffsetsPerTrigger``: wait while fewer new sequences are stored, unless
        ``maxTriggerDelay`` has passed since the last micro-batch (or AvailableNow runs)."""
        least = self.ro.min_offsets_per_trigger
        now = self.clock()
        if self._last_batch_at is None:
            self._last_batch_at = now  # the delay counts from the query's start
        if not least or self._target is not None:
            return False
        new = sum(max(0, latest[s] - cur[s]) for s in latest)
        return new < least and now - self._last_batch_at < self.ro.max_trigger_delay

    def reportLatestOffset(self):
        """The newest sequences seen at the last trigger (Spark reports them as ``latestOffset``)."""
        return self._latest

    def partitions(self, start: dict, end: dict):
        ro = self.ro
        ranges: dict[str, tuple[int, int]] = {}
        created: dict[str, str] = {}
        for s, e in end.items():
            hi = int(e["seq"])
            st = (start or {}).get(s)
            if st is None:
                lo = 1
            else:
                lo = int(st["seq"]) + 1
                if (e.get("created") and st.get("created") and e["created"] != st.get("created")) or lo > hi + 1:
                    lo = 1  # re-created stream accepted by failOnDataLoss=false: read it from its start
            ranges[s] = (lo, hi)
            created[s] = e.get("created", "")
        plan = cap_task_size(plan_ranges(ranges, ro.min_partitions), ro.max_records_per_partition)
        # Loss was already judged on the driver (latestOffset); tasks only re-check creation.
        return [JetStreamPartition(_spec(ro, s, lo, hi, created[s], fail=False)) for s, lo, hi in plan]

    def read(self, partition: JetStreamPartition):  # type: ignore[override]  # ours are JetStreamPartitions
        """Runs on executors; see :func:`natsd.spark.reader.read_range`."""
        return read_range(self.ro.connect, partition.spec)

    def commit(self, end: dict) -> None:
        """Nothing to acknowledge (offsets live in Spark's checkpoint only); with
        ``progressBucket`` the offsets and lag are recorded for monitoring."""
        ro = self.ro
        if ro.progress_bucket and self._conn is not None:
            key = ro.progress_key or (ro.stream or "")
            record_progress(self._conn, ro.progress_bucket, key, end, self._latest)

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class JetStreamKVStreamReader(JetStreamStreamReader):
    """A KV bucket's change log: every put, delete and purge, with offsets as for a stream."""

    def __init__(self, ro: ReadOptions):
        super().__init__(_kv_options(ro))

    def read(self, partition: JetStreamPartition):  # type: ignore[override]  # ours are JetStreamPartitions
        bucket = self.ro.kv_bucket or ""
        for batch in read_range(self.ro.connect, partition.spec):
            yield to_kv_rows(batch, bucket, keep_deletes=True)


class _FailedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming query whose options are unusable (e.g. ``endingOffsets``, which ``schema()``
    cannot refuse: it is not told whether the DataFrame is read in batch or streaming): every
    planning call raises the option's error, so the query fails with it (see ``streamReader``)."""

    def __init__(self, error: OptionError):
        self.error = error

    def _fail(self, *args, **kwargs):
        raise OptionError(str(self.error))

    initialOffset = latestOffset = partitions = getDefaultReadLimit = _fail
    prepareForTriggerAvailableNow = reportLatestOffset = read = commit = _fail

    def stop(self) -> None:
        """Nothing was opened."""


# ------------------------------------------------------------------------------------- writes
@dataclass
class JetStreamCommitMessage(WriterCommitMessage):
    """Per-task result: how many rows were acknowledged, and how many were duplicates."""

    partition: int
    published: int
    duplicates: int


def _task_context():
    from pyspark import TaskContext

    return TaskContext.get()


class _Writer:
    """Shared row -> message logic for the batch and streaming writers."""

    def __init__(self, wo: WriteOptions, schema: StructType, streaming: bool):
        self.wo = wo
        self.streaming = streaming
        names = schema.fieldNames()
        if wo.kv_bucket:  # rows become messages on $KV.<bucket>.<key> (natsd.spark.kv.to_messages)
            rest = [n for n in names if n not in ("key", "value", "expectedRevision")]
            names = ["subject", "data", *rest] + (["headers"] if "expectedRevision" in names else [])
        self.plan = plan_columns(names, wo.subject, wo.id_column, wo.subject_option)
        self.last_commit: dict | None = None
        if wo.idempotence == "positional":
            self._warn_positional()
        if wo.subject:
            self._check_target()

    def _warn_positional(self) -> None:
        if self.streaming:
            log.warning(
                "jetstream sink: idempotence=positional ids are <query>-<batchId>-<partition>-<row>; a replayed "
                "micro-batch gets the same ids only if its rows reach the sink in the same partitions and order "
                "(true straight after this source, not after a shuffle). Prefer idempotence=column:<name>."
            )
        else:
            log.warning(
                "jetstream sink: idempotence=positional ids are %s-<partition>-<row>; a retried job is deduplicated "
                "only if it partitions and orders its rows exactly as before (a different "
                "spark.sql.shuffle.partitions, AQE coalescing or input split changes the ids and stores rows "
                "twice). Prefer idempotence=column:<name> with a business key.",
                self.wo.msg_id_prefix,
            )

    def _check_target(self) -> None:
        """On the driver, before any task: the subject option must be stored by a stream, and with
        idempotence, warn when the stream's duplicate window is shorter than a restart could take."""
        subject = self.wo.subject
        try:
            with Planner(self.wo.connect) as conn:
                names = stream_names(conn, subject)
                if not names:
                    raise OptionError(
                        f"option {self.wo.subject_option!r}: no stream stores subject {subject!r} on "
                        f"{redact(self.wo.connect.servers)}; create a stream whose subjects match it"
                    )
                if self.wo.idempotence == "none":
                    return
                window_s = stream_state(conn, names[0]).duplicate_window_ns / 1e9
        except OptionError:
            raise
        except Exception as exc:  # the write itself will report connection problems
            log.debug("target check skipped: %s", exc)
            return
        if window_s < self.wo.min_duplicate_window_s:
            log.warning(
                "jetstream sink: stream %s has duplicate_window %.0fs; rows replayed after a restart "
                "longer than that are stored twice. Raise duplicate_window (>= %.0fs) for exactly-once.",
                names[0],
                window_s,
                self.wo.min_duplicate_window_s,
            )

    def _write(self, iterator) -> JetStreamCommitMessage:
        wo = self.wo
        ctx = _task_context()
        part = ctx.partitionId() if ctx else 0
        prefix = None
        if wo.idempotence == "positional":
            if self.streaming:
                batch_id = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
                query = wo.msg_id_prefix or (ctx.getLocalProperty("sql.streaming.queryId") if ctx else None) or "q"
                prefix = f"{query}-{batch_id}-{part}-"
            else:
                prefix = f"{wo.msg_id_prefix}-{part}-"
        pub = Publisher(wo.connect, window=wo.window)
        try:
            if wo.kv_bucket:
                bucket = wo.kv_bucket
                iterator = (to_messages(b, bucket) for b in iterator)
            write_batches(pub, self.plan, iterator, part, prefix)
            stats = pub.finish()
        except BaseException:
            pub.close()
            raise
        return JetStreamCommitMessage(part, stats.published, stats.duplicates)

    def _summarise(self, messages, batch_id=None) -> None:
        ok = [m for m in messages if m is not None]
        self.last_commit = {
            "batch_id": batch_id,
            "published": sum(m.published for m in ok),
            "duplicates": sum(m.duplicates for m in ok),
            "tasks": len(ok),
        }
        log.info("jetstream sink commit: %s", self.last_commit)


class JetStreamBatchWriter(_Writer, DataSourceArrowWriter):
    """``df.write.format("jetstream")``: every task publishes its rows and waits for all PubAcks."""

    def __init__(self, wo: WriteOptions, schema: StructType):
        _Writer.__init__(self, wo, schema, streaming=False)

    def write(self, iterator) -> JetStreamCommitMessage:
        return self._write(iterator)

    def commit(self, messages) -> None:
        self._summarise(messages)

    def abort(self, messages) -> None:
        # Published messages cannot be withdrawn; with idempotence a retry stores nothing twice.
        log.warning("jetstream sink: job aborted after %d task(s) published", len([m for m in messages if m]))


class JetStreamStreamWriter(_Writer, DataSourceStreamArrowWriter):
    """``df.writeStream.format("jetstream")``; positional ids include the micro-batch id."""

    def __init__(self, wo: WriteOptions, schema: StructType):
        _Writer.__init__(self, wo, schema, streaming=True)

    def write(self, iterator) -> JetStreamCommitMessage:
        return self._write(iterator)

    def commit(self, messages, batchId: int) -> None:
        self._summarise(messages, batchId)

    def abort(self, messages, batchId: int) -> None:
        log.warning("jetstream sink: micro-batch %s aborted", batchId)
