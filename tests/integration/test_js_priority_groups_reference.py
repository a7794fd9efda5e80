"""Priority groups side by side: the same nats-py scripts against nats-server 2.15.1 (subprocess)
and the in-process natsd, for the three policies (``overflow``, ``pinned_client``,
``prioritized``), CONSUMER.UNPIN, the PINNED/UNPINNED advisories, CONSUMER.INFO's
``priority_groups`` and a durable's pin across a restart.

Compared: which inbox gets which message, status lines and their headers, the ``Nats-Pin-Id``
header (pin ids renamed PIN1, PIN2, ... in order of appearance, so "same pin" / "new pin" /
"empty pin" are compared, not the random ids), API replies and advisories (times and ids masked).
nats-py has no priority-group fetch, so the pull requests are raw MSG.NEXT publishes.
"""

from __future__ import annotations

import asyncio
import json
import tempfile

import nats
import pytest

from tests.helpers.inproc import running_server, side_by_side
from tests.helpers.servers import start_server

pytestmark = [pytest.mark.reference, pytest.mark.timeout(120)]

MASK = {"created", "ts", "timestamp", "id", "last_active", "metadata", "first_ts", "last_ts", "cluster"}
ZERO_TS = "0001-01-01T00:00:00Z"
SEC = 1_000_000_000
MS = 1_000_000


class Observer:
    """One connection's view: inboxes ``IN.<name>``, the advisories, pin ids renamed."""

    def __init__(self, nc) -> None:
        self.nc = nc
        self.got: list = []
        self.pins: dict[str, str] = {}
        self.out: list = []

    async def start(self) -> None:
        # One subscription per inbox: a delivery keeps the stream subject, so the subscription
        # tells which request got it.
        def tagged(inbox: str):
            async def cb(m) -> None:
                self.got.append((inbox, m))

            return cb

        for inbox in "abcdewxyz":
            await self.nc.subscribe(f"IN.{inbox}", cb=tagged(inbox))
        await self.nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.*.*.*", cb=tagged("adv"))

    def pin(self, v: str) -> str:
        if not v:
            return v
        if v not in self.pins:
            self.pins[v] = f"PIN{len(self.pins) + 1}"
        return self.pins[v]

    def real_pin(self, alias: str) -> str:
        return next(k for k, v in self.pins.items() if v == alias)

    def scrub(self, o):
        if isinstance(o, dict):
            out = {}
            for k, v in o.items():
                if k in ("pinned_client_id", "pinned_id"):
                    out[k] = self.pin(v)
                elif k == "pinned_ts":
                    out[k] = v if v == ZERO_TS else "*"
                elif k in MASK:
                    out[k] = "*"
                else:
                    out[k] = self.scrub(v)
            return out
        if isinstance(o, list):
            return [self.scrub(x) for x in o]
        return o

    def norm(self, tagged: tuple) -> tuple:
        inbox, m = tagged
        if inbox == "adv":
            return ("ADV", m.subject, self.scrub(json.loads(m.data)))
        rep = m.reply
        if rep.startswith("$JS.ACK."):
            t = rep.split(".")
            t[7] = "TS"
            rep = ".".join(t)
        hdrs = None
        if m.headers:
            hdrs = {str(k): (self.pin(v) if k == "Nats-Pin-Id" else v) for k, v in m.headers.items()}
        return (inbox, m.subject, rep, hdrs, m.data)

    async def settle(self, wait: float = 0.2) -> list:
        await asyncio.sleep(wait)
        ms = [self.norm(m) for m in self.got]
        self.got.clear()
        return ms

    async def req(self, subj: str, body=b"") -> dict:
        r = await self.nc.request(subj, json.dumps(body).encode() if isinstance(body, dict) else body, timeout=3)
        return self.scrub(json.loads(r.data))

    async def nxt(self, consumer: str, body, inbox: str = "a", stream: str = "S", wait: float = 0.2) -> None:
        """A pull request with reply ``IN.<inbox>``; records what arrived meanwhile."""
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        await self.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", data, reply=f"IN.{inbox}")
        label = data.decode()
        for real, alias in self.pins.items():
            label = label.replace(real, alias)
        self.out.append((f"next {consumer} {inbox} {label}", await self.settle(wait)))

    async def info(self, consumer: str, stream: str = "S") -> None:
        i = await self.req(f"$JS.API.CONSUMER.INFO.{stream}.{consumer}")
        self.out.append(
            (
                f"info {consumer}",
                {k: i.get(k) for k in ("num_waiting", "num_pending", "num_ack_pending", "delivered", "priority_groups")}
                | {"has_priority_groups": "priority_groups" in i},
            )
        )


