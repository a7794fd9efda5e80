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
import string
import sys
import time
from datetime import datetime, timezone
from typing import Any, Callable

from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError

from natsd.cli import jssub
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
    payload_json,
    queue_subscriber,
    read_stdin_bytes,
    rfc3339,
    stdin_is_tty,
    text_of,
)
from natsd.cli.context import Ctx
from natsd.nuid import nuid

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
            # natscli: now.Format(time.RFC3339), whole seconds
            return rfc3339(now.replace(microsecond=0))
        if name == "unix":
            return str(int(now.timestamp()))
        if name == "unixnano":
            return str(time.time_ns())
        if name == "time":
            return now.astimezone().strftime("%H:%M:%S")
        if name == "id":
            return nuid()
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
    p.add_argument("subject", help="subject to publish to")
    p.add_argument("body", nargs="?", help="message body (a template); read from stdin when omitted")
    p.add_argument("-H", "--header", action="append", default=[], help="header Key:Value (repeatable)")
    p.add_argument("--count", default="1", help="publish this many messages")
    p.add_argument("--sleep", default=None, help="pause between messages, e.g. 10ms")
    p.add_argument(
        "--wait",
        "--jetstream",
        "-J",
        dest="wait",
        action="store_true",
        help="publish to JetStream: wait for the stream's acknowledgement (stream and sequence) and fail "
        "when none arrives within --timeout",
    )
    p.add_argument("--reply", help="reply subject to send")
    p.add_argument("-q", "--quiet", action="store_true", help="no output per message")
    p.set_defaults(func=cmd_pub)

    s = sub.add_parser("sub", aliases=["subscribe"], parents=[common], help="subscribe and print messages")
    s.add_argument("subject", nargs="?", default=None, help="subject (optional with --stream: its filter)")
    s.add_argument("--queue", help="queue group")
    s.add_argument("--count", default=None, help="exit after this many messages")
    s.add_argument("--wait", default=None, help="exit after this long without reaching --count, e.g. 5s")
    s.add_argument("--raw", action="store_true", help="only message bodies")
    s.add_argument("--ack", action="store_true", help="acknowledge JetStream messages as they arrive")
    jssub.add_flags(s)
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


def _body(ctx: Ctx, body: str | None) -> Callable[[int], bytes]:
    """The body of message ``n``: the argument as a template, or stdin's bytes unchanged.

    Stdin is read as bytes (a file of any content publishes byte for byte); only a body that is UTF-8 text and
    contains ``{{`` is taken as a template.
    """
    if body is not None:
        return lambda n: render_template(body, n).encode()
    if stdin_is_tty():
        raise UsageError("BODY is required (give it as an argument or on stdin)")
    ctx.out.log("Reading payload from STDIN")
    data = read_stdin_bytes()
    if b"{{" in data:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return lambda n: render_template(text, n).encode()
    return lambda n: data


#: A loop that may never wait on the network yields to the event loop this often, so Ctrl-C gets in.
_YIELD_EVERY = 256


async def cmd_pub(ctx: Ctx) -> None:
    a = ctx.args
    check_subject(a.subject, wildcards=False)
    count = parse_int(a.count, flag="--count")
    pause = parse_duration(a.sleep, flag="--sleep") / 1e9 if a.sleep else 0.0
    body = _body(ctx, a.body)
    nc = await ctx.nc()
    sent = nbytes = 0
    acks: list[dict] = []
    ctx.summary = lambda: f"published {sent} of {count} messages to {a.subject}"
    for i in range(1, count + 1):
        data = body(i)
        hdrs = _headers(a.header, i)
        if a.wait:
            try:
                msg = await ctx.or_server_error(
                    nc.request(a.subject, data, timeout=ctx.timeout, headers=hdrs), a.subject
                )
            except NoRespondersError:
                raise CliError(f"no stream captures {a.subject} (no responders)") from None
            except (NatsTimeoutError, asyncio.TimeoutError):
                raise CliError(f"no acknowledgement for {a.subject} within {ctx.timeout:g}s") from None
            try:
                ack = json.loads(msg.data)
            except ValueError:
                raise CliError(f"unexpected reply to publish: {msg.data[:200]!r}") from None
            if "error" in ack:
                e = ack["error"]
                raise CliError(f"{e.get('description')} (code {e.get('code')}, err_code {e.get('err_code')})")
            acks.append(ack)
            if not a.quiet and not ctx.json:
                dup = " (duplicate)" if ack.get("duplicate") else ""
                ctx.out.print(f"Published {len(data)} bytes to {a.subject}")
                ctx.out.print(f"Stored in Stream: {ack.get('stream')} Sequence: {ack.get('seq')}{dup}")
        else:
            await nc.publish(a.subject, data, reply=a.reply or "", headers=hdrs)
            if not a.quiet and not ctx.json:
                ctx.out.print(f"Published {len(data)} bytes to {a.subject}")
        sent += 1
        nbytes += len(data)
        if pause:
            await asyncio.sleep(pause)
        elif i % _YIELD_EVERY == 0:
            await asyncio.sleep(0)
    await ctx.or_server_error(nc.flush(), a.subject)
    refused = ctx.server_error(a.subject)
    if refused is not None:  # the server's -ERR (a publish permission violation) arrives before the PONG
        raise CliError(refused)
    if ctx.json:
        doc: dict[str, Any] = {"subject": a.subject, "messages": sent, "bytes": nbytes}
        if a.wait and count == 1:
            doc.update(acks[0])  # {"stream", "seq", "duplicate"?, "domain"?} as the server sent it
        elif a.wait:
            doc["acks"] = acks
        ctx.out.json_out(doc)
    elif a.quiet and count > 1:
        ctx.out.print(f"Published {count} messages to {a.subject}")


