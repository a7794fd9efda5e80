"""The publish path: one Sublist match per message, fan-out to subscribers, queue groups.

For each publish the MSG/HMSG line is built once from pieces shared by every receiver
(:func:`natsd.protocol.encoder.msg_parts`), and each receiver's writer queues
``head + sid + mid + data + CRLF`` (:meth:`natsd.server.writer.Writer.enqueue_msg`): no
per-receiver allocation. The router never touches an output buffer: appending, counting, flush
scheduling and the slow-consumer/stall policy are the writer's. A plain subscription of a
connection with no delivery filters goes straight to ``enqueue_msg``; everything else
(permission deny lists, clients without header support, auto-unsubscribe, allow_responses) goes
through ``ClientConnection.deliver``.

Queue groups: one member per group per message, chosen round-robin (nats-server picks at
random; any member is correct and rotating is cheaper and spreads evenly). A leafnode link
(``sub_deny is LEAF_LINK``) is a member only when no local member takes the message, as the
reference prefers local queue subscribers over remote ones; among several links, one is picked at
random in proportion to its queue weight (the member count its ``LS+`` announced).

Internal subscriptions (``client is None``) call ``cb(subject, reply, hdr, payload)``
synchronously (see :mod:`natsd.server.ports` for the contract), or, for a run of reply-less
messages, ``many(run)`` (a :class:`natsd.protocol.events.Run`, the parser's own value) when
they have one (:func:`route_run`, :func:`route_batch`), and for a run to one subject with a
reply each, ``rrun(subject, run)`` (:func:`route_rrun`). A callback that
raises is logged and does not affect the publisher or other receivers.
"""

from __future__ import annotations

import itertools
from operator import itemgetter

from natsd.protocol.encoder import encode_msg, msg_parts, msg_pieces
from natsd.protocol.events import Run
from natsd.server.log import logger

__all__ = ["route", "route_run", "route_rrun", "route_batch", "deliver_many", "deliver_templated", "publish_many"]

_rr = itertools.count()


class _LeafLink:
    """The ``sub_deny`` marker of leafnode links (natsd.server.leaf.node): it denies nothing, but
    makes the router take their ``deliver()`` path and prefer local queue members over them."""

    __slots__ = ()

    def denies(self, subject: str) -> bool:
        return False


LEAF_LINK = _LeafLink()


def _call_internal(sub, subject: str, reply: bytes, hdr_len: int, data: bytes, src=None) -> int:
    """Hand a message to an internal subscription; 1 when it took it, 0 when it declined
    (returned False: see ``natsd.jetstream.ports.MsgHandler``). A subscription ``with_src``
    (a service import: natsd.server.auth.imports) is also told who published it."""
    if hdr_len:
        hdr, payload = data[:hdr_len], data[hdr_len:]
    else:
        hdr, payload = None, data
    sub.delivered += 1
    if sub.max and sub.delivered >= sub.max:
        sub.unsubscribe()
    try:
        r = reply.decode() if reply else ""
        if (sub.cb(subject, r, hdr, payload, src) if sub.with_src else sub.cb(subject, r, hdr, payload)) is False:
            return 0
    except Exception:
        logger.exception("internal subscription handler for %r failed", sub.subject)
    return 1


