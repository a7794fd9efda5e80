"""Offset and partition planning (pure functions: no Spark, no sockets).

Conventions used everywhere in the connector:

* A streaming offset is ``{"<stream>": {"seq": N, "created": "<stream created time>"}}`` per
  stream, where ``N`` is the **last sequence already handed to Spark**; a micro-batch from
  ``start`` to ``end`` reads sequences ``(start.seq, end.seq]``. These dicts are what Spark writes
  to ``<checkpoint>/offsets/<batchId>``, so a replayed batch reads exactly the same sequences.
* A planned range is inclusive ``[lo, hi]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from natsd.spark.options import EARLIEST, LATEST, OffsetValue

__all__ = [
    "StreamPosition",
    "start_position",
    "end_position",
    "split_range",
    "plan_ranges",
    "cap_by_budget",
    "cap_task_size",
    "bytes_to_sequences",
    "check_data_loss",
    "DataLoss",
]


@dataclass(frozen=True)
class StreamPosition:
    """The planning-relevant facts about a stream (a subset of STREAM.INFO)."""

    first_seq: int
    last_seq: int
    messages: int = 0
    created: str = ""


def start_position(value: OffsetValue, st: StreamPosition, time_seq: int | None = None) -> int:
    """The "last consumed" sequence for a new query's starting offset.

    ``earliest`` -> ``first_seq - 1``; ``latest`` -> ``last_seq``; a sequence ``n`` (first to read)
    -> ``n - 1``. ``time_seq`` (the first sequence at/after ``startingTimestamp``) wins when given;
    ``time_seq=None`` with a timestamp set means nothing is that new, handled by the caller.
    """
    if time_seq is not None:
        return time_seq - 1
    if value == EARLIEST:
        # An empty stream reports first_seq = last_seq + 1 (or 0 when never written).
        return max(st.first_seq - 1, 0) if st.first_seq else st.last_seq
    if value == LATEST:
        return st.last_seq
    return int(value) - 1


def end_position(value: OffsetValue, st: StreamPosition, time_end_seq: int | None = None) -> int:
    """The last sequence (inclusive) a batch read covers.

    Both ends are exclusive bounds, as Kafka's ``endingOffsets`` is: a sequence ``n`` from
    ``endingOffsets`` is the first one not read, and ``time_end_seq`` (the first sequence stored
    at/after ``endingTimestamp``) likewise, so the read ends at the sequence before either.
    """
    end = st.last_seq
    if value != LATEST and value != EARLIEST:
        end = min(end, int(value) - 1)
    if time_end_seq is not None:
        end = min(end, time_end_seq - 1)
    return end


def split_range(lo: int, hi: int, parts: int) -> list[tuple[int, int]]:
    """Split the inclusive range ``[lo, hi]`` into at most ``parts`` contiguous, near-equal ranges."""
    if hi < lo:
        return []
    n = hi - lo + 1
    parts = max(1, min(parts, n))
    base, extra = divmod(n, parts)
    out = []
    cur = lo
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append((cur, cur + size - 1))
        cur += size
    return out


def plan_ranges(ranges: dict[str, tuple[int, int]], min_partitions: int) -> list[tuple[str, int, int]]:
    """Turn per-stream inclusive ranges into ``(stream, lo, hi)`` tasks.

    Every non-empty stream gets at least one task; when ``min_partitions`` asks for more, the
    extra tasks go to streams in proportion to their range sizes (Kafka's ``minPartitions``).
    Output is ordered by stream name, then sequence, so plans are deterministic.
    """
    live = {s: r for s, r in sorted(ranges.items()) if r[1] >= r[0]}
    if not live:
        return []
    sizes = {s: hi - lo + 1 for s, (lo, hi) in live.items()}
    total = sum(sizes.values())
    want = max(min_partitions, len(live))
    shares = {s: max(1, (want * sz) // total) for s, sz in sizes.items()}
    # The floor of 1 per stream can overshoot; take the excess back from the biggest shares.
    while sum(shares.values()) > want:
        s = max((x for x in shares if shares[x] > 1), key=lambda x: (shares[x], x))
        shares[s] -= 1
    # Hand out what integer division left over, largest remainder first.
    left = want - sum(shares.values())
    if left > 0:
        order = sorted(live, key=lambda s: ((want * sizes[s]) % total, sizes[s]), reverse=True)
        for s in order[:left]:
            shares[s] += 1
    out: list = []
    for s, (lo, hi) in live.items():
        out.extend((s, a, b) for a, b in split_range(lo, hi, shares[s]))
    return out


def cap_by_budget(start: dict[str, int], latest: dict[str, int], budget: int | None) -> dict[str, int]:
    """Admission control: advance each stream from ``start`` towards ``latest`` by at most
    ``budget`` sequences in total, split across streams in proportion to their backlog
    (Kafka's ``maxOffsetsPerTrigger``). With a subject filter this counts sequences, not rows.
    """
    backlog = {s: max(0, latest[s] - start.get(s, latest[s])) for s in latest}
    total = sum(backlog.values())
    if budget is None or total <= budget:
        return dict(latest)
    out = {}
    given = 0
    for s in sorted(latest):
        b = backlog[s]
        take = (budget * b) // total
        out[s] = start.get(s, latest[s]) + take
        given += take
    # Rounding left some budget: give it to the streams with backlog left, in name order.
    for s in sorted(latest):
        if given >= budget:
            break
        room = latest[s] - out[s]
        if room > 0:
            extra = min(room, budget - given)
            out[s] += extra
            given += extra
    return out


def cap_task_size(plan: list[tuple[str, int, int]], max_records: int | None) -> list[tuple[str, int, int]]:
    """Split every planned range longer than ``max_records`` sequences into near-equal parts
    (Kafka's ``maxRecordsPerPartition``, applied after ``minPartitions``)."""
    if not max_records:
        return plan
    out: list[tuple[str, int, int]] = []
    for s, lo, hi in plan:
        parts = -(-(hi - lo + 1) // max_records)
        out.extend((s, a, b) for a, b in split_range(lo, hi, parts))
    return out


def bytes_to_sequences(max_bytes: int, backlog: dict[str, int], avg_size: dict[str, float]) -> int:
    """A sequence budget worth about ``max_bytes`` of the backlog (``maxBytesPerTrigger``): the
    backlog's average stored size per message, from each stream's STREAM.INFO; at least 1."""
    seqs = sum(backlog.values())
    if seqs <= 0:
        return 1
    weighted = sum(backlog[s] * avg_size.get(s, 0.0) for s in backlog) / seqs
    return max(1, int(max_bytes // weighted)) if weighted > 0 else seqs


@dataclass(frozen=True)
class DataLoss:
    """Why sequences the query wanted are gone, and where reading can resume."""

    message: str
    resume_from: int  # new "last consumed" position


def check_data_loss(stream: str, last_consumed: int, created: str, st: StreamPosition) -> DataLoss | None:
    """Compare a checkpointed position with the stream now.

    Detects (a) a re-created stream (its ``created`` time changed), (b) sequences removed below
    the next one to read (``max_msgs``/``max_age``/purge), and (c) a stream that went backwards.
    Returns None when reading can continue from ``last_consumed``.
    """
    if created and st.created and created != st.created:
        return DataLoss(
            f"stream {stream} was re-created (created {st.created}, checkpoint has {created})",
            max(st.first_seq - 1, 0),
        )
    if last_consumed > st.last_seq:
        return DataLoss(
            f"stream {stream}: checkpoint at sequence {last_consumed} is beyond the last sequence {st.last_seq} "
            "(stream re-created or truncated)",
            max(st.first_seq - 1, 0),
        )
    nxt = last_consumed + 1
    if st.first_seq > nxt:
        return DataLoss(
            f"stream {stream}: next sequence {nxt} < first available {st.first_seq} "
            "(messages removed by limits or purge)",
            st.first_seq - 1,
        )
    return None
