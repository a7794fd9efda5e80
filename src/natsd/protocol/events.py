"""Client-to-server events produced by :class:`natsd.protocol.parser.Parser`.

Events are plain tuples whose first item is one of the ``OP_*`` integers below, so the hot path
allocates one small tuple per protocol operation and dispatches on an int. Shapes:

======================  =====================================================================
``(OP_CONNECT, opts)``  ``opts``: the decoded CONNECT JSON object (a ``dict``)
``(OP_PUB, subject, reply, hdr_len, data)``
                        ``subject``/``reply``: ``bytes`` exactly as sent (``reply`` is ``b""``
                        when absent); ``data``: the whole payload ``bytes``; ``hdr_len`` is 0
``(OP_HPUB, subject, reply, hdr_len, data)``
                        as ``OP_PUB`` but ``data`` = header block + payload and ``hdr_len``
                        says where the header block ends (``data[:hdr_len]``); the reference
                        accepts ``hdr_len == 0`` (nats.js sends it) and delivers it as a MSG
``(OP_SUB, subject, queue, sid)``
                        ``queue`` is ``None`` when absent; ``sid`` stays ``bytes`` because it is
                        echoed verbatim in MSG lines (the reference accepts any token as sid)
``(OP_UNSUB, sid, max)``
                        ``max`` is ``None`` (unsubscribe now) or an ``int`` (auto-unsubscribe
                        after that many messages; a non-numeric max parses as -1, which like
                        the reference means "now")
``(OP_PUB_BATCH, run)``  only from ``Parser(batch=True)``: consecutive ``run.op`` (OP_PUB or
                        OP_HPUB) messages with byte-identical control lines, as one :class:`Run`
                        with ``run.subject`` set (``run.subjects`` is ``None``)
``(OP_PUB_RUN, run)``   only from ``Parser(batch=True)``: consecutive header-less PUBs of one
                        size to (usually) different subjects, each spelled canonically, either
                        all reply-less (``PUB <subject> <size>\r\n``, the spelling of
                        JetStream acks, or nats-py's ``PUB <subject>  <size>\r\n``;
                        ``run.replies`` is ``None``) or all with a reply (``PUB <subject>
                        <reply> <size>\r\n``; ``run.replies`` set), as one :class:`Run` with
                        ``run.subjects`` set; the i-th message is
                        ``(OP_PUB, run.subjects[i], run.replies[i] or b"", 0, run.payloads[i])``
``(OP_PUB_RRUN, run)``  only from ``Parser(batch=True)``: consecutive ``run.op`` messages to one
                        subject that differ only in their reply (asynchronous JetStream
                        publishes: ``PUB <subject> <inbox>.<token> <size>\r\n``, every line
                        the same length), as one :class:`Run` with ``run.subject`` and
                        ``run.replies`` set; the i-th message is
                        ``(run.op, run.subject, run.replies[i], run.hdr_len, run.payloads[i])``
``(OP_PING,)`` / ``(OP_PONG,)``
======================  =====================================================================

``INFO`` and ``+OK`` sent by a client are ignored by the reference; the parser drops them.

A :class:`Run` is the one shape of "a run of messages" from the parser through the router
(``natsd.server.router.route_batch``/``route_run``) to JetStream (an internal subscription's run
handler, ``natsd.jetstream.ports.RunHandler``): one object per run, its lists built once by the
parser and never copied on the way.
"""

from __future__ import annotations

__all__ = [
    "OP_CONNECT",
    "OP_PUB",
    "OP_HPUB",
    "OP_SUB",
    "OP_UNSUB",
    "OP_PING",
    "OP_PONG",
    "OP_PUB_BATCH",
    "OP_PUB_RUN",
    "OP_PUB_RRUN",
    "OP_NAMES",
    "Run",
    "unbatched",
    "PING_EVENT",
    "PONG_EVENT",
]

OP_CONNECT = 1
OP_PUB = 2
OP_HPUB = 3
OP_SUB = 4
OP_UNSUB = 5
OP_PING = 6
OP_PONG = 7
OP_PUB_BATCH = 8
OP_PUB_RUN = 9
OP_PUB_RRUN = 10

