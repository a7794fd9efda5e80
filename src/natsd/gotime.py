"""Go's time spellings, the one place natsd reads and writes them.

nats-server is written in Go, so durations and times reach clients in Go's spelling:
``time.Duration`` as nanoseconds in JSON and as ``1h2m3.5s`` in config files, headers
(``Nats-TTL``), ``-NAK {"delay": ...}``-style arguments and error texts; ``time.Time`` as RFC 3339
with nanoseconds (Go's ``RFC3339Nano`` in UTC). Every layer needs them (config, JetStream, the
monitor, natsctl, the Spark source), so this is a leaf module that imports nothing of natsd and
any package may import it (``tests/unit/test_layering.py``).

Durations
    :func:`parse_duration` is Go's ``time.ParseDuration``: the same grammar
    (``[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+`` or a bare ``0``), the same int64 range (overflow is
    an error, never a wrap or a float), the same error texts, byte for byte (``time: invalid
    duration "x"``, ``time: unknown unit "x" in duration "1x"``, ``time: missing unit in duration
    "1"``). Whole numbers are integer-exact (``9007199254740993ns`` stays odd); a fraction is
    scaled the way Go scales it (through a float64 of at most 3.6e12, so the result is the same
    nanosecond Go gets). :func:`format_duration` is ``Duration.String()``; :func:`uptime` is
    nats-server's ``/varz``/``/connz`` uptime and idle spelling (``1y2d3h4m5s``), which is not
    Go's.

Times
    :func:`format_rfc3339` / :func:`parse_rfc3339` convert between Unix nanoseconds and RFC 3339
    exactly as Go marshals and unmarshals a ``time.Time`` (UTC out, ``Z`` or ``±hh:mm`` in,
    fraction trimmed of trailing zeros out, any number of fraction digits in, truncated to
    nanoseconds). Go's zero ``time.Time`` (``0001-01-01T00:00:00Z``) is a real instant there;
    natsd's JetStream keeps "unset" as 0 ns, hence the ``*_or_zero`` pair that maps 0 <-> the
    zero time.
"""

from __future__ import annotations

import re
import time as _time

__all__ = [
    "NANOSECOND",
    "MICROSECOND",
    "MILLISECOND",
    "SECOND",
    "MINUTE",
    "HOUR",
    "MAX_DURATION",
    "parse_duration",
    "format_duration",
    "uptime",
    "GO_ZERO_TIME",
    "GO_ZERO_NS",
    "format_rfc3339",
    "format_rfc3339_or_zero",
    "parse_rfc3339",
    "parse_rfc3339_or_zero",
]

NANOSECOND = 1
MICROSECOND = 1_000
MILLISECOND = 1_000_000
SECOND = 1_000_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
#: The largest time.Duration (int64).
MAX_DURATION = (1 << 63) - 1

# Go's unitMap: "µs" is U+00B5 (micro sign), "μs" U+03BC (Greek mu); both are accepted.
_UNITS: dict[str, int] = {
    "ns": NANOSECOND,
    "us": MICROSECOND,
    "\u00b5s": MICROSECOND,
    "\u03bcs": MICROSECOND,
    "ms": MILLISECOND,
    "s": SECOND,
    "m": MINUTE,
    "h": HOUR,
}
_DIGITS = frozenset("0123456789")
_NUMBER = frozenset("0123456789.")


def _go_quote(s: str) -> str:
    """The time package's own ``quote``: ``"..."`` with ``"`` and ``\\`` escaped and every byte of
    a non-ASCII or control character written ``\\xNN`` (its error texts are built with it)."""
    out = ['"']
    for ch in s:
        if ch >= "\x80" or ch < " ":
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
        else:
            if ch in '"\\':
                out.append("\\")
            out.append(ch)
    out.append('"')
    return "".join(out)


