"""``natsctl kv …``: key-value buckets through nats-py's KeyValue (streams named ``KV_<bucket>``)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone

from nats.js.api import KeyValueConfig
from nats.js.errors import InvalidKeyError, KeyDeletedError, KeyNotFoundError, NotFoundError

from natsd.cli import render
from natsd.cli.common import (
    CliError,
    UsageError,
    arrivals,
    backing_store,
    bucket_flags,
    bucket_limits,
    bucket_streams,
    comma,
    confirm,
    create_bucket,
    delete_bucket,
    error_text,
    format_duration,
    human_bytes,
    open_bucket,
    optional_count,
    optional_seconds,
    parse_int,
    parse_size,
    payload_json,
    read_stdin_bytes,
    stdin_is_tty,
    text_of,
)
from natsd.cli.context import Ctx


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("kv", help="key-value buckets")
    s = p.add_subparsers(dest="kv_cmd", metavar="VERB", parser_class=type(p))
    s.required = True

    # (not "create": in the nats CLI `kv create BUCKET KEY VALUE` stores a new key, as below)
    a = s.add_parser("add", aliases=["new"], parents=[common], help="create a bucket")
    bucket_flags(a, ttl="expire values after this long", max_bucket_size="bucket size limit")
    a.add_argument("--history", default="1", help="values kept per key (1-64)")
    a.add_argument("--max-value-size", dest="max_value_size", default=None, help="largest value")
    a.set_defaults(func=cmd_add)

    put = s.add_parser("put", parents=[common], help="store a value")
    put.add_argument("bucket")
    put.add_argument("key")
    put.add_argument("value", nargs="?", help="the value; read from stdin when omitted")
    put.set_defaults(func=cmd_put)

    c = s.add_parser("create", parents=[common], help="store a value only if the key is new (or deleted)")
    c.add_argument("bucket")
    c.add_argument("key")
    c.add_argument("value", nargs="?", help="the value; read from stdin when omitted")
    c.set_defaults(func=cmd_put, only_revision=0)

    u = s.add_parser("update", parents=[common], help="store a value only if the key is at REVISION")
    u.add_argument("bucket")
    u.add_argument("key")
    u.add_argument("value", nargs="?", help="the value; read from stdin when omitted")
    u.add_argument("revision", nargs="?", default="0", help="the key's current revision (0: a new key)")
    u.set_defaults(func=cmd_put, only_revision=None)

    g = s.add_parser("get", parents=[common], help="read a value")
    g.add_argument("bucket")
    g.add_argument("key")
    g.add_argument("--revision", default=None)
    g.add_argument("--raw", action="store_true", help="only the value")
    g.set_defaults(func=cmd_get)

    d = s.add_parser("del", aliases=["delete", "rm-key"], parents=[common], help="delete a key (history kept)")
    d.add_argument("bucket")
    d.add_argument("key")
    d.set_defaults(func=cmd_del)

    pu = s.add_parser("purge", parents=[common], help="delete a key and its history")
    pu.add_argument("bucket")
    pu.add_argument("key")
    pu.set_defaults(func=cmd_purge)

    h = s.add_parser("history", parents=[common], help="every revision of a key")
    h.add_argument("bucket")
    h.add_argument("key")
    h.set_defaults(func=cmd_history)

    k = s.add_parser("keys", aliases=["ls-keys"], parents=[common], help="list keys")
    k.add_argument("bucket")
    k.set_defaults(func=cmd_keys)

    w = s.add_parser("watch", parents=[common], help="print changes as they happen")
    w.add_argument("bucket")
    w.add_argument("key", nargs="?", default=">")
    w.add_argument("--count", default=None, help="stop after this many updates")
    w.add_argument("--wait", default=None, help="stop after this long")
    w.set_defaults(func=cmd_watch)

    ls = s.add_parser("ls", aliases=["list"], parents=[common], help="list buckets, or a bucket's keys")
    ls.add_argument("bucket", nargs="?")
    ls.set_defaults(func=cmd_ls)

    rm = s.add_parser("rm", parents=[common], help="delete a bucket")
    rm.add_argument("bucket")
    rm.set_defaults(func=cmd_rm)

    st = s.add_parser("status", aliases=["info"], parents=[common], help="bucket status")
    st.add_argument("bucket")
    st.set_defaults(func=cmd_status)


async def _kv(ctx: Ctx, bucket: str):
    return await open_bucket((await ctx.js()).key_value(bucket), bucket)


def _ts(entry) -> str:
    """The entry's stored time, when nats-py has it (direct gets carry no time)."""
    t = getattr(entry, "created", None)
    if isinstance(t, datetime):
        return t.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return ""


async def cmd_add(ctx: Ctx) -> None:
    a = ctx.args
    js = await ctx.js()
    cfg = KeyValueConfig(
        bucket=a.bucket,
        history=parse_int(a.history, flag="--history"),
        max_value_size=parse_size(a.max_value_size, flag="--max-value-size") if a.max_value_size else None,
        **bucket_limits(a),
    )
    await create_bucket(js.create_key_value(config=cfg), a.bucket)
    await _status(ctx, a.bucket, created=True)


