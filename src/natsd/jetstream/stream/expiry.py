"""A stream's expiry: ``max_age`` and per-message ``Nats-TTL``, and the subject delete markers
``subject_delete_marker_ttl`` asks for, on one timer of the injected clock.

:class:`Expiry` owns the timer, the wall time it is armed for and the sequences of the delete
markers still alive (a marker's own expiry must not leave a marker for a marker). It sees the
stream through :class:`ExpiringStream`: the store expires the messages (removals reach the
consumers through the stream's storage updates, as any removal), the stream collects what was
removed while it runs (:meth:`ExpiringStream.expire_store`) and learns of each marker stored
(:meth:`ExpiringStream.note_stored`: the turn's flush then wakes the consumers). Nothing here
runs per message: the stream re-arms the timer once per loop turn at most.

A delete marker is an empty message on the subject whose last message expired::

    NATS/1.0\\r\\nNats-Marker-Reason: MaxAge\\r\\nNats-TTL: <ttl>\\r\\nNats-Rollup: sub\\r\\n\\r\\n

stored with the marker TTL as its own TTL (so it expires itself), as nats-server writes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from natsd import nats_headers as NH
from natsd.gotime import format_duration
from natsd.jetstream.config.models import SECOND
from natsd.store.base import MsgNotFound, StoreEOF, StoreError
from natsd.protocolbase import Protocol

if TYPE_CHECKING:  # pragma: no cover
    from natsd.clock import Clock, Timer
    from natsd.jetstream.config.models import StreamConfig
    from natsd.store.base import StreamStore

__all__ = ["Expiry", "ExpiringStream"]


class ExpiringStream(Protocol):
    """What :class:`Expiry` needs of its stream."""

    closed: bool
    config: "StreamConfig"
    store: "StreamStore"
    clock: "Clock"
    lseq: int
    #: snapshots being sent: expiry holds while any runs (the backup must be consistent)
    snapshots_running: int

    def expire_store(self, collect: bool) -> list[tuple[int, str]] | None:
        """Expire the store now; with ``collect``, the (seq, subject) of what it removed."""
        ...

    def note_stored(self, seq: int) -> None:
        """A message was stored outside the publish path (the flush wakes the consumers)."""
        ...


def _marker_ttl_s(cfg: "StreamConfig") -> int:
    return cfg.subject_delete_marker_ttl // SECOND if cfg.subject_delete_marker_ttl > 0 else 0


class Expiry:
    """The expiry timer of one stream and the delete markers it wrote."""

    __slots__ = ("s", "timer", "at", "marker_seqs")

    def __init__(self, stream: ExpiringStream) -> None:
        self.s = stream
        self.timer: Timer | None = None
        self.at = 0  # wall ns the timer is armed for
        self.marker_seqs: set[int] = set()

    def arm(self) -> None:
        """(Re-)arm the timer for the store's next expiry, unless it already fires no later."""
        s = self.s
        if s.closed or s.snapshots_running:
            return
        cfg = s.config
        if not cfg.max_age and not cfg.allow_msg_ttl:
            return
        nxt = s.store.next_expiry()
        if nxt <= 0:
            return
        if self.timer is not None and self.at and self.at <= nxt:
            return  # already armed for an earlier or equal time
        if self.timer is not None:
            self.timer.cancel()
        self.at = nxt
        self.timer = s.clock.call_later(max(nxt - s.clock.time_ns(), 0), self._run)

    def hold(self) -> None:
        """A snapshot starts: no expiry until :meth:`arm` (after the last snapshot ends)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
            self.at = 0

    def cancel(self) -> None:
        """The stream stops or is deleted."""
        if self.timer is not None:
            self.timer.cancel()

    def _run(self) -> None:
        self.timer = None
        self.at = 0
        s = self.s
        if s.closed:
            return
        ttl_s = _marker_ttl_s(s.config)
        removed = s.expire_store(ttl_s > 0)
        # Consumers skip expired messages when they reach them (as the reference); interest /
        # workqueue consumers were told one by one through on_msg_removed.
        if ttl_s and removed:
            self._write_delete_markers(removed, ttl_s)
        self.arm()

    def _write_delete_markers(self, removed: list[tuple[int, str]], ttl_s: int) -> None:
        """A marker on each subject whose last message expired (see the module docstring)."""
        s = self.s
        store = s.store
        done: set[str] = set()
        hdr = (
            b"NATS/1.0\r\n"
            + NH.MARKER_REASON
            + b": MaxAge\r\n"
            + NH.TTL
            + b": "
            + format_duration(ttl_s * SECOND).encode()
            + b"\r\n"
            + NH.ROLLUP
            + b": sub\r\n\r\n"
        )
        markers = self.marker_seqs
        for seq, subj in removed:
            if seq in markers:
                markers.discard(seq)
                continue
            if not subj or subj in done:
                continue
            done.add(subj)
            try:
                store.load_last_msg(subj)
                continue  # the subject still has messages
            except (MsgNotFound, StoreEOF):
                pass
            try:
                mseq, _ = store.store_msg(subj, hdr, b"", ttl_s * SECOND)
            except StoreError:
                continue
            markers.add(mseq)
            s.note_stored(mseq)

    def recover_markers(self) -> None:
        """After a restart: the delete markers still alive (stored within the last marker TTL),
        so that their own expiry does not leave a marker for a marker."""
        s = self.s
        ttl_s = _marker_ttl_s(s.config)
        if not ttl_s or not s.lseq:
            return
        cutoff = s.clock.time_ns() - ttl_s * SECOND - SECOND
        seq = s.lseq
        while seq > 0:
            try:
                sm = s.store.load_prev_msg(seq)
            except StoreError:
                break
            if sm.ts < cutoff:
                break
            if sm.hdr and NH.MARKER_REASON in sm.hdr and not sm.msg:
                self.marker_seqs.add(sm.seq)
            seq = sm.seq - 1