def route(
    acc, subject: str, subj_b: bytes, reply: bytes, hdr_len: int, data: bytes, src, shown: str | None = None, r=None
) -> int:
    """Deliver one message published in account ``acc``; returns how many receivers got it.

    ``subject`` is matched against subscriptions; ``subj_b`` is what MSG lines show (the same
    subject, except for :meth:`ServerPorts.deliver`, where ``shown`` is its ``str`` form).
    ``src`` is the publishing connection (``None`` for internal publishes): a client that set
    ``echo: false`` never receives its own messages.

    A lone internal receiver (a JetStream stream's subject, the ``$JS.ACK.>`` hub, the API) is
    called directly: no MSG line is built for it. ``r`` is the match result when the caller
    already has it (:func:`route_run`).
    """
    if r is None:
        r = acc.sublist.match(subject)
    psubs = r.psubs
    qsubs = r.qsubs
    if not qsubs:
        if not psubs:
            return 0
        if len(psubs) == 1:
            sub = psubs[0]
            if sub.client is None:
                return _call_internal(sub, shown or subject, reply, hdr_len, data, src)
    size = len(data)
    head = mid = None
    n = 0
    for sub in psubs:
        c = sub.client
        if c is None:
            n += _call_internal(sub, shown or subject, reply, hdr_len, data, src)
            continue
        if c is src and not c.echo:
            continue
        if head is None:
            head, mid = msg_parts(subj_b, reply, hdr_len, size)
        if sub.max or c.sub_deny is not None or c.replies is not None or (hdr_len and not c.headers):
            if c.deliver(sub, head, mid, data, subject, hdr_len, reply, subj_b, src):
                n += 1
            continue
        if c.closed:
            continue
        c.enqueue_msg(sub, head, mid, data, size, src)
        n += 1
    if qsubs:
        if head is None:
            head, mid = msg_parts(subj_b, reply, hdr_len, size)
        remote = None
        wsum = 0
        for group in qsubs:
            k = len(group)
            start = next(_rr) % k if k > 1 else 0
            for j in range(k):
                sub = group[(start + j) % k]
                c = sub.client
                if c is None:
                    n += _call_internal(sub, shown or subject, reply, hdr_len, data, src)
                    break
                if c.closed or (c is src and not c.echo):
                    continue
                if c.sub_deny is LEAF_LINK:
                    # A leafnode link is used only when no local member takes it (as nats-server);
                    # among links, each in proportion to the members it stands for (LS+ weight).
                    from random import random as _random  # (random: only with leaf links, ADR 0015)

                    w = c.queue_weight(sub)
                    wsum += w
                    if _random() * wsum < w:
                        remote = sub
                    continue
                if not (
                    sub.max
                    or sub.closed
                    or c.sub_deny is not None
                    or c.replies is not None
                    or (hdr_len and not c.headers)
                ):
                    c.enqueue_msg(sub, head, mid, data, size, src)  # a plain member (c.closed: checked above)
                    n += 1
                    break
                if c.deliver(sub, head, mid, data, subject, hdr_len, reply, subj_b, src):
                    n += 1
                    break
            else:
                if remote is not None and remote.client.deliver(
                    remote, head, mid, data, subject, hdr_len, reply, subj_b, src
                ):
                    n += 1
            remote = None
            wsum = 0
    return n


def _call_many(sub, run: Run, start: int, stop: int) -> None:
    """Hand messages ``start:stop`` of ``run`` to an internal run handler (the whole run
    itself when that is all of it: the usual case, no copy)."""
    sub.delivered += stop - start
    try:
        sub.many(run if start == 0 and stop == len(run.payloads) else run.slice(start, stop))
    except Exception:
        logger.exception("internal subscription handler for %r failed", sub.subject)


def _run_sub(r):
    """The subscription a run of messages with match result ``r`` can be handed to at once:
    the lone receiver, internal, with a run handler; else None."""
    psubs = r.psubs
    if len(psubs) == 1 and not r.qsubs:
        sub = psubs[0]
        if sub.many is not None and sub.client is None and not sub.max:
            return sub
    return None


def route_run(acc, run: Run, src) -> None:
    """Deliver a run of header-less PUBs to differing subjects (``OP_PUB_RUN``: a client acking
    JetStream messages one by one, a publisher over many subjects), in order; reply-less, or
    each with its own reply (``run.replies``).

    ``run.names`` are the ``str`` forms of ``run.subjects`` (the caller decodes them). The run
    is matched with one :meth:`Sublist.match_many` call. Consecutive reply-less messages whose
    only receiver is one internal subscription with a run handler (``sub.many``, see
    :mod:`natsd.server.ports`) are handed to it as one run. Messages whose only receiver is one
    plain client subscription, or one queue group of such (the member :func:`route` would pick),
    are gathered per receiving connection and framed together
    (:func:`_settle`: one format per message, in C, and one append per connection), which is
    what a publisher over many subjects to a few subscribers costs instead of one
    :func:`route` each. Everything else goes through :func:`route`, one message at a time, in
    order, after the gathered frames are queued: every connection gets its messages in the
    order they were published. When a handler changes the subscriptions, the rest of the run is
    matched again, so every message is routed as if it had been published alone.
    """
    sl = acc.sublist
    subjects = run.names
    assert subjects is not None and run.subjects is not None  # a subject run, decoded by the caller
    n = len(subjects)
    start = 0
    while start < n:
        gen = sl.generation
        results = sl.match_many(subjects, start)
        if run.replies is None:
            sub = _run_sub(results[0])
            if sub is not None and results.count(results[0]) == len(results):
                # The usual run of acks: every message has the same lone receiver (one C-level count).
                _call_many(sub, run, start, n)
                return
        else:  # (js31b) requests whose lone receiver is a stream: one batch per stretch
            start = _route_rruns(acc, run, results, start, gen, src)
            continue
        start = _route_results(acc, run, results, start, gen, src)


