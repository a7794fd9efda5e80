"""``natsctl object …``: object store buckets through nats-py's ObjectStore (streams named ``OBJ_<bucket>``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from nats.js.api import ObjectStoreConfig
from nats.js.errors import NotFoundError, ObjectNotFoundError

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
    read_stdin_bytes,
    strip_type,
)
from natsd.cli.context import Ctx


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("object", aliases=["obj"], help="object store buckets")
    s = p.add_subparsers(dest="object_cmd", metavar="VERB", parser_class=type(p))
    s.required = True

    a = s.add_parser("add", aliases=["create"], parents=[common], help="create a bucket")
    bucket_flags(a)
    a.set_defaults(func=cmd_add)

    put = s.add_parser("put", parents=[common], help="store a file")
    put.add_argument("bucket")
    put.add_argument("file", help="file to store ('-' for stdin, then --name is required)")
    put.add_argument("--name", default=None, help="object name (default: the file's base name)")
    put.add_argument("--description", default=None)
    put.set_defaults(func=cmd_put)

    g = s.add_parser("get", parents=[common], help="retrieve an object")
    g.add_argument("bucket")
    g.add_argument("name")
    g.add_argument("-O", "--output", default=None, help="write to this file ('-' for stdout; default: the name)")
    g.set_defaults(func=cmd_get)

    ls = s.add_parser("ls", aliases=["list"], parents=[common], help="list buckets, or a bucket's objects")
    ls.add_argument("bucket", nargs="?")
    ls.set_defaults(func=cmd_ls)

    rm = s.add_parser("rm", aliases=["del", "delete"], parents=[common], help="delete an object, or a whole bucket")
    rm.add_argument("bucket")
    rm.add_argument("name", nargs="?")
    rm.set_defaults(func=cmd_rm)

    i = s.add_parser("info", aliases=["status"], parents=[common], help="bucket status, or an object's metadata")
    i.add_argument("bucket")
    i.add_argument("name", nargs="?")
    i.set_defaults(func=cmd_info)

    w = s.add_parser("watch", parents=[common], help="print changes as they happen")
    w.add_argument("bucket")
    w.add_argument("--count", default=None)
    w.add_argument("--wait", default=None)
    w.set_defaults(func=cmd_watch)

    se = s.add_parser("seal", parents=[common], help="make a bucket read-only")
    se.add_argument("bucket")
    se.set_defaults(func=cmd_seal)


async def _obs(ctx: Ctx, bucket: str):
    return await open_bucket((await ctx.js()).object_store(bucket), bucket)


def _info_dict(o) -> dict:
    return {
        "name": o.name,
        "bucket": o.bucket,
        "nuid": o.nuid,
        "size": o.size or 0,
        "chunks": o.chunks or 0,
        "digest": o.digest,
        "mtime": o.mtime,
        "deleted": bool(o.deleted),
        "description": o.description,
    }


async def cmd_add(ctx: Ctx) -> None:
    a = ctx.args
    js = await ctx.js()
    cfg = ObjectStoreConfig(bucket=a.bucket, **bucket_limits(a))
    # nats-py overwrites config.bucket with its `bucket` argument, so pass both.
    await create_bucket(js.create_object_store(a.bucket, config=cfg), a.bucket)
    if not ctx.json:
        ctx.out.print(f"Object Store Bucket {a.bucket} was created\n")
    await _bucket_status(ctx, a.bucket)


async def _bucket_status(ctx: Ctx, bucket: str) -> None:
    api = await ctx.api()
    info = await api.request(f"STREAM.INFO.OBJ_{bucket}")
    cfg, st = info["config"], info.get("state", {})
    if ctx.json:
        ctx.out.json_out(
            {
                "bucket": bucket,
                "sealed": bool(cfg.get("sealed")),
                "size": st.get("bytes", 0),
                "ttl": cfg.get("max_age", 0),
                "storage": cfg.get("storage"),
                "stream": cfg["name"],
                "stream_info": strip_type(info),
            }
        )
        return
    rows = [
        ("Bucket Name", bucket),
        ("Sealed", str(bool(cfg.get("sealed"))).lower()),
        ("Size", human_bytes(st.get("bytes", 0))),
        ("Maximum Age", format_duration(cfg.get("max_age")) if cfg.get("max_age") else "unlimited"),
        backing_store(cfg),
    ]
    ctx.out.print(render.sections(f"Information for Object Store Bucket {bucket}", [("Configuration", rows)]))


async def cmd_put(ctx: Ctx) -> None:
    a = ctx.args
    obs = await _obs(ctx, a.bucket)
    if a.file == "-":
        if not a.name:
            raise CliError("--name is required when reading the object from stdin")
        data: object = read_stdin_bytes()
        name = a.name
    else:
        path = Path(a.file)
        if not path.is_file():
            raise CliError(f"{a.file} is not a readable file")
        name = a.name or path.name
        data = path.read_bytes()
    try:
        info = await obs.put(name, data)
    except Exception as exc:
        raise CliError(f"could not put {name}: {error_text(exc)}") from None
    if ctx.json:
        ctx.out.json_out(_info_dict(info))
    else:
        ctx.out.print(f"Stored {name} in bucket {a.bucket}: {human_bytes(info.size)} in {comma(info.chunks)} chunks")


async def cmd_get(ctx: Ctx) -> None:
    a = ctx.args
    obs = await _obs(ctx, a.bucket)
    try:
        res = await obs.get(a.name)
    except (ObjectNotFoundError, NotFoundError):
        raise CliError(f"object {a.name} not found in bucket {a.bucket}") from None
    data = res.data or b""
    out = a.output or os.path.basename(a.name)
    if out == "-":
        ctx.out.raw(data, end=b"")
        return
    if os.path.exists(out) and not a.force:
        raise UsageError(f"{out} exists: pass -f to overwrite it (or -O FILE to write elsewhere)")
    Path(out).write_bytes(data)
    if ctx.json:
        ctx.out.json_out({"name": a.name, "file": out, "size": len(data)})
    else:
        ctx.out.print(f"Wrote {human_bytes(len(data))} to {out}")


async def cmd_ls(ctx: Ctx) -> None:
    a = ctx.args
    if not a.bucket:
        infos, buckets = await bucket_streams(ctx, "OBJ_")
        if ctx.json:
            ctx.out.json_out(buckets)
        elif not buckets:
            ctx.out.print("No Object Store buckets found")
        else:
            ctx.out.print(
                render.table(
                    "Object Store Buckets",
                    ["Bucket", "Size"],
                    [[b, human_bytes(i["state"].get("bytes"))] for b, i in zip(buckets, infos)],
                )
            )
        return
    obs = await _obs(ctx, a.bucket)
    try:
        items = await obs.list(ignore_deletes=True)
    except NotFoundError:
        items = []
    items = sorted(items, key=lambda o: o.name)
    if ctx.json:
        ctx.out.json_out([_info_dict(o) for o in items])
    elif not items:
        ctx.out.print("No entries found")
    else:
        ctx.out.print(
            render.table(
                f"Bucket {a.bucket}",
                ["Name", "Size", "Time"],
                [[o.name, human_bytes(o.size), o.mtime or ""] for o in items],
            )
        )


async def cmd_rm(ctx: Ctx) -> None:
    a = ctx.args
    if a.name:
        confirm(f"Really delete object {a.name} from bucket {a.bucket}", a.force)
        obs = await _obs(ctx, a.bucket)
        try:
            await obs.delete(a.name)
        except (ObjectNotFoundError, NotFoundError):
            raise CliError(f"object {a.name} not found in bucket {a.bucket}") from None
        if ctx.json:
            ctx.out.json_out({"bucket": a.bucket, "name": a.name, "deleted": True})
        else:
            ctx.out.print(f"Deleted object {a.name} from bucket {a.bucket}")
        return
    confirm(f"Really delete bucket {a.bucket} and all its objects", a.force)
    await delete_bucket((await ctx.js()).delete_object_store(a.bucket), a.bucket)
    if ctx.json:
        ctx.out.json_out({"bucket": a.bucket, "deleted": True})
    else:
        ctx.out.print(f"Deleted bucket {a.bucket}")


async def cmd_info(ctx: Ctx) -> None:
    a = ctx.args
    if not a.name:
        await _bucket_status(ctx, a.bucket)
        return
    obs = await _obs(ctx, a.bucket)
    try:
        o = await obs.get_info(a.name)
    except (ObjectNotFoundError, NotFoundError):
        raise CliError(f"object {a.name} not found in bucket {a.bucket}") from None
    if ctx.json:
        ctx.out.json_out(_info_dict(o))
        return
    rows = [
        ("Name", o.name),
        ("Bucket", o.bucket),
        ("Size", human_bytes(o.size)),
        ("Chunks", comma(o.chunks)),
        ("Digest", o.digest or ""),
        ("Modified", o.mtime or ""),
        ("NUID", o.nuid),
    ]
    ctx.out.print(render.sections(f"Object information for {a.bucket} > {o.name}", [("Object", rows)]))


async def cmd_watch(ctx: Ctx) -> None:
    a = ctx.args
    limit_n, wait_s = optional_count(a.count), optional_seconds(a.wait)
    obs = await _obs(ctx, a.bucket)
    w = await obs.watch(include_history=False)
    seen = 0
    ctx.summary = lambda: f"{seen} changes in {a.bucket}"
    try:
        # nats-py raises its own TimeoutError when nothing arrives (see kv watch).
        async for o in arrivals(lambda t: w.updates(timeout=t), limit_n, wait_s, idle=3600.0, stop_on=(Exception,)):
            seen += 1
            if ctx.json:
                ctx.out.json_line(_info_dict(o))
            else:
                op = "DEL" if o.deleted else "PUT"
                ctx.out.print(f"[{o.mtime or ''}] {op} {o.bucket} > {o.name}: {human_bytes(o.size)}")
            sys.stdout.flush()
    finally:
        from natsd.cli.kv import stop_watcher

        await stop_watcher(ctx, w)


async def cmd_seal(ctx: Ctx) -> None:
    a = ctx.args
    confirm(f"Really seal bucket {a.bucket} (it cannot be unsealed)", a.force)
    obs = await _obs(ctx, a.bucket)
    await obs.seal()
    if ctx.json:
        ctx.out.json_out({"bucket": a.bucket, "sealed": True})
    else:
        ctx.out.print(f"Object Store Bucket {a.bucket} was sealed")
