"""Differential test: consumer and stream state after purges, deletes and pulls, acks sent as
requests where nobody takes them, batch direct gets, API counters and consumer-config texts, run
against the reference nats-server and natsd; the observations must be equal (timestamps and ids
left out)."""

from __future__ import annotations

import json

import nats
import pytest

from tests.helpers.inproc import side_by_side
from tests.helpers.servers import reference_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not installed"),
]


async def _req(nc, subject: str, body=b"", headers=None, timeout: float = 2):
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    try:
        m = await nc.request(subject, data, timeout=timeout, headers=headers)
    except nats.errors.NoRespondersError:
        return "no responders"
    except nats.errors.TimeoutError:
        return "timeout"
    if m.headers and "Status" in m.headers:
        return {k: v for k, v in m.headers.items()}
    return json.loads(m.data) if m.data else {}


def _state(info: dict) -> dict:
    if "error" in info:
        return info["error"]
    return {
        "delivered": [info["delivered"]["consumer_seq"], info["delivered"]["stream_seq"]],
        "ack_floor": [info["ack_floor"]["consumer_seq"], info["ack_floor"]["stream_seq"]],
        "ack_floor_active": "last_active" in info["ack_floor"],
        "num_pending": info["num_pending"],
        "num_ack_pending": info["num_ack_pending"],
    }


