"""``natsctl pub | sub | req | reply``: core NATS (and the JetStream publish ack with ``pub --wait``).

Bodies and header values are templates as in the ``nats`` tool: ``{{Count}}`` (1-based message number),
``{{TimeStamp}}`` (RFC3339), ``{{Unix}}``, ``{{UnixNano}}``, ``{{Time}}`` (``15:04:05``), ``{{ID}}`` (a
unique id), ``{{Random min max}}`` (that many random letters) and, for ``reply``, ``{{Request}}`` (the
request body). ``{{.Count}}`` is accepted too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import secrets
import string
import sys
import time
from datetime import datetime, timezone
from typing import Any

from natsd.cli.common import (
    CliError, UsageError, arrivals, next_from, optional_count, optional_seconds, parse_duration, parse_int,
    queue_subscriber, rfc3339, stdin_is_tty,
)
from natsd.cli.context import Ctx

_TEMPLATE = re.compile(r"\{\{\s*\.?([A-Za-z]+)((?:\s+[^\s}]+)*)\s*\}\}")


def render_template(text: str, count: int, request: str = "") -> str:
    """Expand ``{{...}}`` placeholders (unknown ones are left as they are)."""
    if "{{" not in text:
        return text
    now = datetime.now(timezone.utc)

    def sub(m: re.Match) -> str:
        name = m.group(1).lower()
        args = m.group(2).split()
        if name == "count":
            return str(count)
        if name == "timestamp":
            return rfc3339(now)
        if name == "unix":
            return str(int(now.timestamp()))
        if name == "unixnano":
            return str(time.time_ns())
        if name == "time":
            return now.astimezone().strftime("%H:%M:%S")
        if name == "id":
            return secrets.token_hex(11)
        if name == "request":
            return request
        if name == "random":
            try:
                lo, hi = (int(args[0]), int(args[1])) if len(args) >= 2 else (int(args[0]), int(args[0]))
            except (IndexError, ValueError):
                lo, hi = 10, 10
            n = random.randint(min(lo, hi), max(lo, hi))
            return "".join(random.choices(string.ascii_letters, k=n))
        return m.group(0)

    return _TEMPLATE.sub(sub, text)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("pub", aliases=["publish"], parents=[common], help="publish messages")
    p.add_argument("subject")
    p.add_argument("body", nargs="?", help="message body (a template); read from stdin when omitted")
    p.add_argument("-H", "--header", action="append", default=[], help="header Key:Value (repeatable)")
    p.add_argument("--count", default="1", help="publish this many messages")
    p.add_argument("--sleep", default=None, help="pause between messages, e.g. 10ms")
    p.add_argument("--wait", "--jetstream", "-J", dest="wait", action="store_true",
                   help="wait for the JetStream publish acknowledgement")
    p.add_argument("--reply", help="reply subject to send")
    p.add_argument("-q", "--quiet", action="store_true", help="no output per message")
    p.set_defaults(func=cmd_pub)

    s = sub.add_parser("sub", aliases=["subscribe"], parents=[common], help="subscribe and print messages")
    s.add_argument("subject")
    s.add_argument("--queue", help="queue group")
    s.add_argument("--count", default=None, help="exit after this many messages")
    s.add_argument("--wait", default=None, help="exit after this long without reaching --count, e.g. 5s")
    s.add_argument("--raw", action="store_true", help="only message bodies")
    s.add_argument("--ack", action="store_true", help="acknowledge JetStream messages as they arrive")
    s.set_defaults(func=cmd_sub)

    r = sub.add_parser("req", aliases=["request"], parents=[common], help="send a request, print the reply")
    r.add_argument("subject")
    r.add_argument("body", nargs="?", help="request body (a template); read from stdin when omitted")
    r.add_argument("-H", "--header", action="append", default=[], help="header Key:Value (repeatable)")
    r.add_argument("--count", default="1", help="send this many requests")
    r.add_argument("--raw", action="store_true", help="only the reply body")
    r.set_defaults(func=cmd_req)

    rp = sub.add_parser("reply", parents=[common], help="answer requests on a subject")
    rp.add_argument("subject")
    rp.add_argument("body", nargs="?", default="", help="response body (a template; {{Request}} is the request)")
    rp.add_argument("--echo", action="store_true", help="echo the request back")
    rp.add_argument("--queue", default="NATS-RPLY-22", help="queue group (default NATS-RPLY-22)")
    rp.add_argument("--count", default=None, help="exit after this many requests")
    rp.add_argument("-H", "--header", action="append", default=[], help="response header Key:Value")
    rp.set_defaults(func=cmd_reply)


def _headers(items: list[str], count: int) -> dict[str, str] | None:
    if not items:
        return None
    out = {}
    for h in items:
        if ":" not in h:
            raise UsageError(f"invalid header {h!r}: use Key:Value")
        k, v = h.split(":", 1)
        out[k.strip()] = render_template(v.strip(), count)
    return out


def _body(ctx: Ctx, body: str | None) -> str:
    if body is not None:
        return body
    if stdin_is_tty():
        raise UsageError("BODY is required (give it as an argument or on stdin)")
    ctx.out.log("Reading payload from STDIN")
    return sys.stdin.read()


async def cmd_pub(ctx: Ctx) -> None:
    a = ctx.args
    count = parse_int(a.count, flag="--count")
    pause = parse_duration(a.sleep, flag="--sleep") / 1e9 if a.sleep else 0.0
    body_t = _body(ctx, a.body)
    nc = await ctx.nc()
    for i in range(1, count + 1):
        data = render_template(body_t, i).encode()
        hdrs = _headers(a.header, i)
        if a.wait:
            try:
                msg = await nc.request(a.subject, data, timeout=ctx.timeout, headers=hdrs)
            except Exception as exc:  # noqa: BLE001
                if type(exc).__name__ == "NoRespondersError":
                    raise CliError(f"no stream captures {a.subject} (no responders)") from None
                raise CliError(f"no acknowledgement for {a.subject}: {type(exc).__name__}") from None
            try:
                ack = json.loads(msg.data)
            except ValueError:
                raise CliError(f"unexpected reply to publish: {msg.data[:200]!r}") from None
            if "error" in ack:
                e = ack["error"]
                raise CliError(f"{e.get('description')} (code {e.get('code')}, err_code {e.get('err_code')})")
            if ctx.json:
                ctx.out.json_out(ack)
            elif not a.quiet:
                dup = " (duplicate)" if ack.get("duplicate") else ""
                ctx.out.print(f"Published {len(data)} bytes to {a.subject}")
                ctx.out.print(f"Stored in Stream: {ack.get('stream')} Sequence: {ack.get('seq')}{dup}")
        else:
            await nc.publish(a.subject, data, reply=a.reply or "", headers=hdrs)
            if not a.quiet and not ctx.json:
                ctx.out.print(f"Published {len(data)} bytes to {a.subject}")
        if pause:
            await asyncio.sleep(pause)
    await nc.flush()
    if a.quiet and count > 1 and not ctx.json:
        ctx.out.print(f"Published {count} messages to {a.subject}")


def _fmt_msg(n: int, msg: Any) -> str:
    body = msg.data.decode(errors="replace")
    # The reply subject (a $JS.ACK... token for JetStream deliveries) is in the -j output, not here: the
    # seeds show the plain "[#n] Received on [subject]: 'body'" line.
    lines = [f"[#{n}] Received on [{msg.subject}]:" + (f" '{body}'" if "\n" not in body else "")]
    for k, v in (msg.headers or {}).items():
        lines.append(f"  {k}: {v}")
    if "\n" in body:
        lines.append(body)
    return "\n".join(lines)


async def cmd_sub(ctx: Ctx) -> None:
    a = ctx.args
    limit_n, wait_s = optional_count(a.count), optional_seconds(a.wait)
    nc = await ctx.nc()
    queue, on_msg = queue_subscriber(65_536)
    await nc.subscribe(a.subject, queue=a.queue or "", cb=on_msg)
    await nc.flush()
    listening = f"Listening on [{a.subject}]" + (f" in queue group {a.queue}" if a.queue else "")
    if ctx.json or a.raw:
        # Keep stdout pure data; scripts can still wait for this line on stderr.
        sys.stderr.write(listening + "\n")
        sys.stderr.flush()
    else:
        ctx.out.print(listening)
    sys.stdout.flush()
    n = 0
    async for msg in arrivals(lambda t: next_from(queue, t), limit_n, wait_s):
        n += 1
        if ctx.json:
            ctx.out.json_out({"subject": msg.subject, "reply": msg.reply or None,
                              "headers": dict(msg.headers or {}), "data": msg.data.decode(errors="replace")})
        elif a.raw:
            ctx.out.print(msg.data.decode(errors="replace"))
        else:
            ctx.out.print(_fmt_msg(n, msg))
        if a.ack and msg.reply and msg.reply.startswith("$JS.ACK."):
            await nc.publish(msg.reply, b"+ACK")
        sys.stdout.flush()
    if limit_n is not None and n < limit_n:
        raise CliError(f"received {n} of {limit_n} messages before --wait expired")


async def cmd_req(ctx: Ctx) -> None:
    a = ctx.args
    count = parse_int(a.count, flag="--count")
    body_t = _body(ctx, a.body)
    nc = await ctx.nc()
    for i in range(1, count + 1):
        data = render_template(body_t, i).encode()
        if not a.raw and not ctx.json:
            ctx.out.log(f"Sending request on [{a.subject}]")
        t0 = time.perf_counter()
        try:
            msg = await nc.request(a.subject, data, timeout=ctx.timeout, headers=_headers(a.header, i))
        except Exception as exc:  # noqa: BLE001
            if type(exc).__name__ == "NoRespondersError":
                raise CliError("no responders available for request") from None
            raise CliError("timeout waiting for a reply") from None
        rtt = (time.perf_counter() - t0) * 1000
        if ctx.json:
            ctx.out.json_out({"subject": msg.subject, "headers": dict(msg.headers or {}),
                              "data": msg.data.decode(errors="replace")})
            continue
        if not a.raw:
            ctx.out.log(f"Received on [{msg.subject}] rtt {rtt:.3f}ms")
            for k, v in (msg.headers or {}).items():
                ctx.out.print(f"{k}: {v}")
        ctx.out.print(msg.data.decode(errors="replace"))


async def cmd_reply(ctx: Ctx) -> None:
    a = ctx.args
    limit_n = optional_count(a.count)
    nc = await ctx.nc()
    done = asyncio.Event()
    n = 0

    async def on_msg(msg) -> None:
        nonlocal n
        if done.is_set():
            return
        n += 1
        req = msg.data.decode(errors="replace")
        if not ctx.json:
            ctx.out.print(f"[#{n}] Received on [{msg.subject}]: '{req}'")
            sys.stdout.flush()
        data = msg.data if a.echo else render_template(a.body, n, request=req).encode()
        if msg.reply:
            await nc.publish(msg.reply, data, headers=_headers(a.header, n))
        if limit_n is not None and n >= limit_n:
            done.set()

    await nc.subscribe(a.subject, queue=a.queue or "", cb=on_msg)
    await nc.flush()
    if not ctx.json:
        ctx.out.print(f"Listening on [{a.subject}] in group [{a.queue}]")
    sys.stdout.flush()
    await done.wait()
    await nc.flush()
