"""Differential regressions (natsd against nats-server 2.15.1, same script on fresh servers): the
pending count in delivered ack subjects after subject and stream rollups; last-per-subject
consumers on streams whose subjects hold fewer messages than were published; Nats-TTL values on
streams with and without per-message TTLs (an empty value is no TTL, "-1" is refused by both);
unknown consumer API subjects; the resets, snapshots and direct gets whose bodies have the wrong
shape (natsd used Python's json there)."""

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
        return {"status": m.headers["Status"], "description": m.headers.get("Description")}
    out = json.loads(m.data) if m.data else {}
    if isinstance(out, dict):
        for k in ("created", "ts", "cluster", "config", "delivered", "ack_floor", "last_active"):
            out.pop(k, None)
    return out


async def _pull(nc, stream: str, consumer: str, body: dict) -> list:
    """Per message: (stream seq, pending token of its ack subject); statuses as they are."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", json.dumps(body).encode(), reply=inbox)
    out: list = []
    try:
        while len(out) < 10:
            m = await sub.next_msg(timeout=1)
            status = (m.headers or {}).get("Status")
            if status:
                out.append(status)
                break
            t = m.reply.split(".")
            out.append((t[5], t[8]))
    except nats.errors.TimeoutError:
        out.append("timeout")
    finally:
        await sub.unsubscribe()
    return out


async def _replay(tmp_path, ops: list) -> tuple[list, list]:
    """Both servers' observations of a differential script; a difference is checked once more on
    fresh servers, as the differential test does (the reference settles some things on its own
    goroutines, which a loaded machine can delay past a no-wait pull)."""
    from tests.helpers.differential import run_script

    expected, got = await side_by_side(tmp_path / "1", lambda url: run_script(url, ops))
    if expected != got:
        expected, got = await side_by_side(tmp_path / "2", lambda url: run_script(url, ops))
    return expected, got


async def _rollups_and_last_per_subject(url: str) -> list:
    nc = await nats.connect(url)
    obs: list = []
    try:
        await _req(nc, "$JS.API.STREAM.CREATE.R", {"name": "R", "subjects": ["r.>"], "allow_rollup_hdrs": True})
        for subject in ("r.x", "r.y", "r.x", "r.y"):
            await _req(nc, subject, b"1")
        await _req(
            nc,
            "$JS.API.CONSUMER.CREATE.R.C",
            {"stream_name": "R", "config": {"durable_name": "C", "ack_policy": "explicit"}},
        )
        obs.append(await _pull(nc, "R", "C", {"batch": 1, "no_wait": True}))
        obs.append(await _req(nc, "r.x", b"2", headers={"Nats-Rollup": "sub"}))
        obs.append(await _pull(nc, "R", "C", {"batch": 5, "no_wait": True}))
        obs.append(await _req(nc, "r.z", b"3", headers={"Nats-Rollup": "all"}))
        await _req(nc, "r.y", b"4")
        obs.append(await _pull(nc, "R", "C", {"batch": 5, "no_wait": True}))
        obs.append(await _req(nc, "$JS.API.CONSUMER.INFO.R.C"))
        # last per subject: two subjects, each holding one message of the several published
        await _req(nc, "$JS.API.STREAM.CREATE.L", {"name": "L", "subjects": ["l.*"], "max_msgs_per_subject": 1})
        for subject in ("l.a", "l.b", "l.a", "l.b"):
            await _req(nc, subject, b"1")
        obs.append(
            await _req(
                nc,
                "$JS.API.CONSUMER.CREATE.L.C",
                {
                    "stream_name": "L",
                    "config": {
                        "durable_name": "C",
                        "ack_policy": "explicit",
                        "deliver_policy": "last_per_subject",
                        "filter_subject": "l.*",
                    },
                },
            )
        )
        obs.append(await _pull(nc, "L", "C", {"batch": 5, "no_wait": True}))
        obs.append(await _pull(nc, "L", "C", {"batch": 5, "no_wait": True}))
        await _req(nc, "$JS.API.STREAM.CREATE.M", {"name": "M", "subjects": ["m.*"]})
        for subject in ("m.a", "m.a", "m.a", "m.b"):
            await _req(nc, subject, b"1")
        await _req(nc, "$JS.API.STREAM.PURGE.M", {"seq": 3})
        obs.append(
            await _req(
                nc,
                "$JS.API.CONSUMER.CREATE.M.C",
                {
                    "stream_name": "M",
                    "config": {
                        "durable_name": "C",
                        "ack_policy": "explicit",
                        "deliver_policy": "last_per_subject",
                        "filter_subject": "m.*",
                    },
                },
            )
        )
        obs.append(await _pull(nc, "M", "C", {"batch": 5, "no_wait": True}))
    finally:
        await nc.close()
    return obs


async def test_rollups_and_last_per_subject_match_reference(tmp_path) -> None:
    expected, got = await side_by_side(tmp_path, _rollups_and_last_per_subject)
    assert got == expected
    assert expected[2][-1] == "404" and expected[7][-1] == "404"  # the script exercised what it means to


async def _ttls(url: str) -> list:
    nc = await nats.connect(url)
    obs: list = []
    try:
        for allow in (False, True):
            name = "TA" if allow else "TN"
            await _req(
                nc,
                f"$JS.API.STREAM.CREATE.{name}",
                {"name": name, "subjects": [name.lower() + ".>"], "allow_msg_ttl": allow},
            )
            for ttl in ("", "-1", "never", "0", "1", "1s", "500ms", "x"):
                obs.append((allow, ttl, await _req(nc, name.lower() + ".a", b"x", headers={"Nats-TTL": ttl})))
        # an interest stream without consumers skips the message before reading its TTL (seed 735)
        await _req(nc, "$JS.API.STREAM.CREATE.I", {"name": "I", "subjects": ["i.>"], "retention": "interest"})
        for ttl in ("x", "-1", "1s"):
            obs.append(("interest", ttl, await _req(nc, "i.a", b"x", headers={"Nats-TTL": ttl})))
    finally:
        await nc.close()
    return obs


async def test_message_ttl_header_values_match_reference(tmp_path) -> None:
    expected, got = await side_by_side(tmp_path, _ttls)
    assert got == expected
    assert expected[0] == (False, "", {"stream": "TN", "seq": 1})  # an empty Nats-TTL is no TTL


async def _bodies(url: str) -> list:
    nc = await nats.connect(url)
    obs: list = []
    try:
        await _req(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"], "allow_direct": True})
        await _req(nc, "s.a", b"1")
        await _req(
            nc,
            "$JS.API.CONSUMER.CREATE.S.D",
            {"stream_name": "S", "config": {"durable_name": "D", "ack_policy": "explicit"}},
        )
        for body in (b"{", b" ", b"[1]", b'{"seq":"x"}', b'{"seq":1,"foo":1}'):
            r = await _req(nc, "$JS.API.CONSUMER.RESET.S.D", body)
            obs.append(("reset", body, r.get("error", r.get("reset_seq"))))
        for body in (
            b'{"seq":true}',
            b'{"last_by_subj":5}',
            b'{"multi_last":"s.a"}',
            b'{"start_time":"x"}',
            b'{"seq":1,"foo":1}',
        ):
            r = await _req(nc, "$JS.API.DIRECT.GET.S", body)
            obs.append(("direct", body, r.get("status") if isinstance(r, dict) else r))
        for body in (b" ", b'{"deliver_subject":5}', b'{"foo":1}', b"true"):
            obs.append(("snapshot", body, (await _req(nc, "$JS.API.STREAM.SNAPSHOT.S", body)).get("error")))
        for subject in ("$JS.API.CONSUMER.FOO.S1", "$JS.API.META.LEADER.STEPDOWN", "$JS.API.ACCOUNT.PURGE.A"):
            obs.append((subject, await _req(nc, subject, b"", timeout=0.5)))
    finally:
        await nc.close()
    return obs


async def test_reset_direct_get_and_snapshot_bodies_match_reference(tmp_path) -> None:
    expected, got = await side_by_side(tmp_path, _bodies)
    assert got == expected


@pytest.mark.parametrize("retention", ["limits", "workqueue", "interest"])
async def test_purge_of_a_pending_message_in_the_middle_matches_reference(tmp_path, retention) -> None:
    """Minimised from differential seed 259: a consumer wider than the purged subject, with the
    purged message pending between two others. nats-server drops it from pending and raises the
    ack floor's consumer sequence past it (its stream sequence stays); natsd used to terminate it
    as a single delete, leaving the floor. Then rollups remove pending messages, where INFO shows
    the reference's store floor."""
    ops = [
        [
            "api",
            "$JS.API.STREAM.CREATE.S1",
            {"name": "S1", "subjects": ["s1.>"], "retention": retention, "allow_rollup_hdrs": True},
        ],
        ["pub", "s1.b", {}, "m1"],
        ["pub", "s1.c.d", {}, "m2"],
        ["pub", "s1.e", {}, "m3"],
        [
            "api",
            "$JS.API.CONSUMER.CREATE.S1.C",
            {"stream_name": "S1", "config": {"ack_policy": "explicit", "durable_name": "C"}},
        ],
        ["pull", "S1", "C", 3],
        ["api", "$JS.API.STREAM.PURGE.S1", {"filter": "s1.c.d"}],
        ["api", "$JS.API.CONSUMER.INFO.S1.C", ""],
        ["ack", 0, "+ACK"],
        ["api", "$JS.API.CONSUMER.INFO.S1.C", ""],
        ["api", "$JS.API.STREAM.INFO.S1", ""],
        # a subject rollup that removes the last pending message: the store's floor shows
        ["pub", "s1.f", {}, "m5"],
        ["pull", "S1", "C", 1],
        ["pub", "s1.f", {"Nats-Rollup": "sub"}, "m6"],
        ["api", "$JS.API.CONSUMER.INFO.S1.C", ""],
    ]
    expected, got = await _replay(tmp_path, ops)
    assert got == expected
    if retention != "interest":  # (an interest stream also drops what no consumer needs)
        assert expected[7]["ack_floor"] == {"consumer_seq": 2, "stream_seq": 0}


