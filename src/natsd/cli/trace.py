"""``natsctl trace SUBJECT [PAYLOAD]``: trace a message's path through the server (ADR-41), like the
``nats`` tool's ``trace``.

The message is published with ``Nats-Trace-Dest`` set to a fresh inbox and, unless ``--deliver``,
``Nats-Trace-Only: true`` (the server reports what it would do without delivering or storing). The
server's trace event (JSON, nats-server's ``MsgTraceEvent``) is rendered as the ``nats`` tool renders
it; ``--json`` prints the events themselves. Works against natsd and nats-server 2.11+.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import datetime
from typing import Any

from natsd.cli.common import CliError, UsageError, check_subject
from natsd.cli.context import Ctx
from natsd.nats_headers import MSG_TRACE_DEST, MSG_TRACE_ONLY

__all__ = ["register", "render"]

# nats-server's connection kinds, as the nats tool names and draws them.
_KINDS = {
    0: ("Client", "cid", "--C"),
    1: ("Router", "rid", "-->"),
    2: ("Gateway", "gid", "==>"),
    4: ("Leafnode", "lid", "~~>"),
    5: ("JetStream", "jid", "--J"),
}
# After the first event, wait this long for events of further servers (leaf nodes, routes).
_GRACE = 0.25


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("trace", parents=[common], help="trace message delivery within a NATS network")
    p.add_argument("subject")
    p.add_argument("payload", nargs="?", default="", help="the message body to send")
    p.add_argument("--deliver", action="store_true", help="deliver the message to the final destination")
    p.add_argument("-T", "--timestamp", action="store_true", help="show event timestamps")
    p.add_argument("-H", "--header", action="append", default=[], help="header Key:Value (repeatable)")
    p.set_defaults(func=cmd_trace)


async def cmd_trace(ctx: Ctx) -> None:
    a = ctx.args
    check_subject(a.subject, wildcards=False)
    headers: dict[str, str] = {}
    for h in a.header:
        if ":" not in h:
            raise UsageError(f"invalid header {h!r}: use Key:Value")
        k, v = h.split(":", 1)
        headers[k.strip()] = v.strip()
    nc = await ctx.nc()
    inbox = nc.new_inbox()
    headers[MSG_TRACE_DEST.decode()] = inbox
    if not a.deliver:
        headers[MSG_TRACE_ONLY.decode()] = "true"
    events: list[dict] = []
    first = asyncio.Event()

    async def on_event(m: Any) -> None:
        try:
            events.append(json.loads(m.data))
        except ValueError:
            return
        first.set()

    sub = await nc.subscribe(inbox, cb=on_event)
    try:
        await nc.publish(a.subject, a.payload.encode(), headers=headers)
        await nc.flush()
        try:
            await asyncio.wait_for(first.wait(), ctx.timeout)
        except asyncio.TimeoutError:
            raise CliError(f"no trace event within {ctx.timeout:g}s (does the server support tracing?)") from None
        await asyncio.sleep(_GRACE)
    finally:
        await sub.unsubscribe()
    if ctx.json:
        ctx.out.print(json.dumps(events if len(events) > 1 else events[0], indent=2))
        return
    deliver = "with delivery to the final destination" if a.deliver else ""
    ctx.out.print(f"Tracing message route to subject {a.subject} {deliver}\n")
    for line in render(events, a.timestamp):
        ctx.out.print(line)


def _ts(text: str) -> datetime | None:
    if not text:
        return None
    base, _, frac = text.rstrip("Z").partition(".")
    try:
        return datetime.fromisoformat(base + ("." + frac[:6] if frac else ""))
    except ValueError:
        return None


def _who(e: dict) -> str:
    name, cid_label, _ = _KINDS.get(e.get("kind", 0), ("Client", "cid", ""))
    if e.get("name"):
        return f'{name} "{e["name"]}" {cid_label}:{e.get("cid", 0)}'
    return f"{name} {cid_label}:{e.get('cid', 0)}"


def render(events: list[dict], show_ts: bool = False) -> list[str]:
    """The lines the ``nats`` tool prints for these trace events (the first is the origin's)."""
    lines: list[str] = []
    counts: dict[str, int] = {}
    for ev in events:
        server = ev.get("server", {})
        items = ev.get("events", [])
        start = _ts(items[0].get("ts", "")) if items else None

        def add(text: str, e: dict, start: datetime | None = start) -> None:
            if show_ts:
                at = _ts(e.get("ts", ""))
                since = (at - start).total_seconds() * 1e6 if at and start else 0.0
                text = f"[{'Skew' if since < 0 else f'{since:.0f}µs'}] {text}"
            lines.append(text)

        egresses = 0
        for e in items:
            t = e.get("type")
            if t == "in":
                add(f'{_who(e)} server:"{server.get("name", "")}" version:"{server.get("ver", "")}"', e)
                if e.get("error"):
                    lines.append(f"--X Error: {e['error']}")
            elif t == "sm":
                add(f'    Mapping subject:"{e.get("to", "")}"', e)
            elif t == "si":
                add(f'    Service Import from:"{e.get("from")}" to:"{e.get("to")}" account:"{e.get("acc")}"', e)
            elif t == "se":
                add(f'    Stream Export subject:"{e.get("to")}" account:"{e.get("acc")}"', e)
            elif t == "js":
                action = "no interest" if e.get("nointerest") else "stored"
                add(
                    f'--J JetStream action:"{action}" stream:"{e.get("stream", "")}" subject:"{e.get("subject", "")}"',
                    e,
                )
                if e.get("error"):
                    lines.append(f"--X Error: {e['error']}")
                counts["JetStream"] = counts.get("JetStream", 0) + 1
            elif t == "eg":
                egresses += 1
                kind = _KINDS.get(e.get("kind", 0), ("Client", "cid", ""))
                parts = [kind[2], _who(e)]
                parts += [
                    f'{k}:"{e[f]}"' for k, f in (("account", "acc"), ("subject", "sub"), ("queue", "queue")) if e.get(f)
                ]
                add(" ".join(parts), e)
                if e.get("error"):
                    lines.append(f"  --X Error: {e['error']}")
                counts[kind[0]] = counts.get(kind[0], 0) + 1
        ingress = items[0] if items and items[0].get("type") == "in" else None
        if not egresses and ingress is not None and ingress.get("kind") == 0 and not ingress.get("error"):
            lines.append("--X No active interest")
    lines += ["", "Legend: Client: --C Router: --> Gateway: ==> Leafnode: ~~> JetStream: --J Error: --X", ""]
    if counts:
        lines.append("Egress Count:")
        lines.append("")
        width = max(len(k) for k in counts)
        lines += [f"  {k:>{width}}: {v}" for k, v in sorted(counts.items())]
    if counts.get("JetStream", 0) > 1:
        lines.append(f"WARNING: The message was received by {counts['JetStream']} streams")
    return lines
