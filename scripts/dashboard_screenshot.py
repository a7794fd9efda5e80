"""Screenshot of the live dashboard for the README (``make screenshot`` → ``docs/dashboard.png``).

Starts natsd with JetStream and monitoring on free ports, creates a few streams and consumers, keeps traffic
flowing for a while so the charts have a history, and photographs ``/dashboard`` in headless chromium (the
system's, installed by ``scripts/ensure-system-deps.sh``; driven by playwright from the ``test`` extra).

    .venv/bin/python scripts/dashboard_screenshot.py [--out docs/dashboard.png] [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats
from playwright.async_api import async_playwright

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"natsd did not open port {port}")


async def traffic(url: str, seconds: float) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    for name, subjects in (("ORDERS", ["orders.>"]), ("PAYMENTS", ["payments.>"]), ("AUDIT", ["audit.>"])):
        await js.add_stream(name=name, subjects=subjects)
    await js.add_consumer("ORDERS", durable_name="SHIPPING", ack_policy="explicit")
    await js.add_consumer("ORDERS", durable_name="BILLING", ack_policy="explicit")
    await js.add_consumer("PAYMENTS", durable_name="LEDGER", ack_policy="explicit")
    shipping = await js.pull_subscribe_bind("SHIPPING", stream="ORDERS")
    ledger = await js.pull_subscribe_bind("LEDGER", stream="PAYMENTS")
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        # a wave of traffic that rises and falls, and consumers that keep up unevenly
        burst = 50 + int(150 * abs(((n // 10) % 20) - 10) / 10)
        for i in range(burst):
            await js.publish(f"orders.{i % 7}", b"order" * 20)
            if i % 3 == 0:
                await js.publish(f"payments.{i % 5}", b"payment" * 10)
            if i % 10 == 0:
                await js.publish("audit.log", b"audit")
        for sub, batch in ((shipping, burst), (ledger, burst // 6)):
            try:
                for m in await sub.fetch(batch, timeout=0.2):
                    await m.ack()
            except Exception:  # noqa: BLE001 - nothing to fetch right now
                pass
        n += 1
        await asyncio.sleep(0.1)
    await nc.close()


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "docs" / "dashboard.png"))
    ap.add_argument("--seconds", type=float, default=20.0)
    a = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium not found: run scripts/ensure-system-deps.sh")
    port, http, leaf_port = free_port(), free_port(), free_port()
    store = tempfile.mkdtemp(prefix="natsd-screenshot-")
    hub_conf, edge_conf = Path(store) / "hub.conf", Path(store) / "edge.conf"
    hub_conf.write_text(f"leafnodes {{ host: 127.0.0.1, port: {leaf_port} }}\n")
    # a second natsd linked as a leaf node, so the page's leaf node table has a row
    edge_conf.write_text(f'server_name: edge-1\nleafnodes {{ remotes: [ {{ url: "nats-leaf://127.0.0.1:{leaf_port}" }} ] }}\n')
    server = subprocess.Popen([sys.executable, "-m", "natsd", "-c", str(hub_conf), "-a", "127.0.0.1", "-p", str(port),
                               "-m", str(http), "-js", "-sd", store, "-n", "demo"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    edge = subprocess.Popen([sys.executable, "-m", "natsd", "-c", str(edge_conf), "-a", "127.0.0.1", "-p",
                             str(free_port())], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        wait_port(http)
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = await browser.new_page(viewport={"width": 1400, "height": 1000})
            await page.goto(f"http://127.0.0.1:{http}/dashboard")
            # photograph while the traffic still flows (the charts then end at a live value, not at zero)
            flow = asyncio.ensure_future(traffic(f"nats://127.0.0.1:{port}", a.seconds + 3))
            await asyncio.sleep(a.seconds)
            Path(a.out).parent.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=a.out, full_page=True)
            await flow
            await browser.close()
        print(a.out)
        return 0
    finally:
        for proc in (edge, server):
            proc.terminate()
            proc.wait(timeout=15)
        shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