async def test_nak_then_purge_below_the_next_delivery_matches_reference(tmp_path) -> None:
    """The issue's "no_wait pull returning a message where the reference answers 404", minimised
    from differential seed 305: a NAKed message the purge keeps leaves the redelivery queue (it
    stays pending until its ack wait), so the next no-wait pull finds nothing."""
    ops = [
        ["api", "$JS.API.STREAM.CREATE.S1", {"name": "S1", "subjects": ["s1.>"]}],
        ["pub", "s1.a", {}, "m1"],
        ["pub", "s1.b", {}, "m2"],
        ["pub", "s1.c", {}, "m3"],
        [
            "api",
            "$JS.API.CONSUMER.CREATE.S1.C",
            {"stream_name": "S1", "config": {"ack_policy": "explicit", "durable_name": "C"}},
        ],
        ["pull", "S1", "C", 3],
        ["ack", 1, "-NAK"],
        ["api", "$JS.API.STREAM.PURGE.S1", {"seq": 2}],
        ["pull", "S1", "C", 2],
        ["api", "$JS.API.CONSUMER.INFO.S1.C", ""],
    ]
    expected, got = await _replay(tmp_path, ops)
    assert got == expected
    assert expected[8] == [{"status": "404"}]


async def test_purge_reports_the_search_position_as_delivered(tmp_path) -> None:
    """Minimised from differential seed 349: a filtered consumer whose last pull searched past a
    message it does not take; a purge then reports that position as delivered, as nats-server
    writes its next-to-look-at sequence on a purge (natsd kept the last delivered one)."""
    ops = [
        ["api", "$JS.API.STREAM.CREATE.S2", {"name": "S2", "subjects": ["s2.>"]}],
        ["pub", "s2.x", {}, "a"],
        ["pub", "s2.x", {}, "b"],
        ["pub", "s2.y", {}, "c"],
        [
            "api",
            "$JS.API.CONSUMER.CREATE.S2.C",
            {"stream_name": "S2", "config": {"ack_policy": "all", "durable_name": "C", "filter_subject": "s2.x"}},
        ],
        ["pull", "S2", "C", 5],
        ["pub", "s2.y", {}, "d"],
        ["api", "$JS.API.CONSUMER.INFO.S2.C", ""],
        ["api", "$JS.API.STREAM.PURGE.S2", {"seq": 3}],
        ["api", "$JS.API.CONSUMER.INFO.S2.C", ""],
    ]
    expected, got = await _replay(tmp_path, ops)
    assert got == expected
    assert expected[9]["delivered"] == {"consumer_seq": 2, "stream_seq": 3}


