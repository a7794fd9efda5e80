"""The dashboard shows MQTT clients: a card counting /connz's "mqtt" connections, shown only when
the server has an mqtt port (headless chromium, as tests/integration/test_dashboard.py)."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from natsd.protocol import mqtt as mp
from tests.helpers.inproc import running_server
from tests.helpers.mqtt import natsd_options
from tests.helpers.servers import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright_api = pytest.importorskip("playwright.async_api", reason="playwright is installed by the test extra")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(120),
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is installed by scripts/ensure-system-deps.sh"),
]


async def test_dashboard_counts_mqtt_clients(tmp_path):
    opts = natsd_options("", free_port(), str(tmp_path / "store"))
    opts.http_port = -1
    async with running_server(options=opts) as server:
        conns = []
        for i in range(2):
            r, w = await asyncio.open_connection("127.0.0.1", server.mqtt.port)
            w.write(mp.encode_connect(f"dash{i}"))
            assert await asyncio.wait_for(r.readexactly(4), 10) == b"\x20\x02\x00\x00"
            conns.append(w)
        async with playwright_api.async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = await browser.new_page()
                await page.goto(f"http://127.0.0.1:{server.http_port}/dashboard")
                await page.wait_for_function("document.getElementById('v-mqtt').textContent === '2'", timeout=15_000)
                assert await page.is_visible("#c-mqtt")
                assert await page.text_content("#v-connections") == "2"
            finally:
                await browser.close()
        for w in conns:
            w.close()