def parse_duration(text: str, *, extra_units: dict[str, int] | None = None) -> int:
    """Go's ``time.ParseDuration``: ``"1h30m"``, ``"1.5h"``, ``".5s"``, ``"-2m3.004s"``, ``"0"`` -> ns.

    Raises ``ValueError`` whose text is Go's error, byte for byte. ``extra_units`` adds units
    (natsctl's ``d``/``w``/``M``/``y``) to Go's table without changing anything else.
    """
    orig = text
    s = text
    units = _UNITS if extra_units is None else {**_UNITS, **extra_units}
    neg = False
    if s and s[0] in "-+":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError("time: invalid duration " + _go_quote(orig))
    total = 0
    i, n = 0, len(s)
    while i < n:
        if s[i] not in _NUMBER:
            raise ValueError("time: invalid duration " + _go_quote(orig))
        # the integer part; Go fails once it no longer fits 1<<63
        start = i
        v = 0
        while i < n and s[i] in _DIGITS:
            v = v * 10 + ord(s[i]) - 48
            if v > 1 << 63:
                raise ValueError("time: invalid duration " + _go_quote(orig))
            i += 1
        pre = i != start
        # the fraction; Go keeps digits while they fit and ignores the rest (no error)
        f, scale, post = 0, 1, False
        if i < n and s[i] == ".":
            i += 1
            fstart = i
            overflow = False
            while i < n and s[i] in _DIGITS:
                if not overflow:
                    y = f * 10 + ord(s[i]) - 48
                    if f > MAX_DURATION // 10 or y > 1 << 63:
                        overflow = True
                    else:
                        f, scale = y, scale * 10
                i += 1
            post = i != fstart
        if not pre and not post:
            raise ValueError("time: invalid duration " + _go_quote(orig))
        ustart = i
        while i < n and s[i] not in _NUMBER:
            i += 1
        if i == ustart:
            raise ValueError("time: missing unit in duration " + _go_quote(orig))
        u = s[ustart:i]
        unit = units.get(u)
        if unit is None:
            raise ValueError("time: unknown unit " + _go_quote(u) + " in duration " + _go_quote(orig))
        if v > (1 << 63) // unit:
            raise ValueError("time: invalid duration " + _go_quote(orig))
        v *= unit
        if f > 0:
            # Go: v += uint64(float64(f) * (float64(unit) / scale)); kept so a fraction lands
            # on the nanosecond Go computes (f*unit/scale <= 3.6e12 for hours, so exact enough).
            v += int(float(f) * (float(unit) / float(scale)))
            if v > 1 << 63:
                raise ValueError("time: invalid duration " + _go_quote(orig))
        total += v
        if total > 1 << 63:
            raise ValueError("time: invalid duration " + _go_quote(orig))
    if neg:
        return -total
    if total > MAX_DURATION:
        raise ValueError("time: invalid duration " + _go_quote(orig))
    return total


def _frac(v: int, prec: int) -> tuple[str, int]:
    """Go's fmtFrac: the low ``prec`` digits of ``v`` as ``.ddd`` without trailing zeros."""
    d, r = divmod(v, 10**prec)
    if r == 0:
        return "", d
    return "." + f"{r:0{prec}d}".rstrip("0"), d


def format_duration(ns: int) -> str:
    """Go's ``time.Duration.String()``: ``0s``, ``1ns``, ``1.5µs``, ``500ms``, ``1.5s``,
    ``1m0s``, ``1h2m3.004s``, ``-1m30s``, ``2562047h47m16.854775807s``."""
    neg = ns < 0
    u = -ns if neg else ns
    if u < SECOND:
        if u == 0:
            return "0s"
        if u < MICROSECOND:
            out = f"{u}ns"
        elif u < MILLISECOND:
            frac, whole = _frac(u, 3)
            out = f"{whole}{frac}\u00b5s"
        else:
            frac, whole = _frac(u, 6)
            out = f"{whole}{frac}ms"
    else:
        frac, secs = _frac(u, 9)
        mins, sec = divmod(secs, 60)
        if mins:
            hours, mins = divmod(mins, 60)
            out = (f"{hours}h" if hours else "") + f"{mins}m{sec}{frac}s"
        else:
            out = f"{sec}{frac}s"
    return "-" + out if neg else out


