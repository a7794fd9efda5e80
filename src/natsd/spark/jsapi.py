"""The few ``$JS.API`` calls the connector makes, over anything with ``js_request(subject, body,
timeout) -> dict`` and ``opts``: the driver's :class:`~natsd.spark.planner.Planner` (nats-py), and
a read task's own :class:`~natsd.spark.wire.SyncConnection` (one ``STREAM.INFO`` before its range).

Requests and replies are the JSON documents nats-server 2.11+ uses:

* ``$JS.API.STREAM.INFO.<stream>`` (empty body) -> ``{"config": {...}, "created": "...",
  "state": {"messages", "first_seq", "last_seq", ...}}``
* ``$JS.API.STREAM.NAMES`` ``{"offset": n[, "subject": s]}`` -> ``{"streams": [...], "total",
  "offset", "limit"}`` (paged)
"""

from __future__ import annotations

from dataclasses import dataclass

from natsd import gotime
from natsd.redact import redact
from natsd.spark.wire import JSApiError

__all__ = ["StreamState", "stream_state", "stream_names", "stream_for_subject", "JSApiError"]

STREAM_NOT_FOUND = 10059  # JSStreamNotFoundErr


@dataclass(frozen=True)
class StreamState:
    """What planning needs to know about one stream at one moment."""

    name: str
    first_seq: int
    last_seq: int
    messages: int
    created: str
    duplicate_window_ns: int
    subjects: tuple[str, ...]
    last_ts: str = ""  # RFC 3339 time of the last message ("" or 0001-01-01... when empty)
    bytes: int = 0  # stored bytes (what maxBytesPerTrigger and the lag log estimate sizes from)

    @property
    def avg_size(self) -> float:
        """The average stored size of one message (0 when empty)."""
        return self.bytes / self.messages if self.messages else 0.0

    @property
    def empty(self) -> bool:
        return self.messages == 0


def stream_state(conn, name: str, timeout: float = 10.0) -> StreamState:
    """``STREAM.INFO`` reduced to a :class:`StreamState`; a missing stream's error names it."""
    try:
        info = conn.js_request(f"{conn.opts.api_prefix}.STREAM.INFO.{name}", None, timeout)
    except JSApiError as exc:
        if exc.err_code == STREAM_NOT_FOUND:
            where = redact(conn.opts.servers)
            text = f"stream {name!r} not found on {where} (check option 'stream')"
            raise JSApiError(exc.code, exc.err_code, text) from None
        raise
    st = info.get("state", {})
    cfg = info.get("config", {})
    return StreamState(
        name=cfg.get("name", name),
        first_seq=int(st.get("first_seq", 0)),
        last_seq=int(st.get("last_seq", 0)),
        messages=int(st.get("messages", 0)),
        created=str(info.get("created", "")),
        duplicate_window_ns=int(cfg.get("duplicate_window", 0) or 0),
        subjects=tuple(cfg.get("subjects") or ()),
        last_ts=str(st.get("last_ts", "")),
        bytes=int(st.get("bytes", 0)),
    )


def rfc3339_to_ns(text: str) -> int:
    """nats-server's RFC 3339 times (``2026-11-21T10:15:33.247906123Z``) to Unix ns; empty -> 0."""
    t = text.strip()
    return gotime.parse_rfc3339(t) if t else 0


def stream_names(conn, subject: str | None = None, timeout: float = 10.0) -> list[str]:
    """All stream names (following the pager), optionally only those bound to ``subject``."""
    names: list[str] = []
    offset = 0
    while True:
        body: dict = {"offset": offset}
        if subject:
            body["subject"] = subject
        resp = conn.js_request(f"{conn.opts.api_prefix}.STREAM.NAMES", body, timeout)
        page = resp.get("streams") or []
        names.extend(page)
        total = int(resp.get("total", len(names)))
        offset += len(page)
        if not page or offset >= total:
            return names


def stream_for_subject(conn, subject: str, timeout: float = 10.0) -> str | None:
    """The stream that stores ``subject`` (None when no stream does)."""
    try:
        names = stream_names(conn, subject, timeout)
    except JSApiError:
        return None
    return names[0] if names else None
