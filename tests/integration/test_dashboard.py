"""The live dashboard in a real headless browser: Debian's chromium driven by playwright.

Both come from the project's own set-up (``scripts/ensure-system-deps.sh`` installs ``chromium``, the
``test`` extra installs ``playwright``); playwright's own browser download is not used.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil

import nats
import pytest

from natsd.config.leafnodes import LeafNodeOptions, RemoteLeafOptions
from natsd.config.options import ServerOptions
from tests.helpers.inproc import running_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright_api = pytest.importorskip("playwright.async_api", reason="playwright is installed by the test extra")

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is installed by scripts/ensure-system-deps.sh")


async def wait_until(page, js: str, timeout: float = 15.0) -> None:
    await page.wait_for_function(js, timeout=timeout * 1000)


@pytest.mark.timeout(120)
async def test_dashboard_live_in_a_browser(tmp_path):
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(
            running_server(
                http_port=-1, jetstream=True, server_name="dash", leafnodes=LeafNodeOptions(host="127.0.0.1", port=-1)
            )
        )
        # a second natsd linked to it as a leaf node: the page lists the link
        edge = ServerOptions(host="127.0.0.1", port=0, server_name="EDGE")
        edge.leafnodes = LeafNodeOptions(
            reconnect_ns=100_000_000,
            remotes=[RemoteLeafOptions(urls=[f"nats-leaf://127.0.0.1:{server.leafnodes.port}"])],
        )
        await stack.enter_async_context(running_server(options=edge))
        nc = await nats.connect(server.client_url)
        async with playwright_api.async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = await browser.new_page()
                problems: list[str] = []
                page.on(
                    "console",
                    lambda m: (
                        problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None
                    ),
                )
                page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
                page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
                resp = await page.goto(f"http://127.0.0.1:{server.http_port}/dashboard")
                assert resp is not None and resp.ok
                await wait_until(page, "document.getElementById('status').textContent === 'live'")
                assert await page.text_content("#server-name") == "dash"
                await wait_until(page, "document.querySelector('#leafs-table tr[data-leaf=\"EDGE\"]') !== null")
                leaf_row = await page.text_content('#leafs-table tr[data-leaf="EDGE"]')
                assert "$G" in leaf_row and "from leaf" in leaf_row and "127.0.0.1:" in leaf_row

                # a stream created now appears without a reload
                js = nc.jetstream()
                await js.add_stream(name="DASHTEST", subjects=["dash.>"])
                await js.add_consumer("DASHTEST", durable_name="WORKER", ack_policy="explicit")
                await wait_until(page, "document.querySelector('#streams-table tr[data-stream=\"DASHTEST\"]') !== null")
                await wait_until(
                    page, "document.querySelector('#consumers-table tr[data-consumer=\"DASHTEST > WORKER\"]') !== null"
                )

                # publishing moves the message-rate chart and the consumer's pending chart
                before = float(await page.get_attribute("#chart-msgs", "data-max") or 0)
                assert before < 50  # only the few API requests so far
                for i in range(300):
                    await js.publish(f"dash.{i % 3}", b"x" * 100)
                await wait_until(page, "Number(document.getElementById('chart-msgs').dataset.max) >= 100")
                await wait_until(page, "Number(document.getElementById('chart-pending').dataset.max) >= 300")
                row = await page.text_content('#streams-table tr[data-stream="DASHTEST"]')
                assert "300" in row
                path = await page.get_attribute("#chart-msgs path", "d")
                assert path and path.count("L") >= 1  # a line, not a single point
                await page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
                assert (tmp_path / "dashboard.png").stat().st_size > 10_000
                assert problems == []
            finally:
                await browser.close()
        await nc.close()


async def http_get(port: int, path: str) -> tuple[int, str, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    raw = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, body = raw.partition(b"\r\n\r\n")
    ctype = [h for h in head.decode().split("\r\n") if h.lower().startswith("content-type")][0].split(":", 1)[1]
    return int(head.split(b" ")[1]), ctype.strip(), body


async def test_dashboard_assets_and_the_switch():
    async with running_server(http_port=-1) as server:
        code, ctype, body = await http_get(server.http_port, "/")
        assert code == 200 and ctype.startswith("text/html") and b"/dashboard/dashboard.js" in body
        code, ctype, body = await http_get(server.http_port, "/dashboard/dashboard.js")
        assert code == 200 and ctype.startswith("text/javascript") and b"natsdDashboard" in body
        assert b"http://" not in body and b"https://" not in body  # nothing fetched from elsewhere
        code, _, _ = await http_get(server.http_port, "/dashboard/../monitor.py")
        assert code == 404
        code, _, _ = await http_get(server.http_port, "/dashboard/nothing.js")
        assert code == 404
    async with running_server(http_port=-1, http_dashboard=False) as server:
        code, ctype, body = await http_get(server.http_port, "/")
        assert code == 200 and b'<a href="/varz">' in body and b"dashboard" not in body
        code, _, _ = await http_get(server.http_port, "/dashboard")
        assert code == 404


def test_config_switch_parses():
    from natsd.config.options import options_from_tree
    from natsd.config.parser import parse

    assert options_from_tree(parse("http_dashboard: false\n")).http_dashboard is False
    assert options_from_tree(parse("port: 4222\n")).http_dashboard is True
