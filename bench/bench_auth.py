"""Authenticated connection rate: nkey and JWT (operator mode) logins, natsd vs nats-server.

Both servers run as subprocesses from the same generated config (fresh keys, MEMORY resolver).
A raw asyncio client (no client library in the way) runs ``--workers`` loops of: connect, read
INFO, sign the nonce, ``CONNECT`` + ``PING``, wait for ``PONG``, close. It reports logins per
second and the median/p99 login time, per server and mode, and the ratio natsd / nats-server.
The client's signing cost is the same for both servers.

    .venv/bin/python bench/bench_auth.py [--n 2000] [--workers 4] [--modes nkey,jwt]

Nothing is asserted; the machine is shared, so figures are noisy (run it twice).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from bench.run import VENV_BIN, free_port, wait_port  # noqa: E402
from tests.helpers.identities import Identity, b64url, operator_setup  # noqa: E402


class Server:
    def __init__(self, kind: str, conf: str, workdir: Path) -> None:
        import os
        import subprocess

        self.port = free_port()
        path = workdir / f"{kind}.conf"
        path.write_text(conf)
        args = ["-a", "127.0.0.1", "-p", str(self.port), "-c", str(path)]
        cmd = [sys.executable, "-m", "natsd", *args] if kind == "natsd" else [str(VENV_BIN / "nats-server"), *args]
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        wait_port(self.port)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


async def login(port: int, identity: Identity, fields: dict) -> float:
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    info = json.loads((await reader.readline())[5:])
    sig = b64url(identity.sign_bytes(info["nonce"].encode()))
    writer.write(b"CONNECT " + json.dumps({"verbose": False, **fields, "sig": sig}).encode() + b"\r\nPING\r\n")
    line = await reader.readline()
    if line != b"PONG\r\n":
        raise RuntimeError(f"login failed: {line!r}")
    dt = time.perf_counter() - t0
    writer.close()
    await writer.wait_closed()
    return dt


async def storm(port: int, identity: Identity, fields: dict, n: int, workers: int) -> tuple[float, list[float]]:
    times: list[float] = []
    left = n

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            times.append(await login(port, identity, fields))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return n / (time.perf_counter() - t0), times


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--modes", default="nkey,jwt")
    a = ap.parse_args()
    user = Identity.new("user")
    setup = operator_setup("A")
    acc, _ = setup.accounts["A"]
    from tests.helpers.identities import user_claims

    ujwt = acc.sign(user_claims(user, "bench"))
    configs = {
        "nkey": (f"authorization {{ users: [ {{ nkey: {user.public} }} ] }}\n", {"nkey": user.public}),
        "jwt": (setup.config(), {"jwt": ujwt}),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for mode in a.modes.split(","):
            conf, fields = configs[mode]
            rates = {}
            for kind in ("natsd", "nats-server"):
                srv = Server(kind, conf, Path(tmp))
                try:
                    asyncio.run(storm(srv.port, user, fields, min(200, a.n), a.workers))  # warm up
                    rate, times = asyncio.run(storm(srv.port, user, fields, a.n, a.workers))
                finally:
                    srv.stop()
                times.sort()
                rates[kind] = rate
                print(
                    f"{mode:5} {kind:12} {rate:8.0f} logins/s   median {statistics.median(times) * 1e3:6.2f} ms"
                    f"   p99 {times[int(len(times) * 0.99) - 1] * 1e3:6.2f} ms"
                )
            print(f"{mode:5} ratio natsd/nats-server: {rates['natsd'] / rates['nats-server']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
