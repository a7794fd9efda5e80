"""``natsctl stream …``: add, ls, info, edit, cp, rm, purge, rmm, get, report, backup, restore, template …

All requests go straight to ``$JS.API.STREAM.*`` with the JSON the server defines, so ``info -j | jq .config``
is exactly what ``--config FILE`` accepts, and fields this tool does not know survive an edit.
"""

from __future__ import annotations

import argparse
import base64
from typing import Any, Callable

from natsd.cli import features, render
from natsd.cli.common import (
    ApiError,
    CliError,
    ask,
    choice,
    choose,
    comma,
    confirm,
    confirm_edit,
    format_time,
    human_bytes,
    parse_duration,
    parse_int,
    parse_size,
    print_names,
    read_json_file,
    show_api,
    show_result,
    stdin_is_tty,
    strip_type,
    text_of,
    without_server_metadata,
)
from natsd.cli.common import config_diff  # noqa: F401 - kept importable from here (tests use streams.config_diff)
from natsd.cli.context import Ctx

RETENTION = {
    "limits": "limits",
    "interest": "interest",
    "workqueue": "workqueue",
    "work": "workqueue",
    "work_queue": "workqueue",
    "wq": "workqueue",
}
STORAGE = {"file": "file", "f": "file", "memory": "memory", "mem": "memory", "m": "memory"}
DISCARD = {"old": "old", "new": "new"}


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("stream", aliases=["str", "streams"], help="JetStream stream management")
    s = p.add_subparsers(dest="stream_cmd", metavar="VERB", parser_class=type(p))
    s.required = True

    a = s.add_parser("add", aliases=["create", "new"], parents=[common], help="create a stream")
    a.add_argument("stream", nargs="?", help="stream name")
    config_flags(a)
    a.add_argument("--defaults", action="store_true", help="use defaults for everything not given (no prompts)")
    a.set_defaults(func=cmd_add)

    ls = s.add_parser("ls", aliases=["list"], parents=[common], help="list streams")
    ls.add_argument("-n", "--names", action="store_true", help="only names, one per line")
    ls.add_argument("--subject", help="only streams that capture this subject")
    ls.set_defaults(func=cmd_ls)

    i = s.add_parser("info", parents=[common], help="stream configuration and state")
    i.add_argument("stream", nargs="?")
    i.set_defaults(func=cmd_info)

    e = s.add_parser(
        "edit",
        aliases=["update"],
        parents=[common],
        help="change a stream's configuration (asks for confirmation on a terminal unless -f)",
    )
    e.add_argument("stream", nargs="?")
    config_flags(e)
    e.set_defaults(func=cmd_edit)

    c = s.add_parser("cp", aliases=["copy"], parents=[common], help="create a stream from another's configuration")
    c.add_argument("source")
    c.add_argument("destination")
    config_flags(c)
    c.set_defaults(func=cmd_cp)

    r = s.add_parser("rm", aliases=["delete", "del"], parents=[common], help="delete a stream and its data")
    r.add_argument("stream", nargs="?")
    r.set_defaults(func=cmd_rm)

    pu = s.add_parser("purge", parents=[common], help="delete messages, keeping the stream")
    pu.add_argument("stream", nargs="?")
    pu.add_argument("--subject", help="only messages on this subject")
    pu.add_argument("--seq", help="purge up to (not including) this sequence")
    pu.add_argument("--keep", help="keep this many most recent messages")
    pu.set_defaults(func=cmd_purge)

    rmm = s.add_parser("rmm", parents=[common], help="securely delete one message")
    rmm.add_argument("stream", nargs="?")
    rmm.add_argument("seq", nargs="?")
    rmm.set_defaults(func=cmd_rmm)

    g = s.add_parser("get", parents=[common], help="read one message by sequence")
    g.add_argument("stream", nargs="?")
    g.add_argument("seq", nargs="?")
    g.add_argument("-S", "--last-for", dest="last_for", help="the last message on this subject")
    g.add_argument("--raw", action="store_true", help="only the message body, byte for byte")
    g.set_defaults(func=cmd_get)

    rep = s.add_parser("report", parents=[common], help="a table of every stream")
    rep.set_defaults(func=cmd_report)

    b = s.add_parser("backup", parents=[common], help="snapshot a stream (data and consumers) into a directory")
    b.add_argument("stream")
    b.add_argument("directory")
    b.add_argument("--no-consumers", action="store_true", help="leave consumers out of the snapshot")
    b.add_argument("--check", action="store_true", help="ask the server to check the stream first (jsck)")
    b.add_argument("--chunk-size", default="128KiB", help="chunk size the server sends (default 128KiB)")
    b.set_defaults(func=_backup_cmd)

    rs = s.add_parser("restore", parents=[common], help="restore a stream from a backup directory")
    rs.add_argument(
        "paths",
        nargs="+",
        metavar="[STREAM] DIRECTORY",
        help="backup directory; an optional stream name before it must match the backup",
    )
    rs.add_argument("--config", help="restore with this stream configuration JSON instead of the backup's")
    rs.set_defaults(func=_restore_cmd)

    from natsd.cli import views

    views.register_stream(s, common)  # view, subjects, seal

    t = s.add_parser("template", aliases=["templates", "tmpl"], help="stream templates (removed in nats-server 2.14)")
    ts = t.add_subparsers(dest="template_cmd", metavar="VERB", parser_class=type(p))
    ts.required = True
    ta = ts.add_parser("add", aliases=["create"], parents=[common], help="create a stream template")
    ta.add_argument("template", nargs="?")
    config_flags(ta)
    ta.add_argument("--max-streams", default=None, help="how many streams the template may create (-1: unlimited)")
    ta.set_defaults(func=cmd_template_add)
    tl = ts.add_parser("ls", aliases=["list"], parents=[common], help="list templates")
    tl.set_defaults(func=cmd_template_ls)
    ti = ts.add_parser("info", parents=[common], help="template configuration and streams")
    ti.add_argument("template")
    ti.set_defaults(func=cmd_template_info)
    tr = ts.add_parser("rm", aliases=["delete"], parents=[common], help="delete a template and its streams")
    tr.add_argument("template")
    tr.set_defaults(func=cmd_template_rm)


