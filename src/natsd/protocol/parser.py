"""Incremental, sans-IO parser for the client side of the NATS protocol.

Theory of operation
-------------------
The caller owns the socket. It hands every chunk it reads to :meth:`Parser.feed`, which returns
the list of complete events (see :mod:`natsd.protocol.events`) and keeps whatever is incomplete.
Nothing is ever emitted before the last byte of an operation has arrived: a ``PUB`` becomes an
event only once its payload *and* the terminating CRLF are in.

Wire format (client -> server), one control line ended by ``\\n`` (the ``\\r`` before it is
optional, as in the reference), then for PUB/HPUB exactly ``<size>`` payload bytes and CRLF::

    CONNECT <json>
    PUB <subject> [reply] <size>\\r\\n<payload>\\r\\n
    HPUB <subject> [reply] <hdr_size> <total_size>\\r\\n<headers><payload>\\r\\n
    SUB <subject> [queue] <sid>
    UNSUB <sid> [max]
    PING / PONG

Arguments are separated by runs of spaces or tabs, so ``PUB foo  5`` (two spaces: empty
reply, as nats-py sends it) and ``UNSUB 1 `` (trailing space) parse; op names are
case-insensitive. Anything after ``PING``/``PONG`` up to the newline is ignored (the reference
does the same).

Buffering: when no partial data is pending the chunk is parsed in place (payloads are slices of
the received ``bytes``, one copy each). A payload that a read leaves incomplete waits in one
``bytearray`` (payload bytes only); the read that completes it gives only the missing bytes (one
join makes the payload) and the rest of that read is parsed in place, so a big message spanning
reads costs one copy more than the others, not a copy of every following read. An incomplete
control line is kept the same way and the next chunk appended to it, parsed from a single ``bytes``
copy. A payload split over many reads therefore costs linear time, and a control line is
re-scanned at most ``max_control_line`` bytes per read.

Errors raise :class:`RemoteProtocolError` whose ``err`` is the reference's ``-ERR`` text, or
``None`` where the reference closes silently. After an error the parser stays failed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from natsd.protocol.errors import (
    ERR_MAX_CONTROL_LINE,
    ERR_MAX_PAYLOAD,
    ERR_UNKNOWN_PROTOCOL,
    RemoteProtocolError,
)
from natsd.protocol.events import (
    OP_CONNECT,
    OP_HPUB,
    OP_PUB,
    OP_PUB_BATCH,
    OP_PUB_RRUN,
    OP_PUB_RUN,
    OP_SUB,
    OP_UNSUB,
    PING_EVENT,
    PONG_EVENT,
    Run,
)
from natsd.protocol.runs import reply_run_length, run_length

__all__ = ["Parser", "DEFAULT_MAX_CONTROL_LINE", "DEFAULT_MAX_PAYLOAD"]

DEFAULT_MAX_CONTROL_LINE = 4096
DEFAULT_MAX_PAYLOAD = 1024 * 1024

# Ops a control line may start with (upper-cased). A partial line whose head is not a prefix of
# one of these is rejected at once, as the reference's byte-at-a-time state machine does.
_OPS = (b"PUB", b"HPUB", b"SUB", b"UNSUB", b"PING", b"PONG", b"CONNECT", b"INFO", b"+OK", b"-ERR")


# The bytes that bytes.split() treats as separators. ``len(x.translate(None, _WS_BYTES)) ==
# len(x)`` says "x has no whitespace", i.e. split() would see exactly the one argument x (for a
# non-empty x), in one C call with no list built.
_WS_BYTES = b" \t\n\r\x0b\x0c"

# Distinct PUB/HPUB control lines remembered per connection (cleared when full).
_LINE_CACHE_MAX = 128
#: The run lists of feed() before any OP_PUB_RUN event exists: never appended to (see feed()).
_NO_RUN: list[bytes] = []


# Runs of canonical PUBs to differing subjects are cut with regexes (see _run_patterns) for
# payloads up to this size (any publisher of many subjects: acks, device events). A pattern is
# compiled per (size, with reply) the first time a second such PUB of that size follows one
# (never for a publisher whose every message has a new size), and at most _RUN_PATTERNS_MAX
# are kept.
RUN_MAX_SIZE = 64 * 1024
_RUN_PATTERNS_MAX = 64
_RUN_PATTERNS: dict[tuple[int, bool, bytes], tuple] = {}


def _run_patterns(size: int, reply: bool, gap: bytes = b" ") -> tuple:
    """``(run, one)`` for PUBs with a ``size``-byte payload, without a reply (``PUB <subject>
    <size>``, the size after ``gap``: one space, or two as nats-py spells an empty reply) or with
    one (``PUB <subject> <reply> <size>``, single spaces): ``run`` matches a whole run of them
    back to back, and ``one.split`` of such a run gives ``[b"", subject, (reply,) payload, b"",
    subject, ...]``. Subject and reply are one argument each: no byte that ``split()`` treats as
    whitespace. ``(None, None)`` above RUN_MAX_SIZE."""
    if size > RUN_MAX_SIZE:
        return None, None
    key = (size, reply, gap)
    pats = _RUN_PATTERNS.get(key)
    if pats is None:
        if len(_RUN_PATTERNS) >= _RUN_PATTERNS_MAX:
            _RUN_PATTERNS.clear()
        # In a bytes pattern \S is exactly "not in _WS_BYTES". Possessive repeats (nothing to
        # backtrack into: an argument is followed by a space) make the run match twice as fast.
        # A run with replies ends before a message whose next one has the same subject: a burst
        # to one subject is the reply-run path's (OP_PUB_RRUN: a stream takes it whole).
        if reply:
            run = rb"(?:PUB (\S++) \S++ %d\r\n.{%d}\r\n(?!PUB \1 ))++" % (size, size)
            one = rb"PUB (\S+) (\S+) %d\r\n(.{%d})\r\n" % (size, size)
        else:
            run = rb"(?:PUB \S++%s%d\r\n.{%d}\r\n)++" % (gap, size, size)
            one = rb"PUB (\S+)%s%d\r\n(.{%d})\r\n" % (gap, size, size)
        pats = _RUN_PATTERNS[key] = (re.compile(run, re.S), re.compile(one, re.S))
    return pats


def _silent(detail: str) -> RemoteProtocolError:
    # The reference closes these connections without an -ERR line.
    return RemoteProtocolError(None, detail)


class Parser:
    """Turns client bytes into events. One parser per connection; not thread-safe.

    ``max_control_line`` bounds a control line (bytes before the newline); ``max_payload``
    bounds the size announced by PUB/HPUB (checked before any payload byte is buffered).
    Both may be changed between feeds (config reload).

    ``batch=True`` merges a run of consecutive PUBs (or HPUBs) with byte-identical control lines
    within one feed into a single ``(OP_PUB_BATCH, run)`` event (a :class:`~natsd.protocol.events.Run`
    with one ``subject``), so the server can route the run with one lookup and one join per
    receiver. Without it every message is its own event (the events are otherwise identical).
    Batch mode also gathers consecutive canonical reply-less PUBs to differing subjects (a client
    acking JetStream messages one by one, a publisher over many subjects), or ones with a reply
    each (``run.replies``), into ``(OP_PUB_RUN, run)`` events (``run.subjects``),
    and consecutive canonical PUBs/HPUBs to one subject whose replies differ only in a fixed-width
    last token (an asynchronous JetStream publisher) into ``(OP_PUB_RRUN, run)`` events
    (``run.replies``).
    """

    __slots__ = (
        "max_control_line",
        "max_payload",
        "batch",
        "_pending",
        "_await",
        "_failed",
        "_last_line",
        "_last_args",
        "_line_cache",
        "_rp",
        "_nr",
        "_wr",
    )

    def __init__(
        self,
        max_control_line: int = DEFAULT_MAX_CONTROL_LINE,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        batch: bool = False,
    ) -> None:
        self.max_control_line = max_control_line
        self.max_payload = max_payload
        self.batch = batch
        # The last PUB/HPUB control line (newline included) and its parsed arguments.
        self._last_line = b""
        self._last_args: tuple = ()
        self._line_cache: dict[bytes, tuple] = {}
        # Lines with a reply: a request stream (JetStream publishes, acks with +NXT) repeats
        # "PUB <subject> " and " <size>\r\n" around a fresh reply inbox every time. The last
        # such shape: (prefix, suffix, op, subject, hdr_len, size), or None.
        self._rp: tuple | None = None
        # Reply-less PUBs to ever new subjects of one size (acks: ``PUB $JS.ACK.<...> 0``): the
        # suffix " <size>\r\n" of the last canonical one (or "  <size>\r\n", nats-py's
        # spelling), its size and the spaces before the size, or None.
        self._nr: tuple | None = None
        # PUBs with a reply to ever new subjects (a device publishing requests, an asynchronous
        # JetStream publisher over many subjects): the suffix " <size>\r\n" of the last
        # canonical one and its size, or None.
        self._wr: tuple | None = None
        self._pending = bytearray()
        # (op, subject, reply, hdr_len, size) of a PUB/HPUB whose payload is still incomplete;
        # _pending then holds payload bytes only.
        self._await: tuple | None = None
        self._failed: RemoteProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet turned into events."""
        return len(self._pending)

    def feed(self, data: bytes | bytearray | memoryview) -> list:
        """Consume ``data``; return the complete events in order (possibly ``[]``)."""
        if self._failed is not None:
            raise self._failed
        events: list = []
        try:
            return self._feed(data, events)
        except RemoteProtocolError as e:
            # Operations completed before the bad one are still valid (the reference executes
            # them before it fails); the caller processes ``e.events`` and then closes.
            e.events = events
            self._failed = e
            raise

    def _feed(self, data, events: list) -> list:
        pending = self._pending
        aw = self._await
        # The awaited payload when this read completes one that an earlier read began (see below).
        joined: Any = None
        pos: int = 0
        if pending:
            if aw is not None and len(pending) < aw[4]:
                # A payload spanning reads (big messages: a 16 KB payload rarely ends where a
                # read does): _pending holds its first bytes. Only the missing part is taken
                # from this read, in one copy (join of the two buffers), and the rest of the read
                # is parsed in place, instead of appending the whole read to _pending and
                # copying all of it out again.
                need = aw[4] - len(pending)
                if len(data) < need + 2:
                    pending += data
                    return []
                if data[need] != 13 or data[need + 1] != 10:
                    raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, "payload not terminated by CRLF")
                joined = b"".join((pending, memoryview(data)[:need]))
                pending.clear()
                pos = need + 2
                work = data if type(data) is bytes else bytes(data)
            else:
                pending += data
                if aw is not None and len(pending) < aw[4] + 2:
                    return []
                work = bytes(pending)
                pending.clear()
        else:
            work = data if type(data) is bytes else bytes(data)
        n = len(work)
        # Declared types of the per-message values: no cost interpreted, and the compiled build
        # (natsd._compiled) keeps them as machine ints instead of boxed objects.
        size: int
        hdr_len: int
        op: int
        subject: bytes
        reply: bytes
        # Run-length state for batching (see the class docstring): the previous PUB/HPUB event
        # and, once a second identical control line follows it, the payload list it became.
        # Declared Any (so mypy does not narrow them to a fixed-shape tuple at each assignment):
        # the run detection below compares them by identity, which mypyc-compiled code keeps only
        # for boxed values; a variable narrowed to tuple[int, bytes, ...] is unboxed and re-boxed
        # into a new object at every use (see natsd/_compiled.py).
        last_event: Any = None
        last_event_args: Any = None
        batch_list: list | None = None
        batching = self.batch
        # The OP_PUB_RUN event being extended (see the reply-less path below) and its lists.
        # The lists start as the shared _NO_RUN (no allocation per feed); they are only extended
        # while run_ev is the newest event, and run_ev is set together with fresh lists.
        run_ev: Any = None
        run_subjects = run_payloads = _NO_RUN
        # The OP_PUB_RRUN event being extended (runs of publishes with a reply each).
        rr_ev: Any = None
        # The OP_PUB_RUN event with replies being extended (runs to differing subjects, each
        # with its reply).
        wr_ev: Any = None
        wr_subjects = wr_replies = wr_payloads = _NO_RUN
        if aw is not None:
            if joined is None:
                size = aw[4]
                if n < size + 2:
                    pending += work
                    return events
                if work[size] != 13 or work[size + 1] != 10:
                    raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, "payload not terminated by CRLF")
                joined = work[:size]
                pos = size + 2
            last_event = (aw[0], aw[1], aw[2], aw[3], joined)
            last_event_args = aw
            events.append(last_event)
            self._await = None
        last_line = self._last_line
        last_args: Any = self._last_args
        line_cache = self._line_cache
        rp = self._rp
        nr = self._nr
        wr = self._wr
        mcl = self.max_control_line
        max_payload = self.max_payload
        # The cached shapes' parts, typed as above. (work.find / work.startswith are called as
        # methods, not through bound-method locals: the compiled build calls them directly.)
        nr_suffix: bytes
        nr_size: int
        nr_gap: bytes
        nr_slen: int
        rp_prefix: bytes
        rp_suffix: bytes
        rp_op: int
        rp_subject: bytes
        rp_hdr_len: int
        rp_size: int
        rp_plen: int
        rp_slen: int
        wr_suffix: bytes
        wr_size: int
        wr_slen: int
        # A run cut by a regex (see _run_patterns): subjects, replies, payloads.
        cut: list
        cut_s: list
        cut_r: list
        cut_p: list
        if nr is not None:
            nr_suffix, nr_size, nr_gap = nr
            nr_slen = len(nr_suffix)
        if wr is not None:
            wr_suffix, wr_size = wr
            wr_slen = len(wr_suffix)
        if rp is not None:
            rp_prefix, rp_suffix, rp_op, rp_subject, rp_hdr_len, rp_size = rp
            rp_plen = len(rp_prefix)
            rp_slen = len(rp_suffix)
        while pos < n:
            # Fastest path: the same PUB/HPUB control line as the previous message (a publisher
            # streaming to one subject). One C-level prefix compare replaces find/split/int.
            if last_line and work.startswith(last_line, pos):
                op, subject, reply, hdr_len, size = last_args
                if size > max_payload:  # max_payload may have been lowered by a reload
                    raise RemoteProtocolError(ERR_MAX_PAYLOAD, f"payload of {size} bytes")
                start = pos + len(last_line)
                stop = start + size
                if stop + 2 > n:
                    if stop < n and work[stop] != 13:
                        raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, "payload not terminated by CRLF")
                    self._await = last_args
                    pending += memoryview(work)[start:]
                    break
                if work[stop] != 13 or work[stop + 1] != 10:
                    raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, "payload not terminated by CRLF")
                payload = work[start:stop]
                pos = stop + 2
                if batching:
                    if batch_list is None and last_event_args is last_args and events and events[-1] is last_event:
                        # Merge only with the event parsed from these very arguments.
                        batch_list = [last_event[4]]
                        events[-1] = (OP_PUB_BATCH, Run(op, subject, None, reply, hdr_len, batch_list))
                    if batch_list is not None:
                        batch_list.append(payload)
                        # The rest of the burst at once (natsd.protocol.runs): same line, same size.
                        step = stop + 2 - (start - len(last_line))
                        k = run_length(work, pos, last_line, step, n) if pos + step <= n else 0
                        if k:
                            first = pos + len(last_line)
                            pos += k * step
                            batch_list += [work[i : i + size] for i in range(first, pos, step)]
                        continue
                last_event = (op, subject, reply, hdr_len, payload)
                last_event_args = last_args
                events.append(last_event)
                continue
            eol = work.find(b"\n", pos)
            if eol < 0:
                self._check_partial(work, pos, n)
                pending += work[pos:]
                break
            # Same shape as the last line with a reply, only the reply differs: slice it out
            # instead of splitting the line (the arguments are otherwise those of that line).
            # The payload handling below repeats the general path's on purpose: this loop runs
            # once per message, and a helper call here costs more than the duplication.
            if rp is not None and work.startswith(rp_prefix, pos):
                rs = eol + 1 - rp_slen
                if rs > pos + rp_plen and work.startswith(rp_suffix, rs):
                    reply = work[pos + rp_plen : rs]
                    # exactly one argument, as the slow path's split() would see it: no
                    # whitespace at all (reply is not empty)
                    if len(reply.translate(None, _WS_BYTES)) == len(reply):
                        if eol - 1 - pos > mcl:
                            raise RemoteProtocolError(ERR_MAX_CONTROL_LINE, f"control line of {eol - 1 - pos} bytes")
                        if rp_size > max_payload:
                            raise RemoteProtocolError(ERR_MAX_PAYLOAD, f"payload of {rp_size} bytes")
                        rp_args = (rp_op, rp_subject, reply, rp_hdr_len, rp_size)
                        start = eol + 1
                        stop = start + rp_size
                        if stop + 2 > n:
                            if stop < n and work[stop] != 13:
                                raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, "payload not terminated by CRLF")
                            self._await = rp_args
                            pending += memoryview(work)[start:]
                            break
                        if work[stop] != 13 or work[stop + 1] != 10:
                            raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, "payload not terminated by CRLF")
                        if batching:
                            # Asynchronous publishers' replies are one inbox and a fixed-width
                            # token: the frames that follow, if alike, sit at this frame's
                            # stride (natsd.protocol.runs.reply_run_length), and the burst
                            # becomes one OP_PUB_RRUN event, sliced column-wise. Every frame
                            # of it is what this path accepts (the same line length, so
                            # max_control_line holds; one argument per token column).
                            step = stop + 2 - pos
                            dot = reply.rfind(b".") + 1
                            k = (
                                reply_run_length(
                                    work, pos, work[pos : pos + rp_plen + dot], len(reply) - dot, rp_suffix, step, n
                                )
                                if pos + 2 * step <= n
                                else 0
                            )
                            if k > 1:
                                end = pos + k * step
                                rlen = len(reply)
                                replies = [work[i : i + rlen] for i in range(pos + rp_plen, end, step)]
                                payloads = [work[i : i + rp_size] for i in range(start, end, step)]
                                if rr_ev is not None and events[-1] is rr_ev and rr_ev[1].subject is rp_subject:
                                    rr_ev[1].replies += replies
                                    rr_ev[1].payloads += payloads
                                else:
                                    rr_ev = (
                                        OP_PUB_RRUN,
                                        Run(rp_op, rp_subject, None, b"", rp_hdr_len, payloads, None, replies),
                                    )
                                    events.append(rr_ev)
                                batch_list = None
                                pos = end
                                continue
                        last_event = (rp_op, rp_subject, reply, rp_hdr_len, work[start:stop])
                        last_event_args = rp_args
                        batch_list = None
                        events.append(last_event)
                        pos = stop + 2
                        continue
            # "PUB <subject> <reply> <size>" with the size of the last such line, in batch mode:
            # the whole run of such messages at once (one regex match finds where it ends, one
            # split cuts it, both in C) becomes one OP_PUB_RUN event with ``replies``. Every
            # message of the run is what the general path below accepts; a line that may be
            # over max_control_line, or anything else, leaves the run to the paths below. So
            # does a burst to one subject (see _run_patterns): the reply-run path's above
            # (OP_PUB_RRUN, which a stream takes whole), once the general path has learnt its shape.
            if (
                wr is not None
                and batching
                and work.startswith(b"PUB ", pos)
                and work.startswith(wr_suffix, eol + 1 - wr_slen)
                and wr_size <= max_payload
            ):
                wr_run, wr_one = _run_patterns(wr_size, True)
                m = wr_run.match(work, pos) if wr_run is not None else None
                # (one message alone stays an OP_PUB event, from the paths below: a request)
                if m is not None and m.end() > eol + 3 + wr_size:
                    end = m.end()
                    cut = wr_one.split(work[pos:end])  # ["", s, r, p, "", s, r, p, ..., ""]
                    cut_s = cut[1::4]
                    cut_r = cut[2::4]
                    cut_p = cut[3::4]
                    if max(map(len, cut_s)) + max(map(len, cut_r)) + wr_slen + 3 <= mcl:
                        if wr_ev is not None and events[-1] is wr_ev:
                            wr_subjects += cut_s
                            wr_replies += cut_r
                            wr_payloads += cut_p
                        else:
                            wr_subjects = cut_s
                            wr_replies = cut_r
                            wr_payloads = cut_p
                            wr_ev = (OP_PUB_RUN, Run(OP_PUB, b"", wr_subjects, b"", 0, wr_payloads, None, wr_replies))
                            events.append(wr_ev)
                        batch_list = None
                        pos = end
                        continue
            # "PUB <subject> <size>" with the size of the last such line: slice the subject out
            # instead of splitting (and do not cache a line that is likely never seen again).
            # In batch mode consecutive ones become one OP_PUB_RUN event (JetStream acks: one
            # list append per message instead of an event tuple, and one dispatch per run).
            if nr is not None and work.startswith(b"PUB ", pos):
                se = eol + 1 - nr_slen
                if se > pos + 4 and work.startswith(nr_suffix, se):
                    if batching:
                        # The whole run of such messages at once: one regex match finds where it
                        # ends, one split cuts it (both in C). Every message of the run is
                        # "PUB <one argument> <nr_size>\r\n<nr_size bytes>\r\n", exactly what
                        # the per-message path below accepts; a line over max_control_line leaves
                        # the run to that path, which reports it at the right message.
                        nr_run, nr_one = _run_patterns(nr_size, False, nr_gap)
                        m = nr_run.match(work, pos) if nr_run is not None else None
                        if m is not None and nr_size <= max_payload:
                            end = m.end()
                            cut = nr_one.split(work[pos:end])  # ["", s, p, "", s, p, ..., ""]
                            cut_s = cut[1::3]
                            cut_p = cut[2::3]
                            if max(map(len, cut_s)) + nr_slen + 2 <= mcl:
                                if run_ev is not None and events[-1] is run_ev:
                                    run_subjects += cut_s
                                    run_payloads += cut_p
                                else:
                                    run_subjects = cut_s
                                    run_payloads = cut_p
                                    run_ev = (OP_PUB_RUN, Run(OP_PUB, b"", run_subjects, b"", 0, run_payloads))
                                    events.append(run_ev)
                                batch_list = None
                                pos = end
                                continue
                    subject = work[pos + 4 : se]
                    # exactly one argument, as the slow path's split() would see it: no
                    # whitespace at all (subject is not empty)
                    if len(subject.translate(None, _WS_BYTES)) == len(subject):
                        if eol - 1 - pos > mcl:
                            raise RemoteProtocolError(ERR_MAX_CONTROL_LINE, f"control line of {eol - 1 - pos} bytes")
                        if nr_size > max_payload:
                            raise RemoteProtocolError(ERR_MAX_PAYLOAD, f"payload of {nr_size} bytes")
                        start = eol + 1
                        stop = start + nr_size
                        if stop + 2 > n:
                            if stop < n and work[stop] != 13:
                                raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, "payload not terminated by CRLF")
                            self._await = (OP_PUB, subject, b"", 0, nr_size)
                            pending += memoryview(work)[start:]
                            break
                        if work[stop] != 13 or work[stop + 1] != 10:
                            raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, "payload not terminated by CRLF")
                        if batching:
                            # Extend the run only while it is the newest event; anything else
                            # in between starts a new one. last_line/last_event stay as they
                            # were; an identical-line batch in progress has ended.
                            batch_list = None
                            if run_ev is not None and events[-1] is run_ev:
                                run_subjects.append(subject)
                                run_payloads.append(work[start:stop])
                            else:
                                run_subjects = [subject]
                                run_payloads = [work[start:stop]]
                                run_ev = (OP_PUB_RUN, Run(OP_PUB, b"", run_subjects, b"", 0, run_payloads))
                                events.append(run_ev)
                            pos = stop + 2
                            continue
                        last_line = work[pos : eol + 1]
                        last_args = (OP_PUB, subject, b"", 0, nr_size)
                        batch_list = None
                        last_event = (OP_PUB, subject, b"", 0, work[start:stop])
                        last_event_args = last_args
                        events.append(last_event)
                        pos = stop + 2
                        continue
            line = work[pos : eol + 1]
            # A line seen recently (any spelling, any size) that the path above did not take.
            cached = line_cache.get(line) if line_cache else None
            if cached is not None:
                last_line = line
                last_args = cached
                batch_list = None  # a different line: the current run (if any) has ended
                continue  # the repeated-line path above now handles it
            end = eol - 1 if eol > pos and work[eol - 1] == 13 else eol
            if end - pos > mcl:
                raise RemoteProtocolError(ERR_MAX_CONTROL_LINE, f"control line of {end - pos} bytes")
            # Fast path: the exact spelling every client uses for the hottest op.
            if work.startswith(b"PUB ", pos):
                op = OP_PUB
                args = work[pos + 4 : end].split()
            elif work.startswith(b"HPUB ", pos):
                op = OP_HPUB
                args = work[pos + 5 : end].split()
            else:
                ev = self._control(work[pos:end])
                if ev is not None:
                    if ev[0] == OP_PUB or ev[0] == OP_HPUB:
                        op, args = ev
                    else:
                        events.append(ev)
                        last_event = batch_list = None
                        pos = eol + 1
                        continue
                else:
                    pos = eol + 1
                    continue
            # PUB/HPUB arguments: [subject, reply?, (hdr_size)?, size]
            na = len(args)
            if op == OP_PUB:
                if na == 2:
                    subject, szb = args
                    reply = b""
                elif na == 3:
                    subject, reply, szb = args
                else:
                    raise _silent("PUB: wrong number of arguments")
                if not szb.isdigit():
                    raise _silent("PUB: bad size")
                hdr_len = 0
                size = int(szb)
            else:
                if na == 3:
                    subject, hb, szb = args
                    reply = b""
                elif na == 4:
                    subject, reply, hb, szb = args
                else:
                    raise _silent("HPUB: wrong number of arguments")
                if not (szb.isdigit() and hb.isdigit()):
                    raise _silent("HPUB: bad size")
                hdr_len = int(hb)
                size = int(szb)
                if hdr_len > size:
                    raise _silent("HPUB: header size larger than total size")
            if size > max_payload:
                raise RemoteProtocolError(ERR_MAX_PAYLOAD, f"payload of {size} bytes")
            # Remember this line (with its newline) for the fast paths above.
            last_line = line
            last_args = (op, subject, reply, hdr_len, size)
            if not reply:
                # Lines with a reply subject are usually unique (request inboxes): not cached.
                if len(line_cache) >= _LINE_CACHE_MAX:
                    line_cache.clear()
                line_cache[line] = last_args
                if op == OP_PUB:
                    sfx = b" %d\r\n" % size
                    # (nats-py spells a PUB without reply "PUB <subject>  <size>": an empty reply)
                    if line == b"PUB " + subject + sfx or line == b"PUB " + subject + b" " + sfx:
                        gap = b" " if len(line) == len(subject) + len(sfx) + 4 else b"  "
                        nr = self._nr = (gap + sfx[1:], size, gap)
                        nr_suffix, nr_size, nr_gap = nr
                        nr_slen = len(nr_suffix)
            else:
                # Remember the shape when the line is spelled canonically (single spaces, CRLF).
                if op == OP_PUB:
                    pfx = b"PUB " + subject + b" "
                    sfx = b" %d\r\n" % size
                else:
                    pfx = b"HPUB " + subject + b" "
                    sfx = b" %d %d\r\n" % (hdr_len, size)
                if line == pfx + reply + sfx:
                    rp = self._rp = (pfx, sfx, op, subject, hdr_len, size)
                    rp_prefix, rp_suffix, rp_op, rp_subject, rp_hdr_len, rp_size = rp
                    rp_plen = len(rp_prefix)
                    rp_slen = len(rp_suffix)
                    if op == OP_PUB:
                        wr = self._wr = (sfx, size)
                        wr_suffix, wr_size = wr
                        wr_slen = len(wr_suffix)
            start = eol + 1
            stop = start + size
            if stop + 2 > n:
                if stop < n and work[stop] != 13:
                    raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, "payload not terminated by CRLF")
                self._await = last_args
                pending += memoryview(work)[start:]
                break
            if work[stop] != 13 or work[stop + 1] != 10:
                raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, "payload not terminated by CRLF")
            last_event = (op, subject, reply, hdr_len, work[start:stop])
            last_event_args = last_args
            batch_list = None
            events.append(last_event)
            pos = stop + 2
        self._last_line = last_line
        self._last_args = last_args
        return events

    def _control(self, line: bytes):
        """Parse a control line that is not the PUB/HPUB fast path.

        Returns an event tuple, ``(OP_PUB|OP_HPUB, args)`` for a PUB/HPUB spelled differently
        (lowercase, tab), or ``None`` for lines that are ignored (client INFO, +OK).
        """
        head = line[:5].upper()
        if head.startswith(b"PING"):
            return PING_EVENT
        if head.startswith(b"PONG"):
            return PONG_EVENT
        # Split the op from its arguments at the first space or tab.
        sp = line.find(b" ")
        tb = line.find(b"\t")
        if sp < 0 or (0 <= tb < sp):
            sp = tb
        if sp < 0:
            op, rest = line.upper(), None
        else:
            op, rest = line[:sp].upper(), line[sp + 1 :]
        if op == b"PUB" or op == b"HPUB":
            if rest is None:
                raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, f"{op.decode()} without arguments")
            return (OP_PUB if op == b"PUB" else OP_HPUB, rest.split())
        if op == b"SUB":
            if rest is None:
                raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, "SUB without arguments")
            args = rest.split()
            if len(args) == 2:
                return (OP_SUB, args[0], None, args[1])
            if len(args) == 3:
                return (OP_SUB, args[0], args[1], args[2])
            raise _silent("SUB: wrong number of arguments")
        if op == b"UNSUB":
            if rest is None:
                raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, "UNSUB without arguments")
            args = rest.split()
            if len(args) == 1:
                return (OP_UNSUB, args[0], None)
            if len(args) == 2:
                m = args[1]
                return (OP_UNSUB, args[0], int(m) if m.isdigit() else -1)
            raise _silent("UNSUB: wrong number of arguments")
        if op == b"CONNECT":
            if rest is None:
                raise _silent("CONNECT without arguments")
            try:
                opts = json.loads(rest)
            except (ValueError, UnicodeDecodeError) as e:
                raise _silent(f"CONNECT: bad JSON: {e}") from None
            if not isinstance(opts, dict):
                raise _silent("CONNECT: JSON is not an object")
            return (OP_CONNECT, opts)
        if op == b"INFO" or op == b"+OK":
            return None  # the reference ignores these from clients
        if op == b"-ERR":
            raise _silent("client sent -ERR")
        raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, f"unknown op {line[:16]!r}")

    def _check_partial(self, work: bytes, pos: int, n: int) -> None:
        """Reject an incomplete control line early: too long, or not the start of any op."""
        if n - pos > self.max_control_line:
            raise RemoteProtocolError(ERR_MAX_CONTROL_LINE, f"control line over {self.max_control_line} bytes")
        head = work[pos : pos + 8].upper()
        for i in range(len(head)):
            if head[i] in b" \t\r":
                head = head[:i]
                break
        else:
            # No separator yet: the head must still be able to grow into an op.
            if head.startswith(b"PING") or head.startswith(b"PONG"):
                return
            for op in _OPS:
                if op.startswith(head):
                    return
            raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, f"unknown op {head!r}")
        if head.startswith(b"PING") or head.startswith(b"PONG") or head in _OPS:
            return
        raise RemoteProtocolError(ERR_UNKNOWN_PROTOCOL, f"unknown op {head!r}")
