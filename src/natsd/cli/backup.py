"""Backups: ``stream backup|restore`` (data snapshots) and ``backup|restore`` (whole-account configuration).

Stream snapshot protocol (``$JS.API.STREAM.SNAPSHOT.<stream>``), as nats-server speaks it:

1. Subscribe to a fresh inbox, then request ``{"deliver_subject": <inbox>, "no_consumers": bool,
   "chunk_size": n, "jsck": bool}``. The reply is ``{"config": StreamConfig, "state": StreamState}``.
2. The server publishes the archive to the inbox in chunks. A chunk with a reply subject
   (``$JS.SNAPSHOT.ACK.<stream>.<id>.<len>.<index>``) must be answered with an empty message: that is the
   flow control (the server keeps a window of unacknowledged chunks and gives up after a few seconds).
3. The end is a message with an empty body and a status header: ``NATS/1.0 204`` means done, anything
   else (``408 No Interest``, ``500 <error>``) is the error.

Restore (``$JS.API.STREAM.RESTORE.<stream>``): request ``{"config", "state"}``; the reply names a
``deliver_subject``. Each chunk is sent there **as a request** and answered with an empty message (a
non-empty answer is an error JSON). An empty request ends the upload and its reply is the
``stream_create_response`` of the restored stream.

The archive is opaque to this tool (nats-server 2.15 sends an S2-framed ``NATSARC1`` archive, older ones an S2
tar; natsd sends the same ``NATSARC1`` archive Snappy-framed, which nats-server reads too): whatever one server wrote
is handed back to a server unchanged. One exception: a backup written by natsd before it framed its archives (the
file starts with the bare ``NATSARC1`` magic) is Snappy-framed on the way up (``cramjam``), so that nats-server
restores it as well as natsd does.

Backup directory of ``stream backup STREAM DIR`` (file names as the ``nats`` tool uses them):

* ``DIR/backup.json``: ``{"config": StreamConfig, "state": StreamState}`` from the snapshot reply (UTF-8 JSON).
* ``DIR/stream.tar.s2``: the archive bytes exactly as received, concatenated in chunk order.

Account backup ``backup DIR [--data]``:

* ``DIR/stream_<STREAM>.json``: the StreamConfig (the same JSON ``stream add --config`` takes).
* ``DIR/stream_<STREAM>_consumer_<CONSUMER>.json``: the ConsumerConfig plus ``"stream_name"``
  (``consumer add --config`` takes it).
* with ``--data``: ``DIR/stream_<STREAM>/`` holding a stream backup as above (consumers included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from natsd.atomicfile import atomic_write
from natsd.cli import render
from natsd.cli.common import (
    CliError,
    UsageError,
    api_reply,
    comma,
    dumps,
    human_bytes,
    parse_size,
    read_json_file,
    strip_type,
    without_server_metadata,
)
from natsd.cli.context import Ctx

META_FILE = "backup.json"
DATA_FILE = "stream.tar.s2"
#: Bytes per restore chunk: well under the default 1 MiB max_payload of both servers.
RESTORE_CHUNK = 128 * 1024
#: The final restore request waits this long: the server rebuilds the stream before it answers.
RESTORE_FINISH_TIMEOUT = 3600.0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    b = sub.add_parser("backup", parents=[common], help="back up all stream and consumer configurations")
    b.add_argument("directory")
    b.add_argument("--data", action="store_true", help="also snapshot every stream's data")
    b.set_defaults(func=cmd_account_backup)

    r = sub.add_parser("restore", parents=[common], help="restore configurations saved by `natsctl backup`")
    r.add_argument("directory")
    r.add_argument("--update-streams", action="store_true", help="edit existing streams in place to match the backup")
    r.set_defaults(func=cmd_account_restore)


@contextmanager
def _progress(ctx: Ctx, description: str, total: int | None) -> Iterator[Any]:
    """A rich progress bar on a terminal (unless --no-progress); a no-op advance() otherwise."""
    if ctx.out.show_progress():
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeElapsedColumn, TransferSpeedColumn

        from rich.console import Console

        # On stderr: stdout stays the command's report (or its JSON).
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeElapsedColumn(),
            transient=False,
            console=Console(stderr=True),
        ) as prog:
            task = prog.add_task(description, total=total or None)

            class _Bar:
                def advance(self, n: int) -> None:
                    prog.advance(task, n)

                def finish(self) -> None:
                    prog.update(task, total=prog.tasks[0].completed)

            yield _Bar()
    else:

        class _Null:
            def advance(self, n: int) -> None:
                pass

            def finish(self) -> None:
                pass

        yield _Null()


# ---------------------------------------------------------------------------------------------------------------
# Stream snapshot
# ---------------------------------------------------------------------------------------------------------------


async def snapshot_stream(
    ctx: Ctx,
    stream: str,
    directory: Path,
    *,
    consumers: bool = True,
    check: bool = False,
    chunk_size: int = 128 * 1024,
    quiet: bool = False,
) -> dict:
    """Snapshot ``stream`` into ``directory`` (see the module docstring); returns a summary dict."""
    nc = await ctx.nc()
    api = await ctx.api()
    directory.mkdir(parents=True, exist_ok=True)
    inbox = nc.new_inbox()
    done: asyncio.Future = asyncio.get_running_loop().create_future()
    stats = {"bytes": 0, "chunks": 0}
    data_path = directory / DATA_FILE
    f = open(data_path, "wb")  # closed in finally; written from the subscription callback
    bar_holder: list[Any] = []

    async def on_chunk(msg) -> None:
        if done.done():
            return
        if not msg.data:
            status = (msg.headers or {}).get("Status", "") if msg.headers else ""
            if status in ("", "204"):
                done.set_result(None)
            else:
                desc = msg.headers.get("Description", "")
                done.set_exception(CliError(f"snapshot of {stream} failed: {status} {desc}".strip()))
            return
        try:
            f.write(msg.data)
        except OSError as exc:
            done.set_exception(CliError(f"writing {data_path}: {exc.strerror}"))
            return
        stats["bytes"] += len(msg.data)
        stats["chunks"] += 1
        if bar_holder:
            bar_holder[0].advance(len(msg.data))
        if msg.reply:
            await nc.publish(msg.reply, b"")

    sub = await nc.subscribe(inbox, cb=on_chunk, pending_msgs_limit=-1, pending_bytes_limit=-1)
    t0 = time.perf_counter()
    completed = False
    try:
        try:
            resp = await api.request(
                f"STREAM.SNAPSHOT.{stream}",
                {
                    "deliver_subject": inbox,
                    "no_consumers": not consumers,
                    "chunk_size": chunk_size,
                    "jsck": check,
                },
            )
        except BaseException:
            done.cancel()
            raise
        meta = {"config": resp.get("config"), "state": resp.get("state")}
        (directory / META_FILE).write_text(dumps(meta) + "\n", encoding="utf-8")
        state = resp.get("state") or {}
        if not quiet and not ctx.json:
            ctx.out.print(
                f'Starting backup of Stream "{stream}" with {comma(state.get("messages"))} messages '
                f"({human_bytes(state.get('bytes'))})"
            )
        with _progress(ctx, f"backup {stream}", state.get("bytes")) as bar:
            bar_holder.append(bar)
            await done
            bar.finish()
        completed = True
    finally:
        f.close()
        if not completed:
            # A failed snapshot must not leave something that looks like a backup behind.
            for p in (data_path, directory / META_FILE):
                try:
                    p.unlink()
                except OSError:
                    pass
        try:
            await sub.unsubscribe()
        except Exception:  # connection may already be gone after an error
            pass
    elapsed = time.perf_counter() - t0
    summary = {
        "stream": stream,
        "directory": str(directory),
        "bytes": stats["bytes"],
        "chunks": stats["chunks"],
        "messages": (resp.get("state") or {}).get("messages", 0),
        "seconds": round(elapsed, 3),
    }
    if not quiet and not ctx.json:
        ctx.out.print(
            f"Received {human_bytes(stats['bytes'])} of compressed data in {comma(stats['chunks'])} chunks "
            f'for stream "{stream}" in {elapsed:.3f}s, {comma(summary["messages"])} messages'
        )
    return summary


async def restore_stream(
    ctx: Ctx, directory: Path, *, stream: str | None = None, config: dict | None = None, quiet: bool = False
) -> dict:
    """Upload the backup in ``directory``; returns the restored StreamInfo."""
    meta_path, data_path = directory / META_FILE, directory / DATA_FILE
    if not meta_path.is_file() or not data_path.is_file():
        raise UsageError(f"{directory} is not a stream backup (needs {META_FILE} and {DATA_FILE})")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UsageError(f"invalid {meta_path}: {exc}") from None
    cfg = config if config is not None else meta.get("config") or {}
    name = cfg.get("name")
    if stream and stream != name:
        raise UsageError(f"the backup holds stream {name!r}: a stream's name may not be changed during restore")
    if not name:
        raise UsageError(f"{meta_path} has no config.name")
    nc = await ctx.nc()
    api = await ctx.api()
    resp = await api.request(f"STREAM.RESTORE.{name}", {"config": cfg, "state": meta.get("state") or {}})
    deliver = resp.get("deliver_subject")
    if not deliver:
        raise CliError(f"the server gave no deliver_subject for the restore of {name}")
    size = data_path.stat().st_size
    if not quiet and not ctx.json:
        ctx.out.print(f'Starting restore of Stream "{name}" from file "{data_path}" ({human_bytes(size)})')
    t0 = time.perf_counter()
    with _progress(ctx, f"restore {name}", size) as bar, open(data_path, "rb") as f:
        for raw_len, chunk in _upload_chunks(f):
            try:
                ack = await nc.request(deliver, chunk, timeout=ctx.timeout)
            except Exception as exc:  # timeout or no responders
                raise CliError(f"restore of {name} failed while sending data: {type(exc).__name__}") from None
            if ack.data:
                _raise_if_error(ack.data, name)
            bar.advance(raw_len)
        try:
            final = await nc.request(deliver, b"", timeout=RESTORE_FINISH_TIMEOUT)
        except Exception as exc:
            raise CliError(f"restore of {name} failed at the end: {type(exc).__name__}") from None
    info = _raise_if_error(final.data, name)
    if not quiet and not ctx.json:
        ctx.out.print(f'Restored stream "{name}" in {time.perf_counter() - t0:.3f}s\n')
    return info


#: The first bytes of an unframed natsd archive (what older natsd versions sent).
_BARE_ARCHIVE = b"NATSARC1"


def _upload_chunks(f) -> Iterator[tuple[int, bytes]]:
    """(file bytes consumed, chunk to send) for the backup file ``f``: the file as it is, or, for
    an old unframed natsd archive, Snappy-framed on the fly (chunks then vary in size)."""
    head = f.read(len(_BARE_ARCHIVE))
    if head != _BARE_ARCHIVE:
        f.seek(0)
        while chunk := f.read(RESTORE_CHUNK):
            yield len(chunk), chunk
        return
    import cramjam  # only for old backups

    comp = cramjam.snappy.Compressor()
    comp.compress(head)
    while raw := f.read(RESTORE_CHUNK):
        comp.compress(raw)
        out = bytes(comp.flush())
        if out:
            yield len(raw), out
    out = bytes(comp.finish())
    if out:
        yield len(head), out


def _raise_if_error(data: bytes, name: str) -> dict:
    return api_reply(data, f"restore of {name}: unexpected reply")


async def cmd_stream_backup(ctx: Ctx) -> None:
    a = ctx.args
    summary = await snapshot_stream(
        ctx,
        a.stream,
        Path(a.directory),
        consumers=not a.no_consumers,
        check=a.check,
        chunk_size=parse_size(a.chunk_size, flag="--chunk-size"),
    )
    if ctx.json:
        ctx.out.json_out(summary)


async def cmd_stream_restore(ctx: Ctx) -> None:
    a = ctx.args
    if len(a.paths) > 2:
        raise UsageError("stream restore takes [STREAM] DIRECTORY")
    stream, directory = (a.paths[0], a.paths[1]) if len(a.paths) == 2 else (None, a.paths[0])
    cfg = read_json_file(a.config) if a.config else None
    info = await restore_stream(ctx, Path(directory), stream=stream, config=cfg)
    if ctx.json:
        ctx.out.json_out(strip_type(info))
    elif info.get("config"):
        ctx.out.print(render.stream_info(info))


# ---------------------------------------------------------------------------------------------------------------
# Whole-account configuration backup
# ---------------------------------------------------------------------------------------------------------------


def _write_json(path: Path, obj: Any) -> None:
    atomic_write(path, (dumps(obj) + "\n").encode("utf-8"), fsync=False)


async def cmd_account_backup(ctx: Ctx) -> None:
    a = ctx.args
    d = Path(a.directory)
    d.mkdir(parents=True, exist_ok=True)
    api = await ctx.api()
    ctx.out.log(f"Creating JetStream backup into {d}")
    streams = await api.stream_infos()
    written: list[str] = []
    for info in streams:
        cfg = without_server_metadata(info["config"])
        name = cfg["name"]
        p = d / f"stream_{name}.json"
        ctx.out.log(f"Stream {name} to {p}")
        _write_json(p, cfg)
        written.append(p.name)
        for ci in sorted(await api.paged(f"CONSUMER.LIST.{name}", "consumers"), key=lambda i: i["name"]):
            ccfg = without_server_metadata(ci["config"])
            if not (ccfg.get("durable_name") or ccfg.get("name")):
                continue
            cp = d / f"stream_{name}_consumer_{ci['name']}.json"
            ctx.out.log(f"Consumer {name} > {ci['name']} to {cp}")
            _write_json(cp, {"stream_name": name, **ccfg})
            written.append(cp.name)
        if a.data:
            dd = d / f"stream_{name}"
            ctx.out.log(f"Stream {name} data to {dd}")
            await snapshot_stream(ctx, name, dd, consumers=True, quiet=True)
            written.append(dd.name + "/")
    ctx.out.log("Configuration backup complete")
    if ctx.json:
        ctx.out.json_out({"directory": str(d), "files": written})


async def cmd_account_restore(ctx: Ctx) -> None:
    a = ctx.args
    d = Path(a.directory)
    if not d.is_dir():
        raise UsageError(f"{d} is not a directory")
    api = await ctx.api()
    streams: list[dict] = []
    consumers: list[dict] = []
    for p in sorted(d.glob("stream_*.json")):
        ctx.out.log(f"Reading file {p}")
        data = read_json_file(str(p), flag="backup")
        (consumers if "stream_name" in data else streams).append(data)
    existing = set(await api.stream_names())
    restored_with_data: set[str] = set()
    done: dict[str, list[str]] = {"streams": [], "updated": [], "unchanged": [], "consumers": []}
    for cfg in streams:
        name = cfg["name"]
        if name in existing:
            cur = without_server_metadata((await api.request(f"STREAM.INFO.{name}"))["config"])
            if cur == cfg:
                ctx.out.log(f"Stream {name} is up to date")
                done["unchanged"].append(name)
                continue
            if not a.update_streams:
                raise CliError(f"Stream {name} exists with a different configuration, use --update-streams")
            ctx.out.log(f"Updating Stream {name} configuration")
            await api.request(f"STREAM.UPDATE.{name}", cfg)
            done["updated"].append(name)
            continue
        done["streams"].append(name)
        data_dir = d / f"stream_{name}"
        if (data_dir / DATA_FILE).is_file():
            ctx.out.log(f"Restoring Stream {name} with its data from {data_dir}")
            await restore_stream(ctx, data_dir, stream=name, quiet=True)
            restored_with_data.add(name)
        else:
            ctx.out.log(f"Restoring Stream {name}")
            await api.request(f"STREAM.CREATE.{name}", cfg)
    for ccfg in consumers:
        stream = ccfg.pop("stream_name")
        cname = ccfg.get("durable_name") or ccfg.get("name")
        names = set(await api.consumer_names(stream))
        if cname in names:
            if stream not in restored_with_data:
                ctx.out.log(f"Consumer {stream} > {cname} exists")
            continue
        ctx.out.log(f"Restoring Consumer {stream} > {cname}")
        await api.request(
            f"CONSUMER.CREATE.{stream}.{cname}", {"stream_name": stream, "config": ccfg, "action": "create"}
        )
        done["consumers"].append(f"{stream} > {cname}")
    if ctx.json:  # what was restored (created), updated, or already as the backup has it
        ctx.out.json_out({"directory": str(d), **done})
