"""Bursts of asynchronous JetStream publishes over many subjects (a reply each: the parser's
``OP_PUB_RUN`` with replies -> ``router.route_run`` -> ``Stream.process_rrun(None, run)`` ->
``natsd.jetstream.stream.subjectrun`` -> one ``store_many``). Over real sockets natsd answers
every message exactly as nats-server does, and byte for byte as its own message-by-message
path (a pedantic connection, whose PUBs are checked one at a time): PubAcks in order, limit
refusals inside a run (per subject with discard new, max_msgs with discard new), discard-old
limits, a subject no stream captures in the middle of a run (no responders), two streams
alternating within one run, streams with checks before storing (max_msg_size, a subject
transform, interest retention); the streams then hold what nats-server's hold."""

from __future__ import annotations

import asyncio
import base64

import pytest

from natsd.jetstream.stream.core import Stream
from tests.helpers.inproc import running_server, side_by_side
from tests.integration.test_js_publish_reply_runs_reference import _api, _Conn

pytestmark = [pytest.mark.integration, pytest.mark.reference, pytest.mark.timeout(120)]

STREAMS = [
    {"name": "A", "subjects": ["a.>"]},
    {"name": "D", "subjects": ["d.>"]},
    {"name": "P", "subjects": ["p.>"], "max_msgs_per_subject": 2, "discard": "new", "discard_new_per_subject": True},
    {"name": "N", "subjects": ["n.>"], "max_msgs": 5, "discard": "new"},
    {"name": "O", "subjects": ["o.>"], "max_msgs": 40, "max_msgs_per_subject": 3},
    # streams with something to check first (message by message inside the run's batch)
    {"name": "M", "subjects": ["m.>"], "max_msg_size": 20},
    {
        "name": "T",
        "subjects": ["t.>"],
        "subject_transform": {"src": "t.*.*", "dest": "tt.{{wildcard(2)}}.{{wildcard(1)}}"},
    },
    {"name": "I", "subjects": ["i.>"], "retention": "interest"},
]


def _run(subjects: list[bytes], first: int, payload: bytes = b"v" * 24) -> bytes:
    """PUBs to ``subjects`` in order, each with its own fixed-width reply (one run)."""
    return b"".join(
        b"PUB %s _INBOX.t.%08d %d\r\n%s\r\n" % (s, first + i, len(payload), payload) for i, s in enumerate(subjects)
    )


def _bursts() -> list[tuple[str, list[bytes]]]:
    mixed = [b"a.m.%d" % i for i in range(40)] + [b"nobody.%d" % i for i in range(3)]
    mixed += [b"d.m.%d" % i for i in range(30)] + [b"a.m.%d" % i for i in range(20)]
    mixed += [b"nobody.x"] + [b"d.m.%d" % (i % 7) for i in range(25)]
    return [
        ("plain", [b"a.dev%d.ev%d" % (i % 200, i % 5) for i in range(600)]),
        ("big", [b"a.big.%d" % (i % 1000) for i in range(3000)]),
        ("mixed", mixed),
        ("per_subject_new", [b"p.%d" % ((i * 7) % 9 if i < 30 else i) for i in range(45)]),
        ("max_msgs_new", [b"n.%d" % i for i in range(12)]),
        ("discard_old", [b"o.%d" % (i % 11) for i in range(120)]),
        ("too_big", [b"m.%d" % i for i in range(10)]),
        ("transform", [b"t.%d.%d" % (i % 4, i % 3) for i in range(30)]),
        ("interest", [b"i.%d" % i for i in range(10)] + [b"a.i.%d" % i for i in range(10)]),
    ]


async def _observe(url: str, pedantic: bool = False) -> dict:
    host, port = url.removeprefix("nats://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    await reader.readline()  # INFO
    c = _Conn(reader, writer)
    writer.write(
        b'CONNECT {"verbose":false,"pedantic":%s,"headers":true,"no_responders":true,"protocol":1}\r\n'
        b"SUB _INBOX.t.* 1\r\nPING\r\n" % (b"true" if pedantic else b"false")
    )
    await reader.readuntil(b"PONG\r\n")
    out: dict = {}
    for cfg in STREAMS:
        created = await _api(c, f"$JS.API.STREAM.CREATE.{cfg['name']}", cfg)
        assert "error" not in created, created
    first = 0
    for name, subjects in _bursts():
        writer.write(_run(subjects, first))
        first += len(subjects)
        out[name] = await c.frames(len(subjects))
    for cfg in STREAMS:
        name = cfg["name"]
        st = (await _api(c, f"$JS.API.STREAM.INFO.{name}", {}))["state"]
        out[f"state {name}"] = (st["messages"], st["bytes"], st["first_seq"], st["last_seq"], st.get("num_subjects"))
        for seq in range(st["first_seq"], st["last_seq"] + 1, max(1, st["messages"] // 7)):
            m = (await _api(c, f"$JS.API.STREAM.MSG.GET.{name}", {"seq": seq})).get("message", {})
            out[f"msg {name} {seq}"] = (m.get("subject"), base64.b64decode(m.get("data", "")))
    writer.close()
    return out


def _per_stream(frames: object) -> object:
    """A burst's answers, each stream's in the order sent, and the others (no responders) by
    reply: how two streams' PubAcks interleave is not an order either server keeps (each
    nats-server stream answers from its own goroutine)."""
    if not isinstance(frames, list):
        return frames
    out: dict = {}
    for reply, hdr, body in frames:
        key = body.get("stream") if isinstance(body, dict) else None
        out.setdefault(key or reply, []).append((reply, hdr, body))
    return out


def _count_runs(monkeypatch) -> list[int]:
    """Lengths of the many-subject runs streams are handed (``process_rrun(None, run)``)."""
    runs: list[int] = []
    real = Stream.process_rrun

    def process_rrun(self, subject, run):
        if subject is None:
            runs.append(len(run))
        real(self, subject, run)

    monkeypatch.setattr(Stream, "process_rrun", process_rrun)
    return runs


async def test_runs_over_many_subjects_are_answered_as_nats_server_does(tmp_path, monkeypatch):
    runs = _count_runs(monkeypatch)
    ref, got = await side_by_side(tmp_path, _observe)
    assert got.keys() == ref.keys()
    for k in ref:
        assert _per_stream(got[k]) == _per_stream(ref[k]), k
    # (the cases are exercised)
    assert ref["per_subject_new"][20][2]["error"]["err_code"] == 10077
    assert ref["max_msgs_new"][6][2]["error"]["err_code"] == 10077
    assert [f[0] for f in ref["mixed"] if f[1].startswith(b"NATS/1.0 503")] == [
        "_INBOX.t.%08d" % i for i in (3640, 3641, 3642, 3693)
    ]
    assert ref["state O"][0] == 11 * 3
    assert ref["too_big"][0][2]["error"]["err_code"] == 10054
    assert ref["msg T 1"][0] == "tt.0.0" and ref["state T"][4] == 12
    # natsd took the bursts as runs
    assert sum(runs) > 3000 and max(runs) > 100


async def test_runs_over_many_subjects_equal_the_message_by_message_path(monkeypatch):
    runs = _count_runs(monkeypatch)
    async with running_server(jetstream=True) as server:
        fast = await _observe(server.client_url)
    taken = sum(runs)
    async with running_server(jetstream=True) as server:
        slow = await _observe(server.client_url, pedantic=True)
    assert taken > 3000 and sum(runs) == taken  # (the pedantic connection took none)
    assert fast.keys() == slow.keys()
    for k in fast:
        assert fast[k] == slow[k], k