async def test_ack_all_floor_after_a_purge_drops_a_pending_message_matches_reference(tmp_path) -> None:
    """Minimised from differential seed 454: under AckAll, a purge that removes a pending message
    between two others shows that message's sequences as the ack floor (nats-server's store floor)."""
    ops = [
        ["api", "$JS.API.STREAM.CREATE.S2", {"name": "S2", "subjects": ["s2.>"]}],
        ["pub", "s2.y", {}, "a"],
        ["pub", "s2.x", {}, "b"],
        ["pub", "s2.z", {}, "c"],
        [
            "api",
            "$JS.API.CONSUMER.CREATE.S2.C1",
            {"stream_name": "S2", "config": {"ack_policy": "all", "durable_name": "C1"}},
        ],
        ["pull", "S2", "C1", 3],
        ["api", "$JS.API.STREAM.PURGE.S2", {"filter": "s2.x"}],
        ["api", "$JS.API.CONSUMER.INFO.S2.C1", ""],
        ["pub", "s2.x", {}, "d"],
        ["pull", "S2", "C1", 3],
        ["ack", 0, "+ACK"],
        ["api", "$JS.API.CONSUMER.INFO.S2.C1", ""],
        ["ack", 3, "+ACK"],
        ["api", "$JS.API.CONSUMER.INFO.S2.C1", ""],
    ]
    expected, got = await _replay(tmp_path, ops)
    assert got == expected
    assert expected[7]["ack_floor"] == {"consumer_seq": 2, "stream_seq": 2}