# --- js31b: a run of requests over many subjects captured by one stream --------------------
def _route_rruns(acc, run: Run, results: list, start: int, gen: int, src) -> int:
    """:func:`route_run` of requests ``start:`` with their match ``results``: each stretch whose
    lone receiver is one internal subscription with a reply-run handler (a stream's, see
    :mod:`natsd.server.ports`) is handed to it at once as ``rrun(None, stretch)``; the others
    go through :func:`_route_results`. Returns where to match again, or the run's length."""
    # Each distinct result's reply-run receiver, once (a run has a few distinct results, one per
    # receiver: requests over 10,000 subjects to 10 wildcard subscribers have 10).
    rsub = {r: _rrun_sub(r) for r in dict.fromkeys(results)}
    if all(s is None for s in rsub.values()):  # (client receivers only: no stretch for a stream)
        return _route_results(acc, run, results, start, gen, src)
    rsub_of = rsub.__getitem__
    i = 0
    k = len(results)
    while i < k:
        sub = rsub_of(results[i])
        j = i + 1
        if sub is None:
            while j < k and rsub_of(results[j]) is None:
                j += 1
            end = _route_results(acc, run, results[i:j], start + i, gen, src)
            if end < start + j:
                return end
        else:
            while j < k and rsub_of(results[j]) is sub:
                j += 1
            sub.delivered += j - i
            try:
                sub.rrun(None, run if i + start == 0 and j == len(run.payloads) else run.slice(start + i, start + j))
            except Exception:
                logger.exception("internal subscription handler for %r failed", sub.subject)
            if acc.sublist.generation != gen:
                return start + j
        i = j
    return start + k


def _rrun_sub(r):
    """The lone receiver of match result ``r`` when it takes reply runs (``sub.rrun``)."""
    psubs = r.psubs
    if len(psubs) == 1 and not r.qsubs:
        sub = psubs[0]
        if sub.rrun is not None and sub.client is None and not sub.max:
            return sub
    return None


# --- end js31b ------------------------------------------------------------------------------


def _route_results(acc, run: Run, results: list, start: int, gen: int, src) -> int:
    """:func:`route_run` of messages ``start:`` with their match ``results``; returns where to
    match again (the subscriptions changed), or the run's length when done."""
    sl = acc.sublist
    names = run.names
    subjects_b = run.subjects
    assert names is not None and subjects_b is not None  # (route_run's)
    replies = run.replies
    # Gathered frames: connection -> (its one subscription in this run, message indices), and
    # each match result that is such a receiver -> that index list (a result with no receiver
    # gets a list nobody reads).
    groups: dict = {}
    memo: dict = {}
    gsub = None  # the run handler collecting messages g0..i-1
    g0 = 0
    clean = -1  # nothing gathered since message `clean` was routed
    with_replies = replies is not None
    for i, r in enumerate(results, start):
        idx = memo.get(r)
        if gsub is None:
            # (a result that gathers and one with a run handler exclude each other: gathering
            # is tried first, it is what a publisher over many connections meets every time)
            if idx is None:
                idx = _gather(r, groups, memo, with_replies, src)
            if idx is not None:
                idx.append(i)
                continue
            sub = None if with_replies else _run_sub(r)
        else:
            sub = None if with_replies else _run_sub(r)
            if sub is gsub:
                continue
            _settle(groups, run, src)
            _call_many(gsub, run, g0, i)
            gsub = None
            if sl.generation != gen:
                return i
            if sub is None:
                if idx is None:
                    idx = _gather(r, groups, memo, with_replies, src)
                if idx is not None:
                    idx.append(i)
                    continue
        if sub is not None:
            gsub = sub
            g0 = i
            continue
        if clean != i - 1:
            _settle(groups, run, src)
            if sl.generation != gen:  # (a receiver was closed as a slow consumer)
                return i
        reply = b"" if replies is None else replies[i]
        if not route(acc, names[i], subjects_b[i], reply, 0, run.payloads[i], src, None, r):
            if reply and src is not None and src.no_responders:
                src.send_no_responders(subjects_b[i], reply)
        clean = i
        if sl.generation != gen:
            return i + 1
    end = start + len(results)
    _settle(groups, run, src)
    if gsub is not None:
        _call_many(gsub, run, g0, end)
    return end