async def _pull(nc, stream: str, consumer: str, body: dict, limit: int = 10) -> list:
    """(status, sequence, pending-count token of the ack subject) per message of one pull."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", json.dumps(body).encode(), reply=inbox)
    out: list = []
    try:
        while len(out) < limit:
            m = await sub.next_msg(timeout=0.5)
            status = (m.headers or {}).get("Status")
            if status:
                out.append((status,))
                if status in ("404", "408"):
                    break
                continue
            t = m.reply.split(".")
            out.append((m.reply, t[5], t[6], t[8]))
    except nats.errors.TimeoutError:
        pass
    finally:
        await sub.unsubscribe()
    return out


async def _scenario(url: str) -> list:
    nc = await nats.connect(url)
    obs: list = []
    try:
        await _req(nc, "$JS.API.STREAM.CREATE.E", {"name": "E", "subjects": ["e.>"]})
        for i in range(10):
            await _req(nc, f"e.{i % 3}", str(i).encode())
        await _req(
            nc,
            "$JS.API.CONSUMER.CREATE.E.D",
            {"stream_name": "E", "config": {"durable_name": "D", "ack_policy": "explicit"}},
        )
        got = await _pull(nc, "E", "D", {"batch": 3})
        obs.append([g[1:] for g in got])
        # A purge moves the consumer's delivered position with its ack floor.
        obs.append(await _req(nc, "$JS.API.STREAM.PURGE.E", {"seq": 6}))
        obs.append(_state(await _req(nc, "$JS.API.CONSUMER.INFO.E.D")))
        obs.append(await _req(nc, "$JS.API.STREAM.PURGE.E"))
        obs.append(_state(await _req(nc, "$JS.API.CONSUMER.INFO.E.D")))
        # An ack sent as a request to a consumer that takes no acks, or no longer exists.
        await _req(
            nc,
            "$JS.API.CONSUMER.CREATE.E.N",
            {"stream_name": "E", "config": {"durable_name": "N", "ack_policy": "none"}},
        )
        for i in range(3):
            await _req(nc, f"e.{i}", b"x")
        got = await _pull(nc, "E", "N", {"batch": 1})
        obs.append(await _req(nc, got[0][0], b"+ACK", timeout=0.5))
        await _req(nc, "$JS.API.CONSUMER.DELETE.E.D")
        obs.append(await _req(nc, "$JS.ACK.E.D.1.1.1.0.0", b"+ACK", timeout=0.5))
        obs.append((await _req(nc, "$JS.API.INFO"))["api"]["total"])
        # An ephemeral after deliveries and a purge.
        r = await _req(
            nc,
            "$JS.API.CONSUMER.CREATE.E",
            {"stream_name": "E", "config": {"ack_policy": "explicit", "inactive_threshold": 60_000_000_000}},
        )
        name = r["name"]
        obs.append(len(await _pull(nc, "E", name, {"batch": 2})))
        await _req(nc, "$JS.API.STREAM.PURGE.E")
        obs.append(_state(await _req(nc, f"$JS.API.CONSUMER.INFO.E.{name}")))
        # Deleting a message the consumer has not reached yet lowers num_pending.
        await _req(nc, "$JS.API.STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"]})
        for i in range(6):
            await _req(nc, f"p.{i % 2}", b"x")
        await _req(
            nc,
            "$JS.API.CONSUMER.CREATE.P.C",
            {"stream_name": "P", "config": {"durable_name": "C", "ack_policy": "explicit"}},
        )
        await _pull(nc, "P", "C", {"batch": 2})
        await _req(nc, "$JS.API.STREAM.MSG.DELETE.P", {"seq": 4})
        obs.append(_state(await _req(nc, "$JS.API.CONSUMER.INFO.P.C")))
        await _req(nc, "$JS.API.STREAM.PURGE.P", {"filter": "p.0"})
        obs.append(_state(await _req(nc, "$JS.API.CONSUMER.INFO.P.C")))
        await _req(nc, "$JS.API.STREAM.PURGE.P", {"keep": 1})
        obs.append(_state(await _req(nc, "$JS.API.CONSUMER.INFO.P.C")))
        obs.append([g[1:] for g in await _pull(nc, "P", "C", {"batch": 5, "no_wait": True})])
        # Batch direct gets: a negative batch sends only the end of batch.
        await _req(nc, "$JS.API.STREAM.CREATE.DG", {"name": "DG", "subjects": ["dg.>"], "allow_direct": True})
        await _req(nc, "dg.a", b"1")
        await _req(nc, "dg.b", b"2")
        obs.append(await _req(nc, "$JS.API.DIRECT.GET.DG", {"batch": -1, "seq": 1}))
        # sample_freq texts of the reference.
        for freq in ("-5%", "-5", "x%", "99999999999999999999"):
            obs.append(
                await _req(
                    nc,
                    "$JS.API.CONSUMER.CREATE.P.SF",
                    {"stream_name": "P", "config": {"durable_name": "SF", "sample_freq": freq}},
                )
            )
        api = (await _req(nc, "$JS.API.INFO"))["api"]
        api.pop("level")  # natsd advertises its own API level
        obs.append(api)
    finally:
        await nc.close()
    return obs


async def test_consumer_and_stream_state_match_reference(tmp_path):
    expected, got = await side_by_side(tmp_path, _scenario)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g == e


async def _filtered_purges(url: str) -> list:
    """A purge of one subject moves only the consumers it concerns (minimised from differential seeds)."""
    nc = await nats.connect(url)
    obs: list = []
    try:
        await _req(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.*"], "storage": "memory"})
        for name, filt in (("Y", "s.y"), ("X", "s.x"), ("ALL", None)):
            cfg: dict = {"durable_name": name, "ack_policy": "none"}
            if filt:
                cfg["filter_subject"] = filt
            await _req(nc, f"$JS.API.CONSUMER.CREATE.S.{name}", {"stream_name": "S", "config": cfg})
        await _req(nc, "s.x", b"1")
        await _req(nc, "s.x", b"2")
        await _req(nc, "s.z", b"3")
        obs.append(await _req(nc, "$JS.API.STREAM.PURGE.S", {"filter": "s.x"}))
        for name in ("Y", "X", "ALL"):
            obs.append(_state(await _req(nc, f"$JS.API.CONSUMER.INFO.S.{name}")))
        await _req(nc, "$JS.API.STREAM.CREATE.E", {"name": "E", "subjects": ["e.*"], "retention": "workqueue"})
        obs.append(await _req(nc, "$JS.API.STREAM.PURGE.E", {"seq": 1}))
        state = (await _req(nc, "$JS.API.STREAM.INFO.E", {"deleted_details": True}))["state"]
        obs.append({k: v for k, v in state.items() if not k.endswith("_ts")})
    finally:
        await nc.close()
    return obs


async def test_filtered_purges_match_reference(tmp_path):
    expected, got = await side_by_side(tmp_path, _filtered_purges)
    assert got == expected


async def test_required_api_level_values_read_as_nats_server_reads_them(tmp_path):
    """Nats-Required-Api-Level: strconv.Atoi rules ("+1", "-1" are numbers; "1 " and "x" are not;
    an empty value is no requirement), on an API request and on a request a consumer answers."""
    values = ["+1", "-1", "", "1 ", "x", "99"]

    async def observe(url):
        nc = await nats.connect(url)
        try:
            await _req(nc, "$JS.API.STREAM.CREATE.L", {"name": "L", "subjects": ["l.>"], "storage": "memory"})
            await _req(
                nc,
                "$JS.API.CONSUMER.DURABLE.CREATE.L.C",
                {"stream_name": "L", "config": {"durable_name": "C", "ack_policy": "explicit"}},
            )
            out = {}
            for v in values:
                info = await _req(nc, "$JS.API.INFO", headers={"Nats-Required-Api-Level": v})
                out["info " + repr(v)] = info.get("error", {}).get("err_code")
                nxt = await _req(
                    nc,
                    "$JS.API.CONSUMER.MSG.NEXT.L.C",
                    {"batch": 1, "no_wait": True},
                    headers={"Nats-Required-Api-Level": v},
                )
                out["next " + repr(v)] = nxt.get("Status") if isinstance(nxt, dict) else nxt
            return out
        finally:
            await nc.close()

    expected, got = await side_by_side(tmp_path, observe)
    assert got == expected
    assert expected["info '+1'"] is None and expected["info 'x'"] == 10185