def msg_json(msg: Any, *, reply: bool = True) -> dict:
    """A received message in ``-j`` output (the body by :func:`payload_json`'s rule)."""
    d: dict[str, Any] = {"subject": msg.subject}
    if reply:
        d["reply"] = msg.reply or None
    d["headers"] = dict(msg.headers or {})
    d.update(payload_json(msg.data))
    return d


def _fmt_msg(n: int, msg: Any) -> str:
    body = text_of(msg.data)
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
    if jssub.wanted(a):
        await jssub.run(ctx, msg_json)
        return
    if not a.subject:
        raise UsageError("a subject is required (or --stream)")
    check_subject(a.subject, wildcards=True)
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
    ctx.summary = lambda: f"received {n} messages on {a.subject}"
    async for msg in arrivals(lambda t: next_from(queue, t), limit_n, wait_s):
        n += 1
        if ctx.json:
            ctx.out.json_line(msg_json(msg))
        elif a.raw:
            ctx.out.raw(msg.data)
        else:
            ctx.out.print(_fmt_msg(n, msg))
        if a.ack and msg.reply and msg.reply.startswith("$JS.ACK."):
            await nc.publish(msg.reply, b"+ACK")
        sys.stdout.flush()
    if limit_n is not None and n < limit_n:
        raise CliError(f"received {n} of {limit_n} messages before --wait expired")


async def cmd_req(ctx: Ctx) -> None:
    a = ctx.args
    check_subject(a.subject, wildcards=False)
    count = parse_int(a.count, flag="--count")
    body = _body(ctx, a.body)
    nc = await ctx.nc()
    done = 0
    ctx.summary = lambda: f"{done} of {count} requests answered"
    for i in range(1, count + 1):
        data = body(i)
        if not a.raw and not ctx.json:
            ctx.out.log(f"Sending request on [{a.subject}]")
        t0 = time.perf_counter()
        try:
            msg = await ctx.or_server_error(
                nc.request(a.subject, data, timeout=ctx.timeout, headers=_headers(a.header, i)), a.subject
            )
        except NoRespondersError:
            raise CliError("no responders available for request") from None
        except (NatsTimeoutError, asyncio.TimeoutError):
            raise CliError(f"no reply on {a.subject} within {ctx.timeout:g}s (timeout)") from None
        done += 1
        rtt = (time.perf_counter() - t0) * 1000
        if ctx.json:
            doc = msg_json(msg, reply=False)
            # one request: one document; --count N: one reply per line, like the other streaming commands
            ctx.out.json_out(doc) if count == 1 else ctx.out.json_line(doc)
            continue
        if a.raw:
            ctx.out.raw(msg.data)
            continue
        ctx.out.log(f"Received on [{msg.subject}] rtt {rtt:.3f}ms")
        for k, v in (msg.headers or {}).items():
            ctx.out.print(f"{k}: {v}")
        ctx.out.print(text_of(msg.data))


async def cmd_reply(ctx: Ctx) -> None:
    a = ctx.args
    check_subject(a.subject, wildcards=True)
    limit_n = optional_count(a.count)
    nc = await ctx.nc()
    done = asyncio.Event()
    n = 0

    async def on_msg(msg) -> None:
        nonlocal n
        if done.is_set():
            return
        n += 1
        if ctx.json:
            ctx.out.json_line(msg_json(msg))
        else:
            ctx.out.print(f"[#{n}] Received on [{msg.subject}]: '{text_of(msg.data)}'")
            sys.stdout.flush()
        if a.echo or a.body.strip() in ("{{Request}}", "{{.Request}}"):
            data = msg.data  # the request's own bytes, whatever they are
        else:
            data = render_template(a.body, n, request=text_of(msg.data)).encode()
        if msg.reply:
            await nc.publish(msg.reply, data, headers=_headers(a.header, n))
        if limit_n is not None and n >= limit_n:
            done.set()

    await nc.subscribe(a.subject, queue=a.queue or "", cb=on_msg)
    await nc.flush()
    ctx.summary = lambda: f"answered {n} requests on {a.subject}"
    listening = f"Listening on [{a.subject}] in group [{a.queue}]"
    if ctx.json:
        sys.stderr.write(listening + "\n")
        sys.stderr.flush()
    else:
        ctx.out.print(listening)
    sys.stdout.flush()
    await done.wait()
    await nc.flush()
