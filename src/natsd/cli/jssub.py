"""``natsctl sub --stream S`` and its delivery flags (``--last``, ``--all``, ``--new``, ``--start-sequence``,
``--since``, ``--last-per-subject``): a subscription that reads a stream, as the nats CLI's ``sub`` does.

Any of those flags makes ``sub`` a JetStream subscription. The stream is ``--stream`` or the one whose subjects
capture the subject given (``STREAM.NAMES`` with a subject filter); the subject, when given, becomes the
consumer's filter. The messages come through an ephemeral push consumer (ack none, flow control and idle
heartbeats answered here) delivering to an inbox, which is deleted when the command ends (and would go by its
inactive threshold should natsctl die first), so nothing is left behind. Without a delivery flag the consumer
starts with the stream's first message (``--all``), as the nats CLI does with ``--stream``.

Each message prints as ``[#n] Received JetStream message: stream: S seq: 3 / pending: 0 / subject: s / time: ...``
then its headers and body (``--raw``: the body only; ``-j``: one JSON object per line with ``stream``, ``seq``,
``pending`` and ``time`` added). ``-T``/``--terminate-at-end`` stops once nothing is pending.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from typing import Any, Callable

from natsd.cli.common import (
    CliError,
    UsageError,
    arrivals,
    check_subject,
    next_from,
    optional_count,
    optional_seconds,
    parse_duration,
    parse_int,
    queue_subscriber,
    text_of,
)
from natsd.cli.context import Ctx


def add_flags(s: argparse.ArgumentParser) -> None:
    g = s.add_argument_group("JetStream (any of these reads a stream)")
    g.add_argument("--stream", default=None, help="subscribe to this stream (the subject, if given, filters it)")
    g.add_argument("--all", dest="deliver_all", action="store_true", help="every message in the stream")
    g.add_argument("--new", dest="deliver_new", action="store_true", help="only messages arriving from now on")
    g.add_argument(
        "--last", dest="deliver_last", action="store_true", help="the most recent message and every one after it"
    )
    g.add_argument(
        "--last-per-subject",
        dest="deliver_last_per_subject",
        action="store_true",
        help="the most recent message of each subject, then new ones",
    )
    g.add_argument("--start-sequence", dest="start_seq", default=None, help="start at this stream sequence")
    g.add_argument("--since", default=None, help="messages received within this long, e.g. 1h30m")
    g.add_argument(
        "-T",
        "--terminate-at-end",
        dest="terminate_at_end",
        action="store_true",
        help="stop once every message in the stream was received",
    )


def wanted(a: argparse.Namespace) -> bool:
    """Whether the flags ask for a JetStream subscription."""
    return bool(
        a.stream
        or a.deliver_all
        or a.deliver_new
        or a.deliver_last
        or a.deliver_last_per_subject
        or a.start_seq
        or a.since
    )


def consumer_config(a: argparse.Namespace, deliver_subject: str, now_ns: int) -> dict[str, Any]:
    """The ephemeral consumer's config for the flags (the first delivery flag given wins, as there)."""
    cfg: dict[str, Any] = {
        "ack_policy": "none",
        "deliver_subject": deliver_subject,
        "flow_control": True,
        "idle_heartbeat": 5_000_000_000,
        "inactive_threshold": 30_000_000_000,
        "mem_storage": True,
        "num_replicas": 1,
    }
    if a.subject:
        cfg["filter_subject"] = a.subject
    if a.start_seq:
        cfg.update(deliver_policy="by_start_sequence", opt_start_seq=parse_int(a.start_seq, flag="--start-sequence"))
    elif a.deliver_last:
        cfg["deliver_policy"] = "last"
    elif a.deliver_all:
        cfg["deliver_policy"] = "all"
    elif a.deliver_new:
        cfg["deliver_policy"] = "new"
    elif a.since:
        start = now_ns - parse_duration(a.since, flag="--since")
        secs, frac = divmod(start, 1_000_000_000)
        when = datetime.fromtimestamp(secs, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"
        cfg.update(deliver_policy="by_start_time", opt_start_time=when)
    elif a.deliver_last_per_subject:
        cfg["deliver_policy"] = "last_per_subject"
        if not a.subject:
            cfg["filter_subject"] = ">"
    else:
        cfg["deliver_policy"] = "all"
    return cfg


def ack_meta(reply: str | None) -> dict[str, Any]:
    """Stream, stream sequence, pending count and time from a JetStream delivery's ``$JS.ACK`` reply subject
    (``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``, or the form with the domain and
    account hash after ``ACK``)."""
    if not reply or not reply.startswith("$JS.ACK."):
        return {}
    t = reply.split(".")
    if len(t) >= 12:
        t = t[:2] + t[4:]
    try:
        ts = int(t[7])
        return {
            "stream": t[2],
            "seq": int(t[5]),
            "pending": int(t[8]),
            "time": datetime.fromtimestamp(ts / 1e9).strftime("%Y-%m-%d %H:%M:%S"),
        }
    except (IndexError, ValueError):
        return {}


async def _stream_of(ctx: Ctx, subject: str) -> str:
    api = await ctx.api()
    resp = await api.request("STREAM.NAMES", {"subject": subject})
    names = resp.get("streams") or []
    if not names:
        raise CliError(f"no stream found with subject: {subject}")
    return str(names[0])


async def run(ctx: Ctx, msg_json: Callable[..., dict]) -> None:
    """The JetStream ``sub``; ``msg_json`` renders a message's common JSON fields (from pubsub)."""
    a = ctx.args
    if a.queue:
        raise UsageError("queue group subscriptions are not supported with JetStream")
    if a.subject:
        check_subject(a.subject, wildcards=True)
    limit_n, wait_s = optional_count(a.count), optional_seconds(a.wait)
    stream = a.stream or await _stream_of(ctx, a.subject)
    nc = await ctx.nc()
    api = await ctx.api()
    inbox = nc.new_inbox()
    queue, on_msg = queue_subscriber(65_536)
    sub = await nc.subscribe(inbox, cb=on_msg)
    cfg = consumer_config(a, inbox, time.time_ns())
    created = await api.request(f"CONSUMER.CREATE.{stream}", {"stream_name": stream, "config": cfg, "action": "create"})
    name = created["name"]
    what = a.subject or "every subject"
    sys.stderr.write(f"Subscribing to JetStream Stream {stream} on {what} ({cfg['deliver_policy']})\n")
    sys.stderr.flush()
    n = 0
    ctx.summary = lambda: f"received {n} messages from stream {stream}"
    try:
        if a.terminate_at_end and not (created.get("num_pending") or 0):
            return
        async for msg in arrivals(lambda t: next_from(queue, t), limit_n, wait_s):
            if msg.headers and msg.headers.get("Status") and not msg.data:
                if msg.reply:  # flow control: the consumer waits for this answer before sending more
                    await nc.publish(msg.reply, b"")
                continue  # idle heartbeat
            n += 1
            meta = ack_meta(msg.reply)
            if ctx.json:
                doc = msg_json(msg, reply=False)
                doc.update({k: meta.get(k) for k in ("stream", "seq", "pending", "time")})
                ctx.out.json_line(doc)
            elif a.raw:
                ctx.out.raw(msg.data)
            else:
                ctx.out.print(
                    f"[#{n}] Received JetStream message: stream: {meta.get('stream', stream)} seq: "
                    f"{meta.get('seq', '?')} / pending: {meta.get('pending', '?')} / subject: "
                    f"{msg.subject} / time: {meta.get('time', '')}"
                )
                for k, v in (msg.headers or {}).items():
                    ctx.out.print(f"{k}: {v}")
                if msg.headers:
                    ctx.out.print("")
                ctx.out.print(text_of(msg.data))
                ctx.out.print("")
            sys.stdout.flush()
            if a.terminate_at_end and meta.get("pending") == 0:
                break
    finally:
        await sub.unsubscribe()
        try:
            await api.request(f"CONSUMER.DELETE.{stream}.{name}")
        except CliError:
            pass  # gone already; the inactive threshold removes it otherwise
    if limit_n is not None and n < limit_n and not a.terminate_at_end:
        raise CliError(f"received {n} of {limit_n} messages before --wait expired")
