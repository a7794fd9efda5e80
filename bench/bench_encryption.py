"""What encryption at rest costs per JetStream publish: a file stream plain, with ``cipher:
chachapoly`` and with ``cipher: aes``, on natsd and on nats-server in the same run.

Each case is a fresh server (subprocess, its own store directory, ``jetstream { cipher, key }``
from a config file) and one nats-py client that publishes to one file stream:

* ``sync128``: ``--n`` synchronous 128 B publishes (each waits for its PubAck);
* ``async16k``: ``--n`` 16 KiB publishes, ``--window`` in flight at a time.

``--store`` measures the file store alone instead, in this process (no sockets, no client):
``store_msg`` plus the ``flush`` a publish costs (one per message for ``sync128``, one per
``--window`` messages for ``async16k``), ``time.process_time`` per message, best of ``--runs``.
This is the figure that isolates the cipher: the servers' CPU sampling has 10 ms ticks and a
shared machine's noise.

Reported per case: the server's CPU µs per publish (user+sys from ``/proc/PID/stat`` around the
publishes: the client's own cost is not in it) and the wall-clock publish rate; then, per
server, each cipher's CPU per publish over the plain stream's. ``--runs`` repeats everything
(alternating the order of the cases) and reports medians.

    PYTHONPATH=src .venv/bin/python bench/bench_encryption.py [--n 2000] [--runs 3] [--only natsd]
    PYTHONPATH=src .venv/bin/python bench/bench_encryption.py --store [--n 20000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import VENV_BIN, free_port, wait_port  # (bench/ is not a package)

CIPHERS = ("none", "chachapoly", "aes")
KINDS = ("natsd", "nats-server")
WORKLOADS = ("sync128", "async16k")


class Server:
    """One server under test with its own store and config file."""

    def __init__(self, kind: str, cipher: str) -> None:
        self.dir = tempfile.mkdtemp(prefix=f"bench-enc-{kind}-")
        conf = os.path.join(self.dir, "server.conf")
        with open(conf, "w") as f:
            enc = "" if cipher == "none" else f', cipher: {cipher}, key: "bench-key"'
            f.write(f'jetstream {{ store_dir: "{self.dir}/store" {enc} }}\n')
        self.port = free_port()
        args = ["-a", "127.0.0.1", "-p", str(self.port), "-c", conf]
        cmd = [sys.executable, "-m", "natsd", *args] if kind == "natsd" else [str(VENV_BIN / "nats-server"), *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


async def _publish(url: str, workload: str, n: int, window: int, server: Server) -> tuple[float, float]:
    """(server CPU µs per publish, publishes per second) of one workload."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="B", subjects=["b.>"], storage="file")
    size = 128 if workload == "sync128" else 16384
    body = os.urandom(size)
    for _ in range(50):  # warm-up (first block, caches)
        await js.publish("b.warm", body)
    cpu0, t0 = server.cpu_seconds(), time.perf_counter()
    if workload == "sync128":
        for _ in range(n):
            await js.publish("b.x", body)
    else:
        for i in range(0, n, window):
            await asyncio.gather(*(js.publish("b.x", body) for _ in range(min(window, n - i))))
    wall = time.perf_counter() - t0
    cpu = server.cpu_seconds() - cpu0
    await nc.close()
    return cpu / n * 1e6, n / wall


def _store_round(cipher: str, workload: str, n: int, window: int) -> float:
    """µs of CPU per message of one round on a fresh file store (see the module docstring)."""
    from natsd.clock import ManualClock
    from natsd.store import open_stream_store
    from natsd.store.base import StoreConfig
    from natsd.store.file.encryption import Encryption, StoreCipher

    d = tempfile.mkdtemp(prefix="bench-enc-store-")
    keys = None if cipher == "none" else Encryption(StoreCipher(cipher), "bench-key").for_account("$G")
    store = open_stream_store(StoreConfig(name="B", storage="file"), ManualClock(), d, keys=keys)
    body = os.urandom(128 if workload == "sync128" else 16384)
    every = 1 if workload == "sync128" else window
    try:
        t0 = time.process_time()
        for i in range(n):
            store.store_msg("b.x", None, body)
            if i % every == every - 1:
                store.flush()
        store.flush()
        return (time.process_time() - t0) / n * 1e6
    finally:
        store.stop()
        shutil.rmtree(d, ignore_errors=True)


def store_main(args: argparse.Namespace) -> None:
    print(f"{'cipher':11} {'workload':9} {'CPU µs/msg':>11} {'x plain':>8}   (file store alone, best of {args.runs})")
    best: dict[tuple[str, str], float] = {}
    for workload in WORKLOADS:
        for cipher in CIPHERS:
            best[(cipher, workload)] = min(
                _store_round(cipher, workload, args.n, args.window) for _ in range(args.runs)
            )
            got = best[(cipher, workload)]
            print(f"{cipher:11} {workload:9} {got:11.2f} {got / best[('none', workload)]:8.2f}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--only", choices=KINDS, help="one server only")
    ap.add_argument("--store", action="store_true", help="the file store alone, in process")
    args = ap.parse_args(argv)
    if args.store:
        store_main(args)
        return
    kinds = (args.only,) if args.only else KINDS
    cases = [(k, c) for k in kinds for c in CIPHERS]
    results: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for run in range(args.runs):
        for kind, cipher in cases if run % 2 == 0 else list(reversed(cases)):
            for workload in WORKLOADS:
                server = Server(kind, cipher)
                try:
                    url = f"nats://127.0.0.1:{server.port}"
                    got = asyncio.run(_publish(url, workload, args.n, args.window, server))
                finally:
                    server.stop()
                results.setdefault((kind, cipher, workload), []).append(got)
    print(f"{'server':12} {'cipher':11} {'workload':9} {'CPU µs/pub':>11} {'pub/s':>9} {'CPU x plain':>12}")
    for kind, cipher in cases:
        for workload in WORKLOADS:
            runs = results[(kind, cipher, workload)]
            cpu = statistics.median(r[0] for r in runs)
            rate = statistics.median(r[1] for r in runs)
            plain = statistics.median(r[0] for r in results[(kind, "none", workload)])
            print(f"{kind:12} {cipher:11} {workload:9} {cpu:11.1f} {rate:9.0f} {cpu / plain:12.2f}")


if __name__ == "__main__":
    main()
