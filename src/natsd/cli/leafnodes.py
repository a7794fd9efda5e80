"""``natsctl server report leafnodes`` and ``natsctl server request leafnodes``: the leaf links of every server
that answers, where the nats CLI shows them (``nats server report leafnodes`` / ``nats server request leafnodes``).

Both ask ``$SYS.REQ.SERVER.PING.LEAFZ`` (``$SYS.REQ.ACCOUNT.<account>.LEAFZ`` with ``--account`` on natsd and
nats-server alike), so they need a user of the system account; each answer is ``{"server": {...}, "data": <the
/leafz document>}``. ``report`` prints one row per link (the nats CLI's columns: server, remote name, account,
address, RTT, messages and bytes each way, subscriptions, compression, whether this side is the spoke); ``request``
prints the answers as they are.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from natsd.cli import render
from natsd.cli.common import CliError, arrivals, comma, human_bytes, next_from, queue_subscriber
from natsd.cli.context import Ctx

_SORTS = {
    "server": lambda r: r[0].get("name", ""),
    "name": lambda r: r[1].get("name", ""),
    "account": lambda r: r[1].get("account", ""),
    "subs": lambda r: r[1].get("subscriptions", 0),
    "in-bytes": lambda r: r[1].get("in_bytes", 0),
    "out-bytes": lambda r: r[1].get("out_bytes", 0),
    "in-msgs": lambda r: r[1].get("in_msgs", 0),
    "out-msgs": lambda r: r[1].get("out_msgs", 0),
}


def register(report: Any, request: Any, common: argparse.ArgumentParser) -> None:
    """Add ``leafnodes`` (aliases ``leaf``, ``leafz``) under ``server report`` and ``server request``."""
    r = report.add_parser("leafnodes", aliases=["leaf", "leafz"], parents=[common], help="report on leafnode links")
    r.add_argument("--account", default=None, help="only the links bound to this account")
    r.add_argument("--sort", choices=sorted(_SORTS), default="server", help="order of the rows (default server)")
    r.add_argument("--reverse", action="store_true", help="reverse the order")
    _wait_flag(r)
    r.set_defaults(func=cmd_report_leafnodes)
    q = request.add_parser(
        "leafnodes", aliases=["leaf", "leafz"], parents=[common], help="the servers' /leafz documents as JSON"
    )
    q.add_argument("--subscriptions", action="store_true", help="include each link's subscriptions")
    q.add_argument("--account", default=None, help="only the links bound to this account")
    _wait_flag(q)
    q.set_defaults(func=cmd_request_leafnodes)


def _wait_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "limit",
        nargs="?",
        type=int,
        default=0,
        help="stop after this many servers answered (default: all that answer within the timeout)",
    )


async def leafz_answers(
    ctx: Ctx, *, account: str | None = None, subscriptions: bool = False, limit: int = 0
) -> list[dict]:
    """Every ``$SYS.REQ.SERVER.PING.LEAFZ`` answer within the timeout (or the first ``limit``)."""
    nc = await ctx.nc()
    inbox = nc.new_inbox()
    queue, on_msg = queue_subscriber(1024)
    sub = await nc.subscribe(inbox, cb=on_msg)
    body: dict = {}
    if account:
        body["account"] = account
    if subscriptions:
        body["subscriptions"] = True
    out: list[dict] = []
    try:
        await nc.publish("$SYS.REQ.SERVER.PING.LEAFZ", json.dumps(body).encode() if body else b"", reply=inbox)
        # The first answer may take the whole timeout (none comes without system account access); after it,
        # the others of a cluster follow within a short while.
        async for msg in arrivals(lambda t: next_from(queue, t), limit or None, min(ctx.timeout, 2.0)):
            if msg.headers and msg.headers.get("Status") == "503":
                break  # no responders: nobody serves the system account's requests to this user
            try:
                d = json.loads(msg.data)
            except ValueError:
                continue
            if isinstance(d, dict):
                out.append(d)
    finally:
        await sub.unsubscribe()
    if not out:
        raise CliError("no server answered $SYS.REQ.SERVER.PING.LEAFZ: this needs a user of the system account")
    for d in out:
        err = d.get("error")
        if isinstance(err, dict):
            raise CliError(str(err.get("description") or err))
    return out


def _short_account(name: str) -> str:
    # As the nats CLI shortens account public keys (56 characters) in its table.
    return f"{name[:10]}...{name[-10:]}" if len(name) > 23 else name


async def cmd_report_leafnodes(ctx: Ctx) -> None:
    a = ctx.args
    answers = await leafz_answers(ctx, account=a.account, limit=a.limit)
    rows = [((d.get("server") or {}), leaf) for d in answers for leaf in ((d.get("data") or {}).get("leafs") or [])]
    rows.sort(key=_SORTS[a.sort], reverse=a.reverse)
    if ctx.json:
        ctx.out.json_out([{"server": s.get("name", ""), **leaf} for s, leaf in rows])
        return
    table = [
        [
            s.get("name", ""),
            leaf.get("name", ""),
            _short_account(leaf.get("account", "")),
            f"{leaf.get('ip', '')}:{leaf.get('port', 0)}",
            leaf.get("rtt", ""),
            comma(leaf.get("in_msgs")),
            comma(leaf.get("out_msgs")),
            human_bytes(leaf.get("in_bytes")),
            human_bytes(leaf.get("out_bytes")),
            comma(leaf.get("subscriptions")),
            leaf.get("compression", "") or "",
            "true" if leaf.get("is_spoke") else "false",
        ]
        for s, leaf in rows
    ]
    ctx.out.print(
        render.table(
            "Leafnode Report",
            [
                "Server",
                "Name",
                "Account",
                "Address",
                "RTT",
                "Msgs In",
                "Msgs Out",
                "Bytes In",
                "Bytes Out",
                "Subs",
                "Compressed",
                "Spoke",
            ],
            table,
        )
    )


async def cmd_request_leafnodes(ctx: Ctx) -> None:
    a = ctx.args
    answers = await leafz_answers(ctx, account=a.account, subscriptions=a.subscriptions, limit=a.limit)
    ctx.out.json_out(answers if len(answers) != 1 else answers[0])