def config_flags(p: argparse.ArgumentParser) -> None:
    """Flags that map onto StreamConfig fields; all default to None = "not given"."""
    g = p.add_argument_group("stream configuration")
    g.add_argument("--config", help="StreamConfig JSON file (the shape of `stream info -j | jq .config`)")
    g.add_argument("--subjects", action="append", help="subjects to capture (comma/space separated, repeatable)")
    g.add_argument("--description", help="a contextual description for the stream")
    g.add_argument("--storage", help="file or memory")
    g.add_argument("--retention", help="limits, interest or workqueue")
    g.add_argument("--discard", help="old or new")
    g.add_argument("--max-msgs", dest="max_msgs", help="message count limit (-1: unlimited)")
    g.add_argument("--max-bytes", dest="max_bytes", help="size limit, e.g. 1GiB (-1: unlimited)")
    g.add_argument("--max-age", dest="max_age", help="age limit: 1y, 1d, 1h, 1m ... (-1: unlimited)")
    g.add_argument("--max-msg-size", dest="max_msg_size", help="largest message (-1: unlimited)")
    g.add_argument("--max-msgs-per-subject", dest="max_msgs_per_subject", help="per-subject count limit")
    g.add_argument("--max-consumers", dest="max_consumers", help="consumer count limit (-1: unlimited)")
    g.add_argument("--dupe-window", dest="dupe_window", help="duplicate tracking window, e.g. 2m")
    g.add_argument("--replicas", help="number of replicas")
    ack = g.add_mutually_exclusive_group()
    ack.add_argument("--ack", dest="ack", action="store_true", default=None, help="acknowledge publishes")
    ack.add_argument("--no-ack", dest="ack", action="store_false", help="do not acknowledge publishes")
    g.add_argument("--deny-delete", action="store_true", default=None, help="disallow message deletes")
    g.add_argument("--deny-purge", action="store_true", default=None, help="disallow purges")
    g.add_argument("--allow-rollup", action="store_true", default=None, help="allow Nats-Rollup headers")
    g.add_argument("--allow-direct", action="store_true", default=None, help="allow direct get")
    g.add_argument("--mirror", help="mirror this stream (a mirror has no subjects of its own)")
    g.add_argument(
        "--source", dest="source_streams", action="append", help="copy messages from this stream (repeatable)"
    )
    # The nats CLI's names for the newer StreamConfig fields (the README's features).
    g.add_argument(
        "--compression", choices=["none", "s2"], default=None, help="compression algorithm to use (file storage only)"
    )
    g.add_argument(
        "--allow-msg-ttl",
        dest="allow_msg_ttl",
        action="store_true",
        default=None,
        help="allows per-message TTL handling (the Nats-TTL header)",
    )
    g.add_argument(
        "--subject-del-markers-ttl",
        dest="subject_del_markers_ttl",
        metavar="DURATION",
        default=None,
        help="how long delete markers should persist in the stream, e.g. 10m (needs --allow-msg-ttl)",
    )
    g.add_argument(
        "--allow-counter",
        dest="allow_counter",
        action="store_true",
        default=None,
        help="configures the stream as a distributed counter (Nats-Incr)",
    )
    g.add_argument(
        "--allow-batch", dest="allow_batch", action="store_true", default=None, help="allow atomic batch publishing"
    )
    g.add_argument(
        "--allow-schedules",
        dest="allow_schedules",
        action="store_true",
        default=None,
        help="allows message schedules (Nats-Schedule)",
    )
    g.add_argument(
        "--discard-per-subject",
        dest="discard_per_subject",
        action="store_true",
        default=None,
        help="sets the 'new' discard policy and applies it to every subject in the stream",
    )
    features.stream_flags(p)  # --metadata and natsd's own features (natsd.cli.features)


