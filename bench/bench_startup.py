"""Start-up time (issue 26): from exec to the first INFO on a client socket, natsd and nats-server
alternating: bare, with JetStream on an empty store, on a store of 5 streams (recovered before the
first client is accepted) and to the first STREAM.CREATE answered (an empty store; the request is
sent the moment INFO arrives); plus natsd's in-process start (``natsd.testing.InProcessServer``).

    PYTHONPATH=src .venv/bin/python bench/bench_startup.py [--runs 21]

natsd runs with its bytecode cached, as an installed package has it (pip compiles on install):
when this environment sets PYTHONDONTWRITEBYTECODE (the project's does), a private
PYTHONPYCACHEPREFIX is filled once first. Also prints each process's CPU time (from
/proc/PID/schedstat when it answered) since wall time on a shared machine is mostly waiting for a core.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ms(pid: int) -> float:
    """The process's CPU time so far: its threads' /proc/PID/task/TID/schedstat (ns), else
    user+sys from /proc/PID/stat (clock ticks, 10 ms steps)."""
    try:
        return sum(int(Path(t, "schedstat").read_text().split()[0]) for t in Path(f"/proc/{pid}/task").iterdir()) / 1e6
    except (OSError, ValueError, IndexError):
        pass
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


_CREATE = (
    b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nSUB _R 1\r\n'
    b"PUB $JS.API.STREAM.CREATE.B _R %d\r\n%s\r\n"
)


def _first_stream(c: socket.socket) -> None:
    """On a connection that just got its INFO: create a file stream, wait for the answer."""
    body = b'{"name":"B","subjects":["b.>"],"storage":"file"}'
    c.sendall(_CREATE % (len(body), body))
    buf = b""
    while b'"type":"io.nats.jetstream.api.v1.stream_create_response"' not in buf:
        chunk = c.recv(65536)
        if not chunk:
            raise RuntimeError("closed before the stream create reply")
        buf += chunk
    if b'"error"' in buf:
        raise RuntimeError(buf.decode(errors="replace"))


def once(cmd: list[str], env: dict, stream: bool = False) -> tuple[float, float]:
    """(wall ms from exec to the first INFO, or with ``stream`` to the first stream created; the
    process's CPU ms then)."""
    port = free_port()
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd + ["-a", "127.0.0.1", "-p", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                    if c.recv(4) == b"INFO":
                        if stream:
                            _first_stream(c)
                        break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(f"{cmd} exited with {proc.returncode}")
                time.sleep(0.0005)
        wall = time.perf_counter() - t0
        return wall * 1000, cpu_ms(proc.pid)
    finally:
        proc.terminate()
        proc.wait()


def seed(cmd: list[str], env: dict, streams: int = 5) -> None:
    """Start a server on ``cmd``'s store, create ``streams`` file streams with a message each, stop it."""
    port = free_port()
    proc = subprocess.Popen(
        cmd + ["-a", "127.0.0.1", "-p", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(10000):
            try:
                c = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                time.sleep(0.002)
        with c:
            c.recv(4096)
            c.sendall(b'CONNECT {"verbose":false,"headers":true}\r\nSUB _R.> 1\r\n')
            for i in range(streams):
                body = b'{"name":"S%d","subjects":["s%d.>"],"storage":"file"}' % (i, i)
                c.sendall(b"PUB $JS.API.STREAM.CREATE.S%d _R.%d %d\r\n%s\r\n" % (i, i, len(body), body))
            buf = b""
            while buf.count(b"stream_create_response") < streams:  # (nats-server creates them in the background)
                buf += c.recv(65536)
            for i in range(streams):
                c.sendall(b"PUB s%d.x _R.p%d 5\r\nhello\r\n" % (i, i))
            buf = b""
            while buf.count(b"MSG _R.p") < streams:
                buf += c.recv(65536)
    finally:
        proc.terminate()
        proc.wait()


async def inprocess(runs: int) -> list[float]:
    from natsd.testing import InProcessServer

    async with InProcessServer():
        pass  # imports and first-use costs paid once per process
    out = []
    for _ in range(runs):
        srv = InProcessServer()
        t0 = time.perf_counter()
        await srv.start()
        out.append((time.perf_counter() - t0) * 1000)
        await srv.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--no-stream", action="store_true", help="only the empty-store starts")
    args = ap.parse_args()
    from tests.helpers.servers import reference_binary

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    if env.pop("PYTHONDONTWRITEBYTECODE", None):
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="natsd-pyc-")
    sd = tempfile.mkdtemp(prefix="natsd-start-")
    natsd = [sys.executable, "-m", "natsd"]
    cases: dict[str, tuple[list[str], bool]] = {
        "natsd": (natsd, False),
        "natsd -js": (natsd + ["-js", "-sd", sd], False),
    }
    ref = reference_binary()
    if ref:
        cases["nats-server"] = ([ref], False)
        cases["nats-server -js"] = ([ref, "-js", "-sd", sd + "-ref"], False)
    # A store of a few streams, recovered before the first client is accepted (both servers).
    if not args.no_stream:
        with_store = tempfile.mkdtemp(prefix="natsd-start-store-")
        seed(natsd + ["-js", "-sd", with_store], env)
        cases["natsd -js, 5 streams"] = (natsd + ["-js", "-sd", with_store], False)
        cases["natsd -js, 1st stream"] = (natsd + ["-js", "-sd", sd + "-create"], True)
        if ref:
            ref_store = tempfile.mkdtemp(prefix="natsd-start-store-ref-")
            seed([ref, "-js", "-sd", ref_store], env)
            cases["nats-server -js, 5 streams"] = ([ref, "-js", "-sd", ref_store], False)
            cases["nats-server -js, 1st stream"] = ([ref, "-js", "-sd", sd + "-create-ref"], True)
    for cmd, stream in cases.values():
        once(cmd, env, stream)  # warm: bytecode written, page cache
    res: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
    for _ in range(args.runs):
        for name, (cmd, stream) in cases.items():
            if stream:  # each first-stream run starts from an empty store
                shutil.rmtree(cmd[-1], ignore_errors=True)
            res[name].append(once(cmd, env, stream))
    print(
        f'exec -> first INFO ("1st stream": -> first STREAM.CREATE answered, empty store), {args.runs} runs each, '
        f"alternating; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'':28} {'wall median':>12} {'wall min':>9} {'cpu median':>11}")
    for name, xs in res.items():
        walls = [w for w, _ in xs]
        cpus = [c for _, c in xs]
        print(f"{name:28} {statistics.median(walls):10.1f}ms {min(walls):7.1f}ms {statistics.median(cpus):9.1f}ms")
    if ref:
        for a, b in (("natsd", "nats-server"), ("natsd -js", "nats-server -js")):
            if a not in res or b not in res:
                continue
            print(
                f"ratio {a} / {b} (wall median): "
                f"{statistics.median(w for w, _ in res[a]) / statistics.median(w for w, _ in res[b]):.1f}"
            )
    ip = asyncio.run(inprocess(args.runs))
    print(
        f"in-process InProcessServer.start() (JetStream, temp store): median {statistics.median(ip):.2f} ms, "
        f"max {max(ip):.2f} ms"
    )


if __name__ == "__main__":
    main()
