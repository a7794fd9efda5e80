"""``natsctl server ping``, ``server report jetstream`` and ``server report connections``, as the nats CLI has them.

All three ask every server at once through the system account (so they need a user of it, on natsd as on
nats-server): ``ping`` publishes ``$SYS.REQ.SERVER.PING`` and prints each answer's server with the time it took
(the first answer's ``statsz.active_servers`` says how many to wait for), then the nats CLI's ping statistics;
``report jetstream`` asks ``$SYS.REQ.SERVER.PING.JSZ`` (with ``--account``, that account's streams and
consumers) and prints a row per server with totals; ``report connections`` asks ``$SYS.REQ.SERVER.PING.CONNZ``
and prints the top connections of every server and the connections per server. ``-j`` prints the rows as JSON
(``report connections -j``: each connection of ``/connz`` with the ``server`` that answered, as the nats CLI).

Answers are collected until ``limit`` servers answered (the positional argument, as there), or until no more came
for a short while after the first (a single server is not waited on for the whole timeout).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from natsd import gotime
from natsd.cli import render
from natsd.cli.common import CliError, arrivals, comma, format_duration, human_bytes, next_from, queue_subscriber
from natsd.cli.context import Ctx

#: After the first answer, how long to wait for the next before deciding every server has answered.
_SETTLE_S = 0.3

NO_SYSTEM = "ensure the account used has system privileges and appropriate permissions"


def register(server_cmds: Any, report_cmds: Any, common: argparse.ArgumentParser) -> None:
    """``ping`` under ``server``; ``jetstream`` and ``connections`` under ``server report``."""
    p = server_cmds.add_parser("ping", parents=[common], help="ping every server (system account)")
    p.add_argument("expect", nargs="?", type=int, default=0, help="how many servers to expect")
    p.add_argument("--id", dest="show_id", action="store_true", help="include the server ID in the output")
    p.set_defaults(func=cmd_ping)

    j = report_cmds.add_parser(
        "jetstream", aliases=["jsz", "js"], parents=[common], help="report on JetStream activity"
    )
    j.add_argument("limit", nargs="?", type=int, default=0, help="stop after this many servers answered")
    j.add_argument("--account", default=None, help="the report for one account")
    j.add_argument(
        "--sort",
        default="cluster",
        choices=[
            "name",
            "cluster",
            "streams",
            "consumers",
            "msgs",
            "mbytes",
            "bytes",
            "mem",
            "file",
            "store",
            "api",
            "err",
        ],
        help="order of the rows (default cluster)",
    )
    j.add_argument("-R", "--reverse", action="store_true", help="reverse the order")
    j.set_defaults(func=cmd_report_jetstream)

    c = report_cmds.add_parser(
        "connections", aliases=["conn", "connz", "conns"], parents=[common], help="report on connections"
    )
    c.add_argument("limit", nargs="?", type=int, default=0, help="stop after this many servers answered")
    c.add_argument("--account", default=None, help="only the connections of this account")
    c.add_argument(
        "--sort",
        default="subs",
        choices=["in-bytes", "out-bytes", "in-msgs", "out-msgs", "uptime", "cid", "subs"],
        help="order of the rows (default subs)",
    )
    c.add_argument("--top", type=int, default=1000, help="show this many connections (default 1000)")
    c.add_argument("--subject", default=None, help="only connections with interest in this subject")
    # (not dest="user": that is the shared --user connection flag, which it would shadow)
    c.add_argument("--username", dest="filter_user", default=None, help="only connections of this user")
    c.add_argument("--state", default="open", choices=["open", "closed", "all"], help="connection state (default open)")
    c.add_argument("-R", "--reverse", action="store_true", help="reverse the order")
    c.set_defaults(func=cmd_report_connections)

    a = report_cmds.add_parser("accounts", aliases=["acct"], parents=[common], help="report on account activity")
    a.add_argument("account", nargs="?", default=None, help="account to produce a report for (its connections)")
    a.add_argument("limit", nargs="?", type=int, default=0, help="stop after this many servers answered")
    a.add_argument(
        "--sort",
        default="subs",
        choices=["in-bytes", "out-bytes", "in-msgs", "out-msgs", "conns", "subs"],
        help="order of the rows (default subs)",
    )
    a.add_argument("--top", type=int, default=1000, help="show this many accounts (default 1000)")
    a.add_argument("-R", "--reverse", action="store_true", help="reverse the order")
    a.set_defaults(func=cmd_report_accounts)


# ---------------------------------------------------------------------------------------------------------------
# asking every server
# ---------------------------------------------------------------------------------------------------------------


async def sys_answers(ctx: Ctx, subject: str, body: dict | None = None, limit: int = 0) -> list[tuple[float, Any]]:
    """``(seconds after the request, message)`` for every answer to a system request: until ``limit`` answers,
    else until none came for a short while after the first (the first may take the whole timeout).
    A no-responders status (nobody serves this user's system requests) raises CliError."""
    nc = await ctx.nc()
    inbox = nc.new_inbox()
    queue, on_msg = queue_subscriber(4096)
    sub = await nc.subscribe(inbox, cb=on_msg)
    out: list[tuple[float, Any]] = []
    try:
        t0 = time.perf_counter()
        await nc.publish(subject, json.dumps(body).encode() if body else b"", reply=inbox)
        wait = ctx.timeout
        while not limit or len(out) < limit:
            got = [m async for m in arrivals(lambda t: next_from(queue, t), 1, None, idle=wait)]
            if not got:
                break
            msg = got[0]
            if msg.headers and msg.headers.get("Status") and not msg.data:
                raise CliError(f"{msg.headers.get('Status')} status from {subject}, {NO_SYSTEM}")
            out.append((time.perf_counter() - t0, msg))
            wait = _SETTLE_S
    finally:
        await sub.unsubscribe()
    return out


async def sys_documents(ctx: Ctx, subject: str, body: dict | None = None, limit: int = 0) -> list[dict]:
    """The JSON answers (``{"server", "data"}``); an answer carrying an ``error`` raises CliError."""
    docs = []
    for _, msg in await sys_answers(ctx, subject, body, limit):
        try:
            d = json.loads(msg.data)
        except ValueError:
            raise CliError(f"could not decode a response to {subject}") from None
        if not isinstance(d, dict):
            continue
        err = d.get("error")
        if isinstance(err, dict):
            raise CliError(f"invalid response received: {err.get('description') or err}")
        docs.append(d)
    if not docs:
        raise CliError(f"no results received, {NO_SYSTEM}")
    return docs


# ---------------------------------------------------------------------------------------------------------------
# server ping
# ---------------------------------------------------------------------------------------------------------------


async def cmd_ping(ctx: Ctx) -> int | None:
    a = ctx.args
    nc = await ctx.nc()
    inbox = nc.new_inbox()
    queue, on_msg = queue_subscriber(4096)
    sub = await nc.subscribe(inbox, cb=on_msg)
    expect = a.expect
    times: list[float] = []
    rows: list[dict] = []
    ctx.summary = lambda: _ping_stats(times)
    try:
        t0 = time.perf_counter()
        await nc.publish("$SYS.REQ.SERVER.PING", b"", reply=inbox)
        async for msg in arrivals(lambda t: next_from(queue, t), None, ctx.timeout):
            since = time.perf_counter() - t0
            if msg.headers and msg.headers.get("Status") and not msg.data:
                raise CliError(
                    f"{msg.headers.get('Status')} status from $SYS.REQ.SERVER.PING, ensure a system "
                    "account is used with appropriate permissions"
                )
            try:
                d = json.loads(msg.data)
            except ValueError:
                raise CliError("could not decode a response to $SYS.REQ.SERVER.PING") from None
            srv, stats = d.get("server") or {}, d.get("statsz") or {}
            if not expect and not times and stats.get("active_servers"):
                expect = int(stats["active_servers"])
            times.append(since * 1000)
            rtt = format_duration(int(since * 1e9))
            rows.append(
                {"name": srv.get("name", ""), "id": srv.get("id", ""), "rtt": rtt, "rtt_ms": round(since * 1000, 3)}
            )
            if not ctx.json:
                ctx.out.print((f"{srv.get('id', '')} " if a.show_id else "") + f"{srv.get('name', ''):<60} rtt={rtt}")
            if expect and len(times) >= expect:
                break
    finally:
        await sub.unsubscribe()
    missing = expect - len(times) if expect and expect > len(times) else 0
    if ctx.json:
        ctx.out.json_out({"servers": rows, "expected": expect, "missing": missing})
        return 1 if missing or not rows else None
    ctx.out.print("")
    ctx.out.print("---- ping statistics ----")
    ctx.out.print(_ping_stats(times))
    if missing:
        ctx.out.print(f"\nMissing {missing} server(s)")
    return 1 if missing or not rows else None


def _ping_stats(times: list[float]) -> str:
    if not times:
        return "no responses received"
    return f"{len(times)} replies max: {max(times):.2f} min: {min(times):.2f} avg: {sum(times) / len(times):.2f}"


# ---------------------------------------------------------------------------------------------------------------
# server report jetstream
# ---------------------------------------------------------------------------------------------------------------


def _jsz_row(doc: dict, account: str | None) -> dict:
    srv, data = doc.get("server") or {}, doc.get("data") or {}
    row = {
        "server": srv.get("name", ""),
        "cluster": srv.get("cluster", "") or "",
        "domain": (data.get("config") or {}).get("domain", "") or "",
        "streams": data.get("streams", 0),
        "consumers": data.get("consumers", 0),
        "messages": data.get("messages", 0),
        "bytes": data.get("bytes", 0),
        "memory": data.get("memory", 0),
        "file": data.get("storage", 0),
        "api_requests": (data.get("api") or {}).get("total", 0),
        "api_errors": (data.get("api") or {}).get("errors", 0),
        "pending": (data.get("meta_cluster") or {}).get("pending", 0),
    }
    details = data.get("account_details") or []
    if account and len(details) == 1:  # the account's own numbers instead of the server's
        acc = details[0]
        streams = acc.get("stream_detail") or []
        row.update(
            streams=len(streams),
            consumers=sum((s.get("state") or {}).get("consumer_count", 0) for s in streams),
            messages=sum((s.get("state") or {}).get("messages", 0) for s in streams),
            bytes=acc.get("memory", 0) + acc.get("storage", 0),
            memory=acc.get("memory", 0),
            file=acc.get("storage", 0),
            api_requests=(acc.get("api") or {}).get("total", 0),
            api_errors=(acc.get("api") or {}).get("errors", 0),
        )
    return row


_JSZ_SORT = {
    "name": "server",
    "streams": "streams",
    "consumers": "consumers",
    "msgs": "messages",
    "mbytes": "bytes",
    "bytes": "bytes",
    "mem": "memory",
    "file": "file",
    "store": "file",
    "api": "api_requests",
    "err": "api_errors",
}


async def cmd_report_jetstream(ctx: Ctx) -> None:
    a = ctx.args
    body: dict[str, Any] = {}
    if a.account:
        body = {"account": a.account, "streams": True, "consumer": True, "limit": 10000}
    rows = [_jsz_row(d, a.account) for d in await sys_documents(ctx, "$SYS.REQ.SERVER.PING.JSZ", body, a.limit)]
    key = _JSZ_SORT.get(a.sort)
    rows.sort(
        key=(lambda r: (r[key], r["server"])) if key else (lambda r: (r["cluster"], r["server"])), reverse=a.reverse
    )
    if ctx.json:
        ctx.out.json_out(rows)
        return
    domain = any(r["domain"] for r in rows)
    headers = (
        ["Server", "Cluster"]
        + (["Domain"] if domain else [])
        + ["Streams", "Consumers", "Messages", "Bytes", "Memory", "File", "API Req", "API Err", "Pending"]
    )
    table = [
        [r["server"], r["cluster"]]
        + ([r["domain"]] if domain else [])
        + [
            comma(r["streams"]),
            comma(r["consumers"]),
            comma(r["messages"]),
            human_bytes(r["bytes"]),
            human_bytes(r["memory"]),
            human_bytes(r["file"]),
            comma(r["api_requests"]),
            comma(r["api_errors"]),
            r["pending"],
        ]
        for r in rows
    ]

    def total(k: str) -> int:
        return sum(int(r[k] or 0) for r in rows)

    footer = (
        ["", ""]
        + ([""] if domain else [])
        + [
            comma(total("streams")),
            comma(total("consumers")),
            comma(total("messages")),
            human_bytes(total("bytes")),
            human_bytes(total("memory")),
            human_bytes(total("file")),
            comma(total("api_requests")),
            comma(total("api_errors")),
            total("pending"),
        ]
    )
    title = f"JetStream Summary for Account {a.account}" if a.account else "JetStream Summary"
    ctx.out.print(render.table(title, headers, table, footer=footer))


# ---------------------------------------------------------------------------------------------------------------
# server report connections
# ---------------------------------------------------------------------------------------------------------------


_CONN_SORT = {
    "in-bytes": lambda c: c.get("in_bytes", 0),
    "out-bytes": lambda c: c.get("out_bytes", 0),
    "in-msgs": lambda c: c.get("in_msgs", 0),
    "out-msgs": lambda c: c.get("out_msgs", 0),
    "cid": lambda c: c.get("cid", 0),
    "subs": lambda c: len(c.get("subscriptions_list") or []),
    "uptime": lambda c: -_start_ns(c),
}  # the most recent start first, as the nats CLI orders it


def _start_ns(c: dict) -> int:
    try:
        return gotime.parse_rfc3339(c.get("start", ""))
    except ValueError:
        return 0


async def _connz(ctx: Ctx, account: str | None) -> list[dict]:
    """Every connection of every server (``$SYS.REQ.SERVER.PING.CONNZ``), each with the ``server`` that answered.
    ``auth`` (ConnzOptions.Username's JSON name) makes the servers fill ``account`` and ``authorized_user``."""
    a = ctx.args
    # (`report accounts` has no --state/--subject/--username)
    state, subject, user = getattr(a, "state", "open"), getattr(a, "subject", None), getattr(a, "filter_user", None)
    body: dict[str, Any] = {"subscriptions": True, "auth": True, "limit": 1024, "offset": 0}
    if state != "open":  # Go's ConnState: 0 open, 1 closed, 2 all
        body["state"] = {"closed": 1, "all": 2}[state]
    if account:
        body["acc"] = account
    if subject:
        body["filter_subject"] = subject
    if user:
        body["user"] = user
    docs = await sys_documents(ctx, "$SYS.REQ.SERVER.PING.CONNZ", body, a.limit)
    conns = [
        {**c, "server": d.get("server") or {}} for d in docs for c in ((d.get("data") or {}).get("connections") or [])
    ]
    if user:  # older servers ignore the filter: apply it here too
        conns = [c for c in conns if c.get("authorized_user", "") == user]
    return conns


async def cmd_report_connections(ctx: Ctx) -> None:
    a = ctx.args
    conns = await _connz(ctx, a.account)
    conns.sort(key=_CONN_SORT[a.sort], reverse=a.reverse)
    if ctx.json:
        ctx.out.json_out(conns)
        return
    _render_connections(ctx, conns, a.sort, a.top)


def _render_connections(ctx: Ctx, conns: list[dict], sort: str, top: int) -> None:
    """The nats CLI's connections table (sorted already) and the connections per server."""
    shown = min(top, len(conns)) if top > 0 else len(conns)
    rows = []
    for c in conns[:shown]:
        name = c.get("name", "") or c.get("mqtt_client", "") or ""
        acc = c.get("account", "") or ""
        kind = c.get("kind", "Client") or "Client"
        rows.append(
            [
                str(c.get("cid", "")) if kind == "Client" else f"{kind[0]}{c.get('cid', '')}",
                name[:40] + " .." if len(name) > 40 else name,
                c["server"].get("name", ""),
                c["server"].get("cluster", "") or "",
                f"{c.get('ip', '')}:{c.get('port', 0)}",
                acc[:12] + " .." if len(acc) > 46 else acc,
                c.get("uptime", ""),
                comma(c.get("in_msgs")),
                comma(c.get("out_msgs")),
                human_bytes(c.get("in_bytes")),
                human_bytes(c.get("out_bytes")),
                comma(len(c.get("subscriptions_list") or [])),
            ]
        )
    footer = None
    if len(conns) > 1:
        footer = [
            "",
            f"Totals for {comma(len(conns))} connections",
            "",
            "",
            "",
            "",
            "",
            comma(sum(c.get("in_msgs", 0) for c in conns)),
            comma(sum(c.get("out_msgs", 0) for c in conns)),
            human_bytes(sum(c.get("in_bytes", 0) for c in conns)),
            human_bytes(sum(c.get("out_bytes", 0) for c in conns)),
            comma(sum(c.get("subscriptions", 0) for c in conns)),
        ]
    ctx.out.print(
        render.table(
            f"Top {shown} Connections out of {comma(len(conns))} by {sort}",
            [
                "CID",
                "Name",
                "Server",
                "Cluster",
                "IP",
                "Account",
                "Uptime",
                "In Msgs",
                "Out Msgs",
                "In Bytes",
                "Out Bytes",
                "Subs",
            ],
            rows,
            footer=footer,
        )
    )
    per: dict[str, list] = {}
    for c in conns:
        n = c["server"].get("name", "")
        per.setdefault(n, [n, c["server"].get("cluster", "") or "", 0])[2] += 1
    if per:
        ctx.out.print("")
        ctx.out.print(
            render.table(
                "Connections per server", ["Server", "Cluster", "Connections"], sorted(per.values(), key=lambda r: r[2])
            )
        )


# ---------------------------------------------------------------------------------------------------------------
# server report accounts
# ---------------------------------------------------------------------------------------------------------------


_ACC_SORT = {
    "in-bytes": "in_bytes",
    "out-bytes": "out_bytes",
    "in-msgs": "in_msgs",
    "out-msgs": "out_msgs",
    "conns": "connections",
    "subs": "subscriptions",
}


def account_rows(conns: list[dict]) -> dict[str, dict]:
    """Connections grouped by account, with the nats CLI's JSON fields (``account``, ``connections``,
    ``connection_info``, ``in_msgs``, ``out_msgs``, ``in_bytes``, ``out_bytes``, ``subscriptions``, ``server``)."""
    out: dict[str, dict] = {}
    for c in conns:
        name = c.get("account", "") or ""
        acc = out.setdefault(
            name,
            {
                "account": name,
                "connections": 0,
                "connection_info": [],
                "in_msgs": 0,
                "out_msgs": 0,
                "in_bytes": 0,
                "out_bytes": 0,
                "subscriptions": 0,
                "server": [],
            },
        )
        acc["connection_info"].append(c)
        acc["connections"] += 1
        for k in ("in_msgs", "out_msgs", "in_bytes", "out_bytes"):
            acc[k] += int(c.get(k, 0) or 0)
        acc["subscriptions"] += len(c.get("subscriptions_list") or [])
        srv = c.get("server") or {}
        if not any(s.get("id") == srv.get("id") for s in acc["server"]):
            acc["server"].append(srv)
    return out


async def cmd_report_accounts(ctx: Ctx) -> None:
    """``server report accounts``: connections, messages, bytes and subscriptions per account, or with an account
    named, that account's connections (the nats CLI's ``server report accounts [account]``)."""
    a = ctx.args
    accounts = account_rows(await _connz(ctx, None))
    if a.account:
        acc = accounts.get(a.account)
        if acc is None:
            raise CliError(f"did not receive any results for account {a.account}")
        if ctx.json:
            ctx.out.json_out(acc)
            return
        conns = sorted(acc["connection_info"], key=_CONN_SORT.get(a.sort, _CONN_SORT["subs"]), reverse=a.reverse)
        _render_connections(ctx, conns, a.sort, a.top)
        return
    key = _ACC_SORT[a.sort]
    # As the nats CLI: ascending (-R: descending), and --top keeps the largest (-R: the first rows)
    rows = sorted(accounts.values(), key=lambda r: (r[key], r["account"]), reverse=a.reverse)
    if 0 < a.top < len(rows):
        rows = rows[: a.top] if a.reverse else rows[-a.top :]
    if ctx.json:
        ctx.out.json_out(rows)
        return
    ctx.out.print(
        render.table(
            f"{len(rows)} Accounts Overview",
            ["Account", "Connections", "In Msgs", "Out Msgs", "In Bytes", "Out Bytes", "Subs"],
            [
                [
                    r["account"],
                    comma(r["connections"]),
                    comma(r["in_msgs"]),
                    comma(r["out_msgs"]),
                    human_bytes(r["in_bytes"]),
                    human_bytes(r["out_bytes"]),
                    comma(r["subscriptions"]),
                ]
                for r in rows
            ],
        )
    )
