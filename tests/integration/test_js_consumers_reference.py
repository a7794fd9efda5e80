"""Differential tests: the same consumer script against nats-server 2.15.1 (subprocess) and the
in-process natsd; replies, status headers, ack subjects (timestamp token masked) and consumer /
stream state must be identical. Volatile fields (times, ids, versions) are masked."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.helpers.inproc import running_server
from tests.helpers.servers import start_server

pytestmark = pytest.mark.reference

MASK = {
    "created",
    "ts",
    "timestamp",
    "id",
    "last_active",
    "metadata",
    "pause_remaining",
    "first_ts",
    "last_ts",
    "cluster",
}


def scrub(o):
    if isinstance(o, dict):
        return {k: ("*" if k in MASK else scrub(v)) for k, v in o.items()}
    if isinstance(o, list):
        return [scrub(x) for x in o]
    return o


def norm(m) -> tuple:
    rep = m.reply
    if rep.startswith("$JS.ACK."):
        t = rep.split(".")
        t[7] = "TS"
        rep = ".".join(t)
    elif rep.startswith("$JS.FC."):
        rep = rep.rsplit(".", 1)[0] + ".RND"
    return (m.subject if not m.subject.startswith("IN.") else "IN", rep, dict(m.headers) if m.headers else None, m.data)


async def both(tmp_path, script):
    ref = start_server("reference", tmp_path)
    try:
        a = await script(ref.url)
    finally:
        ref.stop()
    async with running_server(jetstream=True) as srv:
        b = await script(srv.client_url)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x == y


async def pull_and_ack_script(url: str) -> list:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list = []
    got: list = []

    async def cb(m) -> None:
        got.append(m)

    await nc.subscribe("IN.>", cb=cb)
    await js.add_stream(name="S", subjects=["s.>"], storage="memory")
    for i in range(5):
        await js.publish(f"s.{i % 2}", b"m%d" % i)

    async def req(subj: str, body=b"") -> dict:
        r = await nc.request(subj, json.dumps(body).encode() if isinstance(body, dict) else body, timeout=2)
        return scrub(json.loads(r.data))

    async def nxt(name: str, body, wait: float = 0.15) -> None:
        await nc.publish(
            f"$JS.API.CONSUMER.MSG.NEXT.S.{name}",
            json.dumps(body).encode() if isinstance(body, dict) else body,
            reply="IN.x",
        )
        await asyncio.sleep(wait)
        out.append(("next", name, [norm(m) for m in got]))
        got.clear()

    async def ack(m, body: bytes = b"") -> None:
        await nc.publish(m.reply, body, reply="IN.ackack")
        await asyncio.sleep(0.05)
        out.append(("ack", body, [norm(x) for x in got]))
        got.clear()

    await req(
        "$JS.API.CONSUMER.CREATE.S.C",
        {"stream_name": "S", "config": {"durable_name": "C", "ack_policy": "explicit", "ack_wait": 2_000_000_000}},
    )
    out.append(await req("$JS.API.CONSUMER.INFO.S.C"))
    await nxt("C", {"batch": 2, "expires": 300_000_000}, 0.5)
    out.append(await req("$JS.API.CONSUMER.INFO.S.C"))
    await nxt("C", {"batch": 10, "no_wait": True})
    await nxt("C", {"batch": 1, "max_bytes": 10, "expires": 300_000_000}, 0.5)
    await req(
        "$JS.API.CONSUMER.CREATE.S.D",
        {"stream_name": "S", "config": {"durable_name": "D", "ack_policy": "explicit", "filter_subject": "s.1"}},
    )
    await nxt("D", {"batch": 1, "max_bytes": 1000, "expires": 300_000_000}, 0.5)
    await nxt("D", b"5", 0.3)
    out.append(await req("$JS.API.CONSUMER.INFO.S.D"))
    await nxt("D", {"batch": 3, "expires": 400_000_000, "idle_heartbeat": 150_000_000}, 0.6)
    await req(
        "$JS.API.CONSUMER.CREATE.S.E", {"stream_name": "S", "config": {"durable_name": "E", "ack_policy": "explicit"}}
    )
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S.E", b'{"batch":5,"expires":1000000000}', reply="IN.x")
    await asyncio.sleep(0.2)
    msgs = list(got)
    got.clear()
    await ack(msgs[1])
    await ack(msgs[1])
    await ack(msgs[2], b"-NAK")
    await ack(msgs[3], b"+WPI")
    await ack(msgs[4], b"+TERM reason")
    await asyncio.sleep(0.1)
    out.append(("after-acks", [norm(m) for m in got]))
    got.clear()
    out.append(await req("$JS.API.CONSUMER.INFO.S.E"))
    await req("$JS.API.CONSUMER.CREATE.S.F", {"stream_name": "S", "config": {"durable_name": "F", "ack_policy": "all"}})
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S.F", b'{"batch":5,"expires":1000000000}', reply="IN.x")
    await asyncio.sleep(0.2)
    msgs = list(got)
    got.clear()
    await ack(msgs[2])
    await ack(msgs[0])
    out.append(await req("$JS.API.CONSUMER.INFO.S.F"))
    await nc.close()
    return out


async def retention_script(url: str) -> list:
    nc = await nats.connect(url)
    out: list = []
    got: list = []

    async def cb(m) -> None:
        got.append(m)

    await nc.subscribe("IN.>", cb=cb)

    async def req(subj: str, body=b"") -> dict:
        r = await nc.request(subj, json.dumps(body).encode() if isinstance(body, dict) else body, timeout=2)
        return scrub(json.loads(r.data))

    async def nxt(stream: str, name: str, body: dict) -> list:
        await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}", json.dumps(body).encode(), reply="IN.x")
        await asyncio.sleep(0.2)
        out.append([norm(m) for m in got])
        ms = list(got)
        got.clear()
        return ms

    out.append(
        await req(
            "$JS.API.STREAM.CREATE.I", {"name": "I", "subjects": ["i.>"], "retention": "interest", "storage": "memory"}
        )
    )
    out.append(await req("i.a", b"x"))
    out.append((await req("$JS.API.STREAM.INFO.I"))["state"])
    out.append(
        await req(
            "$JS.API.CONSUMER.CREATE.I.c1",
            {"stream_name": "I", "config": {"durable_name": "c1", "ack_policy": "explicit"}},
        )
    )
    out.append(
        await req(
            "$JS.API.CONSUMER.CREATE.I.c2.i.b",
            {"stream_name": "I", "config": {"durable_name": "c2", "ack_policy": "explicit", "filter_subject": "i.b"}},
        )
    )
    for s in ("i.a", "i.b", "i.b", "i.c"):
        out.append(await req(s, b"y"))
    out.append((await req("$JS.API.STREAM.INFO.I"))["state"])
    for m in await nxt("I", "c1", {"batch": 4, "expires": 500_000_000}):
        await nc.request(m.reply, b"", timeout=1)
    out.append((await req("$JS.API.STREAM.INFO.I"))["state"])
    out.append(await req("$JS.API.CONSUMER.INFO.I.c2"))
    out.append(await req("$JS.API.CONSUMER.DELETE.I.c2"))
    await asyncio.sleep(0.1)
    out.append((await req("$JS.API.STREAM.INFO.I"))["state"])
    out.append(
        await req(
            "$JS.API.STREAM.CREATE.W", {"name": "W", "subjects": ["w.>"], "retention": "workqueue", "storage": "memory"}
        )
    )
    out.append(
        await req(
            "$JS.API.CONSUMER.CREATE.W.w1",
            {
                "stream_name": "W",
                "config": {"durable_name": "w1", "ack_policy": "explicit", "max_deliver": 2, "ack_wait": 300_000_000},
            },
        )
    )
    for _ in range(3):
        out.append(await req("w.x", b"z"))
    ms = await nxt("W", "w1", {"batch": 3, "expires": 500_000_000})
    await nc.request(ms[0].reply, b"", timeout=1)
    await nc.request(ms[1].reply, b"+TERM", timeout=1)
    out.append((await req("$JS.API.STREAM.INFO.W"))["state"])
    await asyncio.sleep(0.5)
    await nxt("W", "w1", {"batch": 3, "expires": 500_000_000})
    await asyncio.sleep(0.5)
    await nxt("W", "w1", {"batch": 3, "expires": 300_000_000})
    out.append(await req("$JS.API.CONSUMER.INFO.W.w1"))
    out.append((await req("$JS.API.STREAM.INFO.W"))["state"])
    await nc.close()
    return out


async def flow_control_script(url: str) -> list:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="B", subjects=["big"], storage="memory")
    for _ in range(120):
        await js.publish("big", b"z" * 60000)
    events: list = []
    held: list = []

    async def cb(m) -> None:
        if m.headers and m.headers.get("Status") == "100":
            if m.reply:
                events.append(("FC", sum(1 for e in events if e == "D")))
                held.append(m.reply)
            else:
                events.append(("HB", m.headers.get("Nats-Consumer-Stalled", "")[:7]))
        else:
            events.append("D")

    await nc.subscribe("dlv", cb=cb)
    await nc.request(
        "$JS.API.CONSUMER.CREATE.B",
        json.dumps(
            {
                "stream_name": "B",
                "config": {
                    "deliver_subject": "dlv",
                    "ack_policy": "none",
                    "flow_control": True,
                    "idle_heartbeat": 500_000_000,
                },
            }
        ).encode(),
    )
    await asyncio.sleep(1.2)
    stalled = sum(1 for e in events if e == "D")
    first = [e for e in events if isinstance(e, tuple)]
    for _ in range(4):
        for r in held:
            await nc.publish(r, b"")
        held.clear()
        await asyncio.sleep(0.4)
    total = sum(1 for e in events if e == "D")
    await nc.close()
    return [stalled, first[:3], total]


async def push_replay_script(url: str) -> list:
    """A push consumer with flow control replaying 20,000 small stored messages (natsd sends
    them in runs cut where flow control acts): where the first requests go and where delivery
    stalls while they are held, then, answered, every message in order with its ack subject
    (sequences across 9,999 -> 10,000 and the pending count down to 0)."""
    n = 20_000
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="R", subjects=["r.>"], storage="file")
    for i in range(n):
        await nc.publish(f"r.{i % 7}", b"%06d" % i + b"y" * 100)
    await nc.flush()
    for _ in range(200):
        if (await js.stream_info("R")).state.messages == n:
            break
        await asyncio.sleep(0.05)
    events: list = []
    held: list = []
    data: list = []

    async def cb(m) -> None:
        if m.headers and m.headers.get("Status") == "100":
            if m.reply:
                events.append(("FC", len(data)))
                held.append(m.reply)
            else:
                events.append(("HB", len(data)))
        else:
            data.append(norm(m))

    await nc.subscribe("dlv", cb=cb)
    await nc.request(
        "$JS.API.CONSUMER.CREATE.R.C",
        json.dumps(
            {
                "stream_name": "R",
                "config": {
                    "name": "C",
                    "deliver_subject": "dlv",
                    "ack_policy": "none",
                    "flow_control": True,
                    "idle_heartbeat": 30_000_000_000,
                },
            }
        ).encode(),
    )
    for _ in range(100):  # until it stalls: nothing more for 0.3 s
        before = len(data)
        await asyncio.sleep(0.3)
        if len(data) == before:
            break
    stalled = (len(data), list(events))
    for _ in range(200):
        if len(data) == n:
            break
        for r in held:
            await nc.publish(r, b"")
        held.clear()
        await asyncio.sleep(0.05)
    info = scrub(json.loads((await nc.request("$JS.API.CONSUMER.INFO.R.C", b"")).data))
    await nc.close()
    return [stalled, len(data), data, info]


async def pending_and_ack_runs_script(url: str) -> list:
    """no_wait on a consumer created before its messages; an interest stream's message acked
    after a redelivery; 200 acks flushed in one write (natsd takes them as one run)."""
    nc = await nats.connect(url)
    out: list = []
    got: list = []

    async def cb(m) -> None:
        got.append(m)

    await nc.subscribe("IN.>", cb=cb)

    async def req(subj: str, body=b"") -> dict:
        r = await nc.request(subj, json.dumps(body).encode() if isinstance(body, dict) else body, timeout=2)
        return scrub(json.loads(r.data))

    async def nxt(stream: str, name: str, body: dict, want: int) -> list:
        # Wait for ``want`` messages or a status (no fixed sleep: acks and stores run in the
        # background on both servers, at the machine's pace).
        await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}", json.dumps(body).encode(), reply="IN.x")
        for _ in range(200):
            if sum(1 for m in got if not m.headers) >= want or any(m.headers for m in got):
                break
            await asyncio.sleep(0.01)
        out.append([norm(m) for m in got])
        ms = [m for m in got if not m.headers]
        got.clear()
        return ms

    async def settled(stream: str) -> dict:
        # the consumer's INFO once every ack sent so far has been applied
        for _ in range(100):
            info = await req(f"$JS.API.CONSUMER.INFO.{stream}.C")
            if info["num_ack_pending"] == 0:
                break
            await asyncio.sleep(0.02)
        return info

    for name, retention in (("P", "limits"), ("I", "interest")):
        out.append(
            await req(
                f"$JS.API.STREAM.CREATE.{name}",
                {"name": name, "subjects": [name.lower() + ".>"], "retention": retention, "storage": "file"},
            )
        )
        out.append(
            await req(
                f"$JS.API.CONSUMER.CREATE.{name}.C",
                {"stream_name": name, "config": {"durable_name": "C", "ack_policy": "explicit"}},
            )
        )
        for i in range(5):
            out.append(await req(f"{name.lower()}.{i % 2}", b"m%d" % i))
        ms = await nxt(name, "C", {"batch": 10, "no_wait": True}, 5)
        await nc.publish(ms[1].reply, b"-NAK")
        for m in ms[:1] + ms[2:]:
            await nc.publish(m.reply, b"+ACK")
        await nc.flush()
        again = await nxt(name, "C", {"batch": 1, "expires": 2_000_000_000}, 1)
        await nc.publish(again[0].reply, b"")
        await nc.flush()
        out.append(await settled(name))
        out.append((await req(f"$JS.API.STREAM.INFO.{name}"))["state"])
    for i in range(200):
        await nc.publish(f"p.{i % 3}", b"r%d" % i)
    await nc.flush()
    # Both servers store these in the background: wait until all are in, or the pending count
    # each delivery carries depends on the machine's load.
    for _ in range(100):
        if (await req("$JS.API.STREAM.INFO.P"))["state"]["messages"] == 205:
            break
        await asyncio.sleep(0.05)
    ms = await nxt("P", "C", {"batch": 200, "expires": 2_000_000_000}, 200)
    for m in ms:  # buffered by the client: one or a few writes
        await nc.publish(m.reply, b"+ACK")
    await nc.flush()
    out.append(await settled("P"))
    await nc.close()
    return out


async def test_no_wait_redelivery_retention_and_ack_runs_match_reference(tmp_path) -> None:
    await both(tmp_path, pending_and_ack_runs_script)


async def test_pull_statuses_and_acks_match_reference(tmp_path) -> None:
    await both(tmp_path, pull_and_ack_script)


async def test_retention_interplay_matches_reference(tmp_path) -> None:
    await both(tmp_path, retention_script)


async def test_flow_control_window_matches_reference(tmp_path) -> None:
    await both(tmp_path, flow_control_script)


async def test_push_replay_in_runs_matches_reference(tmp_path) -> None:
    await both(tmp_path, push_replay_script)
