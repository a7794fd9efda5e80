"""What the start-up log tells an operator about JetStream: nats-server's banner and stable node name
(both servers, same lines), and after kill -9 and a torn last record, natsd's line saying what recovery
restored and what the crash cost."""

from __future__ import annotations

import asyncio
import os
import re

import pytest

from tests.helpers.servers import reference_binary, start_server

pytestmark = [pytest.mark.acceptance, pytest.mark.timeout(120)]

CONF = """
server_name: edge1
jetstream {
  store_dir: "%s"
  domain: edge
  max_memory_store: 1GB
  max_file_store: 10GB
}
"""


def _lines(log: str) -> list[str]:
    """Log lines without the ``[pid] date time`` prefix."""
    return [re.sub(r"^\[\d+\] [\d/]+ [\d:.]+ ", "", ln) for ln in log.splitlines()]


def _banner(lines: list[str]) -> list[str]:
    start = lines.index("[INF] ---------------- JETSTREAM ----------------")
    end = lines.index("[INF] -------------------------------------------", start)
    return lines[start - 8 : end + 1]


async def _fill(url: str, n: int) -> None:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream(domain="edge")
    await js.add_stream(name="ORDERS", subjects=["ORDERS.>"])
    await js.pull_subscribe("ORDERS.>", durable="D", stream="ORDERS")
    for i in range(n):
        await js.publish("ORDERS.new", b"order %d" % i)
    await nc.close()


def _start(kind: str, tmp_path, sd) -> object:
    conf = tmp_path / f"{kind}.conf"
    conf.write_text(CONF % sd)
    return start_server(kind, tmp_path, jetstream=False, config=conf)


@pytest.mark.reference
def test_banner_and_node_name_as_nats_server(tmp_path):
    if reference_binary() is None:
        pytest.skip("reference nats-server binary not installed")
    banners = {}
    for kind in ("reference", "natsd"):
        sd = tmp_path / f"{kind}-store"
        for _ in range(2):  # the node name is the same at every start
            srv = _start(kind, tmp_path, sd)
            try:
                lines = _lines(srv.log())
            finally:
                srv.stop()
            assert "[INF]   Node:     u0GDDaas" in lines
        banner = _banner(lines)
        banners[kind] = [ln.replace(str(sd), "<SD>") for ln in banner if "API Level" not in ln]
        assert any(re.fullmatch(r"\[INF\] Took \S+ to start JetStream", ln) for ln in lines)
    assert banners["natsd"] == banners["reference"]
    assert '[INF]   Store Directory: "<SD>/jetstream"' in banners["natsd"]
    assert "[INF]   Domain:          edge" in banners["natsd"]


def test_recovery_line_after_kill_9_names_what_was_restored_and_lost(tmp_path):
    sd = tmp_path / "store"
    srv = _start("natsd", tmp_path, sd)
    try:
        asyncio.run(_fill(srv.url, 20))
        first = _lines(srv.log())
    finally:
        srv.kill()  # SIGKILL: no index written at shutdown
    assert any(ln.startswith("[INF] JetStream restored 0 streams, 0 consumers, 0 messages (0 B) in ") for ln in first)
    # A write the crash cut short: the last record of the last block loses its final bytes.
    msgs = sd / "jetstream" / "$G" / "streams" / "ORDERS" / "msgs"
    last = max((p for p in msgs.iterdir() if p.suffix == ".blk"), key=lambda p: int(p.stem))
    size = last.stat().st_size
    with open(last, "r+b") as f:
        f.truncate(size - 5)
    srv = _start("natsd", tmp_path, sd)
    try:
        lines = _lines(srv.log())
    finally:
        srv.stop()
    assert "[INF]   Restored 19 messages for stream '$G > ORDERS' in " in "\n".join(lines)
    assert "[INF]   Recovering 1 consumers for stream - '$G > ORDERS'" in lines
    summary = [ln for ln in lines if ln.startswith("[INF] JetStream restored ")]
    assert len(summary) == 1 and summary[0].startswith("[INF] JetStream restored 1 stream, 1 consumer, 19 messages (")
    dropped = [ln for ln in lines if ln.startswith("[WRN] JetStream recovery dropped ")]
    assert len(dropped) == 1, lines
    m = re.fullmatch(
        r"\[WRN\] JetStream recovery dropped 1 message \((\d+) bytes\) after an unclean stop, "
        r"truncated at the last intact record: '\$G > ORDERS' 1 message \((\d+) bytes\)",
        dropped[0],
    )
    assert m is not None, dropped[0]
    assert m.group(1) == m.group(2) and 0 < int(m.group(1)) < 100
    # A clean restart after that: nothing dropped any more.
    srv = _start("natsd", tmp_path, sd)
    try:
        lines = _lines(srv.log())
    finally:
        srv.stop()
    assert not [ln for ln in lines if "recovery dropped" in ln or "lost" in ln]
    assert any(ln.startswith("[INF] JetStream restored 1 stream, 1 consumer, 19 messages (") for ln in lines)
    assert os.path.exists(sd)