def _own_route(sub, c) -> bool:
    """Whether a subscription's messages need :func:`route` one by one when a run is gathered:
    no client, an auto-unsubscribe count, deny rules, or tracked replies (allow_responses)."""
    return c is None or bool(sub.max) or c.sub_deny is not None or c.replies is not None


def _gather(r, groups: dict, memo: dict, with_replies: bool, src):
    """The index list that messages with match result ``r`` join (see :func:`_route_results`),
    (or the :class:`_QueueShare` of a queue group alone), or None when they need
    :func:`route`: several receivers or queue groups, an internal one,
    per-receiver rules, a second subscription of a connection already gathered (its messages
    must interleave with the first's in order), or a reply that may need a no-responders
    answer."""
    psubs = r.psubs
    if r.qsubs:
        return None if psubs or len(r.qsubs) > 1 else _gather_queue(r, groups, memo, src)
    if len(psubs) > 1:
        return None
    if not psubs:
        if with_replies and src is not None and src.no_responders:
            return None
        idx = memo[r] = []
        return idx
    sub = psubs[0]
    c = sub.client
    # (_own_route inlined: this runs once per receiving connection per run)
    if c is None or sub.max or c.sub_deny is not None or c.replies is not None or c.closed:
        return None
    if c is src and not c.echo:
        if with_replies:
            return None
        idx = memo[r] = []
        return idx
    g = groups.get(c)
    if g is None:
        g = groups[c] = (sub, [])
    elif g[0] is not sub:
        return None
    idx = memo[r] = g[1]
    return idx


class _QueueShare:
    """The gathered messages of one queue group: ``append(i)`` gives message ``i`` to the member
    :func:`route` would pick (the same rotation: every member is a plain subscription that takes
    it), in that member's connection's index list."""

    __slots__ = ("lists", "k")

    def __init__(self, lists: list) -> None:
        self.lists = lists
        self.k = len(lists)

    def append(self, i: int) -> None:
        k = self.k
        self.lists[next(_rr) % k if k > 1 else 0].append(i)


def _gather_queue(r, groups: dict, memo: dict, src):
    """:func:`_gather` of a result that is one queue group alone: a :class:`_QueueShare` when
    every member is a plain client subscription on a connection of its own (not the publisher
    without echo, which route() would pass over), else None."""
    members = r.qsubs[0]
    lists: list = []
    seen = set()
    for sub in members:
        c = sub.client
        if _own_route(sub, c) or sub.closed or c.closed or (c is src and not c.echo) or id(c) in seen:
            return None
        seen.add(id(c))
        g = groups.get(c)
        if g is not None and g[0] is not sub:
            return None
        lists.append(g)
    idx_lists: list = []
    for j, sub in enumerate(members):
        g = lists[j]
        if g is None:
            g = groups[sub.client] = (sub, [])
        idx_lists.append(g[1])
    share = memo[r] = _QueueShare(idx_lists)
    return share


# Up to this many messages to one connection in a run are framed one by one (route()'s
# enqueue_msg), more are laid out by msg_pieces in one join (measured: the crossover is 2-3).
_FEW = 2