def uptime(ns: int) -> str:
    """nats-server's uptime/idle spelling (``/varz`` ``uptime``, ``/connz`` ``uptime``/``idle``):
    whole seconds, with days and 365-day years: ``0s``, ``4m39s``, ``1d2h3m4s``, ``1y0d0h0m1s``."""
    secs = max(ns, 0) // SECOND
    mins, hours, days = secs // 60, secs // 3600, secs // 86400
    years = days // 365
    if years:
        return f"{years}y{days % 365}d{hours % 24}h{mins % 60}m{secs % 60}s"
    if days:
        return f"{days}d{hours % 24}h{mins % 60}m{secs % 60}s"
    if hours:
        return f"{hours}h{mins % 60}m{secs % 60}s"
    if mins:
        return f"{mins}m{secs % 60}s"
    return f"{secs}s"


# -- RFC 3339 ---------------------------------------------------------------------------------

#: Go's zero time.Time as it marshals, and as Unix nanoseconds.
GO_ZERO_TIME = "0001-01-01T00:00:00Z"
GO_ZERO_NS = -62135596800 * SECOND

# Go's strict RFC 3339 (what Time.UnmarshalJSON takes): upper-case T and Z, two-digit fields,
# any number of fraction digits after a ".", "Z" or a "+hh:mm"/"-hh:mm" offset.
# (compiled by re's cache on the first parse: start-up time, ADR 0015)
_RFC3339 = r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:(Z)|([+-])(\d{2}):(\d{2}))\Z"


def format_rfc3339(ns: int) -> str:
    """Unix ns -> RFC 3339 in UTC as Go marshals a time.Time: ``2026-11-21T09:56:02.4739195Z``
    (fraction without trailing zeros, none when whole); works for any instant from year 1."""
    secs, frac = divmod(ns, SECOND)
    if 0 <= secs < 253402300800:  # the fast path (time.gmtime), years 1970..9999
        base = _time.strftime("%Y-%m-%dT%H:%M:%S", _time.gmtime(secs))
    else:
        from datetime import datetime, timedelta, timezone  # (outside the fast path's years only: ADR 0015)

        base = (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=secs)).strftime("%Y-%m-%dT%H:%M:%S")
        if len(base) < 19:  # strftime does not pad years below 1000 everywhere
            y, rest = base.split("-", 1)
            base = f"{int(y):04d}-{rest}"
    if frac:
        return f"{base}.{frac:09d}".rstrip("0") + "Z"
    return base + "Z"


def format_rfc3339_or_zero(ns: int) -> str:
    """:func:`format_rfc3339`, with 0 or less (JetStream's "unset") as Go's zero time."""
    return GO_ZERO_TIME if ns <= 0 else format_rfc3339(ns)


def parse_rfc3339(s: str) -> int:
    """RFC 3339 -> Unix ns, as Go's ``time.Time`` JSON unmarshalling takes it (``T`` and ``Z``
    upper case, offsets up to ±23:59, fraction truncated to nanoseconds). Raises ``ValueError``."""
    from datetime import datetime, timedelta, timezone  # (datetime loads with the first time parsed: ADR 0015)

    m = re.match(_RFC3339, s, re.ASCII)
    if m is None:
        raise ValueError(f"parsing time {s!r} as RFC3339")
    y, mo, d, h, mi, sec = (int(m.group(i)) for i in range(1, 7))
    if h > 23 or mi > 59 or sec > 59:
        raise ValueError(f"parsing time {s!r} as RFC3339: field out of range")
    try:
        dt = datetime(y, mo, d, h, mi, sec, tzinfo=timezone.utc)
    except ValueError:
        raise ValueError(f"parsing time {s!r} as RFC3339: day out of range") from None
    secs = (dt - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(seconds=1)
    if m.group(9):
        oh, om = int(m.group(10)), int(m.group(11))
        if oh > 23 or om > 59:
            raise ValueError(f"parsing time {s!r} as RFC3339: time zone offset out of range")
        off = (oh * 60 + om) * 60
        secs += -off if m.group(9) == "+" else off
    frac = m.group(7)
    return secs * SECOND + (int(frac[:9].ljust(9, "0")) if frac else 0)


def parse_rfc3339_or_zero(s: str) -> int:
    """:func:`parse_rfc3339`, with an empty string or Go's zero time as 0 (JetStream's "unset")."""
    if not s:
        return 0
    ns = parse_rfc3339(s)
    return 0 if ns == GO_ZERO_NS else ns
