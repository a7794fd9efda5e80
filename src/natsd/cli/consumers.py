"""``natsctl consumer …``: add, ls, info, edit, rm, next, events.

Consumers are created with ``$JS.API.CONSUMER.CREATE.<stream>[.<name>]`` and ``{"stream_name", "config",
"action"}``; ``action`` is ``create`` for add (fails if a different consumer exists) and ``update`` for edit.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from typing import Any

from natsd.cli import features, render
from natsd.cli.common import (
    CliError,
    UsageError,
    arrivals,
    ask,
    choice,
    choose,
    comma,
    confirm,
    confirm_edit,
    format_duration,
    next_from,
    optional_count,
    optional_seconds,
    parse_duration,
    parse_int,
    print_names,
    queue_subscriber,
    read_json_file,
    rfc3339,
    show_api,
    show_result,
    stdin_is_tty,
    text_of,
)
from natsd.cli.context import Ctx
from natsd.cli.pubsub import msg_json
from natsd.cli.streams import pick_stream

ACK = {"none": "none", "all": "all", "explicit": "explicit"}
REPLAY = {"instant": "instant", "original": "original"}


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("consumer", aliases=["con", "obs", "c"], help="JetStream consumer management")
    s = p.add_subparsers(dest="consumer_cmd", metavar="VERB", parser_class=type(p))
    s.required = True

    a = s.add_parser("add", aliases=["create", "new"], parents=[common], help="create a consumer")
    a.add_argument("stream", nargs="?")
    a.add_argument("consumer", nargs="?")
    config_flags(a)
    a.add_argument("--ephemeral", action="store_true", help="create an ephemeral consumer (no durable name)")
    a.add_argument("--defaults", action="store_true", help="use defaults for everything not given (no prompts)")
    a.set_defaults(func=cmd_add)

    ls = s.add_parser("ls", aliases=["list"], parents=[common], help="list a stream's consumers")
    ls.add_argument("stream", nargs="?")
    ls.add_argument("-n", "--names", action="store_true", help="only names, one per line")
    ls.set_defaults(func=cmd_ls)

    i = s.add_parser("info", parents=[common], help="consumer configuration and state")
    i.add_argument("stream", nargs="?")
    i.add_argument("consumer", nargs="?")
    i.set_defaults(func=cmd_info)

    e = s.add_parser(
        "edit",
        parents=[common],
        help="change a consumer's configuration (asks for confirmation on a terminal unless -f)",
    )
    e.add_argument("stream", nargs="?")
    e.add_argument("consumer", nargs="?")
    config_flags(e)
    e.set_defaults(func=cmd_edit)

    r = s.add_parser("rm", aliases=["delete", "del"], parents=[common], help="delete a consumer")
    r.add_argument("stream", nargs="?")
    r.add_argument("consumer", nargs="?")
    r.set_defaults(func=cmd_rm)

    n = s.add_parser("next", parents=[common], help="fetch the next message(s) from a pull consumer")
    n.add_argument("stream", nargs="?")
    n.add_argument("consumer", nargs="?")
    n.add_argument("--no-ack", action="store_true", help="do not acknowledge the message")
    n.add_argument("--nak", action="store_true", help="negatively acknowledge (redeliver)")
    n.add_argument("--term", action="store_true", help="terminate (never redeliver)")
    n.add_argument("--count", default="1", help="how many messages to fetch, one at a time")
    n.add_argument("--raw", action="store_true", help="only the message body")
    n.set_defaults(func=cmd_next)

    from natsd.cli import views

    views.register_consumer(s, common)  # report

    ev = s.add_parser(
        "events",
        aliases=["event"],
        parents=[common],
        help="show a consumer's advisories and ack samples as they happen",
    )
    ev.add_argument("stream", nargs="?")
    ev.add_argument("consumer", nargs="?")
    ev.add_argument("--count", default=None, help="stop after this many events")
    ev.add_argument("--wait", default=None, help="stop after this long, e.g. 10s")
    ev.set_defaults(func=cmd_events)


def config_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("consumer configuration")
    g.add_argument("--config", help="ConsumerConfig JSON file (the shape of `consumer info -j | jq .config`)")
    g.add_argument("--description")
    g.add_argument("--target", help="push: deliver messages to this subject")
    g.add_argument("--pull", action="store_true", default=None, help="a pull consumer (no delivery subject)")
    g.add_argument("--deliver", help="start at: all, last, new, last_per_subject, a sequence, or a duration ago")
    g.add_argument("--ack", help="ack policy: none, all, explicit")
    g.add_argument("--ack-wait", dest="ack_wait", help="how long before an unacknowledged message is redelivered")
    g.add_argument("--replay", help="instant or original")
    g.add_argument("--filter", help="only messages on this subject ('' for all)")
    g.add_argument("--max-deliver", dest="max_deliver", help="maximum deliveries per message (-1: unlimited)")
    g.add_argument("--max-pending", dest="max_ack_pending", help="maximum outstanding acks")
    g.add_argument("--max-waiting", dest="max_waiting", help="maximum waiting pull requests")
    g.add_argument("--sample", help="percentage of acks to sample (0-100)")
    g.add_argument("--heartbeat", help="push: idle heartbeat interval")
    g.add_argument("--flow-control", dest="flow_control", action="store_true", default=None)
    g.add_argument("--deliver-group", dest="deliver_group", help="push: queue group for the delivery subject")
    g.add_argument("--inactive-threshold", dest="inactive_threshold", help="remove when inactive this long")
    g.add_argument("--backoff", help="redelivery backoff durations, comma separated")
    features.consumer_flags(p)  # --metadata and natsd's own features (natsd.cli.features)


def apply_deliver(cfg: dict, value: str) -> None:
    v = str(value).strip().lower()
    for k in ("opt_start_seq", "opt_start_time"):
        cfg.pop(k, None)
    if v in ("all", "last", "new", "last_per_subject"):
        cfg["deliver_policy"] = v
    elif v.isdigit():
        cfg["deliver_policy"] = "by_start_sequence"
        cfg["opt_start_seq"] = int(v)
    else:
        ago = parse_duration(value, flag="--deliver")
        start = datetime.now(timezone.utc).timestamp() - ago / 1e9
        cfg["deliver_policy"] = "by_start_time"
        cfg["opt_start_time"] = rfc3339(datetime.fromtimestamp(start, timezone.utc))


def _choice(value: str, table: dict[str, str], flag: str) -> str:
    return choice(value, table, flag, expected=list(table))  # the errors list the choices in the table's order


def apply_flags(cfg: dict, a: argparse.Namespace) -> dict:
    if a.description is not None:
        cfg["description"] = a.description
    if a.target is not None:
        if a.target:
            cfg["deliver_subject"] = a.target
        else:
            cfg.pop("deliver_subject", None)
    if a.pull:
        cfg.pop("deliver_subject", None)
    if a.deliver is not None:
        apply_deliver(cfg, a.deliver)
    if a.ack is not None:
        cfg["ack_policy"] = _choice(a.ack, ACK, "--ack")
    if a.ack_wait is not None:
        cfg["ack_wait"] = parse_duration(a.ack_wait, flag="--ack-wait")
    if a.replay is not None:
        cfg["replay_policy"] = _choice(a.replay, REPLAY, "--replay")
    if a.filter is not None:
        if a.filter:
            cfg["filter_subject"] = a.filter
        else:
            cfg.pop("filter_subject", None)
    if a.max_deliver is not None:
        cfg["max_deliver"] = parse_int(a.max_deliver, flag="--max-deliver")
    if a.max_ack_pending is not None:
        cfg["max_ack_pending"] = parse_int(a.max_ack_pending, flag="--max-pending")
    if a.max_waiting is not None:
        cfg["max_waiting"] = parse_int(a.max_waiting, flag="--max-waiting")
    if a.sample is not None:
        n = parse_int(str(a.sample).rstrip("%"), flag="--sample")
        if not 0 <= n <= 100:
            raise UsageError("invalid --sample: must be 0 to 100")
        if n:
            cfg["sample_freq"] = f"{n}%"
        else:
            cfg.pop("sample_freq", None)
    if a.heartbeat is not None:
        cfg["idle_heartbeat"] = parse_duration(a.heartbeat, flag="--heartbeat")
    if a.flow_control:
        cfg["flow_control"] = True
    if a.deliver_group is not None:
        cfg["deliver_group"] = a.deliver_group
    if a.inactive_threshold is not None:
        cfg["inactive_threshold"] = parse_duration(a.inactive_threshold, flag="--inactive-threshold")
    if a.backoff is not None:
        cfg["backoff"] = [parse_duration(x, flag="--backoff") for x in a.backoff.split(",") if x.strip()]
    features.apply_consumer(cfg, a)
    return cfg


async def pick_consumer(ctx: Ctx, stream: str, given: str | None) -> str:
    if given:
        return given
    api = await ctx.api()
    return choose(await api.consumer_names(stream), "CONSUMER", "Consumer", f"Stream {stream} has no Consumers")


async def show_info(ctx: Ctx, stream: str, name: str) -> dict:
    return await show_api(ctx, f"CONSUMER.INFO.{stream}.{name}", render.consumer_info)


async def cmd_add(ctx: Ctx) -> None:
    a = ctx.args
    file_cfg = read_json_file(a.config) if a.config else None
    stream = a.stream or (file_cfg or {}).get("stream_name")
    stream = await pick_stream(ctx, stream)
    cfg: dict[str, Any] = dict(file_cfg or {})
    cfg.pop("stream_name", None)
    name = a.consumer or cfg.get("durable_name") or cfg.get("name")
    if not a.ephemeral and not name:
        name = ask("CONSUMER", "Consumer name")
    if a.ephemeral:
        name = None
        cfg.pop("durable_name", None)
        cfg.pop("name", None)
    apply_flags(cfg, a)
    interactive = stdin_is_tty() and not a.defaults and not a.config
    if (
        not interactive
        and not a.defaults
        and not a.config
        and a.target is None
        and not a.pull
        and "deliver_subject" not in cfg
    ):
        # Pull or push is the one choice with no safe default: a script must say which (as `str add` needs
        # --subjects) instead of getting a consumer it did not ask for.
        raise UsageError(
            "--pull or --target SUBJECT is required (no terminal to prompt; --defaults makes a pull consumer)"
        )
    if interactive:
        if a.target is None and not a.pull and "deliver_subject" not in cfg:
            t = ask("--target", "Delivery target (empty for Pull Consumers)", "", allow_empty=True)
            if t:
                cfg["deliver_subject"] = t
        if a.deliver is None:
            apply_deliver(
                cfg, ask("--deliver", "Start policy (all, new, last, last_per_subject, 1h, msg sequence)", "all")
            )
        if a.ack is None and cfg.get("deliver_subject"):
            cfg["ack_policy"] = _choice(
                ask("--ack", "Acknowledgement policy", "explicit", choices=["explicit", "all", "none"]), ACK, "--ack"
            )
        if a.replay is None and cfg.get("deliver_subject"):
            cfg["replay_policy"] = _choice(
                ask("--replay", "Replay policy", "instant", choices=["instant", "original"]), REPLAY, "--replay"
            )
        if a.filter is None:
            f = ask("--filter", "Filter Stream by subject (blank for all)", "", allow_empty=True)
            if f:
                cfg["filter_subject"] = f
        if a.max_deliver is None:
            cfg["max_deliver"] = parse_int(
                ask("--max-deliver", "Maximum Allowed Deliveries", "-1"), flag="--max-deliver"
            )
    # The reference tool's defaults; without --target this is a pull consumer.
    cfg.setdefault("deliver_policy", "all")
    cfg.setdefault("ack_policy", "explicit")
    cfg.setdefault("replay_policy", "instant")
    if name:
        cfg["durable_name"] = name
        cfg["name"] = name
        subject = f"CONSUMER.CREATE.{stream}.{name}"
    else:
        subject = f"CONSUMER.CREATE.{stream}"
    api = await ctx.api()
    info = await api.request(subject, {"stream_name": stream, "config": cfg, "action": "create"})
    show_result(ctx, info, render.consumer_info(info))


async def cmd_ls(ctx: Ctx) -> None:
    a = ctx.args
    stream = await pick_stream(ctx, a.stream)
    api = await ctx.api()
    if ctx.json or a.names:
        print_names(ctx, await api.consumer_names(stream))
        return
    infos = sorted(await api.paged(f"CONSUMER.LIST.{stream}", "consumers"), key=lambda i: i["name"])
    if not infos:
        ctx.out.print("No Consumers defined")
        return
    rows = []
    for i in infos:
        c = i.get("config", {})
        rows.append(
            [
                i["name"],
                "Pull" if not c.get("deliver_subject") else f"Push {c['deliver_subject']}",
                c.get("filter_subject", ""),
                c.get("ack_policy", ""),
                comma(i.get("num_pending")),
                comma(i.get("num_ack_pending")),
                comma(i.get("num_redelivered")),
            ]
        )
    ctx.out.print(
        render.table(
            f"Consumers for Stream {stream}",
            ["Name", "Mode", "Filter", "Ack", "Unprocessed", "Ack Pending", "Redelivered"],
            rows,
        )
    )


async def cmd_info(ctx: Ctx) -> None:
    stream = await pick_stream(ctx, ctx.args.stream)
    name = await pick_consumer(ctx, stream, ctx.args.consumer)
    await show_info(ctx, stream, name)


async def cmd_edit(ctx: Ctx) -> None:
    a = ctx.args
    stream = await pick_stream(ctx, a.stream)
    name = await pick_consumer(ctx, stream, a.consumer)
    api = await ctx.api()
    current = (await api.request(f"CONSUMER.INFO.{stream}.{name}"))["config"]
    new = read_json_file(a.config) if a.config else dict(current)
    new.pop("stream_name", None)
    apply_flags(new, a)
    confirm_edit(
        ctx,
        f"Consumer {stream} > {name}",
        {k: v for k, v in current.items() if k != "metadata"},
        {k: v for k, v in new.items() if k != "metadata"},
        a.force,
    )
    info = await api.request(
        f"CONSUMER.CREATE.{stream}.{name}", {"stream_name": stream, "config": new, "action": "update"}
    )
    show_result(ctx, info, f"Consumer {stream} > {name} was updated\n", render.consumer_info(info))


async def cmd_rm(ctx: Ctx) -> None:
    stream = await pick_stream(ctx, ctx.args.stream)
    name = await pick_consumer(ctx, stream, ctx.args.consumer)
    confirm(f"Really delete Consumer {stream} > {name}", ctx.args.force)
    api = await ctx.api()
    resp = await api.request(f"CONSUMER.DELETE.{stream}.{name}")
    show_result(ctx, resp)


async def cmd_next(ctx: Ctx) -> int:
    """Pull one message at a time with a ``MSG.NEXT`` request, print it and ack it (unless ``--no-ack``)."""
    a = ctx.args
    stream = await pick_stream(ctx, a.stream)
    name = await pick_consumer(ctx, stream, a.consumer)
    count = parse_int(a.count, flag="--count")
    api = await ctx.api()
    # Ack only where the consumer expects acks: an ack-none consumer still sends a $JS.ACK reply subject,
    # but the server never confirms acks sent to it.
    ack_policy = (await api.request(f"CONSUMER.INFO.{stream}.{name}")).get("config", {}).get("ack_policy", "none")
    nc = await ctx.nc()
    # `expires` a little under our own timeout, so the server's 408 arrives before the client gives up.
    expires = max(int(ctx.timeout * 1e9 * 0.9), 1_000_000)
    body = json.dumps({"batch": 1, "expires": expires}).encode()
    got = 0
    ctx.summary = lambda: f"received {got} of {count} messages from {stream} > {name}"
    for _ in range(count):
        try:
            # old_style: a private inbox per request, because JetStream delivers the message under its own
            # stream subject, which nats-py's shared request inbox could not match to this request.
            msg = await nc.request(
                f"{api.prefix}.CONSUMER.MSG.NEXT.{stream}.{name}", body, timeout=ctx.timeout, old_style=True
            )
        except Exception as exc:  # no responders / timeout
            if "no responders" in str(exc).lower() or type(exc).__name__ == "NoRespondersError":
                raise CliError(f"consumer {stream} > {name} not found (no responders)") from None
            raise CliError(f"no message received: {type(exc).__name__}") from None
        status = (msg.headers or {}).get("Status") if msg.headers else None
        if status and not msg.data:
            desc = (msg.headers or {}).get("Description", "")
            if got:
                break
            raise CliError(f"no message received: {status} {desc}".strip())
        got += 1
        if ctx.json:
            doc = msg_json(msg)
            # one message: one document; --count N: one message per line, like the other streaming commands
            ctx.out.json_out(doc) if count == 1 else ctx.out.json_line(doc)
        elif a.raw:
            ctx.out.raw(msg.data)
        else:
            ctx.out.print(f"--- received on {msg.subject}")
            for k, v in (msg.headers or {}).items():
                ctx.out.print(f"{k}: {v}")
            ctx.out.print(text_of(msg.data) + "\n")
        if not a.no_ack and msg.reply and ack_policy != "none":
            token = b"-NAK" if a.nak else b"+TERM" if a.term else b"+ACK"
            try:
                # A request makes the ack synchronous: the server confirms it before we report success.
                await nc.request(msg.reply, token, timeout=min(ctx.timeout, 2.0))
            except Exception:  # servers may not confirm acks; flushing still orders it
                await nc.flush()
            if not ctx.json and not a.raw:
                ctx.out.print(
                    {
                        b"+ACK": "Acknowledged message",
                        b"-NAK": "Negatively acknowledged message",
                        b"+TERM": "Terminated message",
                    }[token]
                )
    return 0


def _event_line(subject: str, data: dict) -> str:
    kind = str(data.get("type", "")).rsplit(".", 1)[-1]
    ts = data.get("timestamp", "")
    hms = ts[11:19] if len(ts) >= 19 else datetime.now().strftime("%H:%M:%S")
    head = f"[{hms}] [{data.get('id', '')}]"
    if kind == "consumer_ack" or subject.startswith("$JS.EVENT.METRIC."):
        return (
            f"{head} Acknowledgement Sample\n"
            f"             Consumer: {data.get('stream')} > {data.get('consumer')}\n"
            f"      Stream Sequence: {data.get('stream_seq')}\n"
            f"    Consumer Sequence: {data.get('consumer_seq')}\n"
            f"           Deliveries: {data.get('deliveries', data.get('delivered'))}\n"
            f"                Delay: {format_duration(data.get('ack_time', 0))}\n"
        )
    if kind == "max_deliver":
        return (
            f"{head} Delivery Exceeded\n"
            f"             Consumer: {data.get('stream')} > {data.get('consumer')}\n"
            f"      Stream Sequence: {data.get('stream_seq')}\n"
            f"           Deliveries: {data.get('deliveries')}\n"
        )
    if kind == "terminated":
        return (
            f"{head} Terminated Message\n"
            f"             Consumer: {data.get('stream')} > {data.get('consumer')}\n"
            f"      Stream Sequence: {data.get('stream_seq')}\n"
        )
    return f"{head} {kind or subject}\n{json.dumps(data, indent=2)}\n"


async def cmd_events(ctx: Ctx) -> None:
    a = ctx.args
    stream = await pick_stream(ctx, a.stream)
    name = await pick_consumer(ctx, stream, a.consumer)
    limit_n, wait_s = optional_count(a.count), optional_seconds(a.wait)
    nc = await ctx.nc()
    queue, on_msg = queue_subscriber(10_000)
    adv = f"$JS.EVENT.ADVISORY.CONSUMER.*.{stream}.{name}"
    met = f"$JS.EVENT.METRIC.CONSUMER.ACK.{stream}.{name}"
    await nc.subscribe(adv, cb=on_msg)
    await nc.subscribe(met, cb=on_msg)
    await nc.flush()
    banner = f"Listening for Advisories on {adv}\nListening for Metrics on {met}\n"
    if ctx.json:
        sys.stderr.write(banner)  # stdout stays a stream of JSON documents
        sys.stderr.flush()
    else:
        ctx.out.print(banner)
    sys.stdout.flush()
    async for msg in arrivals(lambda t: next_from(queue, t), limit_n, wait_s):
        try:
            data = json.loads(msg.data)
        except ValueError:
            data = {"raw": msg.data.decode(errors="replace")}
        if ctx.json:
            ctx.out.json_line(data)
        else:
            ctx.out.print(_event_line(msg.subject, data))
        sys.stdout.flush()
