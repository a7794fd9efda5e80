"""A real full disk for tests and the disk-full bench: a small tmpfs, filled by a filler file.

``small_fs(path, size_mb)`` mounts a tmpfs of that size on ``path`` (root only: without the
privilege it raises :class:`NoSmallFs`, which tests turn into a skip) and unmounts it on exit.
``fill(path)`` writes a filler file until the file system refuses (ENOSPC) and returns its path;
deleting it gives the space back.

``disk_full_run(kind, root)`` is the scenario of issue 14 (a durable consumer, a full disk, space
back, a kill -9 and a restart) against ``natsd`` or ``reference``; it returns the figures the
acceptance test asserts and the bench prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from pathlib import Path

__all__ = ["NoSmallFs", "small_fs", "fill", "disk_full_run"]


class NoSmallFs(RuntimeError):
    """No small file system can be mounted here (not root, or no tmpfs)."""


@contextlib.contextmanager
def small_fs(path: Path | str, size_mb: int):
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        raise NoSmallFs("mounting a tmpfs needs root")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)], capture_output=True, text=True
    )
    if r.returncode != 0:
        raise NoSmallFs(f"mount failed: {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(path: Path | str) -> Path:
    """Write zeros into ``path``/filler until ENOSPC; returns the filler's path."""
    filler = Path(path) / "filler"
    with open(filler, "wb", buffering=0) as f:
        chunk = b"\0" * 65536
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
        # The last few KB (a partial page) too.
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError:
            pass
    return filler


async def _publish(js, n: int, payload: bytes, acked: list[int], counts: dict) -> None:
    import nats
    from nats.js.errors import APIError

    for _ in range(n):
        try:
            ack = await js.publish("s.x", payload, timeout=2)
        except APIError as e:
            counts[f"error {e.err_code}"] = counts.get(f"error {e.err_code}", 0) + 1
        except nats.errors.TimeoutError:
            counts["unanswered"] = counts.get("unanswered", 0) + 1
        else:
            acked.append(ack.seq)
            counts["acked"] = counts.get("acked", 0) + 1


async def _burst(nc, n: int, payload: bytes, acked: list[int], counts: dict) -> None:
    """``n`` publishes in flight at once (pipelined, as a busy producer sends them)."""
    import json

    async def one():
        try:
            m = await nc.request("s.x", payload, timeout=5)
        except Exception:
            return None
        return json.loads(m.data)

    for r in await asyncio.gather(*(one() for _ in range(n))):
        if r is None:
            counts["unanswered"] = counts.get("unanswered", 0) + 1
        elif "error" in r:
            k = f"error {r['error']['err_code']}"
            counts[k] = counts.get(k, 0) + 1
        else:
            acked.append(r["seq"])
            counts["acked"] = counts.get("acked", 0) + 1


async def _drain(js, durable: str) -> list[int]:
    import nats

    sub = await js.pull_subscribe("s.>", durable=durable, stream="S")
    seqs: list[int] = []
    while True:
        try:
            msgs = await sub.fetch(200, timeout=1)
        except nats.errors.TimeoutError:
            break
        for m in msgs:
            seqs.append(m.metadata.sequence.stream)
            await m.ack_sync()
    await sub.unsubscribe()
    return seqs


def disk_full_run(
    kind: str,
    root: Path,
    *,
    fs_mb: int = 6,
    before: int = 200,
    while_full: int = 50,
    burst: int = 200,
    after: int = 50,
    payload_size: int = 2048,
) -> dict:
    """Run the disk-full scenario against ``kind`` on a fresh ``fs_mb`` MB tmpfs under ``root``:

    1. a file stream ``S`` with a durable pull consumer ``D``; ``before`` publishes, consumed and acked;
    2. the disk is filled; ``while_full`` publishes one by one, then ``burst`` in flight at once;
       D consumes and acks what it gets;
    3. the filler is deleted (space is back; no operator action on the server); ``after``
       publishes; D consumes and acks;
    4. kill -9, restart on the same directory, ``after`` more publishes; D consumes.

    ``max_file_store`` is set far above the disk so the disk, not the limit, is what fills.
    Returns the counts of each phase, every acknowledged sequence and every delivered one,
    ``lost`` (acknowledged but never delivered to D) and ``unanswered``."""
    import nats

    from tests.helpers.servers import start_server

    mnt = root / f"fs-{kind}"
    conf = root / f"{kind}.conf"
    conf.write_text("jetstream { max_file_store: 100GB }\n")
    out: dict = {"kind": kind}
    acked: list[int] = []
    delivered: list[int] = []
    payload = os.urandom(payload_size)
    with small_fs(mnt, fs_mb):
        sd = mnt / "sd"

        async def phase1(url: str) -> None:
            nc = await nats.connect(url)
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s.>"])
            await js.add_consumer("S", durable_name="D", ack_policy="explicit")
            c: dict = {}
            await _publish(js, before, payload, acked, c)
            delivered.extend(await _drain(js, "D"))
            out["before"] = c
            filler = fill(mnt)
            c = {}
            await _publish(js, while_full, payload, acked, c)
            await _burst(nc, burst, payload, acked, c)
            delivered.extend(await _drain(js, "D"))
            out["while_full"] = c
            filler.unlink()
            c = {}
            await _publish(js, after, payload, acked, c)
            delivered.extend(await _drain(js, "D"))
            out["space_back"] = c
            await nc.close()

        async def phase2(url: str) -> None:
            nc = await nats.connect(url)
            js = nc.jetstream()
            c: dict = {}
            await _publish(js, after, payload, acked, c)
            delivered.extend(await _drain(js, "D"))
            out["after_restart"] = c
            await nc.close()

        srv = start_server(kind, root / f"logs-{kind}", config=conf, store_dir=sd)
        try:
            asyncio.run(phase1(srv.url))
        finally:
            srv.kill()
        srv = start_server(kind, root / f"logs-{kind}", config=conf, store_dir=sd)
        try:
            asyncio.run(phase2(srv.url))
        finally:
            srv.stop()
    out["acked"] = acked
    out["delivered"] = delivered
    out["lost"] = sorted(set(acked) - set(delivered))
    out["delivered_twice"] = len(delivered) - len(set(delivered))
    out["acked_twice"] = len(acked) - len(set(acked))
    out["unanswered"] = sum(
        out[p].get("unanswered", 0) for p in ("before", "while_full", "space_back", "after_restart")
    )
    return out
