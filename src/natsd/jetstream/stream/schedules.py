"""Message schedules (``allow_msg_schedules``), as nats-server 2.12+ runs them.

A client publishes a *schedule message* to one of the stream's subjects with the header
``Nats-Schedule`` and a target subject; the stream stores it (with ``Nats-Rollup: sub`` added,
so a subject holds one schedule) and, when the schedule is due, publishes a *produced message*
to the target, through the stream's own publish path. Headers read on the schedule message::

    Nats-Schedule: @at 2026-01-02T15:04:05Z     one shot (RFC 3339; no time zone allowed)
    Nats-Schedule: @every 5m                    repeating, a Go duration >= 1s (no time zone)
    Nats-Schedule: 0 30 9 * * mon-fri           cron, six fields, seconds first (the
                                                reference's robfig-style grammar: numbers,
                                                names, ``*``/``?``, ``a-b``, ``/step``, lists)
    Nats-Schedule: @hourly | @daily | @midnight | @weekly | @monthly | @yearly | @annually
    Nats-Schedule-Time-Zone: Europe/Paris       IANA zone for cron patterns only
    Nats-Schedule-Target: orders.due            where the produced message goes (required; a
                                                literal subject of this stream, not the
                                                schedule's own subject)
    Nats-Schedule-Source: orders.latest         optional: produce the last message of this
                                                subject instead of the schedule's own content
    Nats-Schedule-TTL: 1m                       optional: Nats-TTL of the produced message
    Nats-Schedule-Rollup: sub                   optional: Nats-Rollup of the produced message

The produced message carries the schedule's (or the source's) headers minus ``Nats-Schedule*``,
``Nats-Expected-*``, ``Nats-Msg-Id``, ``Nats-TTL`` and ``Nats-Rollup``, plus (appended, in this
order) ``Nats-Scheduler: <schedule subject>``, ``Nats-Schedule-Next: purge`` for a one shot or
the next firing time (RFC 3339 with nanoseconds, Go's ``RFC3339Nano``) for a repeating one, then
``Nats-TTL`` / ``Nats-Rollup`` from the schedule. Storing a produced message with
``Nats-Schedule-Next: purge`` purges the schedule's subject (a client may send that too, to
cancel a schedule); storing one with a time moves the schedule to that time. A later message
without ``Nats-Scheduler`` on a schedule's subject replaces (ends) the schedule.

Timers: one :class:`Schedules` per stream keeps ``subject -> entry`` and a heap of entries
``(when_ns, seq, subject)`` ordered by wall time, with lazy deletion (an entry in the heap that is
no longer the subject's current entry is skipped when popped). One clock timer is armed for the
earliest entry (``Clock.call_later``; never sooner than 250 ms after arming, as the reference),
so pending schedules cost memory only (about 300 bytes each) and no CPU until one is due. When due, entries are
produced in sequence order; a schedule
whose message is gone (deleted, purged, expired) is dropped then.

Recovery: a file stream that stopped cleanly left its pending schedules in ``schedules.db``
(:mod:`natsd.jetstream.stream.schedule_state`: checked against the store's state, read once), which is
loaded as it is (a repeating schedule keeps its next time, as the reference's snapshot). Without
it (kill -9, a stale or damaged file) the schedules are rebuilt by reading every stored message
with a ``Nats-Schedule`` header, as the reference does without its snapshot; that scan reads only
the two headers it needs and parses each distinct ``@at`` time once. A rebuilt repeating schedule
that missed firings while the server was down fires once, at its next time from now, as the
reference; a one shot in the past fires at once (from either path).
"""

from __future__ import annotations

import heapq
import logging
import os
import re
from datetime import datetime, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING, Callable

from natsd.gotime import parse_duration, parse_rfc3339
from natsd.jetstream.errors import ApiError, ApiErrors
from natsd.jetstream.stream.schedule_state import decode_state, take_state, write_state
from natsd import nats_headers as NH
from natsd.protocol.headers import nats_headers
from natsd.store.base import MsgNotFound, StoreEOF, StoreError
from natsd.subjects.tokens import is_valid_publish_subject, subjects_collide

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Clock, Timer
    from natsd.store.base import StoreMsg, StreamStore

