"""A run of header-less publishes with a reply each over many subjects, all captured by one
stream (``OP_PUB_RUN`` with replies: an asynchronous JetStream publisher cycling over devices,
``plgd.<device>.<event>``; the router hands the stretch whose lone receiver is this stream's
subscription as ``rrun(None, run)``, see :func:`natsd.server.router.route_run`).

On a ``_fast`` stream (see :func:`natsd.jetstream.stream.ingest.process_msg`: nothing to check
before storing) the run is stored with one ``store_many`` (each record with its own subject,
limits applied per message as ``store_msg`` does) and its PubAcks join the turn's queue at
once; natsd.jetstream.stream.turnflush writes the turn's records and only then sends them, so
a PubAck still means the record reached the OS. Anything else (another stream kind, a
fast-batch reply, the server's storage limit within reach, a refusal on the way) goes through
``process_msg`` message by message from the first message not stored, which answers each as
if it had been published alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from natsd.store.base import StoreError

if TYPE_CHECKING:  # pragma: no cover
    from natsd.protocol.events import Run

__all__ = ["process_subject_run"]


def process_subject_run(self: Any, run: "Run") -> None:
    """Ingest ``run`` (``run.names``, ``run.replies``, header-less ``run.payloads``), in order,
    with exactly the PubAcks :meth:`Stream.process_msg` would send for each. ``self`` is the
    :class:`natsd.jetstream.stream.core.Stream` (not imported, even for typing: this module
    stays out of the stream modules' import circle; ingest.process_rrun is its typed caller)."""
    names = run.names
    replies = run.replies
    assert names is not None and replies is not None  # (the router's; once per run)
    payloads = run.payloads
    n = len(payloads)
    done = 0
    if (
        self._fast
        and not run.hdr_len
        and b".$FI\n" not in b"\n".join(replies) + b"\n"
        and self._used[self._ut]
        + self.store.bytes_used
        - self._counted
        + sum(map(len, payloads))
        + sum(map(len, names))
        + n * 64
        <= self._max_used
    ):
        # (the headroom: every record with its subject and framing, so that no message of the
        # run could have met the server's storage limit alone)
        try:
            first, _ts, done, err = self.store.store_many(names, payloads)
        except StoreError:
            done, err = 0, None  # (closed: each message is refused below, as alone)
        if done:
            last = first + done
            self.lseq = last - 1
            self.lmsg_id = ""
            queue_run_acks(self, replies, first, done)
        if err is not None:
            self._store_failed(replies[done].decode(), err)
            done += 1
    if done < n:
        process = self.process_msg
        hl = run.hdr_len
        for i in range(done, n):
            data = payloads[i]
            process(names[i], replies[i].decode(), data[:hl] if hl else None, data[hl:] if hl else data)


def queue_run_acks(self: Any, replies: list[bytes], first: int, done: int) -> None:
    """The PubAcks of a run's first ``done`` messages, stored from sequence ``first`` on: queued for
    the turn's flush (``turnflush._flush``), which sends them once the records reached the OS."""
    self._new_msgs = True
    if self._do_ack:
        self._ack_subjects += [r.decode() for r in replies[:done]]
        prefix = self._ack_prefix
        self._ack_payloads += [b"%s%d}" % (prefix, s) for s in range(first, first + done)]
    if not self._flush_scheduled:
        self._flush_scheduled = True
        self._call_soon(self._flush)