def _split_subjects(values: list[str]) -> list[str]:
    out: list[str] = []
    for v in values:
        out.extend(x for x in v.replace(",", " ").split() if x)
    return out


def _table(table: dict[str, str]) -> Callable[..., str]:
    return lambda value, flag: choice(value, table, flag)


# Valued flags, in StreamConfig order: (flag, Namespace attribute, StreamConfig field, parser(value, flag=)).
VALUE_FLAGS: list[tuple[str, str, str, Callable[..., Any]]] = [
    ("--storage", "storage", "storage", _table(STORAGE)),
    ("--retention", "retention", "retention", _table(RETENTION)),
    ("--discard", "discard", "discard", _table(DISCARD)),
    ("--max-msgs", "max_msgs", "max_msgs", parse_int),
    ("--max-bytes", "max_bytes", "max_bytes", parse_size),
    ("--max-age", "max_age", "max_age", parse_duration),
    ("--max-msg-size", "max_msg_size", "max_msg_size", parse_size),
    ("--max-msgs-per-subject", "max_msgs_per_subject", "max_msgs_per_subject", parse_int),
    ("--max-consumers", "max_consumers", "max_consumers", parse_int),
    ("--dupe-window", "dupe_window", "duplicate_window", parse_duration),
    ("--replicas", "replicas", "num_replicas", parse_int),
]
PARSERS = {field: (flag, parse) for flag, _, field, parse in VALUE_FLAGS}

# The questions the `nats` tool asks on a terminal for ``add``, in its order: (field, question, default, choices).
PROMPTS: list[tuple[str, str, str, list[str] | None]] = [
    ("storage", "Storage backend", "file", ["file", "memory"]),
    ("retention", "Retention Policy", "limits", ["limits", "interest", "workqueue"]),
    ("discard", "Discard Policy", "old", ["old", "new"]),
    ("max_msgs", "Message count limit", "-1", None),
    ("max_bytes", "Message size limit", "-1", None),
    ("max_age", "Maximum message age limit", "-1", None),
    ("max_msg_size", "Maximum individual message size", "-1", None),
]


