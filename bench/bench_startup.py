"""Start-up time (issue 26): from exec to the first INFO on a client socket, natsd and nats-server
alternating, plus natsd's in-process start (``natsd.testing.InProcessServer``).

    PYTHONPATH=src .venv/bin/python bench/bench_startup.py [--runs 21]

natsd runs with its bytecode cached, as an installed package has it (pip compiles on install):
when this environment sets PYTHONDONTWRITEBYTECODE (the project's does), a private
PYTHONPYCACHEPREFIX is filled once first. Also prints each process's CPU (user+sys, from
/proc/PID/stat when it answered) since wall time on a shared machine is mostly waiting for a core.
"""

from __future__ import annotations

import argparse
import asyncio
import os
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
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def once(cmd: list[str], env: dict) -> tuple[float, float]:
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
    args = ap.parse_args()
    from tests.helpers.servers import reference_binary

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    if env.pop("PYTHONDONTWRITEBYTECODE", None):
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="natsd-pyc-")
    sd = tempfile.mkdtemp(prefix="natsd-start-")
    natsd = [sys.executable, "-m", "natsd"]
    cases = {"natsd": natsd, "natsd -js": natsd + ["-js", "-sd", sd]}
    ref = reference_binary()
    if ref:
        cases["nats-server"] = [ref]
        cases["nats-server -js"] = [ref, "-js", "-sd", sd + "-ref"]
    for cmd in cases.values():
        once(cmd, env)  # warm: bytecode written, page cache
    res: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
    for _ in range(args.runs):
        for name, cmd in cases.items():
            res[name].append(once(cmd, env))
    print(f"exec -> first INFO, {args.runs} runs each, alternating; load average {os.getloadavg()[0]:.1f}")
    print(f"{'':18} {'wall median':>12} {'wall min':>9} {'cpu median':>11}")
    for name, xs in res.items():
        walls = [w for w, _ in xs]
        cpus = [c for _, c in xs]
        print(f"{name:18} {statistics.median(walls):10.1f}ms {min(walls):7.1f}ms {statistics.median(cpus):9.1f}ms")
    if ref:
        for a, b in (("natsd", "nats-server"), ("natsd -js", "nats-server -js")):
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