async def _status(ctx: Ctx, bucket: str, created: bool = False) -> None:
    api = await ctx.api()
    info = await api.request(f"STREAM.INFO.KV_{bucket}")
    cfg, st = info["config"], info.get("state", {})
    status = {
        "bucket": bucket,
        "values": st.get("messages", 0),
        "history": cfg.get("max_msgs_per_subject", 1),
        "ttl": cfg.get("max_age", 0),
        "bytes": st.get("bytes", 0),
        "storage": cfg.get("storage"),
        "max_value_size": cfg.get("max_msg_size", -1),
        "max_bucket_size": cfg.get("max_bytes", -1),
        "stream": cfg.get("name"),
    }
    if ctx.json:
        ctx.out.json_out(status)
        return
    title = f"Information for Key-Value Store Bucket {bucket}"
    if created:
        ctx.out.print(f"Key-Value Store Bucket {bucket} was created\n")
    rows = [
        ("Bucket Name", bucket),
        ("History Kept", status["history"]),
        ("Values Stored", comma(status["values"])),
        ("Maximum Age", format_duration(status["ttl"]) if status["ttl"] else "unlimited"),
        backing_store(cfg),
        ("Bucket Size", human_bytes(status["bytes"])),
    ]
    ctx.out.print(render.sections(title, [("Configuration", rows)]))


async def cmd_status(ctx: Ctx) -> None:
    await _status(ctx, ctx.args.bucket)


async def cmd_put(ctx: Ctx) -> None:
    a = ctx.args
    if a.value is None:
        if stdin_is_tty():
            raise UsageError("VALUE is required (give it as an argument or on stdin)")
        value = read_stdin_bytes()
    else:
        value = a.value.encode()
    # put: unconditional; create: only a new (or deleted) key; update: only at the given revision
    last = getattr(a, "only_revision", "put")
    if last is None:
        last = parse_int(a.revision, flag="REVISION")
    kv = await _kv(ctx, a.bucket)
    try:
        if last == "put":
            rev = await kv.put(a.key, value)
        elif last == 0:
            rev = await kv.create(a.key, value)
        else:
            rev = await kv.update(a.key, value, last=last)
    except InvalidKeyError:
        raise UsageError(f"invalid key '{a.key}'") from None
    except Exception as exc:
        verb = {"put": "put", 0: "create"}.get(last, "update")
        raise CliError(f"could not {verb} {a.key}: {error_text(exc)}") from None
    if ctx.json:
        ctx.out.json_out({"bucket": a.bucket, "key": a.key, "revision": rev})
    else:
        ctx.out.print(value.decode(errors="replace"))


async def cmd_get(ctx: Ctx) -> None:
    a = ctx.args
    kv = await _kv(ctx, a.bucket)
    try:
        e = await kv.get(a.key, revision=parse_int(a.revision, flag="--revision") if a.revision else None)
    except KeyDeletedError:
        raise CliError(f"key {a.key} was deleted") from None
    except (KeyNotFoundError, NotFoundError):
        raise CliError(f"key {a.key} not found") from None
    value = text_of(e.value)
    if ctx.json:
        ctx.out.json_out(
            {
                "bucket": e.bucket,
                "key": e.key,
                **_value_json(e.value),
                "revision": e.revision,
                "delta": e.delta,
                "operation": e.operation or "PUT",
            }
        )
    elif a.raw:
        ctx.out.raw(e.value or b"", end=b"")
    else:
        ctx.out.print(f"{a.bucket} > {e.key} revision: {e.revision} {_ts(e)}".rstrip() + "\n")
        ctx.out.print(value)


def _value_json(value: bytes | None) -> dict:
    """``{"value": text}`` or ``{"value": base64, "encoding": "base64"}`` (see ``payload_json``)."""
    d = payload_json(value)
    d["value"] = d.pop("data")
    return d


async def cmd_del(ctx: Ctx) -> None:
    a = ctx.args
    confirm(f"Really delete key {a.key} from bucket {a.bucket}", a.force)
    kv = await _kv(ctx, a.bucket)
    await kv.delete(a.key)
    _done(ctx, {"bucket": a.bucket, "key": a.key, "operation": "DEL"}, f"Deleted key {a.key} from bucket {a.bucket}")


async def cmd_purge(ctx: Ctx) -> None:
    a = ctx.args
    confirm(f"Really purge key {a.key} and its history from bucket {a.bucket}", a.force)
    kv = await _kv(ctx, a.bucket)
    await kv.purge(a.key)
    _done(
        ctx,
        {"bucket": a.bucket, "key": a.key, "operation": "PURGE"},
        f"Purged key {a.key} and its history from bucket {a.bucket}",
    )


