"""``allow_responses`` of a leaf's user on the accepting side, side by side with nats-server: a
leaf whose user may not publish to ``_INBOX.>`` answers requests it was sent (up to ``max``
times per reply subject); any other publish is a permissions violation.

A nats-server or natsd leaf never sends such a reply (it filters its side by the ``export`` of
the hub's INFO, which does not mention ``allow_responses``), so the leaf here is a raw socket
speaking the leaf protocol, as a leaf that does not filter would."""

from __future__ import annotations

import asyncio
import json
import time

import nats
import pytest

from tests.acceptance.test_leaf_secure_reference import HUBS, Hub
from tests.helpers.servers import reference_binary

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.reference,
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]


def hub_body(responses: str) -> str:
    perms = 'publish: { allow: ["pub.>"] }, subscribe: { allow: ["svc.>"] }'
    if responses:
        perms += f", allow_responses: {responses}"
    return (
        "authorization { users = [ "
        f"{{ user: leaf, password: pw, permissions: {{ {perms} }} }}, "
        "{ user: cli, password: pw } ] }\n"
        "leafnodes { port: LEAF_PORT }\n"
    )


class RawLeaf:
    """The soliciting side of a leaf link over a bare socket."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.r, self.w = reader, writer
        self.lmsgs: list[tuple[str, str]] = []  # (subject, reply)
        self.errs: list[str] = []
        self.closed = False
        self.task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(cls, port: int) -> "RawLeaf":
        r, w = await asyncio.open_connection("127.0.0.1", port)
        await r.readline()  # INFO
        w.write(b'CONNECT {"user":"leaf","pass":"pw","name":"RAW","headers":true}\r\nLS+ svc.x\r\n')
        await w.drain()
        return cls(r, w)

    async def _read(self) -> None:
        try:
            while True:
                line = await self.r.readline()
                if not line:
                    break
                op = line.split(b" ", 1)[0].rstrip(b"\r\n").upper()
                if op == b"PING":
                    self.w.write(b"PONG\r\n")
                elif op == b"-ERR":
                    self.errs.append(line.decode().strip())
                elif op in (b"LMSG", b"HLMSG"):
                    t = line.decode().split()
                    size = int(t[-1])
                    await self.r.readexactly(size + 2)
                    self.lmsgs.append((t[1], t[2] if len(t) > 3 else ""))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        self.closed = True

    def publish(self, subject: str, payload: bytes) -> None:
        self.w.write(b"LMSG %s %d\r\n%s\r\n" % (subject.encode(), len(payload), payload))

    async def close(self) -> None:
        self.w.close()
        self.task.cancel()


async def _observe(hub: Hub, answers: int) -> dict:
    leaf = await RawLeaf.connect(hub.leaf_port)
    cli = await nats.connect(f"nats://cli:pw@127.0.0.1:{hub.proc.port}")
    try:
        got: list[bytes] = []

        async def on_reply(m) -> None:
            got.append(m.data)

        inbox = "_INBOX.raw.1"
        await cli.subscribe(inbox, cb=on_reply)
        await cli.flush()
        deadline = time.monotonic() + 10
        while not leaf.lmsgs:  # until the leaf's LS+ svc.x reached the hub
            assert time.monotonic() < deadline, "no request reached the leaf"
            await cli.publish("svc.x", b"req", reply=inbox)
            await cli.flush()
            await asyncio.sleep(0.1)
        subject, reply = leaf.lmsgs[0]
        for i in range(answers):
            leaf.publish(reply, b"answer%d" % i)
        leaf.publish("pub.ok", b"allowed")  # its publish permission covers it
        await leaf.w.drain()
        await asyncio.sleep(0.5)
        return {
            "request": [subject, reply],
            "replies": sorted({g.decode() for g in got}),
            "errs": leaf.errs,
            "closed": leaf.closed,
        }
    finally:
        await cli.close()
        await leaf.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "responses,answers",
    [
        pytest.param("{max: 2}", 2, id="max2-within"),
        pytest.param("{max: 2}", 3, id="max2-over"),
        pytest.param("true", 1, id="true"),
        pytest.param("", 1, id="without"),
    ],
)
async def test_allow_responses_on_leaf_user(tmp_path, responses, answers):
    seen = {}
    for kind in HUBS:
        d = tmp_path / kind
        d.mkdir()
        hub = Hub(kind, d, hub_body(responses))
        try:
            seen[kind] = await _observe(hub, answers)
        finally:
            hub.stop()
    print(json.dumps(seen))
    assert seen["natsd"] == seen["reference"]