def apply_flags(cfg: dict, a: argparse.Namespace) -> dict:
    """Overlay the flags that were given onto ``cfg`` (a StreamConfig dict); returns ``cfg``."""
    if a.subjects is not None:
        cfg["subjects"] = _split_subjects(a.subjects)
    if a.description is not None:
        cfg["description"] = a.description
    for flag, attr, field, parse in VALUE_FLAGS:
        value = getattr(a, attr)
        if value is not None:
            cfg[field] = parse(value, flag=flag)
    if a.ack is not None:
        cfg["no_ack"] = not a.ack
    if a.deny_delete:
        cfg["deny_delete"] = True
    if a.deny_purge:
        cfg["deny_purge"] = True
    if a.allow_rollup:
        cfg["allow_rollup_hdrs"] = True
    if a.allow_direct:
        cfg["allow_direct"] = True
    if getattr(a, "mirror", None):
        cfg["mirror"] = {"name": a.mirror}
    if getattr(a, "source_streams", None):  # (not `source`: that is `stream cp`'s positional argument)
        cfg["sources"] = [{"name": n} for v in a.source_streams for n in v.replace(",", " ").split()]
    if getattr(a, "compression", None):
        cfg["compression"] = a.compression
    for attr, field in (
        ("allow_msg_ttl", "allow_msg_ttl"),
        ("allow_counter", "allow_msg_counter"),
        ("allow_batch", "allow_atomic"),
        ("allow_schedules", "allow_msg_schedules"),
    ):
        if getattr(a, attr, None):
            cfg[field] = True
    if getattr(a, "discard_per_subject", None):
        cfg["discard"] = "new"  # (as the nats CLI: the per-subject form of discard new)
        cfg["discard_new_per_subject"] = True
    if getattr(a, "subject_del_markers_ttl", None) is not None:
        cfg["subject_delete_marker_ttl"] = parse_duration(a.subject_del_markers_ttl, flag="--subject-del-markers-ttl")
    features.apply_stream(cfg, a)
    return cfg


def build_new_config(name: str, a: argparse.Namespace, *, prompt: bool) -> dict:
    """A StreamConfig for ``add``: ``--config`` file, then flags, then prompts (terminal) or defaults."""
    cfg: dict[str, Any] = read_json_file(a.config) if a.config else {}
    cfg["name"] = name
    apply_flags(cfg, a)
    if a.config:
        return cfg
    if "subjects" not in cfg and not cfg.get("mirror") and not cfg.get("sources"):
        cfg["subjects"] = _split_subjects([ask("--subjects", "Subjects to consume", name)])
    if prompt and stdin_is_tty():
        for field, question, default, choices in PROMPTS:
            if field not in cfg:
                flag, parse = PARSERS[field]
                cfg[field] = parse(ask(flag, question, default, choices=choices), flag=flag)
    cfg.setdefault("storage", "file")
    cfg.setdefault("retention", "limits")
    cfg.setdefault("discard", "old")
    cfg.setdefault("max_msgs", -1)
    cfg.setdefault("max_bytes", -1)
    cfg.setdefault("max_age", 0)
    cfg.setdefault("max_msg_size", -1)
    cfg.setdefault("max_consumers", -1)
    cfg.setdefault("num_replicas", 1)
    return cfg


async def pick_stream(ctx: Ctx, given: str | None) -> str:
    """The stream named on the command line, or one chosen on the terminal."""
    if given:
        return given
    api = await ctx.api()
    return choose(await api.stream_names(), "STREAM", "Stream", "no Streams are defined")


async def show_info(ctx: Ctx, name: str) -> dict:
    return await show_api(ctx, f"STREAM.INFO.{name}", render.stream_info)


# ---------------------------------------------------------------------------------------------------------------


async def cmd_add(ctx: Ctx) -> None:
    a = ctx.args
    name = a.stream or (read_json_file(a.config).get("name") if a.config else None)
    if not name:
        name = ask("STREAM", "Stream Name")
    cfg = build_new_config(name, a, prompt=not a.defaults)
    api = await ctx.api()
    info = await api.request(f"STREAM.CREATE.{name}", cfg)
    show_result(ctx, info, f"Stream {name} was created\n", render.stream_info(info))


async def cmd_ls(ctx: Ctx) -> None:
    api = await ctx.api()
    a = ctx.args
    if ctx.json or a.names:
        print_names(ctx, await api.stream_names(a.subject))
        return
    _print_streams(
        ctx,
        await api.stream_infos(a.subject),
        "Streams",
        ["Name", "Subjects", "Messages", "Size", "Consumers", "Last Message"],
        lambda c, st: [
            c["name"],
            ", ".join(c.get("subjects") or []),
            comma(st.get("messages")),
            human_bytes(st.get("bytes")),
            comma(st.get("consumer_count")),
            format_time(st.get("last_ts")),
        ],
    )


def _print_streams(
    ctx: Ctx, infos: list[dict], title: str, headers: list[str], row: Callable[[dict, dict], list[Any]]
) -> None:
    """A table of streams, one ``row(config, state)`` each, or that there are none."""
    if not infos:
        ctx.out.print("No Streams defined")
        return
    ctx.out.print(render.table(title, headers, [row(i["config"], i.get("state", {})) for i in infos]))