def _settle(groups: dict, run: Run, src) -> None:
    """Queue the gathered messages of every connection in ``groups`` (one append each), byte
    for byte the frames :func:`route` would have queued one by one
    (:func:`natsd.protocol.encoder.msg_pieces`)."""
    subjects_b = run.subjects
    assert subjects_b is not None  # (route_run's)
    payloads = run.payloads
    replies = run.replies
    for c, g in groups.items():
        idx = g[1]
        k = len(idx)
        if not k:
            continue
        sub = g[0]
        if k <= _FEW:
            # A publisher round robin over many connections leaves one or two messages per
            # connection per run: framing them as route() does costs less than laying out pieces.
            for j in idx:
                if c.closed:
                    break
                p = payloads[j]
                size = len(p)
                head, mid = msg_parts(subjects_b[j], b"" if replies is None else replies[j], 0, size)
                c.enqueue_msg(sub, head, mid, p, size, src)
            idx.clear()
            continue
        take = itemgetter(*idx)
        ps = take(payloads)
        ss = take(subjects_b)
        rs = None if replies is None else take(replies)
        idx.clear()
        if c.closed:
            continue
        pieces, nbytes = msg_pieces(sub.sid, ss, rs, ps)
        c.enqueue_frames(pieces, k, nbytes, src)
        sub.delivered += k


def route_rrun(acc, subject: str, run: Run) -> bool:
    """Hand a run of messages to one subject with a reply each (``OP_PUB_RRUN``: an
    asynchronous JetStream publisher) to its receiver at once, when that is one internal
    subscription with a reply-run handler (``sub.rrun``, a stream: see
    :mod:`natsd.server.ports`); True when it took the run. False (nothing delivered) for any
    other set of receivers: the caller then publishes the messages one at a time, which routes
    each as :func:`route` does (client subscriptions, queue groups, no-responders)."""
    r = acc.sublist.match(subject)
    if r.qsubs:
        return False
    psubs = r.psubs
    if len(psubs) != 1:
        return False
    sub = psubs[0]
    handler = sub.rrun
    if handler is None or sub.client is not None or sub.max:
        return False
    sub.delivered += len(run.payloads)
    try:
        handler(subject, run)
    except Exception:
        logger.exception("internal subscription handler for %r failed", sub.subject)
    return True


def route_batch(acc, run: Run, subject: str, src) -> None:
    """Deliver a run of messages that share subject, reply and sizes (``OP_PUB_BATCH``);
    ``subject`` is the ``str`` form of ``run.subject``.

    When every receiver is a plain client subscription on its own connection, each receiver
    gets the whole run with one join (:meth:`Writer.enqueue_run`), byte-identical to routing
    the messages one by one. A lone internal receiver with a run handler (a stream) gets a
    reply-less, header-less run at once, as :func:`route_run` hands it. Anything else (queue
    groups, other internal subscriptions, per-receiver filters, auto-unsubscribe, two
    subscriptions of one connection, whose relative interleaving must stay message by message)
    falls back to :func:`route` per message.
    """
    subj_b = run.subject
    reply = run.reply
    hdr_len = run.hdr_len
    payloads = run.payloads
    r = acc.sublist.match(subject)
    psubs = r.psubs
    qsubs = r.qsubs
    if not psubs and not qsubs:
        return
    simple = True
    for sub in psubs:
        c = sub.client
        if _own_route(sub, c) or (hdr_len and not c.headers):
            simple = False
            break
    if simple and len(psubs) > 1 and len({id(sub.client) for sub in psubs}) != len(psubs):
        simple = False
    shares = None
    if simple and qsubs:
        shares = _queue_shares(qsubs, len(payloads), hdr_len, src, {id(sub.client) for sub in psubs})
        simple = shares is not None
    if not simple:
        if not qsubs and len(psubs) == 1:
            sub = psubs[0]
            if sub.client is None:
                if not reply and not hdr_len and _run_sub(r) is not None:
                    if run.names is None:
                        run.names = [subject] * len(payloads)
                    _call_many(sub, run, 0, len(payloads))
                    return
            else:
                # A lone receiver that takes whole runs itself (a leafnode link: LMSG frames).
                deliver_run = getattr(sub.client, "deliver_run", None)
                if deliver_run is not None and deliver_run(sub, subject, subj_b, reply, hdr_len, payloads, src):
                    return
        for p in payloads:
            route(acc, subject, subj_b, reply, hdr_len, p, src)
        return
    k = len(payloads)
    size = len(payloads[0])
    nbytes = k * size
    head, mid = msg_parts(subj_b, reply, hdr_len, size)
    for sub in psubs:
        c = sub.client
        if c.closed or (c is src and not c.echo):
            continue
        c.enqueue_run(head + sub.sid + mid, payloads, nbytes, src)
        sub.delivered += k
    if shares:
        # A queue group's members each take a contiguous share of the run (one join each) instead
        # of one message in turn: any member is a correct receiver of any message, the shares are
        # as even as the per-message rotation's, and each connection still sees its messages in order.
        for sub, lo, hi in shares:
            sub.client.enqueue_run(head + sub.sid + mid, payloads[lo:hi], (hi - lo) * size, src)
            sub.delivered += hi - lo