async def test_interest_streams_last_consumer_and_single_message_rollups_match_reference(tmp_path) -> None:
    """Minimised from differential seeds 514 and 537: the last consumer of an interest stream
    leaving purges it (first_seq moves past the last, even empty; a workqueue stream keeps its
    messages); a subject rollup that removes one message leaves num_pending counted once."""
    ops = [
        ["api", "$JS.API.STREAM.CREATE.S2", {"name": "S2", "subjects": ["s2.>"], "retention": "interest"}],
        [
            "api",
            "$JS.API.CONSUMER.CREATE.S2.C",
            {"stream_name": "S2", "config": {"ack_policy": "explicit", "durable_name": "C", "filter_subject": "s2.a"}},
        ],
        ["pub", "s2.a", {}, "1"],
        ["pub", "s2.b", {}, "2"],
        ["api", "$JS.API.CONSUMER.DELETE.S2.C", ""],
        ["api", "$JS.API.STREAM.INFO.S2", ""],
        [
            "api",
            "$JS.API.STREAM.CREATE.S1",
            {"name": "S1", "subjects": ["s1.>"], "retention": "interest", "storage": "memory"},
        ],
        ["push", "S1", {"ack_policy": "explicit", "inactive_threshold": 120000000000}],
        ["api", "$JS.API.STREAM.INFO.S1", ""],
        ["api", "$JS.API.STREAM.CREATE.S3", {"name": "S3", "subjects": ["s3.>"], "retention": "workqueue"}],
        [
            "api",
            "$JS.API.CONSUMER.CREATE.S3.C",
            {"stream_name": "S3", "config": {"ack_policy": "explicit", "durable_name": "C"}},
        ],
        ["pub", "s3.a", {}, "1"],
        ["api", "$JS.API.CONSUMER.DELETE.S3.C", ""],
        ["api", "$JS.API.STREAM.INFO.S3", ""],
        [
            "api",
            "$JS.API.STREAM.CREATE.S4",
            {"name": "S4", "subjects": ["s4.>"], "retention": "interest", "max_msgs": 3, "allow_rollup_hdrs": True},
        ],
        [
            "api",
            "$JS.API.CONSUMER.CREATE.S4.C",
            {"stream_name": "S4", "config": {"ack_policy": "explicit", "durable_name": "C"}},
        ],
        ["pub", "s4.x", {}, "a"],
        ["pub", "s4.y", {}, "b"],
        ["pub", "s4.y", {"Nats-Rollup": "sub"}, "c"],
        ["api", "$JS.API.CONSUMER.INFO.S4.C", ""],
    ]
    expected, got = await _replay(tmp_path, ops)
    assert got == expected
    assert expected[5]["state"]["first_seq"] == 3 and expected[8]["state"]["first_seq"] == 1
    assert expected[-1]["num_pending"] == 2
