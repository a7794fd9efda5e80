"""``natsctl account info``, ``natsctl server check [connection|jetstream]``, and the ``server report``/
``server request`` groups (``leafnodes``: :mod:`natsd.cli.leafnodes`)."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from natsd.cli import render
from natsd.cli.common import CliError, strip_type
from natsd.cli.context import Ctx
from natsd.redact import redact

if TYPE_CHECKING:
    import nats


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("account", aliases=["acc"], help="account information")
    s = p.add_subparsers(dest="account_cmd", metavar="VERB", parser_class=type(p))
    s.required = True
    i = s.add_parser("info", parents=[common], help="JetStream usage and limits of this account")
    i.set_defaults(func=cmd_account_info)

    srv = sub.add_parser("server", aliases=["srv"], help="server checks")
    ss = srv.add_subparsers(dest="server_cmd", metavar="VERB", parser_class=type(p))
    ss.required = True
    c = ss.add_parser("check", parents=[common], help="health checks (exit 0 when OK, 1 when critical)")
    c.add_argument("check", nargs="?", choices=["connection", "jetstream", "all"], default="all")
    c.set_defaults(func=cmd_server_check)
    from natsd.cli import views

    views.register_server(ss, common)  # info, ls
    from natsd.cli import leafnodes

    rep = ss.add_parser("report", help="reports over every server that answers (system account)")
    rs = rep.add_subparsers(dest="report_cmd", metavar="REPORT", parser_class=type(p))
    rs.required = True
    req = ss.add_parser("request", aliases=["req"], help="raw system requests to every server (system account)")
    rq = req.add_subparsers(dest="request_cmd", metavar="REQUEST", parser_class=type(p))
    rq.required = True
    leafnodes.register(rs, rq, common)  # leafnodes
    from natsd.cli import server_reports

    server_reports.register(ss, rs, common)  # ping; report jetstream, connections
    views.register_top(sub, common)  # events


async def cmd_account_info(ctx: Ctx) -> None:
    api = await ctx.api()
    info = await api.request("INFO")
    if ctx.json:
        ctx.out.json_out(strip_type(info))
        return
    nc = await ctx.nc()
    ctx.out.print(
        f"Connection Information:\n\n  Connected URL: {redact(nc.connected_url.geturl()) if nc.connected_url else ''}\n"
        f"      Server ID: {nc._server_info.get('server_id', '')}\n"  # nats-py has no accessor
        f"    Server Name: {nc._server_info.get('server_name', '')}\n"
        f"        Version: {nc._server_info.get('version', '')}\n"
    )
    ctx.out.print(render.account_info(info))


async def cmd_server_check(ctx: Ctx) -> int:
    """Nagios-style one-line results; any CRITICAL gives exit code 1."""
    which = ctx.args.check
    results: list[dict] = []
    t0 = time.perf_counter()
    nc: nats.NATS | None = None
    try:
        client = await ctx.nc()
        await client.flush(timeout=max(int(ctx.timeout), 1))
    except CliError as exc:
        results.append({"check": "connection", "status": "CRITICAL", "message": str(exc)})
    else:
        nc = client
        rtt = (time.perf_counter() - t0) * 1000
        url = redact(client.connected_url.geturl() if client.connected_url else ctx.conn.server)
        results.append(
            {
                "check": "connection",
                "status": "OK",
                "message": f"connected to {url} in {rtt:.2f}ms",
                "server_version": client._server_info.get("version", ""),
                "connect_ms": round(rtt, 3),
            }
        )
    if which in ("jetstream", "all") and nc is not None:
        try:
            api = await ctx.api()
            info = await api.request("INFO")
        except CliError as exc:
            results.append({"check": "jetstream", "status": "CRITICAL", "message": str(exc)})
        else:
            results.append(
                {
                    "check": "jetstream",
                    "status": "OK",
                    "message": f"{info.get('streams', 0)} streams, {info.get('consumers', 0)} consumers, "
                    f"memory {info.get('memory', 0)} B, storage {info.get('storage', 0)} B",
                    "streams": info.get("streams", 0),
                    "consumers": info.get("consumers", 0),
                }
            )
    if which == "jetstream":
        results = [r for r in results if r["check"] == "jetstream" or r["status"] != "OK"]
    if ctx.json:
        ctx.out.json_out(results)
    else:
        for r in results:
            ctx.out.print(f"{r['status']} {r['check'].capitalize()}: {r['message']}")
    return 1 if any(r["status"] != "OK" for r in results) else 0