def _queue_shares(qsubs, k: int, hdr_len: int, src, taken: set) -> list | None:
    """How a run of ``k`` messages splits over queue groups whose members are all plain client
    subscriptions: ``(sub, lo, hi)`` per receiving member (each group's members from a rotating
    start, so short runs spread too), or None when a member needs the per-message path (internal,
    leafnode link, filters, auto-unsubscribe), in which case :func:`route` decides each message.

    ``taken``: the connections that already get the run (plain subscriptions). A connection that
    would get messages of the run for two of its subscriptions in two places (a plain one and a
    member, or members of two groups) also takes the per-message path, which keeps their relative
    interleaving; members of one group on one connection are fine: the shares follow each other in
    the run's order."""
    shares = []
    for group in qsubs:
        members = []
        conns = set()
        for sub in group:
            c = sub.client
            if _own_route(sub, c) or sub.closed or (hdr_len and not c.headers):
                return None
            if c.closed or (c is src and not c.echo):
                continue
            if id(c) in taken:
                return None
            conns.add(id(c))
            members.append(sub)
        taken |= conns
        m = len(members)
        if not m:
            continue
        start = next(_rr) % m if m > 1 else 0
        per, extra = divmod(k, m)
        lo = 0
        for j in range(m):
            hi = lo + per + (1 if j < extra else 0)
            if hi > lo:
                shares.append((members[(start + j) % m], lo, hi))
            lo = hi
    return shares


def deliver_many(acc, route_subject: str, items: list) -> None:
    """Deliver ``items`` — ``(subject, reply, hdr, payload)`` tuples of ``bytes``, ``bytes``
    (``b""`` when none), ``bytes | None``, ``bytes``: the wire forms, so nothing is encoded per
    message — to the subscribers of ``route_subject``, each MSG line showing the item's own
    subject (a consumer's batch to its deliver subject or pull inbox).

    One Sublist match for the whole run. When the only receiver is one plain client
    subscription (the usual pull inbox or push deliver subject), each item becomes one MSG/HMSG
    frame appended to that connection's buffer::

        MSG <subject> <sid> [<reply> ]<size>\\r\\n<payload>\\r\\n
        HMSG <subject> <sid> [<reply> ]<hdr_size> <total_size>\\r\\n<hdr><payload>\\r\\n

    byte-identical to routing them one by one with :func:`route`. Anything else falls back to
    :func:`route` per item, in order (internal subscribers get ``str`` subject and reply, as
    from any publish).
    """
    r = acc.sublist.match(route_subject)
    psubs = r.psubs
    if not psubs and not r.qsubs:
        return
    c = None
    if not r.qsubs and len(psubs) == 1:
        sub = psubs[0]
        c = sub.client
        if c is not None and c.sub_deny is LEAF_LINK and not sub.max and c.deliver_items(sub, route_subject, items):
            sub.delivered += len(items)  # (a leaf link: LeafConnection.deliver_items)
            return
        if c is not None and (sub.max or c.sub_deny is not None or c.replies is not None or c.closed):
            c = None
        if c is not None and not c.headers:
            for it in items:
                if it[2]:
                    c = None
                    break
    if c is None:
        for subject, reply, hdr, payload in items:
            if hdr:
                data = hdr + payload
                hdr_len = len(hdr)
            else:
                data = payload
                hdr_len = 0
            route(acc, route_subject, subject, reply, hdr_len, data, None, subject.decode())
        return
    c.enqueue_msgs(sub.sid, items)
    sub.delivered += len(items)


