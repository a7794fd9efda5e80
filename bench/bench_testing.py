"""A JetStream test suite's wall time by how its server is provided (issue 26).

Each "test" creates a stream and a durable pull consumer (explicit ack, ``ack_wait``), publishes
10 messages, consumes and acks 9, leaves one unacked and waits for its timer-driven redelivery,
then acks it. The suite runs N such tests with:

* ``inproc``: natsd in-process, a fresh ``InProcessServer`` per test (the pytest plugin's
  ``natsd_server``), the redelivery reached with ``advance`` (no waiting);
* ``natsd-proc``: a fresh ``python -m natsd`` subprocess per test (``SubprocessServer``), redelivery
  waited for in real time;
* ``ref-proc``: a fresh nats-server subprocess per test, real time;
* ``ref-session``: one nats-server for the whole suite, real time.

    PYTHONPATH=src .venv/bin/python bench/bench_testing.py [--tests 200] [--ack-wait 0.5]
        [--modes inproc,natsd-proc,ref-proc,ref-session] [--sample 40]

``--sample K`` runs only K tests of the subprocess modes and extrapolates to N (their cost per
test is flat); the in-process mode always runs all N.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


async def one_test(url: str, i: int, ack_wait: float, advance=None) -> None:
    import nats
    from nats.js.api import ConsumerConfig

    nc = await nats.connect(url)
    js = nc.jetstream()
    name = f"T{i}"
    await js.add_stream(name=name, subjects=[f"t{i}.>"])
    await js.add_consumer(name, ConsumerConfig(durable_name="C", ack_policy="explicit", ack_wait=ack_wait))
    for k in range(10):
        await js.publish(f"t{i}.x", b"m%d" % k)
    sub = await js.pull_subscribe_bind("C", stream=name)
    msgs = await sub.fetch(10, timeout=2)
    assert len(msgs) == 10
    for m in msgs[:9]:
        await m.ack_sync()
    if advance is not None:
        await advance(ack_wait + 0.01)
    (again,) = await sub.fetch(1, timeout=ack_wait + 5)
    assert again.metadata.num_delivered == 2
    await again.ack_sync()
    await nc.close()


async def suite_inproc(n: int, ack_wait: float) -> float:
    from natsd.testing import InProcessServer

    t0 = time.perf_counter()
    for i in range(n):
        async with InProcessServer() as srv:
            await one_test(srv.url, i, ack_wait, srv.advance)
    return time.perf_counter() - t0


async def suite_proc(n: int, ack_wait: float, binary: str | None) -> float:
    from natsd.testing import SubprocessServer

    t0 = time.perf_counter()
    for i in range(n):
        async with SubprocessServer(binary=binary) as srv:
            await one_test(srv.url, i, ack_wait)
    return time.perf_counter() - t0


async def suite_session(n: int, ack_wait: float, binary: str) -> float:
    from natsd.testing import SubprocessServer

    t0 = time.perf_counter()
    async with SubprocessServer(binary=binary) as srv:
        for i in range(n):
            await one_test(srv.url, i, ack_wait)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tests", type=int, default=200)
    ap.add_argument("--ack-wait", type=float, default=0.5)
    ap.add_argument("--sample", type=int, default=40)
    ap.add_argument("--modes", default="inproc,natsd-proc,ref-proc,ref-session")
    args = ap.parse_args()
    from tests.helpers.servers import reference_binary

    ref = reference_binary()
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):  # natsd subprocesses as installed: bytecode cached
        import tempfile

        os.environ["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="natsd-pyc-")
    n, k = args.tests, min(args.sample, args.tests)
    print(f"{n} tests (stream, consumer, 10 publishes, acks, one redelivery after ack_wait={args.ack_wait}s)")
    rows = []
    for mode in args.modes.split(","):
        if mode == "inproc":
            t, ran = asyncio.run(suite_inproc(n, args.ack_wait)), n
        elif mode == "natsd-proc":
            t, ran = asyncio.run(suite_proc(k, args.ack_wait, None)), k
        elif mode == "ref-proc" and ref:
            t, ran = asyncio.run(suite_proc(k, args.ack_wait, ref)), k
        elif mode == "ref-session" and ref:
            t, ran = asyncio.run(suite_session(k, args.ack_wait, ref)), k
        else:
            continue
        total = t * n / ran
        rows.append((mode, total, t / ran, ran))
    base = rows[0][1] if rows else 1
    for mode, total, per, ran in rows:
        note = "" if ran == n else f" (measured {ran}, scaled)"
        print(f"{mode:12} {total:8.2f} s for {n} tests, {per * 1000:7.1f} ms/test, x{total / base:6.1f}{note}")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
