"""Differences found by differential runs against nats-server 2.15.1 (issue 25 item 4), one
side-by-side test each (reproductions: ``shared/reference/divergences-2026-12.json``)."""

from __future__ import annotations

import json

import nats
import pytest

from tests.helpers.inproc import side_by_side
from tests.helpers.servers import reference_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reference,
    pytest.mark.timeout(60),
    pytest.mark.skipif(reference_binary() is None, reason="nats-server binary not available"),
]


async def _api(nc, subject: str, body: dict | str = "") -> dict:
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    reply = json.loads((await nc.request(subject, data, timeout=5)).data)
    reply.pop("ts", None)
    return reply


def _err(reply: dict) -> object:
    return reply.get("error") or {"seq": reply.get("seq")}


async def _pub(nc, subject: str, data: bytes, headers: dict | None = None) -> object:
    return _err(json.loads((await nc.request(subject, data, headers=headers, timeout=5)).data))


async def test_an_empty_expected_last_sequence_header_is_ignored(tmp_path):
    async def observe(url):
        nc = await nats.connect(url)
        try:
            await _api(nc, "$JS.API.STREAM.CREATE.S2", {"name": "S2", "subjects": ["s2.*"], "allow_rollup_hdrs": True})
            out = [await _pub(nc, "s2.a", b"m17", {"X-User": "v", "Nats-Expected-Last-Sequence": ""})]
            out.append(await _pub(nc, "s2.a", b"m18", {"Nats-Expected-Last-Subject-Sequence": ""}))
            out.append((await _api(nc, "$JS.API.STREAM.INFO.S2"))["state"]["messages"])
            return out
        finally:
            await nc.close()

    expected, got = await side_by_side(tmp_path, observe)
    assert expected[0] == {"seq": 1}
    assert got == expected


async def test_create_of_an_existing_name_validates_the_new_config_first(tmp_path):
    async def observe(url):
        nc = await nats.connect(url)
        try:
            first = await _api(
                nc,
                "$JS.API.STREAM.CREATE.S2",
                {"name": "S2", "subjects": ["s2.>"], "retention": "workqueue", "max_msgs": 3, "discard": "new"},
            )
            again = await _api(
                nc,
                "$JS.API.STREAM.CREATE.S2",
                {
                    "name": "S2",
                    "subjects": ["s2.*.x"],
                    "retention": "limits",
                    "max_msgs": -1,
                    "max_bytes": 300,
                    "max_age": 86400000000000,
                    "republish": {"dest": "rp.x"},
                    "discard_new_per_subject": True,
                    "discard": "new",
                    "max_msgs_per_subject": 1,
                },
            )
            return "error" in first, again.get("error")
        finally:
            await nc.close()

    expected, got = await side_by_side(tmp_path, observe)
    assert expected[1]["err_code"] == 10052
    assert got == expected


async def test_a_rollup_at_max_msgs_with_discard_new_per_subject_is_refused_for_max_msgs(tmp_path):
    async def observe(url):
        nc = await nats.connect(url)
        try:
            await _api(
                nc,
                "$JS.API.STREAM.CREATE.S2",
                {
                    "name": "S2",
                    "subjects": ["s2.*", "s2.a.x"],
                    "retention": "interest",
                    "max_msgs": 2,
                    "allow_rollup_hdrs": True,
                    "discard_new_per_subject": True,
                    "discard": "new",
                    "max_msgs_per_subject": 2,
                },
            )
            await _api(
                nc,
                "$JS.API.CONSUMER.CREATE.S2",
                {
                    "stream_name": "S2",
                    "config": {"ack_policy": "none", "headers_only": True, "inactive_threshold": 600000000000},
                    "action": "create",
                },
            )
            out = [await _pub(nc, "s2.b", b"m15", {"Nats-Msg-Id": "u14"}), await _pub(nc, "s2.c", b"L" * 300)]
            out.append(await _pub(nc, "s2.a.x", b"m18", {"Nats-Rollup": "SUB"}))
            out.append(await _pub(nc, "s2.a.x", b"m19", {"Nats-Rollup": "bogus"}))
            return out
        finally:
            await nc.close()

    expected, got = await side_by_side(tmp_path, observe)
    assert expected[2]["err_code"] == 10077
    assert got == expected