async def cmd_info(ctx: Ctx) -> None:
    name = await pick_stream(ctx, ctx.args.stream)
    await show_info(ctx, name)


async def cmd_edit(ctx: Ctx) -> None:
    a = ctx.args
    name = await pick_stream(ctx, a.stream)
    api = await ctx.api()
    current = (await api.request(f"STREAM.INFO.{name}"))["config"]
    if a.config:
        new = read_json_file(a.config)
        new["name"] = name
    else:
        new = dict(current)
    apply_flags(new, a)
    # The server adds bookkeeping metadata (`_nats.*`); compare without it so an unchanged edit is a no-op.
    confirm_edit(ctx, f"Stream {name}", without_server_metadata(current), without_server_metadata(new), a.force)
    info = await api.request(f"STREAM.UPDATE.{name}", new)
    show_result(ctx, info, f"Stream {name} was updated\n", render.stream_info(info))


async def cmd_cp(ctx: Ctx) -> None:
    a = ctx.args
    api = await ctx.api()
    src = (await api.request(f"STREAM.INFO.{a.source}"))["config"]
    cfg = read_json_file(a.config) if a.config else without_server_metadata(src)
    cfg["name"] = a.destination
    apply_flags(cfg, a)
    info = await api.request(f"STREAM.CREATE.{a.destination}", cfg)
    show_result(ctx, info, f"Stream {a.destination} was created\n", render.stream_info(info))


async def cmd_rm(ctx: Ctx) -> None:
    name = await pick_stream(ctx, ctx.args.stream)
    confirm(f"Really delete Stream {name}", ctx.args.force)
    api = await ctx.api()
    resp = await api.request(f"STREAM.DELETE.{name}")
    if ctx.json:
        ctx.out.json_out(strip_type(resp))
    elif not resp.get("success", True):
        raise CliError(f"stream {name} was not deleted")


async def cmd_purge(ctx: Ctx) -> None:
    a = ctx.args
    name = await pick_stream(ctx, a.stream)
    confirm(f"Really purge Stream {name}", a.force)
    body: dict[str, Any] = {}
    if a.subject:
        body["filter"] = a.subject
    if a.seq is not None:
        body["seq"] = parse_int(a.seq, flag="--seq")
    if a.keep is not None:
        body["keep"] = parse_int(a.keep, flag="--keep")
    api = await ctx.api()
    resp = await api.request(f"STREAM.PURGE.{name}", body)
    if ctx.json:
        ctx.out.json_out(strip_type(resp))
        return
    ctx.out.print(f"Purged {comma(resp.get('purged', 0))} messages from Stream {name}\n")
    await show_info(ctx, name)


async def cmd_rmm(ctx: Ctx) -> None:
    a = ctx.args
    name = await pick_stream(ctx, a.stream)
    seq_s = a.seq if a.seq is not None else ask("SEQ", "Message Sequence to remove")
    seq = parse_int(seq_s, flag="SEQ")
    confirm(f"Really remove message {seq} from Stream {name}", a.force)
    api = await ctx.api()
    resp = await api.request(f"STREAM.MSG.DELETE.{name}", {"seq": seq})
    show_result(ctx, resp, f"Message {seq} was removed from Stream {name}")


async def cmd_get(ctx: Ctx) -> None:
    a = ctx.args
    name = await pick_stream(ctx, a.stream)
    if a.last_for:
        body: dict[str, Any] = {"last_by_subj": a.last_for}
    else:
        seq_s = a.seq if a.seq is not None else ask("SEQ", "Message Sequence to retrieve")
        body = {"seq": parse_int(seq_s, flag="SEQ")}
    api = await ctx.api()
    msg = (await api.request(f"STREAM.MSG.GET.{name}", body))["message"]
    if ctx.json:
        ctx.out.json_out(msg)
        return
    data = base64.b64decode(msg.get("data") or b"")
    if a.raw:
        ctx.out.raw(data)
        return
    ctx.out.print(f"Item: {name}#{msg['seq']} received {format_time(msg.get('time'))} on Subject {msg['subject']}\n")
    if msg.get("hdrs"):
        hdr = base64.b64decode(msg["hdrs"]).decode(errors="replace").split("\r\n")[1:]
        ctx.out.print("Headers:")
        for line in hdr:
            if line:
                ctx.out.print(f"  {line}")
        ctx.out.print("")
    ctx.out.print(text_of(data))


