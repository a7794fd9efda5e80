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
``(OP_PUB_BATCH, op, subject, reply, hdr_len, payloads)``
                        only from ``Parser(batch=True)``: consecutive ``op`` (OP_PUB or OP_HPUB)
                        messages with byte-identical control lines; ``payloads`` is a list of
                        ``data`` values (each as in OP_PUB/OP_HPUB), in order
``(OP_PUB_RUN, subjects, payloads)``
                        only from ``Parser(batch=True)``: consecutive reply-less, header-less
                        PUBs to (usually) different subjects, each spelled canonically
                        (``PUB <subject> <size>\r\n``, the spelling of JetStream acks); the
                        i-th message is ``(OP_PUB, subjects[i], b"", 0, payloads[i])``
``(OP_PING,)`` / ``(OP_PONG,)``
======================  =====================================================================

``INFO`` and ``+OK`` sent by a client are ignored by the reference; the parser drops them.
"""

from __future__ import annotations

__all__ = ["OP_CONNECT", "OP_PUB", "OP_HPUB", "OP_SUB", "OP_UNSUB", "OP_PING", "OP_PONG", "OP_PUB_BATCH", "OP_PUB_RUN",
           "OP_NAMES",
           "PING_EVENT", "PONG_EVENT"]

OP_CONNECT = 1
OP_PUB = 2
OP_HPUB = 3
OP_SUB = 4
OP_UNSUB = 5
OP_PING = 6
OP_PONG = 7
OP_PUB_BATCH = 8
OP_PUB_RUN = 9

OP_NAMES = {OP_CONNECT: "CONNECT", OP_PUB: "PUB", OP_HPUB: "HPUB", OP_SUB: "SUB", OP_UNSUB: "UNSUB",
            OP_PING: "PING", OP_PONG: "PONG", OP_PUB_BATCH: "PUB", OP_PUB_RUN: "PUB"}

# PING/PONG carry nothing: share one tuple each instead of allocating per event.
PING_EVENT = (OP_PING,)
PONG_EVENT = (OP_PONG,)