def _cfg(name: str, **kw) -> dict:
    return {"stream_name": kw.pop("stream", "S"), "config": {"durable_name": name, "ack_policy": "explicit", **kw}}


async def pinned_script(url: str) -> list:
    nc = await nats.connect(url)
    ob = Observer(nc)
    await ob.start()
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s.>"], storage="memory")
    for i in range(12):
        await js.publish(f"s.{i}", b"m%d" % i, headers={"X-K": str(i)} if i % 2 else None)
    ob.out.append(
        (
            "create",
            await ob.req(
                "$JS.API.CONSUMER.CREATE.S.P",
                _cfg("P", priority_groups=["A", "B"], priority_policy="pinned_client", priority_timeout=SEC),
            ),
        )
    )
    await ob.settle(0.05)
    await ob.info("P")
    # What a request may carry.
    for body in (
        {"batch": 1},
        {"batch": 1, "group": "X"},
        {"batch": 1, "group": "A", "min_pending": 3},
        {"batch": 1, "group": "A", "min_ack_pending": 1},
        {"batch": 1, "group": "A", "priority": 10},
        {"batch": 1, "group": "A", "priority": -1},
    ):
        await ob.nxt("P", body)
    # The first request served gets the pin (a run of two: headers added to both forms).
    await ob.nxt("P", {"batch": 2, "group": "A", "expires": 5 * SEC}, "a")
    await ob.info("P")
    pin1 = ob.real_pin("PIN1")
    # Others are passed over while the pin is held; a wrong id is refused at once.
    await ob.nxt("P", {"batch": 2, "group": "A", "expires": 6 * SEC}, "b")
    await ob.nxt("P", {"batch": 1, "group": "A", "id": "bogus"}, "a")
    await ob.nxt("P", {"batch": 1, "group": "B", "id": pin1}, "a")
    await ob.info("P")
    # No pull from the pinned client for priority_timeout: the pin lapses, b is pinned.
    ob.out.append(("ttl", await ob.settle(1.5)))
    await ob.info("P")
    await ob.nxt("P", {"batch": 1, "group": "A", "id": pin1}, "a")
    # Unpin (any of the consumer's groups), then the old pin queued: 423 Nats-Wrong-Pin-Id.
    ob.out.append(("unpin B", await ob.req("$JS.API.CONSUMER.UNPIN.S.P", {"group": "B"})))
    ob.out.append(("unpin adv", await ob.settle(0.1)))
    await ob.nxt("P", {"batch": 1, "group": "A", "id": pin1, "expires": SEC}, "a")
    await ob.info("P")
    # A request without a priority part (plain batch) is served with an empty pin header.
    await ob.nxt("P", b"1", "c")
    await ob.nxt("P", {"batch": 1, "group": "A", "no_wait": True}, "c")
    for body in ({"group": "Z"}, {}, b"", {"group": "A!"}, b"{", {"group": 5}, b'{"group": "A", "other": 1}', b" [1] "):
        ob.out.append((f"unpin {body!r}", await ob.req("$JS.API.CONSUMER.UNPIN.S.P", body)))
    ob.out.append(("unpin no consumer", await ob.req("$JS.API.CONSUMER.UNPIN.S.X", {"group": "A"})))
    ob.out.append(("unpin no stream", await ob.req("$JS.API.CONSUMER.UNPIN.Q.X", {"group": "A"})))
    await ob.req("$JS.API.CONSUMER.CREATE.S.N", _cfg("N"))
    ob.out.append(("unpin no groups", await ob.req("$JS.API.CONSUMER.UNPIN.S.N", {"group": "A"})))
    await ob.nxt("N", {"batch": 1, "id": "x"})
    await ob.nxt("N", {"batch": 1, "group": "whatever"})
    await ob.info("N")
    await nc.close()
    return ob.out


async def overflow_script(url: str) -> list:
    nc = await nats.connect(url)
    ob = Observer(nc)
    await ob.start()
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s.>"], storage="memory")
    for i in range(4):
        await js.publish("s.x", b"o%d" % i)
    ob.out.append(
        (
            "create",
            await ob.req("$JS.API.CONSUMER.CREATE.S.O", _cfg("O", priority_groups=["A"], priority_policy="overflow")),
        )
    )
    await ob.settle(0.05)
    await ob.nxt("O", {"batch": 1, "group": "A", "min_pending": 10, "expires": 3 * SEC}, "a")
    await ob.nxt("O", {"batch": 1, "group": "A", "expires": 3 * SEC}, "b")
    await ob.info("O")
    for i in range(10):
        await js.publish("s.y", b"p%d" % i)
    ob.out.append(("published", await ob.settle()))
    await ob.nxt("O", {"batch": 1, "group": "A", "min_ack_pending": 5, "expires": 400 * MS}, "c", wait=0.6)
    await ob.nxt("O", {"batch": 1, "group": "A", "min_ack_pending": 2, "expires": 400 * MS}, "d")
    await ob.nxt("O", {"batch": 3, "group": "A", "min_pending": 9, "min_ack_pending": 50, "expires": SEC}, "e")
    await ob.nxt("O", {"batch": 1, "group": "A", "id": "x"}, "e")
    await ob.info("O")
    await nc.close()
    return ob.out