async def cmd_report(ctx: Ctx) -> None:
    api = await ctx.api()
    infos = await api.stream_infos()
    if ctx.json:
        ctx.out.json_out(infos)
        return
    _print_streams(
        ctx,
        infos,
        "Stream Report",
        ["Stream", "Storage", "Consumers", "Messages", "Bytes", "Lost", "Deleted", "Replicas"],
        lambda c, st: [
            c["name"],
            str(c.get("storage", "file")).capitalize(),
            comma(st.get("consumer_count")),
            comma(st.get("messages")),
            human_bytes(st.get("bytes")),
            # LostStreamData{msgs: [seq...], bytes}
            comma(len((st.get("lost") or {}).get("msgs") or [])),
            comma(st.get("num_deleted", 0)),
            c.get("num_replicas", 1),
        ],
    )


async def _backup_cmd(ctx: Ctx) -> None:
    from natsd.cli.backup import cmd_stream_backup

    await cmd_stream_backup(ctx)


async def _restore_cmd(ctx: Ctx) -> None:
    from natsd.cli.backup import cmd_stream_restore

    await cmd_stream_restore(ctx)


# ---------------------------------------------------------------------------------------------------------------
# Templates. nats-server 2.14 removed them and does not answer their subjects at all, so a timeout here is
# reported as "not supported" rather than as a generic timeout.
# ---------------------------------------------------------------------------------------------------------------


async def _template_request(ctx: Ctx, subject: str, body: Any = None) -> dict:
    api = await ctx.api()
    try:
        return await api.request(subject, body)
    except ApiError:
        raise
    except CliError as exc:
        if "timeout" in str(exc):
            raise CliError(
                f"stream templates are not supported by this server (no response to $JS.API.{subject})"
            ) from None
        raise


def template_info_text(resp: dict) -> str:
    tc = resp.get("config", {})
    cfg = tc.get("config", {})
    rows = render.stream_config_rows(cfg)
    rows.append(("Maximum Streams", "unlimited" if tc.get("max_streams", -1) < 0 else tc.get("max_streams")))
    streams = resp.get("streams") or []
    text = render.sections(f"Information for Stream Template {tc.get('name')}", [("Configuration", rows)])
    text += "\nManaged Streams:\n\n"
    text += (
        "\n".join(f"  {s}" for s in sorted(streams)) if streams else "  No Streams have been defined by this template"
    )
    return text


async def cmd_template_add(ctx: Ctx) -> None:
    a = ctx.args
    name = a.template or ask("TEMPLATE", "Template Name")
    cfg = build_new_config(name, a, prompt=True)
    cfg["name"] = ""  # the server names each stream <template>_<token>
    max_streams = (
        parse_int(a.max_streams, flag="--max-streams")
        if a.max_streams is not None
        else (parse_int(ask("--max-streams", "Maximum Streams", "-1"), flag="--max-streams"))
    )
    resp = await _template_request(
        ctx, f"STREAM.TEMPLATE.CREATE.{name}", {"name": name, "config": cfg, "max_streams": max_streams}
    )
    show_result(ctx, resp, f"Stream Template {name} was created\n", template_info_text(resp))


async def cmd_template_ls(ctx: Ctx) -> None:
    resp = await _template_request(ctx, "STREAM.TEMPLATE.NAMES", {"offset": 0})
    # nats-server spelled the template names' key "streams" (JSApiStreamTemplateNamesResponse).
    names = sorted(resp.get("streams") or resp.get("templates") or [])
    if ctx.json:
        ctx.out.json_out(names)
    elif not names:
        ctx.out.print("No Stream Templates defined")
    else:
        ctx.out.print("Stream Templates:\n")
        for n in names:
            ctx.out.print(f"  {n}")


async def cmd_template_info(ctx: Ctx) -> None:
    resp = await _template_request(ctx, f"STREAM.TEMPLATE.INFO.{ctx.args.template}")
    show_result(ctx, resp, template_info_text(resp))


async def cmd_template_rm(ctx: Ctx) -> None:
    confirm(f"Really delete Stream Template {ctx.args.template} and all its streams", ctx.args.force)
    resp = await _template_request(ctx, f"STREAM.TEMPLATE.DELETE.{ctx.args.template}")
    show_result(ctx, resp)