async def test_a_pull_with_max_bytes_on_a_headers_only_last_per_subject_consumer(tmp_path):
    async def observe(url):
        nc = await nats.connect(url)
        try:
            await _api(
                nc,
                "$JS.API.STREAM.CREATE.S1",
                {"name": "S1", "subjects": ["s1.>"], "max_msgs": 2, "metadata": {"owner": "team"}},
            )
            await _pub(nc, "s1.b", b"m18xxxxxxxxxxxxxxxxx")
            await _pub(nc, "s1.c.y", b"m22xxxxxxxxxxxxxxxxxxx")
            await _api(
                nc,
                "$JS.API.CONSUMER.CREATE.S1.D2.s1.>",
                {
                    "stream_name": "S1",
                    "config": {
                        "ack_policy": "explicit",
                        "ack_wait": 60000000000,
                        "deliver_policy": "last_per_subject",
                        "max_ack_pending": 3,
                        "max_deliver": 2,
                        "headers_only": True,
                        "max_batch": 2,
                        "durable_name": "D2",
                        "filter_subject": "s1.>",
                    },
                },
            )
            # The consumer's start list is [1, 2]; this removes 1 (max_msgs: 2).
            await _pub(nc, "s1.b.x.z", b"m88")
            got = []

            async def pull(body: bytes) -> None:
                inbox = nc.new_inbox()
                sub = await nc.subscribe(inbox)
                await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S1.D2", body, reply=inbox)
                try:
                    while True:
                        m = await sub.next_msg(timeout=0.8)
                        hdrs = dict(m.headers or {})
                        hdrs.pop("Nats-Time-Stamp", None)
                        subject = "INBOX" if m.subject == inbox else m.subject
                        got.append((subject, m.data, sorted((str(k), v) for k, v in hdrs.items())))
                except nats.errors.TimeoutError:
                    pass
                await sub.unsubscribe()

            await pull(b'{"batch": 1, "expires": 200000000, "max_bytes": 1000}')
            await pull(b'{"batch": 2, "expires": 200000000}')
            await _pub(nc, "s1.d", b"new")
            await pull(b'{"batch": 2, "expires": 200000000}')
            info = await _api(nc, "$JS.API.CONSUMER.INFO.S1.D2")
            got.append((info["delivered"]["stream_seq"], info["num_pending"], info["num_ack_pending"]))
            return got
        finally:
            await nc.close()

    expected, got = await side_by_side(tmp_path, observe)
    assert (
        "INBOX",
        b"",
        [
            ("Header.DESCRIPTION", "Request Timeout"),
            ("Nats-Pending-Bytes", "1000"),
            ("Nats-Pending-Messages", "1"),
            ("Status", "408"),
        ],
    ) == expected[0]
    assert got == expected, (got, expected)


def _state(reply: dict) -> dict:
    st = reply.get("state") or {}
    return {k: st.get(k) for k in ("messages", "first_seq", "last_seq", "num_deleted", "num_subjects")}


@pytest.mark.parametrize("storage", ["memory", "file"])
async def test_a_limits_stream_switched_to_interest_keeps_what_nats_server_2_12_keeps(tmp_path, storage):
    """nats-server 2.12+ on ``retention: limits`` -> ``interest``: each consumer acks through
    what it had acked (removing what nobody else needs); messages no consumer matches stay."""

    async def observe(url):
        nc = await nats.connect(url)
        out = []
        try:
            for name, ttl in (("S3", True), ("S4", False), ("S5", False)):
                subjects = [f"{name.lower()}.*", f"{name.lower()}.a.x"]
                base = {
                    "name": name,
                    "subjects": subjects,
                    "storage": storage,
                    "duplicate_window": 60000000000,
                    "allow_direct": True,
                }
                await _api(nc, f"$JS.API.STREAM.CREATE.{name}", base)
                p = name.lower()
                for subj in (f"{p}.a.x", f"{p}.a.x", f"{p}.b", f"{p}.c", f"{p}.b"):
                    await _pub(nc, subj, b"m" * 20)
                if name == "S3":  # a consumer matching none of the stored messages but s3.b / s3.c
                    await _api(
                        nc,
                        "$JS.API.CONSUMER.CREATE.S3.D3",
                        {
                            "stream_name": "S3",
                            "config": {"durable_name": "D3", "filter_subject": "s3.*", "headers_only": True},
                            "action": "create",
                        },
                    )
                elif name == "S4":  # one that acked the first s4.b: it goes, the rest stays
                    await _api(
                        nc,
                        "$JS.API.CONSUMER.CREATE.S4.D4",
                        {
                            "stream_name": "S4",
                            "config": {"durable_name": "D4", "filter_subject": "s4.b", "ack_policy": "explicit"},
                        },
                    )
                    inbox = nc.new_inbox()
                    sub = await nc.subscribe(inbox)
                    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S4.D4", b'{"batch": 1}', reply=inbox)
                    m = await sub.next_msg(timeout=5)
                    await m.ack_sync(timeout=5)
                # S5: no consumer at all.
                upd = await _api(
                    nc, f"$JS.API.STREAM.UPDATE.{name}", {**base, "retention": "interest", "allow_msg_ttl": ttl}
                )
                out.append((name, "update", upd.get("error"), _state(upd)))
                await _api(nc, f"$JS.API.STREAM.PURGE.{name}", {"keep": 2})
                for subj in (f"{p}.b", f"{p}.a.x", f"{p}.c"):
                    out.append((name, subj, await _pub(nc, subj, b"later")))
                out.append((name, "info", _state(await _api(nc, f"$JS.API.STREAM.INFO.{name}"))))
            listed = await _api(nc, "$JS.API.STREAM.LIST")
            out.append(sorted((s["config"]["name"], tuple(_state(s).values())) for s in listed["streams"]))
            return out
        finally:
            await nc.close()

    expected, got = await side_by_side(tmp_path, observe)
    assert expected[0][3]["messages"] == 5  # nothing removed by the switch itself
    diffs = [(e, g) for e, g in zip(expected, got) if e != g]
    assert not diffs and len(got) == len(expected), diffs