def deliver_templated(acc, route_subject: str, run) -> None:
    """Deliver a consumer's ``TemplatedRun`` (``natsd.jetstream.ports``: header-less messages
    whose replies are one template over columns) to the subscribers of ``route_subject``: to
    one plain client subscription, framed in one go (``Writer.enqueue_templated``); to anything
    else, as :func:`deliver_many` of its items. Byte-identical to :func:`deliver_many` of
    ``run.items()`` either way."""
    r = acc.sublist.match(route_subject)
    psubs = r.psubs
    if not psubs and not r.qsubs:
        return
    if not r.qsubs and len(psubs) == 1:
        sub = psubs[0]
        c = sub.client
        if c is not None and not (sub.max or c.sub_deny is not None or c.replies is not None or c.closed):
            c.enqueue_templated(sub.sid, run)
            sub.delivered += len(run.payloads)
            return
    deliver_many(acc, route_subject, run.items())


def publish_many(acc, subjects: list, payloads: list) -> None:
    """Route ``payloads[i]`` to ``subjects[i]`` (``str``), each with no reply and no headers, in
    order, as internal publishes (a stream's PubAcks of one loop turn).

    Each subject is matched on its own (they are usually distinct reply inboxes, which the
    Sublist's shape caches answer without a walk). When the only receiver is one plain client
    subscription the frame ``MSG <subject> <sid> <size>\\r\\n<payload>\\r\\n`` is appended with one
    format and one append, byte-identical to :func:`route`; anything else goes through
    :func:`route`.
    """
    sl = acc.sublist
    match = sl.match
    # The result shared by every reply to one inbox (Sublist.sibling_result): "<parent>." and
    # it; forgotten whenever a delivery may have changed the subscriptions (a slow consumer
    # closed, a handler), as matching again would then be needed.
    parent = ""
    lp = 0
    pr = None
    # Frames for one plain client subscription, queued with one enqueue when the receiver changes.
    gsub = None
    frames: list[bytes] = []
    nbytes = 0
    for i in range(len(subjects)):
        subject = subjects[i]
        payload = payloads[i]
        if pr is not None and subject.startswith(parent) and len(subject) > lp and subject.find(".", lp) < 0:
            r = pr
        else:
            r = match(subject)
            pr = sl.sibling_result(subject)
            if pr is r:
                parent = subject[: subject.rfind(".") + 1]
                lp = len(parent)
            else:
                pr = None
        psubs = r.psubs
        if len(psubs) == 1 and not r.qsubs:
            sub = psubs[0]
            c = sub.client
            if c is not None and not sub.max and c.sub_deny is None and c.replies is None:
                if sub is not gsub:
                    if gsub is not None:
                        gen = sl.generation
                        _enqueue_frames(gsub, frames, nbytes)
                        frames = []
                        nbytes = 0
                        if sl.generation != gen:
                            pr = None
                            if sub.closed or c.closed:
                                gsub = None
                                route(acc, subject, subject.encode(), b"", 0, payload, None)
                                continue
                    gsub = sub
                frames.append(encode_msg(subject.encode(), sub.sid, b"", payload))
                nbytes += len(payload)
                continue
        gen = sl.generation
        if gsub is not None:
            _enqueue_frames(gsub, frames, nbytes)
            frames = []
            nbytes = 0
            gsub = None
        if psubs or r.qsubs:
            route(acc, subject, subject.encode(), b"", 0, payload, None)
        if sl.generation != gen:
            pr = None
    if gsub is not None:
        _enqueue_frames(gsub, frames, nbytes)


def _enqueue_frames(sub, frames: list[bytes], nbytes: int) -> None:
    """Queue complete MSG frames for one plain client subscription at once (one append, one
    slow-consumer check), counting them as delivered."""
    c = sub.client
    if c.closed:
        return
    c.enqueue(frames[0] if len(frames) == 1 else b"".join(frames), len(frames), nbytes)
    sub.delivered += len(frames)
