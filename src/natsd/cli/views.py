"""Verbs for looking around, as the nats CLI has them: ``stream view``, ``stream subjects``, ``stream seal``,
``consumer report``, ``events`` and ``server info``/``server ls``.

``stream view`` reads through a short-lived ephemeral pull consumer (ack none, in memory) that it deletes when
done, so it works on every server and leaves nothing behind. ``server info``/``server ls`` ask the system
account's ``$SYS.REQ.SERVER.PING[.VARZ]`` when the user may, and otherwise describe the one server this
connection talks to (from the INFO it sent), saying so.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from datetime import datetime
from typing import Any

from natsd.cli import render
from natsd.cli.common import (
    CliError,
    arrivals,
    comma,
    confirm,
    format_duration,
    format_time,
    human_bytes,
    next_from,
    optional_count,
    optional_seconds,
    parse_int,
    payload_json,
    queue_subscriber,
    show_result,
    strip_type,
    text_of,
)
from natsd.cli.context import Ctx
from natsd.redact import redact


def register_stream(s: Any, common: argparse.ArgumentParser) -> None:
    v = s.add_parser("view", parents=[common], help="show the messages of a stream")
    v.add_argument("stream", nargs="?")
    v.add_argument("--id", dest="start", default=None, help="start at this sequence (default: the first)")
    v.add_argument("--subject", default=None, help="only messages on this subject (wildcards allowed)")
    v.add_argument("--count", default="25", help="how many messages (default 25)")
    v.add_argument("--raw", action="store_true", help="only the bodies, byte for byte")
    v.set_defaults(func=cmd_view)

    sj = s.add_parser("subjects", parents=[common], help="the subjects in a stream and their message counts")
    sj.add_argument("stream", nargs="?")
    sj.add_argument("filter", nargs="?", default=">", help="only subjects matching this (default >)")
    sj.set_defaults(func=cmd_subjects)

    se = s.add_parser("seal", parents=[common], help="make a stream read-only for good (no deletes, no purges)")
    se.add_argument("stream", nargs="?")
    se.set_defaults(func=cmd_seal)


def register_consumer(s: Any, common: argparse.ArgumentParser) -> None:
    r = s.add_parser("report", parents=[common], help="a table of a stream's consumers and their progress")
    r.add_argument("stream", nargs="?")
    r.set_defaults(func=cmd_consumer_report)


def register_server(ss: Any, common: argparse.ArgumentParser) -> None:
    i = ss.add_parser("info", parents=[common], help="the server's identity, limits and counters")
    i.set_defaults(func=cmd_server_info)
    ls = ss.add_parser("ls", aliases=["list"], parents=[common], help="the servers that answer")
    ls.set_defaults(func=cmd_server_ls)


def register_top(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    e = sub.add_parser("events", aliases=["event", "e"], parents=[common], help="JetStream advisories as they happen")
    e.add_argument("--subject", default="$JS.EVENT.ADVISORY.>", help="what to listen to (default all advisories)")
    e.add_argument("--metrics", action="store_true", help="also $JS.EVENT.METRIC.> (ack samples)")
    e.add_argument("--count", default=None, help="stop after this many events")
    e.add_argument("--wait", default=None, help="stop after this long, e.g. 10s")
    e.set_defaults(func=cmd_events)


# ---------------------------------------------------------------------------------------------------------------
# stream view / subjects / seal
# ---------------------------------------------------------------------------------------------------------------


async def cmd_view(ctx: Ctx) -> None:
    from natsd.cli.streams import pick_stream

    a = ctx.args
    stream = await pick_stream(ctx, a.stream)
    count = max(parse_int(a.count, flag="--count"), 1)
    api = await ctx.api()
    cfg: dict[str, Any] = {
        "ack_policy": "none",
        "mem_storage": True,
        "num_replicas": 1,
        "inactive_threshold": 30_000_000_000,
    }  # gone by itself should we die before deleting it
    if a.start:
        cfg.update(deliver_policy="by_start_sequence", opt_start_seq=parse_int(a.start, flag="--id"))
    else:
        cfg["deliver_policy"] = "all"
    if a.subject:
        cfg["filter_subject"] = a.subject
    created = await api.request(f"CONSUMER.CREATE.{stream}", {"stream_name": stream, "config": cfg, "action": "create"})
    name = created["name"]
    nc = await ctx.nc()
    docs: list[dict] = []
    shown = 0
    ctx.summary = lambda: f"showed {shown} messages of {stream}"
    try:
        inbox = nc.new_inbox()
        queue, on_msg = queue_subscriber(count + 16)
        sub = await nc.subscribe(inbox, cb=on_msg)
        try:
            body = json.dumps({"batch": count, "no_wait": True}).encode()
            await nc.publish(f"{api.prefix}.CONSUMER.MSG.NEXT.{stream}.{name}", body, reply=inbox)
            async for msg in arrivals(lambda t: next_from(queue, t), count, None, idle=ctx.timeout):
                if msg.headers and msg.headers.get("Status") and not msg.data:
                    break  # 404 no messages / 408: the end of what there is
                meta = _reply_meta(msg.reply)
                shown += 1
                if ctx.json:
                    docs.append(
                        {
                            "subject": msg.subject,
                            "seq": meta.get("stream_seq"),
                            "time": meta.get("time"),
                            "headers": dict(msg.headers or {}),
                            **payload_json(msg.data),
                        }
                    )
                elif a.raw:
                    ctx.out.raw(msg.data)
                else:
                    ctx.out.print(
                        f"[{meta.get('stream_seq', '?')}] Subject: {msg.subject} Received: {meta.get('time', '')}"
                    )
                    for k, val in (msg.headers or {}).items():
                        ctx.out.print(f"  {k}: {val}")
                    ctx.out.print("")
                    ctx.out.print(text_of(msg.data))
                    ctx.out.print("")
        finally:
            await sub.unsubscribe()
    finally:
        try:
            await api.request(f"CONSUMER.DELETE.{stream}.{name}")
        except CliError:
            pass  # already gone; its inactive threshold cleans up otherwise
    if ctx.json:
        ctx.out.json_out(docs)
    elif not shown and not a.raw:
        ctx.out.print(f"No messages in {stream}" + (f" on {a.subject}" if a.subject else ""))


def _reply_meta(reply: str | None) -> dict[str, Any]:
    """Stream sequence and time from a ``$JS.ACK.<stream>.<consumer>.<dlv>.<sseq>.<cseq>.<ts>.<pending>`` reply
    (also the v2 form with domain and account hash in front)."""
    if not reply or not reply.startswith("$JS.ACK."):
        return {}
    t = reply.split(".")
    if len(t) >= 12:  # $JS.ACK.<domain>.<acchash>.<stream>.<consumer>.<dlv>.<sseq>.<cseq>.<ts>.<pending>[.<token>]
        t = t[:2] + t[4:]
    try:
        ts = int(t[7])
        when = datetime.fromtimestamp(ts / 1e9).strftime("%Y-%m-%d %H:%M:%S")
        return {"stream_seq": int(t[5]), "time": when}
    except (IndexError, ValueError):
        return {}


async def cmd_subjects(ctx: Ctx) -> None:
    from natsd.cli.streams import pick_stream

    a = ctx.args
    stream = await pick_stream(ctx, a.stream)
    api = await ctx.api()
    subjects: dict[str, int] = {}
    offset = 0
    while True:  # STREAM.INFO pages subjects (the server's limit per reply), with total/offset/limit
        resp = await api.request(f"STREAM.INFO.{stream}", {"subjects_filter": a.filter, "offset": offset})
        page = (resp.get("state") or {}).get("subjects") or {}
        subjects.update(page)
        total = int(resp.get("total") or 0)
        if not page or len(subjects) >= total:
            break
        offset = len(subjects)
    if ctx.json:
        ctx.out.json_out(dict(sorted(subjects.items())))
        return
    if not subjects:
        ctx.out.print(f"No subjects found matching {a.filter}")
        return
    ctx.out.print(
        render.table(
            f"{comma(len(subjects))} Subjects in stream {stream}",
            ["Subject", "Messages"],
            [[k, comma(v)] for k, v in sorted(subjects.items())],
        )
    )


async def cmd_seal(ctx: Ctx) -> None:
    from natsd.cli.streams import pick_stream

    a = ctx.args
    stream = await pick_stream(ctx, a.stream)
    confirm(f"Really seal Stream {stream}? Sealed streams cannot be unsealed or have messages removed", a.force)
    api = await ctx.api()
    cfg = (await api.request(f"STREAM.INFO.{stream}"))["config"]
    cfg["sealed"] = True
    info = await api.request(f"STREAM.UPDATE.{stream}", cfg)
    show_result(ctx, info, f"Stream {stream} was sealed")


# ---------------------------------------------------------------------------------------------------------------
# consumer report
# ---------------------------------------------------------------------------------------------------------------


async def cmd_consumer_report(ctx: Ctx) -> None:
    from natsd.cli.streams import pick_stream

    stream = await pick_stream(ctx, ctx.args.stream)
    api = await ctx.api()
    infos = sorted(await api.paged(f"CONSUMER.LIST.{stream}", "consumers"), key=lambda i: i["name"])
    if ctx.json:
        ctx.out.json_out([strip_type(i) for i in infos])
        return
    if not infos:
        ctx.out.print(f"No Consumers defined for Stream {stream}")
        return
    rows = []
    for i in infos:
        c = i.get("config") or {}
        d = i.get("delivered") or {}
        last = d.get("last_active") or ""
        rows.append(
            [
                i["name"],
                "Push" if c.get("deliver_subject") else "Pull",
                c.get("ack_policy", ""),
                format_duration(c.get("ack_wait", 0)) if c.get("ack_policy", "none") != "none" else "",
                comma(i.get("num_pending")),
                comma(i.get("num_ack_pending")),
                comma(i.get("num_redelivered")),
                comma(i.get("num_waiting")),
                comma(d.get("stream_seq")),
                format_time(last) if last else "never",
            ]
        )
    ctx.out.print(
        render.table(
            f"Consumer report for {stream} with {comma(len(infos))} consumers",
            [
                "Consumer",
                "Mode",
                "Ack Policy",
                "Ack Wait",
                "Unprocessed",
                "Ack Pending",
                "Redelivered",
                "Waiting",
                "Last Stream Seq",
                "Last Delivery",
            ],
            rows,
        )
    )


# ---------------------------------------------------------------------------------------------------------------
# events
# ---------------------------------------------------------------------------------------------------------------


def event_line(subject: str, data: dict) -> str:
    """One line per advisory: time, kind, then what it is about."""
    kind = (
        str(data.get("type", subject))
        .replace("io.nats.jetstream.advisory.v1.", "")
        .replace("io.nats.jetstream.metric.v1.", "metric.")
    )
    ts = str(data.get("timestamp", ""))
    hms = ts[11:19] if len(ts) >= 19 else datetime.now().strftime("%H:%M:%S")
    about = [
        f"{k}={data[k]}"
        for k in ("stream", "consumer", "action", "stream_seq", "deliveries", "domain")
        if data.get(k) not in (None, "")
    ]
    if isinstance(data.get("client"), dict) and data["client"].get("user"):
        about.append(f"user={data['client']['user']}")
    if isinstance(data.get("response"), dict) and data["response"].get("error"):
        about.append(f"error={data['response']['error'].get('description', '')}")
    return f"[{hms}] {kind} " + " ".join(about)


async def cmd_events(ctx: Ctx) -> None:
    a = ctx.args
    limit_n, wait_s = optional_count(a.count), optional_seconds(a.wait)
    nc = await ctx.nc()
    queue, on_msg = queue_subscriber(10_000)
    subjects = [a.subject] + (["$JS.EVENT.METRIC.>"] if a.metrics else [])
    for subj in subjects:
        await nc.subscribe(subj, cb=on_msg)
    await nc.flush()
    sys.stderr.write("Listening for events on " + ", ".join(subjects) + "\n")
    sys.stderr.flush()
    n = 0
    ctx.summary = lambda: f"{n} events"
    async for msg in arrivals(lambda t: next_from(queue, t), limit_n, wait_s):
        n += 1
        try:
            data = json.loads(msg.data)
        except ValueError:
            data = {"type": msg.subject, "data": base64.b64encode(msg.data).decode()}
        if ctx.json:
            ctx.out.json_line(data if isinstance(data, dict) else {"subject": msg.subject, "data": data})
        else:
            ctx.out.print(event_line(msg.subject, data if isinstance(data, dict) else {}))
            sys.stdout.flush()


# ---------------------------------------------------------------------------------------------------------------
# server info / ls
# ---------------------------------------------------------------------------------------------------------------


async def _sys_request(ctx: Ctx, subject: str, wait: float = 0.5) -> list[dict]:
    """Every answer to a ``$SYS.REQ.SERVER.PING...`` request within ``wait`` seconds (none without system
    account access)."""
    nc = await ctx.nc()
    inbox = nc.new_inbox()
    queue, on_msg = queue_subscriber(1024)
    sub = await nc.subscribe(inbox, cb=on_msg)
    try:
        await nc.publish(subject, b"", reply=inbox)
        out = []
        async for msg in arrivals(lambda t: next_from(queue, t), None, wait):
            try:
                d = json.loads(msg.data)
            except ValueError:
                continue
            if isinstance(d, dict) and not (msg.headers and msg.headers.get("Status")):
                out.append(d)
        return out
    finally:
        await sub.unsubscribe()


def _connected_info(nc: Any) -> dict:
    info = dict(getattr(nc, "_server_info", {}) or {})  # nats-py keeps the INFO it got but has no accessor
    url = redact(nc.connected_url.geturl()) if nc.connected_url else ""
    return {
        "server_id": info.get("server_id", ""),
        "server_name": info.get("server_name", ""),
        "version": info.get("version", ""),
        "host": info.get("host", ""),
        "port": info.get("port", 0),
        "max_payload": info.get("max_payload", 0),
        "proto": info.get("proto", 0),
        "jetstream": bool(info.get("jetstream")),
        "headers": bool(info.get("headers")),
        "auth_required": bool(info.get("auth_required")),
        "tls_required": bool(info.get("tls_required")),
        "cluster": info.get("cluster", ""),
        "domain": info.get("domain", ""),
        "connected_url": url,
        "client_id": info.get("client_id"),
        "client_ip": info.get("client_ip", ""),
        "source": "INFO",
    }


async def cmd_server_info(ctx: Ctx) -> None:
    nc = await ctx.nc()
    answers = await _sys_request(ctx, "$SYS.REQ.SERVER.PING.VARZ")
    if answers:
        data = answers[0].get("data") or answers[0]
        if ctx.json:
            ctx.out.json_out(data)
            return
        rows = [
            ("Name", data.get("server_name", "")),
            ("ID", data.get("server_id", "")),
            ("Version", data.get("version", "")),
            ("Uptime", data.get("uptime", "")),
            ("Connections", comma(data.get("connections"))),
            ("Subscriptions", comma(data.get("subscriptions"))),
            ("Messages In", comma(data.get("in_msgs"))),
            ("Messages Out", comma(data.get("out_msgs"))),
            ("Bytes In", human_bytes(data.get("in_bytes"))),
            ("Bytes Out", human_bytes(data.get("out_bytes"))),
            ("Memory", human_bytes(data.get("mem"))),
            ("Max Payload", human_bytes(data.get("max_payload"))),
        ]
        ctx.out.print(
            render.sections(f"Server information for {data.get('server_name', '')}", [("Process Details", rows)])
        )
        return
    info = _connected_info(nc)
    if ctx.json:
        ctx.out.json_out(info)
        return
    rows = [
        ("Name", info["server_name"]),
        ("ID", info["server_id"]),
        ("Version", info["version"]),
        ("Connected URL", info["connected_url"]),
        ("Max Payload", human_bytes(info["max_payload"])),
        ("JetStream", str(info["jetstream"]).lower()),
        ("Headers", str(info["headers"]).lower()),
        ("Auth Required", str(info["auth_required"]).lower()),
        ("TLS Required", str(info["tls_required"]).lower()),
    ]
    if info["domain"]:
        rows.append(("JetStream Domain", info["domain"]))
    ctx.out.print(render.sections(f"Server information for {info['server_name']}", [("Connection", rows)]))
    ctx.out.print("(from the server's INFO: counters and limits need system account access, $SYS.REQ.SERVER.PING.VARZ)")


async def cmd_server_ls(ctx: Ctx) -> None:
    nc = await ctx.nc()
    answers = await _sys_request(ctx, "$SYS.REQ.SERVER.PING")
    if answers:
        rows_j = [
            {
                "name": (r.get("server") or {}).get("name", ""),
                "id": (r.get("server") or {}).get("id", ""),
                "version": (r.get("server") or {}).get("ver", ""),
                "cluster": (r.get("server") or {}).get("cluster", ""),
                "connections": (r.get("statsz") or {}).get("connections", 0),
                "subscriptions": (r.get("statsz") or {}).get("subscriptions", 0),
            }
            for r in answers
        ]
    else:
        info = _connected_info(nc)
        rows_j = [
            {
                "name": info["server_name"],
                "id": info["server_id"],
                "version": info["version"],
                "cluster": info["cluster"],
                "connections": None,
                "subscriptions": None,
            }
        ]
    rows_j.sort(key=lambda r: r["name"])
    if ctx.json:
        ctx.out.json_out(rows_j)
        return
    ctx.out.print(
        render.table(
            f"Server Overview ({len(rows_j)} server{'s' if len(rows_j) != 1 else ''})",
            ["Name", "ID", "Version", "Cluster", "Conns", "Subs"],
            [
                [
                    r["name"],
                    r["id"],
                    r["version"],
                    r["cluster"] or "",
                    "" if r["connections"] is None else comma(r["connections"]),
                    "" if r["subscriptions"] is None else comma(r["subscriptions"]),
                ]
                for r in rows_j
            ],
        )
    )
    if not answers:
        ctx.out.print(
            "(only the server this connection talks to: listing every server needs system account "
            "access, $SYS.REQ.SERVER.PING)"
        )
