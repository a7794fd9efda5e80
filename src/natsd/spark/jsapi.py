"""The few ``$JS.API`` calls the connector makes on the driver, over :class:`SyncConnection`.

Requests and replies are the JSON documents nats-server 2.11+ uses:

* ``$JS.API.STREAM.INFO.<stream>`` (empty body) -> ``{"config": {...}, "created": "...",
  "state": {"messages", "first_seq", "last_seq", ...}}``
* ``$JS.API.STREAM.NAMES`` ``{"offset": n[, "subject": s]}`` -> ``{"streams": [...], "total",
  "offset", "limit"}`` (paged)
"""

from __future__ import annotations

from dataclasses import dataclass

from natsd.spark.wire import JSApiError, SyncConnection

__all__ = ["StreamState", "stream_state", "stream_names", "stream_for_subject", "JSApiError"]

API = "$JS.API"


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

    @property
    def empty(self) -> bool:
        return self.messages == 0


def stream_state(conn: SyncConnection, name: str, timeout: float = 10.0) -> StreamState:
    """``STREAM.INFO`` reduced to a :class:`StreamState`."""
    info = conn.js_request(f"{API}.STREAM.INFO.{name}", None, timeout)
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
    )


def stream_names(conn: SyncConnection, subject: str | None = None, timeout: float = 10.0) -> list[str]:
    """All stream names (following the pager), optionally only those bound to ``subject``."""
    names: list[str] = []
    offset = 0
    while True:
        body: dict = {"offset": offset}
        if subject:
            body["subject"] = subject
        resp = conn.js_request(f"{API}.STREAM.NAMES", body, timeout)
        page = resp.get("streams") or []
        names.extend(page)
        total = int(resp.get("total", len(names)))
        offset += len(page)
        if not page or offset >= total:
            return names


def stream_for_subject(conn: SyncConnection, subject: str, timeout: float = 10.0) -> str | None:
    """The stream that stores ``subject`` (None when no stream does)."""
    try:
        names = stream_names(conn, subject, timeout)
    except JSApiError:
        return None
    return names[0] if names else None