__all__ = ["Schedules", "parse_schedule", "check_publish", "schedule_to_purge", "SCHEDULE_MARK", "format_rfc3339nano"]

log = logging.getLogger("natsd.jetstream.schedules")

SECOND = 10**9
MIN_FIRE_DELAY = SECOND // 4

H_SCHEDULE = NH.SCHEDULE
H_TZ = NH.SCHEDULE_TIME_ZONE
H_STTL = NH.SCHEDULE_TTL
H_SROLLUP = NH.SCHEDULE_ROLLUP
H_TARGET = NH.SCHEDULE_TARGET
H_SOURCE = NH.SCHEDULE_SOURCE
H_SCHEDULER = NH.SCHEDULER
H_NEXT = NH.SCHEDULE_NEXT
H_ROLLUP = NH.ROLLUP
H_TTL = NH.TTL
H_MSG_ID = NH.MSG_ID
NEXT_PURGE = b"purge"

#: Substring every schedule-related header name contains: the publish path looks for the
#: schedule headers only in header blocks holding it (one ``in`` test per message with headers).
SCHEDULE_MARK = NH.SCHEDULE_PREFIX
_EXPECTED_PREFIX = NH.EXPECTED_PREFIX

_PREDEFINED = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}
# (min, max, names) of second, minute, hour, day of month, month, day of week.
_MONTHS = {
    m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))
}
_DAYS = {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_BOUNDS: tuple[tuple[int, int, dict[str, int] | None], ...] = (
    (0, 59, None),
    (0, 59, None),
    (0, 23, None),
    (1, 31, None),
    (1, 12, _MONTHS),
    (0, 6, _DAYS),
)
_INT = re.compile(r"[+-]?\d+\Z")  # what Go's strconv.Atoi takes
_CRON_YEARS = 5  # the reference gives up when nothing matches within five years


def _cron_int(tok: str, names: dict[str, int] | None) -> int:
    if names is not None and tok.lower() in names:
        return names[tok.lower()]
    if not _INT.match(tok):
        raise ValueError(tok)
    n = int(tok)
    if n < 0:
        raise ValueError(tok)
    return n


def _cron_field(field: str, lo: int, hi: int, names: dict[str, int] | None) -> str:
    """One field in the reference's grammar -> the same set for croniter: ``*`` when the
    reference sets its "star" bit (``*``/``?`` without a step > 1: that decides how day of
    month and day of week combine), else the explicit list of values."""
    values: set[int] = set()
    star = False
    for expr in (p for p in field.split(",") if p):
        range_step = expr.split("/")
        low_high = range_step[0].split("-")
        if low_high[0] in ("*", "?"):
            start, end, this_star = lo, hi, True
        else:
            this_star = False
            start = _cron_int(low_high[0], names)
            if len(low_high) == 1:
                end = start
            elif len(low_high) == 2:
                end = _cron_int(low_high[1], names)
            else:
                raise ValueError(expr)
        if len(range_step) == 1:
            step = 1
        elif len(range_step) == 2:
            step = _cron_int(range_step[1], None)
            if len(low_high) == 1:  # "N/step" means N through the maximum
                end = hi
            if step > 1:
                this_star = False
        else:
            raise ValueError(expr)
        if start < lo or end > hi or start > end or step == 0:
            raise ValueError(expr)
        values.update(range(start, end + 1, step))
        star = star or this_star
    if not values:
        raise ValueError(field)
    if star:
        return "*"
    return ",".join(str(v) for v in sorted(values))


def _cron_next(pattern: str, tz: tzinfo, ts_ns: int) -> int:
    """The first instant strictly after ``ts_ns`` (truncated to the second) matching the
    six-field cron ``pattern`` in zone ``tz``; ValueError when invalid or never within 5 years."""
    fields = pattern.split()
    if len(fields) != 6:
        raise ValueError("pattern requires 6 fields")
    expr = " ".join(_cron_field(f, *b) for f, b in zip(fields, _BOUNDS))
    start = datetime.fromtimestamp(ts_ns // SECOND, tz)
    # Imported here: croniter (and its dateutil) cost ~2 MB of RSS in every server, while only
    # streams with cron schedules need it.
    from croniter import croniter  # type: ignore[import-untyped]  # (no stubs; one call below)

    try:
        it = croniter(expr, start, second_at_beginning=True, max_years_between_matches=_CRON_YEARS)
        nxt = it.get_next(datetime)
    except Exception as e:  # croniter's own errors (bad date, nothing found)
        raise ValueError(str(e)) from None
    if nxt.year > start.year + _CRON_YEARS:
        raise ValueError("pattern exceeds maximum range")
    return int(nxt.timestamp()) * SECOND


def _round_second(ns: int) -> int:
    # Go's Time.Round(time.Second): halfway rounds up.
    return (ns + SECOND // 2) // SECOND * SECOND


def _local_zone() -> tzinfo:
    """Go's ``time.Local``: the zone named by ``$TZ``, else /etc/localtime, else UTC."""
    from zoneinfo import ZoneInfo  # (zoneinfo, with sysconfig, loads with the first zone: ADR 0015)

    tzname = os.environ.get("TZ")
    try:
        if tzname:
            return ZoneInfo(tzname.lstrip(":"))
        with open("/etc/localtime", "rb") as f:
            return ZoneInfo.from_file(f)
    except (ValueError, OSError, KeyError):
        return timezone.utc


def load_zone(tz: bytes | None) -> tzinfo | None:
    """``Nats-Schedule-Time-Zone`` -> zone (None when absent); ApiError 10223 when present but
    empty or unknown (as Go's time.LoadLocation: "UTC" and "Local" are names too)."""
    if tz is None:
        return None
    name = tz.decode(errors="replace")
    if not name:
        raise ApiErrors.MESSAGE_SCHEDULES_TIME_ZONE_INVALID()
    if name == "UTC":
        return timezone.utc
    if name == "Local":
        return _local_zone()
    from zoneinfo import ZoneInfo  # (zoneinfo, with sysconfig, loads with the first zone: ADR 0015)

    try:
        return ZoneInfo(name)
    except (ValueError, OSError, KeyError):  # unknown zone, bad name (ZoneInfoNotFoundError is a KeyError)
        raise ApiErrors.MESSAGE_SCHEDULES_TIME_ZONE_INVALID() from None


def parse_schedule(pattern: str, zone: tzinfo | None, ts_ns: int, now_ns: int) -> tuple[int, bool] | None:
    """A ``Nats-Schedule`` value -> (next firing, wall ns; repeating?) for a schedule stored at
    ``ts_ns``; ``(0, False)`` for an empty pattern (no schedule); None when invalid."""
    if not pattern:
        return 0, False
    try:
        if pattern.startswith("@at "):
            if zone is not None:
                return None
            return parse_rfc3339(pattern[4:]), False
        if pattern.startswith("@every "):
            if zone is not None:
                return None
            dur = parse_duration(pattern[7:])
            if dur < SECOND:
                return None
            nxt = _round_second(ts_ns) + dur
            if nxt < now_ns:  # missed firings (a restart): fire once, one interval from now
                nxt = _round_second(now_ns) + dur
            return nxt, True
        cron = _PREDEFINED.get(pattern, pattern)
        tz = zone if zone is not None else timezone.utc
        nxt = _cron_next(cron, tz, ts_ns)
        if nxt < now_ns:
            nxt = _cron_next(cron, tz, _round_second(now_ns))
        return nxt, True
    except ValueError:
        return None


def format_rfc3339nano(ns: int, zone: tzinfo | None = None) -> str:
    """Go's ``time.RFC3339Nano`` of ``ns`` in ``zone`` (UTC: ``Z``; fraction without trailing
    zeros): the value of ``Nats-Schedule-Next``."""
    secs, frac = divmod(ns, SECOND)
    dt = datetime.fromtimestamp(secs, zone if zone is not None else timezone.utc)
    base = dt.strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        base += f".{frac:09d}".rstrip("0")
    off = dt.utcoffset() or timedelta(0)
    if not off:  # Go's "Z07:00": a zero offset is written Z whatever the zone
        return base + "Z"
    total = int(off.total_seconds())
    sign = "+" if total >= 0 else "-"
    h, m = divmod(abs(total) // 60, 60)
    return f"{base}{sign}{h:02d}:{m:02d}"


def _schedule_of(h: dict[bytes, bytes], ts_ns: int, now_ns: int) -> tuple[int, bool, tzinfo | None]:
    """The next firing of the schedule in headers ``h`` (0 when none); ApiError when invalid."""
    zone = load_zone(h.get(H_TZ))
    pattern = h.get(H_SCHEDULE)
    if not pattern:
        return 0, False, zone
    r = parse_schedule(pattern.decode(errors="replace"), zone, ts_ns, now_ns)
    if r is None:
        raise ApiErrors.MESSAGE_SCHEDULES_PATTERN_INVALID()
    return r[0], r[1], zone


def _append_header(hdr: bytes | None, name: bytes, value: bytes) -> bytes:
    """Add ``name: value`` as the last header (Go's genHeader)."""
    base = hdr[:-2] if hdr and len(hdr) > 2 else b"NATS/1.0\r\n"
    return base + name + b": " + value + b"\r\n\r\n"


def _strip_headers(hdr: bytes) -> bytes | None:
    """Drop the headers a produced message must not inherit (see the module docstring)."""
    lines = hdr.split(b"\r\n")
    kept = [lines[0]]
    for ln in lines[1:]:
        if not ln:
            continue
        if ln.startswith(b"Nats-"):
            name = ln.split(b":", 1)[0]
            if name.startswith(H_SCHEDULE) or name.startswith(_EXPECTED_PREFIX) or name in (H_MSG_ID, H_TTL, H_ROLLUP):
                continue
        kept.append(ln)
    if len(kept) == 1:
        return None
    return b"\r\n".join(kept) + b"\r\n\r\n"


def check_publish(
    subject: str,
    hdr: bytes,
    h: dict[bytes, bytes],
    allowed: bool,
    allow_ttl: bool,
    stream_subjects: list[str],
    load_last: Callable[[str], "StoreMsg | None"],
    parse_ttl: Callable[[str], int],
) -> bytes:
    """Validate the schedule headers of a client's publish (the reference's checks, in its order)
    and return the header block to store (``Nats-Rollup: sub`` added to a schedule). Raises
    ApiError with the reference's code when refused."""
    try:
        when, _, _ = _schedule_of(h, 0, 0)
    except ApiError:
        if not allowed:
            raise ApiErrors.MESSAGE_SCHEDULES_DISABLED() from None
        raise
    if when:
        if not allowed:
            raise ApiErrors.MESSAGE_SCHEDULES_DISABLED()
        sttl = h.get(H_STTL)
        if sttl:
            try:
                parse_ttl(sttl.decode(errors="replace"))
            except ApiError:
                raise ApiErrors.MESSAGE_SCHEDULES_TTL_INVALID() from None
        srollup = h.get(H_SROLLUP)
        if srollup and srollup != b"sub":
            raise ApiErrors.MESSAGE_SCHEDULES_ROLLUP_INVALID()
        if sttl and not allow_ttl:
            raise ApiErrors.MESSAGE_TTL_DISABLED()
        target = (h.get(H_TARGET) or b"").decode(errors="replace")
        if not target or not is_valid_publish_subject(target) or target == subject:
            raise ApiErrors.MESSAGE_SCHEDULES_TARGET_INVALID()
        source = (h.get(H_SOURCE) or b"").decode(errors="replace")
        if source and (source in (target, subject) or not is_valid_publish_subject(source)):
            raise ApiErrors.MESSAGE_SCHEDULES_SOURCE_INVALID()
        if not any(subjects_collide(s, target) for s in stream_subjects):
            raise ApiErrors.MESSAGE_SCHEDULES_TARGET_INVALID()
        if source and not any(subjects_collide(s, source) for s in stream_subjects):
            raise ApiErrors.MESSAGE_SCHEDULES_SOURCE_INVALID()
        rollup = h.get(H_ROLLUP)
        if not rollup:
            hdr = _append_header(hdr, H_ROLLUP, b"sub")
        elif rollup.lower() != b"sub":  # case-insensitive, as nats-server's getRollup
            raise ApiErrors.MESSAGE_SCHEDULES_ROLLUP_INVALID()
    nxt = h.get(H_NEXT)
    if nxt:
        # Clients may send Nats-Schedule-Next only to purge (cancel) a schedule.
        scheduler = (h.get(H_SCHEDULER) or b"").decode(errors="replace")
        if nxt != NEXT_PURGE or not scheduler or scheduler == subject or not is_valid_publish_subject(scheduler):
            raise ApiErrors.MESSAGE_SCHEDULES_SCHEDULER_INVALID()
        if not allowed:
            raise ApiErrors.MESSAGE_SCHEDULES_DISABLED()
        last = load_last(scheduler)
        if last is not None and not (last.hdr and H_SCHEDULE in nats_headers(last.hdr)):
            raise ApiErrors.MESSAGE_SCHEDULES_SCHEDULER_INVALID()
    elif h.get(H_SCHEDULER):
        raise ApiErrors.MESSAGE_SCHEDULES_SCHEDULER_INVALID()
    return hdr


def schedule_to_purge(hdr: bytes) -> str:
    """The subject a stored message with ``Nats-Schedule-Next: purge`` and ``Nats-Scheduler``
    purges ("" when none)."""
    h = nats_headers(hdr)
    if h.get(H_NEXT) == NEXT_PURGE:
        return (h.get(H_SCHEDULER) or b"").decode(errors="replace")
    return ""


# The rebuild's fast path: the first ``Nats-Schedule`` line (as nats_headers: first wins, the
# value's leading spaces stripped) and whether a time zone line is present at all.
_LINE_SCHEDULE = b"\r\n" + H_SCHEDULE + b":"
_LINE_TZ = b"\r\n" + H_TZ + b":"
_AT_UTC = re.compile(rb"@at (\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)Z\Z")
_EPOCH_NAIVE = datetime(1970, 1, 1)
_ONE_SECOND = timedelta(seconds=1)
_AT_CACHE_MAX = 1 << 16


def _rebuilt_when(hdr: bytes, ts: int, now: int, at_cache: dict[bytes, int]) -> int:
    """The firing time of a stored message's schedule for the rebuild (0: none or invalid): what
    ``_schedule_of(nats_headers(hdr), ts, now)`` gives, with the common ``@at <UTC time>`` without
    a time zone parsed from the one header it needs, each distinct value once."""
    i = hdr.find(_LINE_SCHEDULE)
    if i < 0:
        return 0
    if _LINE_TZ not in hdr:
        j = hdr.find(b"\r\n", i + 2)
        pattern = hdr[i + len(_LINE_SCHEDULE) : j if j >= 0 else len(hdr)].lstrip(b" ")
        when = at_cache.get(pattern)
        if when is not None:
            return when
        m = _AT_UTC.match(pattern)
        if m is not None:
            y, mo, d, h, mi, sec = map(int, m.groups())
            try:  # datetime refuses what Go's parser refuses here (hour 24, second 60, Feb 30)
                when = (datetime(y, mo, d, h, mi, sec) - _EPOCH_NAIVE) // _ONE_SECOND * SECOND
            except ValueError:
                when = 0
            if len(at_cache) >= _AT_CACHE_MAX:
                at_cache.clear()
            at_cache[pattern] = when
            return when
    try:
        return _schedule_of(nats_headers(hdr), ts, now)[0]
    except ApiError:
        return 0


class Schedules:
    """The pending schedules of one stream (see the module docstring).

    ``produce(target, hdr, msg)`` publishes a produced message through the stream's publish path
    and returns its sequence (0 when refused); the stream sets :attr:`producing` around it so that
    its own checks treat the message as the server's, not a client's. ``state_dir`` (file streams):
    the directory of ``schedules.db`` (:meth:`save` at a clean stop, read by :meth:`recover`)."""

    __slots__ = (
        "_clock",
        "_store",
        "_produce",
        "_state_dir",
        "_complete",
        "_entries",
        "_heap",
        "_timer",
        "_timer_at",
        "producing",
        "stopped",
    )

    def __init__(
        self,
        clock: "Clock",
        store: "StreamStore",
        produce: Callable[[str, bytes | None, bytes], int],
        state_dir: str | None = None,
    ) -> None:
        self._clock = clock
        self._store = store
        self._produce = produce
        self._state_dir = state_dir
        # False once a schedule whose message is still stored was dropped from memory (a refused
        # or failed firing): the reference brings those back at its next start, so :meth:`save`
        # then writes nothing and the next start rebuilds from the messages.
        self._complete = True
        # subject -> its current heap entry (when_ns, seq, subject); the heap may hold stale ones.
        self._entries: dict[str, tuple[int, int, str]] = {}
        self._heap: list[tuple[int, int, str]] = []
        self._timer: Timer | None = None
        self._timer_at = 0
        self.producing = False
        self.stopped = False

    def __len__(self) -> int:
        return len(self._entries)

    def next_due(self) -> int:
        """Wall ns of the earliest pending schedule (0: none)."""
        self._drop_stale_top()
        return self._heap[0][0] if self._heap else 0

    # -- bookkeeping ------------------------------------------------------------------------------
    def _set(self, subject: str, seq: int, when: int) -> None:
        e = (when, seq, subject)
        self._entries[subject] = e
        heapq.heappush(self._heap, e)
        # A heap mostly of stale entries (schedules replaced over and over): rebuild it.
        if len(self._heap) > 64 and len(self._heap) > 2 * len(self._entries):
            self._heap = list(self._entries.values())
            heapq.heapify(self._heap)

    def remove_subject(self, subject: str) -> None:
        self._entries.pop(subject, None)

    def _drop_stale_top(self) -> None:
        heap, entries = self._heap, self._entries
        while heap and entries.get(heap[0][2]) is not heap[0]:
            heapq.heappop(heap)

    def _arm(self) -> None:
        if self.stopped:
            return
        nxt = self.next_due()
        if not nxt:
            if self._timer is not None:
                self._timer.cancel()
                self._timer, self._timer_at = None, 0
            return
        now = self._clock.time_ns()
        # Never sooner than MIN_FIRE_DELAY from now, as the reference: a burst of due schedules
        # (or one in the past) is produced in one batch, and a client sees its schedule stored
        # before the produced message.
        at = max(nxt, now + MIN_FIRE_DELAY)
        if self._timer is not None:
            if self._timer_at <= at:
                return  # armed for an earlier (or the same) time already
            self._timer.cancel()
        self._timer_at = at
        self._timer = self._clock.call_later(at - now, self._fire)

    def stop(self) -> None:
        self.stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # -- the stream's hooks --------------------------------------------------------------------------
    def recover(self) -> None:
        """Load ``schedules.db`` when it matches the store, else rebuild from the stored schedule
        messages (after a restart)."""
        st = self._store.state()
        stamp = (st.first_seq, st.last_seq, st.msgs)
        data = take_state(self._state_dir) if self._state_dir is not None else None
        if data is not None:
            try:
                # The store's own subject strings, so that the entries do not hold copies.
                totals = self._store.subjects_totals(">")
                saved, entries = decode_state(data, dict(zip(totals, totals)))
                del totals
            except ValueError as e:
                log.warning("stream schedules state unusable (%s); rebuilding from the messages", e)
            else:
                if saved == stamp:
                    self._load(entries)
                    return
                log.warning(
                    "stream schedules state is stale (store %s, file %s); rebuilding from the messages", stamp, saved
                )
        if not st.msgs:
            return
        now = self._clock.time_ns()
        found: dict[str, tuple[int, int, str]] = {}
        at_cache: dict[bytes, int] = {}
        for sm in self._store.iter_msgs(st.first_seq, st.last_seq):
            hdr = sm.hdr
            if hdr and SCHEDULE_MARK in hdr:
                when = _rebuilt_when(hdr, sm.ts, now, at_cache)
                if when:
                    found[sm.subject] = (when, sm.seq, sm.subject)  # the later one of a subject wins
                elif H_SCHEDULER not in hdr and found:
                    found.pop(sm.subject, None)
            elif found:
                # A later message without Nats-Scheduler on a schedule's subject ended it (as
                # on_stored does live), so the rebuild does not bring it back.
                found.pop(sm.subject, None)
        self._load(list(found.values()))

    def _load(self, entries: list[tuple[int, int, str]]) -> None:
        """Start from these entries, one per subject (recovery: the instance holds none yet);
        one heapify instead of a push each."""
        self._entries = {e[2]: e for e in entries}
        self._heap = entries  # (the caller's own list: not used after)
        heapq.heapify(self._heap)
        self._arm()

    def save(self) -> None:
        """At a clean stop, after the stream's last flush: write ``schedules.db`` (nothing for a
        memory stream, or when memory no longer matches what a rebuild would find)."""
        if self._state_dir is None or not self._complete:
            return
        st = self._store.state()
        try:
            write_state(self._state_dir, (st.first_seq, st.last_seq, st.msgs), list(self._entries.values()))
        except OSError as e:  # the next start rebuilds from the messages
            log.warning("could not write the stream's schedules state: %s", e)

    def on_stored(self, seq: int, subject: str, hdr: bytes | None, ts: int) -> None:
        """A message was stored on ``subject`` (the stream purges what :func:`schedule_to_purge`
        names itself)."""
        if not hdr or SCHEDULE_MARK not in hdr:
            if self._entries:
                self._entries.pop(subject, None)  # a plain message replaces the schedule
            return
        h = nats_headers(hdr)
        try:
            when = _schedule_of(h, ts, self._clock.time_ns())[0]
        except ApiError:
            when = 0
        scheduler = (h.get(H_SCHEDULER) or b"").decode(errors="replace")
        if when:
            self._set(subject, seq, when)
        elif not scheduler:
            self._entries.pop(subject, None)
        nxt = h.get(H_NEXT)
        if nxt and scheduler:
            if nxt == NEXT_PURGE:
                self._entries.pop(scheduler, None)
            else:
                e = self._entries.get(scheduler)
                if e is not None:
                    try:
                        self._set(scheduler, e[1], parse_rfc3339(nxt.decode(errors="replace")))
                    except ValueError:
                        pass
        self._arm()

    # -- firing ------------------------------------------------------------------------------------
    def _fire(self) -> None:
        self._timer, self._timer_at = None, 0
        if self.stopped:
            return
        now = self._clock.time_ns()
        due: list[tuple[int, int, str]] = []
        heap, entries = self._heap, self._entries
        while heap and heap[0][0] <= now:
            e = heapq.heappop(heap)
            if entries.get(e[2]) is e:
                due.append(e)
        due.sort(key=lambda e: e[1])
        for e in due:
            if self.stopped:
                return
            if entries.get(e[2]) is not e:  # replaced or purged by an earlier one of this batch
                continue
            try:
                self._fire_one(e, now)
            except Exception:  # one broken schedule must not stop the others
                log.exception("message schedule %s (seq %d) failed", e[2], e[1])
                if entries.get(e[2]) is e:
                    del entries[e[2]]
                    self._complete = False
        self._arm()

    def _fire_one(self, e: tuple[int, int, str], now: int) -> None:
        when, seq, subject = e
        entries = self._entries
        try:
            sm = self._store.load_msg(seq)
        except StoreError:
            del entries[subject]  # the schedule message is gone
            return
        h = nats_headers(sm.hdr) if sm.hdr else {}
        try:
            zone = load_zone(h.get(H_TZ))
            r = parse_schedule((h.get(H_SCHEDULE) or b"").decode(errors="replace"), zone, when, now)
        except ApiError:
            r, zone = None, None
        target = (h.get(H_TARGET) or b"").decode(errors="replace")
        if r is None or not r[0] or not target:
            del entries[subject]
            return
        nxt, repeat = r
        src_hdr, msg = sm.hdr, sm.msg
        source = (h.get(H_SOURCE) or b"").decode(errors="replace")
        if source:
            try:
                last = self._store.load_last_msg(source)
                src_hdr, msg = last.hdr, last.msg
            except (MsgNotFound, StoreEOF):
                pass  # no message there yet: the schedule's own content
        out = _strip_headers(src_hdr) if src_hdr else None
        out = _append_header(out, H_SCHEDULER, subject.encode())
        out = _append_header(out, H_NEXT, format_rfc3339nano(nxt, zone).encode() if repeat else NEXT_PURGE)
        sttl, srollup = h.get(H_STTL), h.get(H_SROLLUP)
        if sttl:
            out = _append_header(out, H_TTL, sttl)
        if srollup:
            out = _append_header(out, H_ROLLUP, srollup)
        self.producing = True
        try:
            produced = self._produce(target, out, msg)
        finally:
            self.producing = False
        if not produced and entries.get(subject) is e:
            # Refused (the target left the stream's subjects, a limit...): the reference keeps
            # it in flight until a restart; we drop it from memory alike (the message stays).
            del entries[subject]
            self._complete = False
