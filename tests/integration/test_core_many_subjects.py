"""A publisher over many distinct subjects (issue 31: one subject per device and event), with and
without reply subjects, to wildcard subscribers, a queue group and overlapping subscriptions, through
nats-py: every message arrives once per subscription, in publish order, with its subject, reply and
payload; the same script against nats-server gives the same deliveries."""

from __future__ import annotations

import asyncio
import json
import re

import nats
import pytest

from tests.helpers.inproc import running_server, server_and_client, side_by_side
from tests.helpers.rawclient import RawClient
from tests.helpers.servers import reference_binary

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

DEVICES = 500
EVENTS = ("temp", "hum", "door")
N = 3_000


def message(i: int) -> tuple[str, str, bytes]:
    """The i-th publish: subject, reply (in blocks of 40 with and 40 without; "" for none),
    payload (128 bytes but for every 97th: runs of one size with the odd one between)."""
    subject = f"dev.{i % DEVICES}.{EVENTS[i % 3 if i % 7 else (i // 7) % 3]}"
    reply = "" if (i // 40) % 2 else f"_INBOX.dev.{i}"
    return subject, reply, b"%06d:" % i + b"x" * (121 if i % 97 else i % 300)


async def observe(url: str) -> dict:
    subs_conn = [await nats.connect(url) for _ in range(4)]
    pub = await nats.connect(url, no_echo=False)
    try:
        got: dict[str, list] = {}

        def collect(name):
            got[name] = []

            async def cb(msg):
                got[name].append((msg.subject, msg.reply, msg.data))

            return cb

        a, b, c, d = subs_conn
        await a.subscribe("dev.*.temp", cb=collect("temp"))
        await a.subscribe("dev.7.*", cb=collect("dev7"))  # overlaps temp, same connection
        await b.subscribe("dev.*.hum", cb=collect("hum"))
        await b.subscribe("dev.>", cb=collect("all"))
        await c.subscribe("dev.*.*", queue="workers", cb=collect("q1"))
        await d.subscribe("dev.*.*", queue="workers", cb=collect("q2"))
        await pub.subscribe("dev.*.door", cb=collect("own"))  # the publisher receives its own
        for conn in (*subs_conn, pub):
            await conn.flush()
        for i in range(N):
            subject, reply, payload = message(i)
            await pub.publish(subject, payload, reply=reply)
        await pub.flush()
        want = {"all": N}
        for _ in range(200):
            if len(got["all"]) >= want["all"] and len(got["q1"]) + len(got["q2"]) >= N:
                break
            await asyncio.sleep(0.02)
        for conn in (*subs_conn, pub):
            await conn.flush()
        await asyncio.sleep(0.05)
        # a queue group: each message to exactly one member, each member's share in order
        shares = [got.pop("q1"), got.pop("q2")]
        for share in shares:
            order = [int(m[2].split(b":")[0]) for m in share]
            assert order == sorted(order)
        got["queue"] = sorted(shares[0] + shares[1], key=lambda m: int(m[2].split(b":")[0]))
        return got
    finally:
        for conn in (*subs_conn, pub):
            await conn.close()


def expected() -> dict:
    msgs = [message(i) for i in range(N)]
    want: dict[str, list] = {"temp": [], "dev7": [], "hum": [], "all": [], "own": [], "queue": []}
    for subject, reply, payload in msgs:
        m = (subject, reply, payload)
        _, dev, event = subject.split(".")
        want["all"].append(m)
        want["queue"].append(m)
        if event == "temp":
            want["temp"].append(m)
        if event == "hum":
            want["hum"].append(m)
        if event == "door":
            want["own"].append(m)
        if dev == "7":
            want["dev7"].append(m)
    return want


async def test_every_message_in_order_with_its_subject_and_reply():
    async with running_server() as server:
        got = await observe(server.client_url)
    assert got == expected()


@pytest.mark.reference
@pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed")
async def test_same_deliveries_as_nats_server(tmp_path):
    ref, ours = await side_by_side(tmp_path, observe)
    assert ref == ours == expected()


CONFIG = """
authorization {
  users = [
    {user: pub, password: p, permissions: {publish: {allow: ["dev.*.temp", "mapped.*.hum"]}, subscribe: "_INBOX.>"}}
    {user: sub, password: s}
  ]
}
mappings {
  "dev.*.hum": "mapped.{{wildcard(1)}}.hum"
}
"""


async def observe_checked(url: str) -> dict:
    """Runs over many subjects from a user with publish permissions, in an account with a mapping:
    each message is checked and mapped on its own (denied ones answered with -ERR, the rest
    delivered in order under their mapped subject, with their reply)."""
    host = url.removeprefix("nats://")
    errors: list[str] = []

    async def on_error(e):
        errors.append(str(e))

    sub = await nats.connect(f"nats://sub:s@{host}")
    pub = await nats.connect(f"nats://pub:p@{host}", error_cb=on_error)
    try:
        got: dict[str, list] = {"dev": [], "mapped": []}

        def collect(name):
            async def cb(msg):
                got[name].append((msg.subject, msg.reply, msg.data))

            return cb

        # (nats-py runs each subscription's callbacks in a task of its own: one list each)
        await sub.subscribe("dev.>", cb=collect("dev"))
        await sub.subscribe("mapped.>", cb=collect("mapped"))
        await sub.flush()
        for i in range(N):
            subject, reply, payload = message(i)
            await pub.publish(subject, payload, reply=reply)
        await pub.flush()
        allowed = sum(1 for i in range(N) if not message(i)[0].endswith(".door"))
        for _ in range(200):
            if len(got["dev"]) + len(got["mapped"]) >= allowed and len(errors) >= N - allowed:
                break
            await asyncio.sleep(0.02)
        return {"got": got, "errors": len(errors), "error_text": sorted(set(errors))[:3]}
    finally:
        await pub.close()
        await sub.close()


def expected_checked() -> dict:
    out: dict[str, list] = {"dev": [], "mapped": []}
    for i in range(N):
        subject, reply, payload = message(i)
        _, dev, event = subject.split(".")
        if event == "hum":
            out["mapped"].append((f"mapped.{dev}.hum", reply, payload))
        elif event == "temp":
            out["dev"].append((subject, reply, payload))
    return out


@pytest.mark.reference
@pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed")
async def test_permissions_and_mappings_apply_to_every_message_of_a_run(tmp_path):
    ref, ours = await side_by_side(tmp_path, observe_checked, config=CONFIG)
    assert ours["got"] == ref["got"] == expected_checked()
    door = sum(1 for i in range(N) if message(i)[0].endswith(".door"))
    assert ours["errors"] == ref["errors"] == door
    assert ours["error_text"] == ref["error_text"]


async def test_a_stream_stores_and_acknowledges_a_run_of_requests_in_order():
    # An asynchronous JetStream publisher over many subjects (a reply each: the parser's
    # OP_PUB_RUN with replies): every message stored in order, every PubAck to its own reply.
    async with server_and_client(jetstream=True) as (server, nc):
        js = nc.jetstream()
        await js.add_stream(name="R", subjects=["r.>"])
        n = 300
        subjects = [b"r.%d.%d" % (i % 7, i) for i in range(n)]
        payloads = [b"p%04d" % i for i in range(n)]
        frames = b"".join(
            b"PUB %s _INBOX.acks.%d 5\r\n%s\r\n" % (s, i, p) for i, (s, p) in enumerate(zip(subjects, payloads))
        )
        async with RawClient.connect(server.port) as c:
            await c.send(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB _INBOX.acks.* 1\r\n')
            await c.send(frames + b"PING\r\n")
            await c.expect(rb"PONG\r\n")
            got = b""
            for _ in range(100):
                got += await c.read_all(0.05)
                if got.count(b"MSG _INBOX.acks.") >= n:
                    break
        acks = re.findall(rb"MSG _INBOX\.acks\.(\d+) 1 \d+\r\n(\{[^\r]*\})\r\n", got)
        assert [int(i) for i, _ in acks] == list(range(n))
        assert [json.loads(body)["seq"] for _, body in acks] == list(range(1, n + 1))
        for seq in (1, 2, 150, n):
            m = await js.get_msg("R", seq)
            assert (m.subject, m.data) == (subjects[seq - 1].decode(), payloads[seq - 1])