def _done(ctx: Ctx, doc: dict, text: str) -> None:
    if ctx.json:
        ctx.out.json_out(doc)
    else:
        ctx.out.print(text)


async def cmd_history(ctx: Ctx) -> None:
    a = ctx.args
    kv = await _kv(ctx, a.bucket)
    # nats-py's kv.history() leaves its ephemeral consumer for the server to expire; read the history with our
    # own watcher so the consumer is deleted when done.
    w = await kv.watch(a.key, include_history=True)
    entries = []
    try:
        while True:
            try:
                e = await w.updates(timeout=ctx.timeout)
            except Exception:  # nats-py's TimeoutError: nothing more arrived
                break
            if e is None or not hasattr(e, "key"):  # None: the watcher's "history done" marker
                break
            entries.append(e)
    finally:
        await stop_watcher(ctx, w)
    if not entries:
        raise CliError(f"key {a.key} not found")
    if ctx.json:
        ctx.out.json_out(
            [
                {"key": e.key, "revision": e.revision, "operation": e.operation or "PUT", **_value_json(e.value)}
                for e in entries
            ]
        )
        return
    rows = [
        {"key": e.key, "revision": e.revision, "operation": e.operation or "PUT", "value": text_of(e.value)}
        for e in entries
    ]
    ctx.out.print(
        render.table(
            f"History for {a.bucket} > {a.key}",
            ["Key", "Revision", "Op", "Length", "Value"],
            [[r["key"], r["revision"], r["operation"], len(r["value"]), r["value"][:40]] for r in rows],
        )
    )


async def cmd_keys(ctx: Ctx) -> None:
    kv = await _kv(ctx, ctx.args.bucket)
    try:
        keys = sorted(await kv.keys())
    except NotFoundError:
        keys = []
    except Exception as exc:  # nats-py raises NoKeysError when empty
        if type(exc).__name__ == "NoKeysError":
            keys = []
        else:
            raise
    if ctx.json:
        ctx.out.json_out(keys)
    elif not keys:
        ctx.out.print("No keys found in bucket")
    else:
        for k in keys:
            ctx.out.print(k)


async def cmd_watch(ctx: Ctx) -> None:
    a = ctx.args
    limit_n, wait_s = optional_count(a.count), optional_seconds(a.wait)
    kv = await _kv(ctx, a.bucket)
    w = await kv.watch(a.key, include_history=False)
    seen = 0
    ctx.summary = lambda: f"{seen} updates of {a.bucket} > {a.key}"
    try:
        # nats-py raises its own TimeoutError when nothing arrives, and yields None once initial values are in.
        async for e in arrivals(lambda t: w.updates(timeout=t), limit_n, wait_s, idle=3600.0, stop_on=(Exception,)):
            seen += 1
            value = text_of(e.value)
            op = e.operation or "PUT"
            if ctx.json:
                ctx.out.json_line(
                    {"bucket": e.bucket, "key": e.key, "revision": e.revision, "operation": op, **_value_json(e.value)}
                )
            else:
                ctx.out.print(f"[{_ts(e) or datetime.now().strftime('%H:%M:%S')}] {op} {e.bucket} > {e.key}: {value}")
            sys.stdout.flush()
    finally:
        await stop_watcher(ctx, w)


async def stop_watcher(ctx: Ctx, w) -> None:
    """Stop a nats-py KV/object watcher and delete its ephemeral consumer (nats-py only unsubscribes, leaving
    the consumer to the server's inactivity timer)."""
    sub = getattr(w, "_sub", None)
    stream, consumer = getattr(sub, "_stream", None), getattr(sub, "_consumer", None)
    await w.stop()
    if stream and consumer:
        try:
            await (await ctx.api()).request(f"CONSUMER.DELETE.{stream}.{consumer}")
        except CliError:
            pass  # already gone


async def cmd_ls(ctx: Ctx) -> None:
    if ctx.args.bucket:  # `kv ls BUCKET`: its keys, as the nats CLI does
        await cmd_keys(ctx)
        return
    infos, buckets = await bucket_streams(ctx, "KV_")
    if ctx.json:
        ctx.out.json_out(buckets)
        return
    if not buckets:
        ctx.out.print("No Key-Value buckets found")
        return
    rows = []
    for i in infos:
        c, st = i["config"], i.get("state", {})
        rows.append([c["name"][3:], c.get("description", ""), comma(st.get("messages")), human_bytes(st.get("bytes"))])
    ctx.out.print(render.table("Key-Value Buckets", ["Bucket", "Description", "Values", "Size"], rows))


async def cmd_rm(ctx: Ctx) -> None:
    a = ctx.args
    confirm(f"Really delete bucket {a.bucket}", a.force)
    await delete_bucket((await ctx.js()).delete_key_value(a.bucket), a.bucket)
    _done(ctx, {"bucket": a.bucket, "deleted": True}, f"Deleted bucket {a.bucket}")
