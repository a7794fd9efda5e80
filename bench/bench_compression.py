"""``compression: s2`` on a file stream, natsd vs nats-server in the same run (issue 12, item 6).

For each server: a fresh server, a file stream ``BENCH`` created with ``compression: s2`` (and,
for comparison, one run with ``none``), then ``bench/bin/pubasync`` (``bench/c/pubasync.c``,
libnats, 4,096 publishes in flight) publishes N compressible order-like records of SIZE bytes;
reported: acked msgs/s, then the bytes the stream's message blocks take on disk once the
server's background compression has finished (``msgs/*.blk``; both servers compress a block
when it is sealed) next to the stream's logical ``state.bytes``.

    .venv/bin/python bench/bench_compression.py                 # N=200,000, SIZE=512
    .venv/bin/python bench/bench_compression.py --n 100000 --size 256

Ratios: publish rate natsd / nats-server (target >= 0.6 with s2); disk bytes natsd / nats-server
(below 1: natsd's blocks are smaller). The machine is shared: rates are noisy, run it twice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import ROOT, ServerProc  # noqa: E402

PUBASYNC = ROOT / "bench" / "bin" / "pubasync"


def build() -> None:
    src = ROOT / "bench" / "c" / "pubasync.c"
    if PUBASYNC.exists() and PUBASYNC.stat().st_mtime >= src.stat().st_mtime:
        return
    PUBASYNC.parent.mkdir(parents=True, exist_ok=True)
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "libnats"], capture_output=True, text=True, check=True
    ).stdout.split()
    subprocess.run(["cc", "-O2", "-Wall", "-pthread", str(src), "-o", str(PUBASYNC), *flags], check=True)


async def _api(url: str, subject: str, body: dict) -> dict:
    import nats

    nc = await nats.connect(url)
    try:
        msg = await nc.request(subject, json.dumps(body).encode(), timeout=30)
        return json.loads(msg.data)
    finally:
        await nc.close()


def blocks_on_disk(store: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(store):
        if os.path.basename(dirpath) == "msgs" and "BENCH" in dirpath:
            total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files if f.endswith(".blk"))
    return total


def run_one(kind: str, compression: str, n: int, size: int) -> tuple[float, int, int]:
    srv = ServerProc(kind)
    try:
        cfg = {"name": "BENCH", "subjects": ["bench.s2"], "storage": "file", "compression": compression}
        out = asyncio.run(_api(srv.url, "$JS.API.STREAM.CREATE.BENCH", cfg))
        if "error" in out:
            raise RuntimeError(f"{kind}: {out['error']}")
        res = subprocess.run(
            [str(PUBASYNC), srv.url, "bench.s2", str(n), str(size)], capture_output=True, text=True, timeout=600
        )
        rate = next((float(t[5:]) for t in res.stdout.split() if t.startswith("rate=")), float("nan"))
        if res.returncode:
            sys.stderr.write(f"[{kind}] {res.stderr.strip()}\n")
        info = asyncio.run(_api(srv.url, "$JS.API.STREAM.INFO.BENCH", {}))
        # Let background compression of the sealed blocks finish (both servers do it off the
        # publish path), then read what the blocks take.
        disk, same = -1, 0
        for _ in range(100):  # settled: unchanged for 1 s (or 20 s passed)
            time.sleep(0.2)
            now = blocks_on_disk(srv.store)
            same = same + 1 if now == disk else 0
            disk = now
            if same >= 5:
                break
        return rate, disk, int(info["state"]["bytes"])
    finally:
        srv.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=512)
    args = ap.parse_args(argv)
    build()
    rows = {}
    for compression in ("s2", "none"):
        for kind in ("nats-server", "natsd"):
            rows[kind, compression] = run_one(kind, compression, args.n, args.size)
    print(f"async publish of {args.n:,} x {args.size} B compressible records into a file stream")
    print(f"{'compression':<12}{'server':<13}{'msgs/s':>10}{'disk MB':>10}{'logical MB':>12}")
    for (kind, compression), (rate, disk, logical) in rows.items():
        print(f"{compression:<12}{kind:<13}{rate:>10,.0f}{disk / 1e6:>10.1f}{logical / 1e6:>12.1f}")
    for compression in ("s2", "none"):
        ref, ours = rows["nats-server", compression], rows["natsd", compression]
        print(
            f"{compression}: publish ratio natsd/nats-server {ours[0] / ref[0]:.2f}; "
            f"disk ratio natsd/nats-server {ours[1] / ref[1]:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
