"""Issue 31's restart measures: how long a server takes to come back with many streams and
consumers, or with a large KV bucket, natsd and nats-server in the same run (both as
subprocesses, file storage, a clean stop with SIGTERM then a restart; ``--kill`` stops with
SIGKILL instead).

    .venv/bin/python bench/bench_recovery.py streams [N]   # N streams, each with a durable consumer (default 1,000)
    .venv/bin/python bench/bench_recovery.py kv [N]        # one KV bucket (history 1) of N keys (default 200,000)
    .venv/bin/python bench/bench_recovery.py consumers [N] # N durable consumers, 1,000 per stream (default 100,000)

Options: ``--rounds R`` restarts per server, alternating natsd / nats-server (default 3, medians);
``--kill`` (SIGKILL before each restart); ``--tree DIR`` runs natsd from another checkout's
``src`` (before/after comparisons of two trees: ``--only natsd`` then skips nats-server);
``--store DIR`` keeps the filled stores in DIR (and reuses them when there);
``--profile FILE`` writes a cProfile of natsd's last restart (stopped right after it is served).

Figures per restart: wall time from exec until the server answers the last stream's
``STREAM.INFO`` and (streams, consumers) the last consumer's ``CONSUMER.INFO`` (consumers: and
``$JS.API.INFO`` counts them all; kv: a ``KV`` get of the last key), the server process's CPU
seconds (user+sys from /proc) at that moment, and its RSS then. The stores are filled once per
server (not timed). Nothing is asserted: the machine is shared; ratios natsd / nats-server are
printed (below 1 is better for natsd).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import nats  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def start(kind: str, port: int, store: str, tree: Path, profile: str | None = None) -> subprocess.Popen:
    args = ["-a", "127.0.0.1", "-p", str(port), "-js", "-sd", store]
    if kind == "natsd":
        env = dict(os.environ)
        env["PYTHONPATH"] = str(tree / "src")
        # An installed natsd has its bytecode compiled; without this, a shell that sets
        # PYTHONDONTWRITEBYTECODE recompiles ~140 modules at every start (0.3-1 s here).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cmd = [sys.executable, "-m", "natsd", *args]
        if profile:
            cmd = [sys.executable, "-m", "cProfile", "-o", profile, "-m", "natsd", *args]
    else:
        env = None
        cmd = [str(Path(sys.executable).parent / "nats-server"), *args]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


async def connect(url: str, deadline: float) -> nats.NATS:
    # The port is polled with plain sockets: a refused nats.connect() waits its reconnect delay
    # (2 s), which would quantise the figures.
    host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
    while True:
        try:
            socket.create_connection((host, int(port)), 0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.002)

    async def quiet(e: Exception) -> None:
        pass

    return await nats.connect(url, connect_timeout=5, allow_reconnect=False, error_cb=quiet)


async def api(nc: nats.NATS, subject: str, body: dict | None = None) -> dict:
    msg = await nc.request(subject, json.dumps(body).encode() if body is not None else b"", timeout=60)
    return json.loads(msg.data)


async def fill_streams(url: str, n: int) -> None:
    nc = await connect(url, time.monotonic() + 30)
    try:
        for lo in range(0, n, 200):
            batch = range(lo, min(n, lo + 200))
            rs = await asyncio.gather(
                *(
                    api(
                        nc,
                        f"$JS.API.STREAM.CREATE.S{i}",
                        {"name": f"S{i}", "subjects": [f"s.{i}.>"], "storage": "file"},
                    )
                    for i in batch
                )
            )
            assert all("error" not in r for r in rs), rs[0]
            for i in batch:  # one message per stream, so that recovery has a block to read
                await nc.publish(f"s.{i}.x", b"x" * 16)
            rs = await asyncio.gather(
                *(
                    api(
                        nc,
                        f"$JS.API.CONSUMER.DURABLE.CREATE.S{i}.C{i}",
                        {"stream_name": f"S{i}", "config": {"durable_name": f"C{i}", "ack_policy": "explicit"}},
                    )
                    for i in batch
                )
            )
            assert all("error" not in r for r in rs), rs[0]
        await nc.flush()
    finally:
        await nc.close()


PER_STREAM = 1000  # nats-server 2.15's default_max_consumers


async def fill_consumers(url: str, n: int) -> None:
    """ceil(n / 1,000) streams C<k> (one message each) with 1,000 durable pull consumers each."""
    nc = await connect(url, time.monotonic() + 30)
    try:
        for k in range((n + PER_STREAM - 1) // PER_STREAM):
            r = await api(
                nc, f"$JS.API.STREAM.CREATE.C{k}", {"name": f"C{k}", "subjects": [f"c.{k}.>"], "storage": "file"}
            )
            assert "error" not in r, r
            await nc.publish(f"c.{k}.x", b"x" * 16)
            count = min(PER_STREAM, n - k * PER_STREAM)
            for lo in range(0, count, 200):
                rs = await asyncio.gather(
                    *(
                        api(
                            nc,
                            f"$JS.API.CONSUMER.DURABLE.CREATE.C{k}.D{i}",
                            {"stream_name": f"C{k}", "config": {"durable_name": f"D{i}", "ack_policy": "explicit"}},
                        )
                        for i in range(lo, min(count, lo + 200))
                    )
                )
                assert all("error" not in r for r in rs), rs[0]
        await nc.flush()
    finally:
        await nc.close()


async def fill_kv(url: str, n: int) -> None:
    nc = await connect(url, time.monotonic() + 30)
    try:
        r = await api(
            nc,
            "$JS.API.STREAM.CREATE.KV_B",
            {
                "name": "KV_B",
                "subjects": ["$KV.B.>"],
                "storage": "file",
                "max_msgs_per_subject": 1,
                "allow_rollup_hdrs": True,
                "deny_delete": True,
                "allow_direct": True,
                "discard": "new",
            },
        )
        assert "error" not in r, r
        js = nc.jetstream()
        pending = []
        for i in range(n):
            pending.append(await js.publish_async(f"$KV.B.key{i}", b"value-%d" % i))
            if len(pending) >= 4096:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)
    finally:
        await nc.close()


async def served(url: str, mode: str, n: int) -> None:
    nc = await connect(url, time.monotonic() + 900)  # (nats-server: minutes with 10,000 streams)
    try:
        if mode == "streams":
            last = n - 1
            while "error" in (r := await api(nc, f"$JS.API.STREAM.INFO.S{last}")):
                await asyncio.sleep(0.002)
            assert r["state"]["messages"] == 1, r
            r = await api(nc, f"$JS.API.CONSUMER.INFO.S{last}.C{last}")
            assert "error" not in r, r
        elif mode == "consumers":
            k = (n - 1) // PER_STREAM
            while "error" in (r := await api(nc, f"$JS.API.STREAM.INFO.C{k}")):
                await asyncio.sleep(0.002)
            assert r["state"]["messages"] == 1, r
            r = await api(nc, f"$JS.API.CONSUMER.INFO.C{k}.D{(n - 1) % PER_STREAM}")
            assert "error" not in r, r
            r = await api(nc, "$JS.API.INFO")
            assert r["consumers"] == n, r
        else:
            while "error" in (r := await api(nc, "$JS.API.STREAM.INFO.KV_B")):
                await asyncio.sleep(0.002)
            assert r["state"]["messages"] == n, r
            m = await nc.request(f"$JS.API.DIRECT.GET.KV_B.$KV.B.key{n - 1}", b"", timeout=60)
            assert m.data == b"value-%d" % (n - 1), m
    finally:
        await nc.close()


def stop(p: subprocess.Popen, kill: bool) -> None:
    p.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
    p.wait(900)  # (nats-server takes minutes to stop with 10,000 streams)


def restart(
    kind: str, port: int, store: str, mode: str, n: int, tree: Path, kill: bool, profile: str | None = None
) -> dict:
    t0 = time.perf_counter()
    p = start(kind, port, store, tree, profile)
    try:
        asyncio.run(served(f"nats://127.0.0.1:{port}", mode, n))
        wall = time.perf_counter() - t0
        return {"wall": wall, "cpu": cpu_s(p.pid), "rss": rss_mb(p.pid)}
    finally:
        stop(p, kill and not profile)


def main() -> None:
    args = sys.argv[1:]

    def opt(name: str, default: str | None) -> str | None:
        if name in args:
            i = args.index(name)
            val = args[i + 1]
            del args[i : i + 2]
            return val
        return default

    def flag(name: str) -> bool:
        if name in args:
            args.remove(name)
            return True
        return False

    rounds = int(opt("--rounds", "3") or 3)
    tree = Path(opt("--tree", str(ROOT)) or ROOT).resolve()
    only = opt("--only", None)
    profile = opt("--profile", None)
    kill = flag("--kill")
    mode = args[0] if args else "streams"
    n = int(args[1]) if len(args) > 1 else {"streams": 1000, "consumers": 100_000}.get(mode, 200_000)
    keep = opt("--store", None)
    kinds = [only] if only else ["natsd", "nats-server"]
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        stores = {k: os.path.join(keep, k) for k in kinds}
    else:
        stores = {k: tempfile.mkdtemp(prefix=f"bench-recovery-{k}-") for k in kinds}
    ports = {k: free_port() for k in kinds}
    try:
        for k in kinds:
            if keep and os.path.isdir(stores[k]):
                continue
            t0 = time.perf_counter()
            p = start(k, ports[k], stores[k], tree)
            try:
                url = f"nats://127.0.0.1:{ports[k]}"
                fill = {"streams": fill_streams, "consumers": fill_consumers}.get(mode, fill_kv)
                asyncio.run(fill(url, n))
            finally:
                stop(p, False)
            print(f"{k}: filled in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        res: dict[str, list[dict]] = {k: [] for k in kinds}
        for r in range(rounds):
            for k in kinds if r % 2 == 0 else kinds[::-1]:
                res[k].append(restart(k, ports[k], stores[k], mode, n, tree, kill))
        if profile and "natsd" in kinds:
            restart("natsd", ports["natsd"], stores["natsd"], mode, n, tree, False, profile)
    finally:
        for s in stores.values() if not keep else ():
            shutil.rmtree(s, ignore_errors=True)
    what = {
        "streams": f"{n:,} streams, each with a durable consumer",
        "consumers": f"{n:,} durable consumers, {PER_STREAM:,} per stream",
    }.get(mode, f"a KV bucket of {n:,} keys")
    print(f"restart ({'SIGKILL' if kill else 'SIGTERM'}) with {what}; medians of {rounds}; natsd from {tree}")
    print(f"{'':22}" + "".join(f"{k:>14}" for k in kinds) + ("   ratio" if len(kinds) == 2 else ""))
    for key, label in (("wall", "until served (s)"), ("cpu", "server CPU (s)"), ("rss", "RSS then (MB)")):
        meds = [statistics.median(x[key] for x in res[k]) for k in kinds]
        row = f"{label:22}" + "".join(f"{m:14.2f}" for m in meds)
        if len(meds) == 2 and meds[1]:
            row += f"{meds[0] / meds[1]:8.2f}"
        print(row)


if __name__ == "__main__":
    main()