async def prioritized_script(url: str) -> list:
    nc = await nats.connect(url)
    ob = Observer(nc)
    await ob.start()
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s.>"], storage="memory")
    ob.out.append(
        (
            "create",
            await ob.req(
                "$JS.API.CONSUMER.CREATE.S.R", _cfg("R", priority_groups=["A"], priority_policy="prioritized")
            ),
        )
    )
    await ob.settle(0.05)
    await ob.nxt("R", {"batch": 2, "group": "A", "priority": 5, "expires": 3 * SEC}, "x", wait=0.05)
    await ob.nxt("R", {"batch": 2, "group": "A", "priority": 1, "expires": 3 * SEC}, "y", wait=0.05)
    await ob.nxt("R", {"batch": 1, "group": "A", "priority": 3, "expires": 3 * SEC}, "z", wait=0.05)
    await ob.nxt("R", {"batch": 1, "group": "A", "priority": 1, "expires": 3 * SEC}, "w", wait=0.05)
    await ob.info("R")
    for i in range(6):
        await js.publish("s.x", b"r%d" % i)
        ob.out.append((f"pub {i}", await ob.settle(0.05)))
    await ob.nxt("R", {"batch": 1, "group": "A", "priority": 10}, "x")
    await ob.info("R")
    await nc.close()
    return ob.out


@pytest.mark.parametrize(
    "script", [pinned_script, overflow_script, prioritized_script], ids=["pinned_client", "overflow", "prioritized"]
)
async def test_priority_groups_match_reference(tmp_path, script) -> None:
    expected, got = await side_by_side(tmp_path, script)
    assert len(expected) == len(got)
    for x, y in zip(expected, got):
        assert x == y


async def _restart_phase(url: str, ob_out: list, first: bool, pins: dict) -> None:
    nc = await nats.connect(url)
    ob = Observer(nc)
    ob.pins = pins
    await ob.start()
    js = nc.jetstream()
    if first:
        await js.add_stream(name="S", subjects=["s.>"], storage="file")
        for i in range(6):
            await js.publish("s.x", b"d%d" % i)
        await ob.req("$JS.API.CONSUMER.CREATE.S.D", _cfg("D", priority_groups=["A"], priority_policy="pinned_client"))
        await ob.settle(0.05)
        await ob.nxt("D", {"batch": 1, "group": "A"}, "a")
        await ob.info("D")
    else:
        await ob.info("D")
        await ob.nxt("D", {"batch": 1, "group": "A", "id": ob.real_pin("PIN1"), "expires": SEC}, "a")
        await ob.nxt("D", {"batch": 1, "group": "A"}, "b")
        await ob.info("D")
    ob_out.extend(ob.out)
    await nc.close()


async def test_pin_across_a_durable_restart_matches_reference(tmp_path) -> None:
    """Neither server keeps the pin: after a restart the old id gets 423 Nats-Wrong-Pin-Id when
    a message comes for it, and the next request without an id is pinned with a new id."""
    results = []
    sd = tempfile.mkdtemp(dir=tmp_path)
    out: list = []
    pins: dict = {}
    ref = start_server("reference", tmp_path / "r1", store_dir=sd)
    try:
        await _restart_phase(ref.url, out, True, pins)
    finally:
        ref.stop()
    ref = start_server("reference", tmp_path / "r2", store_dir=sd)
    try:
        await _restart_phase(ref.url, out, False, pins)
    finally:
        ref.stop()
    results.append(out)
    sd = tempfile.mkdtemp(dir=tmp_path)
    out, pins = [], {}
    async with running_server(jetstream=True, store_dir=sd) as srv:
        await _restart_phase(srv.client_url, out, True, pins)
    async with running_server(jetstream=True, store_dir=sd) as srv:
        await _restart_phase(srv.client_url, out, False, pins)
    results.append(out)
    expected, got = results
    assert len(expected) == len(got)
    for x, y in zip(expected, got):
        assert x == y