OP_NAMES = {
    OP_CONNECT: "CONNECT",
    OP_PUB: "PUB",
    OP_HPUB: "HPUB",
    OP_SUB: "SUB",
    OP_UNSUB: "UNSUB",
    OP_PING: "PING",
    OP_PONG: "PONG",
    OP_PUB_BATCH: "PUB",
    OP_PUB_RUN: "PUB",
    OP_PUB_RRUN: "PUB",
}

# PING/PONG carry nothing: share one tuple each instead of allocating per event.
PING_EVENT = (OP_PING,)
PONG_EVENT = (OP_PONG,)


class Run:
    """A run of messages from one read, in order.

    ``payloads``: each message's data (header block + payload when ``hdr_len`` > 0). The
    messages share ``op`` (OP_PUB or OP_HPUB), ``reply`` (``b""``: none) and ``hdr_len``, and
    either one ``subject`` (``bytes``; ``subjects`` is ``None``: an identical-line run) or
    each its own, ``subjects[i]`` (``bytes``; ``subject`` is ``b""``). ``replies``: ``None``,
    or (``OP_PUB_RRUN``, or ``OP_PUB_RUN`` of requests) each message's own reply, ``replies[i]``
    (``bytes``, never empty; ``reply`` is then ``b""``). ``names`` are the
    subjects as ``str``, one per message, filled in by the router before the run is matched
    (``None`` until then). ``message(i)`` is the i-th message as an ``OP_PUB``/``OP_HPUB``
    event. The parser may still append to ``subjects``/``payloads`` while it reads the same
    chunk; after ``feed`` returns the run is complete.
    """

    __slots__ = ("op", "subject", "subjects", "reply", "hdr_len", "payloads", "names", "replies")

    def __init__(
        self,
        op: int,
        subject: bytes,
        subjects: "list[bytes] | None",
        reply: bytes,
        hdr_len: int,
        payloads: "list[bytes]",
        names: "list[str] | None" = None,
        replies: "list[bytes] | None" = None,
    ) -> None:
        self.op = op
        self.subject = subject
        self.subjects = subjects
        self.reply = reply
        self.hdr_len = hdr_len
        self.payloads = payloads
        self.names = names
        self.replies = replies

    def __len__(self) -> int:
        return len(self.payloads)

    def message(self, i: int) -> tuple:
        """The i-th message as the event the parser emits without batching."""
        subjects = self.subjects
        replies = self.replies
        return (
            self.op,
            self.subject if subjects is None else subjects[i],
            self.reply if replies is None else replies[i],
            self.hdr_len,
            self.payloads[i],
        )

    def messages(self) -> list:
        """Every message as the event the parser emits without batching, in order."""
        return [self.message(i) for i in range(len(self.payloads))]

    def slice(self, start: int, stop: int) -> "Run":
        """Messages ``start`` to ``stop`` as a run of their own (the lists are copied)."""
        subjects = self.subjects
        names = self.names
        replies = self.replies
        return Run(
            self.op,
            self.subject,
            None if subjects is None else subjects[start:stop],
            self.reply,
            self.hdr_len,
            self.payloads[start:stop],
            None if names is None else names[start:stop],
            None if replies is None else replies[start:stop],
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Run):
            return NotImplemented
        return (self.op, self.subject, self.subjects, self.reply, self.hdr_len, self.payloads, self.replies) == (
            other.op,
            other.subject,
            other.subjects,
            other.reply,
            other.hdr_len,
            other.payloads,
            other.replies,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable while the parser fills it

    def __repr__(self) -> str:
        what = f"subjects={self.subjects!r}" if self.subjects is not None else f"subject={self.subject!r}"
        if self.replies is not None:
            what += f", replies={self.replies!r}"
        return (
            f"Run(op={OP_NAMES.get(self.op, self.op)}, {what}, reply={self.reply!r}, hdr_len={self.hdr_len}, "
            f"payloads={self.payloads!r})"
        )


def unbatched(events: list) -> list:
    """``events`` with every run event (``OP_PUB_BATCH``, ``OP_PUB_RUN``, ``OP_PUB_RRUN``)
    replaced by its messages: what ``Parser(batch=False)`` gives for the same bytes."""
    out: list = []
    for e in events:
        if e[0] == OP_PUB_BATCH or e[0] == OP_PUB_RUN or e[0] == OP_PUB_RRUN:
            out += e[1].messages()
        else:
            out.append(e)
    return out
