"""100,000 pull requests on one consumer (issue 25 item 5).

nats-server refuses requests beyond ``max_waiting`` (512 by default) with ``409 Exceeded
MaxWaiting`` and keeps serving other clients meanwhile; a request that finds the queue full
re-checks the queue's requesters at most once a second. natsd swept the full queue (an interest
check per waiting inbox) at every such request: 100k requests held the loop for minutes.
"""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.helpers.inproc import side_by_side
from tests.helpers.servers import reference_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.timeout(120),
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]

N = 100_000
CHUNK = 5_000


async def _flood(url: str) -> dict:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s"])
    await js.add_consumer("S", durable_name="C", ack_policy="explicit")
    host, port = url.rsplit("/", 1)[1].split(":")
    r, w = await asyncio.open_connection(host, int(port))
    await r.readline()  # INFO
    w.write(b'CONNECT {"verbose":false,"headers":true,"no_responders":true}\r\nSUB _INBOX.f.* 1\r\nPING\r\n')
    while (await r.readline()) != b"PONG\r\n":
        pass
    statuses: dict[str, int] = {}
    got = 0
    finished = asyncio.Event()

    async def read_replies() -> None:
        nonlocal got
        while got < N - 512:
            line = await r.readline()
            if line.startswith(b"HMSG"):
                data = await r.readexactly(int(line.split()[-1]) + 2)
                status = data.split(b"\r\n", 1)[0][len(b"NATS/1.0 ") :].decode()
                statuses[status] = statuses.get(status, 0) + 1
                got += 1
            elif line == b"PING\r\n":
                w.write(b"PONG\r\n")
        finished.set()

    async def send_requests() -> None:
        body = b'{"batch":1}'
        for start in range(0, N, CHUNK):
            w.write(
                b"".join(
                    b"PUB $JS.API.CONSUMER.MSG.NEXT.S.C _INBOX.f.%d %d\r\n%s\r\n" % (i, len(body), body)
                    for i in range(start, min(N, start + CHUNK))
                )
            )
            await w.drain()

    reader = asyncio.create_task(read_replies())
    sender = asyncio.create_task(send_requests())
    try:
        # Another client is served while the flood is being answered.
        await asyncio.sleep(0.05)
        info = json.loads((await nc.request("$JS.API.CONSUMER.INFO.S.C", b"", timeout=10)).data)
        probe_answered_before_end = not finished.is_set()
        await asyncio.wait_for(finished.wait(), 60)
        await sender
        info_after = json.loads((await nc.request("$JS.API.CONSUMER.INFO.S.C", b"", timeout=10)).data)
    finally:
        reader.cancel()
        sender.cancel()
        w.close()
        await nc.close()
    return {
        "statuses": statuses,
        "probe_type": info["type"],
        "probe_during_flood": probe_answered_before_end,
        "num_waiting": info_after["num_waiting"],
        "max_waiting": info_after["config"]["max_waiting"],
    }


async def test_a_flood_of_pull_requests_is_refused_beyond_max_waiting_as_nats_server(tmp_path):
    expected, got = await side_by_side(tmp_path, _flood)
    assert expected["statuses"] == {"409 Exceeded MaxWaiting": N - 512}
    assert got == expected
    assert got["probe_during_flood"] and got["num_waiting"] == 512 == got["max_waiting"]
