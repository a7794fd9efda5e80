"""Issue 12's schedules measure: N pending message schedules (default 100,000), natsd and
nats-server in the same run (both as subprocesses, file storage).

    .venv/bin/python bench/bench_schedules.py [N] [--idle SECONDS]

A stream with ``allow_msg_schedules`` gets N schedule messages, each on its own subject
``sched.<i>`` with ``Nats-Schedule: @at <one day ahead>`` and a target (async publish, 4,096 in
flight). Figures, per server: RSS before the publishing and after it (and the growth), the time
to store them, and the server's CPU time (user+sys from /proc/PID/stat) over an idle period of
``--idle`` seconds (default 10) afterwards -- the schedules sit in one timer heap, so idle should
cost nothing. Then the server restarts (SIGTERM, a clean stop) and the same figures are taken once the N
schedules are recovered (RSS after recovery, recovery time until the stream answers); last, it is
killed with SIGKILL and the time until served is taken again (natsd rebuilds the schedules from
the messages then, see natsd.jetstream.stream.schedule_state).

Nothing is asserted: the machine is shared, figures are noisy; ratios natsd / nats-server are
printed (below 1 is better for natsd on RSS and CPU).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_dos import free_port, rss_mb, start  # noqa: E402

import nats  # noqa: E402


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def fill(url: str, n: int) -> float:
    nc = await nats.connect(url)
    js = nc.jetstream()
    try:
        r = json.loads(
            (
                await nc.request(
                    "$JS.API.STREAM.CREATE.SCHED",
                    json.dumps({"name": "SCHED", "subjects": ["sched.>"], "allow_msg_schedules": True}).encode(),
                    timeout=10,
                )
            ).data
        )
        assert "error" not in r, r
        at = (datetime.now(timezone.utc) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        t0 = time.perf_counter()
        pending = []
        for i in range(n):
            hdrs = {"Nats-Schedule": "@at " + at, "Nats-Schedule-Target": "sched.target"}
            pending.append(await js.publish_async(f"sched.{i}", b"payload-%d" % i, headers=hdrs))
            if len(pending) >= 4096:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)
        return time.perf_counter() - t0
    finally:
        await nc.close()


async def count(url: str) -> int:
    nc = await nats.connect(url)
    try:
        r = json.loads((await nc.request("$JS.API.STREAM.INFO.SCHED", b"", timeout=60)).data)
        return r["state"]["messages"]
    finally:
        await nc.close()


def measure(kind: str, n: int, idle: float) -> dict:
    store = tempfile.mkdtemp(prefix=f"bench-sched-{kind}-")
    port = free_port()
    out: dict = {}
    p = start(kind, port, store)
    try:
        url = f"nats://127.0.0.1:{port}"
        time.sleep(0.5)
        out["rss_start"] = rss_mb(p.pid)
        out["store_s"] = asyncio.run(fill(url, n))
        assert asyncio.run(count(url)) == n
        time.sleep(1.0)
        out["rss_pending"] = rss_mb(p.pid)
        c0 = cpu_s(p.pid)
        time.sleep(idle)
        out["idle_cpu_s"] = cpu_s(p.pid) - c0
        p.terminate()
        p.wait(60)
        t0 = time.perf_counter()
        p = start(kind, port, store)
        assert asyncio.run(count(url)) == n
        out["recover_s"] = time.perf_counter() - t0
        time.sleep(1.0)
        out["rss_recovered"] = rss_mb(p.pid)
        c0 = cpu_s(p.pid)
        time.sleep(idle)
        out["idle_cpu_recovered_s"] = cpu_s(p.pid) - c0
        # kill -9: natsd has no schedules.db then (it is written at a clean stop and read once),
        # so this restart rebuilds the schedules from the stored messages.
        p.kill()
        p.wait(60)
        t0 = time.perf_counter()
        p = start(kind, port, store)
        assert asyncio.run(count(url)) == n
        out["recover_kill9_s"] = time.perf_counter() - t0
    finally:
        p.terminate()
        try:
            p.wait(60)
        except Exception:
            p.kill()
        shutil.rmtree(store, ignore_errors=True)
    return out


def main() -> None:
    args = sys.argv[1:]
    idle = 10.0
    if "--idle" in args:
        i = args.index("--idle")
        idle = float(args[i + 1])
        del args[i : i + 2]
    n = int(args[0]) if args else 100_000
    res = {kind: measure(kind, n, idle) for kind in ("natsd", "nats-server")}
    print(f"{n:,} pending schedules (@at one day ahead), idle {idle:.0f} s")
    print(f"{'':28}{'natsd':>12}{'nats-server':>14}{'ratio':>8}")
    for key, label in (
        ("rss_start", "RSS at start (MB)"),
        ("rss_pending", "RSS with N pending (MB)"),
        ("store_s", "storing them (s)"),
        ("idle_cpu_s", "CPU while idle (s)"),
        ("recover_s", "restart until served (s)"),
        ("rss_recovered", "RSS after recovery (MB)"),
        ("idle_cpu_recovered_s", "CPU idle after restart (s)"),
        ("recover_kill9_s", "kill -9, until served (s)"),
    ):
        a, b = res["natsd"][key], res["nats-server"][key]
        ratio = f"{a / b:.2f}" if b else "-"
        print(f"{label:28}{a:12.2f}{b:14.2f}{ratio:>8}")
    for kind in res:
        growth = res[kind]["rss_pending"] - res[kind]["rss_start"]
        print(f"{kind}: RSS growth for {n:,} schedules {growth:.1f} MB")


if __name__ == "__main__":
    main()
